"""The simulated fabric tools (nccl-tests, perftest, nvbandwidth shims) print what the project's parsers read,
with figures from the profile: healthy reference vs each fault of the perf-faults profile."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from clustereval.parsers import nccl_tests, nvbandwidth, perftest
from clustereval.sim.cluster import SHIM_LAUNCHER, SHIM_SOURCES, SHIMS
from clustereval.sim.profile import ProfileError, load_profile, render_node

TOOLS = [t for t, m in SHIMS.items() if m in ("nccl_tests.py", "perftest.py", "nvbandwidth.py")]


def launchers(d: Path, tools: list[str]) -> Path:
    """``d`` with the launcher of every shim in ``tools`` (run by this interpreter), as a node's /sim/bin."""
    for tool in tools:
        (d / tool).write_text(SHIM_LAUNCHER.format(lib=str(SHIM_SOURCES), module=SHIMS[tool][:-3])
                              .replace("#!/usr/bin/python3 -IS", f"#!{sys.executable} -IS"))
        (d / tool).chmod(0o755)
    return d


@pytest.fixture(scope="module")
def bindir(tmp_path_factory) -> Path:
    return launchers(tmp_path_factory.mktemp("bin"), TOOLS)


def make_node(tmp: Path, profile: str, node: str, address: str = "127.0.0.1", **fabric) -> Path:
    """A node's /sim (node.json, provider.json) and boot.json under a fake cluster dir ``tmp``."""
    prof = load_profile(profile)
    if fabric:
        prof["cluster"].setdefault("fabric", {}).update(fabric)
    nd = tmp / "nodes" / node
    root = nd / "root"
    root.mkdir(parents=True, exist_ok=True)
    (root / "node.json").write_text(json.dumps(render_node(prof, node)))
    (root / "provider.json").write_text(json.dumps({"ground_truth": str(nd / "ground-truth.jsonl")}))
    (nd / "boot.json").write_text(json.dumps({"address": address}))
    return root


def run(bindir: Path, root: Path, *argv: str, env: dict | None = None,
        timeout: float = 20) -> subprocess.CompletedProcess:
    return subprocess.run([str(bindir / argv[0]), *argv[1:]], capture_output=True, text=True, timeout=timeout,
                          env={"PATH": os.environ["PATH"], "SIMNODE_ROOT": str(root), **(env or {})})


def test_every_fabric_tool_is_registered():
    assert {"all_reduce_perf", "all_gather_perf", "reduce_scatter_perf", "alltoall_perf", "sendrecv_perf",
            "ib_write_bw", "ib_read_bw", "ib_write_lat", "ib_read_lat", "nvbandwidth"} <= set(SHIMS)


def test_single_node_all_reduce_parses_and_plateaus_on_nvlink(bindir, tmp_path):
    root = make_node(tmp_path, "reference", "node1")
    proc = run(bindir, root, "all_reduce_perf", "-b", "8", "-e", "8G", "-f", "2", "-g", "8")
    assert proc.returncode == 0, proc.stderr
    parsed = nccl_tests.parse(proc.stdout)
    assert parsed["complete"] and parsed["concluded"] and parsed["collective"] == "all_reduce_perf"
    assert parsed["nranks"] == 8 and parsed["tests_version"] == "2.17.6" and parsed["nccl_version"].startswith("2.27")
    assert [d["bus_id"] for d in parsed["devices"]][:2] == ["0000:19:00", "0000:3b:00"]
    assert len(parsed["rows"]) == 31 and parsed["wrong_total"] == 0 and parsed["out_of_bounds_ok"]
    assert 440 < parsed["max_busbw_gbps"] < 500
    assert parsed["rows"][0]["busbw_gbps"] < 1  # latency-bound
    row = parsed["rows"][-1]
    assert row["algbw_gbps"] == pytest.approx(row["size_bytes"] / row["time_us"] / 1e3, rel=0.01)
    assert row["busbw_gbps"] == pytest.approx(row["algbw_gbps"] * 2 * 7 / 8, rel=0.01)
    assert "# nccl-tests version 2.17.6 nccl-headers=22707 nccl-library=22707" in proc.stdout
    assert "#  Rank  0 Group  0 Pid" in proc.stdout


@pytest.mark.parametrize("tool,factor", [("all_gather_perf", 7 / 8), ("reduce_scatter_perf", 7 / 8),
                                         ("alltoall_perf", 7 / 8), ("sendrecv_perf", 1.0)])
def test_other_collectives(bindir, tmp_path, tool, factor):
    root = make_node(tmp_path, "reference", "node1")
    parsed = nccl_tests.parse(run(bindir, root, tool, "-b", "1M", "-e", "1G", "-f", "4", "-g", "8").stdout)
    assert parsed["complete"] and parsed["collective"] == tool
    row = parsed["rows"][-1]
    assert row["busbw_gbps"] == pytest.approx(row["algbw_gbps"] * factor, rel=0.02)
    if tool in ("all_gather_perf", "alltoall_perf", "reduce_scatter_perf"):
        assert row["count"] * 4 * 8 == row["size_bytes"]


def test_environment_like_nccl(bindir, tmp_path):
    root = make_node(tmp_path, "reference", "node1")
    args = ("all_reduce_perf", "-b", "1G", "-e", "1G", "-g", "8")
    healthy = nccl_tests.parse(run(bindir, root, *args).stdout)["max_busbw_gbps"]
    nics = nccl_tests.parse(run(bindir, root, *args, env={"NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1"})
                            .stdout)["max_busbw_gbps"]
    assert nics < 400 < healthy
    one_rail = nccl_tests.parse(run(bindir, root, *args, env={"NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1",
                                                              "NCCL_IB_HCA": "=mlx5_0"}).stdout)["max_busbw_gbps"]
    assert one_rail < 60
    debug = run(bindir, root, *args, env={"NCCL_DEBUG": "INFO"}).stdout
    assert nccl_tests.parse(debug)["nccl_log_lines"] > 5 and "NCCL INFO NET/IB : Using [0]mlx5_0:1/IB" in debug
    nvls_root = make_node(tmp_path / "nvls", "reference", "node1", nvls_busbw_gbps=600)
    nvls = nccl_tests.parse(run(bindir, nvls_root, *args).stdout)["max_busbw_gbps"]
    off = nccl_tests.parse(run(bindir, nvls_root, *args, env={"NCCL_NVLS_ENABLE": "0"}).stdout)["max_busbw_gbps"]
    assert nvls > 550 and off < 500


def test_no_check_prints_na_and_too_many_gpus_fails(bindir, tmp_path):
    root = make_node(tmp_path, "reference", "node1")
    parsed = nccl_tests.parse(run(bindir, root, "all_reduce_perf", "-b", "8", "-e", "64", "-c", "0").stdout)
    assert parsed["rows"][0]["wrong"] is None
    proc = run(bindir, root, "all_reduce_perf", "-g", "9")
    assert proc.returncode != 0 and "Invalid number of GPUs: 9 requested but only 8 were found." in proc.stderr


def test_nvlink_degraded_node(bindir, tmp_path):
    root = make_node(tmp_path, "perf-faults", "node3")
    parsed = nccl_tests.parse(run(bindir, root, "all_reduce_perf", "-b", "1G", "-e", "1G", "-g", "8").stdout)
    assert parsed["max_busbw_gbps"] < 200


def test_hang_prints_rows_up_to_the_size_then_blocks(bindir, tmp_path):
    root = make_node(tmp_path, "perf-faults", "node3")
    proc = subprocess.Popen([str(bindir / "all_gather_perf"), "-b", "1M", "-e", "1G", "-f", "2", "-g", "8"],
                            stdout=subprocess.PIPE, text=True, env={"SIMNODE_ROOT": str(root)})
    time.sleep(1.5)
    assert proc.poll() is None
    proc.kill()
    text = proc.communicate()[0]
    parsed = nccl_tests.parse(text)
    assert not parsed["complete"] and parsed["rows"][-1]["size_bytes"] == 32 * 1024 * 1024


def test_jagged_and_wrong(bindir, tmp_path):
    root = make_node(tmp_path, "perf-faults", "node4")
    rows = nccl_tests.parse(run(bindir, root, "all_reduce_perf", "-b", "64M", "-e", "1G", "-f", "2", "-g", "8")
                            .stdout)["rows"]
    busbw = [r["busbw_gbps"] for r in rows]
    assert busbw[1] < 0.6 * busbw[0] and busbw[3] < 0.6 * busbw[2]
    parsed = nccl_tests.parse(run(bindir, root, "reduce_scatter_perf", "-b", "1M", "-e", "64M", "-f", "2", "-g",
                                  "8").stdout)
    assert parsed["rows_with_wrong"] == 3 and parsed["rows"][0]["wrong"] == 0


def srun_env(job: str, rank: int, n: int) -> dict:
    return {"SLURM_JOB_ID": job, "SLURM_STEP_ID": "0", "SLURM_PROCID": str(rank), "SLURM_NTASKS": str(n),
            "SLURM_LOCALID": "0", "SIMNODE_NCCL_BOOTSTRAP_TIMEOUT_S": "3"}


def multi(bindir, tmp_path, profile, nodes, *argv, job="7"):
    procs = []
    for rank, node in enumerate(nodes):
        root = make_node(tmp_path, profile, node)
        procs.append(subprocess.Popen([str(bindir / argv[0]), *argv[1:]], stdout=subprocess.PIPE, text=True,
                                      env={"SIMNODE_ROOT": str(root), **srun_env(job, rank, len(nodes))}))
    outs = [p.communicate(timeout=20)[0] for p in procs]
    return outs, [p.returncode for p in procs]


def test_two_nodes_rendezvous_and_bad_rail(bindir, tmp_path):
    outs, codes = multi(bindir, tmp_path, "reference", ["node1", "node2"], "all_reduce_perf", "-b", "1G", "-e",
                        "1G", "-g", "8")
    assert codes == [0, 0] and outs[1] == ""
    parsed = nccl_tests.parse(outs[0])
    assert parsed["nranks"] == 16 and parsed["hosts"] == [socket.gethostname()]
    assert 340 < parsed["max_busbw_gbps"] < 390  # 8 x 400 Gb/s x 0.96
    outs, _ = multi(bindir, tmp_path, "perf-faults", ["node1", "node2"], "all_reduce_perf", "-b", "1G", "-e",
                    "1G", "-g", "8", job="8")
    assert nccl_tests.parse(outs[0])["max_busbw_gbps"] < 110  # mlx5_3 at 0.25 paces every ring
    assert not (tmp_path / "run" / "nccl" / "slurm-7.0").exists()
    outs, _ = multi(bindir, tmp_path, "perf-faults", ["node1", "node4"], "all_reduce_perf", "-b", "1G", "-e",
                    "1G", "-g", "8", job="10")
    assert 300 < nccl_tests.parse(outs[0])["max_busbw_gbps"] < 350  # node4's straggler GPU slows it a little


def test_missing_rank_times_out_with_ncclerror(bindir, tmp_path):
    root = make_node(tmp_path, "reference", "node1")
    proc = run(bindir, root, "all_reduce_perf", "-g", "8", env=srun_env("9", 0, 2))
    assert proc.returncode != 0
    assert "Test NCCL failure common.cu" in proc.stdout
    assert nccl_tests.parse(proc.stdout)["failures"]


def test_perftest_pair_and_bad_rail(bindir, tmp_path):
    server_root = make_node(tmp_path, "perf-faults", "node1", address="127.0.0.1")
    client_root = make_node(tmp_path, "perf-faults", "node2", address="127.0.0.2")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])
    results = {}
    for dev in ("mlx5_0", "mlx5_3"):
        server = subprocess.Popen([str(bindir / "ib_write_bw"), "-d", dev, "-p", port, "--report_gbits", "-F"],
                                  stdout=subprocess.PIPE, text=True, env={"SIMNODE_ROOT": str(server_root)})
        time.sleep(0.5)
        client = run(bindir, client_root, "ib_write_bw", "-d", dev, "-p", port, "--report_gbits", "-F",
                     "127.0.0.1")
        assert client.returncode == 0, client.stdout
        server_out = server.communicate(timeout=10)[0]
        assert "Waiting for client to connect" in server_out
        for text in (client.stdout, server_out):
            parsed = perftest.parse(text)
            results[dev] = parsed
    assert "RDMA_Write BW Test" in client.stdout
    assert json.dumps(results["mlx5_0"], default=str).count("38") >= 1
    healthy = max(r.get("bw_avg_gbitps") or 0 for r in results["mlx5_0"]["rows"])
    bad = max(r.get("bw_avg_gbitps") or 0 for r in results["mlx5_3"]["rows"])
    assert 370 < healthy < 400 and bad < 110


def test_perftest_no_server_and_no_cuda(bindir, tmp_path):
    root = make_node(tmp_path, "reference", "node1")
    proc = run(bindir, root, "ib_write_bw", "-p", "1", "127.0.0.1")
    assert proc.returncode == 1 and "Couldn't connect to 127.0.0.1:1" in proc.stdout
    nocuda = make_node(tmp_path / "x", "reference", "node1", gpudirect=False)
    proc = run(bindir, nocuda, "ib_write_bw", "--use_cuda=0", "127.0.0.1")
    assert proc.returncode == 1 and "unrecognized option '--use_cuda=0'" in proc.stderr


def test_ib_write_lat(bindir, tmp_path):
    server_root = make_node(tmp_path, "reference", "node1")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])
    server = subprocess.Popen([str(bindir / "ib_write_lat"), "-p", port], stdout=subprocess.PIPE, text=True,
                              env={"SIMNODE_ROOT": str(server_root)})
    time.sleep(0.5)
    client = run(bindir, server_root, "ib_write_lat", "-p", port, "127.0.0.1")
    server.communicate(timeout=10)
    parsed = perftest.parse(client.stdout)
    assert parsed["rows"] and 1.5 < parsed["rows"][0]["t_typical_us"] < 2.5


def test_nvbandwidth_and_straggler(bindir, tmp_path):
    healthy = nvbandwidth.parse(run(bindir, make_node(tmp_path, "reference", "node1"), "nvbandwidth", "-t",
                                    "host_to_device_memcpy_ce", "device_local_copy").stdout)
    slow = nvbandwidth.parse(run(bindir, make_node(tmp_path, "perf-faults", "node4"), "nvbandwidth", "-t",
                                 "host_to_device_memcpy_ce").stdout)
    text = json.dumps(healthy)
    assert "host_to_device_memcpy_ce" in text and "device_local_copy" in text
    assert healthy and slow
    listing = run(bindir, make_node(tmp_path, "reference", "node1"), "nvbandwidth", "-l").stdout
    assert "device_to_device_memcpy_read_ce" in listing


def test_profile_refuses_bad_fabric_faults(tmp_path):
    bad = tmp_path / "bad.yml"
    bad.write_text("extends: reference\nnodes:\n  node2:\n    faults:\n      rail_rate_factor: {mlx5_9: 0.5}\n")
    with pytest.raises(ProfileError):
        render_node(load_profile(bad), "node2")
    bad.write_text("extends: reference\nnodes:\n  node2:\n    faults:\n      nccl_tests: gone\n")
    with pytest.raises(ProfileError):
        render_node(load_profile(bad), "node2")
