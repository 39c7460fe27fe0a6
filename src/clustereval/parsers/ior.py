"""Parser for IOR (the MPI parallel I/O benchmark) text output, IOR 3.x and 4.x.

Reads the banner (``IOR-4.0.0rc2+dev: MPI Coordinated Test of Parallel I/O``), the ``Key : value``
header and ``Options:`` block, the per-iteration ``Results:`` rows (``access bw(MiB/s) IOPS
Latency(s) ...``), the ``Max Write:``/``Max Read:`` lines and the ``Summary of all tests:`` table.
Bandwidth is in MiB/s as IOR prints it (``_mibps``); times in seconds (``_s``).

``complete`` is False when the ``Finished`` line (or, failing that, the summary table) is missing, when
IOR printed ``ERROR`` lines, or when the text holds more than one IOR banner or git merge-conflict
markers (a garbled capture). ``garbled`` says the last, ``errors`` lists the ``ERROR`` lines and
``finished`` whether the ``Finished`` line is there, so a reader can tell a garbled capture (the harness's)
from a run IOR itself reported failing (the storage's).
"""

from __future__ import annotations

import re
from typing import Any

from clustereval.parsers import register
from clustereval.parsers._common import result, to_float, to_int
from clustereval.parsers.errors import ParseError

_BANNER = re.compile(r"(IOR-\S+?): MPI Coordinated Test of Parallel I/O")
_RESULT_ROW = re.compile(r"^(write|read|remove|stat|create)\s+(-?[\d.]+(?:e[+-]?\d+)?\s+){5,}",
                         re.IGNORECASE)
_RESULT_KEYS = ["bw_mibps", "iops", "latency_s", "block_kib", "xfer_kib", "open_s", "wrrd_s", "close_s",
                "total_s", "iter"]
_SUMMARY_KEYS = {"Max(MiB)": "max_mibps", "Min(MiB)": "min_mibps", "Mean(MiB)": "mean_mibps",
                 "Max(OPs)": "max_ops", "Min(OPs)": "min_ops", "Mean(OPs)": "mean_ops", "Mean(s)": "mean_s"}
_MAX_LINE = re.compile(r"^Max (Write|Read):\s+([\d.]+) MiB/sec \(([\d.]+) MB/sec\)")
_HEADER_FIELDS = {"Began": "began", "Command line": "command_line", "Machine": "machine", "Path": "path",
                  "FS": "fs", "Participating tasks": "tasks", "Finished": "finished",
                  "StartTime": "start_time"}


def _number(cell: str) -> Any:
    if cell == "NA":
        return None
    value = to_float(cell)
    if value is None:
        return cell
    return int(value) if value.is_integer() and "." not in cell else value


def _summary_row(header: list[str], cells: list[str], warnings: list[str]) -> dict[str, Any]:
    names = []
    stddev_seen = 0
    for name in header[1:]:
        if name == "StdDev":
            names.append("stddev_mibps" if stddev_seen == 0 else "stddev_ops")
            stddev_seen += 1
        else:
            names.append(_SUMMARY_KEYS.get(name, name))
    values = cells[1:]
    pairs = list(zip(names, values, strict=False))
    if len(values) != len(names) and "reord" in names and "segcnt" in names:
        # IOR 4.0 prints one value fewer than its header names in the reordoff/reordrand/seed group:
        # match up to "reord" from the left and from "segcnt" on from the right, leave the middle out
        left = names.index("reord") + 1
        right = len(names) - names.index("segcnt")
        pairs = list(zip(names[:left], values[:left], strict=False))
        if len(values) >= left + right:
            pairs += list(zip(names[-right:], values[-right:], strict=True))
        warnings.append(f"IOR summary row for {cells[0]} has {len(values)} values for {len(names)} columns; "
                        "reordoff/reordrand/seed left out")
    row: dict[str, Any] = {"operation": cells[0]}
    for key, cell in pairs:
        row[key] = cell if key == "API" else _number(cell)
    return row


@register("ior")
def parse(text: str) -> dict[str, Any]:
    """Parse IOR text output (see the module docstring)."""
    if not text or not text.strip():
        raise ParseError("the IOR output is empty")
    warnings: list[str] = []
    versions = _BANNER.findall(text)
    header: dict[str, Any] = {}
    options: dict[str, str] = {}
    results: list[dict[str, Any]] = []
    summary: list[dict[str, Any]] = []
    max_mibps: dict[str, float] = {}
    errors: list[str] = []
    section = "header"
    summary_header: list[str] | None = None
    garbled = False
    for raw in text.split("\n"):
        line = raw.rstrip()
        stripped = line.strip()
        if re.match(r"^(<<<<<<<|=======$|>>>>>>>)", stripped):
            garbled = True
            continue
        if "ERROR" in stripped and ("ior" in stripped.lower() or stripped.startswith("ERROR")):
            errors.append(stripped[:200])
            continue
        if stripped.startswith("Options:"):
            section = "options"
            continue
        if stripped.startswith("Results:"):
            section = "results"
            continue
        if stripped.startswith("Summary of all tests:"):
            section = "summary"
            continue
        match = _MAX_LINE.match(stripped)
        if match:
            max_mibps[match.group(1).lower()] = float(match.group(2))
            continue
        if section == "summary":
            if stripped.startswith("Operation"):
                summary_header = stripped.split()
                continue
            cells = stripped.split()
            if summary_header and cells and cells[0] in ("write", "read") and len(cells) >= 9:
                summary.append(_summary_row(summary_header, cells, warnings))
                continue
        if _RESULT_ROW.match(stripped) and section in ("results", "summary"):
            cells = stripped.split()
            row: dict[str, Any] = {"access": cells[0]}
            for key, cell in zip(_RESULT_KEYS, cells[1:], strict=False):
                row[key] = to_int(cell) if key == "iter" else to_float(cell)
            results.append(row)
            continue
        if " : " in line or (stripped.endswith(":") and " " in stripped):
            key, _, value = line.partition(":")
            key, value = key.strip(), value.strip()
            if section == "options":
                options[key] = value
            elif key in _HEADER_FIELDS:
                header[_HEADER_FIELDS[key]] = to_int(value) if key == "Participating tasks" else value
    if not versions and not results and not summary:
        raise ParseError("no IOR banner, results or summary found: this is not IOR output "
                         "(or IOR died before printing anything)")
    if len(set(versions)) > 1 or garbled:
        warnings.append(f"garbled output: {len(versions)} IOR banners ({', '.join(versions)})"
                        + (" and git merge-conflict markers" if garbled else ""))
    warnings.extend(f"IOR reported: {e}" for e in errors)
    finished = "finished" in header
    if not finished:
        warnings.append("no 'Finished' line: the run stopped early or the capture is cut")
    complete = (finished or bool(summary)) and not errors and not garbled and len(set(versions)) <= 1
    bandwidth: dict[str, float | None] = {}
    for op in ("write", "read"):
        rows = [r for r in summary if r["operation"] == op]
        if rows:
            bandwidth[f"{op}_max_mibps"] = rows[0].get("max_mibps")
            bandwidth[f"{op}_mean_mibps"] = rows[0].get("mean_mibps")
        elif op in max_mibps:
            bandwidth[f"{op}_max_mibps"] = max_mibps[op]
    return result("ior", "text", complete=complete, warnings=warnings, garbled=garbled or len(set(versions)) > 1,
                  errors=errors, finished=finished,
                  version=versions[0] if versions else None, versions=versions, header=header,
                  options=options, results=results, summary=summary, max_mibps=max_mibps,
                  bw_unit="MiB/s", **bandwidth)
