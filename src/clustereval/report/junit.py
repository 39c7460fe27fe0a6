"""``junit.xml``: one ``<testsuite>`` per phase, one ``<testcase>`` per check result, for CI dashboards.

Mapping (JUnit has no "warn"): fail -> ``<failure>``, error -> ``<error>`` (the harness failed),
skip -> ``<skipped message=reason>``, warn -> a passing testcase whose ``<system-out>`` starts with
``WARN:`` so CI stays green on advisories while the text remains searchable; pass -> passing testcase.
Every testcase's ``<system-out>`` carries value, expected and artifact paths (relative to the run dir); its
``timestamp`` is when the measured thing started (UTC) and its ``hostname`` the node it is about; a testsuite's
``hostname`` is the controller the judge ran on. A check
with more passing subjects than ``fleet.FOLD_PASSES_AT`` has one testcase for all its passes.
The tier and score are ``<properties>`` of the root. Control characters in any text are escaped
(``\\xNN``) so the document is always well-formed XML 1.0.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from datetime import UTC
from typing import Any

from clustereval import results as results_mod
from clustereval.report import (
    artifact_links,
    check_title,
    clean_text,
    format_expected,
    format_value,
    measured_text,
    moment_of,
    run_state,
    series_links,
    subject_label,
    view_checks,
)
from clustereval.report.fleet import folded_text

_SUITE_ORDER = ("audit", "performance", "reliability")


def _seconds(result: dict[str, Any]) -> str:
    try:
        return f"{max(0.0, float(result.get('duration_s') or 0.0)):.3f}"
    except (TypeError, ValueError):
        return "0.000"


def _details(result: dict[str, Any], view: dict[str, Any]) -> str:
    lines = []
    if result.get("status") == "warn":
        lines.append(f"WARN: {clean_text(result.get('summary'))}")
    else:
        lines.append(f"{str(result.get('status')).upper()}: {clean_text(result.get('summary'))}")
    if format_value(result):
        lines.append(f"value: {format_value(result)}")
    if format_expected(result.get("expected")):
        lines.append(f"expected: {format_expected(result.get('expected'))}")
    lines.append(f"severity: {clean_text(result.get('severity'))}")
    if measured_text(result):
        lines.append(f"measured: {measured_text(result)}")
    links = artifact_links(result, view["run_dir"])
    if links:
        lines.append("artifacts: " + ", ".join(p + ("" if ok else " (missing)") for p, ok in links))
    series = series_links(result, view["run_dir"])
    if series:
        lines.append("series: " + ", ".join(p + ("" if ok else " (missing)") for p, ok in series))
    return "\n".join(lines)


def junit_timestamp(stamp: Any) -> str | None:
    """An ISO 8601 time as the JUnit schema wants it: UTC, to the second, no zone (``2026-01-02T03:04:05``)."""
    moment = moment_of(stamp)
    if moment is None:
        return None
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC).replace(tzinfo=None)
    return moment.isoformat(timespec="seconds")


def _started(result: dict[str, Any]) -> str | None:
    """When the measured thing started (``measured.started``), else when the judge ran."""
    measured = result.get("measured") if isinstance(result.get("measured"), dict) else {}
    return junit_timestamp(measured.get("started")) or junit_timestamp(result.get("started"))


def _testcase(suite: ET.Element, result: dict[str, Any], view: dict[str, Any]) -> None:
    status = result.get("status")
    attributes = {
        "classname": clean_text(result.get("check")),
        "name": subject_label(result),
        "time": _seconds(result),
    }
    hosts = results_mod.subject_hosts(result.get("subject"))
    if hosts:  # the node it is about (a pair or set names its first); cluster-wide results have none
        attributes["hostname"] = clean_text(hosts[0])
    stamp = _started(result)
    if stamp:
        attributes["timestamp"] = stamp
    case = ET.SubElement(suite, "testcase", attributes)
    summary = clean_text(result.get("summary"))
    message = f"{check_title(str(result.get('check')), view['catalogue'], result)}: {summary}"
    if status == "fail":
        node = ET.SubElement(
            case, "failure", {"message": message, "type": clean_text(result.get("severity"))}
        )
        node.text = _details(result, view)
    elif status == "skip":
        ET.SubElement(case, "skipped", {"message": summary or "no reason given"})
    elif status not in ("pass", "warn"):
        # error, or any status outside the contract: the harness did not produce a verdict
        node = ET.SubElement(case, "error", {"message": message, "type": "harness"})
        node.text = _details(result, view)
    ET.SubElement(case, "system-out").text = _details(result, view)


def _suite_when_where(members: list[dict[str, Any]], run: dict[str, Any]) -> dict[str, str]:
    """A testsuite's ``timestamp`` (when its first result was judged, else the run's start), ``hostname`` (the
    controller the judge ran on, as run.json records it) and ``time`` (the sum of its results' durations)."""
    # the judge writes every ``started`` in one UTC format, so the earliest is the smallest text: a fleet's two
    # million results are compared, not parsed
    stamps = [r["started"] for r in members if isinstance(r.get("started"), str) and r["started"]]
    first = (junit_timestamp(min(stamps)) if stamps else None) or junit_timestamp(run.get("started"))
    seconds = 0.0
    for r in members:  # _seconds without its text, once per result of a fleet
        duration = r.get("duration_s")
        if type(duration) in (int, float) and duration > 0:
            seconds += duration
    out = {"time": f"{seconds:.3f}"}
    if first:
        out["timestamp"] = first
    if run.get("controller"):
        out["hostname"] = clean_text(run["controller"])
    return out


def render(view: dict[str, Any]) -> str:
    """The JUnit XML document for a view built by ``clustereval.report.build_view``."""
    score, run = view["score"], view["run"]
    root = ET.Element(
        "testsuites", {"name": f"clustereval {clean_text(run.get('run_id') or view['run_dir'].name)}"}
    )
    props = ET.SubElement(root, "properties")
    for key, value in (
        ("tier", score.get("tier")),
        ("score", score.get("score")),
        ("tier_before_caps", score.get("tier_before_caps")),
        ("provisional", "; ".join(f"{k}={','.join(v) if isinstance(v, list) else v}"
                                  for k, v in (score.get("provisional") or {}).items())),
        ("unreachable", ",".join((score.get("subjects") or {}).get("unreachable") or [])),
        ("incomplete", run_state(view) or ""),
    ):
        ET.SubElement(props, "property", {"name": key, "value": clean_text("" if value is None else value)})

    phases: dict[str, list[dict[str, Any]]] = {}
    for result in view["results"]:
        phases.setdefault(str(result.get("phase") or "unknown"), []).append(result)
    order = sorted(
        phases, key=lambda p: (_SUITE_ORDER.index(p) if p in _SUITE_ORDER else len(_SUITE_ORDER), p)
    )
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    grouped = {check: (shown, fold) for check, shown, fold in view_checks(view)}  # folded once, for every report
    for phase in order:
        # a check's passes beyond the fold are one testcase (clustereval.report.fleet): a fleet's junit.xml holds
        # its findings, not two million passing testcases
        members, folds = [], []
        for check in sorted({str(r.get("check")) for r in phases[phase]}):
            shown, fold = grouped[check]
            members += sorted(shown, key=lambda r: (str(r.get("subject")), str(subject_label(r))))
            if fold:
                folds.append((check, fold))
        stats = {
            "tests": len(members) + len(folds),
            "failures": sum(1 for r in members if r.get("status") == "fail"),
            "errors": sum(1 for r in members if r.get("status") not in ("pass", "warn", "fail", "skip")),
            "skipped": sum(1 for r in members if r.get("status") == "skip"),
        }
        for key in totals:
            totals[key] += stats[key]
        suite = ET.SubElement(
            root, "testsuite", {"name": clean_text(phase), **{k: str(v) for k, v in stats.items()},
                                **_suite_when_where(phases[phase], run)}
        )
        for result in members:
            _testcase(suite, result, view)
        for check, fold in folds:
            case = ET.SubElement(suite, "testcase", {"classname": clean_text(check),
                                                     "name": f"{fold['count']} passing subjects", "time": "0.000"})
            ET.SubElement(case, "system-out").text = "PASS: " + folded_text(fold)
    for key, value in totals.items():
        root.set(key, str(value))
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
