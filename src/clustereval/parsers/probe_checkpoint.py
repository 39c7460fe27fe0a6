"""Parser for the ``storage_checkpoint`` probe (checks/probes/storage_checkpoint.yml): the JSON lines rank 0 of
clustereval's checkpoint benchmark prints (roles/storage/files/clustereval_checkpoint.py).

The contract (this docstring is its specification):

* one JSON object per line; another line (a warning a launcher printed) is kept in ``warnings``;
* first a ``{"event": "start", "format": "clustereval-checkpoint/1", ...}`` line (``world_size``, ``nodes``,
  ``ranks_per_node``, ``hosts`` per rank, ``directory``, ``workdir``, ``mount``, ``methods``, ``bytes_per_rank``)
  or a ``{"event": "skip", "format": ..., "reason": ...}`` line when there is nothing to measure (no shared
  directory, one node only);
* one **result line** per method (``torch.save``, ``dcp``) and step (``save``, ``load``)::

    {"method": "dcp", "step": "load", "world_size": 4, "nodes": 2, "bytes": 33579664, "seconds": 0.0795,
     "gbps": 0.4222, "failed_ranks": [], "ranks": [{"rank": 0, "host": "node1", "bytes": 8394916,
     "seconds": 0.0713, "gbps": 0.1177, "source_rank": 2, "source_host": "node2", "same_node": false,
     "verified": true, "mismatched": []}, ...], "verified": true, "mismatches": []}

  ``bytes`` moved by every rank, ``seconds`` the slowest rank's between the barriers around the step, ``gbps``
  (10^9 bytes/s) their ratio (null when a rank failed); per rank its own figures. A load line also says whether
  every rank read back what its source rank saved (``verified``) and which tensors did not (``mismatches``);
* ``{"event": "skip", "method": ..., "reason": ...}``: a method that could not be run (its dependencies);
* ``{"event": "error", "kind": "storage"|"harness", "message": ..., ["method", "step", "rank", "host"]}``;
* ``{"event": "cleanup", "workdir": ..., "removed": bool}`` and last ``{"event": "done", ...}``.

Output without the ``done`` line (the benchmark died, hung or was cut) raises :class:`ParseError`, naming the
last error it printed; so does a result line that breaks the contract, or output with no start or skip line.
Returns ``start``, ``skipped`` (the reason, or None), ``method_skips`` ({method: reason}), ``results`` (the result
lines), ``errors``, ``cleanup`` and ``done``.
"""

from __future__ import annotations

import math
from typing import Any

from clustereval.parsers import register
from clustereval.parsers._common import json_objects, result
from clustereval.parsers.errors import ParseError

TOOL = "probe-checkpoint"
FORMAT = "clustereval-checkpoint/1"
METHODS = ("torch.save", "dcp")
STEPS = ("save", "load")


def _no_constant(name: str) -> Any:  # NaN, Infinity: a damaged line
    raise ValueError(f"{name} is not a number the benchmark prints")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # 1e309: a damaged line
        raise ValueError(f"{text} is out of range")
    return value


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _result_line(obj: dict[str, Any]) -> dict[str, Any]:
    where = f"{obj.get('method')} {obj.get('step')}"
    if obj.get("method") not in METHODS or obj.get("step") not in STEPS:
        raise ParseError(f"checkpoint: a result line names an unknown method or step ({where})")
    for key in ("bytes", "seconds", "world_size"):
        if not _number(obj.get(key)):
            raise ParseError(f"checkpoint: {where}: {key} is not a number: {obj.get(key)!r}")
    if obj.get("gbps") is not None and not _number(obj["gbps"]):
        raise ParseError(f"checkpoint: {where}: gbps is not a number: {obj['gbps']!r}")
    ranks = obj.get("ranks")
    if not isinstance(ranks, list) or not ranks or not all(
            isinstance(r, dict) and _number(r.get("rank")) and _number(r.get("bytes")) and _number(r.get("seconds"))
            for r in ranks):
        raise ParseError(f"checkpoint: {where}: 'ranks' is not a list of per-rank figures")
    if obj["step"] == "load" and not isinstance(obj.get("verified"), bool):
        raise ParseError(f"checkpoint: {where}: the load line does not say whether it verified")
    return {**obj, "failed_ranks": list(obj.get("failed_ranks") or []), "mismatches": list(obj.get("mismatches") or [])}


@register(TOOL)
def parse(text: str) -> dict[str, Any]:
    if not text or not text.strip():
        raise ParseError("checkpoint: the output is empty (did the benchmark start?)")
    warnings: list[str] = []
    start: dict[str, Any] | None = None
    skipped: str | None = None
    method_skips: dict[str, str] = {}
    results: list[dict[str, Any]] = []
    errors: list[dict[str, Any]] = []
    cleanup: dict[str, Any] | None = None
    done: dict[str, Any] | None = None
    for stripped, obj in json_objects(text, warnings, parse_constant=_no_constant, parse_float=_finite):
        event = obj.get("event")
        if event in ("start", "skip") and "method" not in obj:
            if obj.get("format") != FORMAT:
                raise ParseError(f"checkpoint: not the benchmark's output (format {FORMAT} expected)")
            if event == "start":
                start = obj
            else:
                skipped = str(obj.get("reason") or "the benchmark skipped without a reason")
        elif event == "skip":
            method_skips[str(obj["method"])] = str(obj.get("reason") or "no reason given")
        elif event == "error":
            errors.append({**obj, "kind": obj.get("kind") or "harness",
                           "message": str(obj.get("message") or "the benchmark reported an error")[:500]})
        elif event == "cleanup":
            cleanup = obj
        elif event == "done":
            done = obj
        elif "method" in obj and "step" in obj:
            results.append(_result_line(obj))
        else:
            warnings.append(f"JSON line the contract does not know: {stripped[:160]}")
    if done is None:
        last = f"; its last error: {errors[-1]['message']}" if errors else ""
        raise ParseError(f"checkpoint: the output stops before the benchmark's done line (it died, hung or was "
                         f"cut short after {len(results)} result lines){last}")
    if start is None and skipped is None:
        last = f": {errors[-1]['message']}" if errors else ""
        raise ParseError(f"checkpoint: the benchmark ended without a start or skip line{last}")
    return result(TOOL, "jsonl", complete=True, warnings=warnings, start=start, skipped=skipped,
                  method_skips=method_skips, results=results, errors=errors, cleanup=cleanup, done=done)
