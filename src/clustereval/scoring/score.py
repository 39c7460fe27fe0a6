"""Turn check results into a score (0–100) and a tier, explained by the results that moved it.

The rubric (``rubric.yml``, data) decides everything numeric: points per status, weight per
severity, categories and the result domains they cover, tier thresholds and caps. This module only
applies it, so later issues deepen scoring by editing data, not code. See ``docs/scoring.md``.
"""

from __future__ import annotations

import fnmatch
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from clustereval import plan, yamldata
from clustereval import results as results_mod
from clustereval.scoring import against_history

DEFAULT_RUBRIC = Path(__file__).with_name("rubric.yml")
SCORE_FILE = "score.json"
RUN_FILE = "run.json"
VERDICTS = ("pass", "warn", "fail")

_RESULT_MATCH_KEYS = {"status", "severity", "domain", "check", "phase", "value", "exclude_domain"}
_AGGREGATE_KEYS = {"unreachable_nodes_at_least", "coverage_below", "measured_weight_below"}


def rubric_problems(rubric: Any) -> list[str]:
    """What is wrong with a rubric mapping (empty when it can be applied)."""
    if not isinstance(rubric, dict):
        return ["a rubric must be a mapping"]
    out: list[str] = []
    for key in ("status_points", "severity_weights", "categories", "tiers", "caps"):
        if key not in rubric:
            out.append(f"missing key {key!r}")
    if out:
        return out
    for status in VERDICTS:
        if not isinstance(rubric["status_points"].get(status), int | float):
            out.append(f"status_points.{status} must be a number")
    for severity in results_mod.SEVERITIES:
        if not isinstance(rubric["severity_weights"].get(severity), int | float):
            out.append(f"severity_weights.{severity} must be a number")
    tier_names = [t.get("name") for t in rubric["tiers"] if isinstance(t, dict)]
    if len(tier_names) != len(rubric["tiers"]) or not tier_names:
        out.append("tiers must be a non-empty list of {name, min}")
    mins = [t.get("min") for t in rubric["tiers"] if isinstance(t, dict)]
    if any(not isinstance(m, int | float) for m in mins) or mins != sorted(mins, reverse=True):
        out.append("tiers must be ordered best first with numeric, non-increasing min")
    seen_domains: dict[str, str] = {}
    groups = {str(cat["group"]) for cat in (rubric["categories"] or {}).values()
              if isinstance(cat, dict) and cat.get("group")}
    for clash in sorted(groups & set(rubric["categories"] or {})):
        out.append(f"group {clash!r} is also a category name")
    for name, cat in (rubric["categories"] or {}).items():
        if not isinstance(cat, dict) or not isinstance(cat.get("weight"), int | float) or cat["weight"] < 0:
            out.append(f"category {name!r} needs a non-negative numeric weight")
            continue
        if not isinstance(cat.get("checks") or [], list):
            out.append(f"category {name!r}: checks must be a list of check ids or globs")
        for domain in cat.get("domains") or []:
            if domain in seen_domains:
                out.append(f"domain {domain!r} is in both {seen_domains[domain]!r} and {name!r}")
            seen_domains[domain] = name
    for tier, needed in (rubric.get("evidence") or {}).items():
        if tier not in tier_names:
            out.append(f"evidence: {tier!r} is not a tier")
        elif not isinstance(needed, list) or set(needed) - set(rubric["categories"] or {}) - groups:
            out.append(f"evidence.{tier} must be a list of category or group names")
    if rubric.get("unrated_tier") is not None and rubric["unrated_tier"] not in tier_names:
        out.append(f"unrated_tier {rubric['unrated_tier']!r} is not a tier")
    for idx, cap in enumerate(rubric["caps"] or []):
        label = cap.get("id", idx) if isinstance(cap, dict) else idx
        if not isinstance(cap, dict) or not isinstance(cap.get("when"), dict) or not cap["when"]:
            out.append(f"cap {label}: needs a non-empty 'when' mapping")
            continue
        if cap.get("cap") not in tier_names:
            out.append(f"cap {label}: cap {cap.get('cap')!r} is not a tier")
        keys = set(cap["when"])
        unknown = keys - _RESULT_MATCH_KEYS - _AGGREGATE_KEYS
        if unknown:
            out.append(f"cap {label}: unknown condition(s) {', '.join(sorted(unknown))}")
        if keys & _AGGREGATE_KEYS and (len(keys) > 1):
            out.append(f"cap {label}: an aggregate condition must stand alone")
    return out


def load_rubric(path: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """Load a rubric YAML (the packaged default when ``path`` is None) and validate it.

    Raises ``ValueError`` naming every problem when the rubric cannot be applied.
    """
    source = Path(path) if path is not None else DEFAULT_RUBRIC
    with open(source, encoding="utf-8") as fh:
        rubric = yamldata.load(fh)
    problems = rubric_problems(rubric)
    if problems:
        raise ValueError(f"rubric {source}: " + "; ".join(problems))
    rubric = dict(rubric)
    rubric["path"] = "packaged:clustereval/scoring/rubric.yml" if path is None else str(source)
    return rubric


def tier_for_score(score: float | None, rubric: dict[str, Any]) -> str | None:
    """The best tier whose ``min`` the score meets; None when there is no score."""
    if score is None:
        return None
    for tier in rubric["tiers"]:
        if score >= tier["min"]:
            return tier["name"]
    return rubric["tiers"][-1]["name"]


def evidence_names(rubric: dict[str, Any], measured: set[str]) -> tuple[list[str], list[str]]:
    """The rubric's categories as the evidence rules name them — a category's ``group`` (the audit areas are the
    group ``configuration``) stands for its members — split into (measured, not measured), in rubric order. A group
    is measured when any of its members is: a Kubernetes cluster has no Slurm to audit."""
    order: list[str] = []
    hit: dict[str, bool] = {}
    for name, cat in rubric["categories"].items():
        label = str(cat.get("group") or name)
        if label not in hit:
            order.append(label)
            hit[label] = False
        hit[label] = hit[label] or name in measured
    return [n for n in order if hit[n]], [n for n in order if not hit[n]]


def evidence_tier(rubric: dict[str, Any], measured: set[str]) -> tuple[str, dict[str, list[str]]]:
    """The best tier whose categories (the rubric's ``evidence``: the categories or groups a tier needs measured)
    were all measured, and for every better tier the categories it lacks. A tier the rubric lists no evidence for
    needs none."""
    measured = set(measured) | set(evidence_names(rubric, measured)[0])
    needed = rubric.get("evidence") or {}
    lacking: dict[str, list[str]] = {}
    for tier in rubric["tiers"]:
        missing = [c for c in needed.get(tier["name"]) or [] if c not in measured]
        if not missing:
            return tier["name"], lacking
        lacking[tier["name"]] = missing
    return rubric["tiers"][-1]["name"], lacking


def _tier_rank(rubric: dict[str, Any]) -> dict[str, int]:
    """Tier name -> rank, 0 the best."""
    return {tier["name"]: idx for idx, tier in enumerate(rubric["tiers"])}


def _domain_of(result: dict[str, Any], catalogue: dict[str, Any] | None) -> str:
    if result.get("domain"):
        return str(result["domain"])
    entry = (catalogue or {}).get(result.get("check")) or {}
    return str(entry.get("domain") or str(result.get("check", "")).split(".")[0] or "unknown")


def _normalised(result: dict[str, Any], catalogue: dict[str, Any] | None, notes: list[str]) -> dict[str, Any]:
    """The result with status, severity and domain guaranteed valid; a broken result counts as error. A result
    that already honours the contract is returned as it is (no copy: a fleet's two million results are not held
    twice); one that needs fixing is copied, never changed in place."""
    if (result.get("status") in _STATUSES and result.get("severity") in _SEVERITIES
            and isinstance(result.get("check"), str) and result["check"]
            and isinstance(result.get("subject"), str) and result["subject"]
            and isinstance(result.get("domain"), str) and result["domain"]):
        return result
    out = dict(result)
    out["check"] = str(result.get("check") or "unknown")
    out["subject"] = str(result.get("subject") or "unknown")
    out["domain"] = _domain_of(result, catalogue)
    if out.get("status") not in results_mod.STATUSES:
        notes.append(f"{out['check']} on {out['subject']}: status {out.get('status')!r} treated as error")
        out["status"] = "error"
    if out.get("severity") not in results_mod.SEVERITIES:
        entry = (catalogue or {}).get(out["check"]) or {}
        fallback = entry.get("severity") if entry.get("severity") in results_mod.SEVERITIES else "major"
        notes.append(
            f"{out['check']} on {out['subject']}: severity {out.get('severity')!r} read as {fallback}"
        )
        out["severity"] = fallback
    return out


_STATUSES, _SEVERITIES = frozenset(results_mod.STATUSES), frozenset(results_mod.SEVERITIES)


def _matches(result: dict[str, Any], when: dict[str, Any]) -> bool:
    """Whether a result meets every field of a cap condition (values may be lists and globs; ``null`` matches a
    result without that field, e.g. ``value: null``: nothing was measured)."""
    for key, wanted in when.items():
        if wanted is None:
            if result.get(key) is not None:
                return False
            continue
        options = wanted if isinstance(wanted, list) else [wanted]
        if key == "exclude_domain":
            if any(fnmatch.fnmatchcase(str(result.get("domain", "")), str(opt)) for opt in options):
                return False
            continue
        if not any(fnmatch.fnmatchcase(str(result.get(key, "")), str(opt)) for opt in options):
            return False
    return True


def _pair(result: dict[str, Any]) -> dict[str, Any]:
    """How score.json names a result: check and subject, and the params of a variant."""
    out: dict[str, Any] = {"check": result["check"], "subject": result["subject"]}
    if result.get("params"):
        out["params"] = result["params"]
    return out


def _key(item: dict[str, Any]) -> tuple[str, str, str]:
    return results_mod.identity(item)


def unreachable_hosts(results: list[dict[str, Any]]) -> dict[str, str]:
    """Hosts whose latest ``harness.node.reachable`` result is a fail, with the recorded summary."""
    return {host: str(r.get("summary", "")) for host, r in unreachable_results(results).items()}


def unreachable_results(results: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per host found unreachable: its latest failing ``harness.node.reachable`` result."""
    return {r["subject"]: r for r in results if r.get("check") == plan.REACHABILITY and r.get("status") == "fail"}


def _with_status(
    results: list[dict[str, Any]], wanted: Any, by_status: dict[str, list[dict[str, Any]]]
) -> list[dict[str, Any]]:
    """The results a cap condition's ``status`` can match: only those of the named statuses when it names them
    literally (a fleet's caps then look at its few fails, not at two million passes), else all."""
    options = wanted if isinstance(wanted, list) else [wanted]
    if wanted is None or not all(isinstance(o, str) and o in _STATUSES for o in options):
        return results
    return [r for status in dict.fromkeys(options) for r in by_status[status]]


def _cap_triggers(
    cap: dict[str, Any], results: list[dict[str, Any]], facts: dict[str, Any],
    by_status: dict[str, list[dict[str, Any]]],
) -> tuple[list[dict[str, str]], str] | None:
    """The (check, subject) pairs that trigger a cap and a sentence of detail; None when it holds not."""
    when = cap["when"]
    if "unreachable_nodes_at_least" in when:
        hosts = facts["unreachable"]
        if len(hosts) < when["unreachable_nodes_at_least"]:
            return None
        pairs = [{"check": plan.REACHABILITY, "subject": h} for h in sorted(hosts)]
        return pairs, f"{len(hosts)} unreachable: {', '.join(sorted(hosts))}"
    if "coverage_below" in when:
        if facts["coverage"] >= when["coverage_below"]:
            return None
        pairs = [_pair(r) for r in results if r["status"] in ("skip", "error")]
        return pairs, (
            f"coverage {facts['coverage']:.0%} < {when['coverage_below']:.0%} "
            f"({facts['verdicts']} of {facts['total']} results have a verdict)"
        )
    if "measured_weight_below" in when:
        if facts["measured_weight"] >= when["measured_weight_below"]:
            return None
        unmeasured = ", ".join(facts["unmeasured"]) or "none"
        return [], (
            f"measured categories carry {facts['measured_weight']:.0%} of the weight "
            f"(< {when['measured_weight_below']:.0%}); not measured: {unmeasured}"
        )
    pairs = [_pair(r) for r in _with_status(results, when.get("status"), by_status) if _matches(r, when)]
    if not pairs:
        return None
    checks = sorted({p["check"] for p in pairs})
    return pairs, f"{len(pairs)} result(s): {', '.join(checks)}"


def score_results(
    results: list[dict[str, Any]],
    rubric: dict[str, Any] | None = None,
    catalogue: dict[str, Any] | None = None,
    *,
    already_latest: bool = False,
) -> dict[str, Any]:
    """Score check results (the contract in ``clustereval.results``) with a rubric; pure function.

    Only the latest result per (check, subject, params) counts; ``already_latest`` says ``results`` is that
    already (:func:`score_loaded`), so a fleet's two million results are not deduplicated twice.

    Within a category each scored result weighs ``severity_weights[severity]`` and earns
    ``status_points[status]`` of it; the overall score is the weight-averaged score of the measured
    categories. Caps then bound the tier. Returns the dict written as ``score.json``.
    """
    rubric = rubric if rubric is not None else load_rubric()
    notes: list[str] = []
    scored = [_normalised(r, catalogue, notes) for r in (results if already_latest else results_mod.latest(results))]
    status_points = rubric["status_points"]
    severity_weights = rubric["severity_weights"]

    domain_to_category = {
        domain: name for name, cat in rubric["categories"].items() for domain in cat.get("domains") or []
    }
    # a category may also claim checks by id (globs) from another domain: audit.health.* is the health-check and
    # remediation category's evidence, not configuration's
    by_check = [(str(glob), name) for name, cat in rubric["categories"].items() for glob in cat.get("checks") or []]
    category_cache: dict[tuple[str, str], str | None] = {}

    def category_of(r: dict[str, Any]) -> str | None:
        key = (r["check"], r["domain"])
        if key not in category_cache:  # globs matched once per check, not once per result
            category_cache[key] = next((name for glob, name in by_check if fnmatch.fnmatchcase(r["check"], glob)),
                                       domain_to_category.get(r["domain"]))
        return category_cache[key]

    # One pass over the results: a fleet's two million are walked once here, not once per category.
    by_status: dict[str, list[dict[str, Any]]] = {status: [] for status in results_mod.STATUSES}
    member_of = [category_of(r) for r in scored]
    tallies = {name: {"counts": dict.fromkeys(results_mod.STATUSES, 0), "earned": 0.0, "possible": 0.0}
               for name in rubric["categories"]}
    for r, name in zip(scored, member_of, strict=True):
        status = r["status"]
        by_status[status].append(r)
        if name is None:
            continue
        tally = tallies[name]
        tally["counts"][status] += 1
        if status in VERDICTS:
            weight = severity_weights[r["severity"]]
            tally["earned"] += weight * status_points[status]
            tally["possible"] += weight
    counts = {status: len(members) for status, members in by_status.items()}
    unscored = set(rubric.get("unscored_domains") or [])
    uncategorised = sorted({domain for (_, domain), name in category_cache.items() if name is None} - unscored)

    categories: dict[str, dict[str, Any]] = {}
    for name, cat in rubric["categories"].items():
        earned, possible = tallies[name]["earned"], tallies[name]["possible"]
        categories[name] = {
            "title": cat.get("title", name),
            "group": cat.get("group"),
            "weight": cat["weight"],
            "domains": list(cat.get("domains") or []),
            "checks": list(cat.get("checks") or []),
            "counts": tallies[name]["counts"],
            "measured": possible > 0,
            "score": round(100.0 * earned / possible, 2) if possible > 0 else None,
            "_possible": possible,
        }

    total_weight = sum(c["weight"] for c in categories.values())
    measured_weight = sum(c["weight"] for c in categories.values() if c["measured"])
    score: float | None = None
    if measured_weight > 0:
        score = sum(c["weight"] * c["score"] for c in categories.values() if c["measured"]) / measured_weight

    # Points lost, in overall-score points: summed over all results they equal 100 - score. Only a verdict worth
    # less than full points loses any (a warn or a fail with the default rubric), so only those are looked at.
    losing = {status for status in VERDICTS if status_points[status] < 1}
    lost: dict[int, float] = {}
    for r, name in zip(scored, member_of, strict=True):
        cat = categories.get(name) if name else None
        if r["status"] in losing and cat and cat["measured"] and measured_weight > 0:
            share = cat["weight"] / measured_weight
            missed = severity_weights[r["severity"]] * (1 - status_points[r["status"]])
            if missed > 0:
                lost[id(r)] = 100.0 * share * missed / cat["_possible"]

    # A check that does not apply to this kind of cluster (a Kubernetes check on Slurm) is no missing
    # evidence: it leaves the coverage denominator.
    not_applicable = sum(1 for r in by_status["skip"]
                         if isinstance(r.get("evidence"), dict) and r["evidence"].get("not_applicable"))
    total = len(scored) - not_applicable
    verdicts = sum(counts[s] for s in VERDICTS)
    unreachable = unreachable_hosts(by_status["fail"])
    facts = {
        "coverage": verdicts / total if total else 0.0,
        "verdicts": verdicts,
        "total": total,
        "unreachable": unreachable,
        "measured_weight": measured_weight / total_weight if total_weight else 0.0,
        "unmeasured": [name for name, c in categories.items() if not c["measured"]],
    }

    ranks = _tier_rank(rubric)
    tier_before_caps = tier_for_score(score, rubric)
    unrated_tier = rubric.get("unrated_tier") or rubric["tiers"][-1]["name"]
    baseline = tier_before_caps if tier_before_caps is not None else unrated_tier
    tier = baseline
    caps_applied: list[dict[str, Any]] = []
    trigger_caps: dict[tuple[str, str, str], list[str]] = {}
    for cap in rubric["caps"]:
        found = _cap_triggers(cap, scored, facts, by_status)
        if found is None:
            continue
        pairs, detail = found
        limits = ranks[cap["cap"]] > ranks[baseline]
        caps_applied.append(
            {
                "id": cap.get("id", cap["cap"]),
                "label": cap.get("label", cap.get("id", "cap")),
                "rule": cap.get("rule", json.dumps(cap["when"], sort_keys=True)),
                "cap": cap["cap"],
                "limits_tier": limits,
                "detail": detail,
                "triggers": pairs,
            }
        )
        if ranks[cap["cap"]] > ranks[tier]:
            tier = cap["cap"]
        if limits:
            for p in pairs:
                trigger_caps.setdefault(_key(p), []).append(cap.get("id", cap["cap"]))

    # An honest tier: a category a tier depends on that was not measured makes the verdict provisional, and the
    # tier is at most the best one the measured categories support (rubric ``evidence``).
    # A group counts as measured when one of its members is (an audit area the cluster has nothing of, such as
    # Slurm on Kubernetes, does not make the verdict provisional; it still shows as not measured).
    provisional = None
    measured_names = {name for name, c in categories.items() if c["measured"]}
    measured, not_measured = evidence_names(rubric, measured_names)
    if not_measured and score is not None:  # nothing measured at all is unrated, said as such
        supported, lacking = evidence_tier(rubric, measured_names)
        better = [t["name"] for t in rubric["tiers"] if ranks[t["name"]] < ranks[supported]]
        provisional = {"measured": measured, "not_measured": not_measured, "supported_tier": supported,
                       "limits_tier": ranks[supported] > ranks[tier], "next_tier": better[-1] if better else None,
                       "next_needs": lacking.get(better[-1], []) if better else []}
        if provisional["limits_tier"]:
            tier = supported

    triggering = {key[:2] for key in trigger_caps}  # (check, subject): no identity built for every result
    movers = _movers([r for r in scored if id(r) in lost
                      or ((r["check"], r["subject"]) in triggering and _key(r) in trigger_caps)],
                     lost, category_of, trigger_caps, catalogue, int(rubric.get("movers_limit", 20)))
    # subjects first: a fleet has two million results but some ninety thousand subjects (hosts and their GPUs)
    hosts = sorted(results_mod.hosts_of_subjects({r["subject"] for r in scored}))
    out = {
        "tier": tier,
        "score": round(score, 2) if score is not None else None,
        "tier_before_caps": tier_before_caps,
        "caps_applied": caps_applied,
        "provisional": provisional,
        "categories": {
            name: {k: v for k, v in c.items() if not k.startswith("_")} for name, c in categories.items()
        },
        "counts": counts,
        "total": total,
        "coverage": round(facts["coverage"], 4),
        "measured_weight": round(facts["measured_weight"], 4),
        "not_measured": facts["unmeasured"],
        "uncategorised_domains": uncategorised,
        "subjects": {
            "hosts": hosts,
            "unreachable": sorted(unreachable),
            "unreachable_detail": dict(sorted(unreachable.items())),
            "cluster_wide": any(r["subject"] == results_mod.CLUSTER_SUBJECT for r in scored),
        },
        "movers": movers["listed"],
        "movers_total": movers["total"],
        "rubric": {
            "name": rubric.get("name", "unnamed"),
            "version": rubric.get("version"),
            "path": rubric.get("path"),
            "tiers": [dict(t) for t in rubric["tiers"]],
        },
        "notes": notes,
    }
    out["explanation"] = explain(out)
    return out


def _movers(
    candidates: list[dict[str, Any]],
    lost: dict[int, float],
    category_of: Callable[[dict[str, Any]], str | None],
    trigger_caps: dict[tuple[str, str, str], list[str]],
    catalogue: dict[str, Any] | None,
    limit: int,
) -> dict[str, Any]:
    """Results that lowered the tier (cap triggers, always listed) then the costliest, most first. ``lost`` holds
    the points each result cost (by ``id``)."""
    candidates.sort(key=lambda r: (_key(r) not in trigger_caps, -lost.get(id(r), 0.0), r["check"]))
    capped = [r for r in candidates if _key(r) in trigger_caps]
    listed = (
        capped
        + [r for r in candidates if _key(r) not in trigger_caps][: max(0, limit - len(capped))]
    )
    out = []
    for r in listed:
        entry = (catalogue or {}).get(r["check"]) or {}
        out.append(
            {
                "check": r["check"],
                "title": entry.get("title") or r.get("title") or r["check"],
                "subject": r["subject"],
                "params": r.get("params") or {},
                "status": r["status"],
                "severity": r["severity"],
                "category": category_of(r),
                "summary": r.get("summary", ""),
                "points_lost": round(lost.get(id(r), 0.0), 3),
                "caps": trigger_caps.get(_key(r), []),
                "artifacts": list(r.get("artifacts") or []),
            }
        )
    return {"listed": out, "total": len(candidates)}


def explain(score: dict[str, Any]) -> list[str]:
    """Plain sentences saying how the tier was reached (also rendered at the top of reports)."""
    lines: list[str] = []
    if score["score"] is None:
        lines.append(
            f"No category could be measured (no pass/warn/fail with a scored severity), so the run is "
            f"unrated and gets {score['tier']}: no evidence is never a high tier."
        )
    else:
        lines.append(
            f"Weighted score {score['score']:.1f}/100 reaches {score['tier_before_caps']} by threshold."
        )
    for cap in score["caps_applied"]:
        if cap["limits_tier"]:
            lines.append(f"Capped at {cap['cap']} because {cap['rule']}: {cap['detail']}.")
    provisional = score.get("provisional")
    if provisional:
        needs = (f"; {provisional['next_tier']} needs {', '.join(provisional['next_needs'])} measured"
                 if provisional["next_tier"] else "")
        lines.append(f"Provisional: only {', '.join(provisional['measured']) or 'nothing'} measured, so the evidence "
                     f"supports {provisional['supported_tier']} at most{needs}"
                     + (" (this holds the tier)." if provisional["limits_tier"] else "."))
    idle = [f"{cap['label']} (cap {cap['cap']})" for cap in score["caps_applied"] if not cap["limits_tier"]]
    if idle:
        lines.append(f"Also triggered, without effect (the tier is already at or below): {', '.join(idle)}.")
    if score["not_measured"]:
        measured = [n for n, c in score["categories"].items() if c["measured"]]
        lines.append(
            f"The tier is based on {len(measured)} of {len(score['categories'])} categories "
            f"({score['measured_weight']:.0%} of the rubric weight); "
            f"not measured: {', '.join(score['not_measured'])}."
        )
    if score["uncategorised_domains"]:
        lines.append(
            f"Results in domains {', '.join(score['uncategorised_domains'])} belong to no rubric category: "
            f"they count for caps and coverage but not for the score."
        )
    lines.append(f"Final tier: {score['tier']}.")
    return lines


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` via a temporary file and a rename: readers never see half a file."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_run_info(run_dir: str | os.PathLike[str]) -> tuple[dict[str, Any], list[str]]:
    """``run.json`` as a dict (empty when absent or unreadable) and warnings about it."""
    path = Path(run_dir) / RUN_FILE
    if not path.exists():
        return {}, [f"{RUN_FILE} is missing: run metadata (inventory, versions, dates) unknown"]
    try:
        info = json.loads(path.read_text(encoding="utf-8", errors="replace"))
    except json.JSONDecodeError as exc:
        return {}, [f"{RUN_FILE} is unreadable ({exc.msg}): run metadata unknown"]
    if not isinstance(info, dict):
        return {}, [f"{RUN_FILE} is not a JSON object: run metadata unknown"]
    return info, []


def load_catalogue() -> tuple[dict[str, Any] | None, list[str]]:
    """The check catalogue when the package provides one; (None, [why]) otherwise."""
    try:
        from clustereval.checks import catalogue as catalogue_mod

        return catalogue_mod.load(), []
    except Exception as exc:  # the report must render even when the catalogue is absent or broken
        return None, [f"check catalogue unavailable ({type(exc).__name__}: {exc}); titles come from results"]


def score_run(
    run_dir: str | os.PathLike[str],
    rubric: dict[str, Any] | None = None,
    catalogue: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Score a saved run directory and write ``score.json`` atomically (tmp file + rename).

    Reads ``results.jsonl`` through :func:`clustereval.results.load` (a torn line, a line breaking the result
    contract, naming a check the catalogue lacks or another run's id is left out and becomes a warning), keeps the
    latest result per (check, subject, params), and uses ``run.json`` when present for the inventory (hosts that
    produced no result at all) and an ``options.rubric`` path.
    """
    run_dir = Path(run_dir)
    latest, warnings, info, history = load_current(run_dir)
    return score_loaded(run_dir, latest, warnings, info, rubric, catalogue, history=history)


def load_current(run_dir: Path, keep: Callable[[dict[str, Any]], dict[str, Any]] | None = None
                 ) -> tuple[list[dict[str, Any]], list[str], dict[str, Any], dict[str, Any] | None]:
    """What a run directory's results say now, read once: the latest result per (check, subject, params) after
    :func:`clustereval.plan.current`, with the judgement against history applied
    (:mod:`clustereval.scoring.against_history`); the warnings of reading them; ``run.json``; and what the
    history judgement says (None without one). ``keep`` goes to :func:`clustereval.results.load`."""
    loaded, warnings = results_mod.load(run_dir, keep=keep)
    info, info_warnings = read_run_info(run_dir)
    latest = results_mod.latest(plan.current(loaded, info))
    del loaded  # the superseded lines: a fleet's results are held once
    latest, history_warnings, history = against_history.apply(run_dir, latest, info.get("run_id"))
    return latest, warnings + info_warnings + history_warnings, info, history


def score_loaded(
    run_dir: Path,
    latest: list[dict[str, Any]],
    warnings: list[str],
    info: dict[str, Any],
    rubric: dict[str, Any] | None = None,
    catalogue: dict[str, Any] | None = None,
    history: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """:func:`score_run` on results already read (:func:`load_current`): the latest per (check, subject, params),
    with the warnings of reading them, ``run.json`` and the history judgement's summary. The reports read a run
    once and score what they read (a fleet's results file is not parsed twice)."""
    if catalogue is None:
        catalogue, cat_warnings = load_catalogue()
        warnings = warnings + cat_warnings
    if rubric is None:
        options = info.get("options") if isinstance(info.get("options"), dict) else {}
        rubric = load_rubric(options.get("rubric"))
    score = score_results(latest, rubric, catalogue, already_latest=True)
    inventory = info.get("inventory") if isinstance(info.get("inventory"), dict) else {}
    inventory_hosts = inventory.get("hosts") if isinstance(inventory.get("hosts"), list) else []
    seen = set(score["subjects"]["hosts"])
    score["subjects"]["without_results"] = sorted(str(h) for h in inventory_hosts if str(h) not in seen)
    score["load_warnings"] = warnings
    score["interrupted"] = info.get("interrupted") or None
    score["progress"] = plan.progress(info.get("plan"), latest)
    score["history"] = history
    history_line = against_history.explanation(history)
    if history_line:
        score["explanation"].insert(max(0, len(score["explanation"]) - 1), history_line)  # before the final tier
    if score["interrupted"]:
        done = plan.phrase(score["progress"])
        score["explanation"].insert(0, f"The run was interrupted ({score['interrupted']})"
                                       f"{', ' + done if done else ''}: the tier stands only on what was measured "
                                       f"before.")
    elif info and not info.get("ended"):
        score["explanation"].insert(0, "The run has not finished (or stopped without a word): the tier stands "
                                       "only on what was measured so far.")
    write_atomic(run_dir / SCORE_FILE, json.dumps(score, indent=2, sort_keys=False, default=str) + "\n")
    return score
