"""The datagen load (role storage, tasks/datagen.yml) for real on a 2-node simulated reference: both nodes' writers
produce video-sized blobs and Parquet sensor files (pyarrow, in the environment the cluster was brought up with) at
once on the shared home; per-node figures, the cluster's aggregate from overlapping windows, nothing left behind.

Needs root, Debian's slurm-wlm, munge and openssh-server, and pyarrow in the venv (``make install``).
"""

from __future__ import annotations

import glob
import importlib.util
import json

import pytest

from tests.integration.simrun import REQUIRES_SIM, load_result_list, run_playbook, simulated_cluster

pytestmark = [*REQUIRES_SIM, pytest.mark.skipif(importlib.util.find_spec("pyarrow") is None,
                                                reason="pyarrow is not installed (make install)")]

NODE_CHECKS = ("storage.datagen.throughput", "storage.datagen.parquet", "storage.datagen.errors")


def test_every_node_writes_blobs_and_parquet_at_once_and_leaves_nothing(tmp_path):
    run_dir, only_aggregate = tmp_path / "run", tmp_path / "aggregate"
    with simulated_cluster(tmp_path / "sim", 2, "reference") as sim:
        proc = run_playbook(sim / "inventory.ini", "-e", "clustereval_phases=performance",
                            "--tags", "storage.datagen", "-e", f"clustereval_out={run_dir}", timeout=600)
        left = [str(p) for p in sim.rglob("clustereval-datagen.*")] + glob.glob("/tmp/clustereval-datagen.*")
        # The cluster-wide check alone still runs the load on every node (kept for it, judged once).
        alone = run_playbook(sim / "inventory.ini", "-e", "clustereval_phases=performance",
                             "--tags", "storage.datagen.aggregate", "-e", f"clustereval_out={only_aggregate}",
                             timeout=600)
        left += [str(p) for p in sim.rglob("clustereval-datagen.*")] + glob.glob("/tmp/clustereval-datagen.*")
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert alone.returncode == 0, alone.stdout[-3000:]
    assert left == [], "the datagen load left files behind"
    kept = load_result_list(only_aggregate)
    assert [(r["check"], r["subject"]) for r in kept] == [("storage.datagen.aggregate", "tier:shared_home")]
    assert kept[0]["status"] in ("pass", "warn", "fail") and kept[0]["value"] > 0
    items = load_result_list(run_dir)
    assert {r["check"] for r in items} == {*NODE_CHECKS, "storage.datagen.aggregate"}
    assert all(r["status"] in ("pass", "warn", "fail") for r in items), [r["summary"] for r in items
                                                                          if r["status"] in ("skip", "error")]
    for node in ("node1", "node2"):
        mine = {r["check"]: r for r in items if r["subject"] == node}
        assert set(mine) == set(NODE_CHECKS) and {r["params"]["tier"] for r in mine.values()} == {"shared_home"}
        throughput = mine["storage.datagen.throughput"]
        assert throughput["value"] > 0 and throughput["unit"] == "GB/s"
        kinds = throughput["evidence"]["tier"]["kinds"]
        assert kinds["blob"]["files"] > 0 and kinds["parquet"]["files"] > 0  # both kinds, written for real
        assert throughput["evidence"]["tier"]["fstype"].startswith("fuse.")
        assert [w["state"] for w in throughput["evidence"]["writers"]] == ["ok", "ok"]
        assert 0 < mine["storage.datagen.parquet"]["value"] < 60
        assert mine["storage.datagen.errors"]["status"] == "pass" and mine["storage.datagen.errors"]["value"] == 0
    aggregate = next(r for r in items if r["check"] == "storage.datagen.aggregate")
    assert aggregate["subject"] == "tier:shared_home" and aggregate["params"]["source"]
    assert "from 2 nodes at once" in aggregate["summary"] and aggregate["value"] > 0
    assert aggregate["evidence"]["overlap"] >= 0.5 and {n["host"] for n in aggregate["evidence"]["nodes"]} == {
        "node1", "node2"}
    assert aggregate["expected"]["reference"] == 1.0  # 0.5 GB/s per node taking part
    document = json.loads((run_dir / "raw/node1/storage-datagen.json").read_text())
    assert document["done"] and document["pyarrow"]["available"] and document["left_behind"] == []
    assert (run_dir / "raw/node1/storage-datagen-pyarrow.txt").read_text().startswith("present: pyarrow")
    assert not json.loads((run_dir / "score.json").read_text())["load_warnings"]
