"""Parser for ``nvidia-smi --query-gpu=... --format=csv[,noheader][,nounits]``, once or looped (``-l``).

Registered as ``nvidia-smi-query-loop`` and ``nvidia-smi-query``; the default ``nvidia-smi`` parser hands
CSV output to it too. Understands the CSV of every driver that has ``--query-gpu`` (R3xx to R590):
``, ``-separated values, a header with units in brackets (``memory.total [MiB]``), values with their unit
(``143771 MiB``, ``79.34 W``, ``0 %``) or without (``nounits``), ``[N/A]``/``[Not Supported]``, a
``watch`` banner line above the table, and repeated headers from concatenated runs.

Result: ``columns`` (header names as printed, or None under ``noheader``), ``fields`` (names without the
unit), ``units`` (field → unit in the header or the values), ``rows`` (one dict per line keyed by field:
numbers converted, the ``clocks_event_reasons``/``clocks_throttle_reasons`` bitmasks as ints, N/A →
None, everything else as printed; when the active-reasons mask is queried each row also carries
``throttle_reasons_active``, the decoded reason names as in the ``-q``/``-q -x`` records) and
``summary`` (per GPU index, min/max/mean of every numeric field over the rows, which is what a burn-in
check wants from a sampling loop).
"""

from __future__ import annotations

import re
from typing import Any

from clustereval.parsers import register
from clustereval.parsers._common import result, to_float, to_int
from clustereval.parsers.errors import ParseError
from clustereval.parsers.nvidia_smi_shared import decode_reasons

TOOL = "nvidia-smi-query-loop"
_NA = {"[n/a]", "n/a", "[not supported]", "not supported", "[unknown error]", "[insufficient permissions]",
       "[gpu is lost]", "[gpu requires reset]", ""}
_HEADER_FIELD = re.compile(r"^[a-z][a-z0-9_.]*(?: \[[^\]]+\])?$", re.IGNORECASE)
_VALUE_WITH_UNIT = re.compile(r"^([-+]?\d+(?:\.\d+)?)(?:\s*([A-Za-z%/]+))?$")
_MASK_FIELDS = ("clocks_event_reasons.active", "clocks_throttle_reasons.active")
_WATCH = re.compile(r"^Every\s+[\d.]+s:\s")
# Fields whose values look numeric but are identifiers or versions: keep them as printed.
_STRING_HINTS = ("version", "name", "uuid", "serial", "bus_id", "device_id", "timestamp", "pci.domain",
                 "pci.bus", "pci.device", "board_id", "inforom", "mig.mode", "compute_mode", "pstate",
                 "persistence_mode", "driver_model", "accounting", "display", "gom", "ecc.mode")
_ERRORS = re.compile(r"is not a valid field to query|No devices were found|NVIDIA-SMI has failed|"
                     r"Failed to initialize NVML|Unable to determine the device handle|"
                     r"Invalid combination of input arguments", re.IGNORECASE)


def _is_header(cells: list[str]) -> bool:
    return bool(cells) and all(_HEADER_FIELD.match(c) for c in cells) and any(
        not c.replace(".", "").isdigit() for c in cells) and any("." in c or "_" in c or c == "index"
                                                                 for c in cells)


def _split_header(cell: str) -> tuple[str, str | None]:
    match = re.match(r"^(.*?)\s*\[([^\]]+)\]$", cell)
    return (match.group(1), match.group(2)) if match else (cell, None)


def _convert(field: str, raw: str, units: dict[str, str | None]) -> Any:
    value = raw.strip()
    if value.lower() in _NA:
        return None
    low = field.lower()
    if "reasons" in low and value.lower().startswith("0x"):
        return to_int(value)
    if any(hint in low for hint in _STRING_HINTS) and low != "index":
        return value
    match = _VALUE_WITH_UNIT.match(value)
    if not match:
        return value
    if match.group(2):
        units.setdefault(field, match.group(2))
    number = to_float(match.group(1))
    if number is None:
        return value
    return int(number) if "." not in match.group(1) else number


def _summary(rows: list[dict[str, Any]], fields: list[str]) -> dict[str, dict[str, dict[str, float]]]:
    out: dict[str, dict[str, dict[str, float]]] = {}
    for row in rows:
        key = str(row.get("index", row.get("pci.bus_id", "all")))
        per_gpu = out.setdefault(key, {})
        for field in fields:
            value = row.get(field)
            if field == "index" or isinstance(value, bool) or not isinstance(value, (int, float)):
                continue
            if "reasons" in field:
                continue  # a bitmask has no meaningful mean
            stats = per_gpu.setdefault(field, {"min": value, "max": value, "sum": 0.0, "count": 0})
            stats["min"] = min(stats["min"], value)
            stats["max"] = max(stats["max"], value)
            stats["sum"] += value
            stats["count"] += 1
    for per_gpu in out.values():
        for stats in per_gpu.values():
            stats["mean"] = round(stats.pop("sum") / stats["count"], 4)
    return out


@register("nvidia-smi-query-loop", "nvidia-smi-query")
def parse(text: str) -> dict[str, Any]:
    """Parse ``nvidia-smi --query-gpu`` CSV into typed rows keyed by field name."""
    lines = [ln.rstrip() for ln in text.split("\n")]
    if not any(ln.strip() for ln in lines):
        raise ParseError("nvidia-smi --query-gpu: the output is empty")
    warnings: list[str] = []
    columns: list[str] | None = None
    fields: list[str] = []
    units: dict[str, str | None] = {}
    rows: list[dict[str, Any]] = []
    tool_errors: list[str] = []
    complete = True
    data_lines = [(i, ln) for i, ln in enumerate(lines) if ln.strip()]
    for pos, (_, line) in enumerate(data_lines):
        stripped = line.strip()
        if _WATCH.match(stripped):
            continue
        cells = [c.strip() for c in stripped.split(",")]
        if _is_header(cells):
            if columns is None:
                columns = cells
                fields = [_split_header(c)[0] for c in cells]
                units = {f: u for f, u in (_split_header(c) for c in cells)}
            elif cells != columns:
                warnings.append(f"a second, different header was ignored: {stripped[:120]!r}")
            continue
        mask_field = next((f for f in fields if f in _MASK_FIELDS), None)
        if _ERRORS.search(stripped):
            tool_errors.append(stripped)
            continue
        if columns is None:
            # noheader: name the columns by position so rows are still usable
            fields = [f"column_{n}" for n in range(len(cells))]
            units = dict.fromkeys(fields)
            columns = []
            warnings.append("no CSV header (format=csv,noheader): columns are named by position")
        if len(cells) != len(fields):
            if pos == len(data_lines) - 1 and len(cells) < len(fields):
                complete = False
                warnings.append(f"the last line is cut short ({len(cells)} of {len(fields)} values): "
                                f"{stripped[:120]!r}")
            else:
                warnings.append(f"line with {len(cells)} values where the header has {len(fields)}: "
                                f"{stripped[:120]!r}")
            continue
        row = {field: _convert(field, cell, units) for field, cell in zip(fields, cells, strict=True)}
        if mask_field is not None:
            row["throttle_reasons_active"] = decode_reasons(row.get(mask_field))
        rows.append(row)
    if not rows:
        if tool_errors:
            raise ParseError(f"nvidia-smi --query-gpu printed no values, only an error: "
                             f"{tool_errors[0][:200]}")
        if columns:
            raise ParseError("nvidia-smi --query-gpu: a header but no value lines (the output stops after "
                             "the header)")
        raise ParseError("nvidia-smi --query-gpu: no CSV header or value lines found (first line: "
                         f"{data_lines[0][1].strip()[:120]!r})")
    warnings.extend(f"nvidia-smi reported: {e[:200]}" for e in tool_errors)
    return result(
        TOOL, "csv", complete=complete, warnings=warnings,
        columns=columns or None,
        fields=fields,
        units=units,
        rows=rows,
        gpu_indices=sorted({r["index"] for r in rows if isinstance(r.get("index"), int)}),
        summary=_summary(rows, fields),
    )
