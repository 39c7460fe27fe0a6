"""Kubernetes PVC lifecycle: per round, a claim and a pod that mounts it, writes and fsyncs a file and ends; both
deleted and the volume waited for until it is gone (standalone: stdlib only, so a probe can run it as
``python -m clustereval.k8s_pvc``).

Builders and readers are pure (:func:`claim_manifest`, :func:`writer_pod_manifest`, :func:`written_bytes`,
:func:`claim_message`); :func:`run` is the kubectl flow, per round ``i`` (claim and pod both named ``RUN-i``):

1. ``kubectl create -n NS -f -`` of the PersistentVolumeClaim (``storageClassName`` omitted when no class is given:
   the cluster's default class), then of the Pod (``restartPolicy: Never``, the claim mounted at the mount path,
   ``dd ... conv=fsync`` of ``write_mib`` MiB then ``sync``, and a marker line with the file's size);
2. every ``poll_s``: ``kubectl get pvc NAME -n NS -o json`` and ``kubectl get pod NAME -n NS -o json`` until the pod
   ended (Succeeded or Failed), the claim is not Bound after ``bind_timeout_s`` (a claim that never binds is what
   a missing default class, a broken provisioner or a full backend looks like) or the pod has not ended
   ``pod_timeout_s`` after the claim bound; a claim never Bound gets its latest Warning event (ProvisioningFailed)
   from ``kubectl get events --field-selector involvedObject.name=NAME``;
3. ``kubectl logs NAME -n NS``: the byte count of the marker line (the write was complete only when it says
   ``write_mib`` MiB);
4. ``kubectl delete pod`` then ``kubectl delete pvc``, both ``--wait=true --timeout=<cleanup_timeout_s>s``, then
   ``kubectl get pv VOLUME -o json`` until it is NotFound: a volume still there after ``cleanup_timeout_s`` (a claim
   left Terminating, a PV Released by a Retain policy or a deleter that fails) is recorded and the run stops, since
   further rounds would only pile up volumes.

Round 0 is a warm-up (``warmup: true``: the first volume of a class may pay for a provisioner's cold start or an
image pull); the checks keep it out of the figures but judge its failures like any other round. Times are the
controller's monotonic clock (the claim and the PV carry no condition timestamps to measure from); the pod's
scheduling and start latency come from its own conditions (:func:`clustereval.k8s_churn.pod_timing`). An API error
on create stops the run. Always (also on SIGINT/SIGTERM): ``kubectl delete pods`` and ``kubectl delete pvc`` ``-l
clustereval/pvc=RUN --ignore-not-found --wait=false``.

It prints one JSON report: ``{"run", "mode": "pvc", "namespace", "storage_class", "size", "access_mode",
"write_mib", "rounds_planned", "api_error", "interrupted", "rounds": [{round, warmup, claim, pod, bound_s, volume,
claim_phase, claim_message, node, schedule_s, start_s, reason, message, phase, exit_code, written_s,
written_bytes, write_ok, bind_timed_out, pod_timed_out, cleanup_s, cleanup_timed_out, cleanup_error}], "cleanup",
"kubectl"}``.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import sys
import time
from typing import Any

from clustereval.k8s_churn import TERMINAL, pod_timing
from clustereval.k8s_pods import (
    Interrupted,
    add_kubectl_options,
    interrupt_on_signals,
    json_of,
    keys,
    kubectl_of,
    kubectl_run,
)

RUN_LABEL = "clustereval/pvc"
FILE = "clustereval-pvc.bin"
MARKER = "clustereval-pvc-ok"
MIB = 1048576


def _labels(run_id: str) -> dict[str, str]:
    return {"app.kubernetes.io/managed-by": "clustereval", RUN_LABEL: run_id}


def claim_manifest(name: str, run_id: str, namespace: str = "default", storage_class: str = "", size: str = "1Gi",
                   access_mode: str = "ReadWriteOnce") -> dict[str, Any]:
    """The claim of one round; no ``storageClassName`` when ``storage_class`` is empty, so the cluster's default
    class provisions it (an explicit ``""`` would ask for a pre-provisioned volume without a class instead)."""
    spec: dict[str, Any] = {"accessModes": [access_mode], "resources": {"requests": {"storage": str(size)}}}
    if storage_class:
        spec["storageClassName"] = storage_class
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": name, "namespace": namespace, "labels": _labels(run_id)}, "spec": spec}


def writer_pod_manifest(name: str, run_id: str, image: str, claim: str, namespace: str = "default",
                        write_mib: int = 16, mount_path: str = "/mnt/clustereval-pvc",
                        tolerate: tuple[str, ...] = ()) -> dict[str, Any]:
    """A pod that writes ``write_mib`` MiB of random data to the claim, fsyncs it (``conv=fsync``, then ``sync``)
    and prints the file's size after a marker; it ends by itself (``restartPolicy: Never``). The command is
    POSIX sh with ``dd`` and ``wc``, which busybox and GNU coreutils both have. ``tolerate``: NoSchedule taint keys
    it tolerates (a CPU-only pod on GPU nodes tainted ``nvidia.com/gpu``, as the sandbox pods)."""
    path = f"{mount_path.rstrip('/')}/{FILE}"
    script = (f"set -e; dd if=/dev/urandom of={path} bs={MIB} count={int(write_mib)} conv=fsync; sync; "
              f"echo {MARKER} $(wc -c < {path})")
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "labels": _labels(run_id)},
            "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 5,
                     "containers": [{"name": "writer", "image": image, "command": ["/bin/sh", "-c", script],
                                     "volumeMounts": [{"name": "data", "mountPath": mount_path}]}],
                     "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}],
                     **({"tolerations": [{"key": key, "operator": "Exists", "effect": "NoSchedule"}
                                         for key in tolerate if key]} if any(tolerate) else {})}}


def written_bytes(logs: str | None) -> int | None:
    """The size the pod printed after its marker (the last such line); None when it never got there."""
    found = re.findall(rf"^{MARKER}\s+(\d+)\s*$", logs or "", re.M)
    return int(found[-1]) if found else None


def claim_message(events_doc: dict[str, Any], name: str, kind: str = "PersistentVolumeClaim") -> str | None:
    """The latest Warning event of the claim ``name`` (ProvisioningFailed, ...), else of anything else so named
    (the pod's FailedScheduling); with ``kind="Pod"`` the pod's first (FailedMount, FailedAttachVolume). None when
    there is none."""
    best: dict[str, tuple[str, str]] = {}
    for ev in (events_doc or {}).get("items") or []:
        obj = ev.get("involvedObject") or {}
        if ev.get("type") != "Warning" or obj.get("name") != name:
            continue
        which = "claim" if obj.get("kind") == kind else "other"
        when = str(ev.get("lastTimestamp") or ev.get("eventTime") or (ev.get("metadata") or {}).get(
            "creationTimestamp") or "")
        if which not in best or when >= best[which][0]:
            best[which] = (when, f"{ev.get('reason') or 'Warning'}: {str(ev.get('message') or '').strip()}")
    chosen = best.get("claim") or best.get("other")
    return chosen[1][:1000] if chosen else None


def _exit_code(pod: dict[str, Any]) -> dict[str, Any]:
    state = (((pod.get("status") or {}).get("containerStatuses") or [{}])[0].get("state") or {})
    return state.get("terminated") or {}


# ----------------------------------------------------------------------------------------- the kubectl flow

def _error(result: dict[str, Any], what: str) -> str:
    return (result["stderr"] or result["stdout"]).strip() or f"kubectl {what} failed"


def _cleanup(record: dict[str, Any], name: str, ns: list[str], kubectl: list[str], timeout_s: float,
             poll_s: float) -> None:
    """Delete the pod, then the claim, then wait for the volume to go; what is left past ``timeout_s`` is named."""
    t0 = time.monotonic()
    deadline = t0 + timeout_s
    wait = ["--wait=true", f"--timeout={max(1, int(timeout_s))}s"]  # 0 would mean kubectl's own default
    for kind in ("pod", "pvc"):
        done = kubectl_run(["delete", kind, name, *ns, *wait], kubectl, timeout=timeout_s + 30)
        if done["rc"] == 0 or "NotFound" in done["stderr"]:
            continue
        text = (done["stderr"] or done["stdout"]).strip()[:500]
        record["cleanup_s"] = round(time.monotonic() - t0, 3)
        record["cleanup_timed_out"] = "timed out" in text
        if kind == "pod" and record["cleanup_timed_out"]:
            record["cleanup_error"] = f"pod {name} still Terminating after {int(timeout_s)} s: {text}"
        elif kind == "pvc" and record["cleanup_timed_out"]:
            claim = json_of(kubectl_run(["get", "pvc", name, *ns, "-o", "json"], kubectl)) or {}
            finalizers = ", ".join((claim.get("metadata") or {}).get("finalizers") or []) or "none"
            record["cleanup_error"] = (f"claim {name} still Terminating after {int(timeout_s)} s (finalizers: "
                                       f"{finalizers}; volume {record.get('volume') or 'none'}): {text}")
        else:
            what = "pod" if kind == "pod" else "claim"
            record["cleanup_error"] = f"{what} {name} not deleted: {text}"
        return
    volume = record.get("volume")
    while volume:
        got = kubectl_run(["get", "pv", volume, "-o", "json"], kubectl)
        if got["rc"] != 0 and "NotFound" in got["stderr"]:
            break
        if time.monotonic() >= deadline:
            pv = json_of(got) or {}
            phase = (pv.get("status") or {}).get("phase") or "unknown phase"
            policy = (pv.get("spec") or {}).get("persistentVolumeReclaimPolicy") or "unknown"
            record["cleanup_timed_out"] = True
            record["cleanup_error"] = (f"persistent volume {volume} still there {int(timeout_s)} s after the delete "
                                       f"(phase {phase}, reclaim policy {policy})"
                                       + (f": {got['stderr'].strip()[:300]}" if got["rc"] != 0 else ""))
            break
        time.sleep(poll_s)
    record["cleanup_s"] = round(time.monotonic() - t0, 3)


def one_round(index: int, claim: dict[str, Any], pod: dict[str, Any], kubectl: list[str], write_mib: int,
              bind_timeout_s: float, pod_timeout_s: float, cleanup_timeout_s: float,
              poll_s: float) -> tuple[dict[str, Any], str | None]:
    """Create the claim and its writer pod, wait for the write, read its logs, delete both and wait for the volume
    to go; the round's record and an API error if any."""
    name, namespace = claim["metadata"]["name"], claim["metadata"]["namespace"]
    ns = ["-n", namespace]
    record: dict[str, Any] = {"round": index, "warmup": index == 0, "claim": name, "pod": pod["metadata"]["name"],
                              "bound_s": None, "volume": None, "claim_phase": None, "claim_message": None,
                              "phase": None, "exit_code": None, "written_s": None, "written_bytes": None,
                              "write_ok": False, "cleanup_s": None, "cleanup_timed_out": False,
                              "cleanup_error": None}
    t0 = time.monotonic()
    for manifest in (claim, pod):
        created = kubectl_run(["create", *ns, "-f", "-"], kubectl, stdin=json.dumps(manifest))
        if created["rc"] != 0:
            return record, _error(created, "create")
    doc: dict[str, Any] = {}
    bound_at: float | None = None
    while True:
        got = json_of(kubectl_run(["get", "pvc", name, *ns, "-o", "json"], kubectl))
        if got is not None:
            record["claim_phase"] = (got.get("status") or {}).get("phase")
            record["volume"] = (got.get("spec") or {}).get("volumeName") or record["volume"]
            if record["claim_phase"] == "Bound" and bound_at is None:
                bound_at = time.monotonic()
                record["bound_s"] = round(bound_at - t0, 3)
        got = json_of(kubectl_run(["get", "pod", record["pod"], *ns, "-o", "json"], kubectl))
        if got is not None:
            doc = got
            if (got.get("status") or {}).get("phase") in TERMINAL:
                if got["status"]["phase"] == "Succeeded":
                    record["written_s"] = round(time.monotonic() - t0, 3)
                break
        now = time.monotonic()
        if bound_at is None and now - t0 >= bind_timeout_s:
            record["bind_timed_out"] = True
            break
        if bound_at is not None and now - bound_at >= pod_timeout_s:
            record["pod_timed_out"] = True
            break
        time.sleep(poll_s)
    if doc:
        record.update({k: v for k, v in pod_timing(doc).items() if k not in ("pod", "created")})
        terminated = _exit_code(doc)
        record["exit_code"] = terminated.get("exitCode")
        if record["phase"] == "Failed" and not record.get("reason"):
            record.update(reason=terminated.get("reason") or "Failed", message=terminated.get("message"))
    if bound_at is None or record["phase"] != "Succeeded":
        # the claim's events (ProvisioningFailed) and the pod's (FailedMount, FailedAttachVolume): same name
        events = json_of(kubectl_run(["get", "events", *ns, "--field-selector", f"involvedObject.name={name}",
                                      "-o", "json"], kubectl)) or {}
        if bound_at is None:
            record["claim_message"] = claim_message(events, name)
        elif not record.get("message"):
            record["message"] = claim_message(events, name, kind="Pod")
    if record["phase"] in TERMINAL:
        record["written_bytes"] = written_bytes(kubectl_run(["logs", record["pod"], *ns], kubectl)["stdout"])
    record["write_ok"] = record["phase"] == "Succeeded" and record["written_bytes"] == int(write_mib) * MIB
    _cleanup(record, name, ns, kubectl, cleanup_timeout_s, poll_s)
    return record, None


def run(run_id: str, image: str, rounds: int = 6, namespace: str = "default", storage_class: str = "",
        size: str = "1Gi", access_mode: str = "ReadWriteOnce", write_mib: int = 16,
        mount_path: str = "/mnt/clustereval-pvc", kubectl: list[str] | None = None, bind_timeout_s: float = 300,
        pod_timeout_s: float = 300, cleanup_timeout_s: float = 300, poll_s: float = 1,
        tolerate: tuple[str, ...] = ()) -> dict[str, Any]:
    kubectl = kubectl or ["kubectl"]
    report: dict[str, Any] = {"run": run_id, "mode": "pvc", "namespace": namespace, "storage_class": storage_class,
                              "size": size, "access_mode": access_mode, "write_mib": write_mib,
                              "mount_path": mount_path, "tolerate": list(tolerate), "bind_timeout_s": bind_timeout_s,
                              "pod_timeout_s": pod_timeout_s, "cleanup_timeout_s": cleanup_timeout_s,
                              "rounds_planned": rounds, "api_error": None, "interrupted": False, "rounds": []}

    restore_signals = interrupt_on_signals()
    try:
        for index in range(rounds):
            name = f"{run_id}-{index}"
            claim = claim_manifest(name, run_id, namespace, storage_class, size, access_mode)
            pod = writer_pod_manifest(name, run_id, image, name, namespace, write_mib, mount_path, tolerate)
            record, error = one_round(index, claim, pod, kubectl, write_mib, bind_timeout_s, pod_timeout_s,
                                      cleanup_timeout_s, poll_s)
            report["rounds"].append(record)
            if error:
                report["api_error"] = error
                break
            if record["cleanup_timed_out"] or record["cleanup_error"]:
                break  # a volume that is not cleaned up: more rounds would only pile up volumes
    except Interrupted as exc:
        report["interrupted"] = str(exc)
    finally:
        restore_signals()
        selector = ["-n", namespace, "-l", f"{RUN_LABEL}={run_id}", "--ignore-not-found", "--wait=false"]
        report["cleanup"] = {"pods": kubectl_run(["delete", "pods", *selector], kubectl),
                             "claims": kubectl_run(["delete", "pvc", *selector], kubectl)}
    return report


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m clustereval.k8s_pvc", description=__doc__.split("\n")[0])
    ap.add_argument("--run", required=True, help="run id: claim and pod name prefix and label value")
    ap.add_argument("--image", required=True)
    ap.add_argument("--rounds", type=int, default=6, help="rounds, the first of them a warm-up")
    ap.add_argument("--namespace", default="default")
    ap.add_argument("--storage-class", default="", help='the claims\' storage class ("" = the cluster\'s default)')
    ap.add_argument("--size", default="1Gi")
    ap.add_argument("--access-mode", default="ReadWriteOnce")
    ap.add_argument("--write-mib", type=int, default=16)
    ap.add_argument("--mount-path", default="/mnt/clustereval-pvc")
    ap.add_argument("--bind-timeout", type=float, default=300)
    ap.add_argument("--pod-timeout", type=float, default=300)
    ap.add_argument("--cleanup-timeout", type=float, default=300)
    ap.add_argument("--poll", type=float, default=1)
    ap.add_argument("--tolerate", default="", help="comma-separated taint keys the writer pods tolerate")
    add_kubectl_options(ap)
    args = ap.parse_args(argv)
    kubectl = kubectl_of(args)
    report = run(args.run, args.image, args.rounds, args.namespace, args.storage_class, args.size, args.access_mode,
                 args.write_mib, args.mount_path, kubectl, args.bind_timeout, args.pod_timeout,
                 args.cleanup_timeout, args.poll, keys(args.tolerate))
    report["kubectl"] = " ".join(shlex.quote(k) for k in kubectl)
    sys.stdout.write(json.dumps(report, indent=1) + "\n")
    return 3 if report["api_error"] else 0


if __name__ == "__main__":
    sys.exit(main())
