"""Parser for ``ibstat`` and ``ibstatus`` (infiniband-diags / rdma-core 17-50, MLNX_OFED 4.x-24.x).

``ibstat``: ``CA 'mlx5_0'`` blocks with CA type, firmware/hardware version, GUIDs and ``Port N:``
sub-blocks (State, Physical state, Rate in Gb/s, LIDs, capability mask, link layer), tab- or space-indented.
A capture whose ``CA`` line sits deeper than its own fields was re-indented by a document and is reported
as ``complete: False``. ``ibstatus``: ``Infiniband device 'mlx5_0' port 1 status:`` blocks with
``state: 4: ACTIVE``, ``phys state: 5: LinkUp`` and ``rate: 200 Gb/sec (4X HDR)``. The format is detected.
``ibpanic``/``ibwarn`` lines (a device that vanished mid-listing) make the result ``complete: False``.
"""

from __future__ import annotations

import re
from typing import Any

from clustereval.parsers import register
from clustereval.parsers._common import result, to_float, to_int
from clustereval.parsers.errors import ParseError

_CA = re.compile(r"^CA '([^']+)'\s*$")
_PORT = re.compile(r"^Port (\d+):\s*$")
_KV = re.compile(r"^([A-Za-z][A-Za-z _]*?):\s*(.*?)\s*$")
_IBSTATUS_HEAD = re.compile(r"^Infiniband device '([^']+)' port (\d+) status:\s*$")
_CODED = re.compile(r"^(\d+):\s*(\S.*)$")
_RATE = re.compile(r"^([\d.]+)(?:\s*Gb/sec)?(?:\s*\((.*)\))?$")

_CA_KEYS = {"CA type": "ca_type", "Number of ports": "num_ports", "Firmware version": "firmware_version",
            "Hardware version": "hardware_version", "Node GUID": "node_guid",
            "System image GUID": "system_image_guid"}
_PORT_KEYS = {"State": "state", "Physical state": "physical_state", "Rate": "rate", "Base lid": "base_lid",
              "LMC": "lmc", "SM lid": "sm_lid", "Capability mask": "capability_mask",
              "Port GUID": "port_guid", "Link layer": "link_layer"}
_IBSTATUS_KEYS = {"default gid": "default_gid", "base lid": "base_lid", "sm lid": "sm_lid", "state": "state",
                  "phys state": "physical_state", "rate": "rate", "link_layer": "link_layer"}


def _rate(raw: str | None) -> tuple[float | None, str | None]:
    """(Gb/s, width/speed note) from ``200`` or ``200 Gb/sec (4X HDR)``."""
    match = _RATE.match((raw or "").strip())
    if not match:
        return None, None
    return to_float(match.group(1)), match.group(2)


def _finish_port(port: dict[str, Any]) -> dict[str, Any]:
    for key in ("state", "physical_state"):
        coded = _CODED.match(str(port.get(key) or ""))
        if coded:
            port[f"{key}_code"] = int(coded.group(1))
            port[key] = coded.group(2).strip()
    port["rate_gbitps"], width = _rate(port.get("rate"))
    if width:
        port["width_speed"] = width
    for key in ("lmc", "base_lid", "sm_lid"):
        if key in port:
            port[key] = to_int(port[key])
    port["active"] = str(port.get("state") or "").lower() == "active"
    port["link_up"] = str(port.get("physical_state") or "").lower() == "linkup"
    return port


def _parse_ibstat(lines: list[str]) -> tuple[list[dict[str, Any]], list[str], list[str]]:
    hcas: list[dict[str, Any]] = []
    warnings: list[str] = []
    failures: list[str] = []
    hca: dict[str, Any] | None = None
    port: dict[str, Any] | None = None
    header_indent: int | None = None
    for raw in lines:
        line = raw.strip()
        if not line:
            continue
        indent = len(raw) - len(raw.lstrip())
        if header_indent is not None and indent < header_indent:
            # ibstat prints "CA '...'" at column 0 and its fields deeper: this capture was re-indented
            warnings.append(f"CA line indented deeper than its fields (near {line[:60]!r}): re-indented")
            failures.append("inconsistent indentation: the output was altered after ibstat printed it")
        header_indent = None
        if line.startswith(("ibpanic:", "ibwarn:", "ibstat:")):
            failures.append(line)
            continue
        match = _CA.match(line)
        if match:
            hca = {"name": match.group(1), "ports": []}
            hcas.append(hca)
            port = None
            header_indent = indent
            continue
        match = _PORT.match(line)
        if match and hca is not None:
            port = {"port": int(match.group(1))}
            hca["ports"].append(port)
            continue
        match = _KV.match(line)
        if match and hca is not None:
            key, value = match.groups()
            if port is not None and key in _PORT_KEYS:
                port[_PORT_KEYS[key]] = value
            elif key in _CA_KEYS:
                hca[_CA_KEYS[key]] = value
            else:
                warnings.append(f"unknown field {key!r} in CA {hca['name']}")
            continue
        warnings.append(f"unrecognised line: {line[:160]}")
    for item in hcas:
        item["num_ports"] = to_int(item.get("num_ports"))
        for entry in item["ports"]:
            _finish_port(entry)
    return hcas, warnings, failures


def _parse_ibstatus(lines: list[str]) -> tuple[list[dict[str, Any]], list[str], list[str]]:
    by_name: dict[str, dict[str, Any]] = {}
    warnings: list[str] = []
    failures: list[str] = []
    port: dict[str, Any] | None = None
    for raw in lines:
        line = raw.strip()
        if not line:
            continue
        match = _IBSTATUS_HEAD.match(line)
        if match:
            hca = by_name.setdefault(match.group(1), {"name": match.group(1), "ports": []})
            port = {"port": int(match.group(2))}
            hca["ports"].append(port)
            continue
        match = _KV.match(line)
        if match and port is not None and match.group(1).strip() in _IBSTATUS_KEYS:
            port[_IBSTATUS_KEYS[match.group(1).strip()]] = match.group(2)
            continue
        if "error" in line.lower() or "fail" in line.lower():
            failures.append(line)
            continue
        warnings.append(f"unrecognised line: {line[:160]}")
    hcas = list(by_name.values())
    for item in hcas:
        for entry in item["ports"]:
            _finish_port(entry)
    return hcas, warnings, failures


@register("ibstat")
def parse(text: str) -> dict[str, Any]:
    """Parse ``ibstat`` or ``ibstatus`` output into HCAs with their ports."""
    if not text or not text.strip():
        raise ParseError("ibstat: the output is empty (no RDMA devices, or the tool printed nothing)")
    lines = text.split("\n")
    if any(_IBSTATUS_HEAD.match(ln.strip()) for ln in lines):
        fmt = "ibstatus"
        hcas, warnings, failures = _parse_ibstatus(lines)
    else:
        fmt = "ibstat"
        hcas, warnings, failures = _parse_ibstat(lines)
    if not hcas:
        reason = failures[0] if failures else "no \"CA '...'\" or \"Infiniband device '...'\" block found"
        raise ParseError(f"ibstat: no HCA found: {reason}")
    ports = [{"ca": h["name"], **p} for h in hcas for p in h["ports"]]
    truncated = any(h.get("ports") == [] and fmt == "ibstat" for h in hcas)
    return result(
        "ibstat", fmt,
        complete=not failures and not truncated,
        warnings=warnings,
        hcas=hcas,
        ports=ports,
        active_ports=sum(1 for p in ports if p["active"]),
        inactive_ports=[f"{p['ca']}/{p['port']}" for p in ports if not p["active"]],
        failures=failures,
    )
