"""What a run set out to judge, and how much of it has a result: "N of M checks done" for an interrupted run,
and what ``clustereval resume`` still has to run.

A unit is a check on a host (a node check: its results on the host or on the host's GPUs, NICs, pairs) or a
cluster-wide check (any result of it). The plan is written into ``run.json`` when the run starts: the checks
the phases and tags select (the harness's own ``recorded_by`` checks are not planned: they report on the
run, they are not part of it), and the hosts.
"""

from __future__ import annotations

from typing import Any

from clustereval import checks
from clustereval.checks import catalogue
from clustereval.results import CLUSTER_SUBJECT, subject_hosts


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
    for result in results:
        check = str(result.get("check"))
        if check in cluster:
            out.add((check, CLUSTER_SUBJECT))
            continue
        for host in subject_hosts(result.get("subject")) or [str(result.get("subject"))]:
            out.add((check, host))
    return out


def progress(plan: Any, results: list[dict[str, Any]], redo_errors: bool = False) -> dict[str, Any] | None:
    """``{"planned": M, "done": N, "missing": [[check, host], …]}`` for a run with a plan (None without one).
    With ``redo_errors``, a unit whose every result is an error counts as missing (what resume runs again)."""
    if not isinstance(plan, dict):
        return None
    wanted = units(plan)
    usable = [r for r in results if not (redo_errors and r.get("status") == "error")]
    done = done_units(usable)
    missing = [[c, h] for c, h in wanted if (c, h) not in done]
    return {"planned": len(wanted), "done": len(wanted) - len(missing), "missing": missing}


def phrase(progress_: dict[str, Any] | None) -> str:
    """'412 of 610 checks done' (empty without a plan)."""
    if not progress_:
        return ""
    return f"{progress_['done']} of {progress_['planned']} checks done"
