"""The performance phase's GPU compute, collectives and RDMA against the simulated cluster, end to end.

`perf-faults` (4 nodes): node2 has rail mlx5_3 at a quarter of its rate, node3 NVLink at 0.4 and an
all_gather that hangs at 64 MiB, node4 a straggler GPU 5 (nvbandwidth), a jagged all_reduce and wrong
reduce_scatter values from 16 MiB. The torch benchmarks run for real on this CPU (the project's own
environment, so nothing is installed), nccl-tests and perftest are shims launched by the real mpirun and
perftest servers started as a session. A healthy `reference` cluster shows the same checks passing.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.integration.simrun import REPO, REQUIRES_SIM, load_result_list, run_playbook, simulated_cluster

pytestmark = [pytest.mark.integration, *REQUIRES_SIM]

SMALL = {
    "clustereval_phases": "performance",
    "clustereval_gpu_compute_venv": str(REPO / ".venv"),
    "clustereval_gpu_compute_warmup": 1, "clustereval_gpu_compute_iters": 3,
    "clustereval_gpu_compute_gemm_shape": "256x256x256",
    "clustereval_gpu_compute_dtypes": ["bf16", "fp32", "tf32", "nvfp4"],
    "clustereval_gpu_compute_mamf_m": [128, 256], "clustereval_gpu_compute_mamf_n": [256],
    "clustereval_gpu_compute_mamf_k": [256], "clustereval_gpu_compute_gemv_shape": "2048x512",
    "clustereval_gpu_compute_moe_models": [{"name": "tiny", "hidden": 256, "intermediate": 64, "experts": 4,
                                            "top_k": 2}],
    "clustereval_gpu_compute_moe_tokens": [8], "clustereval_gpu_compute_copy_mib": 4,
    "clustereval_gpu_compute_flush_mib": 4,
    "clustereval_network_nccl_collectives": ["all_reduce", "all_gather", "reduce_scatter"],
    "clustereval_network_nccl_max_bytes": "1G", "clustereval_network_nccl_iters": 2,
    "clustereval_network_nccl_warmup": 1, "clustereval_network_nccl_timeout_s": 20,
    "clustereval_network_nccl_launchers": ["mpirun", "srun"],
    "clustereval_network_torchdist_collectives": ["all_reduce", "all_to_all"],
    "clustereval_network_torchdist_max_bytes": 16384, "clustereval_network_torchdist_iters": 2,
    "clustereval_network_rdma_tools": ["ib_write_bw", "ib_write_lat"], "clustereval_network_rdma_memory": ["host"],
    "clustereval_network_rdma_duration_s": 1,
}
TAGS = "gpu.compute,network.nccl,network.torchdist,network.rdma"


RUNS: dict[str, Path] = {}


def run(tmp: Path, sim: Path, tags: str = TAGS, **extra) -> list[dict]:
    varfile = tmp / "vars.json"
    varfile.write_text(json.dumps({**SMALL, **extra}))
    proc = run_playbook(sim / "inventory.ini", "-e", f"@{varfile}", "-e", f"clustereval_out={tmp / 'run'}",
                        "--tags", tags, timeout=900)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    return load_result_list(tmp / "run")


def pick(items: list[dict], check: str, subject: str | None = None, **params) -> list[dict]:
    return [r for r in items if r["check"] == check and (subject is None or r["subject"] == subject)
            and all(r.get("params", {}).get(k) == v for k, v in params.items())]


@pytest.fixture(scope="module")
def faulty(tmp_path_factory) -> list[dict]:
    sim = tmp_path_factory.mktemp("sim-perf-faults")
    tmp = tmp_path_factory.mktemp("perf-faults")
    RUNS["perf-faults"] = tmp / "run"
    with simulated_cluster(sim, 4, "perf-faults"):
        return run(tmp, sim)


def test_the_torch_benchmarks_ran_on_every_node_on_the_cpu_and_say_so(faulty):
    gemm = pick(faulty, "gpu.compute.gemm", dtype="bf16")
    assert {r["subject"] for r in gemm} == {f"node{i}/gpu0" for i in range(1, 5)}
    assert all(r["status"] == "pass" and "on the CPU" in r["summary"] for r in gemm)
    assert {r["status"] for r in pick(faulty, "gpu.compute.gemm", dtype="nvfp4")} == {"skip"}
    devices = pick(faulty, "gpu.compute.device")
    assert len(devices) == 4 and all(r["status"] == "warn" and "CPU build" in r["summary"] for r in devices)
    mamf = pick(faulty, "gpu.compute.mamf", "node1/gpu0")[0]
    assert mamf["series"][0]["path"] == "series/node1/gpu-mamf.csv" and mamf["evidence"]["best_shape"]


def test_the_straggler_gpu_is_named_from_nvbandwidth(faulty):
    slow = [r for r in pick(faulty, "gpu.compute.nvbandwidth") if r["subject"] == "node4/gpu5"]
    assert slow and all(r["status"] == "fail" and "a straggler" in r["summary"] for r in slow)
    assert {r["status"] for r in pick(faulty, "gpu.compute.nvbandwidth", "node1/gpu5")} == {"pass"}


def test_a_hang_fails_with_its_last_lines_and_the_remedies(faulty):
    hung = pick(faulty, "network.nccl.completion", "node1+node2+node3+node4", collective="all_gather")
    assert hung and hung[0]["status"] == "fail" and "a hang" in hung[0]["summary"]
    assert "NCCL_IB_HCA" in hung[0]["summary"] and hung[0]["evidence"]["last_lines"]


def test_wrong_values_and_a_jagged_curve_are_findings(faulty):
    wrong = pick(faulty, "network.nccl.correctness", "node1+node2+node3+node4", collective="reduce_scatter")
    assert wrong[0]["status"] == "fail" and "wrong elements" in wrong[0]["summary"]
    jagged = [r for r in pick(faulty, "network.nccl.curve_shape", collective="all_reduce") if "node4" in r["subject"]]
    assert jagged and all(r["status"] == "fail" and "plugin" in r["summary"] for r in jagged)
    single = pick(faulty, "network.nccl.busbw", "node1", collective="all_reduce", size="peak")
    assert single[0]["status"] == "pass"  # one healthy node over NVLink reaches the H100 figure


def test_the_isolation_names_the_bad_nodes_and_the_bad_rail_is_named(faulty):
    isolation = pick(faulty, "network.nccl.isolation")
    assert len(isolation) == 1 and isolation[0]["status"] == "fail"
    assert set(isolation[0]["evidence"]["bad_nodes"]) == {"node2", "node3"}
    rail = [r for r in pick(faulty, "network.rdma.bandwidth") if r["params"].get("device") == "mlx5_3"
            and "node2" in r["subject"]]
    assert rail and all(r["status"] == "fail" for r in rail)
    others = [r for r in pick(faulty, "network.rdma.bandwidth") if r["params"].get("device") == "mlx5_0"]
    assert others and {r["status"] for r in others} == {"pass"}
    assert {r["status"] for r in pick(faulty, "network.rdma.control_path")} == {"pass"}


def test_torch_distributed_ran_for_real_over_gloo_and_checked_every_value(faulty):
    right = pick(faulty, "network.torchdist.correctness")
    assert {r["params"]["collective"] for r in right} == {"all_reduce", "all_to_all"}
    assert all(r["status"] == "pass" and r["subject"] == "node1+node2+node3+node4" for r in right)


def test_the_scripts_are_gone_afterwards(faulty):
    metas = [json.loads(p.read_text()) for p in RUNS["perf-faults"].glob("raw/*/*.meta.json")]
    scripts = {m["params"]["script"] for m in metas if "script" in (m.get("params") or {})}
    assert len(scripts) >= 2  # the GPU benchmark's (one per node) and torch.distributed's
    assert not [s for s in scripts if Path(s).exists() or (Path(s).parent.name.startswith("clustereval-gpu.")
                and Path(s).parent.exists())]


def test_a_healthy_cluster_passes_the_multi_node_collectives_and_every_rail(tmp_path):
    sim = tmp_path / "sim"
    with simulated_cluster(sim, 2, "reference"):
        items = run(tmp_path, sim, tags="network.nccl.busbw,network.rdma.bandwidth",
                    clustereval_network_nccl_collectives=["all_reduce"])
    pair = pick(items, "network.nccl.busbw", "node1+node2", collective="all_reduce", size="peak")
    assert pair and pair[0]["status"] == "pass", pair
    rails = pick(items, "network.rdma.bandwidth")
    assert len(rails) == 16 and {r["status"] for r in rails} == {"pass"}


def test_slurm_launches_the_same_collective_as_mpirun(faulty):
    srun = pick(faulty, "network.nccl.completion", "node1+node2+node3+node4", launcher="srun")
    assert srun and srun[0]["status"] == "pass" and srun[0]["params"]["collective"] == "all_reduce"
    mpirun = pick(faulty, "network.nccl.busbw", "node1+node2+node3+node4", launcher="mpirun", collective="all_reduce",
                  size="64KiB")
    assert mpirun and mpirun[0]["status"] == "pass"
