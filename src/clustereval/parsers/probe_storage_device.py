"""Parser for the ``storage_scratch_device`` probe (``checks/probes/storage.yml``): what backs a directory.

The probe prints ``mount: <SOURCE> <FSTYPE>`` (``findmnt -T``) and, for a block device, ``disk: <name>
<TRAN> <ROTA> <TYPE>`` (``lsblk -nd`` of the device's disk; TRAN is empty for virtio and many RAID
controllers). Result: ``source``, ``fstype``, ``disk``, ``transport`` (``nvme`` also when the disk is named
``nvme*``, None when unknown), ``rotational`` (bool, None when unknown) and ``kind``: ``nvme``, ``ssd``
(non-rotational, not NVMe), ``hdd``, ``virtual`` (virtio ``vd*``/``xvd*`` disks), ``memory`` (tmpfs,
ramfs), ``network`` (NFS, Lustre, GPFS, sshfs, ...) or ``unknown``.
"""

from __future__ import annotations

import re
from typing import Any

from clustereval.parsers import register
from clustereval.parsers._common import result
from clustereval.parsers.errors import ParseError

TOOL = "probe-storage-device"
MEMORY = {"tmpfs", "ramfs"}
NETWORK = {"nfs", "nfs4", "lustre", "gpfs", "beegfs", "cifs", "smb3", "cephfs", "fuse.sshfs", "fuse.weka",
           "wekafs", "fuse.juicefs", "glusterfs", "fuse.glusterfs"}


def _kind(fstype: str | None, disk: str | None, transport: str | None, rotational: bool | None) -> str:
    if fstype in MEMORY:
        return "memory"
    if fstype in NETWORK:
        return "network"
    if transport == "nvme":
        return "nvme"
    if disk and re.match(r"^x?vd[a-z]", disk):
        return "virtual"
    if rotational is False:
        return "ssd"
    if rotational is True:
        return "hdd"
    return "unknown"


@register(TOOL)
def parse(text: str) -> dict[str, Any]:
    source = fstype = disk = transport = None
    rotational: bool | None = None
    seen_mount = False
    for line in text.splitlines():
        key, _, value = line.partition(": ")
        words = value.split()
        if key == "mount":
            seen_mount = True
            source, fstype = [*words, None, None][:2]
        elif key == "disk" and words:
            disk = words[0]
            rest = words[1:]
            if rest and rest[-1] in ("disk", "part", "raid0", "raid1", "raid10", "md", "lvm", "crypt", "loop"):
                rest = rest[:-1]
            if rest and rest[-1] in ("0", "1"):
                rotational = rest[-1] == "1"
                rest = rest[:-1]
            transport = rest[0].lower() if rest else None
    if not seen_mount:
        raise ParseError(f"{TOOL}: no 'mount:' line (findmnt did not run)")
    if source is None:
        raise ParseError(f"{TOOL}: findmnt found no filesystem for the directory")
    if disk and disk.startswith("nvme"):
        transport = "nvme"
    return result(TOOL, "text", complete=True, source=source, fstype=fstype, disk=disk, transport=transport,
                  rotational=rotational, kind=_kind(fstype, disk, transport, rotational))
