"""``report.html``: the same content as ``report.md`` in one self-contained file (inline CSS, no
scripts, no external resources), so it can be mailed or archived alongside the run directory.
Checks whose every subject passed are folded (``<details>``) to keep problems in view.
"""

from __future__ import annotations

from html import escape
from pathlib import Path
from typing import Any

from clustereval import results as results_mod
from clustereval.report import (
    anchor,
    artifact_links,
    cap_phrase,
    check_title,
    clean_text,
    format_expected,
    format_value,
    hardware_summary,
    hosts_summary,
    measured_text,
    plots,
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

_CSS = """
body{font-family:system-ui,sans-serif;margin:2rem auto;max-width:75rem;padding:0 1rem;color:#222}
table{border-collapse:collapse;margin:.5rem 0 1rem}td,th{border:1px solid #ccc;padding:.25rem .5rem;
text-align:left;vertical-align:top}th{background:#f3f3f3}.tier{font-size:1.6rem;font-weight:700}
.s-pass{color:#176f2c}.s-warn{color:#8a5a00}.s-fail{color:#b00020;font-weight:700}
.s-error{color:#6a1b9a;font-weight:700}.s-skip{color:#666}.alert{border-left:4px solid #b00020;
background:#fdecee;padding:.5rem 1rem}.warn{border-left:4px solid #8a5a00;background:#fff6e0;
padding:.5rem 1rem}code{background:#f3f3f3;padding:0 .2rem}.missing{color:#b00020}
"""


def esc(value: Any) -> str:
    """HTML-escaped text with control characters made visible."""
    return escape(clean_text(value))


def _status(status: Any) -> str:
    return f'<span class="s-{esc(status)}">{esc(status)}</span>'


def _artifacts(result: dict[str, Any], run_dir: Path) -> str:
    marked = [(p, ok, "") for p, ok in artifact_links(result, run_dir)]
    marked += [(p, ok, "series: ") for p, ok in series_links(result, run_dir)]
    links = [
        f'{prefix}<a href="{escape(path, quote=True)}">{esc(path)}</a>'
        + ("" if ok else ' <span class="missing">(missing)</span>')
        for path, ok, prefix in marked
    ]
    return "<br>".join(links) or "—"


def _table(headers: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _header(view: dict[str, Any]) -> str:
    score, run = view["score"], view["run"]
    value = score.get("score")
    score_text = f"score {value:.1f}/100" if value is not None else "unrated (nothing measured)"
    versions = run.get("versions") if isinstance(run.get("versions"), dict) else {}
    counts = score.get("counts") or {}
    rows = [
        ["Run", esc(run.get("run_id") or "unknown (no run.json)")],
        ["Started → ended", f"{esc(run.get('started') or '?')} → {esc(run.get('ended') or 'not finished')}"],
        ["Phases", esc(", ".join(map(str, run.get("phases") or [])) or "unknown")],
        ["Hosts", hosts_summary(view)],
        ["Hardware", esc(hardware_summary(view))],
        [
            "Versions",
            f"clustereval {esc(versions.get('clustereval') or '?')}, "
            f"ansible-core {esc(versions.get('ansible_core') or '?')}",
        ],
        ["Results", ", ".join(f"{counts.get(s, 0)} {_status(s)}" for s in results_mod.STATUSES)],
        ["Coverage", f"{score.get('coverage', 0):.0%} of results have a verdict (not skip/error)"],
    ]
    out = [
        f"<h1>clustereval report: {esc(run.get('run_id') or view['run_dir'].name)}</h1>",
        f'<p class="tier">Tier: {esc(tier_text(score))}</p>',
        f"<p>{score_text} · before caps: {esc(score.get('tier_before_caps') or 'unrated')}</p>",
        _table(["", ""], rows),
    ]
    state = run_state(view)
    if state:
        out.append(f'<div class="alert"><strong>This run is incomplete: {esc(state)}.</strong> Every result and '
                   "sample recorded before is kept below; checks that never ran have no result.</div>")
    if view["warnings"]:
        items = "".join(f"<li>{esc(w)}</li>" for w in view["warnings"])
        out.append(
            f'<div class="warn"><strong>Warnings about this run\'s files</strong><ul>{items}</ul></div>'
        )
    return "\n".join(out)


def _unreachable(view: dict[str, Any]) -> str:
    subjects = view["score"].get("subjects") or {}
    unreachable = subjects.get("unreachable") or []
    silent = subjects.get("without_results") or []
    if not unreachable and not silent:
        return ""
    by_host = score.unreachable_results(view["results"])
    rows = [
        [esc(h), esc(by_host.get(h, {}).get("summary", "")), _artifacts(by_host.get(h, {}), view["run_dir"])]
        for h in unreachable
    ]
    out = ['<h2>Unreachable nodes</h2><div class="alert">']
    if unreachable:
        out.append(
            f"<p><strong>{len(unreachable)} node(s) unreachable.</strong> The other nodes finished; results "
            "already written for these nodes are kept. Checks that never ran on them have no results.</p>"
        )
        out.append(_table(["host", "what the harness saw", "artifacts"], rows))
    if silent:
        out.append(
            f"<p><strong>In the inventory but without any result:</strong> {esc(', '.join(silent))}</p>"
        )
    out.append("</div>")
    return "\n".join(out)


def _why(view: dict[str, Any]) -> str:
    score = view["score"]
    items = [f"<li>{esc(s)}</li>" for s in score.get("explanation") or []]
    binding = [c for c in score.get("caps_applied") or [] if c.get("limits_tier")]
    if binding:
        items.append(f"<li>Capped by: {esc('; '.join(cap_phrase(c) for c in binding))}</li>")
    out = ["<h2>Why this tier</h2>", "<ul>" + "".join(items) + "</ul>"]
    movers = score.get("movers") or []
    if movers:
        by_key = results_named(view, movers)
        rows = [
            [
                f'<a href="#{anchor(m["check"])}"><code>{esc(m["check"])}</code></a>',
                esc(subject_label(m)),
                _status(m["status"]),
                esc(m["severity"]),
                f"{m['points_lost']:.2f}",
                esc(", ".join(m.get("caps") or [])) or "—",
                esc(m.get("summary")),
                _artifacts(by_key.get(results_mod.identity(m), m), view["run_dir"]),
            ]
            for m in movers
        ]
        out += [
            "<h3>Results that moved the tier</h3>",
            _table(
                ["check", "subject", "status", "severity", "points lost", "caps", "summary", "artifacts"],
                rows,
            ),
        ]
    return "\n".join(out)


def _categories(view: dict[str, Any]) -> str:
    rows = []
    for name, cat in (view["score"].get("categories") or {}).items():
        counts = cat.get("counts") or {}
        rows.append(
            [
                esc(cat.get("title", name)),
                esc(cat.get("weight")),
                f"{cat['score']:.1f}" if cat.get("measured") else "not measured",
                *[str(counts.get(s, 0)) for s in results_mod.STATUSES],
            ]
        )
    return "<h2>Categories</h2>\n" + _table(["category", "weight", "score", *results_mod.STATUSES], rows)


def _checks(view: dict[str, Any]) -> str:
    catalogue = view["catalogue"]
    out = ["<h2>Results by check</h2>"]
    if not view["results"]:
        out.append("<p>No check results were recorded.</p>")
    for check, members, fold in view_checks(view):
        first = (members or fold["examples"])[0]
        entry = (catalogue or {}).get(check) or {}
        timed = any(r.get("measured") for r in members)
        rows = [
            [
                esc(subject_label(r)),
                _status(r.get("status")),
                esc(format_value(r)) or "—",
                esc(format_expected(r.get("expected"))) or "—",
                esc(r.get("summary")),
                *([esc(measured_text(r)) or "—"] if timed else []),
                _artifacts(r, view["run_dir"]),
            ]
            for r in members
        ]
        body = [
            f"<p><em>{esc(first.get('phase', '?'))} · {esc(first.get('domain', '?'))} · "
            f"severity {esc(first.get('severity', '?'))}</em></p>"
        ]
        if entry.get("why"):
            body.append(f"<p>Why it matters: {esc(entry['why'])}</p>")
        if entry.get("fix") and any(r.get("status") in ("fail", "warn") for r in members):
            body.append(f"<p>How to fix: {esc(entry['fix'])}</p>")
        if fold:
            rows.append([f"{fold['count']:,} subjects", _status("pass"), "—",
                         esc(format_expected(fold["expected"])) or "—", esc(folded_text(fold)),
                         *(["—"] if timed else []), "—"])
        headers = ["subject", "status", "value", "expected", "summary", *(["measured"] if timed else []), "artifacts"]
        body.append(_table(headers, rows))
        title = f"{esc(check_title(check, catalogue, first))} (<code>{esc(check)}</code>)"
        if all(r.get("status") == "pass" for r in members):
            passed = fold["count"] + len(members) if fold else len(members)
            out.append(
                f'<details id="{anchor(check)}"><summary>{title} — '
                f"pass on {passed:,} subject(s)</summary>" + "".join(body) + "</details>"
            )
        else:
            out.append(f'<h3 id="{anchor(check)}">{title}</h3>' + "".join(body))
    return "\n".join(out)


def _hosts(view: dict[str, Any]) -> str:
    grouped = view_hosts(view)
    if not grouped:
        return ""
    table, quiet = host_rows(grouped)
    rows = []
    for host, counts, findings in table:
        shown = "<br>".join(f"{_status(r.get('status'))} <code>{esc(r.get('check'))}</code> {esc(subject_label(r))}"
                            for r in findings[:5])
        more = f"<br>+{len(findings) - 5} more" if len(findings) > 5 else ""
        rows.append([esc(host), *[str(counts[s]) for s in results_mod.STATUSES], (shown + more) or "—"])
    folded_note = f"<p>{esc(quiet_text(quiet))}</p>" if quiet else ""
    return ("<h2>Results by host</h2><p>Every result naming the host: its own, its GPUs', and the pairs and sets "
            "it belongs to.</p>" + _table(["host", *results_mod.STATUSES, "findings"], rows) + folded_note)


def _timelines(view: dict[str, Any]) -> str:
    rows = [[f"<code>{esc(r.get('check'))}</code>", esc(subject_label(r)), _status(r.get("status")), esc(steps)]
            for r, steps in view_timelines(view)]
    if not rows:
        return ""
    return ("<h2>Timelines</h2><p>Each fault drill from the fault on (the controller's clock; ± half the gap between "
            "the observations around a milestone).</p>" + _table(["drill", "subject", "status", "timeline"], rows))


def _skips_and_errors(view: dict[str, Any]) -> str:
    rows = [
        [
            f'<a href="#{anchor(str(r.get("check")))}"><code>{esc(r.get("check"))}</code></a>',
            esc(subject_label(r)),
            _status(r.get("status")),
            esc(r.get("summary")) or "(no reason given)",
        ]
        for r in sorted((r for r in view["results"] if r.get("status") in ("skip", "error")),
                        key=lambda r: (r.get("status") != "error", str(r.get("check"))))
    ]
    if not rows:
        return ""
    return (
        "<h2>Skips and errors</h2><p><code>error</code> means the harness failed, never the cluster; "
        "both lower coverage, not the score.</p>" + _table(["check", "subject", "status", "reason"], rows)
    )


def render(view: dict[str, Any]) -> str:
    """The self-contained HTML report for a view built by ``clustereval.report.build_view``."""
    title = esc(view["run"].get("run_id") or view["run_dir"].name)
    sections = [_header(view), _unreachable(view), _why(view), _categories(view), _hosts(view), _timelines(view),
                plots.section_html(view), _checks(view)]
    sections.append(_skips_and_errors(view))
    body = "\n".join(s for s in sections if s)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>clustereval {title}</title><style>{_CSS}{plots.CSS}</style></head>\n<body>\n{body}\n</body></html>\n"
    )
