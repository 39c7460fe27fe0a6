"""The simulated shared filesystem's pieces: where each node mounts it, the storage host's sshd, the sshfs line."""

from __future__ import annotations

import os

from clustereval.checks.audit_sharedfs import shared_mounts
from clustereval.sim import sharedfs
from clustereval.sim.profile import load_profile, node_settings


def test_the_reference_profile_shares_home_and_a_fault_leaves_a_node_out():
    assert sharedfs.mount_point(node_settings(load_profile("reference"), "node1")) == "/home"
    flawed = load_profile("audit-monitoring")
    assert sharedfs.mount_point(node_settings(flawed, "node1")) == "/home"
    assert sharedfs.mount_point(node_settings(flawed, "node3")) is None
    assert sharedfs.mount_point({"shared_fs": "", "faults": {}}) is None
    assert sharedfs.mount_point({"shared_fs": "/shared", "faults": {}}) == "/shared"


def test_storage_sshd_accepts_keys_only_and_serves_sftp_in_process(tmp_path):
    text = sharedfs.server_config("127.9.9.254", tmp_path / "hk", tmp_path / "ak", tmp_path / "pid")
    assert "ListenAddress 127.9.9.254:22" in text and "PasswordAuthentication no" in text
    assert "Subsystem sftp internal-sftp" in text and f"AuthorizedKeysFile {tmp_path / 'ak'}" in text


def test_sshfs_runs_in_the_foreground_without_prompting(tmp_path):
    argv = sharedfs.mount_command("127.9.9.254", tmp_path / "shared", "/home", tmp_path / "key")
    assert argv[:2] == ["sshfs", "-f"] and argv[-2:] == [f"root@127.9.9.254:{tmp_path / 'shared'}", "/home"]
    options = argv[3].split(",")
    assert "BatchMode=yes" in options and f"IdentityFile={tmp_path / 'key'}" in options


def test_the_mount_the_nodes_get_is_one_the_audit_counts_as_shared():
    findmnt = ('{"filesystems": [{"target": "/home", "source": "root@127.9.9.254:/tmp/sim/shared", '
               '"fstype": "fuse.sshfs", "options": "rw,nosuid,nodev,relatime,user_id=0,group_id=0,allow_other"}]}')
    assert shared_mounts(findmnt) == {"/home": {"fstype": "fuse.sshfs", "source": "root@127.9.9.254:/tmp/sim/shared"}}


def test_mounted_reads_the_process_mount_table():
    assert sharedfs.mounted(os.getpid(), "/proc") is False  # /proc is mounted, but not by sshfs
    assert sharedfs.mounted(2**22 + 7, "/home") is False  # no such process
