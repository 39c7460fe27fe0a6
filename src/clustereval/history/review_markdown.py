"""The Markdown of an SLA review (:func:`clustereval.history.review.build_review`), for a ticket: verdict, terms,
coverage, availability, incidents, drills and what changed since the last review."""

from __future__ import annotations

from typing import Any

from clustereval.history.review import BREACHED, percent

SHOWN = 20  # rows of a table the Markdown shows


def _dur(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    if seconds < 172800:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} d"


def _cell(text: Any) -> str:
    return str(text if text is not None else "-").replace("|", "\\|").replace("\n", " ")


def _table(head: list[str], rows: list[list[Any]]) -> list[str]:
    return ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)] + [
        "| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]


def _target_text(term: dict[str, Any]) -> str:
    if term["level"] == "drill":
        target = term["target"]
        return "-" if target is None else (f"≤ {target:g} s" if not isinstance(target, list) else
                                           "≤ " + " / ".join(f"{t:g} s" for t in target))
    return f"≥ {percent(term['target'])}" + (" each" if term.get("scope") == "each" else "")


def _measured_text(term: dict[str, Any]) -> str:
    if term["measured"] is None:
        return "-"
    if term["level"] == "drill":
        return f"worst {term['measured']:g} s, median {term['median_s']:g} s"
    return percent(term["measured"]) + (f" (coverage {percent(term.get('coverage'), 1)})" if term.get("coverage")
                                     is not None else "")


def _evidence_text(found: dict[str, Any]) -> str:
    parts = []
    for item in found["evidence"][:2]:
        if "check" in item:
            parts.append(f"{item['check']} {item['status']} in {item['run_id']}: {item['summary']}")
        elif "nodes_down" in item:
            parts.append(f"{len(item['nodes_down'])} of {item['of']} nodes down ({', '.join(item['nodes_down'])})")
        else:
            parts.append(f"{item['nodes_up']} of {item['of']} nodes up (run {item['run_id']})")
    more = found["evidence_total"] - len(parts)
    return "; ".join(parts) + (f"; +{more} more" if more > 0 else "")


def render_markdown(review: dict[str, Any]) -> str:
    """The review for a ticket: verdict, terms, coverage, availability, incidents, drills, changes."""
    w, title = review["window"], "Acceptance review" if review["kind"] == "acceptance" else "Monthly SLA review"
    breached = sum(t["verdict"] == BREACHED for t in review["terms"])
    out = [f"# {title}: {review['cluster']}", "",
           f"Window {w['since']} – {w['until']} ({_dur(w['seconds'])}); store {review['store']}; generated "
           f"{review['generated']}.", "",
           f"**Verdict: {review['verdict'].upper()}** ({breached} of {len(review['terms'])} terms breached).", "",
           f"SLA definitions: {review['sla']['origin']} — {review['sla']['source']}", "", "## Terms", ""]
    out += _table(["term", "target", "measured", "verdict", "reason"],
                  [[t["term"] + ("" if t["required"] else " (not required)"), _target_text(t), _measured_text(t),
                    f"**{t['verdict']}**" if t["verdict"] == BREACHED else t["verdict"], t["reason"]]
                   for t in review["terms"]])
    runs = review["runs"]
    out += ["", "## Coverage", "", f"- {len(runs['in_window'])} run(s) in the window"
            + (f" ({runs['in_window'][0]} … {runs['in_window'][-1]})" if runs["in_window"] else "")
            + (f"; the state at the window's start is run {runs['carried_in']}'s" if runs["carried_in"] else
               "; no earlier run: the time before the first run is unobserved")
            + f"; cluster state observed for {percent(review['availability']['cluster']['coverage'], 1)} of the "
              f"window."]
    out += [f"- {note}" for note in review["notes"]]
    s = review["sla"]
    down_when = ", ".join(f"{c} is {'/'.join(v)}" for c, v in s["down_checks"].items())
    out += [f"- A node is down in a run when {down_when}"
            + (", or every result on it is an error" if s["every_result_error"] else "") + f"; a rack is down when "
            f"{s['rack_down_at']} or more of its nodes are; the cluster is down when fewer than "
            f"{percent(s['cluster_up_below'], 1)} of its nodes are up. Each run stands until the next."]
    if s["maintenance"]:
        out += ["- planned maintenance (not counted): " + "; ".join(
            f"{m['start']} – {m['end']} {m['hosts'] if m['hosts'] == 'all' else ', '.join(m['hosts'])} {m['reason']}"
            for m in s["maintenance"])]
    a = review["availability"]
    out += ["", "## Availability", ""]
    out += _table(["level", "availability", "coverage", "subjects", "incidents"], [
        ["node", percent(a["node"]["availability"]), percent(a["node"]["coverage"], 1), a["node"]["nodes"],
         review["incident_counts"]["node"]],
        ["rack", percent(a["rack"]["availability"]), percent(a["rack"]["coverage"], 1),
         f"{a['rack']['racks']} ({a['rack']['source'] or 'no membership'})", review["incident_counts"]["rack"]],
        ["cluster", percent(a["cluster"]["availability"]), percent(a["cluster"]["coverage"], 1), 1,
         review["incident_counts"]["cluster"]]])
    for name, rows in (("Nodes", review["nodes"]), ("Racks", review["racks"])):
        worst = [r for r in rows if r["down_s"] or r["unobserved_s"]][:SHOWN]
        if worst:
            out += ["", f"{name} with down or unobserved time (worst first):", ""]
            out += _table(["subject", "availability", "down", "unobserved", "maintenance", "runs"],
                          [[r["subject"], percent(r["availability"]), _dur(r["down_s"]), _dur(r["unobserved_s"]),
                            _dur(r["maintenance_s"]), r["samples"]] for r in worst])
    incidents = [i for level in ("cluster", "rack", "node") for i in review["incidents"][level]]
    out += ["", "## Incidents", ""]
    if incidents:
        out += _table(["level", "subject", "start", "end", "duration", "down", "evidence"], [
            [i["level"], i["subject"], i["start"] + (" (before the window)" if i["began_before_window"] else ""),
             "ongoing" if i["ongoing"] else i["end"], _dur(i["duration_s"]), _dur(i["down_s"]), _evidence_text(i)]
            for i in incidents[:SHOWN * 2]])
    else:
        out += ["No incident in the window."]
    out += ["", "## Fault drills", ""]
    rows = [[check, d["subject"], d["params"] or "-", _dur(d["value_s"]) if d["value_s"] is not None else "never",
             f"{_dur(d['warn_s'])} / {_dur(d['fail_s'])}", d["outcome"], d["run_id"]]
            for check, entry in review["drills"].items() for d in entry["drills"]]
    out += _table(["drill", "node", "params", "time", "target (warn / fail)", "outcome", "run"], rows[:SHOWN * 2]) \
        if rows else ["No fault drill ran in the window."]
    last = review["since_last_review"]
    out += ["", f"## Since the last review ({last['window']['since']} – {last['window']['until']}, {last['runs']} "
                f"run(s))", ""]
    for level, d in last["availability"].items():
        delta = f"{100 * d['delta']:+.3f} points" if d["delta"] is not None else "not comparable"
        out.append(f"- {level} availability {percent(d['before'])} → {percent(d['after'])} ({delta})")
    inc = last["incidents"]
    def named(items: list[dict[str, Any]]) -> str:
        return f" ({', '.join(i['level'] + ' ' + i['subject'] for i in items[:10])})" if items else ""

    out.append(f"- incidents: {inc['new_total']} new, {len(inc['resolved'])} resolved{named(inc['resolved'])}, "
               f"{len(inc['still_open'])} still open{named(inc['still_open'])}")
    res = last["results"]
    if not res["compared"]:
        out.append("- results: no run in " + ("either window" if not res["from_run"] and not res["to_run"] else
                                              "the previous window" if not res["from_run"] else "this window")
                   + " to compare")
    else:
        c = res["counts"]
        out.append(f"- results of run {res['from_run']} → {res['to_run']}: {c['worse']} worse, {c['better']} better, "
                   f"{c['regressed']} values regressed and {c['improved']} improved beyond the noise, "
                   f"{c['only_before']} no longer reported, {c['only_after']} new; hosts {res['hosts']['from']} → "
                   f"{res['hosts']['to']}")
        for key, what in (("worse", "Worse"), ("better", "Better")):
            if res[key]:
                out += ["", f"{what}:", "", *_table(["check", "subject", "from", "to", "summary"], [
                    [r["check"], r["subject"] + (f" {r['params']}" if r["params"] else ""), r["from"], r["to"],
                     r["summary"]] for r in res[key][:SHOWN]])]
        moved = res["regressed"] + res["improved"]
        if moved:
            out += ["", "Values beyond the noise:", "", *_table(["check", "subject", "from", "to", "change"], [
                [r["check"], r["subject"], f"{r['from_value']:g} {r['unit'] or ''}".strip(),
                 f"{r['to_value']:g} {r['unit'] or ''}".strip(), f"{100 * r['change']:+.1f} %"]
                for r in moved[:SHOWN]])]
        for key, change in res["facts"].items():
            out.append(f"- fleet {key}: {change['from']} → {change['to']}")
    return "\n".join(out) + "\n"
