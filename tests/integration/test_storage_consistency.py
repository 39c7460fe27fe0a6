"""Storage consistency across nodes on the simulated cluster (role storage, tasks/consistency.yml): on the reference
profile's GlusterFS home every check passes, cross-node locks included; on the sharedfs-nolocks profile's SSHFS home
the cross-node flock() and fcntl() checks fail while their same-node control passes, and mkdir -p, names with ':'
and visibility pass. The simulated storage itself: GlusterFS mounted on every node, its server in a network
namespace of its own, nothing of it left after ``sim down``; and tags decide which tests run on the nodes.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from clustereval.sim import cli, cluster, sharedfs
from tests.integration.simrun import REQUIRES_SIM, load_result_list, read_inventory, run_playbook, simulated_cluster
from tests.integration.simrun import ssh as node_ssh

pytestmark = [*REQUIRES_SIM, pytest.mark.skipif(not os.path.exists("/dev/fuse"), reason="no FUSE here")]

CHECKS = ["storage.consistency.flock", "storage.consistency.posix_lock", "storage.consistency.mkdir_race",
          "storage.consistency.colon_names", "storage.consistency.visibility"]
LOCKS = CHECKS[:2]
TIMEOUT_S = 600


def evaluate(sim: Path, run_dir: Path, tags: str = "storage.consistency") -> dict[tuple[str, str], dict]:
    proc = run_playbook(sim / "inventory.ini", "-e", "clustereval_phases=performance", "--tags", tags,
                        "-e", f"clustereval_out={run_dir}", timeout=TIMEOUT_S)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    if not (run_dir / "results.jsonl").exists():  # nothing was judged
        return {}
    return {(r["check"], r["subject"]): r for r in load_result_list(run_dir) if r["check"].startswith("storage.")}


def the_report(run_dir: Path) -> dict:
    return json.loads((run_dir / "raw" / "node1" / "storage-consistency.json").read_text())


def gluster_processes(directory: Path) -> set[int]:
    state = json.loads((directory / "state.json").read_text())
    return sharedfs.namespace_processes(state.get("shared_fs"))


@pytest.mark.skipif(sharedfs.unavailable("glusterfs") is not None, reason=str(sharedfs.unavailable("glusterfs")))
def test_glusterfs_home_keeps_locks_across_nodes_and_names_and_files_cross_them(tmp_path):
    sim = tmp_path / "sim"
    with simulated_cluster(sim, 2, "reference"):
        info = cluster.status(sim)
        assert info["shared_fs"]["type"] == "glusterfs" and info["shared_fs"]["server_alive"], info["shared_fs"]
        assert {n["shared_fs"] for n in info["nodes"].values()} == {"/home"}
        hosts, _ = read_inventory(sim)
        for name, address in hosts.items():
            mount = node_ssh(sim, address, "findmnt -n -o FSTYPE,SOURCE /home").stdout.split()
            assert mount == ["fuse.glusterfs", f"{sharedfs.gluster_address(address.rsplit('.', 1)[0])}:/shared"], name
        # glusterd and its brick run in their own network namespace: nothing of them listens in the host's
        served = gluster_processes(sim)
        names = {Path(f"/proc/{pid}/comm").read_text().strip() for pid in served}
        assert {"glusterd", "glusterfsd", "glusterfs"} <= names, names
        listening = subprocess.run(["ss", "-H", "-l", "-t", "-n", "-p"], capture_output=True, text=True).stdout
        assert not any(f"pid={pid}," in listening for pid in served), listening

        results = evaluate(sim, tmp_path / "run")
        statuses = {key: r["status"] for key, r in results.items()}
        mkdir = results.pop(("storage.consistency.mkdir_race", "node1+node2"))
        assert {key: r["status"] for key, r in results.items()} == {
            (check, "node1+node2"): "pass" for check in CHECKS if check != "storage.consistency.mkdir_race"}, \
            {key: r["summary"] for key, r in results.items()}
        # GlusterFS 10.3 keeps a real race of its own: two clients creating one directory at once can leave one of
        # them with the other's handle (ESTALE) or a lookup that misses it (EEXIST), about once in 1500 calls
        # as the simulation tunes it (sim/sharedfs.py) — the check reports it when it happens, nothing else
        assert statuses[("storage.consistency.mkdir_race", "node1+node2")] in ("pass", "fail"), mkdir["summary"]
        if mkdir["status"] == "fail":
            assert set(mkdir["evidence"]["failures"]) <= {"EEXIST", "ESTALE"}, mkdir["evidence"]
        flock = results[("storage.consistency.flock", "node1+node2")]
        assert "fuse.glusterfs" in flock["summary"] and flock["evidence"]["control"]["excluded"] == 200
        assert flock["evidence"]["here_holds"]["excluded"] + flock["evidence"]["peer_holds"]["excluded"] == 200
        visible = results[("storage.consistency.visibility", "node1+node2")]
        assert 0 <= visible["value"] < 3
        report = the_report(tmp_path / "run")
        assert report["self"] == "node1" and report["directories"][0]["peers"]["node2"]["status"] == "ok"
        # the run's directory on the shared home is gone
        assert not list((sim / "shared").glob(".clustereval-consistency-*"))
    assert gluster_processes(sim) == set() and cluster.processes(sim) == {}


def test_sshfs_home_fails_cross_node_locks_while_the_same_node_control_passes(tmp_path):
    sim = tmp_path / "sim"
    with simulated_cluster(sim, 2, "sharedfs-nolocks"):
        assert cluster.status(sim)["shared_fs"]["type"] == "sshfs"
        results = evaluate(sim, tmp_path / "run")
        for check in LOCKS:
            result = results[(check, "node1+node2")]
            assert result["status"] == "fail", result["summary"]
            assert "do not exclude across nodes" in result["summary"] and "fuse.sshfs" in result["summary"]
            control = result["evidence"]["control"]
            assert control["attempts"] == control["excluded"] == 200, control
            assert result["value"] == 200  # every cross-node attempt got the lock the other node held
        for check in CHECKS[2:]:
            result = results[(check, "node1+node2")]
            assert result["status"] == "pass", result["summary"]

        # select before running: only the test the tags name runs on the node
        again = evaluate(sim, tmp_path / "names-only", tags="storage.consistency.colon_names")
        assert sorted(again) == [("storage.consistency.colon_names", "node1+node2")]
        assert the_report(tmp_path / "names-only")["tests"] == ["colon"]
        nothing = evaluate(sim, tmp_path / "none", tags="audit.os.kernel")  # nothing of the performance phase
        assert nothing == {} and not (tmp_path / "none" / "raw" / "node1" / "storage-consistency.json").exists()


def test_without_glusterfs_the_reference_falls_back_to_sshfs_and_status_says_why(tmp_path, monkeypatch, capsys):
    real = sharedfs.unavailable
    monkeypatch.setattr(sharedfs, "unavailable", lambda kind="sshfs": (
        "glusterd is not installed (apt-get install glusterfs-server glusterfs-client iproute2)"
        if kind == "glusterfs" else real(kind)))
    if real("sshfs"):
        pytest.skip(real("sshfs"))
    sim = tmp_path / "sim"
    with simulated_cluster(sim, 1, "reference"):
        shared = cluster.status(sim)["shared_fs"]
        assert shared["type"] == "sshfs" and shared["server_alive"], shared
        assert "glusterfs asked for, but glusterd is not installed" in shared["note"]
        hosts, _ = read_inventory(sim)
        assert node_ssh(sim, hosts["node1"], "findmnt -n -o FSTYPE /home").stdout.strip() == "fuse.sshfs"
        cli._print_status(cluster.status(sim))
        assert "its locks do not cross nodes" in capsys.readouterr().out
