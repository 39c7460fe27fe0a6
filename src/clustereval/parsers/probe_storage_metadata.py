"""Parser for the ``storage_tier_metadata`` probe (``checks/probes/storage.yml``): every storage tier of a node
and the small-file metadata benchmark (``roles/storage/files/clustereval_mdbench.py``) run on it.

Per tier the probe prints what the tier discovery prints (``=== tier NAME PATH``, ``missing: …``,
``unwritable: …``, ``same-filesystem: …`` or the ``mount:`` and ``disk:`` lines: read by
``probe_storage_tiers.sections`` and ``describe``), then the benchmark's JSON document and ``mdbench-exit:
RC``. Before any tier it may print ``clustereval-skip: <why>`` (no Python 3 on the node) or
``clustereval-error: <why>`` (the benchmark was not on the node: the harness's fault).

Result: ``skip`` / ``harness_error`` (the line's reason, else None) and ``tiers``, each with the discovery's
fields (``name``, ``path``, ``mount``, ``fstype``, ``kind``, ``shared``, ...), ``state`` (``measured``,
``missing``, ``unwritable``, ``same_filesystem``, ``bench_failed``, ``truncated``), ``reason`` when not
measured, ``bench_exit``, the benchmark's ``settings`` (clients, files, dirs, file_bytes, phase_limit_s),
``problems`` (clients that could not start, crashed or hung: ``kind``, ``client``, ``phase``, ``detail``),
``left_behind`` (what it could not remove) and ``phases``: by name (``mkdir``, ``create``, ``stat``, ``read``,
``rename``, ``remove``, ``rmdir``), each ``planned``, ``attempted``, ``ops`` (succeeded), ``seconds``,
``ops_per_s``, ``p50_us``, ``p90_us``, ``p99_us``, ``max_us``, ``mean_us``, ``errors`` (errno name -> count),
``error_samples`` and ``cut_short`` (the phase's time limit stopped it).
"""

from __future__ import annotations

import json
from typing import Any

from clustereval.parsers import register
from clustereval.parsers._common import result, to_int
from clustereval.parsers.errors import ParseError
from clustereval.parsers.probe_storage_tiers import describe, sections

TOOL = "probe-storage-metadata"
FORMAT = "clustereval-mdbench/1"
PHASES = ("mkdir", "create", "stat", "read", "rename", "remove", "rmdir")
EXIT = "mdbench-exit: "
MARKS = {"clustereval-skip: ": "skip", "clustereval-error: ": "harness_error"}


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{where} is {value!r}, not a number")
    return float(value)


def problem_text(problems: list[dict[str, Any]]) -> str:
    """The benchmark's client problems in words: ``client 1 hung in the create phase: no answer ...``."""
    words = {"start_failed": "could not start", "crashed": "crashed", "hung": "hung"}
    return "; ".join(f"client {p.get('client')} {words.get(str(p.get('kind')), p.get('kind'))}"
                     + (f" in the {p['phase']} phase" if p.get("phase") else "") + f": {p.get('detail')}"
                     for p in problems)


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _phase(raw: dict[str, Any]) -> dict[str, Any]:
    """One phase of the benchmark's report, checked field by field (ValueError says which is wrong)."""
    name = raw.get("phase")
    latency = raw.get("latency_us") or {}
    if not isinstance(latency, dict):
        raise ValueError(f"phase {name}: latency_us is not a mapping")
    errors = raw.get("errors") or {}
    if not isinstance(errors, dict) or not all(isinstance(v, int) for v in errors.values()):
        raise ValueError(f"phase {name}: errors is not a mapping of counts")
    out: dict[str, Any] = {key: int(_number(raw.get(key), f"phase {name} {key}"))
                           for key in ("planned", "attempted", "ops")}
    out["seconds"] = _number(raw.get("seconds"), f"phase {name} seconds")
    rate = raw.get("ops_per_s")
    out["ops_per_s"] = None if rate is None else _number(rate, f"phase {name} ops_per_s")
    for key in ("p50", "p90", "p99", "max", "mean"):
        value = latency.get(key)
        out[f"{key}_us"] = None if value is None else _number(value, f"phase {name} latency {key}")
    out.update(errors=dict(errors), error_samples=_list(raw.get("error_samples"))[:5],
               cut_short=bool(raw.get("cut_short")), clients=raw.get("clients"))
    return out


def _tier(name: str, path: str, lines: list[str]) -> dict[str, Any]:
    tier = {**describe(name, path, lines), "phases": {}}
    if tier["state"] != "mounted":
        return tier
    exits = [line for line in lines if line.startswith(EXIT)]
    if not exits:
        tier.update(state="truncated", reason="the probe's output ends before the metadata benchmark did (cut "
                                              "short, or the filesystem hung)")
        return tier
    tier["bench_exit"] = to_int(exits[-1][len(EXIT):])
    body = "\n".join(line for line in lines if not line.startswith(("mount: ", "disk: ", EXIT)))
    start = body.find("{")
    try:
        report = json.loads(body[start:]) if start >= 0 else None
        if not isinstance(report, dict) or report.get("format") != FORMAT:
            raise ValueError(f"no {FORMAT} document")
        phases = {}
        for raw in report.get("phases") or []:
            if not isinstance(raw, dict) or raw.get("phase") not in PHASES:
                raise ValueError(f"unknown phase {raw!r:.80}")
            phases[raw["phase"]] = _phase(raw)
    except ValueError as exc:  # json.JSONDecodeError is a ValueError
        tier.update(state="bench_failed", reason=f"the metadata benchmark printed no readable report (exit "
                                                 f"status {tier['bench_exit']}): {exc}")
        return tier
    settings = report.get("settings")
    tier.update(phases=phases, settings=settings if isinstance(settings, dict) else {},
                problems=[p for p in _list(report.get("problems")) if isinstance(p, dict)],
                left_behind=[str(p) for p in _list(report.get("left_behind"))], python=report.get("python"),
                duration_s=report.get("duration_s"))
    if phases:
        tier["state"] = "measured"
    else:
        tier.update(state="bench_failed", reason="the metadata benchmark measured no phase (exit status "
                                                 f"{tier['bench_exit']}): " + (problem_text(tier["problems"])
                                                                              or "no reason given"))
    return tier


@register(TOOL)
def parse(text: str) -> dict[str, Any]:
    marks: dict[str, str | None] = {"skip": None, "harness_error": None}
    for line in text.splitlines():
        for prefix, key in MARKS.items():
            if line.startswith(prefix) and marks[key] is None:
                marks[key] = line[len(prefix):].strip()
    tiers = [_tier(name, path, lines) for name, path, lines in sections(text)]
    if not tiers and not any(marks.values()):
        raise ParseError("no '=== tier' section: the storage metadata probe printed nothing it measured")
    return result(TOOL, "text", complete=all(t["state"] != "truncated" for t in tiers), tiers=tiers, **marks)
