"""Parser for mdtest (metadata benchmark, standalone 1.9.x and the IOR suite's 3.x/4.x) text output.

Reads the launch line (``mdtest-3.4.0+dev was launched with 10 total task(s) on 3 node(s)``), the
command line, Path/FS lines, ``Nodemap``, ``N tasks, M files`` and the ``SUMMARY rate`` (ops/s) and
``SUMMARY time`` (s) tables, with or without the ``:`` separator column of 1.9.x/3.x. Rows are
``operation`` with ``max``, ``min``, ``mean``, ``stddev`` (``_ops_per_s`` for rates, ``_s`` for times).

``complete`` is False when the ``-- finished at`` line is missing (cut capture or killed run) and
when the command line is garbled (unbalanced quotes); ``finished`` and ``garbled`` tell the two apart (the
SUMMARY table is printed once every phase is done, so its rates stand without the closing line; a garbled
capture's do not).
"""

from __future__ import annotations

import re
from typing import Any

from clustereval.parsers import register
from clustereval.parsers._common import result, to_float, to_int
from clustereval.parsers.errors import ParseError

_LAUNCH = re.compile(r"^(mdtest-\S+) was launched with (\d+) total task\(s\) on (\d+) node\(s\)")
_SUMMARY = re.compile(r"^SUMMARY(?:\s+(rate|time))?\s*:\s*\(of (\d+) iterations?\)")
_NUM = r"(-?(?:\d+(?:\.\d+)?(?:e[+-]?\d+)?|nan|inf)|-nan)"
# operation names are words separated by single spaces; keeping the pattern unambiguous avoids
# catastrophic backtracking on long lines of spaces
_ROW = re.compile(rf"^\s*([A-Za-z]+(?: [A-Za-z]+)*)(?:\s*:)?\s+{_NUM}\s+{_NUM}\s+{_NUM}\s+{_NUM}\s*$",
                  re.IGNORECASE)


def _key(operation: str) -> str:
    return re.sub(r"\W+", "_", operation.strip().lower())


@register("mdtest")
def parse(text: str) -> dict[str, Any]:
    """Parse mdtest text output (see the module docstring)."""
    if not text or not text.strip():
        raise ParseError("the mdtest output is empty")
    warnings: list[str] = []
    info: dict[str, Any] = {"version": None, "tasks": None, "nodes": None, "command_line": None,
                            "path": None, "fs": None, "nodemap": None, "files": None, "iterations": None}
    tables: dict[str, list[dict[str, Any]]] = {"rate": [], "time": []}
    current: str | None = None
    finished = started = False
    for raw in text.split("\n"):
        line = raw.rstrip()
        stripped = line.strip()
        if not stripped:
            continue
        if stripped.startswith("-- started at"):
            started = True
            continue
        if stripped.startswith("-- finished at"):
            finished = True
            current = None
            continue
        match = _LAUNCH.match(stripped)
        if match:
            info.update(version=match.group(1), tasks=int(match.group(2)), nodes=int(match.group(3)))
            continue
        match = _SUMMARY.match(stripped)
        if match:
            current = match.group(1) or "rate"
            info["iterations"] = int(match.group(2))
            continue
        if stripped.startswith("Command line used:"):
            info["command_line"] = stripped.partition(":")[2].strip()
            continue
        if re.match(r"^(Path|FS)\s*:", stripped):
            key, _, value = stripped.partition(":")
            info[key.strip().lower()] = value.strip()
            continue
        if stripped.startswith("Nodemap:"):
            info["nodemap"] = stripped.partition(":")[2].strip()
            continue
        match = re.match(r"^(\d+) tasks, (\d+) (files(?:/directories)?|directories)", stripped)
        if match:
            info["files"] = int(match.group(2))
            continue
        if current is not None:
            if stripped.startswith(("Operation", "---")):
                continue
            match = _ROW.match(line)
            if match:
                suffix = "_ops_per_s" if current == "rate" else "_s"
                values = [to_float(v.replace("-nan", "nan")) for v in match.groups()[1:]]
                row = {"operation": match.group(1).strip(), "key": _key(match.group(1))}
                row.update({f"{name}{suffix}": value
                            for name, value in zip(("max", "min", "mean", "stddev"), values, strict=True)})
                tables[current].append(row)
                continue
            current = None
        if "WARNING" in stripped or "ERROR" in stripped or "couldn't" in stripped:
            warnings.append(f"mdtest reported: {stripped[:200]}")
    if not tables["rate"] and not tables["time"]:
        detail = ("the output ends before the SUMMARY table" if info["version"]
                  else "this is not mdtest output")
        raise ParseError(f"no mdtest SUMMARY table found: {detail}")
    complete = finished
    if not finished:
        warnings.append("no '-- finished at' line: the run stopped early or the capture is cut")
    command = info["command_line"] or ""
    garbled = bool(command.count("'") % 2 or command.count('"') % 2)
    if garbled:
        warnings.append("the 'Command line used' has unbalanced quotes: the capture is garbled")
        complete = False
    rates = {row["key"]: row["mean_ops_per_s"] for row in tables["rate"]}
    return result("mdtest", "text", complete=complete, warnings=warnings, **info, started=started,
                  finished=finished, garbled=garbled,
                  rate_rows=tables["rate"], time_rows=tables["time"], rates_mean_ops_per_s=rates,
                  tasks_total=to_int(str(info["tasks"])) if info["tasks"] is not None else None)
