"""The simulated fabric tools across real simulated nodes: nccl-tests under the real Open MPI mpirun (over
node-to-node SSH) and the real srun, perftest as a server/client pair on two nodes; all parsed by the
project's parsers. One perf-faults cluster (4 nodes) for the whole module."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from clustereval.parsers import nccl_tests, perftest
from tests.integration.simrun import REQUIRES_SIM, simulated_cluster

pytestmark = [*REQUIRES_SIM,
              pytest.mark.skipif(shutil.which("mpirun") is None, reason="openmpi-bin is not installed")]


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    with simulated_cluster(tmp_path_factory.mktemp("sim-fabric"), 4, "perf-faults") as directory:
        yield directory


def address(sim: Path, node: str) -> str:
    return json.loads((sim / "nodes" / node / "boot.json").read_text())["address"]


def on(sim: Path, node: str, command: str, timeout: float = 30) -> subprocess.CompletedProcess:
    return subprocess.run(["ssh", "-i", str(sim / "ssh" / "id_ed25519"), "-o", "StrictHostKeyChecking=no",
                           "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR", "-o", "BatchMode=yes",
                           f"root@{address(sim, node)}", command], capture_output=True, text=True, timeout=timeout)


def test_mpirun_across_two_nodes(sim):
    hosts = f"{address(sim, 'node1')}:1,{address(sim, 'node3')}:1"
    proc = on(sim, "node1", f"mpirun --allow-run-as-root -np 2 -H {hosts} all_reduce_perf -b 8 -e 1G -f 2 -g 8")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    parsed = nccl_tests.parse(proc.stdout)
    assert parsed["complete"] and parsed["nranks"] == 16 and parsed["hosts"] == ["node1", "node3"]
    assert 150 < parsed["max_busbw_gbps"] < 200  # node3: NVLink at 40 % paces the intra-node ring steps


def test_mpirun_with_the_bad_rail_node(sim):
    hosts = f"{address(sim, 'node1')}:1,{address(sim, 'node2')}:1"
    proc = on(sim, "node1", f"mpirun --allow-run-as-root -np 2 -H {hosts} -x NCCL_DEBUG=INFO "
                            "all_reduce_perf -b 1G -e 1G -g 8")
    parsed = nccl_tests.parse(proc.stdout)
    assert parsed["max_busbw_gbps"] < 110 and parsed["nccl_log_lines"] > 10


def test_srun_four_nodes_single_node_nvlink_degraded(sim):
    proc = on(sim, "node1", "srun -N 2 -w node1,node4 --ntasks-per-node=1 all_reduce_perf -b 64M -e 1G -f 2 -g 8")
    assert proc.returncode == 0, proc.stderr[-2000:]
    parsed = nccl_tests.parse(proc.stdout)
    assert parsed["nranks"] == 16 and parsed["hosts"] == ["node1", "node4"]
    busbw = [r["busbw_gbps"] for r in parsed["rows"]]
    assert busbw[1] < 0.6 * busbw[0]  # node4's jagged curve
    single = nccl_tests.parse(on(sim, "node3", "all_reduce_perf -b 1G -e 1G -g 8").stdout)
    assert single["max_busbw_gbps"] < 200


def test_hang_is_bounded_by_the_caller(sim):
    started = time.monotonic()
    proc = on(sim, "node3", "timeout 3 all_gather_perf -b 1M -e 1G -f 2 -g 8")
    assert proc.returncode == 124 and time.monotonic() - started < 10
    assert nccl_tests.parse(proc.stdout)["rows"][-1]["size_bytes"] == 32 * 1024 * 1024


def test_perftest_pair_across_nodes(sim):
    server = subprocess.Popen(["ssh", "-i", str(sim / "ssh" / "id_ed25519"), "-o", "StrictHostKeyChecking=no",
                               "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR",
                               f"root@{address(sim, 'node2')}", "timeout 20 ib_write_bw -d mlx5_3 --report_gbits"],
                              stdout=subprocess.PIPE, text=True)
    client = None
    for _ in range(50):
        client = on(sim, "node1", f"ib_write_bw -d mlx5_3 --report_gbits {address(sim, 'node2')}")
        if "Couldn't connect" not in client.stdout:
            break
        time.sleep(0.1)
    server_out = server.communicate(timeout=25)[0]
    assert client.returncode == 0, client.stdout
    for text in (client.stdout, server_out):
        rows = perftest.parse(text)["rows"]
        assert rows and max(r["bw_avg_gbitps"] for r in rows) < 110  # node2's mlx5_3 at a quarter
    missing = on(sim, "node1", f"ib_write_bw {address(sim, 'node4')}")
    assert missing.returncode == 1 and "Couldn't connect to" in missing.stdout
