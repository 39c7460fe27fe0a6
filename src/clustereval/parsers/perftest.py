"""Parser for perftest (linux-rdma/perftest 4.x-25.x: ib_write_bw, ib_read_bw, ib_send_bw, ib_atomic_bw
and the matching ``*_lat`` tools).

Understands the run banner (``RDMA_Write BW Test``), the two-column ``Key : Value`` settings block (tabs or
spaces), ``local address``/``remote address``/``GID`` lines, bandwidth tables in ``MB/sec`` (perftest's MB is
2^20 bytes) or ``Gb/sec`` (``--report_gbits``), latency tables with or without ``t_avg``/``t_stdev``/
percentile columns, server and client output interleaved in one capture (exact duplicate rows
are dropped), and
``libibverbs: Warning`` / ``Conflicting CPU frequency`` lines anywhere, including inside the table.
Bandwidths are normalised to ``_gbitps`` (gigabits per second); the printed values and unit are kept.
"""

from __future__ import annotations

import re
from typing import Any

from clustereval.parsers import register
from clustereval.parsers._common import result, to_float, to_int
from clustereval.parsers.errors import ParseError

_TITLE = re.compile(
    r"^\s*(?P<title>(?P<verb>[A-Za-z_ ]+?)\s+(?:Bidirectional\s+)?(?P<kind>BW|Latency)\s+Test)\s*$")
_KV = re.compile(r"([A-Za-z][A-Za-z0-9 _*./()-]*?)[ \t]*:[ \t]*(\S+)")
_ADDRESS = re.compile(r"^\s*(local|remote) address:\s*(.*)$")
_GID = re.compile(r"^\s*GID:\s*(\S+)")
_SEPARATOR = re.compile(r"^\s*-{20,}\s*$")
_COLUMN = re.compile(
    r"#bytes|#iterations|BW peak\[[^\]]*\]|BW average\[[^\]]*\]|MsgRate\[[^\]]*\]|t_\w+\[[^\]]*\]"
    r"|\d+(?:\.\d+)?% percentile\[[^\]]*\]"
)
_FAILURE = re.compile(
    r"(Couldn't .*|Unable to .*|Failed to .*|Error.*|.*\bfailed\b.*|No IB devices found.*|"
    r"IB device \S+ not found.*|Completion with error.*|.*is not supported.*)",
    re.IGNORECASE,
)
_BYTES_PER_MB = 0x100000  # perftest divides by 2^20 for MB/sec (perftest_resources.c, format_factor)

_SETTING_KEYS = {
    "Dual-port": "dual_port", "Device": "device", "Number of qps": "qps", "Transport type": "transport",
    "Connection type": "connection", "Using SRQ": "srq", "PCIe relax order": "pcie_relaxed_order",
    "ibv_wr* API": "ibv_wr_api", "TX depth": "tx_depth", "RX depth": "rx_depth",
    "CQ Moderation": "cq_moderation",
    "Mtu": "mtu", "Link type": "link_type", "GID index": "gid_index", "Max inline data": "max_inline_bytes",
    "Outstand reads": "outstanding_reads", "rdma_cm QPs": "rdma_cm", "Data ex. method": "data_exchange",
    "Use ODP": "odp", "Tx depth": "tx_depth",
}
_INT_SETTINGS = {"qps", "tx_depth", "rx_depth", "cq_moderation", "gid_index", "outstanding_reads"}


def _column_key(name: str) -> str:
    if name == "#bytes":
        return "size_bytes"
    if name == "#iterations":
        return "iterations"
    if name.startswith("BW peak"):
        return "bw_peak"
    if name.startswith("BW average"):
        return "bw_avg"
    if name.startswith("MsgRate"):
        return "msg_rate_mpps"
    if "percentile" in name:
        pct = name.split("%")[0]
        return {"99": "t_p99", "99.9": "t_p999"}.get(pct, "t_p" + pct.replace(".", ""))
    return name.split("[")[0]


def _to_gbitps(value: float | None, unit: str | None) -> float | None:
    if value is None or unit is None:
        return None
    unit = unit.lower()
    if unit in ("gb/sec", "gbit/sec", "gb/s"):
        return value
    if unit in ("mb/sec", "mb/s"):
        return round(value * _BYTES_PER_MB * 8 / 1e9, 6)
    return None


def _test_kind(verb: str | None, kind: str | None) -> str | None:
    """``write_bw``, ``read_lat``, ``send_bw``, ``atomic_bw``... from the banner words."""
    if not verb or not kind:
        return None
    word = verb.lower().replace("rdma_", "").split()[0]
    return f"{word}_{kind}"


def _address(text: str) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    tokens = text.split()
    for key, value in zip(tokens[::2], tokens[1::2], strict=False):
        fields[key.lower()] = value
    return fields


@register("perftest")
def parse(text: str) -> dict[str, Any]:
    """Parse one perftest run (client, server, or both interleaved) into settings and result rows."""
    if not text or not text.strip():
        raise ParseError("perftest: the output is empty (did ib_*_bw/ib_*_lat run at all?)")
    warnings: list[str] = []
    settings: dict[str, Any] = {}
    other_settings: dict[str, str] = {}
    title = verb = kind = None
    local: list[dict[str, Any]] = []
    remote: list[dict[str, Any]] = []
    columns: list[str] = []
    units: dict[str, str] = {}
    rows: list[dict[str, Any]] = []
    seen_rows: set[tuple[str, ...]] = set()
    duplicates = 0
    verbs_warnings: list[str] = []
    cpu_warnings = 0
    failures: list[str] = []
    closed_after_rows = False
    last_address: dict[str, Any] | None = None

    for raw in text.split("\n"):
        line = raw.strip()
        if not line or set(line) <= {"*"}:
            continue
        if _SEPARATOR.match(line):
            if rows:
                closed_after_rows = True
            continue
        if line.startswith("libibverbs:"):
            verbs_warnings.append(line)
            continue
        if line.startswith("Conflicting CPU frequency"):
            cpu_warnings += 1
            continue
        if line.startswith("* Waiting for client") or line.startswith("WARNING:"):
            continue
        match = _TITLE.match(line)
        if match:
            title = title or match.group("title")
            verb = verb or match.group("verb").strip()
            kind = kind or ("bw" if match.group("kind") == "BW" else "lat")
            continue
        match = _ADDRESS.match(line)
        if match:
            last_address = _address(match.group(2))
            (local if match.group(1) == "local" else remote).append(last_address)
            continue
        match = _GID.match(line)
        if match:
            if last_address is not None:
                last_address["gid"] = match.group(1)
            continue
        if line.startswith("#bytes"):
            names = _COLUMN.findall(line)
            if len(names) >= 2:
                columns = [_column_key(n) for n in names]
                for name in names:
                    if "[" in name:
                        units[_column_key(name)] = name[name.index("[") + 1:-1]
            else:
                warnings.append(f"table header not understood: {line[:160]}")
            continue
        tokens = line.split()
        if columns and tokens and all(to_float(t) is not None for t in tokens):
            if len(tokens) != len(columns):
                warnings.append(f"row with {len(tokens)} values for {len(columns)} columns: {line[:160]}")
                continue
            key = tuple(tokens)
            if key in seen_rows:
                duplicates += 1
                continue
            seen_rows.add(key)
            closed_after_rows = False
            values = dict(zip(columns, (to_float(t) for t in tokens), strict=True))
            row: dict[str, Any] = {"size_bytes": to_int(tokens[0]), "iterations": to_int(tokens[1])}
            if "bw_peak" in values or "bw_avg" in values:
                unit = units.get("bw_peak") or units.get("bw_avg")
                row.update({
                    "bw_peak_gbitps": _to_gbitps(values.get("bw_peak"), unit),
                    "bw_avg_gbitps": _to_gbitps(values.get("bw_avg"), unit),
                    "msg_rate_mpps": values.get("msg_rate_mpps"),
                    "bw_peak": values.get("bw_peak"),
                    "bw_avg": values.get("bw_avg"),
                    "bw_unit": unit,
                })
            for name, value in values.items():
                if name.startswith("t_"):
                    suffix = "_us" if units.get(name) == "usec" else "_" + (units.get(name) or "raw")
                    row[name + suffix] = value
            rows.append(row)
            continue
        if _FAILURE.match(line):
            failures.append(line[:200])
            continue
        if ":" in line:
            pairs = _KV.findall(line)
            if pairs:
                for key, value in pairs:
                    name = _SETTING_KEYS.get(key.strip())
                    if name:
                        settings.setdefault(name, value)
                    else:
                        other_settings.setdefault(key.strip(), value)
                continue
        warnings.append(f"unrecognised line: {line[:160]}")

    if title is None and not rows:
        if failures:
            reason = failures[0]
        elif verbs_warnings:
            reason = "only libibverbs warnings were printed"
        else:
            reason = "no perftest banner (e.g. 'RDMA_Write BW Test') and no result table"
        raise ParseError(f"perftest: no result found: {reason}")
    if kind is None and columns:
        kind = "bw" if "bw_avg" in columns else "lat"
    for name in _INT_SETTINGS:
        if name in settings:
            settings[name] = to_int(settings[name])
    mtu_bytes = to_int(str(settings.get("mtu", "")).replace("[B]", "")) if "mtu" in settings else None
    if "max_inline_bytes" in settings:
        settings["max_inline_bytes"] = to_int(str(settings["max_inline_bytes"]).replace("[B]", ""))
    if duplicates:
        warnings.append(f"{duplicates} duplicate row(s) dropped (server and client output interleaved)")
    if verbs_warnings:
        warnings.extend(verbs_warnings[:10])
    link_type = settings.get("link_type")
    best = max((r.get("bw_avg_gbitps") or 0.0 for r in rows), default=None) if kind == "bw" else None
    return result(
        "perftest",
        kind or "unknown",
        complete=bool(rows) and closed_after_rows and not failures,
        warnings=warnings,
        test=title,
        verb=verb,
        kind=kind,
        test_kind=_test_kind(verb, kind),
        device=settings.get("device"),
        link_type=link_type,
        gid_index=settings.get("gid_index"),
        mtu_bytes=mtu_bytes,
        qps=settings.get("qps"),
        transport=settings.get("transport"),
        connection=settings.get("connection"),
        rdma_cm=settings.get("rdma_cm"),
        settings=settings,
        other_settings=other_settings,
        local_addresses=local,
        remote_addresses=remote,
        columns=columns,
        units=units,
        rows=rows,
        max_bw_avg_gbitps=best,
        cpu_frequency_warnings=cpu_warnings,
        failures=failures,
    )
