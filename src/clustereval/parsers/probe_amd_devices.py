"""Readers of the ``amd_devices`` probe (``checks/probes/amd.yml``) and of RCCL's version sources.

The probe prints ``key=value`` lines (parser ``probe-key-equals-value``); these pure functions read the
values whose own format is not a plain word:

* ``dev=``: GNU coreutils ``stat -c '%F|%a|%U|%G|%g|%t:%T|%n'`` of ``/dev/kfd`` and ``/dev/dri/*``
  (``character special file|660|root|render|109|e2:0|/dev/kfd``; %t:%T are the major and minor in hex);
* ``id=`` / ``job_id=``: coreutils ``id [USER]`` (``uid=1000(eval) gid=1000(eval) groups=1000(eval),44(video)``;
  a name id cannot resolve prints only the number);
* ``group=``: ``getent group NAME`` rows (``render:x:109:eval,alice``);
* ``drm=``: ``renderD128 0000:05:00.0 amdgpu 1002:74A1`` (from the render node's ``device/uevent``:
  ``PCI_SLOT_NAME``, ``DRIVER``, ``PCI_ID``; ``-`` for what it lacks);
* RCCL: the ``#define NCCL_MAJOR/MINOR/PATCH`` lines of ``rccl/rccl.h`` (RCCL's CMakeLists fills
  ``src/nccl.h.in`` from makefiles/version.mk and installs it as ``include/rccl/rccl.h``), and the
  AMD repository's ``rccl`` package version (``2.26.6.70002-56~24.04``: RCCL's version, then the ROCm
  release ``70002``), which distribution packages (``librccl1 6.1.2-1``, versioned by ROCm release) are not.

Every reader raises only :class:`~clustereval.parsers.ParseError`.
"""

from __future__ import annotations

import re
from typing import Any

from clustereval.parsers.errors import ParseError

_ID_PART = re.compile(r"^(\d+)(?:\((.*)\))?$")
_DEFINE = re.compile(r"^\s*#\s*define\s+NCCL_(MAJOR|MINOR|PATCH)\s+(\d+)\b")
_RCCL_PACKAGE = re.compile(r"^(?:\d+:)?(2\.\d+\.\d+)(?:[.~+-]|$)")
FILE_TYPES = {"character special file": "char", "block special file": "block", "regular file": "file",
              "regular empty file": "file", "directory": "dir", "symbolic link": "link", "fifo": "fifo"}


def device_entry(value: str) -> dict[str, Any]:
    """One ``dev=`` value as ``{path, type, mode, owner, group, gid, major, minor}`` (mode an int)."""
    cells = str(value).split("|")
    if len(cells) != 7:
        raise ParseError(f"device line {value!r} is not stat's 7 fields TYPE|MODE|USER|GROUP|GID|MAJ:MIN|PATH")
    kind, mode, owner, group, gid, numbers, path = (c.strip() for c in cells)
    if not re.fullmatch(r"[0-7]{1,4}", mode):
        raise ParseError(f"device line {value!r}: mode {mode!r} is not octal")
    if not gid.isdigit():
        raise ParseError(f"device line {value!r}: gid {gid!r} is not a number")
    if not path.startswith("/"):
        raise ParseError(f"device line {value!r}: {path!r} is not a path")
    major = minor = None
    match = re.fullmatch(r"([0-9a-fA-F]+):([0-9a-fA-F]+)", numbers)
    if match:
        major, minor = int(match.group(1), 16), int(match.group(2), 16)
    return {"path": path, "type": FILE_TYPES.get(kind, kind), "mode": int(mode, 8), "owner": owner,
            "group": group, "gid": int(gid), "major": major, "minor": minor}


def identity(text: str) -> dict[str, Any]:
    """coreutils ``id`` output as ``{uid, user, gid, groups: {gid: name}}``."""
    fields = dict(part.split("=", 1) for part in str(text).split() if "=" in part)
    if "uid" not in fields or "gid" not in fields:
        raise ParseError(f"not `id` output (no uid= and gid=): {text!r}")

    def one(part: str) -> tuple[int, str]:
        match = _ID_PART.match(part.strip())
        if not match:
            raise ParseError(f"`id` field {part!r} is not NUMBER(NAME)")
        return int(match.group(1)), match.group(2) or match.group(1)

    uid, user = one(fields["uid"])
    gid, group = one(fields["gid"])
    groups = dict(one(p) for p in fields.get("groups", "").split(",") if p.strip()) or {gid: group}
    groups.setdefault(gid, group)
    return {"uid": uid, "user": user, "gid": gid, "groups": groups}


def group_row(value: str) -> dict[str, Any]:
    """A ``getent group`` row as ``{name, gid, members}``."""
    cells = str(value).strip().split(":")
    if len(cells) != 4 or not cells[0] or not cells[2].isdigit():
        raise ParseError(f"not a group row NAME:x:GID:MEMBERS: {value!r}")
    return {"name": cells[0], "gid": int(cells[2]), "members": [m for m in cells[3].split(",") if m.strip()]}


def drm_entry(value: str) -> dict[str, Any]:
    """A ``drm=`` value as ``{node, bdf, driver, vendor, device}`` (None for a ``-`` field)."""
    cells = str(value).split()
    if len(cells) != 4 or not re.fullmatch(r"(renderD|card)\d+", cells[0]):
        raise ParseError(f"drm line {value!r} is not NODE BDF DRIVER VENDOR:DEVICE")
    node, bdf, driver, ids = (None if c == "-" else c for c in cells)
    vendor = device = None
    if ids:
        match = re.fullmatch(r"([0-9a-fA-F]{4}):([0-9a-fA-F]{4})", ids)
        if not match:
            raise ParseError(f"drm line {value!r}: PCI id {ids!r} is not VVVV:DDDD")
        vendor, device = match.group(1).lower(), match.group(2).lower()
    return {"node": node, "bdf": bdf.lower() if bdf else None, "driver": driver, "vendor": vendor, "device": device}


def rccl_header_version(text: str) -> str | None:
    """``2.26.6`` from the ``#define NCCL_MAJOR 2`` / ``NCCL_MINOR 26`` / ``NCCL_PATCH 6`` lines of rccl.h
    (None when any of the three is missing)."""
    found: dict[str, str] = {}
    for line in str(text or "").splitlines():
        match = _DEFINE.match(line)
        if match:
            found.setdefault(match.group(1), match.group(2))
    if set(found) != {"MAJOR", "MINOR", "PATCH"}:
        return None
    return f"{int(found['MAJOR'])}.{int(found['MINOR'])}.{int(found['PATCH'])}"


def rccl_package_version(version: str) -> str | None:
    """RCCL's own version from the AMD repository's ``rccl`` package version (``2.26.6.70002-56~24.04`` ->
    ``2.26.6``); None for a version that does not start with RCCL's 2.x numbering (a distribution package
    versioned by its ROCm release)."""
    match = _RCCL_PACKAGE.match(str(version or "").strip())
    return match.group(1) if match else None
