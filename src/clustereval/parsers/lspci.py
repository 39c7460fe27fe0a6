"""Parser for ``lspci`` from pciutils 3.x: ``-vvv`` (optionally ``-nn``/``-D``) device blocks and ``-tv`` trees.

``-vvv``: one block per function (``15:01.0 PCI bridge: ...`` or ``0000:15:01.0 ...``) with class, description,
``[vvvv:dddd]`` ids and ``[cccc]`` class id when printed with ``-nn``, revision, prog-if, and from the indented
lines: subsystem, NUMA node, IOMMU group, physical slot, kernel driver/modules, link capability and status
(speed, width, ``downgraded`` when the link trains below its capability) and the Access Control Services
capability/control bits as ``{"SrcValid": True, "ReqRedir": False, ...}``. Mail-archive copies still in
quoted-printable encoding (``=3D``, soft line breaks) are decoded and reported (``complete: False``), and
author elisions (``....``) are reported too. Only relative indentation tells a device's own fields from a
capability's body, so a capture whose tabs became spaces (``expand``, a terminal copy, a log pipeline)
reads the same.

``-tv``: the tree is walked by column to give each function its ``bus:dev.fn`` address, its name, and the
bus range behind each bridge.
"""

from __future__ import annotations

import quopri
import re
from typing import Any

from clustereval.parsers import register
from clustereval.parsers._common import indent_columns, result, to_int
from clustereval.parsers.errors import ParseError

_HEADER = re.compile(
    r"^(?:(?P<domain>[0-9a-fA-F]{4}):)?(?P<bus>[0-9a-fA-F]{2}):(?P<dev>[0-9a-fA-F]{2})\.(?P<fn>[0-7])\s+"
    r"(?P<cls>[^:\[]+?)(?:\s+\[(?P<clsid>[0-9a-fA-F]{4})\])?:\s+(?P<rest>.*)$"
)
_IDS = re.compile(r"\[([0-9a-fA-F]{4}):([0-9a-fA-F]{4})\]")
_REV = re.compile(r"\(rev ([0-9a-fA-F]+)\)")
_PROGIF = re.compile(r"\(prog-if ([0-9a-fA-F]{2})(?: \[([^\]]*)\])?\)")
_BIT = re.compile(r"([A-Za-z][A-Za-z0-9]*)([+-])")
_LINK = re.compile(r"Speed ([\d.]+GT/s)[^,]*, Width x(\d+)")
_TREE_TOKEN = re.compile(
    r"\[(?:(?P<dom>[0-9a-fA-F]{4}):)?(?P<bus>[0-9a-fA-F]{2})(?:-[0-9a-fA-F]{2})?\]|(?P<fn>[0-9a-fA-F]{2}\.[0-7])"
)
_SIMPLE_FIELDS = {"Subsystem": "subsystem", "NUMA node": "numa_node", "IOMMU group": "iommu_group",
                  "Physical Slot": "physical_slot", "Kernel driver in use": "driver",
                  "Kernel modules": "kernel_modules", "Device tree node": "device_tree_node"}


def _bits(text: str) -> dict[str, bool]:
    return {name: sign == "+" for name, sign in _BIT.findall(text)}


def _decode_quoted_printable(text: str) -> str:
    return quopri.decodestring(text.encode("utf-8", errors="replace")).decode("utf-8", errors="replace")


def _parse_vvv(text: str, warnings: list[str]) -> tuple[list[dict[str, Any]], bool]:
    devices: list[dict[str, Any]] = []
    device: dict[str, Any] | None = None
    elided = False
    capability: str | None = None
    field_indent: int | None = None  # columns of the block's own field lines; capability bodies sit deeper
    for raw in text.split("\n"):
        if not raw.strip():
            continue
        if not raw[:1].isspace():
            match = _HEADER.match(raw.strip())
            if match:
                rest = match.group("rest")
                ids = _IDS.findall(rest)
                rev = _REV.search(rest)
                progif = _PROGIF.search(rest)
                description = _PROGIF.sub("", _REV.sub("", rest))
                if ids:
                    description = description.replace(f"[{ids[-1][0]}:{ids[-1][1]}]", "")
                domain = match.group("domain") or "0000"
                device = {
                    "slot": f"{match.group('bus')}:{match.group('dev')}.{match.group('fn')}".lower(),
                    "address": f"{domain}:{match.group('bus')}:{match.group('dev')}.{match.group('fn')}".lower(),
                    "class": match.group("cls").strip(),
                    "class_id": match.group("clsid"),
                    "description": " ".join(description.split()),
                    "vendor_id": ids[-1][0].lower() if ids else None,
                    "device_id": ids[-1][1].lower() if ids else None,
                    "rev": rev.group(1) if rev else None,
                    "prog_if": progif.group(1) if progif else None,
                    "acs_cap": None,
                    "acs_ctl": None,
                }
                devices.append(device)
                capability, field_indent = None, None
                continue
            if device is None and not set(raw.strip()) <= {"."}:
                warnings.append(f"unrecognised line: {raw.strip()[:160]}")
                continue
            # otherwise a field line that lost its indentation (e.g. to a launcher-prefix strip): read it as one
        line = raw.strip()
        if set(line) <= {"."}:
            elided = True
            continue
        if device is None:
            warnings.append(f"indented line before any device: {line[:160]}")
            continue
        # lspci indents a device's fields one tab and a capability's body two; a copy may have turned the tabs
        # into spaces of any width, so a line is the device's own when it is no deeper than the first one
        indent = indent_columns(raw)
        if indent and field_indent is None:
            field_indent = indent
        device_level = indent <= (field_indent or 0)
        if line.startswith("Capabilities:"):
            capability = line
            continue
        key, _, value = line.partition(":")
        key, value = key.strip(), value.strip()
        if key in _SIMPLE_FIELDS and (capability is None or device_level):
            device[_SIMPLE_FIELDS[key]] = to_int(value) if key in ("NUMA node", "IOMMU group") else value
        elif key == "ACSCap":
            device["acs_cap"] = _bits(value)
        elif key == "ACSCtl":
            device["acs_ctl"] = _bits(value)
        elif key in ("LnkCap", "LnkSta"):
            link = _LINK.search(value)
            if link:
                prefix = "link_cap" if key == "LnkCap" else "link_sta"
                device[f"{prefix}_speed"] = link.group(1)
                device[f"{prefix}_width"] = int(link.group(2))
    for item in devices:
        if "link_cap_speed" in item and "link_sta_speed" in item:
            cap_speed = float(item["link_cap_speed"].rstrip("GT/s"))
            sta_speed = float(item["link_sta_speed"].rstrip("GT/s"))
            item["link_downgraded"] = sta_speed < cap_speed or item["link_sta_width"] < item["link_cap_width"]
        acs = item.get("acs_ctl")
        item["acs_enabled"] = None if acs is None else any(acs.get(b) for b in ("ReqRedir", "CmpltRedir",
                                                                                 "SrcValid", "UpstreamFwd"))
    return devices, elided


def _parse_tree(text: str) -> list[dict[str, Any]]:
    devices: list[dict[str, Any]] = []
    bus_at_column: dict[int, tuple[str, str]] = {}
    domain = "0000"
    for line in text.split("\n"):
        pending: tuple[str, str] | None = None
        for match in _TREE_TOKEN.finditer(line):
            if match.group("bus"):
                if match.group("dom"):
                    domain = match.group("dom").lower()
                bus = (domain, match.group("bus").lower())
                nxt = match.end()
                while nxt < len(line) and line[nxt] == "-":
                    nxt += 1
                if nxt < len(line) and line[nxt] in "+\\":
                    bus_at_column[nxt] = bus
                    pending = None
                else:
                    pending = bus
                continue
            fn = match.group("fn").lower()
            start = match.start()
            if pending is not None:
                parent, pending = pending, None
            else:
                parent = bus_at_column.get(start - 2)
            tail = line[match.end():]
            name_match = re.match(r"^\s{2}(\S.*?)\s*$", tail)
            bridge = re.match(r"^-\[([0-9a-fA-F]{2})(?:-([0-9a-fA-F]{2}))?\]", tail)
            devices.append({
                "slot": f"{parent[1]}:{fn}" if parent else None,
                "address": f"{parent[0]}:{parent[1]}:{fn}" if parent else None,
                "function": fn,
                "name": name_match.group(1) if name_match else None,
                "secondary_bus_range": (f"{bridge.group(1)}-{bridge.group(2) or bridge.group(1)}".lower()
                                        if bridge else None),
            })
    return devices


@register("lspci")
def parse(text: str) -> dict[str, Any]:
    """Parse ``lspci -vvv [-nn] [-D]`` blocks or an ``lspci -tv`` tree."""
    if not text or not text.strip():
        raise ParseError("lspci: the output is empty")
    warnings: list[str] = []
    stripped_lines = [ln.strip() for ln in text.split("\n") if ln.strip()]
    if stripped_lines and all(ln[0] in "+|\\-" for ln in stripped_lines):
        devices = _parse_tree(text)
        if not devices:
            raise ParseError("lspci: a -tv tree without any device function")
        return result("lspci", "tree", complete=True, warnings=warnings, devices=devices, bridges=[])
    encoded = "=3D" in text or bool(re.search(r"=\n", text))
    if encoded:
        text = _decode_quoted_printable(text)
        warnings.append("the text was still quoted-printable encoded (mail archive copy); decoded before parsing")
    devices, elided = _parse_vvv(text, warnings)
    if not devices:
        raise ParseError("lspci: no device line like '15:01.0 PCI bridge: ...' found")
    if elided:
        warnings.append("lines were elided ('....') by whoever captured the output")
    bridges = [d for d in devices if d["class"] == "PCI bridge"]
    return result(
        "lspci", "verbose",
        complete=not encoded and not elided,
        warnings=warnings,
        devices=devices,
        bridges=[d["slot"] for d in bridges],
        acs_enabled_bridges=[d["slot"] for d in bridges if d.get("acs_enabled")],
        downgraded_links=[d["slot"] for d in devices if d.get("link_downgraded")],
    )
