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

With ``--sandbox-batches 10,50,100`` it runs :func:`run_sandbox` instead: per batch size, that many CPU-only pods
(:func:`sandbox_pod_manifest`) in one ``kubectl create -f -`` of a List, polled with ``kubectl get pods -l`` until all
are Ready or ``--ready-timeout``; the Pending ones' reasons from ``kubectl get events --field-selector
reason=FailedScheduling`` (:func:`batch_summary`); then ``kubectl delete pods -l ... --wait=true`` before the next
batch (a delete that fails stops the run). Its report: ``{"run", "mode": "sandbox", "batches_planned", "api_error",
"interrupted", "batches": [{batch, created, ready, pending, ready_p50_s, ready_max_s, pending_reasons, timed_out,
delete_s, delete_error}]}``.

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
import shlex
import sys
import time
from datetime import datetime
from typing import Any

from clustereval.k8s_pods import (
    Interrupted,
    add_kubectl_options,
    interrupt_on_signals,
    json_of,
    keys,
    kubectl_of,
    kubectl_run,
)

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

def _error(result: dict[str, Any], what: str) -> str:
    return (result["stderr"] or result["stdout"]).strip() or f"kubectl {what} gave no JSON"


def one_round(index: int, manifest: dict[str, Any], kubectl: list[str], gpu_resource: str, ready_timeout_s: float,
              delete_timeout_s: float, poll_s: float) -> tuple[dict[str, Any], str | None]:
    """Create, wait Ready, read the allocation, delete (bounded); the round's record and an API error if any."""
    name, namespace = manifest["metadata"]["name"], manifest["metadata"]["namespace"]
    ns = ["-n", namespace]
    record: dict[str, Any] = {"round": index, "pod": name}
    created = kubectl_run(["create", *ns, "-f", "-"], kubectl, stdin=json.dumps(manifest))
    if created["rc"] != 0:
        return record, _error(created, "create")
    deadline = time.monotonic() + ready_timeout_s
    pod: dict[str, Any] = {}
    while True:
        got = json_of(kubectl_run(["get", "pod", name, *ns, "-o", "json"], kubectl))
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
    nodes = json_of(kubectl_run(["get", "nodes", "-o", "json"], kubectl)) or {}
    pods = json_of(kubectl_run(["get", "pods", "-A", "-o", "json"], kubectl)) or {}
    record.update(allocation(nodes, pods, record.get("node"), gpu_resource))
    t0 = time.monotonic()
    deleted = kubectl_run(["delete", "pod", name, *ns, "--wait=true", f"--timeout={int(delete_timeout_s)}s"], kubectl,
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

    restore_signals = interrupt_on_signals()
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
    except Interrupted as exc:
        report["interrupted"] = str(exc)
    finally:
        restore_signals()
        report["cleanup"] = kubectl_run(["delete", "pods", "-n", namespace, "-l", f"{RUN_LABEL}={run_id}",
                                      "--ignore-not-found", "--wait=false"], kubectl)
    return report


# ----------------------------------------------------------------------------------------- sandbox batches
# Batches of CPU-only pods of growing size, created at once: how many become Ready, how fast (from the pods' own
# conditions), and for those left Pending the scheduler's reasons (its FailedScheduling events, grouped). Each
# batch is deleted, and waited for until it is gone, before the next one (a batch left behind would fill the nodes
# and make the next batch's Pending pods the harness's fault).

SANDBOX_LABEL = "clustereval/sandbox"


def sandbox_pod_manifest(name: str, run_id: str, batch: int, image: str, namespace: str = "default",
                         cpu: str = "100m", memory: str = "64Mi", tolerate: tuple[str, ...] = (),
                         hold_s: int = 3600) -> dict[str, Any]:
    """A CPU-only pod (no GPU request) labelled with the run and its batch size; ``tolerate`` names taint keys it
    tolerates (GPU nodes are commonly tainted ``nvidia.com/gpu``, which only pods asking for a GPU tolerate by
    the ExtendedResourceToleration admission plugin, so a cluster of GPU nodes only needs it for CPU pods)."""
    resources = {"requests": {"cpu": str(cpu), "memory": str(memory)}}
    tolerations = [{"key": key, "operator": "Exists", "effect": "NoSchedule"} for key in tolerate if key]
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace,
                         "labels": {"app.kubernetes.io/managed-by": "clustereval", SANDBOX_LABEL: run_id,
                                    f"{SANDBOX_LABEL}-batch": str(batch)}},
            "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 5,
                     "containers": [{"name": "sandbox", "image": image, "resources": resources,
                                     "command": ["/bin/sh", "-c", f"sleep {int(hold_s)}"]}],
                     **({"tolerations": tolerations} if tolerations else {})}}


def pending_reasons(events_doc: dict[str, Any], pending: list[str]) -> dict[str, int]:
    """The latest FailedScheduling message of each pending pod, counted per message (the scheduler repeats one
    message per pod; the latest is what holds it now). A pending pod without such an event counts under
    ``"no FailedScheduling event"``."""
    latest: dict[str, tuple[str, str]] = {}
    for ev in (events_doc or {}).get("items") or []:
        obj = ev.get("involvedObject") or {}
        if ev.get("reason") != "FailedScheduling" or obj.get("kind", "Pod") != "Pod" or obj.get("name") not in pending:
            continue
        when = str(ev.get("lastTimestamp") or ev.get("eventTime") or (ev.get("metadata") or {}).get(
            "creationTimestamp") or "")
        if obj["name"] not in latest or when >= latest[obj["name"]][0]:
            latest[obj["name"]] = (when, str(ev.get("message") or "").strip())
    counts: dict[str, int] = {}
    for name in pending:
        message = latest[name][1] if name in latest else "no FailedScheduling event"
        counts[message] = counts.get(message, 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: -kv[1]))


def _p50(values: list[float]) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    mid = len(ordered) // 2
    return round(ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2, 3)


def batch_summary(size: int, pods_doc: dict[str, Any], events_doc: dict[str, Any]) -> dict[str, Any]:
    """One batch from ``kubectl get pods -l ... -o json`` and ``kubectl get events -o json``: Ready count, p50/max
    time to Ready, and the Pending pods' scheduler reasons."""
    timings = [pod_timing(p) for p in (pods_doc or {}).get("items") or []]
    starts = [t["start_s"] for t in timings if t["start_s"] is not None]
    # not Ready: never bound (the scheduler's events say why) or bound but its sandbox/container not started
    pending = [t["pod"] for t in timings if t["start_s"] is None and t["schedule_s"] is None]
    starting = [t for t in timings if t["start_s"] is None and t["schedule_s"] is not None]
    reasons = pending_reasons(events_doc, pending) if pending else {}
    for t in starting:
        key = f"scheduled on {t['node']} but not Ready: {t['reason'] or t['phase']}"
        reasons[key] = reasons.get(key, 0) + 1
    return {"batch": size, "created": len(timings), "ready": len(starts), "pending": len(pending) + len(starting),
            "ready_p50_s": _p50(starts), "ready_max_s": max(starts) if starts else None,
            "pending_reasons": reasons}


def one_batch(size: int, run_id: str, image: str, namespace: str, cpu: str, memory: str, tolerate: tuple[str, ...],
              kubectl: list[str], ready_timeout_s: float, delete_timeout_s: float,
              poll_s: float) -> tuple[dict[str, Any], str | None]:
    """Create ``size`` pods at once, wait until all are Ready or the timeout, summarise, delete and wait."""
    ns, selector = ["-n", namespace], f"{SANDBOX_LABEL}={run_id},{SANDBOX_LABEL}-batch={size}"
    items = [sandbox_pod_manifest(f"{run_id}-b{size}-{i}", run_id, size, image, namespace, cpu, memory, tolerate)
             for i in range(size)]
    record: dict[str, Any] = {"batch": size, "created": 0, "ready": 0, "pending": size, "pending_reasons": {}}
    created = kubectl_run(["create", *ns, "-f", "-"], kubectl, timeout=120,
                       stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    error = _error(created, "create") if created["rc"] != 0 else None
    deadline, pods = time.monotonic() + ready_timeout_s, None
    while error is None:
        got = json_of(kubectl_run(["get", "pods", *ns, "-l", selector, "-o", "json"], kubectl))
        if got is not None:
            pods = got
            if len(got.get("items") or []) >= size and all(pod_timing(p)["start_s"] is not None
                                                           for p in got["items"]):
                break
        if time.monotonic() >= deadline:
            record["timed_out"] = True
            break
        time.sleep(poll_s)
    if pods is not None:
        events = json_of(kubectl_run(["get", "events", *ns, "--field-selector", "reason=FailedScheduling", "-o",
                                 "json"], kubectl)) or {}
        record.update(batch_summary(size, pods, events))
    elif error is None:
        error = "kubectl get pods of the batch gave no JSON"
    t0 = time.monotonic()
    deleted = kubectl_run(["delete", "pods", *ns, "-l", selector, "--ignore-not-found", "--wait=true",
                        f"--timeout={int(delete_timeout_s)}s"], kubectl, timeout=delete_timeout_s + 30)
    record["delete_s"] = round(time.monotonic() - t0, 3)
    record["delete_error"] = (deleted["stderr"] or "").strip()[:1000] if deleted["rc"] != 0 else None
    return record, error


def run_sandbox(run_id: str, image: str, batches: list[int], namespace: str = "default", cpu: str = "100m",
                memory: str = "64Mi", kubectl: list[str] | None = None, ready_timeout_s: float = 300,
                delete_timeout_s: float = 300, poll_s: float = 1, tolerate: tuple[str, ...] = ()) -> dict[str, Any]:
    kubectl = kubectl or ["kubectl"]
    report: dict[str, Any] = {"run": run_id, "mode": "sandbox", "namespace": namespace, "cpu": cpu,
                              "memory": memory, "tolerate": list(tolerate), "batches_planned": batches,
                              "ready_timeout_s": ready_timeout_s, "api_error": None, "interrupted": False,
                              "batches": []}

    restore_signals = interrupt_on_signals()
    try:
        for size in batches:
            record, error = one_batch(size, run_id, image, namespace, cpu, memory, tolerate, kubectl,
                                      ready_timeout_s, delete_timeout_s, poll_s)
            report["batches"].append(record)
            if error:
                report["api_error"] = error
                break
            if record.get("delete_error"):
                break  # a batch that would not go away: the next one would be judged on a full cluster
    except Interrupted as exc:
        report["interrupted"] = str(exc)
    finally:
        restore_signals()
        report["cleanup"] = kubectl_run(["delete", "pods", "-n", namespace, "-l", f"{SANDBOX_LABEL}={run_id}",
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
    ap.add_argument("--sandbox-batches", default="",
                    help="comma-separated batch sizes: run CPU-only sandbox pod batches instead of the GPU churn")
    ap.add_argument("--cpu", default="100m", help="CPU request of each sandbox pod")
    ap.add_argument("--memory", default="64Mi", help="memory request of each sandbox pod")
    ap.add_argument("--tolerate", default="", help="comma-separated taint keys the sandbox pods tolerate")
    add_kubectl_options(ap)
    args = ap.parse_args(argv)
    kubectl = kubectl_of(args)
    if args.sandbox_batches:
        sizes = [int(b) for b in args.sandbox_batches.replace(" ", "").split(",") if b]
        report = run_sandbox(args.run, args.image, sizes, args.namespace, args.cpu, args.memory, kubectl,
                             args.ready_timeout, args.delete_timeout, args.poll,
                             keys(args.tolerate))
    else:
        report = run(args.run, args.image, args.rounds, args.namespace, args.gpus, args.gpu_resource, kubectl,
                     args.ready_timeout, args.delete_timeout, args.poll)
    report["kubectl"] = " ".join(shlex.quote(k) for k in kubectl)
    sys.stdout.write(json.dumps(report, indent=1) + "\n")
    return 3 if report["api_error"] else 0


if __name__ == "__main__":
    sys.exit(main())
