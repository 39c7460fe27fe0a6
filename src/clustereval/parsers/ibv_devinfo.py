"""Parser for ``ibv_devinfo`` (rdma-core libibverbs 17-50 and legacy MLNX_OFED 4.x verbs; plain or ``-v``).

Understands ``hca_id:`` blocks with tab-separated (rdma-core) or space-aligned fields, the legacy
``Device ports:`` header, ``port: N`` sub-blocks (``state: PORT_ACTIVE (4)``, MTUs, LIDs, link layer), HCAs
without ``board_id`` (Soft-RoCE), and, with ``-v``, ``active_width``/``active_speed`` from which the port rate
is computed in Gb/s, ``GID[ n]:`` lines and the flag names listed under ``*_cap_flags``.

``-v`` also prints indented capability sub-blocks whose set grows with every rdma-core release
(``general_odp_caps:``, ``rss_caps:`` with a nested ``supported_qp:``, ``raw packet caps:``, ``cq moderation
caps:``...). Any header line without a value opens such a sub-block, whatever its name; it is kept under
``caps[<header>]`` (a list of its flag lines, or a dict of its fields with nested blocks and ``flags``) and
never makes the parse fail. The tag-matching fields, which rdma-core prints flat beside the device fields
(``max_rndv_hdr_size``, ``max_num_tags``, ``max_ops``, ``max_sge``, ``flags:``), are gathered into
``caps["tm_caps"]`` so that their ``max_sge`` does not shadow the device's. ``... not supported`` lines are
listed under ``unsupported``.

Field names decide where a known line belongs; indentation is only compared between a sub-block header and
the lines after it, in columns (tabs expanded), so a capture whose tabs became spaces, of any width, reads
the same. An ``hca_id:`` line indented deeper than its own fields (a document re-indented the capture) is
reported and makes the result ``complete: False``.
"""

from __future__ import annotations

import re
from typing import Any

from clustereval.parsers import register
from clustereval.parsers._common import indent_columns, result, to_float, to_int
from clustereval.parsers.errors import ParseError

_HCA = re.compile(r"^hca_id:\s*(\S+)\s*$")
_PORT = re.compile(r"^port:\s*(\d+)\s*$")
_KV = re.compile(r"^([A-Za-z_][A-Za-z0-9_ .]*?):\s*(.*?)\s*$")
_GID = re.compile(r"^GID\[\s*(\d+)\]:\s*(\S+)(?:,\s*(.*))?$")
_CODED = re.compile(r"^(.*?)\s*\((-?\d+)\)$")
_HCA_FIELDS = {"transport", "fw_ver", "node_guid", "sys_image_guid", "vendor_id", "vendor_part_id", "hw_ver",
               "board_id", "phys_port_cnt"}
_PORT_FIELDS = {"state", "max_mtu", "active_mtu", "sm_lid", "port_lid", "port_lmc", "link_layer",
                "max_msg_sz", "port_cap_flags", "port_cap_flags2", "max_vl_num", "bad_pkey_cntr",
                "qkey_viol_cntr", "sm_sl",
                "pkey_tbl_len", "gid_tbl_len", "subnet_timeout", "init_type_reply", "active_width",
                "active_speed", "effective_speed", "phys_state"}
# Keys this parser fills itself: a printed field of the same name goes under "other" instead.
_OWN_KEYS = {"name", "ports", "port", "gids", "flags", "caps", "unsupported", "other"}
# The tag-matching fields rdma-core prints flat after max_rndv_hdr_size (print_tm_caps in devinfo.c).
_TM_FIRST = "max_rndv_hdr_size"
_TM_FIELDS = frozenset({"max_num_tags", "max_ops", "max_sge", "flags"})
_FLAG = re.compile(r"^[A-Z][A-Z0-9_]+$")
_WIDTH = {"1X": 1, "2X": 2, "4X": 4, "8X": 8, "12X": 12}


class _Block:
    """One indented sub-block: its fields (nested blocks included) and its flag lines.

    ``members`` is set for a group the tool prints flat (tag matching): it holds the following lines
    with those names at its own indentation instead of lines indented deeper.
    """

    def __init__(self, indent: int, members: frozenset[str] | None = None) -> None:
        self.indent = indent
        self.members = members
        self.fields: dict[str, Any] = {}
        self.flags: list[str] = []

    def holds(self, key: str, indent: int) -> bool:
        if self.members is not None:
            return key in self.members and indent >= self.indent
        return indent > self.indent

    def export(self) -> list[str] | dict[str, Any]:
        if not self.fields:
            return list(self.flags)
        out = {key: value.export() if isinstance(value, _Block) else value for key, value in self.fields.items()}
        if self.flags:
            out["flags" if "flags" not in out else "flag_lines"] = list(self.flags)
        return out


def _unique(fields: dict[str, Any], key: str) -> str:
    """``key``, or ``key#2``... when a sub-block of that name was already seen at this level."""
    name, count = key, 2
    while name in fields:
        name = f"{key}#{count}"
        count += 1
    return name


def _export_caps(holder: dict[str, Any]) -> None:
    if "caps" in holder:
        holder["caps"] = {name: block.export() for name, block in holder["caps"].items()}


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
    _export_caps(port)


class _Reader:
    """The line-by-line state of one parse: the current HCA, port, open sub-blocks and flag target."""

    def __init__(self) -> None:
        self.hcas: list[dict[str, Any]] = []
        self.warnings: list[str] = []
        self.failures: list[str] = []
        self.hca: dict[str, Any] = {}
        self.port: dict[str, Any] | None = None
        self.blocks: list[_Block] = []
        # where the flag lines after the last key line go: a block's list, or (owner, key) for owner["flags"][key]
        self.flags_to: list[str] | tuple[dict[str, Any], str] | None = None
        self.key_indent = 0

    def start_hca(self, name: str) -> None:
        self.hca = {"name": name, "ports": []}
        self.hcas.append(self.hca)
        self.port, self.blocks, self.flags_to = None, [], None

    def start_port(self, number: int) -> None:
        self.port = {"port": number, "gids": []}
        self.hca["ports"].append(self.port)
        self.blocks, self.flags_to = [], None

    def field(self, key: str, value: str, indent: int) -> None:
        while self.blocks and not self.blocks[-1].holds(key, indent):
            self.blocks.pop()
        known = key in _HCA_FIELDS or (self.port is not None and key in _PORT_FIELDS)
        if known:
            self.blocks = []
        owner = self.port if self.port is not None else self.hca
        self.key_indent = indent
        tm_group = key == _TM_FIRST and not self.blocks and self.port is None
        if not value or tm_group:
            block = _Block(indent, members=_TM_FIELDS if tm_group else None)
            siblings = self.blocks[-1].fields if self.blocks else owner.setdefault("caps", {})
            siblings[_unique(siblings, "tm_caps" if tm_group else key)] = block
            self.blocks.append(block)
            self.flags_to = block.flags
            if not value:
                return
        if self.blocks and not known:
            block = self.blocks[-1]
            block.fields[_unique(block.fields, key)] = value
            self.flags_to = block.flags
        elif key in _OWN_KEYS or (owner is self.port and key not in _PORT_FIELDS):
            owner.setdefault("other", {}).setdefault(key, value)
            self.flags_to = None
        else:
            owner.setdefault(key, value)  # the first wins: a repeat is a sub-block that lost its indentation
            self.flags_to = (owner, key)

    def loose_line(self, line: str, indent: int) -> None:
        """A line without ``key: value``: a flag name under the last key, or a ``... not supported`` note."""
        if self.flags_to is not None and (indent > self.key_indent or _FLAG.match(line)):
            if isinstance(self.flags_to, list):
                self.flags_to.append(line)
            else:
                owner, key = self.flags_to
                owner.setdefault("flags", {}).setdefault(key, []).append(line)
            return
        while self.blocks and self.blocks[-1].indent >= indent:
            self.blocks.pop()
        self.flags_to = None
        if line.endswith("not supported"):
            (self.port if self.port is not None else self.hca).setdefault("unsupported", []).append(line)
        else:
            self.warnings.append(f"unrecognised line: {line[:160]}")

    def finish(self) -> None:
        for item in self.hcas:
            for key in ("phys_port_cnt", "vendor_part_id"):
                if key in item:
                    item[key] = to_int(item[key])
            coded = _CODED.match(str(item.get("transport") or ""))
            if coded:
                item["transport"] = coded.group(1)
            item.setdefault("board_id", None)
            item.setdefault("fw_ver", None)
            _export_caps(item)
            for entry in item["ports"]:
                _finish_port(entry)


@register("ibv_devinfo")
def parse(text: str) -> dict[str, Any]:
    """Parse ``ibv_devinfo`` output into HCAs with firmware, board id, GUIDs and ports."""
    if not text or not text.strip():
        raise ParseError("ibv_devinfo: the output is empty")
    reader = _Reader()
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
            reader.start_hca(match.group(1))
            header_indent = indent
            continue
        if line.startswith(("No IB devices found", "Failed", "libibverbs:")) or "ibv_open_device" in line:
            reader.failures.append(line)
            continue
        if not reader.hcas:
            reader.warnings.append(f"line before any hca_id: {line[:160]}")
            continue
        match = _PORT.match(line)
        if match:
            reader.start_port(int(match.group(1)))
            continue
        match = _GID.match(line)
        if match and reader.port is not None:
            reader.port["gids"].append({"index": int(match.group(1)), "gid": match.group(2),
                                        "type": match.group(3)})
            continue
        match = _KV.match(line)
        if match and not line.startswith("Unknown flags:"):
            reader.field(match.group(1).strip(), match.group(2), indent_columns(raw))
        else:
            reader.loose_line(line, indent_columns(raw))
    hcas, warnings, failures = reader.hcas, reader.warnings, reader.failures
    if not hcas:
        reason = failures[0] if failures else "no 'hca_id:' line"
        raise ParseError(f"ibv_devinfo: no device found: {reason}")
    reader.finish()
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
