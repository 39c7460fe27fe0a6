"""Parser for clustereval's own S3 benchmark (``roles/object_storage/files/clustereval_s3bench.py``, tool name
``clustereval-s3bench``).

The contract (this docstring is the specification the benchmark honours):

* stdout is one JSON object (on one line; any other line is kept in ``warnings``) with ``tool:
  "clustereval-s3bench"``, ``version`` 1, ``host``, ``python``, ``settings`` (``endpoint``, ``bucket``,
  ``region``, ``addressing``, ``prefix``, ``node``, ``node_index``, ``node_count``, ``large_bytes``,
  ``part_bytes``, ``small_bytes``, ``multipart``, ``levels`` (the cluster's concurrency levels), ``workers``
  (this node's share of each), ``duration_s``, ``slack_s``, ...), ``start_at`` (epoch the sweep was scheduled
  for), ``late_s``, ``started``/``ended`` (epoch), ``preflight``, ``levels``, ``cleanup``, ``done`` and, when
  the benchmark stopped on an exception, ``fatal``;
* ``preflight``: ``ok`` (bool), ``latency_s``; when not ok ``kind`` (``connect``, ``tls``, ``auth``,
  ``bucket``, ``throttled``, ``server``, ``http``), ``status``, ``code``, ``error``;
* each level: ``concurrency``, ``workers`` (on this node), ``processes``, ``reconnects``, ``delete_large``
  (``ops``, ``failed``), ``fatal`` (messages of worker processes that died) and ``phases``: ``put_large``,
  ``get_large``, ``put_small``, ``get_small``, ``list``, ``delete``, each with ``ops`` (completed operations:
  objects, listing pages, deletes), ``bytes``, ``items`` (parts uploaded, keys listed), ``started``/``ended``
  (epoch of the first operation's start and the last one's end), ``late_s`` (how late the phase started on its
  schedule), ``latency`` and ``ttfb`` (histograms: ``count``, ``sum_s``, ``min_s``, ``max_s``, ``buckets``
  ``{index: count}``, bucket ``i`` holding samples in ``[1e-6 * 1.02**i, 1e-6 * 1.02**(i+1))`` s) and
  ``errors`` (``requests``, ``failed``, ``throttled`` (503 SlowDown, 429), ``server`` (other 5xx), ``client``
  (4xx), ``network``, ``short_reads``, ``samples``);
* ``cleanup`` (the sweep of the node's prefix): ``deleted``, ``aborted`` (multipart uploads), ``left`` (keys
  still listed after it; None when it could not tell), ``errors``, ``samples``.

The program's ``--cleanup`` mode prints only ``{tool, version, cleanup}`` (format ``cleanup``).

Returns the document with every number checked, histograms with integer bucket keys, and per phase
``window_s`` (``ended - started``), ``mb_per_s`` and ``ops_per_s`` over that window, plus ``operation`` and
``object`` (``large``/``small``); ``complete`` is ``done``. Raises :class:`ParseError` when no line is the
benchmark's document or the document breaks the contract.
"""

from __future__ import annotations

import math
from typing import Any

from clustereval.parsers import register
from clustereval.parsers._common import json_objects, result
from clustereval.parsers.errors import ParseError

TOOL = "clustereval-s3bench"
PHASES = {"put_large": ("put", "large"), "get_large": ("get", "large"), "put_small": ("put", "small"),
          "get_small": ("get", "small"), "list": ("list", "small"), "delete": ("delete", "small")}
ERROR_KINDS = ("requests", "failed", "throttled", "server", "client", "network", "short_reads")
HIST_BASE = 1.02
HIST_FLOOR_S = 1e-6


def _num(value: Any, where: str, *, allow_none: bool = False) -> float | None:
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ParseError(f"{TOOL}: {where} is not a number: {value!r}")
    return value


def _int(value: Any, where: str) -> int:
    number = _num(value, where)
    if number != int(number) or number < 0:
        raise ParseError(f"{TOOL}: {where} is not a count: {value!r}")
    return int(number)


def _hist(data: Any, where: str) -> dict[str, Any]:
    if not isinstance(data, dict) or not isinstance(data.get("buckets"), dict):
        raise ParseError(f"{TOOL}: {where} is not a histogram")
    buckets = {}
    for key, count in data["buckets"].items():
        try:
            index = int(key)
        except (TypeError, ValueError):
            raise ParseError(f"{TOOL}: {where} has a bucket {key!r} that is not a number") from None
        buckets[index] = _int(count, f"{where} bucket {key}")
    count = _int(data.get("count"), f"{where}.count")
    if sum(buckets.values()) != count:
        raise ParseError(f"{TOOL}: {where}: its buckets hold {sum(buckets.values())} samples, its count says {count}")
    return {"count": count, "sum_s": _num(data.get("sum_s"), f"{where}.sum_s"),
            "min_s": _num(data.get("min_s"), f"{where}.min_s", allow_none=True),
            "max_s": _num(data.get("max_s"), f"{where}.max_s", allow_none=True), "buckets": buckets}


def quantile(hist: dict[str, Any], q: float) -> float | None:
    """The ``q`` quantile (0..1) of a parsed histogram in seconds (the middle of its bucket, clamped to the
    sample range); None when it holds no sample."""
    total = hist.get("count") or 0
    if not total:
        return None
    wanted, seen = max(1, math.ceil(q * total)), 0
    for index in sorted(hist["buckets"]):
        seen += hist["buckets"][index]
        if seen >= wanted:
            value = HIST_FLOOR_S * HIST_BASE ** (index + 0.5)
            low, high = hist.get("min_s"), hist.get("max_s")
            if low is not None:
                value = max(value, low)
            if high is not None:
                value = min(value, high)
            return value
    return hist.get("max_s")


def merge(hists: list[dict[str, Any]]) -> dict[str, Any]:
    """Parsed histograms added together (several nodes' samples of one phase)."""
    out: dict[str, Any] = {"count": 0, "sum_s": 0.0, "min_s": None, "max_s": None, "buckets": {}}
    for hist in hists:
        out["count"] += hist["count"]
        out["sum_s"] += hist["sum_s"]
        for index, count in hist["buckets"].items():
            out["buckets"][index] = out["buckets"].get(index, 0) + count
        for key, pick in (("min_s", min), ("max_s", max)):
            values = [v for v in (out[key], hist.get(key)) if v is not None]
            out[key] = pick(values) if values else None
    return out


def _phase(name: str, data: Any, where: str) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise ParseError(f"{TOOL}: {where} is not an object")
    errors = data.get("errors")
    if not isinstance(errors, dict):
        raise ParseError(f"{TOOL}: {where}.errors is missing")
    out = {"ops": _int(data.get("ops"), f"{where}.ops"), "bytes": _int(data.get("bytes"), f"{where}.bytes"),
           "items": _int(data.get("items", 0), f"{where}.items"),
           "started": _num(data.get("started"), f"{where}.started", allow_none=True),
           "ended": _num(data.get("ended"), f"{where}.ended", allow_none=True),
           "late_s": _num(data.get("late_s", 0.0), f"{where}.late_s"),
           "latency": _hist(data.get("latency"), f"{where}.latency"), "ttfb": _hist(data.get("ttfb"), f"{where}.ttfb"),
           "errors": {kind: _int(errors.get(kind, 0), f"{where}.errors.{kind}") for kind in ERROR_KINDS}}
    samples = errors.get("samples") or []
    out["errors"]["samples"] = [s for s in samples if isinstance(s, dict)][:5] if isinstance(samples, list) else []
    window = (out["ended"] - out["started"]) if out["started"] is not None and out["ended"] is not None else None
    out["window_s"] = window if window is None or window >= 0 else None
    positive = bool(out["window_s"])
    out["mb_per_s"] = out["bytes"] / out["window_s"] / 1e6 if positive else 0.0
    out["ops_per_s"] = out["ops"] / out["window_s"] if positive else 0.0
    out["operation"], out["object"] = PHASES[name]
    return out


def _level(data: Any, where: str) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise ParseError(f"{TOOL}: {where} is not an object")
    phases = data.get("phases")
    if not isinstance(phases, dict):
        raise ParseError(f"{TOOL}: {where}.phases is missing")
    unknown = sorted(set(phases) - set(PHASES))
    if unknown:
        raise ParseError(f"{TOOL}: {where} has unknown phases {unknown}")
    delete_large = data.get("delete_large") or {"ops": 0, "failed": 0}
    fatal = data.get("fatal") or []
    return {"concurrency": _int(data.get("concurrency"), f"{where}.concurrency"),
            "workers": _int(data.get("workers"), f"{where}.workers"),
            "processes": _int(data.get("processes", 0), f"{where}.processes"),
            "reconnects": _int(data.get("reconnects", 0), f"{where}.reconnects"),
            "delete_large": {"ops": _int(delete_large.get("ops", 0), f"{where}.delete_large.ops"),
                             "failed": _int(delete_large.get("failed", 0), f"{where}.delete_large.failed")},
            "fatal": [str(f) for f in fatal] if isinstance(fatal, list) else [str(fatal)],
            "phases": {name: _phase(name, phases[name], f"{where}.{name}") for name in PHASES if name in phases}}


def _cleanup(data: Any) -> dict[str, Any] | None:
    if data is None:
        return None
    if not isinstance(data, dict):
        raise ParseError(f"{TOOL}: cleanup is not an object")
    left = data.get("left")
    return {"deleted": _int(data.get("deleted", 0), "cleanup.deleted"),
            "aborted": _int(data.get("aborted", 0), "cleanup.aborted"),
            "left": None if left is None else _int(left, "cleanup.left"),
            "errors": _int(data.get("errors", 0), "cleanup.errors"),
            "samples": [str(s) for s in data.get("samples") or []][:5]}


def _document(text: str) -> tuple[dict[str, Any], list[str]]:
    found, warnings = None, []
    for line, obj in json_objects(text, warnings):
        if obj.get("tool") == TOOL:
            if found is not None:
                raise ParseError(f"{TOOL}: more than one benchmark document")
            found = obj
        else:
            warnings.append(line[:200])
    if found is None:
        raise ParseError(f"{TOOL}: no benchmark document in the output")
    if found.get("version") != 1:
        raise ParseError(f"{TOOL}: unknown document version {found.get('version')!r}")
    return found, warnings


@register(TOOL)
def parse(text: str) -> dict[str, Any]:
    doc, warnings = _document(text)
    if "settings" not in doc:  # --cleanup mode
        return result(TOOL, "cleanup", complete=True, warnings=warnings, cleanup=_cleanup(doc.get("cleanup")))
    settings = doc.get("settings")
    if not isinstance(settings, dict) or not isinstance(settings.get("levels"), list):
        raise ParseError(f"{TOOL}: settings (with levels) missing")
    for key in ("large_bytes", "part_bytes", "small_bytes", "node_index", "node_count"):
        _int(settings.get(key), f"settings.{key}")
    preflight = doc.get("preflight")
    if preflight is not None and (not isinstance(preflight, dict) or not isinstance(preflight.get("ok"), bool)):
        raise ParseError(f"{TOOL}: preflight is not an object with ok true/false")
    levels = doc.get("levels")
    if not isinstance(levels, list):
        raise ParseError(f"{TOOL}: levels is not a list")
    parsed = [_level(level, f"levels[{i}]") for i, level in enumerate(levels)]
    done = doc.get("done") is True
    return result(TOOL, "json", complete=done, warnings=warnings, host=doc.get("host"), python=doc.get("python"),
                  settings=settings, preflight=preflight, levels=parsed, cleanup=_cleanup(doc.get("cleanup")),
                  done=done, fatal=doc.get("fatal"), start_at=_num(doc.get("start_at", 0.0), "start_at"),
                  late_s=_num(doc.get("late_s", 0.0), "late_s"),
                  started=_num(doc.get("started"), "started", allow_none=True),
                  ended=_num(doc.get("ended"), "ended", allow_none=True))


# ------------------------------------------------------------------------------------------------ endurance

ENDURANCE_TOOL = "clustereval-s3bench-endurance"
ENDURANCE_OPS = ("put", "get", "list", "delete")


def _endurance_op(data: Any, where: str) -> dict[str, Any]:
    """One operation's statistics in one interval (the phase shape without the schedule fields)."""
    if not isinstance(data, dict):
        raise ParseError(f"{TOOL}: {where} is not an object")
    errors = data.get("errors")
    if not isinstance(errors, dict):
        raise ParseError(f"{TOOL}: {where}.errors is missing")
    out = {"ops": _int(data.get("ops"), f"{where}.ops"), "bytes": _int(data.get("bytes"), f"{where}.bytes"),
           "latency": _hist(data.get("latency"), f"{where}.latency"), "ttfb": _hist(data.get("ttfb"), f"{where}.ttfb"),
           "errors": {kind: _int(errors.get(kind, 0), f"{where}.errors.{kind}") for kind in ERROR_KINDS}}
    samples = errors.get("samples") or []
    out["errors"]["samples"] = [s for s in samples if isinstance(s, dict)][:5] if isinstance(samples, list) else []
    return out


@register(ENDURANCE_TOOL)
def parse_endurance(text: str) -> dict[str, Any]:
    """The benchmark's ``--endurance`` output: JSON lines, kind ``interval`` (``index``, ``start``/``end`` epoch,
    ``workers``, ``ops`` {put, get, list, delete: ops, bytes, latency and ttfb histograms, errors}, ``tail`` for
    what finished after the last interval closed) then one ``summary`` (``settings`` with ``endurance_s``,
    ``interval_s``, ``endurance_bytes``; ``preflight``, ``workers``, ``intervals``, ``cleanup``, ``done``,
    ``fatal``). Returns ``intervals`` (each with ``duration_s``, ``mb_per_s`` of PUT and GET bytes and
    ``ops_per_s``) and the summary's fields; a run cut short (no summary) keeps its intervals with ``complete``
    false. Raises :class:`ParseError` when no line is the benchmark's or a line breaks the contract."""
    intervals: list[dict[str, Any]] = []
    summary: dict[str, Any] | None = None
    warnings: list[str] = []
    for line, obj in json_objects(text, warnings):
        if obj.get("tool") != ENDURANCE_TOOL:
            warnings.append(line[:200])
            continue
        if obj.get("version") != 1:
            raise ParseError(f"{TOOL}: unknown document version {obj.get('version')!r}")
        if obj.get("kind") == "summary":
            if summary is not None:
                raise ParseError(f"{TOOL}: more than one endurance summary")
            summary = obj
        elif obj.get("kind") == "interval":
            where = f"interval {obj.get('index')!r}"
            ops = obj.get("ops")
            if not isinstance(ops, dict) or set(ops) - set(ENDURANCE_OPS):
                raise ParseError(f"{TOOL}: {where}: ops is not an object of {', '.join(ENDURANCE_OPS)}")
            start, end = _num(obj.get("start"), f"{where}.start"), _num(obj.get("end"), f"{where}.end")
            parsed = {op: _endurance_op(ops[op], f"{where}.{op}") for op in ENDURANCE_OPS if op in ops}
            duration = max(0.0, end - start)
            moved = sum(parsed[op]["bytes"] for op in ("put", "get") if op in parsed)
            done = sum(p["ops"] for p in parsed.values())
            intervals.append({"index": _int(obj.get("index"), f"{where}.index"), "start": start, "end": end,
                              "duration_s": duration, "workers": _int(obj.get("workers", 0), f"{where}.workers"),
                              "tail": obj.get("tail") is True, "ops": parsed,
                              "mb_per_s": moved / duration / 1e6 if duration else 0.0,
                              "ops_per_s": done / duration if duration else 0.0})
        else:
            raise ParseError(f"{TOOL}: a line of unknown kind {obj.get('kind')!r}")
    if summary is None and not intervals:
        raise ParseError(f"{TOOL}: no endurance output")
    summary = summary or {}
    settings = summary.get("settings")
    if summary and not isinstance(settings, dict):
        raise ParseError(f"{TOOL}: the endurance summary has no settings")
    done = summary.get("done") is True
    return result(ENDURANCE_TOOL, "jsonl", complete=done, warnings=warnings, intervals=intervals,
                  settings=settings or {}, preflight=summary.get("preflight"), done=done,
                  fatal=summary.get("fatal") if summary else "the output ended before its summary (cut short)",
                  workers=summary.get("workers"), cleanup=_cleanup(summary.get("cleanup")),
                  started=_num(summary.get("started"), "started", allow_none=True),
                  ended=_num(summary.get("ended"), "ended", allow_none=True))
