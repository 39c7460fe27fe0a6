"""Parser for clustereval's own torch.distributed collective benchmark (tool name ``torch-distributed``).

The contract the benchmark script must honour (this docstring is the specification):

* stdout is JSON Lines: one JSON object per line; any other line (a warning torch printed, a launcher
  prefix already stripped by :func:`clustereval.parsers._common.clean`) is kept in ``warnings``;
* one **result line** per (collective, message size), printed by rank 0 after the timed iterations::

    {"collective": "all_reduce", "size_bytes": 67108864, "time_s": 0.00123, "algbw_gbps": 54.5,
     "busbw_gbps": 95.4, "world_size": 8, "backend": "nccl", "device": "cuda", "correct": true}

  ``collective`` (all_reduce, all_gather, reduce_scatter, all_to_all, broadcast...), ``size_bytes`` (int,
  bytes per rank's buffer), ``time_s`` (mean seconds per iteration), ``algbw_gbps``/``busbw_gbps`` (GB/s,
  10^9 bytes, with the nccl-tests bus-bandwidth factors), ``world_size`` (ranks), ``backend`` (nccl, gloo,
  rccl, mpi), ``device`` (cuda, cpu, or a device name), ``correct`` (bool: the result matched the value
  every rank computed on the host). Optional: ``iters``, ``warmup``, ``hosts`` (list), ``dtype``;
* optionally a first ``{"event": "start", ...}`` line with the settings (echoed under ``start``);
* a failure the script caught: ``{"event": "error", "message": "..."}`` (kept under ``failures``);
* a last ``{"event": "done"}`` line. Output without it (the script died or hung) is ``complete: False``
  with every result line read so far.

Returns ``rows`` (result lines, the fields above), ``collectives``, ``backend``, ``device``,
``world_size`` (the first row's), ``done``, ``failures``, ``wrong_sizes`` (sizes with ``correct`` false)
and ``max_busbw_gbps``. Raises :class:`ParseError` when no line is JSON the contract knows.
"""

from __future__ import annotations

from typing import Any

from clustereval.parsers import register
from clustereval.parsers._common import json_objects, result
from clustereval.parsers.errors import ParseError

REQUIRED = ("collective", "size_bytes", "time_s", "busbw_gbps", "world_size", "backend", "device", "correct")
_NUMBERS = ("size_bytes", "time_s", "algbw_gbps", "busbw_gbps", "world_size")


def _row(obj: dict[str, Any]) -> tuple[dict[str, Any] | None, str | None]:
    """(row, None) for a valid result line, or (None, what is wrong with it)."""
    missing = [key for key in REQUIRED if key not in obj]
    if missing:
        return None, f"result line lacks {', '.join(missing)}"
    row = dict(obj)
    for key in _NUMBERS:
        value = row.get(key)
        if value is None and key == "algbw_gbps":
            continue
        if isinstance(value, bool) or not isinstance(value, int | float):
            return None, f"{key} is not a number: {value!r}"
    if not isinstance(row["correct"], bool):
        return None, f"correct is not true/false: {row['correct']!r}"
    row["size_bytes"], row["world_size"] = int(row["size_bytes"]), int(row["world_size"])
    row["time_us"] = float(row["time_s"]) * 1e6
    return row, None


@register("torch-distributed")
def parse(text: str) -> dict[str, Any]:
    """Parse the benchmark's JSON lines into result rows; see the module docstring for the contract."""
    if not text or not text.strip():
        raise ParseError("torch-distributed: the output is empty (did the benchmark start?)")
    rows: list[dict[str, Any]] = []
    warnings: list[str] = []
    failures: list[str] = []
    start: dict[str, Any] | None = None
    done = known = False
    for stripped, obj in json_objects(text, warnings):
        event = obj.get("event")
        if event == "done":
            done = known = True
        elif event == "start":
            start, known = obj, True
        elif event == "error":
            failures.append(str(obj.get("message") or "the benchmark reported an error")[:300])
            known = True
        elif "collective" in obj:
            row, why = _row(obj)
            if row is None:
                warnings.append(f"{why}: {stripped[:160]}")
            else:
                rows.append(row)
                known = True
        else:
            warnings.append(f"JSON line the contract does not know: {stripped[:160]}")
    if not known:
        raise ParseError("torch-distributed: no result, start, error or done line in the output")
    first = rows[0] if rows else (start or {})
    return result(
        "torch-distributed", "jsonl",
        complete=done and bool(rows) and not failures,
        warnings=warnings,
        rows=rows,
        collectives=sorted({r["collective"] for r in rows}),
        backend=first.get("backend"),
        device=first.get("device"),
        world_size=first.get("world_size"),
        start=start,
        done=done,
        failures=failures,
        wrong_sizes=sorted({r["size_bytes"] for r in rows if not r["correct"]}),
        max_busbw_gbps=max((float(r["busbw_gbps"]) for r in rows), default=None),
    )
