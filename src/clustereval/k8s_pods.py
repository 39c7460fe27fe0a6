"""Benchmarks as pods on Kubernetes: one indexed Job, one pod per node, with the GPUs, the RDMA resource and the
NetworkAttachmentDefinition the audit found (standalone: stdlib only, so a probe can run it as
``python -m clustereval.k8s_pods`` on the controller).

Builders are pure (:func:`job_manifest`, :func:`pod_reports`); :func:`run` is the kubectl flow:

1. ``kubectl apply -n NS -f -`` of the Job (``completionMode: Indexed``, parallelism = completions = nodes,
   ``backoffLimit: 0``, ``restartPolicy: Never``; required node affinity on ``kubernetes.io/hostname`` (or the
   topology label's values) and a required pod anti-affinity on ``kubernetes.io/hostname``, so each pod lands on
   its own node; limits ``<gpu resource>: N`` and ``<rdma resource>: 1``; annotation
   ``k8s.v1.cni.cncf.io/networks: <nad>``);
2. every ``poll_s``: ``kubectl get pods -n NS -l job-name=NAME -o json``, until every pod ended, or every pod
   that has not ended is stuck (Unschedulable, or waiting in ContainerCreating after a sandbox failure) for
   ``stuck_s``, or ``timeout_s``;
3. ``kubectl get events -n NS -o json`` (the pods' FailedScheduling / FailedCreatePodSandBox / NoNetworkFound);
4. ``kubectl logs -n NS POD`` per pod that started;
5. always (also on SIGINT/SIGTERM and timeout): ``kubectl delete job NAME -n NS --ignore-not-found --wait=false``
   and ``kubectl delete pods -n NS -l job-name=NAME --ignore-not-found --wait=false``.

It prints one JSON report: ``{"job", "namespace", "nodes", "apply": {rc, stdout, stderr}, "api_error",
"timed_out", "pods": [{name, index, node, phase, started, finished, exit_code, reason, message, events, logs}]}``.
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
from collections.abc import Callable
from typing import Any

HOSTNAME_LABEL = "kubernetes.io/hostname"
NAD_ANNOTATION = "k8s.v1.cni.cncf.io/networks"
INDEX_KEY = "batch.kubernetes.io/job-completion-index"
STUCK_REASONS = ("Unschedulable", "FailedCreatePodSandBox", "ErrImagePull", "ImagePullBackOff",
                 "CreateContainerConfigError", "InvalidImageName")


def job_manifest(name: str, nodes: list[str], command: list[str] | str, image: str, namespace: str = "default",
                 gpus: int = 8, gpu_resource: str = "nvidia.com/gpu", rdma_resource: str = "",
                 rdma_count: int = 1, nad: str = "", topology_label: str = "", topology_values: list[str] | None = None,
                 labels: dict[str, str] | None = None, env: dict[str, str] | None = None) -> dict[str, Any]:
    """The indexed Job that runs ``command`` once per node (see the module doc)."""
    argv = ["/bin/sh", "-c", command] if isinstance(command, str) else [str(a) for a in command]
    limits: dict[str, Any] = {}
    if gpus:
        limits[gpu_resource] = int(gpus)
    if rdma_resource:
        limits[rdma_resource] = int(rdma_count)
    if topology_label and topology_values:
        match = {"key": topology_label, "operator": "In", "values": sorted(set(topology_values))}
    else:
        match = {"key": HOSTNAME_LABEL, "operator": "In", "values": list(nodes)}
    pod_labels = {"app.kubernetes.io/managed-by": "clustereval", "clustereval/benchmark": name, **(labels or {})}
    annotations = {NAD_ANNOTATION: nad} if nad else {}
    container_env = [{"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
                     *({"name": k, "value": str(v)} for k, v in (env or {}).items())]
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(pod_labels)},
        "spec": {
            "completionMode": "Indexed", "completions": len(nodes), "parallelism": len(nodes), "backoffLimit": 0,
            "template": {
                "metadata": {"labels": pod_labels, **({"annotations": annotations} if annotations else {})},
                "spec": {
                    "restartPolicy": "Never",
                    "affinity": {
                        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [{"matchExpressions": [match]}]}},
                        "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
                            "labelSelector": {"matchLabels": {"clustereval/benchmark": name}},
                            "topologyKey": HOSTNAME_LABEL}]}},
                    "containers": [{"name": "benchmark", "image": image, "command": argv, "env": container_env,
                                    **({"resources": {"limits": limits}} if limits else {})}],
                },
            },
        },
    }


# ----------------------------------------------------------------------------------------- reading the API

def _condition(pod: dict[str, Any], kind: str) -> dict[str, Any]:
    return next((c for c in (pod.get("status") or {}).get("conditions") or [] if c.get("type") == kind), {})


def pod_state(pod: dict[str, Any]) -> dict[str, Any]:
    """One pod as the report shows it, from ``kubectl get pods -o json`` alone."""
    meta, spec, status = pod.get("metadata") or {}, pod.get("spec") or {}, pod.get("status") or {}
    statuses = status.get("containerStatuses") or [{}]
    state = statuses[0].get("state") or {}
    terminated, running, waiting = state.get("terminated") or {}, state.get("running") or {}, state.get("waiting") or {}
    scheduled = _condition(pod, "PodScheduled")
    index = (meta.get("labels") or {}).get(INDEX_KEY) or (meta.get("annotations") or {}).get(INDEX_KEY)
    out = {"name": meta.get("name"), "index": int(index) if str(index or "").isdigit() else None,
           "node": spec.get("nodeName"), "phase": status.get("phase"),
           "started": terminated.get("startedAt") or running.get("startedAt"),
           "finished": terminated.get("finishedAt"), "exit_code": terminated.get("exitCode"),
           "reason": None, "message": None}
    if scheduled.get("status") == "False":
        out.update(reason=scheduled.get("reason") or "Unschedulable", message=scheduled.get("message"))
    elif waiting:
        out.update(reason=waiting.get("reason"), message=waiting.get("message"))
    elif terminated and terminated.get("exitCode") not in (0, None):
        out.update(reason=terminated.get("reason"), message=terminated.get("message"))
    return out


def pod_reports(pods_doc: dict[str, Any], events_doc: dict[str, Any] | None = None,
                logs: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """Every pod of the Job (by completion index), with its Warning events; a pod that never started gets the
    scheduler's or the sandbox's reason (the latest Warning event when its status says no more than
    ContainerCreating)."""
    events = [e for e in (events_doc or {}).get("items") or [] if (e.get("involvedObject") or {}).get("kind") == "Pod"]
    out = []
    for pod in (pods_doc or {}).get("items") or []:
        report = pod_state(pod)
        mine = [e for e in events if e["involvedObject"].get("name") == report["name"]
                and e["involvedObject"].get("uid") in (None, "", (pod.get("metadata") or {}).get("uid"))]
        warnings = [{"reason": e.get("reason"), "message": e.get("message"), "count": e.get("count", 1)}
                    for e in mine if e.get("type") == "Warning"]
        report["events"] = warnings
        if report["started"] is None and warnings and report["reason"] in (None, "ContainerCreating"):
            sandbox = [w for w in warnings if w["reason"] == "FailedCreatePodSandBox"] or warnings
            report.update(reason=sandbox[-1]["reason"], message=sandbox[-1]["message"])
        report["logs"] = (logs or {}).get(report["name"] or "", "")
        out.append(report)
    return sorted(out, key=lambda r: (r["index"] if r["index"] is not None else 1 << 30, r["name"] or ""))


def stuck(report: dict[str, Any]) -> bool:
    return report["started"] is None and report["phase"] == "Pending" and report["reason"] in STUCK_REASONS


# ----------------------------------------------------------------------------------------- the kubectl flow

class Interrupted(Exception):
    """SIGINT or SIGTERM during a kubectl flow: its clean-up still runs."""


def interrupt_on_signals() -> Callable[[], None]:
    """From now on SIGINT and SIGTERM raise :class:`Interrupted` (so the flow's clean-up runs); returns what puts the
    handlers that were there before back (call it first thing in the clean-up)."""
    def interrupted(signum, frame):
        raise Interrupted(signal.Signals(signum).name)

    previous = {s: signal.signal(s, interrupted) for s in (signal.SIGTERM, signal.SIGINT)}

    def restore() -> None:
        for sig, handler in previous.items():
            signal.signal(sig, handler)

    return restore


def add_kubectl_options(ap: argparse.ArgumentParser) -> None:
    """The controller's kubeconfig and context, as every runner takes them (default: the probe's environment)."""
    ap.add_argument("--kubeconfig", default=os.environ.get("CLUSTEREVAL_KUBECONFIG", ""))
    ap.add_argument("--context", default=os.environ.get("CLUSTEREVAL_KUBE_CONTEXT", ""))


def kubectl_of(args: argparse.Namespace) -> list[str]:
    """The kubectl command line for the parsed ``--kubeconfig`` and ``--context`` (none: kubectl's defaults)."""
    return ["kubectl"] + ([f"--kubeconfig={args.kubeconfig}"] if args.kubeconfig else []) \
        + ([f"--context={args.context}"] if args.context else [])


def keys(text: str) -> tuple[str, ...]:
    """A comma-separated option (``--tolerate a, b``) as its non-empty items."""
    return tuple(k for k in text.replace(" ", "").split(",") if k)


def kubectl_run(args: list[str], kubectl: list[str], stdin: str | None = None, timeout: float = 60) -> dict[str, Any]:
    try:
        proc = subprocess.run([*kubectl, *args], input=stdin, capture_output=True, text=True, timeout=timeout)
        return {"rc": proc.returncode, "stdout": proc.stdout, "stderr": proc.stderr}
    except subprocess.TimeoutExpired:
        return {"rc": 124, "stdout": "", "stderr": f"kubectl {' '.join(args[:3])} timed out after {timeout} s"}
    except OSError as exc:
        return {"rc": 127, "stdout": "", "stderr": f"kubectl: {exc}"}


def json_of(result: dict[str, Any]) -> dict[str, Any] | None:
    if result["rc"] != 0:
        return None
    try:
        return json.loads(result["stdout"])
    except ValueError:
        return None


def _target_values(manifest: dict[str, Any]) -> list[str]:
    terms = ((((manifest["spec"]["template"]["spec"].get("affinity") or {}).get("nodeAffinity") or {})
              .get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms") or [{}])
    return list((terms[0].get("matchExpressions") or [{}])[0].get("values") or [])


def run(manifest: dict[str, Any], kubectl: list[str] | None = None, timeout_s: float = 600, stuck_s: float = 30,
        poll_s: float = 2) -> dict[str, Any]:
    """Apply the Job, wait for its pods (bounded), collect their state, events and logs, delete the Job always."""
    kubectl = kubectl or ["kubectl"]
    name, namespace = manifest["metadata"]["name"], manifest["metadata"].get("namespace") or "default"
    ns = ["-n", namespace]
    selector = f"job-name={name}"
    expected = int(manifest["spec"].get("completions") or 1)
    report: dict[str, Any] = {"job": name, "namespace": namespace, "expected_pods": expected,
                              "nodes": _target_values(manifest),
                              "api_error": None, "timed_out": False, "interrupted": False, "pods": []}

    restore_signals = interrupt_on_signals()
    pods_doc: dict[str, Any] | None = None
    try:
        applied = kubectl_run(["apply", *ns, "-f", "-"], kubectl, stdin=json.dumps(manifest))
        report["apply"] = applied
        if applied["rc"] != 0:
            report["api_error"] = (applied["stderr"] or applied["stdout"]).strip()
            return report
        deadline = time.monotonic() + timeout_s
        stuck_since: float | None = None
        while True:
            got = kubectl_run(["get", "pods", *ns, "-l", selector, "-o", "json"], kubectl)
            doc = json_of(got)
            if doc is None:
                report["api_error"] = (got["stderr"] or got["stdout"]).strip() or "kubectl get pods gave no JSON"
            else:
                pods_doc, report["api_error"] = doc, None
                states = [pod_state(p) for p in doc.get("items") or []]
                ended = [s for s in states if s["phase"] in ("Succeeded", "Failed")]
                if len(states) >= expected and len(ended) == len(states):
                    break
                if states and all(s in ended or stuck(s) for s in states):
                    stuck_since = stuck_since or time.monotonic()
                    if time.monotonic() - stuck_since >= stuck_s:
                        break
                elif len(states) >= expected and any(s["started"] is None and s["phase"] == "Pending"
                                                     and s["node"] for s in states):
                    # a pod bound to a node that waits in ContainerCreating: the events say whether it is stuck
                    events = json_of(kubectl_run(["get", "events", *ns, "-o", "json"], kubectl)) or {}
                    if all(stuck(r) or r["phase"] in ("Succeeded", "Failed") for r in pod_reports(doc, events)):
                        stuck_since = stuck_since or time.monotonic()
                        if time.monotonic() - stuck_since >= stuck_s:
                            break
                    else:
                        stuck_since = None
                else:
                    stuck_since = None
            if time.monotonic() >= deadline:
                report["timed_out"] = True
                break
            time.sleep(poll_s)
        events = json_of(kubectl_run(["get", "events", *ns, "-o", "json"], kubectl)) or {"items": []}
        logs = {}
        for pod in (pods_doc or {}).get("items") or []:
            state = pod_state(pod)
            if state["started"] is not None:
                logs[state["name"]] = kubectl_run(["logs", state["name"], *ns], kubectl)["stdout"]
        report["pods"] = pod_reports(pods_doc or {}, events, logs)
    except Interrupted as exc:
        report["interrupted"] = str(exc)
    finally:
        restore_signals()
        report["deleted"] = kubectl_run(["delete", "job", name, *ns, "--ignore-not-found", "--wait=false"], kubectl)
        kubectl_run(["delete", "pods", *ns, "-l", selector, "--ignore-not-found", "--wait=false"], kubectl)
    return report


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m clustereval.k8s_pods", description=__doc__.split("\n")[0])
    ap.add_argument("--name", required=True)
    ap.add_argument("--nodes", required=True, help="comma-separated node names")
    ap.add_argument("--command", required=True, help="the benchmark command (run with /bin/sh -c)")
    ap.add_argument("--image", required=True)
    ap.add_argument("--namespace", default="default")
    ap.add_argument("--gpus", type=int, default=8)
    ap.add_argument("--gpu-resource", default="nvidia.com/gpu")
    ap.add_argument("--rdma-resource", default="")
    ap.add_argument("--nad", default="")
    ap.add_argument("--topology-label", default="")
    ap.add_argument("--topology-values", default="")
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--stuck", type=float, default=30)
    ap.add_argument("--poll", type=float, default=2)
    add_kubectl_options(ap)
    args = ap.parse_args(argv)
    nodes = [n for n in args.nodes.replace(" ", ",").split(",") if n]
    manifest = job_manifest(args.name, nodes, args.command, args.image, args.namespace, args.gpus, args.gpu_resource,
                            args.rdma_resource, 1, args.nad, args.topology_label,
                            [v for v in args.topology_values.split(",") if v])
    kubectl = kubectl_of(args)
    report = run(manifest, kubectl, args.timeout, args.stuck, args.poll)
    report["kubectl"] = " ".join(shlex.quote(k) for k in kubectl)
    sys.stdout.write(json.dumps(report, indent=1) + "\n")
    return 3 if report["api_error"] else 0


if __name__ == "__main__":
    sys.exit(main())
