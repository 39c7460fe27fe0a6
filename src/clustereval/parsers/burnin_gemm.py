"""Parser for clustereval's burn-in GEMM (``roles/burnin/files/clustereval_burnin_gemm.py``, tool ``burnin-gemm``).

The contract the program honours (this docstring is the specification): JSON Lines on stdout,

* ``{"event": "window", "timestamp", "device", "tflops", "iters", "seconds", "elapsed_s", "dtype",
  "backend"}``: one per device per window of GEMMs (``device`` the CUDA index, 0 for the CPU);
* ``{"event": "start", ...}`` first (devices, backend, dtype, settings), ``{"event": "error", "device",
  "message"}`` for a device that failed, ``{"event": "done", "stopped": "duration"|"signal"}`` last.

A session parses the output a poll at a time, so a chunk may hold windows only. Returns ``rows`` (the
windows), ``errors`` (error lines as rows, ``kind: error``), ``start``, ``done`` and ``complete`` (a
``done`` line seen and no error). Raises :class:`ParseError` when no line is one the contract knows.
"""

from __future__ import annotations

from typing import Any

from clustereval.parsers import register
from clustereval.parsers._common import json_objects, result
from clustereval.parsers.errors import ParseError


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


@register("burnin-gemm")
def parse(text: str) -> dict[str, Any]:
    if not text or not text.strip():
        raise ParseError("burnin-gemm: the output is empty (did the GEMM start?)")
    rows: list[dict[str, Any]] = []
    errors: list[dict[str, Any]] = []
    warnings: list[str] = []
    start: dict[str, Any] | None = None
    done: dict[str, Any] | None = None
    known = False
    for stripped, obj in json_objects(text, warnings):
        event = obj.get("event")
        if event == "window":
            if not (_number(obj.get("tflops")) and isinstance(obj.get("device"), int) and obj.get("timestamp")):
                warnings.append(f"window line lacks timestamp, device or tflops: {stripped[:160]}")
                continue
            rows.append({"kind": "window", **{k: obj.get(k) for k in (
                "timestamp", "device", "tflops", "iters", "seconds", "elapsed_s", "dtype", "backend")}})
            known = True
        elif event == "error":
            errors.append({"kind": "error", "timestamp": obj.get("timestamp"), "device": obj.get("device"),
                           "message": str(obj.get("message") or "the GEMM reported an error")[:300]})
            known = True
        elif event == "start":
            start, known = obj, True
        elif event == "done":
            done, known = obj, True
        else:
            warnings.append(f"JSON line the contract does not know: {stripped[:160]}")
    if not known:
        raise ParseError("burnin-gemm: no window, start, error or done line in the output")
    return result("burnin-gemm", "jsonl", complete=done is not None and not errors, warnings=warnings,
                  rows=rows + errors, windows=len(rows), errors=errors, start=start, done=done)
