"""The burn-in and the sustained collectives (role burnin) on the simulated cluster, for seconds
(SIM_BENCHMARK_VARS): GEMMs on every node's CPU (PyTorch, float32), the telemetry role's sampler on the nvidia-smi
shim, the all-to-all over every node through mpirun with gloo, and nothing left on the nodes.

Needs root and Debian's slurm-wlm, munge, openssh-server and OpenMPI (``make install``).
"""

from __future__ import annotations

import csv
import shutil

import pytest

from clustereval import results
from tests.integration.simrun import REQUIRES_SIM, load_result_list, run_playbook, simulated_cluster

pytestmark = [*REQUIRES_SIM, pytest.mark.skipif(shutil.which("mpirun") is None, reason="mpirun is not installed")]


def latest(items: list[dict]) -> dict:
    return {results.identity(r)[:2]: r for r in results.latest(items)}


def test_burn_in_and_sustained_collectives_over_three_nodes(tmp_path):
    run_dir = tmp_path / "run"
    # burnin-faults: node2's GPU 5 overheats into HW thermal slowdown, node3's GPU 2 gains corrected ECC errors and
    # its GPU 6 loses clock with no reason given, while the burn-in runs; node1 is healthy
    with simulated_cluster(tmp_path / "sim", 3, "burnin-faults") as sim:
        proc = run_playbook(sim / "inventory.ini", "-e", "clustereval_phases=reliability",
                            "--tags", "burnin.gemm,burnin.gpu,burnin.collective,burnin.counters",
                            "-e", f"clustereval_out={run_dir}", timeout=600)
        left = [str(p) for p in sim.rglob("clustereval-burnin-*")]
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert left == [], "the burn-in left its programs behind"
    items = load_result_list(run_dir)
    keyed = latest(items)
    # the GPU load ran on every node's CPU (no CUDA): no sustained reference for a CPU, said so
    sustained = keyed[("burnin.gemm.sustained", "node2")]
    assert sustained["status"] == "skip" and "no sustained reference for CPU" in sustained["summary"]
    decay = [r for r in items if r["check"] == "burnin.gemm.decay"]
    assert decay and all(r["status"] in ("pass", "warn", "fail") for r in decay), [r["summary"] for r in decay]
    assert all(r["params"]["load"] == "both" and r["params"]["duration_s"] == 20 for r in decay)
    # the telemetry findings show in the burn-in's own results; node1's GPUs under load (the power cap) are normal
    throttle = keyed[("burnin.gpu.throttle", "node2/gpu5")]
    assert throttle["status"] == "fail" and "hw_thermal_slowdown" in throttle["summary"], throttle["summary"]
    assert keyed[("burnin.gpu.throttle", "node1/gpu0")]["status"] == "pass"
    ecc = keyed[("burnin.gpu.ecc", "node3/gpu2")]
    assert ecc["status"] in ("warn", "fail") and ecc["params"]["session"] == "burnin", ecc["summary"]
    assert keyed[("burnin.gpu.ecc", "node1/gpu0")]["status"] == "pass"
    clocks = keyed[("burnin.gpu.clocks", "node3/gpu6")]
    assert clocks["status"] in ("warn", "fail"), clocks["summary"]
    # the collectives ran from the first node over all three, in the burn-in and in the sustained run
    errors = [r for r in items if r["check"] == "burnin.collective.errors"]
    assert {r["params"]["session"] for r in errors} == {"burnin", "sustained"}
    assert all(r["status"] == "pass" and r["subject"] == "node1" for r in errors), [r["summary"] for r in errors]
    bandwidth = {(r["params"]["session"], r["params"]["collective"]): r for r in items
                 if r["check"] == "burnin.collective.bandwidth"}
    assert {("burnin", "all_to_all"), ("sustained", "all_gather"), ("sustained", "reduce_scatter")} <= set(bandwidth)
    assert bandwidth[("sustained", "all_gather")]["evidence"]["world_size"] == 3
    # the sim's nodes have no InfiniBand or NVLink counters: skipped with the reason
    counters = keyed[("burnin.counters", "node1")]
    assert counters["status"] in ("skip", "pass"), counters["summary"]
    with open(run_dir / "series" / "node1" / "burnin-gemm.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) >= 4 and {"timestamp", "device", "tflops"} <= set(rows[0])
