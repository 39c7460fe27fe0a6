"""``report.md``: the run explained for an SRE, every line traceable to a result and its artifacts.

Order: header (tier, score, run metadata), warnings, unreachable nodes, why this tier (caps and the
results that cost the most), categories, results per check (worst first), skips and errors.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from clustereval import results as results_mod
from clustereval.report import (
    anchor,
    artifact_links,
    cap_phrase,
    check_title,
    format_expected,
    format_value,
    hardware_summary,
    hosts_summary,
    measured_text,
    one_line,
    results_named,
    run_state,
    series_links,
    subject_label,
    tier_text,
    view_checks,
    view_hosts,
    view_timelines,
)
from clustereval.report.fleet import folded_text, host_rows, quiet_text
from clustereval.scoring import score


def cell(value: Any) -> str:
    """Text safe inside a Markdown table cell (one line, pipes and angle brackets escaped)."""
    return one_line(value).replace("\\", "\\\\").replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")


def artifacts_cell(result: dict[str, Any], run_dir: Path) -> str:
    """Links to a result's raw artifacts and series, relative to the run directory; missing files marked."""
    links = []
    marked = [(p, e, "") for p, e in artifact_links(result, run_dir)]
    marked += [(p, e, "series: ") for p, e in series_links(result, run_dir)]
    for path, exists, prefix in marked:
        label = path.replace("|", "\\|").replace("[", "\\[").replace("]", "\\]")
        target = path.replace(">", "%3E").replace("<", "%3C").replace("|", "%7C")
        links.append(f"{prefix}[{label}](<{target}>)" + ("" if exists else " (missing)"))
    return "<br>".join(links) if links else "—"


def _table(headers: list[str], rows: list[list[str]]) -> list[str]:
    out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    out.extend("| " + " | ".join(row) + " |" for row in rows)
    return out


def _header(view: dict[str, Any]) -> list[str]:
    score, run = view["score"], view["run"]
    value = score.get("score")
    score_text = f"score {value:.1f}/100" if value is not None else "unrated (nothing measured)"
    rubric = score.get("rubric") or {}
    lines = [
        f"# clustereval report: {cell(run.get('run_id') or view['run_dir'].name)}",
        "",
        f"**Tier: {cell(tier_text(score))}** · {score_text}"
        f" · before caps: {score.get('tier_before_caps') or 'unrated'}"
        f" · rubric {cell(rubric.get('name'))} v{cell(rubric.get('version'))}",
        "",
    ]
    versions = run.get("versions") if isinstance(run.get("versions"), dict) else {}
    options = run.get("options") if isinstance(run.get("options"), dict) else {}
    counts = score.get("counts") or {}
    rows = [
        ["Run", cell(run.get("run_id") or "unknown (no run.json)")],
        [
            "Started → ended",
            f"{cell(run.get('started') or '?')} → {cell(run.get('ended') or 'not finished')}",
        ],
        ["Phases", cell(", ".join(map(str, run.get("phases") or [])) or "unknown")],
        ["Hosts", hosts_summary(view)],
        ["Hardware", cell(hardware_summary(view))],
        [
            "Versions",
            f"clustereval {cell(versions.get('clustereval') or '?')}, "
            f"ansible-core {cell(versions.get('ansible_core') or '?')}",
        ],
        ["Options", cell(", ".join(f"{k}={v}" for k, v in sorted(options.items())) or "none recorded")],
        ["Results", cell(", ".join(f"{counts.get(s, 0)} {s}" for s in results_mod.STATUSES))],
        ["Coverage", f"{score.get('coverage', 0):.0%} of results have a verdict (not skip/error)"],
    ]
    lines += _table(["", ""], rows)
    state = run_state(view)
    if state:
        lines += ["", f"> **This run is incomplete: {cell(state)}.** Every result and sample recorded before "
                  "is kept below; checks that never ran have no result."]
    if view["warnings"]:
        lines += ["", "> **Warnings about this run's files**", ">"]
        lines += [f"> - {cell(w)}" for w in view["warnings"]]
    return lines


def _unreachable(view: dict[str, Any]) -> list[str]:
    subjects = view["score"].get("subjects") or {}
    unreachable = subjects.get("unreachable") or []
    silent = subjects.get("without_results") or []
    if not unreachable and not silent:
        return []
    by_host = score.unreachable_results(view["results"])
    lines = ["", "## Unreachable nodes", ""]
    if unreachable:
        lines += [
            f"**{len(unreachable)} node(s) unreachable.** The other nodes finished; results already written "
            "for these nodes are kept below. Checks that never ran on them have no results.",
            "",
        ]
        rows = []
        for host in unreachable:
            result = by_host.get(host, {})
            rows.append(
                [cell(host), cell(result.get("summary", "")), artifacts_cell(result, view["run_dir"])]
            )
        lines += _table(["host", "what the harness saw", "artifacts"], rows)
    if silent:
        lines += [
            "",
            f"**In the inventory but without any result:** {cell(', '.join(silent))}.",
        ]
    return lines


def _why(view: dict[str, Any]) -> list[str]:
    score = view["score"]
    lines = ["", "## Why this tier", ""]
    lines += [f"- {cell(s)}" for s in score.get("explanation") or []]
    tiers = (score.get("rubric") or {}).get("tiers") or []
    if tiers:
        lines.append("- Thresholds: " + ", ".join(f"{t['name']} ≥ {t['min']}" for t in tiers) + ".")
    binding = [c for c in score.get("caps_applied") or [] if c.get("limits_tier")]
    if binding:
        lines.append("- Capped by: " + cell("; ".join(cap_phrase(c) for c in binding)) + ".")
    movers = score.get("movers") or []
    if movers:
        lines += ["", "### Results that moved the tier", ""]
        by_key = results_named(view, movers)
        rows = []
        for m in movers:
            result = by_key.get(results_mod.identity(m), m)
            rows.append(
                [
                    f"[`{cell(m['check'])}`](#{anchor(m['check'])})",
                    cell(subject_label(m)),
                    cell(m["status"]),
                    cell(m["severity"]),
                    f"{m['points_lost']:.2f}",
                    cell(", ".join(m.get("caps") or [])) or "—",
                    cell(m.get("summary")),
                    artifacts_cell(result, view["run_dir"]),
                ]
            )
        lines += _table(
            ["check", "subject", "status", "severity", "points lost", "caps", "summary", "artifacts"], rows
        )
        hidden = score.get("movers_total", len(movers)) - len(movers)
        if hidden > 0:
            lines += ["", f"{hidden} further result(s) cost points; see the per-check sections below."]
    return lines


def _categories(view: dict[str, Any]) -> list[str]:
    rows = []
    for name, cat in (view["score"].get("categories") or {}).items():
        counts = cat.get("counts") or {}
        rows.append(
            [
                cell(cat.get("title", name)),
                str(cat.get("weight")),
                f"{cat['score']:.1f}" if cat.get("measured") else "not measured",
                *[str(counts.get(s, 0)) for s in results_mod.STATUSES],
            ]
        )
    lines = ["", "## Categories", ""]
    lines += _table(["category", "weight", "score", *results_mod.STATUSES], rows)
    uncategorised = view["score"].get("uncategorised_domains") or []
    if uncategorised:
        lines += [
            "",
            f"Domains in no category (count for caps and coverage only): {cell(', '.join(uncategorised))}.",
        ]
    return lines


def _checks(view: dict[str, Any]) -> list[str]:
    catalogue = view["catalogue"]
    lines = ["", "## Results by check", ""]
    if not view["results"]:
        return [*lines, "No check results were recorded."]
    for check, members, fold in view_checks(view):
        first = (members or fold["examples"])[0]
        entry = (catalogue or {}).get(check) or {}
        lines += [
            f'### <a id="{anchor(check)}"></a>{cell(check_title(check, catalogue, first))} (`{cell(check)}`)',
            "",
            f"*{cell(first.get('phase', '?'))} · {cell(first.get('domain', '?'))} · "
            f"severity {cell(first.get('severity', '?'))}*",
        ]
        if entry.get("why"):
            lines += ["", f"Why it matters: {cell(entry['why'])}"]
        if entry.get("fix") and any(r.get("status") in ("fail", "warn") for r in members):
            lines += ["", f"How to fix: {cell(entry['fix'])}"]
        timed = any(r.get("measured") for r in members)
        rows = [
            [
                cell(subject_label(r)),
                f"**{cell(r.get('status'))}**"
                if r.get("status") in ("fail", "error")
                else cell(r.get("status")),
                cell(format_value(r)) or "—",
                cell(format_expected(r.get("expected"))) or "—",
                cell(r.get("summary")),
                *([cell(measured_text(r)) or "—"] if timed else []),
                artifacts_cell(r, view["run_dir"]),
            ]
            for r in members
        ]
        if fold:
            rows.append([f"{fold['count']:,} subjects", "pass", "—", cell(format_expected(fold["expected"])) or "—",
                         cell(folded_text(fold)), *(["—"] if timed else []), "—"])
        headers = ["subject", "status", "value", "expected", "summary", *(["measured"] if timed else []), "artifacts"]
        lines += ["", *_table(headers, rows), ""]
    return lines


def _hosts(view: dict[str, Any]) -> list[str]:
    """Per host: its results by status and the findings that name it (its own, its GPUs', its pairs')."""
    grouped = view_hosts(view)
    if not grouped:
        return []
    table, quiet = host_rows(grouped)
    rows = []
    for host, counts, findings in table:
        shown = "<br>".join(f"{cell(r.get('status'))} `{cell(r.get('check'))}` {cell(subject_label(r))}"
                            for r in findings[:5])
        more = f"<br>+{len(findings) - 5} more" if len(findings) > 5 else ""
        rows.append([cell(host), *[str(counts[s]) for s in results_mod.STATUSES], (shown + more) or "—"])
    return ["", "## Results by host", "",
            "Every result naming the host: its own, its GPUs', and the pairs and sets it belongs to.", "",
            *_table(["host", *results_mod.STATUSES, "findings"], rows),
            *(["", cell(quiet_text(quiet))] if quiet else [])]


def _timelines(view: dict[str, Any]) -> list[str]:
    rows = [[cell(r.get("check")), cell(subject_label(r)), cell(r.get("status")), cell(steps)]
            for r, steps in view_timelines(view)]
    if not rows:
        return []
    return ["", "## Timelines", "", "Each fault drill from the fault on (the controller's clock; ± half the gap "
            "between the observations around a milestone).", "", *_table(["drill", "subject", "status", "timeline"],
                                                                          rows)]


def _skips_and_errors(view: dict[str, Any]) -> list[str]:
    rows = [
        [
            f"[`{cell(r.get('check'))}`](#{anchor(str(r.get('check')))})",
            cell(subject_label(r)),
            cell(r.get("status")),
            cell(r.get("summary")) or "(no reason given)",
        ]
        for r in sorted((r for r in view["results"] if r.get("status") in ("skip", "error")),
                        key=lambda r: (r.get("status") != "error", str(r.get("check"))))
    ]
    if not rows:
        return []
    return [
        "",
        "## Skips and errors",
        "",
        "`error` means the harness failed, never the cluster; both lower coverage, not the score.",
        "",
        *_table(["check", "subject", "status", "reason"], rows),
    ]


def render(view: dict[str, Any]) -> str:
    """The Markdown report for a view built by ``clustereval.report.build_view``."""
    lines = _header(view) + _unreachable(view) + _why(view) + _categories(view) + _hosts(view) + _timelines(view)
    lines += _checks(view)
    lines += _skips_and_errors(view)
    return "\n".join(lines).rstrip() + "\n"
