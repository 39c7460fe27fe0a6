"""Parser for ``ibv_devinfo`` (rdma-core libibverbs 17-50 and legacy MLNX_OFED 4.x verbs; plain or ``-v``).

Understands ``hca_id:`` blocks with tab-separated (rdma-core) or space-aligned fields, the legacy
``Device ports:`` header, ``port: N`` sub-blocks (``state: PORT_ACTIVE (4)``, MTUs, LIDs, link layer), HCAs
without ``board_id`` (Soft-RoCE), and, with ``-v``, ``active_width``/``active_speed`` from which the port rate
is computed in Gb/s, ``GID[ n]:`` lines and the flag names listed under ``*_cap_flags``. Field names, not
indentation, decide where a line belongs; an ``hca_id:`` line indented deeper than its own fields (a
document re-indented the capture) is reported and makes the result ``complete: False``.
"""

from __future__ import annotations

import re
from typing import Any

from clustereval.parsers import register
from clustereval.parsers._common import result, to_float, to_int
from clustereval.parsers.errors import ParseError

_HCA = re.compile(r"^hca_id:\s*(\S+)\s*$")
_PORT = re.compile(r"^port:\s*(\d+)\s*$")
_KV = re.compile(r"^([A-Za-z_][A-Za-z0-9_ .]*?):\s*(.*?)\s*$")
_GID = re.compile(r"^GID\[\s*(\d+)\]:\s*(\S+)(?:,\s*(.*))?$")
_CODED = re.compile(r"^(.*?)\s*\((-?\d+)\)$")
_PORT_FIELDS = {"state", "max_mtu", "active_mtu", "sm_lid", "port_lid", "port_lmc", "link_layer",
                "max_msg_sz", "port_cap_flags", "port_cap_flags2", "max_vl_num", "bad_pkey_cntr",
                "qkey_viol_cntr", "sm_sl",
                "pkey_tbl_len", "gid_tbl_len", "subnet_timeout", "init_type_reply", "active_width",
                "active_speed", "phys_state"}
_FLAG = re.compile(r"^[A-Z][A-Z0-9_]+$")
_WIDTH = {"1X": 1, "2X": 2, "4X": 4, "8X": 8, "12X": 12}


def _finish_port(port: dict[str, Any]) -> None:
    for key in ("state", "phys_state", "max_mtu", "active_mtu", "active_width", "active_speed"):
        coded = _CODED.match(str(port.get(key) or ""))
        if coded:
            port[key] = coded.group(1)
            port[f"{key}_code"] = int(coded.group(2))
    for key in ("max_mtu", "active_mtu", "sm_lid", "port_lid", "port_lmc"):
        if key in port:
            port[key] = to_int(port[key])
    port["active"] = port.get("state") == "PORT_ACTIVE"
    lanes = _WIDTH.get(str(port.get("active_width") or "").strip())
    speed = re.match(r"([\d.]+)\s*Gbps", str(port.get("active_speed") or ""))
    port["rate_gbitps"] = lanes * to_float(speed.group(1)) if lanes and speed and to_float(speed.group(1)) \
        else None


@register("ibv_devinfo")
def parse(text: str) -> dict[str, Any]:
    """Parse ``ibv_devinfo`` output into HCAs with firmware, board id, GUIDs and ports."""
    if not text or not text.strip():
        raise ParseError("ibv_devinfo: the output is empty")
    hcas: list[dict[str, Any]] = []
    warnings: list[str] = []
    failures: list[str] = []
    hca: dict[str, Any] | None = None
    port: dict[str, Any] | None = None
    last_key: str | None = None
    header_indent: int | None = None
    reindented = False
    for raw in text.split("\n"):
        line = raw.strip()
        if not line or line == "Device ports:":
            continue
        indent = len(raw) - len(raw.lstrip())
        if header_indent is not None:
            # tool output puts hca_id at column 0 and every field below it deeper
            reindented = reindented or indent < header_indent
            header_indent = None
        match = _HCA.match(line)
        if match:
            hca = {"name": match.group(1), "ports": []}
            hcas.append(hca)
            port = None
            header_indent = indent
            continue
        if line.startswith(("No IB devices found", "Failed", "libibverbs:")) or "ibv_open_device" in line:
            failures.append(line)
            continue
        if hca is None:
            warnings.append(f"line before any hca_id: {line[:160]}")
            continue
        match = _PORT.match(line)
        if match:
            port = {"port": int(match.group(1)), "gids": []}
            hca["ports"].append(port)
            continue
        match = _GID.match(line)
        if match and port is not None:
            port["gids"].append({"index": int(match.group(1)), "gid": match.group(2), "type": match.group(3)})
            continue
        match = _KV.match(line)
        if match:
            key, value = match.group(1).strip(), match.group(2)
            if port is not None and key in _PORT_FIELDS:
                port[key] = value
            elif port is None:
                hca[key] = value
            else:
                port.setdefault("other", {})[key] = value
            last_key = key
            continue
        if _FLAG.match(line) and last_key:
            target = port if port is not None else hca
            target.setdefault("flags", {}).setdefault(last_key, []).append(line)
            continue
        warnings.append(f"unrecognised line: {line[:160]}")
    if not hcas:
        reason = failures[0] if failures else "no 'hca_id:' line"
        raise ParseError(f"ibv_devinfo: no device found: {reason}")
    for item in hcas:
        for key in ("phys_port_cnt", "vendor_part_id"):
            if key in item:
                item[key] = to_int(item[key])
        coded = _CODED.match(str(item.get("transport") or ""))
        if coded:
            item["transport"] = coded.group(1)
        item.setdefault("board_id", None)
        item.setdefault("fw_ver", None)
        for entry in item["ports"]:
            _finish_port(entry)
    ports = [{"ca": h["name"], **p} for h in hcas for p in h["ports"]]
    short = [h["name"] for h in hcas if h.get("phys_port_cnt") and len(h["ports"]) < h["phys_port_cnt"]]
    if short:
        warnings.append(f"fewer ports listed than phys_port_cnt for {', '.join(short)}")
    if reindented:
        warnings.append("an hca_id line is indented deeper than its fields: the capture was re-indented")
    return result(
        "ibv_devinfo", "verbose" if any("active_width" in p for p in ports) else "default",
        complete=not short and not failures and not reindented,
        warnings=warnings,
        hcas=hcas,
        ports=ports,
        active_ports=sum(1 for p in ports if p["active"]),
        inactive_ports=[f"{p['ca']}/{p['port']}" for p in ports if not p["active"]],
        failures=failures,
    )
