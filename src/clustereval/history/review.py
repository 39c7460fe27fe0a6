"""Acceptance and monthly SLA reviews from the history store.

:func:`build_review` reads one cluster's recorded runs in a window and judges them against SLA definitions
(:mod:`clustereval.history.sla`): node, rack and cluster availability with their incidents, the fault drills'
detection and recovery times against their targets, and what changed since the previous review (its window
before this one). Every term gets a verdict — met, breached, not measured (too few runs, too little coverage,
no drill), or not applicable (no target agreed for this hardware) — with the reason; none is met without
evidence. :func:`render_json` writes it for machines, :mod:`clustereval.history.review_markdown` for a ticket.
"""

from __future__ import annotations

import json
import statistics
from datetime import UTC, datetime, timedelta
from typing import Any

from clustereval import baselines
from clustereval import facts as facts_mod
from clustereval import results as results_mod
from clustereval.history.query import host_facts
from clustereval.history.sla import DOWN, KINDS, UP, Sample, Sla, availability, load_sla, parse_time
from clustereval.history.store import HistoryError, Store

MET, BREACHED, NOT_MEASURED, NOT_APPLICABLE = "met", "breached", "not measured", "not applicable"
STATUS_RANK = {"pass": 0, "warn": 1, "fail": 2}
LISTED = 200  # rows of a list the JSON keeps (the count says how many there are)


def _iso(value: datetime | None) -> str | None:
    return value.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z") if value else None


def _month_start(at: datetime, months: int = 0) -> datetime:
    index = at.year * 12 + at.month - 1 + months
    return datetime(index // 12, index % 12 + 1, 1, tzinfo=UTC)


def _runs(store: Store, cluster: str) -> tuple[list[dict[str, Any]], list[str]]:
    """The cluster's runs, oldest first, each with its start (and end) as times; runs whose start cannot be read."""
    found, unreadable = [], []
    for row in store.query("SELECT run_id, started, ended FROM runs WHERE cluster = ?", (cluster,)):
        try:
            at = parse_time(row["started"])
        except HistoryError:
            unreadable.append(row["run_id"])
            continue
        try:
            ended = parse_time(row["ended"]) if row["ended"] else None
        except HistoryError:
            ended = None
        found.append({"run_id": row["run_id"], "at": at, "ended": ended})
    return sorted(found, key=lambda r: (r["at"], r["run_id"])), unreadable


def resolve_window(kind: str, runs: list[dict[str, Any]], since: datetime | None, until: datetime | None,
                   now: datetime) -> tuple[datetime, datetime]:
    """The review window [since, until): monthly defaults to the last calendar month (a given start: its month),
    acceptance to the first run's start up to the last run's end (a second after its start when it recorded no
    end: it still counts)."""
    if kind == "monthly":
        since = since or _month_start(now, -1)
        until = until or _month_start(since, 1)
    else:
        since = since or (runs[0]["at"] if runs else now)
        # the last run's end; one that recorded none still counts (the window ends a second after its start)
        last = runs[-1] if runs else None
        until = until or (now if last is None else last["ended"] if last["ended"] and last["ended"] > last["at"]
                          else last["at"] + timedelta(seconds=1))
    if until < since:
        raise HistoryError(f"the review window ends ({_iso(until)}) before it starts ({_iso(since)})")
    return since, until


def previous_window(kind: str, since: datetime, until: datetime) -> tuple[datetime, datetime]:
    """The last review's window: the calendar month before a monthly review's, else as long, just before."""
    if kind == "monthly" and since == _month_start(since) and until == _month_start(since, 1):
        return _month_start(since, -1), since
    return since - (until - since), since


def observe(store: Store, run_id: str, at: datetime, sla: Sla, in_window: bool = True) -> Sample:
    """What one run says of each node: down when a node-state check has a down status on it, or (when the SLA
    says so) every result on it that is no skip is an error; up when the run has anything else of it."""
    counts: dict[str, dict[str, int]] = {}
    for row in store.query("SELECT subject, status, COUNT(*) AS n FROM results WHERE run_id = ? "
                           "GROUP BY subject, status", (run_id,)):
        hosts = results_mod.subject_hosts(row["subject"])
        if len(hosts) == 1:
            per = counts.setdefault(hosts[0], {})
            per[row["status"]] = per.get(row["status"], 0) + int(row["n"])
    for row in store.query("SELECT DISTINCT host FROM facts WHERE run_id = ?", (run_id,)):
        counts.setdefault(row["host"], {})
    nodes: dict[str, tuple[str, list[dict[str, Any]]]] = {host: (UP, []) for host in counts}
    checks = sorted(sla.down_checks)
    rows = store.query(f"SELECT check_id, subject, status, summary FROM results WHERE run_id = ? AND check_id IN "
                       f"({', '.join('?' for _ in checks)}) ORDER BY check_id, subject", (run_id, *checks))
    for row in rows:
        hosts = results_mod.subject_hosts(row["subject"])
        if len(hosts) == 1 and row["status"] in sla.down_checks[row["check_id"]]:
            evidence = nodes.get(hosts[0], (UP, []))[1]
            nodes[hosts[0]] = (DOWN, [*evidence, {"run_id": run_id, "check": row["check_id"],
                                                  "status": row["status"], "summary": row["summary"]}])
    if sla.every_result_error:
        for host, per in counts.items():
            errors = per.get("error", 0)
            if errors and not any(per.get(s) for s in STATUS_RANK) and nodes[host][0] == UP:
                nodes[host] = (DOWN, [{"run_id": run_id, "check": "(every result)", "status": "error",
                                       "summary": f"all {errors} results on {host} were errors: nothing could be "
                                                  f"run on it"}])
    return Sample(run_id, at, nodes, in_window)


def rack_membership(store: Store, sla: Sla, hosts: list[str], run_ids: list[str]
                    ) -> tuple[dict[str, list[str]], str | None]:
    """Rack -> hosts and where that came from: the SLA's racks, its host pattern, else the hosts' rack fact
    (their latest value in the window)."""
    if sla.racks:
        return {r: sorted(h) for r, h in sla.racks.items()}, f"racks listed in {sla.origin}"
    racks: dict[str, list[str]] = {}
    if sla.host_pattern is not None:
        for host in hosts:
            if (found := sla.host_pattern.search(host)) and found.group(1):
                racks.setdefault(found.group(1), []).append(host)
        return racks, f"host names matching {sla.host_pattern.pattern!r}" if racks else None
    if not sla.rack_fact:
        return {}, None
    rack_of: dict[str, str] = {}
    for run_id in reversed(run_ids):  # newest first: a host's latest value wins
        for host, found in host_facts(store, run_id, (sla.rack_fact,)).items():
            value = found.get(sla.rack_fact)
            if value and host not in rack_of:
                rack_of[host] = str(value)
    for host, rack in sorted(rack_of.items()):
        racks.setdefault(rack, []).append(host)
    return racks, f"the {sla.rack_fact} fact of the hosts" if racks else None


def _target(sla: Sla, check: str, subject_facts: dict[str, Any]) -> tuple[Any, Any, str]:
    spec = sla.drill_targets.get(check, "baselines")
    if spec != "baselines":
        return spec.get("warn"), spec.get("fail"), sla.origin
    try:
        lim = baselines.reference("fault", check, facts=subject_facts)
    except baselines.NoReference as exc:
        return None, None, str(exc)
    return lim.warn, lim.fail, lim.source


def drills(store: Store, run_ids: list[str], sla: Sla) -> dict[str, Any]:
    """Per drill check: every drill result in the window against its target (pass, warn, fail; a fault never
    detected or a node never back is a fail; an interrupted drill is an error, measuring nothing)."""
    checks = sorted(sla.drill_targets)
    out: dict[str, Any] = {c: {"drills": []} for c in checks}
    if not checks:
        return out
    for run_id in run_ids:
        rows = store.query(f"SELECT check_id, subject, params_key, status, value, summary FROM results WHERE "
                           f"run_id = ? AND check_id IN ({', '.join('?' for _ in checks)}) ORDER BY subject",
                           (run_id, *checks))
        per_host = host_facts(store, run_id) if rows else {}
        for row in rows:
            warn, fail, source = _target(sla, row["check_id"], facts_mod.for_subject(per_host, row["subject"]))
            value = row["value"]
            if row["status"] == "error":
                outcome = "error"
            elif row["status"] == "skip":
                outcome = "n/a"
            elif value is None:
                outcome = "fail" if row["status"] == "fail" else "n/a"
            elif warn is None and fail is None:
                outcome = "n/a"
            else:
                outcome = ("fail" if fail is not None and value > fail else
                           "warn" if warn is not None and value > warn else "pass")
            out[row["check_id"]]["drills"].append({
                "run_id": run_id, "subject": row["subject"], "params": row["params_key"], "value_s": value,
                "warn_s": warn, "fail_s": fail, "target_source": source, "outcome": outcome,
                "summary": row["summary"]})
    for entry in out.values():
        values = sorted(d["value_s"] for d in entry["drills"] if d["outcome"] in STATUS_RANK and d["value_s"]
                        is not None)
        entry.update(n=len(entry["drills"]), worst_s=values[-1] if values else None,
                     median_s=statistics.median(values) if values else None,
                     outcomes={o: sum(d["outcome"] == o for d in entry["drills"])
                               for o in ("pass", "warn", "fail", "error", "n/a")})
    return out


def _fleet_figures(figures: list[dict[str, Any]]) -> dict[str, Any]:
    up, down = sum(f["up_s"] for f in figures), sum(f["down_s"] for f in figures)
    planned = sum(f["up_s"] + f["down_s"] + f["unobserved_s"] for f in figures)
    return {"availability": up / (up + down) if up + down else None,
            "coverage": (up + down) / planned if planned else None, "up_s": up, "down_s": down}


def percent(value: float | None, digits: int = 3) -> str:
    if value is None:
        return "-"
    return f"{f'{100 * value:.{digits}f}'.rstrip('0').rstrip('.')} %"


def _availability_term(name: str, level: str, subjects: dict[str, dict[str, Any]], target: float, scope: str,
                       sla: Sla, runs: int, required: bool, missing: str | None = None) -> dict[str, Any]:
    term = {"term": name, "level": level, "target": target, "scope": scope, "required": required, "measured": None}
    if missing or not subjects:
        return {**term, "verdict": NOT_MEASURED, "reason": missing or f"no {level} was seen in the window"}
    fleet = _fleet_figures(list(subjects.values()))
    term.update(measured=fleet["availability"], coverage=fleet["coverage"])
    if runs < sla.min_samples:
        return {**term, "verdict": NOT_MEASURED, "reason": f"only {runs} run(s) in the window: at least "
                                                           f"{sla.min_samples} are needed to support a figure"}
    if scope == "each":
        measured = {s: f for s, f in subjects.items() if f["samples"] >= sla.min_samples and f["coverage"] is not None
                    and f["coverage"] >= sla.min_coverage}
        below = sorted((f["availability"], s) for s, f in measured.items() if f["availability"] < target)
        if below:
            return {**term, "verdict": BREACHED, "reason": f"{len(below)} of {len(subjects)} {level}s below "
                    f"{percent(target)}: " + ", ".join(f"{s} {percent(a)}" for a, s in below[:5])}
        if len(measured) < len(subjects):
            return {**term, "verdict": NOT_MEASURED, "reason": f"{len(subjects) - len(measured)} of {len(subjects)} "
                    f"{level}s have too few runs or too little coverage to be judged"}
        return {**term, "verdict": MET, "reason": f"every {level} at or above {percent(target)} (lowest "
                f"{percent(min(f['availability'] for f in measured.values()))})"}
    if fleet["coverage"] is None or fleet["coverage"] < sla.min_coverage:
        return {**term, "verdict": NOT_MEASURED, "reason": f"the runs cover {percent(fleet['coverage'], 1)} of the "
                f"{level} time (at least {percent(sla.min_coverage, 1)} needed)"}
    verdict = MET if fleet["availability"] >= target else BREACHED
    where = "at or above" if verdict == MET else "below"
    return {**term, "verdict": verdict,
            "reason": f"{percent(fleet['availability'])} {where} the target {percent(target)}"}


def _drill_term(check: str, entry: dict[str, Any], required: bool) -> dict[str, Any]:
    term = {"term": check, "level": "drill", "required": required, "measured": entry["worst_s"],
            "median_s": entry["median_s"], "target": None}
    counts = entry["outcomes"]
    fails = [d for d in entry["drills"] if d["outcome"] == "fail"]
    targets = sorted({d["fail_s"] for d in entry["drills"] if d["fail_s"] is not None})
    term["target"] = targets[0] if len(targets) == 1 else targets or None
    if fails:
        never = sum(d["value_s"] is None for d in fails)
        said = f" ({never} never happened)" if never else ""
        return {**term, "verdict": BREACHED, "reason": f"{len(fails)} of {entry['n']} drill(s) beyond the target"
                f"{said}: " + "; ".join(f"{d['subject']}: {d['summary']}" for d in fails[:3])}
    measured = counts["pass"] + counts["warn"]
    if measured:
        warned = f", {counts['warn']} above the warn level" if counts["warn"] else ""
        return {**term, "verdict": MET, "reason": f"{measured} drill(s) within the target{warned}; worst "
                f"{entry['worst_s']:g} s, median {entry['median_s']:g} s"}
    if counts["n/a"] and not counts["error"]:
        return {**term, "verdict": NOT_APPLICABLE, "reason": "no target applies: " + entry["drills"][0]["summary"]
                if entry["drills"][0]["value_s"] is None else "no target agreed for this hardware ("
                + entry["drills"][0]["target_source"] + ")"}
    if counts["error"]:
        return {**term, "verdict": NOT_MEASURED, "reason": f"{counts['error']} drill(s) interrupted or failed in the "
                                                           f"harness: nothing measured"}
    return {**term, "verdict": NOT_MEASURED, "reason": "no drill ran in the window"}


def _last_results(store: Store, run_id: str) -> dict[tuple[str, str, str], dict[str, Any]]:
    return {(r["check_id"], r["subject"], r["params_key"]): r for r in store.query(
        "SELECT check_id, subject, params_key, status, value, direction, unit, summary FROM results WHERE run_id = ?",
        (run_id,))}


def changes(store: Store, before: str | None, after: str | None, noise: float) -> dict[str, Any]:
    """Results whose status got worse or better between two runs, values that moved beyond ``noise`` (relative, in
    the result's direction) with the same status, results only one run has, and fleet facts that changed."""
    out: dict[str, Any] = {"from_run": before, "to_run": after}
    if not before or not after:
        return {**out, "compared": False}
    old, new = _last_results(store, before), _last_results(store, after)
    lists: dict[str, list[dict[str, Any]]] = {"worse": [], "better": [], "regressed": [], "improved": []}
    for key in sorted(old.keys() & new.keys()):
        a, b = old[key], new[key]
        row = {"check": key[0], "subject": key[1], "params": key[2], "from": a["status"], "to": b["status"],
               "from_value": a["value"], "to_value": b["value"], "unit": b["unit"], "summary": b["summary"]}
        if a["status"] in STATUS_RANK and b["status"] in STATUS_RANK and a["status"] != b["status"]:
            lists["worse" if STATUS_RANK[b["status"]] > STATUS_RANK[a["status"]] else "better"].append(row)
        elif a["status"] == b["status"] and a["value"] is not None and b["value"] is not None and a["value"] != 0:
            moved = (b["value"] - a["value"]) / abs(a["value"])
            direction = b["direction"] or a["direction"]
            if direction in ("higher", "lower") and abs(moved) > noise:
                good = moved > 0 if direction == "higher" else moved < 0
                lists["improved" if good else "regressed"].append({**row, "change": moved})
    old_facts, new_facts = facts_mod.fleet(host_facts(store, before)), facts_mod.fleet(host_facts(store, after))
    facts_changed = {k: {"from": old_facts.get(k), "to": new_facts.get(k)} for k in facts_mod.HARDWARE_KEYS
                     if old_facts.get(k) != new_facts.get(k)}
    return {**out, "compared": True, **{k: v[:LISTED] for k, v in lists.items()},
            "counts": {**{k: len(v) for k, v in lists.items()}, "only_before": len(old.keys() - new.keys()),
                       "only_after": len(new.keys() - old.keys())},
            "hosts": {"from": old_facts["hosts"], "to": new_facts["hosts"]}, "facts": facts_changed}


def _period(store: Store, cluster: str, runs: list[dict[str, Any]], since: datetime, until: datetime,
            sla: Sla) -> dict[str, Any]:
    inside = [r for r in runs if since <= r["at"] < until]
    before = [r for r in runs if r["at"] < since]
    samples = [observe(store, r["run_id"], r["at"], sla) for r in inside]
    if before:
        samples.insert(0, observe(store, before[-1]["run_id"], before[-1]["at"], sla, in_window=False))
    hosts = sorted({h for s in samples for h in s.nodes} | {h for members in sla.racks.values() for h in members})
    racks, rack_source = rack_membership(store, sla, hosts, [s.run_id for s in samples])
    figures = availability(samples, hosts, racks, since, until, sla)
    return {"since": since, "until": until, "runs": [r["run_id"] for r in inside],
            "carried_in": before[-1]["run_id"] if before else None, "rack_members": racks,
            "rack_source": rack_source, **figures}


def build_review(store: Store, cluster: str, kind: str = "monthly", since: datetime | None = None,
                 until: datetime | None = None, sla: Sla | None = None,
                 previous: tuple[datetime | None, datetime | None] | None = None,
                 now: datetime | None = None) -> dict[str, Any]:
    """The review of ``cluster`` (see the module's docstring); ``verdict`` and ``exit`` (0 every required term met,
    1 any breached or a required one not measured). Raises :class:`HistoryError` when the store holds no run of
    the cluster or the window is no window."""
    if kind not in KINDS:
        raise HistoryError(f"review kind {kind!r}: use one of {', '.join(KINDS)}")
    sla = sla or load_sla()
    now = now or datetime.now(UTC)
    runs, unreadable = _runs(store, cluster)
    if not runs:
        raise HistoryError(f"history store {store.url} holds no run of cluster {cluster!r} with a start time "
                           f"(clustereval history list shows the clusters)")
    since, until = resolve_window(kind, runs, since, until, now)
    notes = [f"run(s) {', '.join(unreadable)} have no readable start time and are left out"] if unreadable else []
    if until > now:
        notes.append(f"the window runs to {_iso(until)}, in the future: figures stop at now ({_iso(now)})")
        until = max(since, now)
    cur = _period(store, cluster, runs, since, until, sla)
    prev_since, prev_until = previous_window(kind, since, until)
    if previous:
        prev_since, prev_until = previous[0] or prev_since, previous[1] or prev_until
    prev = _period(store, cluster, runs, prev_since, prev_until, sla)
    if len(cur["runs"]) < sla.min_samples:
        notes.append(f"only {len(cur['runs'])} run(s) in the window: too few to support an availability figure "
                     f"(the SLA asks for at least {sla.min_samples})")
    for rack, members in cur["rack_members"].items():
        if len(members) != sla.rack_size:
            notes.append(f"rack {rack} has {len(members)} known node(s); the SLA's racks have {sla.rack_size}")
    drill_figs = drills(store, cur["runs"], sla)
    terms = [
        _availability_term("node availability", "node", cur["nodes"], sla.node_target, sla.node_scope, sla,
                           len(cur["runs"]), kind in sla.required["node"]),
        _availability_term("rack availability", "rack", cur["racks"], sla.rack_target, sla.rack_scope, sla,
                           len(cur["runs"]), kind in sla.required["rack"], None if cur["racks"] else
                           f"no rack membership: the SLA lists no racks or host pattern and no host has the "
                           f"{sla.rack_fact} fact"),
        _availability_term("cluster availability", "cluster", {"_cluster": cur["cluster"]}, sla.cluster_target,
                           "fleet", sla, len(cur["runs"]), kind in sla.required["cluster"]),
        *[_drill_term(check, entry, kind in sla.required["drills"]) for check, entry in drill_figs.items()],
    ]
    breached = [t for t in terms if t["verdict"] == BREACHED]
    unmeasured = [t for t in terms if t["verdict"] == NOT_MEASURED and t["required"]]
    verdict = BREACHED if breached else NOT_MEASURED if unmeasured else MET
    review = {
        "kind": kind, "cluster": cluster, "store": store.url, "generated": _iso(now),
        "window": {"since": _iso(since), "until": _iso(until), "seconds": (until - since).total_seconds()},
        "sla": {"origin": sla.origin, "source": sla.source, "node_target": sla.node_target,
                "rack_target": sla.rack_target, "rack_size": sla.rack_size, "rack_down_at": sla.rack_down_at,
                "cluster_target": sla.cluster_target, "cluster_up_below": sla.cluster_up_below,
                "down_checks": {k: list(v) for k, v in sla.down_checks.items()},
                "every_result_error": sla.every_result_error, "min_samples": sla.min_samples,
                "min_coverage": sla.min_coverage,
                "maintenance": [{"start": _iso(m.start), "end": _iso(m.end), "hosts": sorted(m.hosts or []) or "all",
                                 "reason": m.reason} for m in sla.maintenance]},
        "runs": {"in_window": cur["runs"], "carried_in": cur["carried_in"]}, "notes": notes,
        "terms": terms, "verdict": verdict, "exit": 0 if verdict == MET else 1,
        "availability": {"node": {**_fleet_figures(list(cur["nodes"].values())), "nodes": len(cur["nodes"])},
                         "rack": {**_fleet_figures(list(cur["racks"].values())), "racks": len(cur["racks"]),
                                  "source": cur["rack_source"]},
                         "cluster": cur["cluster"]},
        "nodes": _listed(cur["nodes"]), "racks": _listed(cur["racks"]),
        "incidents": {level: [_incident(i) for i in found[:LISTED]] for level, found in cur["incidents"].items()},
        "incident_counts": {level: len(found) for level, found in cur["incidents"].items()},
        "drills": drill_figs,
        "since_last_review": _since_last(store, prev, cur, sla),
    }
    return review


def _listed(figures: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Subjects worst first (lowest availability; unmeasured last), at most :data:`LISTED`."""
    ordered = sorted(figures.items(), key=lambda kv: (kv[1]["availability"] is None, kv[1]["availability"] or 0,
                                                      kv[0]))
    return [{"subject": subject, **f} for subject, f in ordered[:LISTED]]


def _incident(found: dict[str, Any]) -> dict[str, Any]:
    return {**found, "start": _iso(found["start"]), "end": _iso(found["end"])}


def _since_last(store: Store, prev: dict[str, Any], cur: dict[str, Any], sla: Sla) -> dict[str, Any]:
    """What changed since the last review: availability deltas, incidents new / resolved / still open, results."""
    def figure(period: dict[str, Any], level: str) -> float | None:
        if level == "cluster":
            return period["cluster"]["availability"]
        return _fleet_figures(list(period["nodes" if level == "node" else "racks"].values()))["availability"]

    deltas = {}
    for level in ("node", "rack", "cluster"):
        before, after = figure(prev, level), figure(cur, level)
        deltas[level] = {"before": before, "after": after,
                         "delta": after - before if before is not None and after is not None else None}
    prev_open = {(i["level"], i["subject"]) for found in prev["incidents"].values() for i in found if i["ongoing"]}
    carried = {(i["level"], i["subject"]) for found in cur["incidents"].values() for i in found
               if i["ongoing"] and i["began_before_window"]}
    new = [i for found in cur["incidents"].values() for i in found if not i["began_before_window"]]
    return {"window": {"since": _iso(prev["since"]), "until": _iso(prev["until"])}, "runs": len(prev["runs"]),
            "availability": deltas,
            "incidents": {"new": [{"level": i["level"], "subject": i["subject"], "start": _iso(i["start"]),
                                   "ongoing": i["ongoing"]} for i in new[:LISTED]], "new_total": len(new),
                          "resolved": [{"level": lv, "subject": s} for lv, s in sorted(prev_open - carried)],
                          "still_open": [{"level": lv, "subject": s} for lv, s in sorted(prev_open & carried)]},
            "results": changes(store, prev["runs"][-1] if prev["runs"] else None,
                               cur["runs"][-1] if cur["runs"] else None, sla.noise)}


# ------------------------------------------------------------------------------------------------ rendering


def render_json(review: dict[str, Any]) -> str:
    return json.dumps(review, indent=2, default=str) + "\n"
