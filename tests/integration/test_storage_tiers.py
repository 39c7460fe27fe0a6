"""Every storage tier of the simulated nodes measured for real with the fio matrix (role storage): home, scratch,
/dev/shm, the shared home mount and an extra directory, one matrix each, nothing left behind.

Needs root and Debian's slurm-wlm, munge, openssh-server and fio (``make install``).
"""

from __future__ import annotations

import json
import shutil

import pytest

from tests.integration.simrun import REQUIRES_SIM, by_key, load_result_list, run_playbook, simulated_cluster

pytestmark = [*REQUIRES_SIM, pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed")]


def test_every_tier_is_found_measured_and_left_clean(tmp_path):
    run_dir = tmp_path / "run"
    with simulated_cluster(tmp_path / "sim", 2, "reference") as sim:
        proc = run_playbook(sim / "inventory.ini", "-e", "clustereval_phases=performance", "--tags", "storage.tier",
                            "-e", f"clustereval_out={run_dir}", "-e", '{"clustereval_storage_tier_clients": [1, 2]}',
                            "-e", '{"clustereval_storage_extra_dirs": ["/sim/data", "/sim/run"]}',
                            "-e", '{"clustereval_storage_required_tiers": ["home", "data"]}', timeout=900)
        left = [str(p) for p in sim.rglob("clustereval-fio-tiers.*")]
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert left == [], "the matrix left files behind"
    items = load_result_list(run_dir)
    keyed = by_key(items)
    inventory = keyed[("storage.tier.inventory", "node1")]
    # /sim/data does not exist on the nodes: a required tier missing fails; the rest are measured
    assert inventory["status"] == "fail" and "tier data (/sim/data) missing" in inventory["summary"]
    tiers = {t["name"]: t for t in inventory["evidence"]["tiers"]}
    assert tiers["shared_home"]["shared"] and tiers["shared_home"]["fstype"].startswith("fuse.")
    assert tiers["shm"]["kind"] == "memory" and tiers["scratch"]["state"] == "measured"
    writes = {r["params"]["tier"]: r for r in items
              if r["check"] == "storage.tier.seq_write" and r["subject"] == "node1"}
    assert {"home", "scratch", "shm", "shared_home"} <= set(writes)
    assert all(r["status"] in ("pass", "warn", "fail") and r["value"] > 0 for r in writes.values())
    scaling = [r for r in items if r["check"] == "storage.tier.scaling" and r["subject"] == "node2"]
    assert len(scaling) >= 3 * 8 + 4 and all(r["status"] != "error" for r in scaling)
    curve = run_dir / "series" / "node1" / "storage-tier-scratch.csv"
    assert curve.is_file() and "clients" in curve.read_text().splitlines()[0]
    errors = [r for r in items if r["check"] == "storage.tier.errors"]
    assert errors and all(r["status"] == "pass" for r in errors), [r["summary"] for r in errors]
    shared = keyed[("storage.tier.shared_aggregate", "tier:shared_home")]
    assert shared["status"] in ("pass", "warn", "fail") and "from 2 nodes at once" in shared["summary"]
    assert (run_dir / "series" / "_cluster" / "storage-shared-shared_home.csv").is_file()
    assert not json.loads((run_dir / "score.json").read_text())["load_warnings"]


def test_a_disk_that_reads_slower_than_it_writes_is_found_on_that_node(tmp_path):
    # storage-faults: node1's disk reads at 40 MB/s through the kernel's block throttle (sim/diskfaults.py)
    run_dir = tmp_path / "run"
    with simulated_cluster(tmp_path / "sim", 2, "storage-faults") as sim:
        proc = run_playbook(sim / "inventory.ini", "-e", "clustereval_phases=performance",
                            "--tags", "storage.tier.read_vs_write,storage.tier.seq_read",
                            "-e", f"clustereval_out={run_dir}", "-e", "clustereval_storage_tier_size_mib=32",
                            "-e", "clustereval_storage_tier_runtime_s=2", timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:]
    items = load_result_list(run_dir)

    def verdict(check: str, node: str) -> dict:
        return next(r for r in items if r["check"] == check and r["subject"] == node
                    and r["params"]["tier"] == "scratch")

    throttled = verdict("storage.tier.read_vs_write", "node1")
    assert throttled["status"] == "fail" and "reads far slower than writes" in throttled["summary"]
    assert verdict("storage.tier.seq_read", "node1")["status"] == "fail"
    assert verdict("storage.tier.seq_read", "node1")["value"] < 60
    assert verdict("storage.tier.seq_read", "node2")["value"] > 100
