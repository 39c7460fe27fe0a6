"""Kubernetes orchestration churn (probe ``orchestration_k8s_churn``: the JSON report of
:mod:`clustereval.k8s_churn`, GPU pods created and deleted in a loop from the controller).

* ``orchestration.k8s.gpu_pod_churn``: each round's pod was scheduled and started, and the API's accounting of
  ``nvidia.com/gpu`` on its node stayed within the node's allocatable (a GPU counted twice, or a pod that cannot
  be scheduled any more after a few rounds, is a leak in the device plugin or the kubelet);
* ``orchestration.k8s.pod_start_latency``: creation to Ready, p50 over the rounds (from the pods' own
  conditions), against baselines/orchestration.yml;
* ``orchestration.k8s.delete_hang``: a ``kubectl delete pod`` that did not finish within its timeout is a fail.

A report that cannot be read, or an API the controller cannot reach, is an error (never the cluster's fault); a
cluster that is not Kubernetes is a skip.
"""

from __future__ import annotations

import json
from typing import Any

from clustereval import baselines
from clustereval.checks import Context, HarnessError, Skip, Verdict, check
from clustereval.checks.k8s_perf import UNREACHABLE

AREA = "orchestration"
PROBE = "orchestration_k8s_churn"


def _runner_report(ctx: Context, probe_name: str, runner: str, items: str) -> dict[str, Any]:
    """The controller-side runner's JSON report, with ``items`` a list; a harness other than Kubernetes or no
    kubectl is a skip, no report or an API that could not be reached the harness's fault."""
    if ctx.options.get("harness") not in (None, "k8s"):
        raise Skip(f"not a Kubernetes cluster (harness {ctx.options.get('harness')})")
    probe = ctx.raw(probe_name)
    if probe.get("missing") or probe.get("rc") == 127:
        raise Skip("`kubectl` is not installed on the controller")
    try:
        report = json.loads(probe.get("stdout") or "")
    except ValueError:
        detail = (probe.get("stderr") or probe.get("stdout") or "no output").strip().splitlines()
        raise HarnessError(f"the {runner} runner printed no report (exit {probe.get('rc')}): "
                           f"{(detail[-1] if detail else '')[:300]}") from None
    if not isinstance(report, dict) or not isinstance(report.get(items), list):
        raise HarnessError(f"the {runner} runner's report has no {items} list")
    error = str(report.get("api_error") or "")
    if error and any(m in error.lower() for m in UNREACHABLE):
        raise HarnessError(f"the Kubernetes API could not be used from the controller: {error[:400]}")
    return report


def read_report(ctx: Context) -> dict[str, Any]:
    report = _runner_report(ctx, PROBE, "churn", "rounds")
    if report.get("interrupted") and not report["rounds"]:
        raise HarnessError(f"the churn run was interrupted ({report['interrupted']}) before its first round")
    return report


def _evidence(report: dict[str, Any]) -> dict[str, Any]:
    keys = ("round", "pod", "node", "schedule_s", "start_s", "reason", "allocatable", "requested", "allocation_ok",
            "delete_s", "delete_hung")
    return {"run": report.get("run"), "namespace": report.get("namespace"),
            "gpu_resource": report.get("gpu_resource"), "rounds_planned": report.get("rounds_planned"),
            "api_error": report.get("api_error"), "interrupted": report.get("interrupted"),
            "rounds": [{k: r.get(k) for k in keys} for r in report["rounds"]]}


def _note(report: dict[str, Any]) -> str:
    """What cut the run short, said in every summary (a short run is never a silent pass)."""
    done, planned = len(report["rounds"]), int(report.get("rounds_planned") or 0)
    if report.get("interrupted"):
        return f"; interrupted ({report['interrupted']}) after {done} of {planned} rounds"
    if report.get("api_error"):
        return f"; stopped after {done} of {planned} rounds: {str(report['api_error'])[:300]}"
    return ""


@check("orchestration.k8s.gpu_pod_churn")
def gpu_pod_churn(ctx: Context) -> Verdict:
    report = read_report(ctx)
    rounds = report["rounds"]
    if not rounds:
        raise HarnessError("the churn runner ran no round" + _note(report))
    resource = report.get("gpu_resource") or "nvidia.com/gpu"
    unstarted = [r for r in rounds if r.get("start_s") is None and r.get("pod")]
    over = [r for r in rounds if r.get("allocation_ok") is False]
    evidence = _evidence(report)
    if unstarted:
        first = unstarted[0]
        why = first.get("reason") or ("not Ready in time" if first.get("ready_timed_out") else "not started")
        message = str(first.get("message") or "")[:300]
        return Verdict("fail", f"{len(unstarted)} of {len(rounds)} GPU pods never became Ready; the first, in round "
                               f"{first.get('round')}: {why}" + (f" ({message})" if message else "") + _note(report),
                       value=len(rounds) - len(unstarted), evidence=evidence)
    if over:
        r = over[0]
        return Verdict("fail", f"the API counted more {resource} requested than allocatable on {r.get('node')} in "
                               f"{len(over)} of {len(rounds)} rounds (round {r.get('round')}: {r.get('requested')} "
                               f"requested of {r.get('allocatable')})" + _note(report),
                       value=len(rounds) - len(over), evidence=evidence)
    unknown = [r for r in rounds if r.get("allocation_ok") is None]
    if unknown or _note(report):
        text = (f"{len(rounds) - len(unknown)} of {len(rounds)} rounds started a GPU pod with a consistent "
                f"{resource} allocation")
        if unknown:
            text += f"; the node's allocation could not be read in {len(unknown)} rounds"
        return Verdict("warn", text + _note(report), value=len(rounds) - len(unknown), evidence=evidence)
    return Verdict("pass", f"all {len(rounds)} rounds started a GPU pod and the API's {resource} allocation stayed "
                           "within the node's allocatable", value=len(rounds), evidence=evidence)


def _p50(values: list[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


@check("orchestration.k8s.pod_start_latency")
def pod_start_latency(ctx: Context) -> Verdict:
    report = read_report(ctx)
    starts = [float(r["start_s"]) for r in report["rounds"] if r.get("start_s") is not None]
    if not starts:
        raise Skip("no GPU pod became Ready, so there is no start latency (orchestration.k8s.gpu_pod_churn says "
                   "why)" + _note(report))
    limit = ctx.reference(AREA, "orchestration.k8s.pod_start_latency")
    p50 = round(_p50(starts), 3)
    schedules = [float(r["schedule_s"]) for r in report["rounds"] if r.get("schedule_s") is not None]
    status = baselines.grade(p50, limit)
    text = (f"GPU pod start latency p50 {p50} s, max {max(starts)} s over {len(starts)} rounds (scheduling p50 "
            f"{round(_p50(schedules), 3) if schedules else 'n/a'} s)")
    if status != "pass":
        text += f"; expected at most {limit.warn} s"
    if _note(report) and status == "pass":
        status = "warn"
    return Verdict(status, text + _note(report), value=p50, unit="s", expected=limit.expected(),
                   evidence={**_evidence(report), "start_s": starts})


@check("orchestration.k8s.delete_hang")
def delete_hang(ctx: Context) -> Verdict:
    report = read_report(ctx)
    rounds = report["rounds"]
    deletes = [r for r in rounds if r.get("delete_s") is not None]
    if not deletes:
        raise HarnessError("no pod was deleted by the churn runner" + _note(report))
    hung = [r for r in deletes if r.get("delete_hung")]
    evidence = _evidence(report)
    if hung:
        r = hung[0]
        return Verdict("fail", f"`kubectl delete pod {r.get('pod')}` on {r.get('node')} did not finish in "
                               f"{r.get('delete_s')} s (round {r.get('round')}; the run stopped there): "
                               f"{str(r.get('delete_error') or '')[:300]}", value=len(hung), evidence=evidence)
    failed = [r for r in deletes if r.get("delete_error")]
    if failed:
        r = failed[0]
        return Verdict("warn", f"{len(failed)} of {len(deletes)} pod deletes failed: {str(r['delete_error'])[:300]}"
                       + _note(report), value=0, evidence=evidence)
    slowest = max(deletes, key=lambda r: r["delete_s"])
    status = "warn" if _note(report) else "pass"
    return Verdict(status, f"all {len(deletes)} pod deletes finished (slowest {slowest['delete_s']} s, round "
                           f"{slowest['round']})" + _note(report), value=0, evidence=evidence)


# ------------------------------------------------------------------ sandbox batches (probe orchestration_k8s_sandbox)
SANDBOX_PROBE = "orchestration_k8s_sandbox"
# A pod the scheduler could place nowhere for lack of room: the batch is bigger than the cluster's free capacity
# (a warn: the cluster said why), unlike a pod kept Pending by taints, a missing event or a sandbox that never
# started (a fail).
CAPACITY = ("Insufficient cpu", "Insufficient memory", "Insufficient pods", "Too many pods")


def read_sandbox(ctx: Context) -> dict[str, Any]:
    report = _runner_report(ctx, SANDBOX_PROBE, "sandbox", "batches")
    error = str(report.get("api_error") or "")
    if not report["batches"]:
        raise HarnessError("the sandbox runner ran no batch" + (f" ({error[:300]})" if error else "")
                           + (f"; interrupted ({report['interrupted']})" if report.get("interrupted") else ""))
    return report


def _batch_verdict(ctx: Context, report: dict[str, Any], b: dict[str, Any], limit: Any) -> Verdict:
    size, ready, pending = int(b.get("batch") or 0), int(b.get("ready") or 0), int(b.get("pending") or 0)
    evidence = {k: b.get(k) for k in ("batch", "created", "ready", "pending", "ready_p50_s", "ready_max_s",
                                      "pending_reasons", "timed_out", "delete_s", "delete_error")}
    evidence.update(run=report.get("run"), namespace=report.get("namespace"), cpu=report.get("cpu"),
                    memory=report.get("memory"), ready_timeout_s=report.get("ready_timeout_s"))
    params = {**ctx.params, "batch": size}
    timing = f"p50 {b.get('ready_p50_s')} s, max {b.get('ready_max_s')} s to Ready"
    if pending:
        reasons = b.get("pending_reasons") or {}
        top = next(iter(reasons), "no FailedScheduling event")
        capacity = bool(reasons) and all(any(c in msg for c in CAPACITY) for msg in reasons)
        more = f" (and {len(reasons) - 1} other reasons)" if len(reasons) > 1 else ""
        return Verdict("warn" if capacity else "fail",
                       f"batch of {size}: {pending} of {size} sandbox pods still Pending after "
                       f"{report.get('ready_timeout_s')} s; scheduler: {top[:300]}{more}; {ready} Ready"
                       + (f" ({timing})" if ready else ""),
                       value=ready, unit="pods", expected=limit.expected(), evidence=evidence, params=params)
    if b.get("delete_error"):
        return Verdict("warn", f"batch of {size}: all {ready} Ready ({timing}) but the batch's delete failed: "
                               f"{str(b['delete_error'])[:300]}", value=ready, unit="pods",
                       expected=limit.expected(), evidence=evidence, params=params)
    if ready < size or b.get("ready_max_s") is None:
        return Verdict("fail", f"batch of {size}: only {ready} of {size} sandbox pods were created and Ready",
                       value=ready, unit="pods", expected=limit.expected(), evidence=evidence, params=params)
    status = baselines.grade(float(b["ready_max_s"]), limit)
    text = f"batch of {size}: all {size} sandbox pods Ready ({timing})"
    if status != "pass":
        text += f"; the slowest expected within {limit.warn} s"
    return Verdict(status, text, value=ready, unit="pods", expected=limit.expected(), evidence=evidence,
                   params=params)


@check("orchestration.k8s.sandbox_batches")
def sandbox_batches(ctx: Context) -> list[Verdict]:
    report = read_sandbox(ctx)
    limit = ctx.reference(AREA, "orchestration.k8s.sandbox_batches")
    verdicts = [_batch_verdict(ctx, report, b, limit) for b in report["batches"]]
    if report.get("api_error"):
        # the batch the API failed on says nothing about the cluster: an error, not its Pending count
        last = report["batches"][-1]
        verdicts[-1] = Verdict("error", f"batch of {last.get('batch')}: the API failed during the batch: "
                                        f"{str(report['api_error'])[:300]}", evidence=verdicts[-1].evidence,
                               params=verdicts[-1].params)
    done = {int(b.get("batch") or 0) for b in report["batches"]}
    cut = report.get("interrupted") or report.get("api_error")
    for size in report.get("batches_planned") or []:
        if int(size) not in done:
            verdicts.append(Verdict("skip", f"batch of {size} not run: the run stopped earlier"
                                    + (f" ({str(cut)[:300]})" if cut else " (a batch's delete failed)"),
                                    params={**ctx.params, "batch": int(size)}))
    return verdicts
