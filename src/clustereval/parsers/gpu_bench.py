"""Parser for clustereval's own GPU compute benchmark (``roles/gpu_compute/files/clustereval_gpu_bench.py``).

The benchmark prints JSON lines (its docstring is the contract): a ``start`` line (torch version, backend
cuda / rocm / cpu, mode, the devices), then ``result`` / ``skip`` / ``error`` lines as each measurement is
made, then ``done``. Returns ``backend``, ``torch``, ``mode``, ``host``, ``devices``, ``results`` (every
result line, in order), ``skips``, ``errors``, ``duration_s``; ``complete`` is False without ``done`` (the
run was cut short: every line before the cut is kept). Lines that are not JSON (a library warning on
stdout) are kept as warnings; a torn last line (killed mid-write) too. No ``start`` line raises ParseError.
"""

from __future__ import annotations

import json
from typing import Any

from clustereval.parsers import register
from clustereval.parsers._common import clean, result
from clustereval.parsers.errors import ParseError

TOOL = "clustereval-gpu-bench"
_MAX_WARNINGS = 20
_NUMBERS = ("tflops", "max_tflops", "median_tflops", "gbps")


def _record(line: str) -> dict[str, Any] | None:
    try:
        data = json.loads(line)
    except ValueError:
        return None
    return data if isinstance(data, dict) and isinstance(data.get("event"), str) else None


def _valid(record: dict[str, Any]) -> str | None:
    """Why a result line cannot be used (None: it can)."""
    if not isinstance(record.get("gpu"), int) or isinstance(record.get("gpu"), bool):
        return "no GPU index"
    if not isinstance(record.get("bench"), str):
        return "no benchmark name"
    for key in _NUMBERS:
        value = record.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float) or value < 0):
            return f"{key} is not a non-negative number: {value!r}"
    return None


@register(TOOL)
def parse(text: str) -> dict[str, Any]:
    lines = [ln for ln in clean(text).split("\n") if ln.strip()]
    start: dict[str, Any] | None = None
    results: list[dict[str, Any]] = []
    skips: list[dict[str, Any]] = []
    errors: list[dict[str, Any]] = []
    warnings: list[str] = []
    done: dict[str, Any] | None = None
    for number, line in enumerate(lines, 1):
        record = _record(line.strip())
        if record is None:
            if len(warnings) < _MAX_WARNINGS:
                warnings.append(f"line {number} is not a benchmark record: {line.strip()[:160]}")
            continue
        event = record["event"]
        if event == "start":
            if record.get("tool") != TOOL:
                raise ParseError(f"the start line names tool {record.get('tool')!r}, not {TOOL}")
            start = record
        elif event == "result":
            wrong = _valid(record)
            if wrong:
                warnings.append(f"line {number}: result dropped: {wrong}")
            else:
                results.append(record)
        elif event == "skip":
            skips.append(record)
        elif event == "error":
            errors.append(record)
        elif event == "done":
            done = record
    if start is None:
        setup = next((e.get("message") for e in errors if e.get("bench") == "setup"), None)
        if setup:
            return result(TOOL, "jsonl", complete=False, backend=None, torch=None, mode=None, host=None,
                          devices=[], results=[], skips=[], errors=errors, duration_s=None, warnings=warnings)
        raise ParseError("no start line: this is not clustereval-gpu-bench output")
    devices = [d for d in start.get("devices") or [] if isinstance(d, dict)]
    return result(TOOL, "jsonl", complete=done is not None, backend=start.get("backend"), torch=start.get("torch"),
                  cuda=start.get("cuda"), hip=start.get("hip"), mode=start.get("mode"), host=start.get("host"),
                  devices=devices, settings=start.get("settings") or {}, results=results, skips=skips,
                  errors=errors, duration_s=(done or {}).get("duration_s"), warnings=warnings)
