"""Parser for the ``storage_datagen`` probe (``checks/probes/storage_datagen.yml``): clustereval's datagen benchmark
(``roles/storage/files/clustereval_datagen.py``), many writers on a node producing video-sized blobs and Parquet
sensor files at once on each tier.

The contract (this docstring is the specification the program honours):

* stdout holds one JSON object on one line (any other line is kept in ``warnings``) with ``tool:
  "clustereval-datagen"``, ``version`` 1, ``host``, ``node``, ``python`` (``version``, ``executable``),
  ``settings`` (``writers``, ``blob_bytes``, ``parquet_rows``, ``parquet_columns``, ``parquet_compression``,
  ``duration_s``, ``files``, ``max_bytes``, ``node_count``, ``start_at``, ``slack_s``, ``grace_s``, ...),
  ``start_at``, ``started``/``ended`` (epoch), ``pyarrow`` (``available``, ``version`` or ``reason``),
  ``tiers``, ``left_behind`` (work directories it could not remove), ``done`` and, when it stopped early (bad
  settings, a signal, a bug), ``fatal``;
* each tier: ``name``, ``path``, ``state`` (``measured``; not measured: ``missing``, ``same_filesystem``,
  ``unwritable``, ``no_space``, each with a ``reason``; ``ready``: not reached before the program stopped),
  ``mount``, ``source``, ``fstype``, ``shared``, ``disk``, ``transport``, ``rotational``, ``size_bytes``,
  ``avail_bytes``; when measured also ``slot``, ``scheduled_at``, ``late_s``, ``budget_bytes``,
  ``writers_planned``, ``started``/``ended`` (the first writer's start, the last one's end, epoch),
  ``seconds``, ``bytes``, ``files``, ``gbps`` (10^9 bytes/s over that window), ``files_per_s``, ``cpu_s``,
  ``encode_s`` (Parquet encoding in memory), ``kinds`` (``blob`` and ``parquet``: ``files``, ``bytes``,
  ``gbps``, ``files_per_s``, ``file_s``: seconds per file from open to close — ``count``, ``mean``, ``p50``,
  ``p90``, ``p99``, ``max`` — or None), ``parquet`` (as ``pyarrow``, what the writers found), ``errors``
  (count per errno name: ``EIO``, ``ENOSPC``, ``EAGAIN``, ...), ``error_samples`` (``writer``, ``kind``,
  ``file``, ``op``: open/write/fsync/close/mkdir, ``errno``, ``message``, ``at_s``), ``harness_errors``,
  ``stopped_by`` (writers per reason: ``duration``, ``count``, ``space``, ``errors``, ``harness_error``),
  ``cleanup`` (``removed``, ``errors``) and ``writers``;
* each writer: ``writer``, ``pid``, ``state`` (``ok``; ``hung``: still writing ``grace_s`` after its duration,
  stopped; ``died``: no answer; ``error``: the program itself failed in it; each with a ``reason``); an ``ok``
  writer: ``started``/``ended``, ``seconds``, ``bytes``, ``files``, ``gbps``, ``files_per_s``, ``late_s``,
  ``cpu_s``, ``encode_s``, ``kinds`` (``files``, ``bytes`` per kind), ``errors``, ``samples``,
  ``harness_errors``, ``stopped_by``.

Returns the document with every number checked and per tier ``kind`` (``network`` for a shared filesystem, else
what backs it as ``probe-storage-device`` classifies it: ``nvme``, ``ssd``, ``hdd``, ``virtual``, ``memory``,
``unknown``); ``complete`` is ``done``. Raises :class:`ParseError` when no line is the program's document or the
document breaks the contract.
"""

from __future__ import annotations

import json
import math
from typing import Any

from clustereval.parsers import register
from clustereval.parsers._common import result
from clustereval.parsers.errors import ParseError
from clustereval.parsers.probe_storage_device import _kind

TOOL = "probe-datagen"
PROGRAM = "clustereval-datagen"
STATES = ("measured", "missing", "same_filesystem", "unwritable", "no_space", "ready")
WRITER_STATES = ("ok", "hung", "died", "error")
KINDS = ("blob", "parquet")


def _num(value: Any, where: str, *, allow_none: bool = False) -> float | None:
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ParseError(f"{PROGRAM}: {where} is not a number: {value!r}")
    return value


def _count(value: Any, where: str) -> int:
    number = _num(value, where)
    if number != int(number) or number < 0:
        raise ParseError(f"{PROGRAM}: {where} is not a count: {value!r}")
    return int(number)


def _mapping(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ParseError(f"{PROGRAM}: {where} is not an object")
    return value


def _errors(value: Any, where: str) -> dict[str, int]:
    return {str(code): _count(count, f"{where}.{code}") for code, count in _mapping(value or {}, where).items()}


def _quantiles(value: Any, where: str) -> dict[str, Any] | None:
    if value is None:
        return None
    data = _mapping(value, where)
    out: dict[str, Any] = {"count": _count(data.get("count"), f"{where}.count")}
    for key in ("mean", "p50", "p90", "p99", "max"):
        out[key] = _num(data.get(key), f"{where}.{key}")
    return out


def _writer(data: Any, where: str) -> dict[str, Any]:
    writer = dict(_mapping(data, where))
    writer["writer"] = _count(writer.get("writer"), f"{where}.writer")
    if writer.get("state") not in WRITER_STATES:
        raise ParseError(f"{PROGRAM}: {where} has state {writer.get('state')!r}")
    writer["errors"] = _errors(writer.get("errors"), f"{where}.errors")
    if writer["state"] == "ok" and writer.get("started") is not None:
        for key in ("bytes", "files"):
            writer[key] = _count(writer.get(key), f"{where}.{key}")
        for key in ("started", "ended", "seconds", "gbps", "files_per_s"):
            writer[key] = _num(writer.get(key), f"{where}.{key}")
        for key in ("late_s", "cpu_s", "encode_s"):
            writer[key] = _num(writer.get(key), f"{where}.{key}", allow_none=True)
    return writer


def _tier(data: Any, index: int) -> dict[str, Any]:
    where = f"tier {index}"
    tier = dict(_mapping(data, where))
    if not isinstance(tier.get("name"), str) or not isinstance(tier.get("path"), str):
        raise ParseError(f"{PROGRAM}: {where} has no name or path")
    where = f"tier {tier['name']}"
    if tier.get("state") not in STATES:
        raise ParseError(f"{PROGRAM}: {where} has state {tier.get('state')!r}")
    if tier.get("fstype") is not None:
        tier["shared"] = bool(tier.get("shared"))
        tier["kind"] = "network" if tier["shared"] else _kind(tier.get("fstype"), tier.get("disk"),
                                                              tier.get("transport"), tier.get("rotational"))
    if tier["state"] != "measured":
        return tier
    for key in ("bytes", "files"):
        tier[key] = _count(tier.get(key), f"{where}.{key}")
    for key in ("seconds", "gbps", "files_per_s", "scheduled_at"):
        tier[key] = _num(tier.get(key), f"{where}.{key}")
    for key in ("started", "ended", "late_s", "cpu_s", "encode_s"):
        tier[key] = _num(tier.get(key), f"{where}.{key}", allow_none=True)
    tier["errors"] = _errors(tier.get("errors"), f"{where}.errors")
    writers = tier.get("writers")
    if not isinstance(writers, list) or not writers:
        raise ParseError(f"{PROGRAM}: {where} was measured with no writers listed")
    tier["writers"] = [_writer(w, f"{where} writer {i}") for i, w in enumerate(writers)]
    kinds = _mapping(tier.get("kinds"), f"{where}.kinds")
    tier["kinds"] = {}
    for kind, stats in kinds.items():
        if kind not in KINDS:
            raise ParseError(f"{PROGRAM}: {where} has an unknown kind of file {kind!r}")
        stats = _mapping(stats, f"{where}.kinds.{kind}")
        tier["kinds"][kind] = {"files": _count(stats.get("files"), f"{where}.{kind}.files"),
                               "bytes": _count(stats.get("bytes"), f"{where}.{kind}.bytes"),
                               "gbps": _num(stats.get("gbps"), f"{where}.{kind}.gbps"),
                               "files_per_s": _num(stats.get("files_per_s"), f"{where}.{kind}.files_per_s"),
                               "file_s": _quantiles(stats.get("file_s"), f"{where}.{kind}.file_s")}
    for key in ("error_samples", "harness_errors"):
        if not isinstance(tier.get(key) or [], list):
            raise ParseError(f"{PROGRAM}: {where}.{key} is not a list")
        tier[key] = list(tier.get(key) or [])
    tier["stopped_by"] = _errors(tier.get("stopped_by"), f"{where}.stopped_by")
    tier["cleanup"] = _mapping(tier.get("cleanup") or {}, f"{where}.cleanup")
    return tier


@register(TOOL)
def parse(text: str) -> dict[str, Any]:
    document, warnings = None, []
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped:
            continue
        if document is None and stripped.startswith("{"):
            try:
                candidate = json.loads(stripped)
            except ValueError as exc:
                if f'"tool": "{PROGRAM}"' in stripped:
                    raise ParseError(f"{PROGRAM}: its document is cut short ({exc})") from None
                warnings.append(stripped[:300])
                continue
            if isinstance(candidate, dict) and candidate.get("tool") == PROGRAM:
                document = candidate
                continue
        warnings.append(stripped[:300])
    if document is None:
        raise ParseError(f"{PROGRAM}: no line of the output is the benchmark's JSON document")
    if document.get("version") != 1:
        raise ParseError(f"{PROGRAM}: version {document.get('version')!r}, this parser reads version 1")
    tiers = document.get("tiers")
    if not isinstance(tiers, list):
        raise ParseError(f"{PROGRAM}: the document has no 'tiers' list")
    fields = {k: v for k, v in document.items() if k not in ("tool", "tiers", "done", "complete", "warnings")}
    fields["settings"] = _mapping(document.get("settings") or {}, "settings")
    fields["pyarrow"] = _mapping(document.get("pyarrow") or {}, "pyarrow")
    if not isinstance(document.get("left_behind") or [], list):
        raise ParseError(f"{PROGRAM}: left_behind is not a list")
    fields["left_behind"] = list(document.get("left_behind") or [])
    for key in ("start_at", "started", "ended"):
        fields[key] = _num(document.get(key), key, allow_none=True)
    parsed = [_tier(t, i) for i, t in enumerate(tiers)]
    return result(TOOL, "json", complete=bool(document.get("done")), warnings=warnings, program=PROGRAM,
                  tiers=parsed, **fields)
