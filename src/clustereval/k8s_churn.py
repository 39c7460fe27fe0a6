"""Kubernetes orchestration churn: create and delete one GPU pod per round from the controller with its kubectl
(standalone: stdlib only, so a probe can run it as ``python -m clustereval.k8s_churn``).

Builders and readers are pure (:func:`gpu_pod_manifest`, :func:`pod_timing`, :func:`allocation`); :func:`run` is
the kubectl flow, per round:

1. ``kubectl create -n NS -f -`` of a Pod asking for ``<gpu resource>: N`` (``restartPolicy: Never``, a command
   that sleeps, so the pod stays Running until it is deleted);
2. every ``poll_s``: ``kubectl get pod NAME -n NS -o json`` until its Ready condition is True, or it is stuck
   (Unschedulable) or ``ready_timeout_s``;
3. ``kubectl get nodes -o json`` and ``kubectl get pods -A -o json``: the GPUs the API counts as requested on the
   pod's node (by every non-terminated pod) against the node's ``status.allocatable``;
4. ``kubectl delete pod NAME -n NS --wait=true --timeout=<delete_timeout_s>s``: a delete that does not finish in
   time (a finalizer that never clears, a kubelet that never confirms) is recorded as a hang, and the run stops
   (further rounds would only pile up terminating pods).

Latencies come from the pod's own status, not from the controller's clock: scheduling = PodScheduled's
lastTransitionTime - creationTimestamp, start = Ready's lastTransitionTime - creationTimestamp. Always (also on
SIGINT/SIGTERM): ``kubectl delete pods -n NS -l clustereval/churn=RUN --ignore-not-found --wait=false``.

It prints one JSON report: ``{"run", "namespace", "gpu_resource", "gpus", "rounds_planned", "api_error",
"interrupted", "rounds": [{round, pod, node, created, scheduled, ready, schedule_s, start_s, reason, message,
allocatable, requested, allocation_ok, delete_s, delete_hung, delete_error}]}``.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from datetime import datetime
from typing import Any

RUN_LABEL = "clustereval/churn"
TERMINAL = ("Succeeded", "Failed")


def gpu_pod_manifest(name: str, run_id: str, image: str, namespace: str = "default", gpus: int = 1,
                     gpu_resource: str = "nvidia.com/gpu", hold_s: int = 3600) -> dict[str, Any]:
    """A pod that holds ``gpus`` GPUs until it is deleted (the sleep is bounded so a pod missed by the cleanup
    still ends)."""
    limits = {gpu_resource: int(gpus)} if gpus else {}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace,
                         "labels": {"app.kubernetes.io/managed-by": "clustereval", RUN_LABEL: run_id}},
            "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 5,
                     "containers": [{"name": "churn", "image": image, "command": ["/bin/sh", "-c",
                                                                                  f"sleep {int(hold_s)}"],
                                     **({"resources": {"limits": limits}} if limits else {})}]}}


def parse_time(text: Any) -> float | None:
    """An RFC 3339 timestamp as the API prints it (``2026-12-01T21:05:18Z``), in epoch seconds; None when absent."""
    if not text:
        return None
    try:
        return datetime.fromisoformat(str(text).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _condition(pod: dict[str, Any], kind: str) -> dict[str, Any]:
    return next((c for c in (pod.get("status") or {}).get("conditions") or [] if c.get("type") == kind), {})


def pod_timing(pod: dict[str, Any]) -> dict[str, Any]:
    """Scheduling and start latency of one pod from its own status conditions (seconds; None when not reached)."""
    meta = pod.get("metadata") or {}
    created = parse_time(meta.get("creationTimestamp"))
    scheduled, ready = _condition(pod, "PodScheduled"), _condition(pod, "Ready")
    t_sched = parse_time(scheduled.get("lastTransitionTime")) if scheduled.get("status") == "True" else None
    t_ready = parse_time(ready.get("lastTransitionTime")) if ready.get("status") == "True" else None
    out: dict[str, Any] = {"pod": meta.get("name"), "node": (pod.get("spec") or {}).get("nodeName"),
                           "phase": (pod.get("status") or {}).get("phase"),
                           "created": meta.get("creationTimestamp"), "scheduled": scheduled.get("lastTransitionTime"),
                           "ready": ready.get("lastTransitionTime") if t_ready else None,
                           "schedule_s": None, "start_s": None, "reason": None, "message": None}
    if created is not None and t_sched is not None:
        out["schedule_s"] = round(max(t_sched - created, 0.0), 3)
    if created is not None and t_ready is not None:
        out["start_s"] = round(max(t_ready - created, 0.0), 3)
    if scheduled.get("status") == "False":
        out.update(reason=scheduled.get("reason") or "Unschedulable", message=scheduled.get("message"))
    else:
        waiting = (((pod.get("status") or {}).get("containerStatuses") or [{}])[0].get("state") or {}).get("waiting")
        if waiting:
            out.update(reason=waiting.get("reason"), message=waiting.get("message"))
    return out


def _gpus(value: Any) -> int:
    try:
        return int(str(value))
    except ValueError:
        return 0


def allocation(nodes_doc: dict[str, Any], pods_doc: dict[str, Any], node: str | None,
               gpu_resource: str = "nvidia.com/gpu") -> dict[str, Any]:
    """The node's allocatable GPUs against those requested by the non-terminated pods bound to it."""
    record = next((n for n in (nodes_doc or {}).get("items") or []
                   if (n.get("metadata") or {}).get("name") == node), None)
    if record is None:
        return {"allocatable": None, "requested": None, "allocation_ok": None}
    allocatable = _gpus(((record.get("status") or {}).get("allocatable") or {}).get(gpu_resource, 0))
    requested = 0
    for pod in (pods_doc or {}).get("items") or []:
        if (pod.get("spec") or {}).get("nodeName") != node or (pod.get("status") or {}).get("phase") in TERMINAL:
            continue
        for c in (pod.get("spec") or {}).get("containers") or []:
            res = c.get("resources") or {}
            requested += _gpus((res.get("requests") or res.get("limits") or {}).get(gpu_resource, 0))
    return {"allocatable": allocatable, "requested": requested, "allocation_ok": requested <= allocatable}


# ----------------------------------------------------------------------------------------- the kubectl flow

class _Interrupted(Exception):
    pass


def _kubectl(args: list[str], kubectl: list[str], stdin: str | None = None, timeout: float = 60) -> dict[str, Any]:
    try:
        proc = subprocess.run([*kubectl, *args], input=stdin, capture_output=True, text=True, timeout=timeout)
        return {"rc": proc.returncode, "stdout": proc.stdout, "stderr": proc.stderr}
    except subprocess.TimeoutExpired:
        return {"rc": 124, "stdout": "", "stderr": f"kubectl {' '.join(args[:3])} timed out after {timeout} s"}
    except OSError as exc:
        return {"rc": 127, "stdout": "", "stderr": f"kubectl: {exc}"}


def _json(result: dict[str, Any]) -> dict[str, Any] | None:
    if result["rc"] != 0:
        return None
    try:
        return json.loads(result["stdout"])
    except ValueError:
        return None


def _error(result: dict[str, Any], what: str) -> str:
    return (result["stderr"] or result["stdout"]).strip() or f"kubectl {what} gave no JSON"


def one_round(index: int, manifest: dict[str, Any], kubectl: list[str], gpu_resource: str, ready_timeout_s: float,
              delete_timeout_s: float, poll_s: float) -> tuple[dict[str, Any], str | None]:
    """Create, wait Ready, read the allocation, delete (bounded); the round's record and an API error if any."""
    name, namespace = manifest["metadata"]["name"], manifest["metadata"]["namespace"]
    ns = ["-n", namespace]
    record: dict[str, Any] = {"round": index, "pod": name}
    created = _kubectl(["create", *ns, "-f", "-"], kubectl, stdin=json.dumps(manifest))
    if created["rc"] != 0:
        return record, _error(created, "create")
    deadline = time.monotonic() + ready_timeout_s
    pod: dict[str, Any] = {}
    while True:
        got = _json(_kubectl(["get", "pod", name, *ns, "-o", "json"], kubectl))
        if got is not None:
            pod = got
            timing = pod_timing(pod)
            if timing["start_s"] is not None or timing["reason"] == "Unschedulable" \
                    or timing["phase"] in TERMINAL:
                break
        if time.monotonic() >= deadline:
            record["ready_timed_out"] = True
            break
        time.sleep(poll_s)
    record.update(pod_timing(pod) if pod else {})
    nodes = _json(_kubectl(["get", "nodes", "-o", "json"], kubectl)) or {}
    pods = _json(_kubectl(["get", "pods", "-A", "-o", "json"], kubectl)) or {}
    record.update(allocation(nodes, pods, record.get("node"), gpu_resource))
    t0 = time.monotonic()
    deleted = _kubectl(["delete", "pod", name, *ns, "--wait=true", f"--timeout={int(delete_timeout_s)}s"], kubectl,
                       timeout=delete_timeout_s + 30)
    record["delete_s"] = round(time.monotonic() - t0, 3)
    record["delete_hung"] = deleted["rc"] != 0 and "timed out" in (deleted["stderr"] + deleted["stdout"])
    record["delete_error"] = (deleted["stderr"] or "").strip()[:1000] if deleted["rc"] != 0 else None
    return record, None


def run(run_id: str, image: str, rounds: int = 20, namespace: str = "default", gpus: int = 1,
        gpu_resource: str = "nvidia.com/gpu", kubectl: list[str] | None = None, ready_timeout_s: float = 300,
        delete_timeout_s: float = 120, poll_s: float = 1) -> dict[str, Any]:
    kubectl = kubectl or ["kubectl"]
    report: dict[str, Any] = {"run": run_id, "namespace": namespace, "gpu_resource": gpu_resource, "gpus": gpus,
                              "rounds_planned": rounds, "api_error": None, "interrupted": False, "rounds": []}

    def interrupted(signum, frame):
        raise _Interrupted(signal.Signals(signum).name)

    previous = {s: signal.signal(s, interrupted) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        for index in range(rounds):
            manifest = gpu_pod_manifest(f"{run_id}-{index}", run_id, image, namespace, gpus, gpu_resource)
            record, error = one_round(index, manifest, kubectl, gpu_resource, ready_timeout_s, delete_timeout_s,
                                      poll_s)
            report["rounds"].append(record)
            if error:
                report["api_error"] = error
                break
            if record.get("delete_hung"):
                break  # a hung delete: more rounds would only add terminating pods
    except _Interrupted as exc:
        report["interrupted"] = str(exc)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        report["cleanup"] = _kubectl(["delete", "pods", "-n", namespace, "-l", f"{RUN_LABEL}={run_id}",
                                      "--ignore-not-found", "--wait=false"], kubectl)
    return report


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m clustereval.k8s_churn", description=__doc__.split("\n")[0])
    ap.add_argument("--run", required=True, help="run id: pod name prefix and label value")
    ap.add_argument("--image", required=True)
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--namespace", default="default")
    ap.add_argument("--gpus", type=int, default=1)
    ap.add_argument("--gpu-resource", default="nvidia.com/gpu")
    ap.add_argument("--ready-timeout", type=float, default=300)
    ap.add_argument("--delete-timeout", type=float, default=120)
    ap.add_argument("--poll", type=float, default=1)
    ap.add_argument("--kubeconfig", default=os.environ.get("CLUSTEREVAL_KUBECONFIG", ""))
    ap.add_argument("--context", default=os.environ.get("CLUSTEREVAL_KUBE_CONTEXT", ""))
    args = ap.parse_args(argv)
    kubectl = ["kubectl"] + ([f"--kubeconfig={args.kubeconfig}"] if args.kubeconfig else []) \
        + ([f"--context={args.context}"] if args.context else [])
    report = run(args.run, args.image, args.rounds, args.namespace, args.gpus, args.gpu_resource, kubectl,
                 args.ready_timeout, args.delete_timeout, args.poll)
    report["kubectl"] = " ".join(shlex.quote(k) for k in kubectl)
    sys.stdout.write(json.dumps(report, indent=1) + "\n")
    return 3 if report["api_error"] else 0


if __name__ == "__main__":
    sys.exit(main())
