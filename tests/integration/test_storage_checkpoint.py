"""Checkpoint save and load (role storage, tasks/checkpoint.yml) for real on a 2-node simulated reference: mpirun
from node1 starts one rank per node of our benchmark with the PyTorch the cluster was brought up with; torch.save
and torch.distributed.checkpoint (gloo, tensors on the CPU) write the shards to the GlusterFS home, each rank loads
the shard the other node wrote and verifies it; real GB/s per method, every tensor identical, nothing left behind
on the shared home or the nodes. Select before running: with no checkpoint check selected nothing is copied,
installed or started.

Needs root, Debian's slurm-wlm, munge, openssh-server and openmpi-bin, FUSE and GlusterFS, and torch with numpy in
the venv (``make install``).
"""

from __future__ import annotations

import glob
import importlib.util
import json
import os
import shutil

import pytest

from clustereval.sim import sharedfs
from tests.integration.simrun import REQUIRES_SIM, load_result_list, run_playbook, simulated_cluster

pytestmark = [
    *REQUIRES_SIM,
    pytest.mark.skipif(shutil.which("mpirun") is None, reason="Open MPI's mpirun is not installed"),
    pytest.mark.skipif(importlib.util.find_spec("torch") is None or importlib.util.find_spec("numpy") is None,
                       reason="torch and numpy are not installed in the venv (make install)"),
    pytest.mark.skipif(not os.path.exists("/dev/fuse"), reason="no FUSE here"),
    pytest.mark.skipif(sharedfs.unavailable("glusterfs") is not None, reason=str(sharedfs.unavailable("glusterfs"))),
]

CHECKS = ("storage.checkpoint.save", "storage.checkpoint.load", "storage.checkpoint.integrity")


def leftovers(sim) -> list[str]:
    """The run's directory on the shared home (the GlusterFS brick) and the script the nodes ran."""
    return [str(p) for p in sim.rglob("*clustereval-checkpoint-*")] + glob.glob("/var/tmp/clustereval-checkpoint-*")


def test_torch_save_and_dcp_shards_cross_nodes_byte_identical_and_leave_nothing(tmp_path):
    run_dir, other = tmp_path / "run", tmp_path / "other"
    with simulated_cluster(tmp_path / "sim", 2, "reference") as sim:
        proc = run_playbook(sim / "inventory.ini", "-e", "clustereval_phases=performance",
                            "--tags", "storage.checkpoint", "-e", f"clustereval_out={run_dir}", timeout=600)
        left = leftovers(sim)
        # select before running: a performance run of none of these checks copies, installs and starts nothing
        nothing = run_playbook(sim / "inventory.ini", "-e", "clustereval_phases=performance",
                               "--tags", "audit.os.kernel", "-e", f"clustereval_out={other}", timeout=300)
        left += leftovers(sim)
    assert left == [], "the checkpoint benchmark left files behind"
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert nothing.returncode == 0, nothing.stdout[-3000:]
    assert "clustereval-checkpoint" not in nothing.stdout and not list(other.rglob("storage-checkpoint*"))

    items = [r for r in load_result_list(run_dir) if r["check"].startswith("storage.")]
    assert sorted((r["check"], r["params"]["method"]) for r in items) == sorted(
        (c, m) for c in CHECKS for m in ("torch.save", "dcp"))
    assert {r["subject"] for r in items} == {"node1+node2"} and {r["params"]["directory"] for r in items} == {"/home"}
    for result in items:
        assert result["status"] in ("pass", "warn", "fail"), result["summary"]
        assert "fuse.glusterfs" in result["summary"] and "2 ranks on 2 nodes" in result["summary"]
    for result in (r for r in items if r["check"] != "storage.checkpoint.integrity"):
        assert result["value"] > 0 and result["unit"] == "GB/s"
        assert result["expected"]["reference"] == pytest.approx(2.0 if result["check"].endswith("save") else 3.0)
        assert result["evidence"]["bytes"] >= 2 * 8 << 20 and result["evidence"]["world_size"] == 2
        assert result["series"][0]["rows"] == 2  # one row per rank
    for integrity in (r for r in items if r["check"] == "storage.checkpoint.integrity"):
        assert integrity["status"] == "pass" and integrity["value"] == 0, integrity["summary"]
        # each rank read the shard the other node's rank wrote
        assert [(p["host"], p["source_host"]) for p in integrity["evidence"]["pairs"]] == [
            ("node1", "node2"), ("node2", "node1")]
        assert integrity["evidence"]["tensors_checked"] == 8
    lines = [json.loads(line) for line in (run_dir / "raw/node1/storage-checkpoint.jsonl").read_text().splitlines()]
    assert lines[0]["event"] == "start" and lines[0]["hosts"] == ["node1", "node2"]
    assert lines[0]["backend"] == "gloo" and lines[0]["device"] == "cpu"
    assert {"event": "cleanup", "workdir": lines[0]["workdir"], "removed": True} in lines
    save_csv = (run_dir / "series/_cluster/storage-checkpoint-save.csv").read_text().splitlines()
    assert save_csv[0].startswith("method,step,rank,host") and len(save_csv) == 1 + 2 * 2
