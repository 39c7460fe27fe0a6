"""Parser for AMD ``amd-smi`` text output (AMD SMI 24.x-26.x, ROCm 6.2-7.x).

Sub-formats:

* ``keyvalue`` - ``amd-smi list`` / ``static`` / ``metric``: ``GPU: 0`` blocks of indented ``KEY: value``
  lines and nested ``SECTION:`` headers, returned as nested mappings per GPU.
* ``monitor`` - ``amd-smi monitor [-p -t -v -q --violation ...]``: one row per (logical) GPU under an
  upper-case column header, values with units (``248 W``, ``55 °C``, ``283 MB``, ``99 %``, ``1920 MHz``)
  normalised into unit-named keys (``power_w``, ``gpu_temp_c``, ``vram_used_mb``, ``gfx_util_pct``,
  ``gfx_clock_mhz``), plus the ``PROCESS INFO:`` table when present. The 26.x default set's ``VRAM_USAGE``
  cell (``0.3/192.0 GB``, ``0.5/ 24.0 GB``: ``f"{used:5.1f}/{total:5.1f} GB"``) gives ``vram_used_gb`` and
  ``vram_total_gb``.
* ``monitor-watch`` - ``amd-smi monitor ... -w N [-W T] [-i K]`` (``AMDSMIHelpers.handle_watch``): the line
  ``'CTRL' + 'C' to stop watching output:``, then per interval a table whose header starts with
  ``TIMESTAMP`` (``'TIMESTAMP'.rjust(10) + '  GPU ...'``) and whose rows start with the epoch seconds,
  followed by two blank lines (``print("\n")``). ``rows`` holds every row of every interval (with
  ``timestamp``), ``gpus`` the last interval's rows, ``samples`` the number of intervals read.
* ``topology`` - ``amd-smi topology``: every ``<NAME> TABLE:`` as a BDF x BDF mapping.
"""

from __future__ import annotations

import re
from typing import Any

from clustereval.parsers import register
from clustereval.parsers._common import indent_columns, result, to_float
from clustereval.parsers.errors import ParseError

TOOL = "amd-smi"

_UNITS = {"W": "w", "°C": "c", "C": "c", "MB": "mb", "GB": "gb", "KB": "kb", "B": "b", "%": "pct",
          "MHz": "mhz", "Mhz": "mhz", "ns": "ns", "us": "us", "Mb/s": "mbitps", "mW": "mw"}
_BANNER = "'CTRL' + 'C' to stop watching output:"
# A table header of monitor (``GPU  POWER ...``) or of its watch mode (`` TIMESTAMP  GPU  POWER ...``).
_MONITOR_HEADER = re.compile(r"^(?:TIMESTAMP\s+)?GPU\s+[A-Z]")
# ``used/total unit`` as one cell (the default set's VRAM_USAGE: ``0.3/192.0 GB``, ``0.5/ 24.0 GB``).
_FRACTION = re.compile(r"(-?\d+(?:\.\d+)?)/\s*(-?\d+(?:\.\d+)?)")
_BDF = re.compile(r"^(?:[0-9a-fA-F]{4}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$")


def _value(token: str) -> float | int | str | None:
    if token == "N/A":
        return None
    number = to_float(token)
    if number is None:
        return token
    return int(number) if number.is_integer() and "." not in token else number


def _parse_keyvalue(text: str) -> dict[str, Any]:
    gpus: list[dict[str, Any]] = []
    warnings: list[str] = []
    stack: list[tuple[int, dict[str, Any]]] = []
    elided = False
    for raw in text.split("\n"):
        if not raw.strip():
            continue
        if raw.strip() in ("...", "[...]"):
            elided = True
            continue
        indent = indent_columns(raw)
        key, sep, value = raw.strip().partition(":")
        if not sep:
            warnings.append(f"line not understood: {raw.strip()[:120]!r}")
            continue
        key, value = key.strip(), value.strip()
        if indent == 0 and key == "GPU":
            gpu: dict[str, Any] = {"gpu": _value(value)}
            gpus.append(gpu)
            stack = [(0, gpu)]
            continue
        if not stack:
            warnings.append(f"line before the first 'GPU:' block: {raw.strip()[:120]!r}")
            continue
        while len(stack) > 1 and indent <= stack[-1][0]:
            stack.pop()
        parent = stack[-1][1]
        name = key.lower()
        if value == "":
            child: dict[str, Any] = {}
            parent[name] = child
            stack.append((indent, child))
        else:
            unit = re.fullmatch(r"(-?\d+(?:\.\d+)?)\s?(%|W|°C|C|MHz|MB|GB)", value)
            if unit:
                parent[f"{name}_{_UNITS[unit.group(2)]}"] = _value(unit.group(1))
            else:
                parent[name] = _value(value) if re.fullmatch(r"-?\d+(?:\.\d+)?", value) else value
    if not gpus:
        raise ParseError("amd-smi: no 'GPU: N' block found")
    if elided:
        warnings.append("output elided ('...'): not every GPU or field is listed")
    return result(TOOL, "keyvalue", complete=not elided, warnings=warnings, gpus=gpus, gpu_count=len(gpus))


def _cells(line: str) -> list[tuple[str, str | None]]:
    """Whitespace tokens with a following unit token glued on: ``248 W`` -> ("248", "W")."""
    words = _FRACTION.sub(r"\1/\2", line.replace("\xa0", " ")).split()
    cells: list[tuple[str, str | None]] = []
    for word in words:
        if word in _UNITS and cells and cells[-1][1] is None and (
                cells[-1][0] == "N/A" or to_float(cells[-1][0]) is not None or _FRACTION.fullmatch(cells[-1][0])):
            cells[-1] = (cells[-1][0], word)
        else:
            cells.append((word, None))
    return cells


def _parse_table(lines: list[str], warnings: list[str]) -> tuple[list[dict[str, Any]], bool]:
    header = lines[0].split()
    rows: list[dict[str, Any]] = []
    elided = False
    for line in lines[1:]:
        stripped = line.strip()
        if stripped in ("...", "[...]"):
            elided = True
            continue
        cells = _cells(stripped)
        if len(cells) != len(header):
            warnings.append(f"row with {len(cells)} cells for {len(header)} columns: {stripped[:120]!r}")
            continue
        row: dict[str, Any] = {}
        for name, (token, unit) in zip(header, cells, strict=True):
            key = name.lower()
            fraction = _FRACTION.fullmatch(token)
            if fraction:
                base, suffix = key.removesuffix("_usage"), f"_{_UNITS.get(unit, (unit or '').lower())}" if unit else ""
                row[f"{base}_used{suffix}"] = _value(fraction.group(1))
                row[f"{base}_total{suffix}"] = _value(fraction.group(2))
                continue
            value = _value(token)
            if unit in ("GB", "KB", "B") and isinstance(value, (int, float)):
                # process memory columns mix B, KB and GB from row to row: normalise to bytes
                value = value * {"B": 1, "KB": 1024, "GB": 1024**3}[unit]
                row[f"{key}_bytes"] = int(value)
            elif unit:
                row[f"{key}_{_UNITS.get(unit, unit.lower())}"] = value
            else:
                row[key] = value
        rows.append(row)
    return rows, elided


def _parse_monitor(text: str) -> dict[str, Any]:
    warnings: list[str] = []
    lines = [ln.rstrip() for ln in text.split("\n")]
    blocks: list[list[str]] = []
    current: list[str] | None = None
    watch = False
    for line in lines:
        if not line.strip():
            current = None
            continue
        if line.strip() == _BANNER:
            watch = True
            current = None
            continue
        if line.strip() == "PROCESS INFO:":
            current = None
            blocks.append(["PROCESS INFO:"])
            continue
        if _MONITOR_HEADER.match(line.strip()):
            watch = watch or line.strip().startswith("TIMESTAMP")
            current = [line.strip()]
            if blocks and blocks[-1] == ["PROCESS INFO:"]:
                blocks[-1] = ["PROCESS INFO:", *current]
                current = blocks[-1]
            else:
                blocks.append(current)
            continue
        if current is not None:
            current.append(line)
        elif len(warnings) < 20:
            warnings.append(f"line outside any table: {line.strip()[:120]!r}")
    gpus: list[dict[str, Any]] = []
    samples: list[list[dict[str, Any]]] = []
    processes: list[dict[str, Any]] = []
    elided = False
    for block in blocks:
        if block[0] == "PROCESS INFO:":
            if len(block) > 1:
                rows, cut = _parse_table(block[1:], warnings)
                processes.extend(rows)
                elided = elided or cut
            continue
        rows, cut = _parse_table(block, warnings)
        if rows:
            samples.append(rows)
        gpus.extend(rows)
        elided = elided or cut
    if not gpus:
        raise ParseError("amd-smi monitor: a column header but no GPU rows (cut short?)")
    if elided:
        warnings.append("rows were elided ('...'): not every GPU is listed")
    if watch:
        last = samples[-1]
        return result(TOOL, "monitor-watch", complete=not elided, warnings=warnings, rows=gpus, gpus=last,
                      gpu_count=len({r.get("gpu") for r in gpus}), samples=len(samples), processes=processes)
    return result(TOOL, "monitor", complete=not elided, warnings=warnings, gpus=gpus, gpu_count=len(gpus),
                  processes=processes)


def _parse_topology(text: str) -> dict[str, Any]:
    tables: dict[str, dict[str, dict[str, str]]] = {}
    warnings: list[str] = []
    name = None
    columns: list[str] = []
    in_legend = False
    for raw in text.split("\n"):
        line = raw.strip()
        if not line:
            continue
        if line == "Legend:":
            in_legend = True
            continue
        if in_legend and not line.endswith("TABLE:"):
            continue
        in_legend = False
        title = re.match(r"^([A-Z][A-Z -]*?) TABLE:$", line)
        if title:
            name = title.group(1).lower().replace(" ", "_").replace("-", "_")
            tables[name] = {}
            columns = []
            continue
        tokens = line.split()
        if name is not None and not columns and all(re.fullmatch(r"[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.\d", t)
                                                    for t in tokens):
            columns = tokens
            continue
        if name is not None and columns and _BDF.match(tokens[0]):
            # a launcher-prefix cleaner may have taken the "0000:" domain off the row label
            label = next((c for c in columns if c.endswith(tokens[0])), tokens[0])
            if len(tokens) - 1 != len(columns):
                warnings.append(f"{name}: row {label} has {len(tokens) - 1} of {len(columns)} cells")
            tables[name][label] = dict(zip(columns, tokens[1:], strict=False))
            continue
        if len(warnings) < 20:
            warnings.append(f"line not understood: {line[:120]!r}")
    if not tables:
        raise ParseError("amd-smi topology: no '<NAME> TABLE:' section found")
    complete = all(len(t) == len(next(iter(t.values()), {})) and t for t in tables.values())
    return result(TOOL, "topology", complete=complete, warnings=warnings, tables=tables,
                  bdfs=sorted({bdf for t in tables.values() for bdf in t}))


@register("amd-smi")
def parse(text: str) -> dict[str, Any]:
    """amd-smi key/value, monitor or topology output (see the module docstring)."""
    if not text or not text.strip():
        raise ParseError("amd-smi: the output is empty")
    if re.search(r"^[A-Z][A-Z -]* TABLE:\s*$", text, re.MULTILINE):
        return _parse_topology(text)
    if re.search(r"^\s*(?:TIMESTAMP\s+)?GPU\s+[A-Z_%]+\s+[A-Z_%]+", text, re.MULTILINE):
        return _parse_monitor(text)
    if re.search(r"^GPU:\s*\d+", text, re.MULTILINE):
        return _parse_keyvalue(text)  # also ``metric -w N`` (the watch banner, then one block per GPU per interval)
    if _BANNER in text:
        return _parse_monitor(text)  # a watch banner and nothing after it yet
    raise ParseError("amd-smi: output not recognised as 'GPU: N' blocks, a monitor table or a topology table")
