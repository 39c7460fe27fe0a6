"""A drill's log (``fault-drill-log``, parsed) turned into its timeline.

Every milestone is bracketed by the observations around it: it happened after the last observation that
did not show it was taken (that poll's ``sent``) and before the first one that did came back (its
``received``). Its time is the middle of that bracket, its uncertainty half the bracket's width; every time
is on the controller's clock and counted from the fault (the injection, or the reboot command).

Milestones: ``down`` (the node stopped answering), ``ssh_back`` (it answers again), ``new_boot`` (its boot id
changed), ``detected`` (the scheduler took it out of service, or it went down: the provider reacted),
``returned`` (usable in the scheduler again after that; after a reboot, with a new slurmd start time),
``gpu_job`` (a GPU command ran in a job on it), ``replacement`` (after the detection, a node that was out of
service before the drill came into it: the provider's spare), ``alerted`` (an alert about it fired).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Milestone:
    name: str
    lo: float
    hi: float
    t0: float
    detail: dict[str, Any] = field(default_factory=dict)

    @property
    def at(self) -> float:
        return (max(self.lo, self.t0) + self.hi) / 2

    @property
    def after_s(self) -> float:
        return round(self.at - self.t0, 3)

    @property
    def uncertainty_s(self) -> float:
        return round((self.hi - max(self.lo, self.t0)) / 2, 3)

    def as_dict(self) -> dict[str, Any]:
        return {"after_s": self.after_s, "uncertainty_s": self.uncertainty_s, **self.detail}


@dataclass
class Timeline:
    kind: str
    target: str
    t0: float | None
    start: dict[str, Any]
    baseline: dict[str, Any]
    milestones: dict[str, Milestone]
    bystanders: dict[str, dict[str, Any]]
    replacements: list[str]
    last: dict[str, Any]
    end: dict[str, Any] | None
    polls: int
    failed_polls: int

    def after(self, name: str) -> float | None:
        stone = self.milestones.get(name)
        return stone.after_s if stone else None

    def rows(self) -> list[dict[str, Any]]:
        """The timeline as series rows (one per milestone, in time order) for the report to draw."""
        rows = [{"event": "fault", "after_s": 0.0, "uncertainty_s": 0.0, "detail": self.start.get("method") or
                 self.kind}]
        for stone in sorted(self.milestones.values(), key=lambda s: s.at):
            detail = stone.detail.get("reason") or stone.detail.get("state") or ""
            rows.append({"event": stone.name, "after_s": stone.after_s, "uncertainty_s": stone.uncertainty_s,
                         "detail": detail})
        return rows


def target_state(entry: dict[str, Any], target: str) -> dict[str, Any] | None:
    scheduler = (entry.get("observed") or {}).get("scheduler") or {}
    if scheduler.get("rc") != 0:
        return None
    return (scheduler.get("nodes") or {}).get(target)


def _ok(entry: dict[str, Any]) -> bool:
    return bool(entry.get("ok")) and entry.get("observed") is not None


def build(parsed: dict[str, Any]) -> Timeline:
    """The timeline of one drill from its parsed log."""
    entries = parsed["entries"]
    start = parsed["start"]
    target, kind = str(start.get("target")), str(start.get("drill"))
    targets = set(start.get("targets") or [target])
    fault = next((e for e in entries if e.get("kind") == "fault" and e.get("fault_at") is not None), None)
    t0 = float(fault["fault_at"]) if fault else None
    injected = next((e for e in entries if e.get("kind") == "step" and e.get("step") in ("inject", "reboot")
                     and e.get("ok") and e.get("rc") == 0), None)
    if injected:
        observed = injected.get("observed") or {}
        # What was injected: an AMD node's RAS fault (the step names it), else the drill's Xid.
        what = {"fault": injected["fault"]} if injected.get("fault") else \
            {"xid": start.get("xid")} if kind == "inject" else {}
        start = {**start, **({"fault": injected["fault"], "vendor": injected.get("vendor")}
                             if injected.get("fault") else {}),
                 "injection": {"method": injected.get("method") or kind, **what, "command": injected.get("cmd"),
                               "line": (observed.get("said") or {}).get("kmsg") or _kmsg_line(injected),
                               "node_said": (injected.get("stdout") or "")[-500:]}}
    polls = [e for e in entries if e.get("kind") == "poll"]
    before = [e for e in polls if _ok(e) and (t0 is None or float(e["received"]) <= t0)]
    baseline = _baseline(before[-1] if before else None, target, before)
    milestones: dict[str, Milestone] = {}
    bystanders: dict[str, dict[str, Any]] = {}
    replacements: list[str] = []
    last: dict[str, Any] = {}
    if t0 is None:
        return Timeline(kind, target, None, start, baseline, milestones, bystanders, replacements, last,
                        parsed.get("end"), len(polls), sum(1 for e in polls if not e.get("ok")))
    after = [e for e in polls if float(e["sent"]) >= t0 - 1e-6 or float(e["received"]) > t0]
    previous_sent = t0

    def mark(name: str, entry: dict[str, Any], lo: float, **detail: Any) -> None:
        if name not in milestones:
            milestones[name] = Milestone(name, lo, float(entry["received"]), t0, detail)

    went_down = False
    for entry in after:
        observed = entry.get("observed") or {}
        if not _ok(entry):  # SSH did not answer; a scheduler read from the controller (Kubernetes) still counts
            if "down" not in milestones:
                mark("down", entry, previous_sent, error=str(entry.get("error") or "")[:200])
                went_down = True
            if kind == "inject":
                mark("detected", entry, previous_sent, state="not answering",
                     reason="the node went down (rebooted or powered off by the provider)")
        else:
            if went_down and "ssh_back" not in milestones:
                mark("ssh_back", entry, previous_sent)
            boot = observed.get("boot_id")
            if boot and baseline.get("boot_id") and boot != baseline["boot_id"]:
                mark("new_boot", entry, previous_sent, boot_id=boot)
            gpus = observed.get("gpus")
            if gpus_listed(gpus):
                last["gpus"] = gpus.get("count")
        alert = _alert_about(observed.get("alerts"), target, baseline.get("alerts") or [])
        if alert:
            mark("alerted", entry, previous_sent, reason=f"alert {alert}")
            if kind == "inject":
                mark("detected", entry, previous_sent, state="alerted", reason=f"alert {alert}")
        state = target_state(entry, target)
        if state is not None:
            usable, why = usable_now(state, (baseline.get("taints") or {}).get(target))
            last.update(state=state.get("state"), reason=why, usable=usable)
            if kind == "inject" and not usable:
                mark("detected", entry, previous_sent, state=state.get("state"), reason=why)
            restarted = (state.get("registration") or None) != (baseline.get("registration") or None)
            back_ready = ("detected" in milestones) if kind == "inject" else ("new_boot" in milestones and restarted)
            if back_ready and usable and "returned" not in milestones:
                mark("returned", entry, previous_sent, state=state.get("state"))
            _others(entry, target, targets, baseline, bystanders, replacements, t0)
            if replacements and "detected" in milestones and "replacement" not in milestones:
                mark("replacement", entry, previous_sent, node=replacements[0], state="spare in service")
        previous_sent = float(entry["sent"])
    job_lo = milestones["returned"].at if "returned" in milestones else t0
    for entry in entries:
        if entry.get("kind") != "job" or "returned" not in milestones or float(entry["sent"]) < job_lo - 1e-6:
            continue
        job = (entry.get("observed") or {}).get("job") or {}
        if job.get("rc") == 0 and job.get("gpus", 0) > 0:
            mark("gpu_job", entry, float(entry["sent"]), gpus=job.get("gpus"))
            break
    return Timeline(kind, target, t0, start, baseline, milestones, bystanders, replacements, last,
                    parsed.get("end"), len(polls), sum(1 for e in polls if not e.get("ok")))


_HOST_LABELS = ("instance", "node", "hostname", "Hostname", "nodename", "host", "exported_instance", "kubernetes_node")


def _names_node(labels: dict[str, Any], target: str) -> bool:
    for key in _HOST_LABELS:
        value = str(labels.get(key) or "")
        if value == target or value.startswith((target + ":", target + ".")):
            return True
    return False


def _alert_about(alerts: dict[str, Any] | None, target: str, before: list[str]) -> str | None:
    """The name of a firing alert about ``target`` that was not firing before the drill."""
    for alert in (alerts or {}).get("firing") or []:
        if _names_node(alert.get("labels") or {}, target) and alert.get("name") not in before:
            return str(alert.get("name"))
    return None


def usable_now(state: dict[str, Any], taints_before: list[str] | None) -> tuple[bool, str | None]:
    """Whether a node is in service now, and why not: the scheduler's verdict, and no blocking taint it did not
    have before the drill (Kubernetes)."""
    new = sorted(set(state.get("taints") or []) - set(taints_before or []))
    reason = state.get("reason")
    if new:
        reason = "; ".join([r for r in (reason,) if r] + [f"tainted {', '.join(new)}"])
    return bool(state.get("usable")) and not new, reason


def gpus_listed(gpus: dict[str, Any] | None) -> bool:
    """``nvidia-smi -L`` (or ``amd-smi list``) answered: it ran (exit 0), or it listed GPUs and failed on others
    (exit 15, a lost GPU)."""
    return bool(gpus) and not gpus.get("missing") and (gpus.get("rc") == 0 or gpus.get("count", 0) > 0)


def _kmsg_line(step: dict[str, Any]) -> str | None:
    for line in str(step.get("stdout") or "").splitlines():
        if line.startswith("## kmsg ") and " line=" in line:
            return line.split(" line=", 1)[1]
    return None


def _baseline(entry: dict[str, Any] | None, target: str, before: list[dict[str, Any]]) -> dict[str, Any]:
    if entry is None:
        return {}
    observed = entry.get("observed") or {}
    state = target_state(entry, target) or {}
    nodes = ((observed.get("scheduler") or {}).get("nodes") or {})
    gpus = next((e["observed"]["gpus"] for e in reversed(before) if gpus_listed(e["observed"].get("gpus"))), None)
    return {"boot_id": observed.get("boot_id"), "slurmd_start": state.get("slurmd_start"),
            "registration": state.get("registration"),
            "alerts": sorted({str(a.get("name")) for e in before for a in
                              ((e.get("observed") or {}).get("alerts") or {}).get("firing") or []
                              if _names_node(a.get("labels") or {}, target)}),
            "taints": {n: s.get("taints") or [] for n, s in nodes.items()},
            "state": state.get("state"), "reason": state.get("reason"), "usable": state.get("usable"),
            "known": bool(state), "gpus": gpus.get("count") if gpus else None,
            "usable_nodes": sorted(n for n, s in nodes.items() if s.get("usable")),
            "unusable_nodes": sorted(n for n, s in nodes.items() if not s.get("usable"))}


def _others(entry: dict[str, Any], target: str, targets: set[str], baseline: dict[str, Any],
            bystanders: dict[str, dict[str, Any]], replacements: list[str], t0: float) -> None:
    """Healthy nodes outside the drill taken out of service, and nodes that came into service (a spare)."""
    nodes = (entry["observed"].get("scheduler") or {}).get("nodes") or {}
    usable_before, unusable_before = set(baseline.get("usable_nodes") or []), set(baseline.get("unusable_nodes") or [])
    for name, state in nodes.items():
        if name == target or name in targets:
            continue
        usable, why = usable_now(state, (baseline.get("taints") or {}).get(name))
        if name in usable_before and not usable and name not in bystanders:
            bystanders[name] = {"state": state.get("state"), "reason": why,
                                "seen_after_s": round(float(entry["received"]) - t0, 3)}
        if name in unusable_before and usable and name not in replacements:
            replacements.append(name)
