"""Checks judging a fault drill from its log (``raw/<node>/fault-<drill>.jsonl``).

The drill action hands each check a :class:`DrillRecord` as ``ctx.session``: the log's text as written and
where it lies. Each check parses it (``fault-drill-log``), builds the timeline (``drills.timeline``) and
judges one question: did the node come back from a reboot, was the fault detected, was the node returned,
only once the fault was gone, did the reaction fit the Xid, was a healthy node drained on the way.

On an AMD node the drill injects an uncorrectable UMC RAS error instead of the Xid (the timeline's ``fault``,
``ras_umc_ue``): judged the same way, against what an uncorrectable error asks for (:data:`RAS_FAULTS`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from clustereval import baselines
from clustereval.checks import Context, HarnessError, Skip, Verdict, check
from clustereval.drills import RAS_UMC_UE
from clustereval.drills import timeline as timeline_mod
from clustereval.parsers import parse
from clustereval.parsers.errors import ParseError
from clustereval.parsers.kernel_xid import xid_info

AREA = "fault"
# NVIDIA catalogue actions (parsers/data/xid_catalogue.yml immediate_action) that take the node or GPU out of
# service; anything else (RESTART_APP, IGNORE, none) asks only for the application to be restarted.
NODE_ACTIONS = {"RESTART_BM": "reboot", "RESTART_VM": "reboot", "RESET_GPU": "reset", "WORKFLOW_XID_48": "reset",
                "XID_154": "reset", "WORKFLOW_NVLINK_ERR": "reset", "WORKFLOW_NVLINK5_ERR": "reset"}
# The AMD faults a drill injects, described as the Xid catalogue describes an Xid: an uncorrectable error makes
# amdgpu reset the GPU and retire the page (an RMA once amdgpu.bad_page_threshold pages are retired), so the node
# is taken out of service for a GPU reset and its health check before jobs return.
RAS_FAULTS = {
    RAS_UMC_UE: {"label": "UMC RAS UE", "name": "uncorrectable ECC error in HBM (UMC block)",
                 "immediate_action": "RESET_GPU"},
}
ENDS = {
    "not_in_service": "skip", "unreachable": "error", "no_scheduler": "skip", "unavailable": "skip",
    "dry_run": "skip",
}


@dataclass
class DrillRecord:
    """What a drill check reads: the log's text, its path in the run directory, and the timeline's series."""

    text: str
    artifact: str
    series_path: str


def _record(ctx: Context) -> DrillRecord:
    if not isinstance(ctx.session, DrillRecord):
        raise HarnessError("no drill log was handed to this check")
    return ctx.session


def _timeline(ctx: Context) -> timeline_mod.Timeline:
    """The drill's timeline; a drill that never acted (dry run, no node in service, no method) is a skip or
    an error as its end says, for every check of the drill alike."""
    record = _record(ctx)
    key = f"drill:{record.artifact}"
    if key not in ctx.parse_cache:
        try:
            parsed = parse("fault-drill-log", record.text)
        except ParseError as exc:
            raise HarnessError(f"the drill log {record.artifact} cannot be read: {exc}") from None
        ctx.parse_cache[key] = timeline_mod.build(parsed)
    tl = ctx.parse_cache[key]
    end = tl.end or {}
    reason = end.get("reason")
    if reason in ENDS:
        detail = end.get("detail") or ""
        if reason == "dry_run":
            steps = "; ".join(str(p.get("command") or p.get("gpu_job") or "") for p in end.get("plan") or [])
            detail = f"dry run: nothing was done; would run: {steps}"
        if ENDS[reason] == "skip":
            raise Skip(detail or reason)
        raise HarnessError(detail or reason)
    if tl.t0 is None:
        raise HarnessError(f"the drill ended ({reason or 'no end line'}: {end.get('detail') or ''}) before its fault "
                           "was in place")
    return tl


def _limit(ctx: Context, check_id: str) -> baselines.Limit:
    return ctx.reference(AREA, check_id)


def _evidence(tl: timeline_mod.Timeline, **more: Any) -> dict[str, Any]:
    out = {"timeline": {name: stone.as_dict() for name, stone in tl.milestones.items()},
           "baseline": {k: tl.baseline.get(k) for k in ("state", "boot_id", "registration", "gpus")},
           "last_seen": tl.last, "end": {k: v for k, v in (tl.end or {}).items() if k != "plan"},
           "polls": tl.polls, "failed_polls": tl.failed_polls, "injection": tl.start.get("injection")}
    out.update(more)
    return out


def _interrupted(tl: timeline_mod.Timeline) -> str:
    end = tl.end or {}
    if end.get("reason") == "interrupted" or tl.end is None:
        return f" (the drill was cut short: {end.get('detail') or 'no end line in its log'})"
    return ""


def _series(ctx: Context, tl: timeline_mod.Timeline, with_data: bool) -> list[dict[str, Any]]:
    ref: dict[str, Any] = {"path": _record(ctx).series_path, "kind": "timeline", "x": "after_s"}
    if with_data:
        ref["data"] = [{**row, "host": tl.target} for row in tl.rows()]
    return [ref]


def _measured(tl: timeline_mod.Timeline) -> dict[str, Any]:
    end = tl.end or {}
    return {"started": tl.start.get("at"), "ended": end.get("at"), "interrupted": end.get("reason") == "interrupted",
            "events": [{"event": row["event"], "at": f"+{row['after_s']:g} s", "after_s": row["after_s"],
                        "uncertainty_s": row["uncertainty_s"]} for row in tl.rows()]}


def _graded(ctx: Context, check_id: str, tl: timeline_mod.Timeline, value: float, what: str,
            **evidence: Any) -> Verdict:
    lim = _limit(ctx, check_id)
    status = baselines.grade(value, lim)
    bar = f"; the bar is {lim.fail:g} s" if lim.fail is not None else ""
    summary = f"{what} in {value:g} s{bar}" + _interrupted(tl)
    if status != "pass":
        summary = f"{what} only after {value:g} s (warn above {lim.warn:g} s, fail above {lim.fail:g} s)"
    return Verdict(status, summary, value=value, unit="s", expected=lim.expected(), evidence=_evidence(tl, **evidence),
                   series=_series(ctx, tl, check_id in ("fault.reboot.recovery", "fault.inject.detection")),
                   measured=_measured(tl))


def _missing(ctx: Context, check_id: str, tl: timeline_mod.Timeline, summary: str) -> Verdict:
    """A milestone that never came: a fail with the timeline as evidence (an interrupted drill: an error,
    as the cluster was not given the time)."""
    if (tl.end or {}).get("reason") in ("interrupted", "error") or tl.end is None:
        return Verdict("error", summary + _interrupted(tl), evidence=_evidence(tl), measured=_measured(tl))
    return Verdict("fail", summary, evidence=_evidence(tl),
                   series=_series(ctx, tl, check_id in ("fault.reboot.recovery", "fault.inject.detection")),
                   measured=_measured(tl))


def _xid_action(xid: Any) -> tuple[str | None, dict[str, Any]]:
    info = xid_info(int(xid)) if xid is not None else None
    action = (info or {}).get("immediate_action")
    return NODE_ACTIONS.get(str(action)), (info or {})


@dataclass
class Fault:
    """What the drill injected: ``label`` for summaries (``Xid 79``, ``UMC RAS UE``), what it needs of the
    provider (``reboot``, ``reset`` or None: an application restart), its catalogue entry, whose catalogue
    (``NVIDIA``, ``AMD``), and the evidence naming it (``xid`` or ``fault``)."""

    label: str
    needs: str | None
    info: dict[str, Any]
    who: str
    named: dict[str, Any]


def _fault(tl: timeline_mod.Timeline) -> Fault:
    fault = tl.start.get("fault")
    if fault:
        info = RAS_FAULTS.get(str(fault)) or {"label": str(fault)}
        return Fault(str(info["label"]), NODE_ACTIONS.get(str(info.get("immediate_action"))), info, "AMD",
                     {"fault": fault})
    xid = tl.start.get("xid")
    needs, info = _xid_action(xid)
    return Fault(f"Xid {xid}", needs, info, "NVIDIA", {"xid": xid})


@check("fault.reboot.recovery")
def reboot_recovery(ctx: Context) -> Verdict:
    tl = _timeline(ctx)
    stones = tl.milestones
    limit = (tl.start.get("limits") or {}).get("return_s")
    if "new_boot" not in stones and "ssh_back" in stones:
        return _missing(ctx, "fault.reboot.recovery", tl,
                        f"{tl.target} answered again but with the same boot id: the reboot command did not reboot it")
    for name, said in (("down", "never went down after the reboot command"),
                       ("ssh_back", "did not answer over SSH again"),
                       ("returned", "answered again but the scheduler did not show it usable with a restarted slurmd"),
                       ("gpu_job", "was back in the scheduler but no GPU job ran on it")):
        if name not in stones:
            return _missing(ctx, "fault.reboot.recovery", tl,
                            f"{tl.target} {said} within {limit:g} s" if limit else f"{tl.target} {said}")
    steps = ", ".join(f"{name} {stones[name].after_s:g} s" for name in ("down", "ssh_back", "returned", "gpu_job"))
    return _graded(ctx, "fault.reboot.recovery", tl, stones["gpu_job"].after_s,
                   f"{tl.target} rebooted ({steps}) and ran a GPU job")


@check("fault.inject.detection")
def inject_detection(ctx: Context) -> Verdict:
    tl = _timeline(ctx)
    fault = _fault(tl)
    if fault.needs is None:
        raise Skip(f"{fault.label} ({fault.info.get('name') or 'unknown'}) asks only for an application restart: "
                   "there is nothing to detect; fault.inject.action judges the reaction")
    stone = tl.milestones.get("detected")
    if stone is None:
        limit = (tl.start.get("limits") or {}).get("detect_s")
        return _missing(ctx, "fault.inject.detection", tl,
                        f"{fault.label} injected on {tl.target} by {tl.end.get('method') if tl.end else '?'}; "
                        f"nothing took the node out of service within {limit:g} s (it stayed "
                        f"{tl.last.get('state') or 'unobserved'})")
    how = stone.detail.get("reason") or stone.detail.get("state")
    method = (tl.start.get("injection") or {}).get("method")
    return _graded(ctx, "fault.inject.detection", tl, stone.after_s,
                   f"{fault.label} injected by {method} on {tl.target} detected ({stone.detail.get('state')}: "
                   f"{how}; ±{stone.uncertainty_s:g} s)")


@check("fault.inject.return")
def inject_return(ctx: Context) -> Verdict:
    tl = _timeline(ctx)
    if "detected" not in tl.milestones:
        raise Skip("the fault was not detected, so there was no repair to time (fault.inject.detection)")
    lim = _limit(ctx, "fault.inject.return")
    stone = tl.milestones.get("gpu_job") or None
    if stone is None:
        if lim.warn is None and lim.fail is None:
            raise Skip(f"{tl.target} was not returned while watched; on this hardware ({lim.matched}) detection "
                       "and no new jobs on the node are the bar")
        limit = (tl.start.get("limits") or {}).get("return_s")
        if limit is None:
            raise Skip("the drill did not wait for the node's return (clustereval_fault_injection_wait_return)")
        returned = "returned" in tl.milestones
        said = ("was returned to service but no GPU job ran on it" if returned else
                f"stayed out of service ({tl.last.get('state')}: {tl.last.get('reason')})")
        spare = tl.milestones.get("replacement")
        if spare is not None and not returned:
            # Capacity is back when a replacement stands in: the bar counts that as well as a repair.
            return _graded(ctx, "fault.inject.return", tl, spare.after_s,
                           f"{tl.target} {said}, and the provider's spare {spare.detail.get('node')} came into "
                           f"service in its place", replacements=tl.replacements)
        return _missing(ctx, "fault.inject.return", tl, f"{tl.target} {said} for {limit:g} s after the fault")
    detected = tl.milestones["detected"]
    in_drain = round(tl.milestones["returned"].at - detected.at, 3)
    rebooted = " after a reboot" if "new_boot" in tl.milestones else " without a reboot"
    verdict = _graded(ctx, "fault.inject.return", tl, stone.after_s,
                      f"{tl.target} back in service{rebooted} ({in_drain:g} s out of service) and ran a GPU job",
                      drain_s=in_drain, replacements=tl.replacements)
    return verdict


@check("fault.inject.cleared")
def inject_cleared(ctx: Context) -> Verdict:
    tl = _timeline(ctx)
    if "returned" not in tl.milestones:
        raise Skip(f"{tl.target} was not returned to service while watched: nothing to compare")
    before, after = tl.baseline.get("gpus"), tl.last.get("gpus")
    if before is None or after is None:
        raise HarnessError(f"the GPU count of {tl.target} was not read {'before' if before is None else 'after'} "
                           "the drill")
    evidence = _evidence(tl, gpus_before=before, gpus_after=after)
    if after < before:
        return Verdict("fail", f"{tl.target} was returned to service with {after} of its {before} GPUs: the fault "
                               "persists", value=after, evidence=evidence, measured=_measured(tl))
    return Verdict("pass", f"{tl.target} was returned with all {after} GPUs listed", value=after, evidence=evidence,
                   measured=_measured(tl))


@check("fault.inject.action")
def inject_action(ctx: Context) -> Verdict:
    tl = _timeline(ctx)
    fault = _fault(tl)
    label, needs, info, who = fault.label, fault.needs, fault.info, fault.who
    stones = tl.milestones
    did = []
    if "detected" in stones:
        did.append("drained" if stones["detected"].detail.get("state") != "not answering" else "took it down")
    if "new_boot" in stones:
        did.append("rebooted")
    if "returned" in stones:
        did.append("returned")
    action = ", ".join(did) or "nothing"
    wanted = info.get("immediate_action") or "none listed"
    evidence = _evidence(tl, **fault.named, catalogue_action=wanted, catalogue_name=info.get("name"))
    if needs is None:
        if "detected" in stones:
            return Verdict("warn", f"{label} ({info.get('name')}) asks only for an application restart "
                                   f"({who}: {wanted}), and the provider {action}: capacity lost for an "
                                   "application fault", value=action, evidence=evidence, measured=_measured(tl))
        return Verdict("pass", f"{label} asks only for an application restart; the node stayed in service",
                       value=action, evidence=evidence, measured=_measured(tl))
    if "detected" not in stones:
        return Verdict("fail", f"{label} needs a GPU {needs} ({who}: {wanted}) and the provider did nothing",
                       value=action, evidence=evidence, measured=_measured(tl))
    if needs == "reboot" and "returned" in stones and "new_boot" not in stones:
        return Verdict("fail", f"{label} needs a reboot ({who}: {wanted}); the provider returned {tl.target} "
                               "without one", value=action, evidence=evidence, measured=_measured(tl))
    if "returned" not in stones:
        raise Skip(f"the provider drained {tl.target}; whether its repair fits {label} ({wanted}) shows only once "
                   "the node is returned")
    return Verdict("pass", f"{label} ({who}: {wanted}): the provider {action}", value=action, evidence=evidence,
                   measured=_measured(tl))


@check("fault.drill.bystanders")
def drill_bystanders(ctx: Context) -> Verdict:
    tl = _timeline(ctx)
    names = sorted(tl.bystanders)
    if tl.baseline.get("usable_nodes") is None or not tl.baseline.get("known"):
        raise HarnessError("the scheduler's view of the other nodes was not read before the drill")
    watched = len(tl.baseline.get("usable_nodes") or []) - 1
    if names:
        said = "; ".join(f"{n} {b.get('state')} ({b.get('reason') or 'no reason'}) {b.get('seen_after_s')} s in"
                         for n, b in tl.bystanders.items())
        return Verdict("fail", f"{len(names)} healthy node(s) outside the drill were taken out of service: {said}",
                       value=names, evidence=_evidence(tl, bystanders=tl.bystanders), measured=_measured(tl))
    return Verdict("pass", f"none of the {watched} other node(s) in service was drained during the drill" +
                   _interrupted(tl), value=[], evidence=_evidence(tl), measured=_measured(tl))
