"""ior and mdtest on the simulated cluster (role storage, tasks/hpcio.yml): neither is installed on the simulated
nodes (nor in Debian 12), so every check skips saying so — never passes — and nothing is left on the shared tier;
the probe that ran is the one a real cluster with the tools runs (its real path is in tests/unit/test_storage_hpcio.py).

Needs root and Debian's slurm-wlm, munge, openssh-server (``make install``).
"""

from __future__ import annotations

import json

from tests.integration.simrun import REQUIRES_SIM, load_result_list, read_inventory, run_playbook, simulated_cluster
from tests.integration.simrun import ssh as node_ssh

pytestmark = REQUIRES_SIM

CHECKS = ["storage.ior.write", "storage.ior.read", "storage.mdtest.file_create", "storage.mdtest.file_stat",
          "storage.mdtest.file_read", "storage.mdtest.file_remove"]


def test_ior_and_mdtest_skip_where_they_are_not_installed_and_leave_nothing(tmp_path):
    run_dir = tmp_path / "run"
    with simulated_cluster(tmp_path / "sim", 2, "reference") as sim:
        hosts, _ = read_inventory(sim)
        for address in hosts.values():  # the premise: no ior or mdtest on the simulated nodes
            assert node_ssh(sim, address, "command -v ior || command -v mdtest").returncode != 0
        proc = run_playbook(sim / "inventory.ini", "-e", "clustereval_phases=performance",
                            "--tags", "storage.ior,storage.mdtest", "-e", f"clustereval_out={run_dir}", timeout=600)
        # one elbencho check selected: only its own (small-file) run starts
        small = run_playbook(sim / "inventory.ini", "-e", "clustereval_phases=performance",
                             "--tags", "storage.elbencho.small_write", "-e", f"clustereval_out={tmp_path / 'small'}",
                             timeout=600)
        left = [str(p) for p in sim.rglob(".clustereval-hpcio-*")]
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert left == [], "the benchmarks left their directory behind"
    items = load_result_list(run_dir)
    results = {r["check"]: r for r in items if r["check"].startswith("storage.")}
    assert sorted(results) == sorted(CHECKS), sorted(results)  # select before run: nothing else of storage ran
    for check_id, result in results.items():
        tool = check_id.split(".")[1]
        assert result["status"] == "skip" and result["subject"] == "node1+node2", (check_id, result["summary"])
        assert result["summary"].startswith(f"{tool}: not installed on node1"), result["summary"]
    kept = sorted(p.name for p in (run_dir / "raw" / "node1").iterdir())
    assert "ior-file-per-process.txt" in kept and "mdtest.txt" in kept
    assert not [name for name in kept if "elbencho" in name]  # no elbencho check selected: it never started
    assert not (run_dir / "raw" / "node2").exists() or not list((run_dir / "raw" / "node2").glob("ior*"))
    assert not json.loads((run_dir / "score.json").read_text())["load_warnings"]
    assert small.returncode == 0, small.stdout[-3000:]
    [elbencho] = [r for r in load_result_list(tmp_path / "small") if r["check"].startswith("storage.")]
    assert elbencho["check"] == "storage.elbencho.small_write" and elbencho["status"] == "skip"
    assert elbencho["summary"].startswith("elbencho: not installed on node1"), elbencho["summary"]
    assert sorted(p.name for p in (tmp_path / "small" / "raw" / "node1").glob("elbencho*")) == [
        "elbencho-small.txt", "elbencho-small.txt.meta.json"]
