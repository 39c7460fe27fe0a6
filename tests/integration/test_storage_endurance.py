"""Storage endurance on the simulated nodes, for real (role storage, tasks/endurance.yml, phase reliability): every
tier held under sequential then random mixed fio load, one fio JSON per interval, judged over time, a time series
per tier, nothing left behind.

Needs root and Debian's slurm-wlm, munge, openssh-server and fio (``make install``).
"""

from __future__ import annotations

import shutil

import pytest

from tests.integration.simrun import REQUIRES_SIM, load_result_list, run_playbook, simulated_cluster

pytestmark = [*REQUIRES_SIM, pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed")]


def test_every_tier_is_held_under_load_and_judged_over_time(tmp_path):
    run_dir = tmp_path / "run"
    with simulated_cluster(tmp_path / "sim", 2, "reference") as sim:
        proc = run_playbook(sim / "inventory.ini", "-e", "clustereval_phases=reliability", "--tags",
                            "storage.endurance", "-e", f"clustereval_out={run_dir}", timeout=600)
        left = [str(p) for p in sim.rglob("clustereval-fio-endurance.*")]
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert left == [], "the endurance load left files behind"
    items = load_result_list(run_dir)
    mine = [r for r in items if r["check"].startswith("storage.endurance.")]
    assert {r["subject"] for r in mine} == {"node1", "node2"}
    decay = [r for r in mine if r["check"] == "storage.endurance.decay" and r["subject"] == "node1"]
    # every measured tier (home, scratch, shm, the shared home), both phases at the one client count
    assert {r["params"]["tier"] for r in decay} >= {"scratch", "shm"}
    assert {r["params"]["phase"] for r in decay} == {"seq_mixed", "rand_mixed"}
    assert all(r["status"] in ("pass", "warn", "fail") for r in decay), [r["summary"] for r in decay]
    tails = [r for r in mine if r["check"] == "storage.endurance.tail_latency"]
    assert tails and all(r["status"] in ("pass", "warn", "fail") for r in tails), [r["summary"] for r in tails]
    errors = [r for r in mine if r["check"] == "storage.endurance.errors"]
    assert errors and all(r["status"] == "pass" for r in errors), [r["summary"] for r in errors]
    # every interval once: 3 s sequential and 3 s random in 1 s intervals
    for kind, column in (("bandwidth", "bw_mbps"), ("latency", "p99_us")):
        lines = (run_dir / "series" / "node1" / f"storage-endurance-scratch-{kind}.csv").read_text().splitlines()
        assert lines[0].startswith("tier,phase,clients,index,t_s") and column in lines[0] and len(lines) == 1 + 6
