"""Parser for NVIDIA ``nvbandwidth`` text output (v0.2 to v0.10).

Reads the version banner (nvbandwidth, CUDA runtime/driver, driver, devices), then every
``Running <testcase>.`` block: one or more matrices (``memcpy CE GPU(row) -> GPU(column) bandwidth (GB/s)``;
bidirectional tests of v0.10 print Read1/Read2/Write1/Write2/Total sub-matrices; latency tests print
``(ns)``), the ``SUM <name> <value>`` and ``COEFFICIENT_OF_VARIATION <name> <value>`` lines and
``Waived:`` lines. ``N/A`` cells (the diagonal in newer versions) become None. Bandwidth cells are
GB/s as printed (``_gbps``); latency cells are nanoseconds (``_ns``).
"""

from __future__ import annotations

import re
from typing import Any

from clustereval.parsers import register
from clustereval.parsers._common import result, to_float
from clustereval.parsers.errors import ParseError

TOOL = "nvbandwidth"

_RUNNING = re.compile(r"^Running (\S+?)\.?$")
_TITLE = re.compile(r"^(memcpy|memory latency)\b(.*?)(?:\s(Read1|Read2|Write1|Write2|Total))?\s*"
                    r"(?:(?:total )?bandwidth\s*)?\((GB/s|ns|us)\)\s*$", re.IGNORECASE)
_HEADER = re.compile(r"^\s*\d+(\s+\d+)*\s*$")
# tokens separated by mandatory whitespace: a nested "\s*" here backtracks exponentially on garbage
_ROW = re.compile(r"^\s*(\d+)((?:\s+(?:-?[\d.]+|N/A))+)\s*$")
_SUM = re.compile(r"^SUM (\S+) (\S+)\s*$")
_COV = re.compile(r"^COEFFICIENT_OF_VARIATION (\S+) (\S+)\s*$")


def _new_matrix(title: str, match: re.Match[str]) -> dict[str, Any]:
    unit = match.group(4)
    return {"title": title, "submatrix": match.group(3), "unit": unit,
            "kind": "latency" if unit in ("ns", "us") else "bandwidth", "columns": [], "rows": []}


def _finish_matrix(matrix: dict[str, Any], warnings: list[str], test: str) -> bool:
    """Turn rows into pairs; False when a row is shorter than the header (output cut inside the table)."""
    whole = True
    suffix = "gbps" if matrix["kind"] == "bandwidth" else matrix["unit"]
    pairs = []
    for row in matrix["rows"]:
        if len(row["values"]) < len(matrix["columns"]):
            whole = False
            warnings.append(f"{test}: row {row['row']} has {len(row['values'])} of {len(matrix['columns'])} "
                            "values (cut short?)")
        for col, value in zip(matrix["columns"], row["values"], strict=False):
            pairs.append({"row": row["row"], "column": col, f"value_{suffix}": value})
    matrix["pairs"] = pairs
    matrix["values"] = [row["values"] for row in matrix["rows"]]
    numbers = [p[f"value_{suffix}"] for p in pairs if p[f"value_{suffix}"] is not None]
    matrix[f"min_{suffix}"] = min(numbers) if numbers else None
    matrix[f"max_{suffix}"] = max(numbers) if numbers else None
    matrix[f"cell_sum_{suffix}"] = round(sum(numbers), 2) if numbers else None
    if not matrix["rows"]:
        whole = False
    return whole


@register("nvbandwidth")
def parse(text: str) -> dict[str, Any]:
    """Per-testcase matrices, SUM and coefficient of variation from nvbandwidth output."""
    if not text or not text.strip():
        raise ParseError("nvbandwidth: the output is empty")
    info: dict[str, Any] = {"version": None, "git_version": None, "cuda_runtime_version": None,
                            "cuda_driver_version": None, "driver_version": None}
    devices: list[dict[str, Any]] = []
    tests: dict[str, dict[str, Any]] = {}
    order: list[str] = []
    warnings: list[str] = []
    waived = 0
    note = False
    test: dict[str, Any] | None = None
    matrix: dict[str, Any] | None = None
    for raw in text.split("\n"):
        line = raw.strip()
        if not line:
            continue
        running = _RUNNING.match(line)
        if running:
            name = running.group(1)
            test = {"name": name, "matrices": [], "sums": {}, "cov": {}}
            if name in tests:
                warnings.append(f"test {name} appears more than once; the last run is reported")
            else:
                order.append(name)
            tests[name] = test
            matrix = None
            continue
        title = _TITLE.match(line)
        if title:
            if test is None:
                test = {"name": "unnamed", "matrices": [], "sums": {}, "cov": {}}
                tests["unnamed"] = test
                order.append("unnamed")
                warnings.append("a matrix was printed before any 'Running <test>.' line")
            matrix = _new_matrix(line, title)
            test["matrices"].append(matrix)
            continue
        if matrix is not None and not matrix["columns"] and _HEADER.match(line):
            matrix["columns"] = [int(tok) for tok in line.split()]
            continue
        row = _ROW.match(line)
        if matrix is not None and matrix["columns"] and row:
            values = [to_float(tok) for tok in row.group(2).split()]
            matrix["rows"].append({"row": int(row.group(1)), "values": values})
            continue
        sums = _SUM.match(line)
        if sums and test is not None:
            test["sums"][sums.group(1)] = to_float(sums.group(2))
            matrix = None
            continue
        cov = _COV.match(line)
        if cov and test is not None:
            test["cov"][cov.group(1)] = to_float(cov.group(2))
            continue
        if line.startswith("Waived"):
            waived += 1
            continue
        key, sep, value = line.partition(":")
        if sep:
            key = key.strip()
            value = value.strip()
            if key == "nvbandwidth Version":
                info["version"] = value
                continue
            if key == "Built from Git version":
                info["git_version"] = value
                continue
            if key in ("CUDA Runtime Version", "CUDA Driver Version", "CUDA Driver Version (API)"):
                field = "cuda_runtime_version" if "Runtime" in key else "cuda_driver_version"
                info[field] = value
                continue
            if key == "Driver Version":
                info["driver_version"] = value
                continue
            device = re.match(r"^Device (\d+)$", key)
            if device:
                bus = re.search(r"\(([0-9a-fA-F:.]+)\)\s*$", value)
                devices.append({"index": int(device.group(1)),
                                "name": value[: bus.start()].strip() if bus else value,
                                "bus_id": bus.group(1) if bus else None})
                continue
            if key == "NOTE":
                note = True
                continue
        if line.startswith(("Performance can vary", "Additional system-specific tuning")):
            continue
        if len(warnings) < 30:
            warnings.append(f"line not understood: {line[:160]!r}")

    if not tests:
        raise ParseError("nvbandwidth: no 'Running <testcase>.' block found"
                         + (" (only the version banner was printed)" if info["version"] else ""))

    complete = True
    out_tests: dict[str, Any] = {}
    for name in order:
        entry = tests[name]
        finished = [_finish_matrix(m, warnings, name) for m in entry["matrices"]]
        whole = all(finished) and bool(finished)
        if not entry["matrices"]:
            warnings.append(f"{name}: no matrix printed")
        total_key = f"{name}_total" if f"{name}_total" in entry["sums"] else name
        kind = entry["matrices"][0]["kind"] if entry["matrices"] else None
        suffix = entry["matrices"][0]["unit"] if kind == "latency" else "gbps"
        record = {"name": name, "kind": kind, "matrices": entry["matrices"],
                  f"sum_{suffix}": entry["sums"].get(total_key), "sums": entry["sums"],
                  "coefficient_of_variation": entry["cov"].get(total_key), "cov": entry["cov"]}
        if entry["matrices"]:
            main = next((m for m in entry["matrices"] if m["submatrix"] == "Total"), entry["matrices"][0])
            record["unit"] = main["unit"]
            record["pairs"] = main["pairs"]
            record["columns"] = main["columns"]
            record["values"] = main["values"]
        if not whole:
            complete = False
        out_tests[name] = record
    last = out_tests[order[-1]]
    if not last["sums"]:
        complete = False
        warnings.append(f"{order[-1]}: no SUM line after the matrix (output cut short, or an excerpt)")
    return result(TOOL, "text", complete=complete, warnings=warnings, **info, devices=devices,
                  tests=out_tests, test_names=order, waived=waived, note_printed=note)
