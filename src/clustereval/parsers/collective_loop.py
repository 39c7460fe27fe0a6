"""Parser for clustereval's collective loop (``roles/burnin/files/clustereval_collective_loop.py``, tool
``collective-loop``).

The contract the program honours (this docstring is the specification): JSON Lines on stdout of rank 0,

* ``{"event": "op", "timestamp", "iteration", "collective", "bytes", "seconds", "busbw_gbps",
  "world_size", "backend", "correct"}``: one per collective run;
* ``{"event": "error", "timestamp", "iteration", "collective", "timeout", "message"}``: an operation that
  failed or timed out (a hang); the loop ends after it;
* ``{"event": "start", ...}`` first and ``{"event": "done", "iterations", "stopped"}`` last.

A session parses a poll at a time. Returns ``rows`` (ops and errors, each with ``kind`` op or error),
``ops``, ``errors``, ``start``, ``done``; ``complete`` when a ``done`` line came and no error. Raises
:class:`ParseError` when no line is one the contract knows.
"""

from __future__ import annotations

from typing import Any

from clustereval.parsers import register
from clustereval.parsers._common import json_objects, result
from clustereval.parsers.errors import ParseError

OP_FIELDS = ("timestamp", "iteration", "collective", "bytes", "seconds", "busbw_gbps", "world_size", "backend",
             "correct")


@register("collective-loop")
def parse(text: str) -> dict[str, Any]:
    if not text or not text.strip():
        raise ParseError("collective-loop: the output is empty (did the loop start?)")
    ops: list[dict[str, Any]] = []
    errors: list[dict[str, Any]] = []
    warnings: list[str] = []
    start: dict[str, Any] | None = None
    done: dict[str, Any] | None = None
    for stripped, obj in json_objects(text, warnings):
        event = obj.get("event")
        if event == "op":
            if not obj.get("collective") or not isinstance(obj.get("seconds"), int | float):
                warnings.append(f"op line lacks collective or seconds: {stripped[:160]}")
                continue
            ops.append({"kind": "op", **{k: obj.get(k) for k in OP_FIELDS}})
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
    if not (ops or errors or start or done):
        raise ParseError("collective-loop: no op, start, error or done line in the output")
    return result("collective-loop", "jsonl", complete=done is not None and not errors, warnings=warnings,
                  rows=ops + errors, ops=len(ops), errors=errors, start=start, done=done)
