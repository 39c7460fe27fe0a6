"""What a run set out to judge, and how much of it has a result: "N of M checks done" for an interrupted run,
and what ``clustereval resume`` still has to run.

A unit is a check on a host (a node check: its results on the host or on the host's GPUs, NICs, pairs) or a
cluster-wide check (any result of it). The plan is written into ``run.json`` when the run starts: the checks
the phases and tags select (the harness's own ``recorded_by`` checks are not planned: they report on the
run, they are not part of it), and the hosts.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from clustereval import checks
from clustereval.checks import catalogue
from clustereval.results import CLUSTER_SUBJECT, subject_hosts

REACHABILITY = "harness.node.reachable"
INTERRUPTED = "harness.run.interrupted"
# What the harness reports about a host from outside any check (the results callback).
HOST_REPORTS = (REACHABILITY, "harness.task.failed")


def make(phases: list[str], run_tags: list[str], skip_tags: list[str], hosts: list[str],
         destructive_hosts: list[str] | None = None) -> dict[str, Any]:
    """The plan of a run: selected node checks (on ``hosts``; destructive ones only on ``destructive_hosts``)
    and cluster-wide checks."""
    plan: dict[str, Any] = {"hosts": sorted(hosts), "destructive_hosts": sorted(destructive_hosts or []),
                            "node_checks": [], "destructive_checks": [], "cluster_checks": []}
    for phase in phases:
        for scope in ("node", "cluster"):
            for check_id in checks.selection(catalogue.select(phase, scope), run_tags or ["all"], skip_tags):
                if scope == "cluster":
                    plan["cluster_checks"].append(check_id)
                elif catalogue.entry(check_id).get("acts") == "destructive":
                    plan["destructive_checks"].append(check_id)
                else:
                    plan["node_checks"].append(check_id)
    return plan


def units(plan: dict[str, Any]) -> list[tuple[str, str]]:
    """Every (check, host) the plan asks for; cluster-wide checks on ``_cluster``."""
    out = [(c, h) for c in plan.get("node_checks") or [] for h in plan.get("hosts") or []]
    out += [(c, h) for c in plan.get("destructive_checks") or [] for h in plan.get("destructive_hosts") or []]
    out += [(c, CLUSTER_SUBJECT) for c in plan.get("cluster_checks") or []]
    return out


def done_units(results: list[dict[str, Any]]) -> set[tuple[str, str]]:
    """The (check, host) units the results cover (a result on node1/gpu3 covers node1)."""
    cluster = {c for c, e in catalogue.load().items() if e["scope"] == "cluster"}
    out = set()
    hosts_of: dict[Any, list[str]] = {}  # a fleet's results name far fewer subjects than there are results
    for result in results:
        check = str(result.get("check"))
        if check in cluster:
            out.add((check, CLUSTER_SUBJECT))
            continue
        subject = result.get("subject")
        hosts = hosts_of.get(subject) if isinstance(subject, str) else None
        if hosts is None:
            hosts = subject_hosts(subject) or [str(subject)]
            if isinstance(subject, str):
                hosts_of[subject] = hosts
        for host in hosts:
            out.add((check, host))
    return out


def progress(plan: Any, results: list[dict[str, Any]], redo: bool = False) -> dict[str, Any] | None:
    """``{"planned": M, "done": N, "missing": [[check, host], …]}`` for a run with a plan (None without one).
    With ``redo`` (what resume runs again), a unit whose only results are errors counts as missing, and so do
    every unit of a host the run could not reach and a skip that waited on such a host."""
    if not isinstance(plan, dict):
        return None
    wanted = units(plan)
    lost = unreachable(results) if redo else set()
    usable = [r for r in results if not (redo and _to_redo(r, lost))]
    done = done_units(usable)
    missing = [[c, h] for c, h in wanted if (c, h) not in done or h in lost]
    return {"planned": len(wanted), "done": len(wanted) - len(missing), "missing": missing}


def _to_redo(result: dict[str, Any], lost: set[str]) -> bool:
    """An error, or a skip because a peer the run could not reach was needed (``evidence.unreachable_peer``)."""
    if result.get("status") == "error":
        return True
    peer = (result.get("evidence") or {}).get("unreachable_peer") if isinstance(result.get("evidence"), dict) else None
    return result.get("status") == "skip" and peer in lost


def unreachable(results: list[dict[str, Any]]) -> set[str]:
    """Hosts whose latest reachability result is a fail."""
    latest = {}
    for result in results:
        if result.get("check") == REACHABILITY:
            latest[str(result.get("subject"))] = result.get("status")
    return {host for host, status in latest.items() if status == "fail"}


def resume_request(info: dict[str, Any], results: list[dict[str, Any]]) -> dict[str, Any]:
    """What ``clustereval resume`` asks the playbook for: per host the node checks still to run (``only``) and
    the whole fleet (``fleet``: cluster-wide checks and the checks comparing a node with its siblings are judged
    over every host of the run, old results and new)."""
    found = progress(info.get("plan"), results, redo=True) or {"missing": [], "planned": 0}
    only: dict[str, list[str]] = {}
    for check, host in found["missing"]:
        if host != CLUSTER_SUBJECT:
            only.setdefault(host, []).append(check)
    return {"only": only, "fleet": list((info.get("plan") or {}).get("hosts") or []),
            "to_run": len(found["missing"]), "planned": found["planned"]}


def current(results: list[dict[str, Any]], info: dict[str, Any]) -> list[dict[str, Any]]:
    """The results without the harness's reports a resume made obsolete: a host's unreachability or failed
    task from before a resume that ran the host again, and an interruption from before the last resume."""
    resumes = [r for r in info.get("resumes") or [] if isinstance(r, dict) and r.get("started")]
    if not resumes:
        return list(results)
    last = _moment(resumes[-1]["started"])
    rerun = [(set(r.get("hosts") or []), _moment(r["started"])) for r in resumes]

    def obsolete(result: dict[str, Any]) -> bool:
        check, at = result.get("check"), _moment(result.get("started"))
        if check == INTERRUPTED:
            return at < last
        if check in HOST_REPORTS and result.get("status") in ("fail", "error"):
            return any(result.get("subject") in hosts and at < since for hosts, since in rerun)
        return False

    return [r for r in results if not obsolete(r)]


def _moment(text: Any) -> datetime:
    try:
        return datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError:
        return datetime.min.replace(tzinfo=UTC)


def phrase(progress_: dict[str, Any] | None) -> str:
    """'412 of 610 checks done' (empty without a plan)."""
    if not progress_:
        return ""
    return f"{progress_['done']} of {progress_['planned']} checks done"
