"""The simulated shared filesystem's pieces: where each node mounts it, which kind (GlusterFS or SSHFS), the storage
servers and the clients' command lines."""

from __future__ import annotations

import os

import pytest

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


# ------------------------------------------------------------------------------------ GlusterFS, the default


def test_the_reference_profile_asks_for_glusterfs_and_the_nolocks_profile_for_sshfs():
    reference, nolocks = load_profile("reference"), load_profile("sharedfs-nolocks")
    assert sharedfs.fs_type([node_settings(reference, n) for n in ("node1", "node2")]) == "glusterfs"
    assert sharedfs.fs_type([node_settings(nolocks, n) for n in ("node1", "node2")]) == "sshfs"
    assert sharedfs.fs_type([{}]) == sharedfs.DEFAULT_TYPE == "glusterfs"


def test_an_unknown_or_mixed_kind_is_refused_naming_the_setting():
    with pytest.raises(ValueError, match="shared_fs_type must be one of"):
        sharedfs.fs_type([{"shared_fs_type": "nfs"}])
    with pytest.raises(ValueError, match="cluster-wide"):
        sharedfs.fs_type([{"shared_fs_type": "sshfs"}, {"shared_fs_type": "glusterfs"}])


def test_without_glusterfs_the_cluster_falls_back_to_sshfs_and_says_why(monkeypatch):
    monkeypatch.setattr(sharedfs.os.path, "exists", lambda path: path == "/dev/fuse")
    monkeypatch.setattr(sharedfs.shutil, "which", lambda tool: "/usr/bin/sshfs" if tool == "sshfs" else None)
    kind, why = sharedfs.choose("glusterfs")
    assert kind == "sshfs" and "glusterd is not installed" in why and "do not cross nodes" in why
    monkeypatch.setattr(sharedfs.shutil, "which", lambda tool: None)
    assert sharedfs.choose("glusterfs") == (None, "glusterd is not installed (apt-get install glusterfs-server "
                                                  "glusterfs-client iproute2)")
    assert sharedfs.choose("sshfs") == (None, "sshfs is not installed (apt-get install sshfs)")


def test_glusterd_runs_in_namespaces_of_its_own_on_an_address_only_they_have(tmp_path):
    paths = sharedfs.gluster_paths(tmp_path / "storage")
    assert sharedfs.gluster_address("127.31.7") == "10.31.7.254"
    argv = sharedfs.glusterd_command(paths, "10.31.7.254")
    assert argv[:6] == ["unshare", "--net", "--mount", "--propagation", "private", "--"]
    script = argv[-1]
    assert "ip addr add 10.31.7.254/32 dev lo" in script and "mount -t tmpfs" in script and " /run " in script
    assert script.split(" && ")[-1].startswith("exec glusterd -N ")  # the PID started is glusterd's
    volfile = sharedfs.glusterd_volfile(paths, "10.31.7.254")
    assert "option transport.socket.bind-address 10.31.7.254" in volfile
    assert f"option working-directory {paths['workdir']}" in volfile
    assert f"option glusterd-sockfile {sharedfs.GLUSTERD_SOCKET}" in volfile


def test_the_gluster_cli_and_clients_enter_its_namespaces(tmp_path):
    paths = sharedfs.gluster_paths(tmp_path / "storage")
    create, *tune, start = sharedfs.gluster_volume_commands(paths, 4242, "10.31.7.254", tmp_path / "shared")
    assert create[:5] == ["nsenter", "-t", "4242", "--net", "--mount"]
    assert create[-5:] == ["volume", "create", "shared", f"10.31.7.254:{tmp_path / 'shared'}", "force"]
    assert start[-3:] == ["volume", "start", "shared"]
    # coherent: the bricks' upcalls invalidate the clients' metadata caches, the kernels keep none of their own
    assert ["volume", "set", "shared", "features.cache-invalidation", "on"] in [argv[-5:] for argv in tune]
    client = sharedfs.gluster_mount_command(4242, "10.31.7.254", "/home", tmp_path / "node1.log")
    assert client[:3] == ["nsenter", "--net=/proc/4242/ns/net", "glusterfs"]
    assert "-N" in client and "--volfile-id=/shared" in client and client[-1] == "/home"
    assert {"--attribute-timeout=0", "--entry-timeout=0", "--negative-timeout=0"} <= set(client)


def test_the_glusterfs_mount_is_one_the_audit_counts_as_shared():
    findmnt = ('{"filesystems": [{"target": "/home", "source": "10.31.7.254:/shared", "fstype": "fuse.glusterfs", '
               '"options": "rw,relatime,user_id=0,group_id=0,default_permissions,allow_other,max_read=131072"}]}')
    assert shared_mounts(findmnt) == {"/home": {"fstype": "fuse.glusterfs", "source": "10.31.7.254:/shared"}}


def test_namespace_processes_never_reaches_the_hosts_own_namespace():
    assert sharedfs.namespace_processes(None) == set()
    assert sharedfs.namespace_processes({"type": "sshfs"}) == set()
    assert sharedfs.namespace_processes({"netns": sharedfs.net_namespace(os.getpid())}) == set()
