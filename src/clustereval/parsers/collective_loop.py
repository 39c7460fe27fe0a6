"""Parser for clustereval's collective loop (``roles/burnin/files/clustereval_collective_loop.py``, tool
``collective-loop``).

The contract the program honours (this docstring is the specification): JSON Lines on stdout of rank 0,

* ``{"event": "window", "timestamp", "collective", "bytes", "ops", "seconds", "busbw_gbps", "busbw_min_gbps",
  "busbw_max_gbps", "wrong", "first_iteration", "last_iteration", "world_size", "backend"}``: one per collective
  every ``--window-s``: the window's operation count, summed seconds, mean bus bandwidth (bytes x ops x bus
  factor / seconds), its slowest and fastest operation, and the results that were wrong;
* ``{"event": "op", "timestamp", "iteration", "collective", "bytes", "seconds", "busbw_gbps", "world_size",
  "backend", "correct"}``: one per operation instead, with ``--window-s 0``;
* ``{"event": "error", "timestamp", "iteration", "collective", "timeout", "message"}``: an operation that
  failed or timed out (a hang); the loop ends after it;
* ``{"event": "start", ...}`` first and ``{"event": "done", "iterations", "stopped"}`` last.

A session parses a poll at a time. Returns ``rows`` (windows and errors, each with ``kind`` window or error; an
``op`` line is read as a window of one operation), ``ops`` (operations in all windows), ``windows``, ``errors``,
``start``, ``done``; ``complete`` when a ``done`` line came and no error. Raises :class:`ParseError` when no line
is one the contract knows.
"""

from __future__ import annotations

from typing import Any

from clustereval.parsers import register
from clustereval.parsers._common import json_objects, result
from clustereval.parsers.errors import ParseError

WINDOW_FIELDS = ("timestamp", "collective", "bytes", "ops", "seconds", "busbw_gbps", "busbw_min_gbps",
                 "busbw_max_gbps", "wrong", "first_iteration", "last_iteration", "world_size", "backend")


def _one_op(obj: dict[str, Any]) -> dict[str, Any]:
    """An ``op`` line as the window of its one operation."""
    busbw, iteration = obj.get("busbw_gbps"), obj.get("iteration")
    return {"timestamp": obj.get("timestamp"), "collective": obj.get("collective"), "bytes": obj.get("bytes"),
            "ops": 1, "seconds": obj.get("seconds"), "busbw_gbps": busbw, "busbw_min_gbps": busbw,
            "busbw_max_gbps": busbw, "wrong": 1 if obj.get("correct") is False else 0, "first_iteration": iteration,
            "last_iteration": iteration, "world_size": obj.get("world_size"), "backend": obj.get("backend")}


@register("collective-loop")
def parse(text: str) -> dict[str, Any]:
    if not text or not text.strip():
        raise ParseError("collective-loop: the output is empty (did the loop start?)")
    windows: list[dict[str, Any]] = []
    errors: list[dict[str, Any]] = []
    warnings: list[str] = []
    start: dict[str, Any] | None = None
    done: dict[str, Any] | None = None
    for stripped, obj in json_objects(text, warnings):
        event = obj.get("event")
        if event in ("op", "window"):
            if not obj.get("collective") or not isinstance(obj.get("seconds"), int | float) or (
                    event == "window" and not isinstance(obj.get("ops"), int)):
                warnings.append(f"{event} line lacks collective, seconds or ops: {stripped[:160]}")
                continue
            window = _one_op(obj) if event == "op" else {k: obj.get(k) for k in WINDOW_FIELDS}
            windows.append({"kind": "window", **window})
        elif event == "error":
            errors.append({"kind": "error", "timestamp": obj.get("timestamp"), "iteration": obj.get("iteration"),
                           "collective": obj.get("collective"), "timeout": bool(obj.get("timeout")),
                           "message": str(obj.get("message") or "the loop reported an error")[:300]})
        elif event == "start":
            start = obj
        elif event == "done":
            done = obj
        else:
            warnings.append(f"JSON line the contract does not know: {stripped[:160]}")
    if not (windows or errors or start or done):
        raise ParseError("collective-loop: no window, op, start, error or done line in the output")
    return result("collective-loop", "jsonl", complete=done is not None and not errors, warnings=warnings,
                  rows=windows + errors, ops=sum(int(w["ops"] or 0) for w in windows), windows=len(windows),
                  errors=errors, start=start, done=done)
