"""Small-file metadata measured for real on every tier of the simulated nodes (role storage, tasks/metadata.yml):
the reference's tiers, its GlusterFS shared home included, pass; on the sharedfs-slow-metadata profile (the
GlusterFS brick holds every metadata operation 100 ms) the shared home fails every rate, named by its tier, while
the nodes' local tiers still pass. Nothing is left on the nodes.

Needs root and Debian's slurm-wlm, munge, openssh-server and glusterfs-server (``make install``).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from clustereval.sim import cluster, sharedfs
from tests.integration.simrun import REQUIRES_SIM, load_result_list, run_playbook, simulated_cluster

pytestmark = [*REQUIRES_SIM, pytest.mark.skipif(sharedfs.unavailable("glusterfs") is not None,
                                                reason=f"no GlusterFS: {sharedfs.unavailable('glusterfs')}")]
RATES = ["storage.metadata.create", "storage.metadata.stat", "storage.metadata.read", "storage.metadata.rename",
         "storage.metadata.remove", "storage.metadata.mkdir", "storage.metadata.rmdir"]


def measure(tmp_path: Path, profile: str, *extra: str) -> tuple[list[dict], list[str], str]:
    """--tags storage.metadata on 2 nodes of ``profile`` (the simulated inventory's sizes: 2 clients per node,
    300 files each); the results, whatever the benchmark left anywhere in the cluster's directory, and the
    GlusterFS volume's options (``gluster volume info``)."""
    run_dir = tmp_path / "run"
    with simulated_cluster(tmp_path / "sim", 2, profile) as sim:
        proc = run_playbook(sim / "inventory.ini", "-e", "clustereval_phases=performance", "--tags", "storage.metadata",
                            "-e", f"clustereval_out={run_dir}", *extra, timeout=600)
        left = [str(p) for pattern in ("clustereval-metadata.*", "clustereval_mdbench.py") for p in sim.rglob(pattern)]
        shared = cluster.status(sim)["shared_fs"]
        info = subprocess.run(sharedfs.gluster_cli(sharedfs.gluster_paths(sim / "storage"), shared["netns_pid"],
                                                   "volume", "info", sharedfs.VOLUME),
                              capture_output=True, text=True, timeout=60).stdout
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert not json.loads((run_dir / "score.json").read_text())["load_warnings"]
    return [r for r in load_result_list(run_dir) if r["check"].startswith("storage.metadata.")], left, info


def by_tier(items: list[dict], check: str, node: str = "node1") -> dict[str, dict]:
    return {r["params"]["tier"]: r for r in items if r["check"] == check and r["subject"] == node}


def test_the_reference_passes_small_file_metadata_on_every_tier(tmp_path):
    items, left, info = measure(tmp_path, "reference")
    assert left == [], "the metadata benchmark left files behind"
    assert "delay-gen" not in info and "features.cache-invalidation: on" in info
    assert not [f"{r['check']} {r['params']} {r['summary']}" for r in items if r["status"] in ("fail", "error")]
    for check in RATES:
        for node in ("node1", "node2"):
            tiers = by_tier(items, check, node)
            assert {"home", "scratch", "shm", "shared_home"} <= set(tiers), (check, node, sorted(tiers))
            shared = tiers["shared_home"]
            assert shared["status"] == "pass" and shared["value"] > 0, shared["summary"]
            assert shared["expected"]["matched"] == "metadata-network"
    errors = by_tier(items, "storage.metadata.errors")
    assert {r["status"] for r in errors.values()} == {"pass"}
    assert (tmp_path / "run" / "raw" / "node1" / "storage-metadata.txt").is_file()


def test_a_metadata_starved_shared_home_fails_on_that_tier(tmp_path):
    # a phase of the starved tier stops after 3 s: its rate is what it did by then
    items, left, info = measure(tmp_path, "sharedfs-slow-metadata",
                                "-e", "clustereval_storage_metadata_phase_limit_s=3")
    assert left == [], "the metadata benchmark left files behind"
    # the fault is the real filesystem's: the brick's delay-gen translator, in the volume's own options
    assert "debug.delay-gen: posix" in info and "delay-gen.delay-duration: 100000" in info
    for check in RATES:
        for node in ("node1", "node2"):
            tiers = by_tier(items, check, node)
            shared = tiers["shared_home"]
            assert shared["status"] == "fail", shared["summary"]
            assert "slow metadata" in shared["summary"] and "on shared_home (/home, fuse.glusterfs" in shared["summary"]
            assert {tiers[t]["status"] for t in ("home", "scratch", "shm")} == {"pass"}, check
    create = by_tier(items, "storage.metadata.create")["shared_home"]
    assert create["value"] < create["expected"]["fail_min"] / 2  # far below, not at the edge
    assert {r["status"] for r in by_tier(items, "storage.metadata.errors").values()} == {"pass"}
