"""Kubernetes performance: the benchmark pods started on their nodes (probe ``k8s_perf_pods``, the JSON report
of :mod:`clustereval.k8s_pods`).

A pod that never started because the cluster's resource or NAD pairing is wrong (Unschedulable: ``Insufficient
rdma/...``; FailedCreatePodSandBox: the NetworkAttachmentDefinition is not found) is a finding about the cluster
(fail); only an API the harness could not reach (or a report it could not read) is an error.
"""

from __future__ import annotations

import json
from typing import Any

from clustereval.checks import Context, HarnessError, Skip, Verdict, check

UNREACHABLE = ("connection to the server", "unable to connect to the server", "no configuration has been provided",
               "couldn't get current server api group list", "you must be logged in", "unauthorized",
               "i/o timeout", "no such host", "connection refused", "tls: ", "kubectl: ", "timed out after")


def read_report(ctx: Context) -> dict[str, Any]:
    probe = ctx.raw("k8s_perf_pods")
    if probe.get("missing") or probe.get("rc") == 127:
        raise Skip("`kubectl` is not installed on the controller")
    try:
        report = json.loads(probe.get("stdout") or "")
    except ValueError:
        detail = (probe.get("stderr") or probe.get("stdout") or "no output").strip().splitlines()
        raise HarnessError(f"the pod runner printed no report (exit {probe.get('rc')}): "
                           f"{(detail[-1] if detail else '')[:300]}") from None
    if not isinstance(report, dict) or "pods" not in report:
        raise HarnessError("the pod runner's report has no pods list")
    return report


def _describe(pod: dict[str, Any]) -> str:
    where = f" on {pod['node']}" if pod.get("node") else ""
    why = f"{pod.get('reason') or pod.get('phase') or 'not started'}"
    message = str(pod.get("message") or "").strip()
    if message:
        # the sandbox error is long: its tail names the missing NAD
        why += ": " + (message if len(message) <= 240 else "…" + message[-200:])
    return f"{pod.get('name')}{where} ({why})"


@check("network.k8s.pod_start")
def pod_start(ctx: Context) -> Verdict:
    if ctx.options.get("harness") not in (None, "k8s"):
        raise Skip(f"not a Kubernetes cluster (harness {ctx.options.get('harness')})")
    report = read_report(ctx)
    api_error = str(report.get("api_error") or "")
    if report.get("interrupted"):
        raise HarnessError(f"the pod run was interrupted ({report['interrupted']}); the Job was deleted")
    if api_error:
        lowered = api_error.lower()
        if "forbidden" in lowered:
            return Verdict("fail", f"the evaluation account may not create the benchmark Job: {api_error[:400]}",
                           evidence={"api_error": api_error[:1000]})
        if any(m in lowered for m in UNREACHABLE) or not report.get("pods"):
            raise HarnessError(f"the Kubernetes API could not be used from the controller: {api_error[:400]}")
    pods = list(report.get("pods") or [])
    expected = int(report.get("expected_pods") or len(pods))
    started = [p for p in pods if p.get("started")]
    waiting = [p for p in pods if not p.get("started")]
    bad_exit = [p for p in started if p.get("exit_code") not in (0, None)]
    evidence = {"job": report.get("job"), "namespace": report.get("namespace"), "expected": expected,
                "started": len(started), "timed_out": bool(report.get("timed_out")),
                "pods": [{k: p.get(k) for k in ("name", "index", "node", "phase", "exit_code", "reason")}
                         for p in pods],
                "not_started": [{"name": p.get("name"), "node": p.get("node"), "reason": p.get("reason"),
                                 "message": str(p.get("message") or "")[:1500]} for p in waiting]}
    if waiting or len(pods) < expected:
        reasons = sorted({str(p.get("reason") or "not started") for p in waiting})
        missing = expected - len(pods)
        named = "; ".join(_describe(p) for p in waiting[:4]) + (f"; and {len(waiting) - 4} more"
                                                                if len(waiting) > 4 else "")
        text = (f"{len(waiting)} of {expected} benchmark pods never started ({', '.join(reasons)}): {named}"
                if waiting else "")
        if missing > 0:
            text += ("; " if text else "") + f"{missing} of {expected} pods were never created"
        return Verdict("fail", text, value=len(started), evidence=evidence)
    if bad_exit:
        return Verdict("warn", f"all {len(pods)} pods started on their nodes, but the benchmark exited non-zero in "
                               + ", ".join(f"{p['name']} on {p.get('node')} (exit {p['exit_code']})"
                                           for p in bad_exit[:4]), value=len(started), evidence=evidence)
    nodes = sorted({str(p.get("node")) for p in started})
    return Verdict("pass", f"all {len(pods)} benchmark pods started, one per node ({', '.join(nodes[:8])}"
                           + (", …" if len(nodes) > 8 else "") + ")", value=len(started), evidence=evidence)
