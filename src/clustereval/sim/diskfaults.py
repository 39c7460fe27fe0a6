"""A node whose local disk is slow, or reads slower than it writes: the kernel's own block I/O throttle.

Profile faults ``disk_read_mbps`` / ``disk_write_mbps`` (per node, MB/s = 10^6 bytes/s) cap what the node's
processes read from and write to the disk that holds the cluster directory (its scratch, its root overlay):
a degraded RAID, a cloud volume with a read cap, a disk shared with a noisy neighbour. Every process of the
node (sshd and its sessions, slurmd and its jobs) runs in a blkio cgroup (cgroup v1,
``blkio.throttle.{read,write}_bps_device``) or an io cgroup (cgroup v2 ``io.max``) whose limit is the fault's.
fio measures the limit for real: direct I/O and reads are throttled in the process's context; buffered writes
are throttled only where the kernel attributes writeback to the cgroup (cgroup v2), which is what a slow disk
under a page cache looks like too.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from pathlib import Path
from typing import Any

FAULTS = {"disk_read_mbps", "disk_write_mbps"}
BLKIO_V1 = Path("/sys/fs/cgroup/blkio")


def problems(where: str, faults: dict[str, Any]) -> list[str]:
    return [f"{where}.{key}: must be a number of MB/s > 0, not {faults[key]!r}" for key in sorted(FAULTS & set(faults))
            if isinstance(faults[key], bool) or not isinstance(faults[key], int | float) or faults[key] <= 0]


def wanted(faults: dict[str, Any]) -> dict[str, int]:
    """The limits a node's faults ask for, bytes/s by direction (empty: none)."""
    return {direction: int(float(faults[f"disk_{direction}_mbps"]) * 1_000_000)
            for direction in ("read", "write") if faults.get(f"disk_{direction}_mbps")}


def disk_of(path: Path) -> str:
    """``MAJ:MIN`` of the whole disk holding ``path`` (a throttle takes a disk, not a partition)."""
    source = subprocess.run(["findmnt", "-n", "-o", "SOURCE", "-T", str(path)], capture_output=True, text=True,
                            check=False).stdout.strip()
    name = Path(source).name if source.startswith("/dev/") else ""
    block = Path("/sys/class/block") / name
    if not name or not block.exists():
        raise OSError(f"{path} is on {source or 'no block device'}, not a disk a throttle can limit")
    if (block / "partition").exists():
        block = block.resolve().parent
    return (block / "dev").read_text().strip()


def setup(cluster_name: str, directory: Path, limits: dict[str, dict[str, int]]) -> dict[str, Any]:
    """One throttled cgroup per node with limits; ``{"cgroups": {node: folder}, "device"}``, or raises
    OSError saying why this machine cannot (a profile asking for a slow disk must not get a fast one)."""
    if not limits:
        return {}
    device = disk_of(directory)
    out: dict[str, Any] = {"device": device, "cgroups": {}}
    for node, caps in limits.items():
        if BLKIO_V1.is_dir():
            folder = BLKIO_V1 / f"clustereval-{cluster_name}" / node
            folder.mkdir(parents=True, exist_ok=True)
            for direction, bps in caps.items():
                (folder / f"blkio.throttle.{direction}_bps_device").write_text(f"{device} {bps}\n")
        else:
            folder = _v2_folder(cluster_name, node)
            spec = " ".join(f"{'r' if d == 'read' else 'w'}bps={bps}" for d, bps in caps.items())
            (folder / "io.max").write_text(f"{device} {spec}\n")
        out["cgroups"][node] = str(folder)
    return out


def _v2_folder(cluster_name: str, node: str) -> Path:
    root = Path("/sys/fs/cgroup")
    if "io" not in (root / "cgroup.controllers").read_text().split() if (root / "cgroup.controllers").exists() else []:
        raise OSError("neither cgroup v1 blkio nor the cgroup v2 io controller is available")
    parent = root / f"clustereval-io-{cluster_name}"
    parent.mkdir(exist_ok=True)
    (root / "cgroup.subtree_control").write_text("+io\n")
    (parent / "cgroup.subtree_control").write_text("+io\n")
    folder = parent / node
    folder.mkdir(exist_ok=True)
    return folder


def remove(recorded: dict[str, Any]) -> None:
    """Remove the nodes' throttled cgroups (their processes are gone by then)."""
    for path in (recorded or {}).get("cgroups", {}).values():
        folder = Path(path)
        with contextlib.suppress(OSError):
            os.rmdir(folder)
        with contextlib.suppress(OSError):
            os.rmdir(folder.parent)
