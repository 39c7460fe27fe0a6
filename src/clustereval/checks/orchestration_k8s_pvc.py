"""Kubernetes PVC lifecycle (probe ``orchestration_k8s_pvc``: the JSON report of :mod:`clustereval.k8s_pvc`, per
round a claim, a pod that writes and fsyncs a file on it, both deleted and the volume waited for until it is gone).

* ``orchestration.k8s.pvc_lifecycle``: every round's claim bound, its pod wrote the whole file and its volume was
  gone within the cleanup timeout (a claim that never binds, a write that fails or a volume left behind is a fail,
  the warm-up round included); over the rounds after the warm-up, the p50 of claim create to file written (the
  provision, attach and mount the next pod waits for) and of delete to volume gone, each against
  baselines/orchestration.yml, the worse of the two grades.

The first round is a warm-up kept out of the figures: the first volume of a class may pay for a provisioner's cold
start or the image pull, which says nothing about the next hundred. A report that cannot be read, or an API the
controller cannot reach, is an error (never the cluster's fault); a cluster that is not Kubernetes is a skip.
"""

from __future__ import annotations

from typing import Any

from clustereval import baselines
from clustereval.checks import Context, HarnessError, Verdict, check
from clustereval.checks.orchestration_k8s import AREA, _note, _p50, _runner_report

PROBE = "orchestration_k8s_pvc"
STATUS_ORDER = ("pass", "warn", "fail")


def read_report(ctx: Context) -> dict[str, Any]:
    report = _runner_report(ctx, PROBE, "PVC", "rounds")
    if not report["rounds"]:
        cut = report.get("api_error") or (f"interrupted ({report['interrupted']})" if report.get("interrupted")
                                          else "")
        raise HarnessError("the PVC runner ran no round" + (f" ({str(cut)[:300]})" if cut else ""))
    return report


def _evidence(report: dict[str, Any]) -> dict[str, Any]:
    keys = ("round", "warmup", "claim", "volume", "bound_s", "claim_message", "node", "schedule_s", "phase",
            "exit_code", "reason", "written_s", "written_bytes", "write_ok", "cleanup_s", "cleanup_timed_out",
            "cleanup_error")
    head = ("run", "namespace", "storage_class", "size", "access_mode", "write_mib", "rounds_planned", "api_error",
            "interrupted")
    return {**{k: report.get(k) for k in head}, "rounds": [{k: r.get(k) for k in keys} for r in report["rounds"]]}


def _failure(r: dict[str, Any], report: dict[str, Any]) -> str | None:
    """Why round ``r`` failed, or None: its claim never bound, its pod did not write, its volume was left."""
    if r.get("bound_s") is None:
        message = str(r.get("claim_message") or "no Warning event on the claim")[:300]
        after = f"{report['bind_timeout_s']} s" if report.get("bind_timeout_s") else "the bind timeout"
        return f"claim {r.get('claim')} was not Bound after {after} ({r.get('claim_phase') or 'no phase'}): {message}"
    if not r.get("write_ok"):
        if r.get("phase") == "Succeeded":
            why = (f"pod {r.get('pod')} ended Succeeded but wrote {r.get('written_bytes')} bytes of "
                   f"{int(report.get('write_mib') or 0) * 1048576}")
        else:
            why = (f"pod {r.get('pod')} did not write its file: phase {r.get('phase') or 'unknown'}"
                   + (f", exit code {r.get('exit_code')}" if r.get("exit_code") is not None else "")
                   + (", not ended within the pod timeout" if r.get("pod_timed_out") else ""))
            if r.get("reason"):
                why += f" ({r['reason']}" + (f": {str(r.get('message'))[:300]}" if r.get("message") else "") + ")"
        return why
    if r.get("cleanup_timed_out"):
        return f"cleanup did not finish, a leaked volume: {str(r.get('cleanup_error') or '')[:400]}"
    return None


@check("orchestration.k8s.pvc_lifecycle")
def pvc_lifecycle(ctx: Context) -> Verdict:
    report = read_report(ctx)
    rounds = report["rounds"]
    evidence = _evidence(report)
    failures = [(r, why) for r in rounds if (why := _failure(r, report))]
    if failures:
        first, why = failures[0]
        label = "the warm-up round 0" if first.get("warmup") else f"round {first.get('round')}"
        return Verdict("fail", f"{len(failures)} of {len(rounds)} PVC rounds failed; the first, {label}: {why}"
                       + _note(report), value=len(rounds) - len(failures), unit="rounds", evidence=evidence)
    warmup = next((r for r in rounds if r.get("warmup")), None)
    measured = [r for r in rounds if not r.get("warmup")]
    warm_text = f"warm-up round excluded: {warmup.get('written_s')} s" if warmup else "no warm-up round"
    if not measured:
        own = (f" (its claim create to file written {warmup.get('written_s')} s, cleanup {warmup.get('cleanup_s')} s)"
               if warmup else "")
        return Verdict("warn", f"no measured round: only the warm-up round ran{own}" + _note(report), value=None,
                       unit="s", evidence=evidence)
    written = [float(r["written_s"]) for r in measured if r.get("written_s") is not None]
    cleanups = [float(r["cleanup_s"]) for r in measured if r.get("cleanup_s") is not None]
    if not written or not cleanups:
        raise HarnessError("the PVC runner's measured rounds carry no written_s or cleanup_s" + _note(report))
    write_limit = ctx.reference(AREA, "orchestration.k8s.pvc_lifecycle")
    cleanup_limit = ctx.reference(AREA, "orchestration.k8s.pvc_cleanup")
    w50, c50 = round(_p50(written), 3), round(_p50(cleanups), 3)
    grades = {"written": baselines.grade(w50, write_limit), "cleanup": baselines.grade(c50, cleanup_limit)}
    status = max(grades.values(), key=STATUS_ORDER.index)
    text = (f"claim create to {report.get('write_mib')} MiB written and fsynced p50 {w50} s, max {max(written)} s; "
            f"delete to volume gone p50 {c50} s, max {max(cleanups)} s over {len(measured)} measured rounds "
            f"({warm_text})")
    if grades["written"] != "pass":
        text += f"; write expected within {write_limit.warn} s"
    if grades["cleanup"] != "pass":
        text += f"; cleanup expected within {cleanup_limit.warn} s"
    if _note(report) and status == "pass":
        status = "warn"
    return Verdict(status, text + _note(report), value=w50, unit="s", expected=write_limit.expected(),
                   evidence={**evidence, "written_s": written, "cleanup_s": cleanups, "grades": grades,
                             "cleanup_expected": cleanup_limit.expected()})
