"""Slurm orchestration churn (role orchestration, tasks/slurm.yml): what a scheduler does under a burst of work.

One probe (``orchestration_slurm``, ``checks/probes/orchestration.yml``) on the submit host submits ``jobs``
trivial jobs in a loop of ``sbatch``, the same work as one job array, and a job that fails its first run and is
requeued with ``scontrol requeue``; it prints one record per line (parser ``probe-orchestration``) with each
job's times from ``scontrol show job`` (one-second resolution: Slurm keeps no finer). Expected values are in
``baselines/orchestration.yml``. No ``sbatch`` on the submit host (a Kubernetes or standalone harness) is a skip;
output the harness cannot read, or a probe cut short before the part a check judges, is an error.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from clustereval import baselines, parsers, redact
from clustereval.checks import Context, HarnessError, Skip, Verdict, check

AREA = "orchestration"
PROBE = "orchestration_slurm"
PARSER = "probe-orchestration"
JOB_COLUMNS = ["kind", "id", "state", "submit_to_start_s", "queue_to_done_s"]


def _records(ctx: Context) -> tuple[list[dict[str, Any]], bool]:
    """The probe's records and whether its output is whole; what the harness could not run or read raises."""
    probe = ctx.raw(PROBE)  # not collected or timed out: HarnessError
    if probe.get("missing"):
        raise Skip(f"`{probe.get('tool')}` is not installed on {ctx.subject}: the harness is not Slurm here")
    if PROBE in ctx.parse_cache:
        data = ctx.parse_cache[PROBE]
    else:
        try:
            data = parsers.parse(PARSER, probe.get("stdout") or "")
        except parsers.ParseError as exc:
            tail = (probe.get("stderr") or "").strip().splitlines()[-1:] or ["no error output"]
            raise HarnessError(f"the {PROBE} probe printed nothing readable (exit {probe.get('rc')}): {exc}; "
                               f"{redact.redact(tail[0][:300])}") from None
        ctx.parse_cache[PROBE] = data
    records = data["records"]
    ends = [r for r in records if r["record"] == "end"]
    if ends and ends[-1].get("state") == "skip":
        raise Skip(f"{ends[-1].get('reason') or 'no Slurm client'}: the harness is not Slurm here")
    if ends and ends[-1].get("state") == "error":
        raise HarnessError(f"the {PROBE} probe could not run: {ends[-1].get('reason') or 'no reason given'}")
    if probe.get("rc") not in (0, None):
        tail = (probe.get("stderr") or "").strip().splitlines()[-1:] or ["no error output"]
        raise HarnessError(f"the {PROBE} probe exited with status {probe.get('rc')}: {redact.redact(tail[0][:300])}")
    return records, bool(data["complete"])


def _one(records: list[dict[str, Any]], what: str, complete: bool, label: str, **match: Any) -> dict[str, Any]:
    found = [r for r in records if r["record"] == what and all(r.get(k) == v for k, v in match.items())]
    if not found:
        why = "the probe's output ends before it" if not complete else "the probe printed no record of it"
        raise HarnessError(f"{label} was not measured: {why}")
    return found[-1]


def _time(text: Any) -> datetime | None:
    """A Slurm time (``2026-12-02T12:23:20``); ``Unknown``/``None`` (never started, never ended) is None."""
    try:
        return datetime.fromisoformat(str(text))
    except ValueError:
        return None


def _jobs(records: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    """Each job of ``kind`` with its submit-to-start and submit-to-end seconds (None where it never got there)."""
    out = []
    for r in records:
        if r["record"] != "job" or r.get("kind") != kind:
            continue
        submit, start, end = _time(r.get("submittime")), _time(r.get("starttime")), _time(r.get("endtime"))
        ran = r.get("jobstate") not in ("PENDING", "CANCELLED") and submit and start
        out.append({"kind": kind, "id": str(r.get("id")), "state": r.get("jobstate"),
                    "submit_to_start_s": (start - submit).total_seconds() if ran else None,
                    "queue_to_done_s": (end - submit).total_seconds() if ran and end else None})
    return out


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def _graded(ctx: Context, check_id: str, params: dict[str, Any], value: float, unit: str, said: str,
            evidence: dict[str, Any], series: list[dict[str, Any]] | None = None) -> Verdict:
    try:
        lim = baselines.reference(AREA, check_id, ctx.facts, params, ctx.options.get("baseline_overrides"))
    except baselines.NoReference as exc:
        return Verdict("skip", f"{said}; {exc}", round(value, 3), unit, evidence=evidence, params=params,
                       series=series or [])
    status = baselines.grade(value, lim)
    side = "above" if lim.direction == "lower" else "below"
    summary = {"pass": said,
               "warn": f"{said}, {side} the expected {lim.warn:g} {unit}",
               "fail": f"{said}, {side} the failure level {lim.fail:g} {unit}"}[status]
    return Verdict(status, summary, round(value, 3), unit, lim.expected(), evidence, params=params,
                   series=series or [])


def _series(ctx: Context, rows: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    """The per-job table; only the first verdict carrying it brings the rows (the file is written once)."""
    entry: dict[str, Any] = {"path": f"series/{ctx.subject}/orchestration-slurm-jobs.csv", "kind": "table", "x": "id",
                             "columns": JOB_COLUMNS}
    if rows is not None:
        entry["data"] = rows
    return [entry]


@check("orchestration.slurm.submit_rate")
def submit_rate(ctx: Context) -> Verdict:
    records, complete = _records(ctx)
    sub = _one(records, "submit", complete, "the loop of sbatch", kind="loop")
    jobs, failed, secs = sub.get("jobs"), sub.get("failed"), sub.get("submit_s")
    if not isinstance(jobs, int) or not isinstance(failed, int) or not isinstance(secs, int | float):
        raise HarnessError(f"the loop of sbatch record is unreadable: {sub}")
    evidence = {"jobs": jobs, "failed": failed, "submit_s": secs}
    if failed:
        why = sub.get("reason") or "no message"
        return Verdict("fail", f"{failed} of {jobs} sbatch submissions were refused: {why}", failed, "jobs",
                       evidence=evidence)
    rate = jobs / max(secs, 0.001)
    return _graded(ctx, "orchestration.slurm.submit_rate", {}, rate, "jobs/s",
                   f"{jobs} jobs submitted one sbatch at a time in {secs:g} s ({rate:.1f} jobs/s)", evidence)


@check("orchestration.slurm.start_latency")
def start_latency(ctx: Context) -> list[Verdict]:
    records, complete = _records(ctx)
    wait = _one(records, "wait", complete, "the loop's jobs' run", kind="loop")
    rows = _jobs(records, "loop") + _jobs(records, "array")
    loop = [r for r in rows if r["kind"] == "loop"]
    if not loop:
        raise HarnessError("the loop's jobs were not measured: no job record in the probe's output")
    waited = ctx.options.get("wait_s")
    late = [r["id"] for r in loop if r["submit_to_start_s"] is None]
    started = [r["submit_to_start_s"] for r in loop if r["submit_to_start_s"] is not None]
    done = [r["queue_to_done_s"] for r in loop if r["queue_to_done_s"] is not None]
    evidence: dict[str, Any] = {"jobs": len(loop), "never_started": late[:20], "makespan_s": wait.get("makespan_s"),
                                "queue_to_done_p50_s": _quantile(done, 0.5) if done else None,
                                "resolution_s": 1}
    if late or wait.get("state") != "done":
        return [Verdict("fail", f"{len(late)} of {len(loop)} trivial jobs did not start"
                                f"{f' within {waited} s' if waited else ''} (state {wait.get('state')}): "
                                f"the scheduler is not starting work", len(late), "jobs", evidence=evidence,
                        series=_series(ctx, rows if stat == "p50" else None), params={"stat": stat})
                for stat in ("p50", "p99")]
    out = []
    for stat, q in (("p50", 0.5), ("p99", 0.99)):
        value = _quantile(started, q)
        out.append(_graded(ctx, "orchestration.slurm.start_latency", {"stat": stat}, value, "s",
                           f"{stat} submit-to-start of {len(loop)} trivial jobs {value:g} s", evidence,
                           _series(ctx, rows if not out else None)))
    return out


@check("orchestration.slurm.array")
def array(ctx: Context) -> Verdict:
    records, complete = _records(ctx)
    loop = _one(records, "wait", complete, "the loop's makespan", kind="loop")
    sub = _one(records, "submit", complete, "the job array's submission", kind="array")
    if sub.get("failed"):
        return Verdict("fail", f"sbatch --array=1-{sub.get('jobs')} was refused: {sub.get('reason') or 'no message'}",
                       evidence={"submit": sub})
    arr = _one(records, "wait", complete, "the job array's makespan", kind="array")
    tasks = _jobs(records, "array")
    evidence = {"loop_submit_s": _one(records, "submit", complete, "the loop", kind="loop").get("submit_s"),
                "array_submit_s": sub.get("submit_s"), "loop_makespan_s": loop.get("makespan_s"),
                "array_makespan_s": arr.get("makespan_s"), "tasks": len(tasks),
                "tasks_completed": sum(t["state"] == "COMPLETED" for t in tasks)}
    if arr.get("state") != "done" or evidence["tasks_completed"] < (sub.get("jobs") or 0):
        return Verdict("fail", f"only {evidence['tasks_completed']} of {sub.get('jobs')} array tasks completed "
                               f"(state {arr.get('state')})", evidence=evidence)
    lm, am = loop.get("makespan_s"), arr.get("makespan_s")
    if not isinstance(lm, int | float) or not isinstance(am, int | float) or lm <= 0:
        raise HarnessError("the makespans of the loop and the array are unreadable")
    ratio = am / lm
    return _graded(ctx, "orchestration.slurm.array", {}, ratio, "x",
                   f"{sub.get('jobs')} tasks as one array: submitted in {sub.get('submit_s'):g} s, done in {am:g} s, "
                   f"{ratio:.2f}x the loop of sbatch ({lm:g} s)", evidence)


@check("orchestration.slurm.requeue")
def requeue(ctx: Context) -> Verdict:
    if not ctx.options.get("requeue", True):
        raise Skip("the requeue test is turned off (clustereval_orchestration_slurm_requeue: false)")
    records, complete = _records(ctx)
    req = _one(records, "requeue", complete, "the requeue of a failed job")
    first = next((r for r in records if r["record"] == "job" and r.get("kind") == "first"), {})
    held = next((r for r in records if r["record"] == "job" and r.get("kind") == "requeued"), {})
    again = next((r for r in records if r["record"] == "job" and r.get("kind") == "again"), {})
    delay = None
    if _time(held.get("eligibletime")) and _time(held.get("submittime")):
        delay = (_time(held["eligibletime"]) - _time(held["submittime"])).total_seconds()
    evidence = {"job": req.get("id"), "first_state": first.get("jobstate"), "final_state": again.get("jobstate"),
                "restarts": again.get("restarts"), "first_s": req.get("first_s"), "rerun_s": req.get("rerun_s"),
                "requeue_begin_delay_s": delay}
    state = req.get("state")
    if state == "unsubmitted":
        return Verdict("fail", f"sbatch --requeue was refused: {req.get('reason') or 'no message'}", evidence=evidence)
    if state == "refused":
        return Verdict("fail", f"scontrol requeue of failed job {req.get('id')} was refused: "
                               f"{req.get('reason') or 'no message'}", evidence=evidence)
    if state != "done" or again.get("jobstate") != "COMPLETED" or not again.get("restarts"):
        return Verdict("fail", f"requeued job {req.get('id')} did not run again to completion (state "
                               f"{again.get('jobstate') or state}, restarts {again.get('restarts')})",
                       evidence=evidence)
    rerun = req.get("rerun_s")
    if not isinstance(rerun, int | float):
        raise HarnessError("the requeued job's rerun time is unreadable")
    return _graded(ctx, "orchestration.slurm.requeue", {}, float(rerun), "s",
                   f"failed job {req.get('id')} requeued and ran again to completion in {rerun:g} s "
                   f"(restart {again.get('restarts')})", evidence)
