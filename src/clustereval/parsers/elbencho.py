"""Parser for elbencho (distributed storage benchmark) result tables, 2021 to 3.x releases.

Reads every ``OPERATION RESULT TYPE FIRST DONE LAST DONE`` table: a phase row
(``WRITE     Elapsed ms       :      85656      99973``) followed by its continuation rows
(``IOPS``, ``Throughput MiB/s``, ``Total MiB``, ``Files/s``, ``Dirs/s``, ...). Both the early
``Elapsed ms`` and the newer ``Elapsed time : 2m3.241s`` forms are read; elapsed time is given in
milliseconds. Each phase has ``operation``, ``first_done`` and ``last_done`` (the aggregate over all
workers) dicts with normalised keys (``elapsed_ms``, ``iops``, ``throughput_mibps``, ``total_mib``,
``files_per_s``, ``dirs_per_s``, ``total_files``, ``total_dirs``), plus ``dataset`` when the
``mtelbencho.sh`` sweep wrapper printed ``Working on <dir> with N threads...``.

``complete`` is False when the last table stops in the middle of a phase or the sweep wrapper did not
print its ``all done`` line.
"""

from __future__ import annotations

import re
from typing import Any

from clustereval.parsers import register
from clustereval.parsers._common import result, to_float
from clustereval.parsers.errors import ParseError

_ROW = re.compile(r"^(?P<op>[A-Z][A-Z_]+)?\s+(?P<metric>[A-Za-z][\w/%()]*(?: [\w/%()]+)*)\s*:"
                  r"\s*(?P<first>\S+)\s+(?P<last>\S+)\s*$")
_KEYS = {"elapsed ms": "elapsed_ms", "elapsed time": "elapsed_ms", "iops": "iops",
         "throughput mib/s": "throughput_mibps", "total mib": "total_mib", "files/s": "files_per_s",
         "dirs/s": "dirs_per_s", "total files": "total_files", "total dirs": "total_dirs",
         "cpu util %": "cpu_util_pct", "entries/s": "entries_per_s", "total entries": "total_entries"}


def _duration_ms(token: str) -> float | None:
    """``2m3.241s`` / ``1h2m3s`` / ``850ms`` / ``3.2s`` -> milliseconds."""
    match = re.fullmatch(r"(?:(\d+)h)?(?:(\d+)m(?!s))?(?:(\d+(?:\.\d+)?)s)?(?:(\d+(?:\.\d+)?)ms)?", token)
    if not match or not any(match.groups()):
        return to_float(token)
    hours, minutes, seconds, millis = (float(g) if g else 0.0 for g in match.groups())
    return round(((hours * 60 + minutes) * 60 + seconds) * 1000 + millis, 3)


def _metric_key(metric: str) -> str:
    name = re.sub(r"\s+", " ", metric.strip().lower())
    return _KEYS.get(name, re.sub(r"\W+", "_", name).strip("_"))


@register("elbencho")
def parse(text: str) -> dict[str, Any]:
    """Parse elbencho result tables (see the module docstring)."""
    if not text or not text.strip():
        raise ParseError("the elbencho output is empty")
    phases: list[dict[str, Any]] = []
    warnings: list[str] = []
    dataset = None
    phase: dict[str, Any] | None = None
    in_table = wrapper = all_done = False
    for raw in text.split("\n"):
        line = raw.rstrip()
        stripped = line.strip()
        match = re.match(r"^Working on (\S+) with (\d+) threads", stripped)
        if match:
            dataset, wrapper, phase = match.group(1), True, None
            continue
        if "all done" in stripped:
            all_done = True
            continue
        if stripped.startswith("OPERATION") and "RESULT TYPE" in stripped:
            in_table, phase = True, None
            continue
        if not in_table or not stripped or set(stripped) <= set("=- "):
            phase = None if stripped.startswith("---") else phase
            continue
        match = _ROW.match(line)
        if not match:
            if stripped.startswith(("NOTE", "WARNING", "ERROR")):
                warnings.append(f"elbencho: {stripped[:200]}")
            continue
        key = _metric_key(match.group("metric"))
        convert = _duration_ms if match.group("metric").strip().lower() == "elapsed time" else to_float
        if match.group("op"):
            phase = {"operation": match.group("op"), "first_done": {}, "last_done": {}}
            if dataset:
                phase["dataset"] = dataset
            phases.append(phase)
        elif phase is None:
            warnings.append(f"result row without an operation: {stripped[:120]}")
            continue
        phase["first_done"][key] = convert(match.group("first"))
        phase["last_done"][key] = convert(match.group("last"))
    if not phases:
        raise ParseError("no elbencho result table found (no 'OPERATION RESULT TYPE' header followed by "
                         "phase rows): the run ended before its first phase finished, or this is not "
                         "elbencho")
    complete = "elapsed_ms" in phases[-1]["last_done"]
    if wrapper and not all_done:
        warnings.append("the sweep wrapper did not print 'all done': the sweep stopped early")
        complete = False
    if not complete and not any("sweep" in w for w in warnings):
        warnings.append("the last phase is cut short")
    warnings = list(dict.fromkeys(warnings))
    return result("elbencho", "text", complete=complete, warnings=warnings, phases=phases,
                  bw_unit="MiB/s")
