"""Collectives and RDMA on a simulated AMD Instinct cluster: rccl-tests (the nccl-tests names) judged by the same
checks, perftest through --use_rocm, and the documented RCCL all_gather that hangs at 32 KiB caught as a hang on
the node that has it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.integration.simrun import REQUIRES_SIM, load_result_list, run_playbook, simulated_cluster

pytestmark = REQUIRES_SIM
SMALL = {"clustereval_network_nccl_collectives": ["all_reduce", "all_gather"],
         "clustereval_network_nccl_max_bytes": "1G", "clustereval_network_nccl_iters": 2,
         "clustereval_network_nccl_warmup": 1,
         "clustereval_network_nccl_timeout_s": 20, "clustereval_network_rdma_tools": ["ib_write_bw"],
         "clustereval_network_rdma_memory": ["host", "cuda"], "clustereval_network_rdma_duration_s": 1}


# A healthy MI300X cluster but for node2, whose RCCL all_gather hangs at 32 KiB (the documented provider failure).
HANGING = {"extends": "amd-mi300x", "nodes": {"node2": {"faults": {"nccl_hang": {"collective": "all_gather",
                                                                                 "size": "32K"}}}}}


@pytest.fixture(scope="module")
def amd_run(tmp_path_factory) -> list[dict]:
    sim, tmp = tmp_path_factory.mktemp("sim-amd-hang"), tmp_path_factory.mktemp("amd-perf")
    (tmp / "vars.json").write_text(json.dumps(SMALL))
    (tmp / "amd-hang.yml").write_text(json.dumps(HANGING))
    with simulated_cluster(sim, 3, str(tmp / "amd-hang.yml")):
        proc = run_playbook(sim / "inventory.ini", "-e", f"@{tmp / 'vars.json'}", "-e",
                            f"clustereval_out={tmp / 'run'}", "--tags", "network.nccl,network.rdma", timeout=900)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    return load_result_list(tmp / "run")


def pick(items: list[dict], check: str, subject: str | None = None, **params) -> list[dict]:
    return [r for r in items if r["check"] == check and (subject is None or r["subject"] == subject)
            and all(r.get("params", {}).get(k) == v for k, v in params.items())]


def test_rccl_tests_run_and_are_judged_on_a_healthy_node(amd_run):
    busbw = pick(amd_run, "network.nccl.busbw", "node1", collective="all_reduce", nodes=1, size="peak")
    assert busbw and busbw[0]["status"] == "pass", busbw
    assert busbw[0]["params"]["world_size"] == 8  # -g from the HIP devices amd-smi lists
    assert "mi300x-8gpu" in busbw[0]["expected"]["source"]  # the MI300X reference, matched on the facts
    assert [r["status"] for r in pick(amd_run, "network.nccl.completion", "node1")] == ["pass", "pass"]


def test_the_all_gather_that_hangs_at_32_kib_is_a_fail_on_its_node_only(amd_run):
    completion = pick(amd_run, "network.nccl.completion")
    failed = [r for r in completion if r["status"] != "pass"]
    assert failed and all("node2" in r["subject"] and r["params"]["collective"] == "all_gather" for r in failed)
    whole = pick(amd_run, "network.nccl.completion", "node1+node2+node3", collective="all_gather")
    assert whole and whole[0]["status"] == "fail" and "a hang" in whole[0]["summary"]
    pair = pick(amd_run, "network.nccl.completion", "node1+node2", collective="all_gather")
    assert pair and pair[0]["status"] == "fail" and "a hang" in pair[0]["summary"]
    # the last row it printed (through mpirun's rank prefix) is the size before 32 KiB
    assert re.search(r"stdout>:\s+16384\s+256\s+float", pair[0]["evidence"]["last_lines"][-1])
    reduce = pick(amd_run, "network.nccl.completion", "node1+node2+node3", collective="all_reduce")
    assert reduce and {r["status"] for r in reduce} == {"pass"}  # XGMI on and off: node2 hangs in all_gather only


def test_rdma_from_gpu_memory_uses_rocm(amd_run):
    gpu = pick(amd_run, "network.rdma.bandwidth", memory="cuda")
    assert gpu and all(r["status"] == "pass" for r in gpu), [r["summary"] for r in gpu]
    raw = Path(gpu[0]["artifacts"][0])
    assert raw.name.startswith("perftest") or gpu[0]["artifacts"]
