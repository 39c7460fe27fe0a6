"""orchestration.k8s.pvc_lifecycle on PVC reports, every status; the PVC runner's builders and readers
(clustereval.k8s_pvc), and its kubectl flow against a scripted kubectl (JSON shaped as kubectl 1.31 prints it)."""

from __future__ import annotations

import json
import os
import signal

import pytest

from clustereval import checks, k8s_pvc
from clustereval.checks import Context

MIB16 = 16 * 1048576


# ------------------------------------------------------------------ builders and readers

def test_claim_omits_the_class_unless_named():
    c = k8s_pvc.claim_manifest("r-0", "r", size="2Gi")
    assert c["kind"] == "PersistentVolumeClaim" and "storageClassName" not in c["spec"]
    assert c["spec"]["resources"]["requests"]["storage"] == "2Gi" and c["spec"]["accessModes"] == ["ReadWriteOnce"]
    assert c["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "clustereval", "clustereval/pvc": "r"}
    assert k8s_pvc.claim_manifest("r-0", "r", storage_class="fast")["spec"]["storageClassName"] == "fast"


def test_writer_pod_mounts_the_claim_and_fsyncs():
    p = k8s_pvc.writer_pod_manifest("r-0", "r", "busybox:1.36", "r-0", write_mib=8, mount_path="/data/")
    spec = p["spec"]
    assert spec["restartPolicy"] == "Never" and len(spec["containers"]) == 1
    assert spec["volumes"] == [{"name": "data", "persistentVolumeClaim": {"claimName": "r-0"}}]
    container = spec["containers"][0]
    assert container["volumeMounts"] == [{"name": "data", "mountPath": "/data/"}]
    sh, flag, script = container["command"]
    assert (sh, flag) == ("/bin/sh", "-c")
    assert script == ("set -e; dd if=/dev/urandom of=/data/clustereval-pvc.bin bs=1048576 count=8 conv=fsync; "
                      "sync; echo clustereval-pvc-ok $(wc -c < /data/clustereval-pvc.bin)")
    assert p["metadata"]["labels"]["clustereval/pvc"] == "r"


def test_written_bytes_from_the_marker_line():
    busybox = "16+0 records in\n16+0 records out\n16777216 bytes (16.0MB) copied\nclustereval-pvc-ok 16777216\n"
    assert k8s_pvc.written_bytes(busybox) == MIB16
    assert k8s_pvc.written_bytes("clustereval-pvc-ok    4096") == 4096  # BSD-style wc pads
    assert k8s_pvc.written_bytes("dd: error writing '/mnt/x': No space left on device\n") is None
    assert k8s_pvc.written_bytes("") is None and k8s_pvc.written_bytes(None) is None


def test_claim_message_prefers_the_claims_latest_warning():
    events = {"items": [
        {"involvedObject": {"kind": "PersistentVolumeClaim", "name": "r-0"}, "type": "Warning",
         "reason": "ProvisioningFailed", "message": "old", "lastTimestamp": "2026-12-01T21:05:10Z"},
        {"involvedObject": {"kind": "PersistentVolumeClaim", "name": "r-0"}, "type": "Warning",
         "reason": "ProvisioningFailed", "message": "rpc error: quota exceeded",
         "lastTimestamp": "2026-12-01T21:05:20Z"},
        {"involvedObject": {"kind": "Pod", "name": "r-0"}, "type": "Warning", "reason": "FailedScheduling",
         "message": "pod has unbound immediate PersistentVolumeClaims", "lastTimestamp": "2026-12-01T21:05:30Z"},
        {"involvedObject": {"kind": "PersistentVolumeClaim", "name": "r-0"}, "type": "Normal",
         "reason": "ExternalProvisioning", "message": "waiting", "lastTimestamp": "2026-12-01T21:05:40Z"}]}
    assert k8s_pvc.claim_message(events, "r-0") == "ProvisioningFailed: rpc error: quota exceeded"
    assert k8s_pvc.claim_message({"items": events["items"][2:]}, "r-0").startswith("FailedScheduling")
    assert k8s_pvc.claim_message({"items": []}, "r-0") is None


# ------------------------------------------------------------------ the kubectl flow, scripted

class FakeKubectl:
    """Claims bind at once to ``pvc-<name>``, pods succeed and print the marker; ``leak`` keeps every PV Released
    (reclaim policy Retain), ``unbound`` never binds a claim."""

    def __init__(self, leak=False, unbound=False, written=MIB16, mount_fails=False):
        self.leak, self.unbound, self.written, self.mount_fails = leak, unbound, written, mount_fails
        self.objects: dict[tuple[str, str], dict] = {}
        self.pvs: set[str] = set()
        self.calls: list[list[str]] = []

    def __call__(self, args, kubectl, stdin=None, timeout=60):
        self.calls.append(list(args))
        ok = {"rc": 0, "stdout": "", "stderr": ""}
        verb = args[0]
        if verb == "create":
            doc = json.loads(stdin)
            kind = "pvc" if doc["kind"] == "PersistentVolumeClaim" else "pod"
            self.objects[(kind, doc["metadata"]["name"])] = doc
            return ok
        if verb == "get" and args[1] in ("pvc", "pod"):
            doc = self.objects.get((args[1], args[2]))
            if doc is None:
                return {"rc": 1, "stdout": "", "stderr": f'Error from server (NotFound): "{args[2]}" not found'}
            if args[1] == "pvc":
                if not self.unbound:
                    doc["spec"]["volumeName"] = f"pvc-{args[2]}"
                    self.pvs.add(f"pvc-{args[2]}")
                doc["status"] = {"phase": "Pending" if self.unbound else "Bound"}
            else:
                doc["metadata"]["creationTimestamp"] = "2026-12-01T21:05:10Z"
                doc["spec"]["nodeName"] = "node1"
                stuck = {"phase": "Pending", "containerStatuses": [{"state": {"waiting": {
                    "reason": "ContainerCreating"}}}]}
                doc["status"] = {"phase": "Pending"} if self.unbound else stuck if self.mount_fails else {
                    "phase": "Succeeded",
                    "conditions": [{"type": "PodScheduled", "status": "True",
                                    "lastTransitionTime": "2026-12-01T21:05:11Z"}],
                    "containerStatuses": [{"state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}]}
            return {**ok, "stdout": json.dumps(doc)}
        if verb == "get" and args[1] == "pv":
            if args[2] in self.pvs:
                pv = {"spec": {"persistentVolumeReclaimPolicy": "Retain"}, "status": {"phase": "Released"}}
                return {**ok, "stdout": json.dumps(pv)}
            return {"rc": 1, "stdout": "", "stderr": f'Error from server (NotFound): persistentvolumes "{args[2]}" '
                                                     'not found'}
        if verb == "get" and args[1] == "events":
            name = args[args.index("--field-selector") + 1].split("=", 1)[1]
            if self.mount_fails:
                return {**ok, "stdout": json.dumps({"items": [
                    {"involvedObject": {"kind": "Pod", "name": name}, "type": "Warning", "reason": "FailedMount",
                     "message": "MountVolume.MountDevice failed for volume \"pvc-r-0\""}]})}
            return {**ok, "stdout": json.dumps({"items": [
                {"involvedObject": {"kind": "PersistentVolumeClaim", "name": name},
                 "type": "Warning", "reason": "ProvisioningFailed",
                 "message": 'storageclass.storage.k8s.io "fast" not found'}]})}
        if verb == "logs":
            return {**ok, "stdout": f"clustereval-pvc-ok {self.written}\n"}
        if verb == "delete" and "-l" not in args:
            gone = self.objects.pop((args[1], args[2]), None)
            if args[1] == "pvc" and gone is not None and not self.leak:
                self.pvs.discard((gone.get("spec") or {}).get("volumeName"))
            return ok
        if verb == "delete":
            return ok
        raise AssertionError(f"unexpected kubectl call {args}")


def run_fake(monkeypatch, fake, rounds=3, cleanup=0.05):
    monkeypatch.setattr(k8s_pvc, "kubectl_run", fake)
    return k8s_pvc.run("r", "busybox:1.36", rounds=rounds, bind_timeout_s=0.05, pod_timeout_s=0.05,
                       cleanup_timeout_s=cleanup, poll_s=0.01)


def test_flow_every_round_binds_writes_and_cleans_up(monkeypatch):
    fake = FakeKubectl()
    doc = run_fake(monkeypatch, fake)
    assert doc["mode"] == "pvc" and doc["api_error"] is None and len(doc["rounds"]) == 3
    assert [r["warmup"] for r in doc["rounds"]] == [True, False, False]
    r = doc["rounds"][1]
    assert r["volume"] == "pvc-r-1" and r["bound_s"] is not None and r["written_s"] is not None
    assert r["write_ok"] and r["written_bytes"] == MIB16 and r["exit_code"] == 0 and r["schedule_s"] == 1.0
    assert r["cleanup_s"] is not None and not r["cleanup_timed_out"] and r["cleanup_error"] is None
    deletes = [c for c in fake.calls if c[0] == "delete" and "-l" not in c]
    assert deletes[0][:3] == ["delete", "pod", "r-0"] and deletes[1][:3] == ["delete", "pvc", "r-0"]
    assert "--wait=true" in deletes[0] and "--timeout=1s" in deletes[0]
    assert [c[:2] for c in fake.calls[-2:]] == [["delete", "pods"], ["delete", "pvc"]]
    assert "clustereval/pvc=r" in fake.calls[-1] and set(doc["cleanup"]) == {"pods", "claims"}


def test_flow_a_leaked_volume_stops_the_run(monkeypatch):
    doc = run_fake(monkeypatch, FakeKubectl(leak=True))
    assert len(doc["rounds"]) == 1 and doc["rounds"][0]["cleanup_timed_out"]
    assert "pvc-r-0" in doc["rounds"][0]["cleanup_error"] and "Retain" in doc["rounds"][0]["cleanup_error"]


def test_flow_an_unbound_claim_keeps_its_warning(monkeypatch):
    fake = FakeKubectl(unbound=True)
    doc = run_fake(monkeypatch, fake, rounds=1)
    r = doc["rounds"][0]
    assert r["bound_s"] is None and r["bind_timed_out"] and r["volume"] is None and not r["write_ok"]
    assert r["claim_message"].startswith("ProvisioningFailed") and not any(c[:2] == ["get", "pv"]
                                                                           for c in fake.calls)


def test_flow_a_mount_that_fails_names_the_pods_warning(monkeypatch):
    doc = run_fake(monkeypatch, FakeKubectl(mount_fails=True), rounds=1)
    r = doc["rounds"][0]
    assert r["bound_s"] is not None and r["pod_timed_out"] and r["phase"] == "Pending" and not r["write_ok"]
    assert r["reason"] == "ContainerCreating" and r["message"].startswith("FailedMount: MountVolume")
    assert r["written_bytes"] is None and r["cleanup_error"] is None
    result = judge(report(doc["rounds"] + [good_round(1)]))
    assert result["status"] == "fail" and "FailedMount" in result["summary"], result["summary"]


def test_flow_a_refused_create_is_an_api_error(monkeypatch):
    def refuse(args, kubectl, stdin=None, timeout=60):
        if args[0] == "create":
            return {"rc": 1, "stdout": "", "stderr": 'Error from server (Forbidden): persistentvolumeclaims is '
                                                     'forbidden'}
        return {"rc": 0, "stdout": "", "stderr": ""}
    monkeypatch.setattr(k8s_pvc, "kubectl_run", refuse)
    doc = k8s_pvc.run("r", "busybox:1.36", rounds=3, poll_s=0)
    assert "Forbidden" in doc["api_error"] and len(doc["rounds"]) == 1


def test_flow_a_sigterm_mid_round_is_recorded_cleans_up_by_label_and_restores_the_handlers(monkeypatch):
    fake = FakeKubectl()

    def term_on_first_poll(args, kubectl, stdin=None, timeout=60):
        if args[:2] == ["get", "pvc"] and not any(c[:2] == ["get", "pvc"] for c in fake.calls):
            fake.calls.append(args)
            os.kill(os.getpid(), signal.SIGTERM)  # a cancelled job, mid-round
        return fake(args, kubectl, stdin, timeout)

    before = signal.getsignal(signal.SIGTERM)
    monkeypatch.setattr(k8s_pvc, "kubectl_run", term_on_first_poll)
    doc = k8s_pvc.run("r", "busybox:1.36", rounds=3, bind_timeout_s=0.05, pod_timeout_s=0.05,
                      cleanup_timeout_s=0.05, poll_s=0.01)
    assert doc["interrupted"] == "SIGTERM" and len(doc["rounds"]) == 0
    assert [c[:2] for c in fake.calls[-2:]] == [["delete", "pods"], ["delete", "pvc"]]
    assert signal.getsignal(signal.SIGTERM) is before


# ------------------------------------------------------------------ the check on canned reports

def good_round(i, written=4.0, cleanup=6.0, **over):
    r = {"round": i, "warmup": i == 0, "claim": f"r-{i}", "pod": f"r-{i}", "bound_s": 1.5, "volume": f"pvc-{i}",
         "claim_phase": "Bound", "claim_message": None, "node": "node1", "schedule_s": 1.0, "start_s": None,
         "reason": None, "message": None, "phase": "Succeeded", "exit_code": 0, "written_s": written,
         "written_bytes": MIB16, "write_ok": True, "cleanup_s": cleanup, "cleanup_timed_out": False,
         "cleanup_error": None}
    r.update(over)
    return r


def report(rounds, **over):
    doc = {"run": "r", "mode": "pvc", "namespace": "default", "storage_class": "", "size": "1Gi",
           "access_mode": "ReadWriteOnce", "write_mib": 16, "bind_timeout_s": 300, "rounds_planned": len(rounds),
           "api_error": None, "interrupted": False, "rounds": rounds}
    doc.update(over)
    return doc


def judge(doc=None, harness="k8s", probe=None, overrides=None):
    probe = probe or {"rc": 0, "stdout": json.dumps(doc), "stderr": ""}
    ctx = Context(subject="_cluster", probes={"orchestration_k8s_pvc": probe},
                  options={"harness": harness, "baseline_overrides": overrides or {}})
    return checks.evaluate("orchestration.k8s.pvc_lifecycle", ctx, "run")


def test_pass_names_both_figures_and_the_warm_up():
    result = judge(report([good_round(0, written=9.0), good_round(1, 3.0), good_round(2, 5.0, cleanup=8.0)]))
    assert result["status"] == "pass" and result["value"] == 4.0
    assert "p50 4.0 s" in result["summary"] and "p50 7.0 s" in result["summary"]
    assert "warm-up round excluded: 9.0 s" in result["summary"]


def test_the_warm_up_rounds_slow_time_does_not_change_the_grade():
    result = judge(report([good_round(0, written=500.0, cleanup=900.0), good_round(1), good_round(2)]))
    assert result["status"] == "pass" and "warm-up round excluded: 500.0 s" in result["summary"]


def test_slow_write_or_cleanup_warns_and_fails():
    slow = judge(report([good_round(0)] + [good_round(i, written=45.0) for i in (1, 2, 3)]))
    assert slow["status"] == "warn" and "write expected within 30" in slow["summary"]
    very = judge(report([good_round(0)] + [good_round(i, written=200.0) for i in (1, 2, 3)]))
    assert very["status"] == "fail"
    cleanup = judge(report([good_round(0)] + [good_round(i, cleanup=90.0) for i in (1, 2)]))
    assert cleanup["status"] == "warn" and "cleanup expected within 60" in cleanup["summary"]
    # the worse of the two grades
    both = judge(report([good_round(0)] + [good_round(i, written=45.0, cleanup=400.0) for i in (1, 2)]))
    assert both["status"] == "fail"
    tight = judge(report([good_round(0), good_round(1), good_round(2)]),
                  overrides={"orchestration.k8s.pvc_lifecycle": {"warn": 2, "fail": 100}})
    assert tight["status"] == "warn" and "inventory override" in tight["expected"]["source"]


def test_only_the_warm_up_round_is_a_warn():
    result = judge(report([good_round(0, written=7.0)]))
    assert result["status"] == "warn" and "no measured round" in result["summary"] and "7.0 s" in result["summary"]
    cut = judge(report([good_round(0)], rounds_planned=6, interrupted="SIGTERM"))
    assert cut["status"] == "warn" and "interrupted (SIGTERM) after 1 of 6 rounds" in cut["summary"]


def test_cut_short_is_at_best_a_warn():
    doc = report([good_round(0), good_round(1), good_round(2)], rounds_planned=6,
                 api_error="Error from server (InternalError): etcdserver: request timed out")
    result = judge(doc)
    assert result["status"] == "warn" and "stopped after 3 of 6 rounds" in result["summary"]


@pytest.mark.parametrize("bad, words", [
    (good_round(0, bound_s=None, volume=None, claim_phase="Pending", phase="Pending", write_ok=False,
                written_s=None, written_bytes=None, exit_code=None, cleanup_s=0.5,
                claim_message='ProvisioningFailed: storageclass.storage.k8s.io "fast" not found'),
     ["warm-up round 0", "not Bound", "ProvisioningFailed"]),
    (good_round(2, phase="Failed", exit_code=1, reason="Error", write_ok=False, written_s=None, written_bytes=None),
     ["round 2", "phase Failed", "exit code 1"]),
    (good_round(1, written_bytes=4096, write_ok=False), ["round 1", "wrote 4096 bytes of 16777216"]),
    (good_round(1, cleanup_s=300.2, cleanup_timed_out=True,
                cleanup_error="persistent volume pvc-1 still there 300 s after the delete (phase Released, "
                              "reclaim policy Retain)"),
     ["round 1", "leaked volume", "pvc-1", "Released"]),
])
def test_fail_names_the_first_failing_round(bad, words):
    rounds = [good_round(i) for i in range(3)]
    rounds[bad["round"]] = bad
    result = judge(report(rounds))
    assert result["status"] == "fail", result["summary"]
    for word in words:
        assert word in result["summary"]


def test_skip_and_error():
    assert judge(report([good_round(0), good_round(1)]), harness="slurm")["status"] == "skip"
    assert judge(probe={"rc": 127, "stdout": "", "stderr": ""})["status"] == "skip"
    assert judge(probe={"rc": 1, "stdout": '{"run": "r", "rou', "stderr": ""})["status"] == "error"
    unreachable = report([], api_error="The connection to the server localhost:8080 was refused")
    assert judge(unreachable)["status"] == "error"
    assert judge(report([], interrupted="SIGINT"))["status"] == "error"
