"""Parser for the ``storage_tier_matrix`` probe (``checks/probes/storage.yml``): every storage tier of a node
and the fio matrix measured on it.

Per tier the probe prints ``=== tier NAME PATH``, then either one of ``missing: …``, ``unwritable: …``,
``same-filesystem: TARGET`` (a tier on a filesystem already measured under another name), or ``mount: TARGET
SOURCE FSTYPE SIZE AVAIL`` (``findmnt -b``), an optional ``disk:`` line (as the ``storage_scratch_device``
probe prints it), fio's JSON and ``fio-exit: RC``. fio sections are named ``<job>.c<clients>``: ``job`` is
``seq_write_1m_direct``, ``rand_read_4k_buffered``, ...

Result: ``tiers``, each ``name``, ``path`` and ``state`` (``measured``, ``missing``, ``unwritable``,
``same_filesystem``, ``fio_failed``, ``truncated``), ``reason`` when not measured, ``mount``, ``source``,
``fstype``, ``size_bytes``, ``avail_bytes``, ``kind`` and ``shared`` (from the filesystem type, as
``probe-storage-device`` classifies it), ``fio_exit`` and ``points``: one per (job, clients) with ``job``,
``rw``, ``clients``, ``bw_mbps`` (10^6 bytes/s), ``iops``, ``clat_mean_us``, ``clat_p50_us``, ``clat_p90_us``,
``clat_p99_us``, ``clat_p999_us`` and ``error`` (fio's errno, 0 when none).

:func:`sections` and :func:`describe` read what the tier discovery shared by the per-tier probes prints (the
``tier_discovery`` piece of ``checks/probes/storage.yml``); ``probe_storage_metadata`` reads its tiers with them.
"""

from __future__ import annotations

import re
from typing import Any

from clustereval.parsers import fio, probe_storage_device, register
from clustereval.parsers._common import result, to_int
from clustereval.parsers.errors import ParseError

TOOL = "probe-storage-tiers"
HEADER = re.compile(r"^=== tier (\S+) ?(.*)$")
SECTION = re.compile(r"^(?P<job>[a-z0-9_]+)\.c(?P<clients>\d+)$")
PERCENTILES = {"clat_p50_us": "50.000000", "clat_p90_us": "90.000000", "clat_p99_us": "99.000000",
               "clat_p999_us": "99.900000"}
MIB_TO_MB = 1.048576


def _point(job: dict[str, Any]) -> dict[str, Any] | None:
    """One fio section's aggregate (group reporting) as a point of the matrix; None for a foreign section."""
    named = SECTION.match(str(job.get("name") or ""))
    if not named:
        return None
    direction = "write" if "write" in named["job"] else "read"
    side = job.get(direction) or {}
    percentiles = side.get("clat_percentiles_us") or {}
    point = {"job": named["job"], "rw": direction, "clients": int(named["clients"]),
             "bw_mbps": round(float(side.get("bw_mibps") or 0.0) * MIB_TO_MB, 3), "iops": side.get("iops"),
             "clat_mean_us": side.get("clat_mean_us"), "error": to_int(str(job.get("error") or 0)) or 0}
    point.update({key: percentiles.get(pct) for key, pct in PERCENTILES.items()})
    return point


def _mount(tier: dict[str, Any], words: list[str], disk_line: str | None) -> None:
    if len(words) < 3:
        raise ParseError(f"tier {tier['name']}: mount line has {len(words)} fields, expected 5")
    target, source, fstype = words[:3]
    device = probe_storage_device.parse(f"mount: {source} {fstype}\n" + (disk_line or ""))
    tier.update(mount=target, source=source, fstype=fstype, kind=device["kind"],
                shared=device["kind"] == "network", transport=device["transport"],
                rotational=device["rotational"],
                size_bytes=to_int(words[3]) if len(words) > 3 else None,
                avail_bytes=to_int(words[4]) if len(words) > 4 else None)


def describe(name: str, path: str, lines: list[str]) -> dict[str, Any]:
    """A tier as the discovery printed it: ``state`` ``missing``, ``unwritable`` or ``same_filesystem`` (with the
    ``reason``), ``truncated`` (no mount line: the output was cut short), or ``mounted`` with the mount's fields
    (what the probe's measurement printed follows in ``lines``)."""
    tier: dict[str, Any] = {"name": name, "path": path, "state": "truncated"}
    keyed = {line.partition(": ")[0]: line.partition(": ")[2] for line in lines[:3] if ": " in line}
    for key, state in (("missing", "missing"), ("unwritable", "unwritable"), ("same-filesystem", "same_filesystem")):
        if key in keyed:
            tier.update(state=state, reason=keyed[key].strip())
            return tier
    if "mount" not in keyed:
        tier["reason"] = "the probe printed no mount line for the tier"
        return tier
    _mount(tier, keyed["mount"].split(), next((line for line in lines[:3] if line.startswith("disk: ")), None))
    tier["state"] = "mounted"
    return tier


def _tier(name: str, path: str, lines: list[str]) -> dict[str, Any]:
    tier = {**describe(name, path, lines), "points": []}
    if tier["state"] != "mounted":
        return tier
    tier["state"] = "truncated"
    exits = [line for line in lines if line.startswith("fio-exit: ")]
    if not exits:
        tier["reason"] = "the probe's output ends before fio did (cut short, or fio hung)"
        return tier
    tier["fio_exit"] = to_int(exits[-1].split(": ", 1)[1])
    body = "\n".join(line for line in lines if not line.startswith(("mount: ", "disk: ", "fio-exit: ")))
    try:
        measured = fio.parse(body)
    except ParseError as exc:
        tier.update(state="fio_failed", reason=f"fio printed no readable JSON (exit status {tier['fio_exit']}): "
                                               f"{exc}")
        return tier
    tier["points"] = [p for p in (_point(job) for job in measured.get("jobs") or []) if p]
    tier["fio_version"] = measured.get("fio_version")
    tier["state"] = "measured" if tier["points"] else "fio_failed"
    if not tier["points"]:
        tier["reason"] = f"fio reported no section of the matrix (exit status {tier['fio_exit']})"
    return tier


def sections(text: str) -> list[tuple[str, str, list[str]]]:
    """``(name, path, lines)`` for each ``=== tier NAME PATH`` section of the output, in order (what comes
    before the first header is not a tier's)."""
    found: list[tuple[str, str, list[str]]] = []
    for line in text.splitlines():
        header = HEADER.match(line.strip())
        if header:
            found.append((header[1], header[2].strip(), []))
        elif found:
            found[-1][2].append(line.rstrip())
    return found


@register(TOOL)
def parse(text: str) -> dict[str, Any]:
    tiers = [_tier(name, path, lines) for name, path, lines in sections(text)]
    if not tiers:
        raise ParseError("no '=== tier' section: the storage tier probe printed nothing it measured")
    return result(TOOL, "text", complete=all(t["state"] != "truncated" for t in tiers), tiers=tiers)
