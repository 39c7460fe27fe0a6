"""The simulated cluster's shared filesystem: SSHFS from a storage host, mounted on every node.

A real cluster shares home directories over NFS, Lustre, GPFS, Weka...; none of those runs without kernel
modules this machine lacks, so the simulated storage host is one more OpenSSH ``sshd`` (its own loopback
address, ``.254`` of the cluster's block) exporting ``D/shared`` over SFTP, and each node mounts it with
the real ``sshfs`` (FUSE, filesystem type ``fuse.sshfs``) inside its own mount namespace. Files written on
one node are read on the others over the network stack, as on any shared filesystem.

Profile: ``shared_fs`` (cluster-wide, or per node) is the mount point on the nodes (default ``/home``,
where most clusters put the shared home directories; empty: no shared filesystem). Fault:
``sharedfs_missing: true`` leaves that node without the mount (it missed it at boot).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

FAULTS = {"sharedfs_missing"}
DEFAULT_MOUNT = "/home"
STORAGE_HOST_INDEX = 254
FSTYPE = "fuse.sshfs"


def mount_point(settings: dict[str, Any]) -> str | None:
    """Where this node mounts the shared filesystem, or None when it does not."""
    if (settings.get("faults") or {}).get("sharedfs_missing"):
        return None
    point = settings.get("shared_fs", DEFAULT_MOUNT)
    return str(point) if point else None


def unavailable() -> str | None:
    """Why this machine cannot mount SSHFS (None when it can)."""
    if not shutil.which("sshfs"):
        return "sshfs is not installed (apt-get install sshfs)"
    if not os.path.exists("/dev/fuse"):
        return "/dev/fuse is missing (no FUSE in this kernel or container)"
    return None


def server_config(address: str, host_key: Path, authorized_keys: Path, pid_file: Path) -> str:
    """sshd_config of the storage host: key logins only, SFTP in-process."""
    return "\n".join([
        f"ListenAddress {address}:22",
        f"HostKey {host_key}",
        f"PidFile {pid_file}",
        "PermitRootLogin prohibit-password",
        "PubkeyAuthentication yes",
        "PasswordAuthentication no",
        "KbdInteractiveAuthentication no",
        "UsePAM no",
        f"AuthorizedKeysFile {authorized_keys}",
        "StrictModes no",
        "Subsystem sftp internal-sftp",
        "LogLevel ERROR",
        "MaxStartups 100:30:200",
        "",
    ])


def mount_command(address: str, export: Path, point: str, key: Path) -> list[str]:
    """``sshfs`` in the foreground (so the simulation owns the process) mounting ``export`` at ``point``."""
    options = ",".join([
        f"IdentityFile={key}", "StrictHostKeyChecking=no", "UserKnownHostsFile=/dev/null", "LogLevel=ERROR",
        "BatchMode=yes", "allow_other", "default_permissions", "reconnect", "ServerAliveInterval=15",
        "ServerAliveCountMax=3",
    ])
    return ["sshfs", "-f", "-o", options, f"root@{address}:{export}", point]


def mounted(pid: int, point: str) -> bool:
    """Whether the mount namespace of process ``pid`` has the SSHFS mount at ``point``."""
    try:
        with open(f"/proc/{pid}/mounts", encoding="utf-8") as fh:
            return any(line.split()[1:3] == [point, FSTYPE] for line in fh if len(line.split()) > 2)
    except OSError:
        return False
