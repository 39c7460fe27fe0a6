"""Parser for NVIDIA Xid / SXid events in kernel logs, plus the Xid catalogue.

Understands the NVRM driver's ``NVRM: Xid (PCI:0000:9b:00): 119, pid=..., name=..., <message>`` lines
(R450 to R580 era: with or without ``pid=``/``name=``, ``pid='<unknown>'``) and the NVSwitch driver's
``nvidia-nvswitchN: SXid (PCI:...): 11004, Non-fatal, Link 36 ...`` triplets (message, ``Severity``,
``Data {...}``), in every way kernel messages reach us:

* ``dmesg`` (``[ 8123.617543] ...``), ``dmesg -T`` (``[Sun Feb 23 16:24:18 2025] ...``),
  ``dmesg --decode --time-format iso`` (``kern  :warn  : 2025-01-21T02:21:33,498559+00:00 ...``);
* ``journalctl -k`` in the syslog layout (any locale's month names, e.g. ``Okt 06 17:59:27 host kernel:``)
  and ``-o short-iso``;
* raw ``/dev/kmsg`` records (``6,3964,206764307,-;...``);
* bare lines, and lines wrapped by other tools (``[gpu-health] [WARN] GPU-...: XID: NVRM: Xid ...``).

Timestamps are kept as printed. The catalogue (``data/xid_catalogue.yml``) is exposed through
:func:`xid_catalogue` and :func:`xid_info`.
"""

from __future__ import annotations

import functools
import re
from importlib import resources
from typing import Any

from clustereval import yamldata
from clustereval.parsers import register
from clustereval.parsers._common import result, to_int
from clustereval.parsers.errors import ParseError

TOOL = "kernel-xid"

_KMSG = re.compile(r"^(\d+),(\d+),(\d+),[^;]*;(.*)$")
_DECODE = re.compile(r"^(kern|user|mail|daemon|auth|syslog|lpr|news|uucp|cron|authpriv|ftp|local[0-7])\s*:"
                     r"\s*(emerg|alert|crit|err|warn|notice|info|debug)\s*:\s(.*)$")
_ISO = re.compile(r"^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?)\s(.*)$")
_MONO = re.compile(r"^\[\s*(\d+\.\d+)\]\s?(.*)$")
_CTIME = re.compile(r"^\[([A-Z][a-z]{2} [A-Z][a-z]{2}\s+\d{1,2} \d{2}:\d{2}:\d{2} \d{4})\]\s?(.*)$")
_JOURNAL_ISO = re.compile(r"^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?)\s+"
                          r"(\S+)\s+kernel:\s?(.*)$")
_JOURNAL = re.compile(r"^(\S{2,6}\s+\d{1,2}\s+\d{2}:\d{2}:\d{2})\s+(\S+)\s+kernel:\s?(.*)$")

_XID = re.compile(r"NVRM: Xid \(([^)]*)\):\s*(\d+)\s*,\s?(.*)$")
_SXID = re.compile(r"(?:(nvidia-nvswitch\d+):\s*)?SXid \(([^)]*)\):\s*(\d+)\s*,\s?(.*)$")
_PCI = re.compile(r"([0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-7])?)")
_GPU_UUID = re.compile(r"NVRM: GPU at PCI:([0-9a-fA-F:.]+):\s*(GPU-[0-9a-fA-F-]+)")

_NOTICES = (
    ("fallen_off_bus", re.compile(r"fallen off the bus", re.IGNORECASE)),
    ("gpu_reset_needed", re.compile(r"GPU likely needs to be reset|needs to be reset", re.IGNORECASE)),
    ("pcie_bandwidth_limited", re.compile(r"available PCIe bandwidth, limited by")),
    ("peermem_error", re.compile(r"nvidia-peermem.*\bERROR\b")),
    ("nvrm_api_mismatch", re.compile(r"NVRM: API mismatch")),
    ("nvswitch_fatal", re.compile(r"nvidia-nvswitch\d*:.*\bfatal\b(?!.*Non-fatal)", re.IGNORECASE)),
)


@functools.cache
def _load_catalogue() -> dict[int, dict[str, Any]]:
    text = resources.files("clustereval.parsers").joinpath("data/xid_catalogue.yml").read_text("utf-8")
    data = yamldata.load(text) or {}
    return {int(entry["code"]): dict(entry) for entry in data.get("xids", [])}


def xid_catalogue() -> dict[int, dict[str, Any]]:
    """NVIDIA Xid catalogue: code -> {code, name, meaning, immediate_action, severity, ...} (a copy)."""
    return {code: dict(entry) for code, entry in _load_catalogue().items()}


def xid_info(code: int | str) -> dict[str, Any] | None:
    """Catalogue entry for one Xid code, or None when the catalogue does not know it."""
    number = to_int(str(code))
    entry = _load_catalogue().get(number) if number is not None else None
    return dict(entry) if entry else None


def _split_prefix(line: str) -> tuple[str, dict[str, Any]]:
    """Strip the timestamp/host prefix of one kernel log line; return (message, metadata)."""
    meta: dict[str, Any] = {"timestamp": None, "timestamp_format": None, "layout": "bare"}
    match = _KMSG.match(line)
    if match:
        meta.update(timestamp=match.group(3), timestamp_format="kmsg-us", seq=int(match.group(2)),
                    priority=int(match.group(1)), layout="kmsg")
        return match.group(4), meta
    match = _DECODE.match(line)
    if match:
        meta.update(facility=match.group(1), level=match.group(2), layout="dmesg-decode")
        line = match.group(3)
        iso = _ISO.match(line)
        if iso:
            meta.update(timestamp=iso.group(1), timestamp_format="iso", layout="dmesg-decode-iso")
            return iso.group(2), meta
    for pattern, fmt, layout in ((_CTIME, "ctime", "dmesg-T"), (_MONO, "monotonic", "dmesg")):
        match = pattern.match(line)
        if match:
            meta.update(timestamp=match.group(1), timestamp_format=fmt)
            meta["layout"] = layout if meta["layout"] == "bare" else meta["layout"]
            return match.group(2), meta
    for pattern, fmt, layout in ((_JOURNAL_ISO, "iso", "journalctl-iso"), (_JOURNAL, "syslog", "journalctl")):
        match = pattern.match(line)
        if match:
            meta.update(timestamp=match.group(1), timestamp_format=fmt, host=match.group(2), layout=layout)
            message = match.group(3)
            inner = _MONO.match(message)  # syslog daemons often keep dmesg's own timestamp
            if inner:
                meta["uptime"] = inner.group(1)
                message = inner.group(2)
            return message, meta
    return line, meta


def _pci(location: str) -> str | None:
    match = _PCI.search(location)
    return match.group(1).lower() if match else None


def _xid_event(match: re.Match[str], meta: dict[str, Any], raw: str) -> dict[str, Any]:
    rest = match.group(3)
    pid = process = None
    pid_match = re.match(r"pid=([^,]*),\s?", rest)
    if pid_match:
        pid = to_int(pid_match.group(1).strip("'\""))
        rest = rest[pid_match.end():]
        name_match = re.match(r"name=([^,]*),\s?", rest)
        if name_match:
            name = name_match.group(1).strip()
            process = None if name.strip("'\"") in ("<unknown>", "") else name
            rest = rest[name_match.end():]
    event = {"timestamp": meta["timestamp"], "kind": "xid", "code": int(match.group(2)),
             "pci": _pci(match.group(1)), "location": match.group(1), "pid": pid, "process": process,
             "message": rest.strip(), "raw": raw}
    if meta.get("host"):
        event["host"] = meta["host"]
    return event


def _sxid_event(match: re.Match[str], meta: dict[str, Any], raw: str) -> dict[str, Any]:
    message = match.group(4).strip()
    fatal = None
    if re.match(r"Non-fatal\b", message, re.IGNORECASE):
        fatal = False
    elif re.match(r"Fatal\b", message, re.IGNORECASE):
        fatal = True
    link = re.search(r"\bLink (\d+)\b", message)
    switch = match.group(1)
    event = {"timestamp": meta["timestamp"], "kind": "sxid", "code": int(match.group(3)),
             "pci": _pci(match.group(2)), "location": match.group(2), "pid": None, "process": None,
             "switch": switch, "fatal": fatal, "link": int(link.group(1)) if link else None,
             "message": message, "raw": raw, "details": []}
    if meta.get("host"):
        event["host"] = meta["host"]
    return event


def _is_sxid_detail(message: str) -> bool:
    return bool(re.match(r"(Severity \d+|Data \{)", message))


@register("kernel-xid")
def parse(text: str) -> dict[str, Any]:
    """Xid/SXid events from any kernel log layout named in the module docstring."""
    if not text or not text.strip():
        raise ParseError("kernel-xid: the output is empty (a kernel log is never empty: was dmesg denied "
                         "by kernel.dmesg_restrict, or did the journal query match nothing?)")
    stripped = text.strip()
    if re.match(r"^dmesg: read kernel buffer failed", stripped):
        raise ParseError(f"kernel-xid: {stripped.splitlines()[0]} - run dmesg as root or set "
                         "kernel.dmesg_restrict=0")
    events: list[dict[str, Any]] = []
    notices: list[dict[str, Any]] = []
    notice_counts: dict[str, int] = {}
    gpus: dict[str, str] = {}
    warnings: list[str] = []
    formats: dict[str, int] = {}
    lines = 0
    for raw in text.split("\n"):
        line = raw.rstrip()
        if not line.strip():
            continue
        lines += 1
        message, meta = _split_prefix(line.strip())
        formats[meta["layout"]] = formats.get(meta["layout"], 0) + 1
        xid = _XID.search(message)
        if xid:
            events.append(_xid_event(xid, meta, line))
            continue
        sxid = _SXID.search(message)
        if sxid:
            event = _sxid_event(sxid, meta, line)
            if _is_sxid_detail(event["message"]):
                owner = next((e for e in reversed(events) if e["kind"] == "sxid"
                              and e["code"] == event["code"] and e["location"] == event["location"]), None)
                if owner is not None:
                    owner["details"].append(event["message"])
                    continue
            events.append(event)
            continue
        if re.search(r"\bS?Xid\b", message):
            warnings.append(f"line mentions an Xid but is not in a known layout: {line[:160]!r}")
        uuid = _GPU_UUID.search(message)
        if uuid:
            gpus[uuid.group(1).lower()] = uuid.group(2)
        for kind, pattern in _NOTICES:
            if pattern.search(message):
                notice_counts[kind] = notice_counts.get(kind, 0) + 1
                if notice_counts[kind] <= 50:  # storms repeat one line thousands of times
                    notices.append({"timestamp": meta["timestamp"], "kind": kind, "message": message.strip()})
                break

    counts: dict[str, int] = {}
    sxid_counts: dict[str, int] = {}
    summary: dict[tuple[str, int], dict[str, Any]] = {}
    for event in events:
        bucket = counts if event["kind"] == "xid" else sxid_counts
        bucket[str(event["code"])] = bucket.get(str(event["code"]), 0) + 1
        if event["kind"] == "xid" and event["pci"] in gpus:
            event["gpu_uuid"] = gpus[event["pci"]]
        key = (event["kind"], event["code"])
        entry = summary.get(key)
        if entry is None:
            info = xid_info(event["code"]) if event["kind"] == "xid" else None
            entry = {"kind": event["kind"], "code": event["code"], "count": 0,
                     "first_timestamp": event["timestamp"], "last_timestamp": event["timestamp"],
                     "pcis": [], "name": info["name"] if info else None,
                     "severity": info["severity"] if info else None,
                     "immediate_action": info["immediate_action"] if info else None}
            summary[key] = entry
        entry["count"] += 1
        entry["last_timestamp"] = event["timestamp"]
        if event["pci"] and event["pci"] not in entry["pcis"]:
            entry["pcis"].append(event["pci"])
    if any(n > 50 for n in notice_counts.values()):
        warnings.append("repeated notices were capped at 50 each; notice_counts has the totals")
    # the layout most lines share names the sub-format (dmesg, dmesg-T, journalctl-iso, kmsg, ...)
    dominant = max(formats.items(), key=lambda kv: kv[1])[0] if formats else "bare"
    return result(TOOL, dominant, complete=True, warnings=warnings, events=events,
                  xid_count=sum(counts.values()), sxid_count=sum(sxid_counts.values()),
                  counts_by_code=counts, sxid_counts_by_code=sxid_counts,
                  codes=sorted(summary.values(), key=lambda e: (e["kind"], e["code"])),
                  gpus_by_pci=gpus, notices=notices, notice_counts=notice_counts, lines=lines)
