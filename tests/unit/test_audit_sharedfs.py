"""Shared filesystem on every node: per-host facts from findmnt -J, compared across the fleet."""

from __future__ import annotations

import json

from clustereval.checks import Context
from clustereval.checks.audit_sharedfs import shared_mounts, sharedfs_facts
from clustereval.parsers import parse
from tests.helpers import judge, probe


def findmnt(*extra: tuple[str, str, str]) -> str:
    """findmnt -J -o TARGET,SOURCE,FSTYPE,OPTIONS of our own: / with /proc and the given children."""
    children = [{"target": "/proc", "source": "proc", "fstype": "proc", "options": "rw,nosuid"}]
    children += [{"target": t, "source": s, "fstype": f, "options": "rw,relatime"} for t, f, s in extra]
    return json.dumps({"filesystems": [{"target": "/", "source": "/dev/nvme0n1p2", "fstype": "ext4",
                                        "options": "rw,relatime", "children": children}]}, indent=3)


NFS = ("/home", "nfs4", "filer:/export/home")
LUSTRE = ("/lustre", "lustre", "10.1.0.1@o2ib:/scratch")


def facts_of(text: str, rc: int = 0, **extra) -> dict:
    facts = sharedfs_facts(Context(subject="n", probes=probe("sharedfs_findmnt", text, rc=rc, **extra)))
    return {**facts, "problems": facts["problems"], "artifacts": facts["artifacts"]}


def run(fleet: dict) -> dict:
    return judge("audit.sharedfs.shared_fs", fleet=fleet, subject="_cluster")


def mounts(text: str) -> list[dict]:
    return parse("findmnt-json", text)["filesystems"]


class TestSharedMounts:
    def test_keeps_network_filesystems_only(self):
        assert shared_mounts(mounts(findmnt(NFS, ("/scratch", "xfs", "/dev/md0")))) == {
            "/home": {"fstype": "nfs4", "source": "filer:/export/home"}}

    def test_an_automount_point_takes_its_mounted_filesystems_type(self):
        text = json.dumps({"filesystems": [{"target": "/", "fstype": "ext4", "source": "/dev/sda", "children": [
            {"target": "/data", "fstype": "autofs", "source": "systemd-1", "children": [
                {"target": "/data", "fstype": "nfs", "source": "nas:/data"}]}]}]})
        assert shared_mounts(mounts(text))["/data"]["fstype"] == "nfs"

    def test_unreadable_json_is_a_problem_of_the_facts(self):
        facts = facts_of("findmnt: unknown column")
        assert "sharedfs_mounts" not in facts and "unreadable JSON" in facts["problems"]["sharedfs"]


class TestSharedFs:
    def test_pass_when_every_node_has_the_mounts(self):
        fleet = {h: facts_of(findmnt(NFS, LUSTRE)) for h in ("n1", "n2", "n3")}
        result = run(fleet)
        assert result["status"] == "pass" and "/home (nfs4)" in result["summary"] and result["value"] == 3

    def test_fail_names_the_nodes_missing_a_mount(self):
        fleet = {"n1": facts_of(findmnt(NFS, LUSTRE)), "n2": facts_of(findmnt(NFS)), "n3": facts_of(findmnt(NFS))}
        result = run(fleet)
        assert result["status"] == "fail"
        assert "/lustre" in result["summary"] and "missing on n2, n3" in result["summary"]
        assert result["evidence"]["mounts"]["/lustre"]["missing_on"] == ["n2", "n3"]

    def test_warn_when_the_same_path_comes_from_another_server(self):
        fleet = {"n1": facts_of(findmnt(NFS)), "n2": facts_of(findmnt(("/home", "nfs4", "filer2:/export/home")))}
        result = run(fleet)
        assert result["status"] == "warn" and "filer2" in result["summary"]

    def test_warn_when_no_node_has_a_shared_filesystem(self):
        result = run({"n1": facts_of(findmnt()), "n2": facts_of(findmnt())})
        assert result["status"] == "warn" and "no network or parallel filesystem" in result["summary"]

    def test_unreachable_nodes_are_named_not_failed(self):
        result = run({"n1": facts_of(findmnt(NFS)), "n2": facts_of(findmnt(NFS)), "n3": None})
        assert result["status"] == "pass" and "n3" in result["summary"]

    def test_skip_when_every_node_is_unreachable(self):
        assert run({"n1": None, "n2": None})["status"] == "skip"

    def test_error_when_no_mount_table_could_be_read(self):
        result = run({"n1": facts_of("garbage"), "n2": facts_of("", rc=None, timed_out=True, timeout=20)})
        assert result["status"] == "error"
