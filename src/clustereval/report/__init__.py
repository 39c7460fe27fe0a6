"""Reports of a run directory: ``report.md``, ``junit.xml`` and a self-contained ``report.html``.

Every report is rendered from files already in the run directory (``results.jsonl``, ``run.json``,
the rubric and the check catalogue), never from the cluster, so ``clustereval report DIR`` can
re-render a saved run at any time. Every line points at a check result and its raw artifacts
(paths relative to the run directory).
"""

from __future__ import annotations

import math
import os
import re
from datetime import datetime
from pathlib import Path
from typing import Any

from clustereval import plan
from clustereval import results as results_mod
from clustereval.scoring import load_catalogue, write_atomic
from clustereval.scoring.score import load_current, score_loaded

REPORT_MD = "report.md"
JUNIT_XML = "junit.xml"
REPORT_HTML = "report.html"
METRICS_PROM = "metrics.prom"  # the Prometheus text of the run, what --textfile-dir and --pushgateway export

# Worst first: a reader scanning a report meets the problems before the passes (one order, results.Status).
STATUS_ORDER = {status: -results_mod.rank(status) for status in results_mod.Status}

_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff]")


def clean_text(value: Any) -> str:
    """Text safe for any report format: control characters shown as ``\\xNN`` instead of dropped."""
    text = "" if value is None else str(value)
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def moment_of(stamp: Any) -> datetime | None:
    """The time an ISO 8601 text (``Z`` or an offset, or none) names; None when absent or unreadable."""
    if not isinstance(stamp, str) or not stamp:
        return None
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return None


def one_line(value: Any) -> str:
    """``clean_text`` on a single line (table cells, terminal)."""
    return " ".join(clean_text(value).split())


def format_value(result: dict[str, Any]) -> str:
    """The measured value with its unit, or '' when the check measured nothing numeric."""
    value = result.get("value")
    if value is None or value == "":
        return ""
    if isinstance(value, float):
        text = f"{value:.6g}" if math.isfinite(value) else str(value)
    elif isinstance(value, dict | list):
        text = (
            ", ".join(f"{k}={v}" for k, v in value.items())
            if isinstance(value, dict)
            else ", ".join(map(str, value))
        )
    else:
        text = str(value)
    unit = result.get("unit")
    return one_line(f"{text} {unit}" if unit else text)


def format_expected(expected: Any) -> str:
    """An ``expected`` mapping as 'min 360.0, max 400 (source: baselines/b200.yml)'."""
    if expected is None or expected == "":
        return ""
    if not isinstance(expected, dict):
        return one_line(expected)
    parts = [f"{k} {v}" for k, v in expected.items() if k != "source"]
    text = ", ".join(parts)
    if expected.get("source"):
        text = f"{text} (source: {expected['source']})" if text else f"source: {expected['source']}"
    return one_line(text)


def artifact_links(result: dict[str, Any], run_dir: Path) -> list[tuple[str, bool]]:
    """Artifacts of a result as (path relative to the run dir, exists in the run dir)."""
    out = []
    for raw in result.get("artifacts") or []:
        path = Path(str(raw))
        if path.is_absolute():
            try:
                path = path.relative_to(run_dir.resolve())
            except ValueError:
                out.append((clean_text(raw), os.path.exists(path)))
                continue
        text = path.as_posix()
        out.append((clean_text(text), os.path.exists(os.path.join(run_dir, text))))
    return out


def check_title(check: str, catalogue: dict[str, Any] | None, result: dict[str, Any] | None = None) -> str:
    """Human title of a check: the catalogue's, else one carried by the result, else the id."""
    entry = (catalogue or {}).get(check) or {}
    return one_line(entry.get("title") or (result or {}).get("title") or check)


def group_by_check(
    results: list[dict[str, Any]],
) -> list[tuple[str, list[dict[str, Any]], dict[str, Any] | None]]:
    """Results grouped per check as (check, the rows to show, the folded passes or None: see
    :mod:`clustereval.report.fleet`), the check with the worst status first, rows worst first then by subject
    and variant. A folded check's passes are summarised, never sorted: a fleet has millions of them."""
    from clustereval.report import fleet

    groups: dict[str, list[dict[str, Any]]] = {}
    for result in results:
        groups.setdefault(str(result.get("check")), []).append(result)
    ordered = []
    for check, members in groups.items():
        shown, fold = fleet.split_passes(members)
        shown.sort(key=lambda r: (results_mod.worst_first(r.get("status")), str(r.get("subject")),
                                  results_mod.params_key(r.get("params"))))
        worst = results_mod.worst_first(shown[0].get("status")) if shown else results_mod.worst_first("pass")
        ordered.append((worst, check, shown, fold))
    ordered.sort(key=lambda item: item[:2])
    return [(check, shown, fold) for _, check, shown, fold in ordered]


def view_checks(view: dict[str, Any]) -> list[tuple[str, list[dict[str, Any]], dict[str, Any] | None]]:
    """:func:`group_by_check` of a view's results, computed once per view: report.md, report.html and junit.xml
    all show the same grouping, and a fleet's folding is not done three times."""
    if "_by_check" not in view:
        view["_by_check"] = group_by_check(view["results"])
    return view["_by_check"]


def view_hosts(view: dict[str, Any]) -> list[tuple[str, list[dict[str, Any]]]]:
    """:func:`group_by_host` of a view's results, computed once per view."""
    if "_by_host" not in view:
        view["_by_host"] = group_by_host(view["results"])
    return view["_by_host"]


def results_named(view: dict[str, Any], wanted: list[dict[str, Any]]) -> dict[tuple[str, str, str], dict[str, Any]]:
    """The view's results with the identities of ``wanted`` (the score's movers), by identity; only results of a
    wanted check and subject have their identity built (a fleet's passes are not keyed to find twenty)."""
    near = {(str(w.get("check")), str(w.get("subject"))) for w in wanted}
    return {results_mod.identity(r): r for r in view["results"]
            if (r.get("check"), r.get("subject")) in near}


def group_by_host(results: list[dict[str, Any]]) -> list[tuple[str, list[dict[str, Any]]]]:
    """Results per host they name (a host, its GPUs, the pairs and sets it is in), hosts in name order;
    a result about a pair appears under both hosts."""
    hosts: dict[str, list[dict[str, Any]]] = {}
    hosts_of: dict[str, list[str]] = {}  # far fewer subjects than results in a fleet
    for result in results:
        subject = str(result.get("subject"))
        if subject not in hosts_of:
            hosts_of[subject] = results_mod.subject_hosts(subject)
        for host in hosts_of[subject]:
            hosts.setdefault(host, []).append(result)
    return sorted(hosts.items())


def subject_label(result: dict[str, Any]) -> str:
    """The subject, with the variant's params when it has any: ``node1->node2 · streams=4``."""
    label = one_line(result.get("subject"))
    variant = results_mod.params_label(result.get("params"))
    return f"{label} · {one_line(variant)}" if variant else label


def series_links(result: dict[str, Any], run_dir: Path) -> list[tuple[str, bool]]:
    """Series files of a result as (path relative to the run dir, exists)."""
    out = []
    for ref in result.get("series") or []:
        if isinstance(ref, dict) and ref.get("path"):
            out.append((clean_text(ref["path"]), (run_dir / str(ref["path"])).exists()))
    return list(dict.fromkeys(out))


def measured_text(result: dict[str, Any]) -> str:
    """When the measured thing ran and what happened: 'started → ended; 2 events; interrupted: ...'."""
    measured = result.get("measured")
    if not isinstance(measured, dict):
        return ""
    parts = [f"{measured.get('started') or '?'} → {measured.get('ended') or 'not ended'}"]
    events = measured.get("events") or []
    if events:
        parts.append(", ".join(f"{e.get('event')} at {e.get('at')}" for e in events[:3] if isinstance(e, dict))
                     + (f" +{len(events) - 3} more" if len(events) > 3 else ""))
    if measured.get("interrupted"):
        parts.append(f"interrupted: {measured['interrupted']}")
    return one_line("; ".join(parts))


def timelines(results: list[dict[str, Any]]) -> list[tuple[dict[str, Any], str]]:
    """One (result, "fault +0 s → detected +3.1 s ±0.3 → …") per timeline series (a fault drill's), the first
    result pointing at it standing for the drill."""
    seen, out = set(), []
    for result in results:
        refs = [ref for ref in result.get("series") or [] if isinstance(ref, dict) and ref.get("kind") == "timeline"]
        events = (result.get("measured") or {}).get("events") if isinstance(result.get("measured"), dict) else None
        if not refs or not events or refs[0].get("path") in seen:
            continue
        seen.add(refs[0].get("path"))
        steps = [f"{e.get('event')} {e.get('at')}" + (f" ±{e['uncertainty_s']:g}" if e.get("uncertainty_s") else "")
                 for e in events if isinstance(e, dict)]
        out.append((result, one_line(" → ".join(steps))))
    return out


def view_timelines(view: dict[str, Any]) -> list[tuple[dict[str, Any], str]]:
    """:func:`timelines` of a view's results, found once per view."""
    if "_timelines" not in view:
        view["_timelines"] = timelines(view["results"])
    return view["_timelines"]


def run_state(view: dict[str, Any]) -> str | None:
    """Why the run is incomplete (interrupted, or not ended), or None for a run that finished."""
    run = view["run"]
    if run.get("interrupted"):
        done = plan.phrase(view["score"].get("progress"))
        return f"interrupted — {run['interrupted']}" + (f"; {done}" if done else "")
    if run and not run.get("ended"):
        return "not finished (interrupted without a word, or still running)"
    return None


def anchor(check: str) -> str:
    """A stable HTML/Markdown anchor id for a check."""
    return "check-" + re.sub(r"[^a-z0-9_-]+", "-", check.lower()).strip("-")


def _short_list(items: list[str], limit: int = 3) -> str:
    shown = ", ".join(items[:limit])
    return shown + (f" +{len(items) - limit} more" if len(items) > limit else "")


def cap_phrase(cap: dict[str, Any]) -> str:
    """'1 critical fail (audit.fleet.gpu_consistency)' — one applied cap, for terminals and headers."""
    triggers = cap.get("triggers") or []
    if cap.get("id") == "unreachable_nodes":
        hosts = sorted({t["subject"] for t in triggers})
        return f"{len(hosts)} {cap.get('label', 'unreachable node')} ({_short_list(hosts)})"
    if not triggers or str(cap.get("id", "")).startswith(("coverage", "categories")):
        return f"{cap.get('label', cap.get('id'))} ({cap.get('detail', '')})"
    checks = sorted({t["check"] for t in triggers})
    return f"{len(triggers)} {cap.get('label', cap.get('id'))} ({_short_list(checks)})"


GATES = ("fail", "warn", "never")


def gate(score: dict[str, Any], fail_on: str = "fail", min_tier: str | None = None) -> str | None:
    """Why the run does not pass the pipeline's gate, or None: a ``fail`` result (``fail_on`` fail), a ``warn`` or
    ``fail`` (``fail_on`` warn), or a tier below ``min_tier`` (the rubric's order, best first)."""
    counts = score.get("counts") or {}
    reasons = []
    fails, warns = int(counts.get("fail") or 0), int(counts.get("warn") or 0)
    if fail_on in ("fail", "warn") and fails:
        reasons.append(f"{fails} check result{'s' if fails != 1 else ''} failed")
    if fail_on == "warn" and warns:
        reasons.append(f"{warns} warned")
    if min_tier:
        order = [t.get("name") for t in (score.get("rubric") or {}).get("tiers") or []]
        tier = score.get("tier")
        if min_tier not in order:
            raise ValueError(f"--min-tier {min_tier!r} is not a tier of the rubric ({', '.join(map(str, order))})")
        if tier not in order or order.index(tier) > order.index(min_tier):
            reasons.append(f"tier {tier} is below the minimum {min_tier}")
    return "; ".join(reasons) or None


def tier_text(score: dict[str, Any]) -> str:
    """The tier as every report heads with it; a provisional one says on what evidence it stands."""
    provisional = score.get("provisional")
    if not provisional:
        return str(score.get("tier"))
    text = f"{score.get('tier')} (provisional: {', '.join(provisional.get('measured') or []) or 'nothing'} only"
    if provisional.get("next_tier"):
        text += f"; {provisional['next_tier']} needs {', '.join(provisional.get('next_needs') or [])}"
    return text + ")"


def summary_line(score: dict[str, Any]) -> str:
    """One terminal line: tier, score, counts by status, and what capped the tier."""
    counts = score.get("counts") or {}
    count_text = ", ".join(f"{counts.get(s, 0)} {s}" for s in results_mod.STATUSES)
    value = score.get("score")
    score_text = f"score {value:.1f}/100" if isinstance(value, int | float) else "unrated: nothing measured"
    line = f"Tier: {tier_text(score)} ({score_text}) — {count_text}"
    binding = [c for c in score.get("caps_applied") or [] if c.get("limits_tier")]
    if binding:
        line += "; capped by: " + "; ".join(cap_phrase(c) for c in binding)
    unreachable = (score.get("subjects") or {}).get("unreachable") or []
    if unreachable and not any(c.get("id") == "unreachable_nodes" for c in binding):
        line += f"; unreachable: {_short_list(unreachable)}"
    if score.get("interrupted"):
        done = plan.phrase(score.get("progress"))
        line = f"INTERRUPTED ({score['interrupted']}{'; ' + done if done else ''}) — {line}"
    return one_line(line)


def hardware_summary(view: dict[str, Any]) -> str:
    """What was tested, from the run's facts: '4 nodes: 8 × NVIDIA H100 80GB HBM3, driver 580.159.03, ...'."""
    per_host = view.get("facts") or {}
    if not per_host:
        return "unknown (no facts recorded)"
    from clustereval import facts as facts_mod

    fleet = facts_mod.fleet(per_host)
    parts = []
    if fleet.get("gpu_model"):
        parts.append(f"{fleet.get('gpu_count') or '?'} × {fleet['gpu_model']}")
    if fleet.get("driver_version"):
        parts.append(f"driver {fleet['driver_version']} (CUDA {fleet.get('cuda_version') or '?'})")
    if fleet.get("fabric_class"):
        parts.append(f"{fleet.get('fabric_ports_active') or '?'} × {fleet['fabric_class']} "
                     f"{fleet.get('fabric_rate_gbps') or '?'}G")
    if fleet.get("cpu_model"):
        parts.append(f"{fleet.get('cpu_count') or '?'} CPUs {fleet['cpu_model']}, {fleet.get('memory_gib') or '?'} GiB")
    differing = fleet.get("differing") or {}
    text = f"{fleet['hosts']} node(s): " + ("; ".join(parts) or "no hardware facts")
    if differing:
        text += "; differing: " + ", ".join(f"{k} on {_short_list(v)}" for k, v in sorted(differing.items()))
    return one_line(text)


def hosts_summary(view: dict[str, Any]) -> str:
    """'4 in inventory, 3 with results, 1 unreachable' for report headers."""
    inventory = view["run"].get("inventory") if isinstance(view["run"].get("inventory"), dict) else {}
    subjects = view["score"].get("subjects") or {}
    return (
        f"{len(inventory.get('hosts') or [])} in inventory, {len(subjects.get('hosts') or [])} with results, "
        f"{len(subjects.get('unreachable') or [])} unreachable"
    )


def build_view(run_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """Everything a renderer needs, read from the run directory once; (re)writes ``score.json``."""
    from clustereval import facts as facts_mod
    from clustereval.report import fleet

    run_dir = Path(run_dir)
    catalogue, _ = load_catalogue()  # when it cannot be read, score_loaded reads it again and says why
    latest, warnings, info, history = load_current(run_dir, keep=fleet.slimmer())
    score = score_loaded(run_dir, latest, warnings, info, catalogue=catalogue, history=history)
    return {
        "facts": facts_mod.load(run_dir),
        "run_dir": run_dir,
        "score": score,
        "results": latest,
        "run": info,
        "catalogue": catalogue,
        "warnings": list(score.get("load_warnings") or []),
    }


def render_all(run_dir: str | os.PathLike[str]) -> list[Path]:
    """(Re)score a run directory and write ``report.md``, ``junit.xml``, ``report.html`` and ``metrics.prom``.

    Tolerates a missing ``run.json``, a missing catalogue and a torn ``results.jsonl`` (each becomes
    a warning inside the reports). Returns the paths written.
    """
    from clustereval.report import html, junit, markdown, prometheus

    with results_mod.collector_paused():  # a fleet's results are alive throughout: see collector_paused
        view = build_view(run_dir)
        run_dir = Path(run_dir)
        written = []
        for name, render in ((REPORT_MD, markdown.render), (JUNIT_XML, junit.render), (REPORT_HTML, html.render),
                             (METRICS_PROM, prometheus.render)):
            path = run_dir / name
            write_atomic(path, render(view))
            written.append(path)
    return written


__all__ = [
    "JUNIT_XML",
    "METRICS_PROM",
    "REPORT_HTML",
    "REPORT_MD",
    "STATUS_ORDER",
    "artifact_links",
    "build_view",
    "cap_phrase",
    "check_title",
    "clean_text",
    "format_expected",
    "format_value",
    "group_by_check",
    "group_by_host",
    "hardware_summary",
    "hosts_summary",
    "measured_text",
    "moment_of",
    "one_line",
    "render_all",
    "results_named",
    "run_state",
    "series_links",
    "subject_label",
    "summary_line",
    "timelines",
    "view_checks",
    "view_hosts",
    "view_timelines",
]
