"""orchestration.k8s.* on churn reports, every status; and the churn runner's readers (clustereval.k8s_churn) on
pod/node JSON shaped as kubectl 1.31 prints it."""

from __future__ import annotations

import json

from clustereval import checks, k8s_churn
from clustereval.checks import Context


def pod(name="churn-0", node="node1", created="2026-12-01T21:05:10Z", scheduled="2026-12-01T21:05:11Z",
        ready="2026-12-01T21:05:14Z", gpus=1, phase="Running"):
    conditions = [{"lastProbeTime": None, "lastTransitionTime": scheduled, "status": "True", "type": "PodScheduled"}]
    if ready:
        conditions.append({"lastProbeTime": None, "lastTransitionTime": ready, "status": "True", "type": "Ready"})
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"creationTimestamp": created, "name": name, "namespace": "default"},
            "spec": {"nodeName": node, "containers": [{"name": "churn", "resources": {
                "limits": {"nvidia.com/gpu": str(gpus)}, "requests": {"nvidia.com/gpu": str(gpus)}}}]},
            "status": {"conditions": conditions, "phase": phase}}


def node(name="node1", gpus="8"):
    return {"metadata": {"name": name}, "status": {"allocatable": {"cpu": "64", "nvidia.com/gpu": gpus}}}


def test_timing_from_the_pods_conditions():
    t = k8s_churn.pod_timing(pod())
    assert t["schedule_s"] == 1.0 and t["start_s"] == 4.0 and t["node"] == "node1"
    assert k8s_churn.pod_timing(pod(ready=None))["start_s"] is None


def test_unschedulable_reason():
    p = {"metadata": {"name": "x", "creationTimestamp": "2026-12-01T21:05:10Z"}, "spec": {},
         "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False",
                                                         "reason": "Unschedulable", "message": "0/3 nodes"}]}}
    t = k8s_churn.pod_timing(p)
    assert t["reason"] == "Unschedulable" and t["schedule_s"] is None


def test_allocation_counts_live_pods_on_the_node():
    nodes = {"items": [node(gpus="2")]}
    pods = {"items": [pod(gpus=1), pod("b", gpus=1), pod("c", gpus=4, phase="Succeeded"), pod("d", node="node2")]}
    assert k8s_churn.allocation(nodes, pods, "node1") == {"allocatable": 2, "requested": 2, "allocation_ok": True}
    pods["items"].append(pod("e"))
    assert k8s_churn.allocation(nodes, pods, "node1")["allocation_ok"] is False
    assert k8s_churn.allocation(nodes, pods, "gone")["allocation_ok"] is None


def test_manifest_asks_for_gpus():
    m = k8s_churn.gpu_pod_manifest("r-0", "r", "busybox:1.36", gpus=2)
    assert m["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": 2}
    assert m["metadata"]["labels"][k8s_churn.RUN_LABEL] == "r"


def good_round(i, start=4.0, **over):
    r = {"round": i, "pod": f"r-{i}", "node": "node1", "schedule_s": 1.0, "start_s": start, "reason": None,
         "allocatable": 8, "requested": 1, "allocation_ok": True, "delete_s": 1.2, "delete_hung": False,
         "delete_error": None}
    r.update(over)
    return r


def report(rounds, **over):
    doc = {"run": "r", "namespace": "default", "gpu_resource": "nvidia.com/gpu", "gpus": 1,
           "rounds_planned": len(rounds), "api_error": None, "interrupted": False, "rounds": rounds}
    doc.update(over)
    return doc


def judge(check_id, doc=None, harness="k8s", probe=None):
    probe = probe or {"rc": 0, "stdout": json.dumps(doc), "stderr": ""}
    ctx = Context(subject="_cluster", probes={"orchestration_k8s_churn": probe}, options={"harness": harness})
    return checks.evaluate(check_id, ctx, "run")


def test_churn_pass_fail_warn():
    assert judge("orchestration.k8s.gpu_pod_churn", report([good_round(i) for i in range(3)]))["status"] == "pass"
    over = report([good_round(0), good_round(1, requested=9, allocation_ok=False)])
    result = judge("orchestration.k8s.gpu_pod_churn", over)
    assert result["status"] == "fail" and "9 requested of 8" in result["summary"]
    stuck = report([good_round(0, start_s=None, reason="Unschedulable", message="0/3 nodes are available")])
    assert judge("orchestration.k8s.gpu_pod_churn", stuck)["status"] == "fail"
    short = report([good_round(0)], rounds_planned=5, interrupted="SIGINT")
    result = judge("orchestration.k8s.gpu_pod_churn", short)
    assert result["status"] == "warn" and "interrupted" in result["summary"]


def test_skip_and_error():
    assert judge("orchestration.k8s.gpu_pod_churn", report([]), harness="slurm")["status"] == "skip"
    assert judge("orchestration.k8s.delete_hang", probe={"rc": 127, "stdout": "", "stderr": ""})["status"] == "skip"
    bad = judge("orchestration.k8s.gpu_pod_churn", probe={"rc": 1, "stdout": '{"run": "r", "rou', "stderr": ""})
    assert bad["status"] == "error"
    unreachable = report([], api_error="The connection to the server localhost:8080 was refused")
    assert judge("orchestration.k8s.delete_hang", unreachable)["status"] == "error"


def test_start_latency_graded_against_the_baseline():
    assert judge("orchestration.k8s.pod_start_latency", report([good_round(i) for i in range(3)]))["status"] == "pass"
    slow = report([good_round(i, start=20.0) for i in range(3)])
    assert judge("orchestration.k8s.pod_start_latency", slow)["status"] == "warn"
    very = report([good_round(i, start=90.0) for i in range(3)])
    assert judge("orchestration.k8s.pod_start_latency", very)["status"] == "fail"
    none = report([good_round(0, start_s=None, start=None)])
    assert judge("orchestration.k8s.pod_start_latency", none)["status"] == "skip"


def test_delete_hang_is_a_fail():
    assert judge("orchestration.k8s.delete_hang", report([good_round(0), good_round(1)]))["status"] == "pass"
    hung = report([good_round(0), good_round(1, delete_s=30.1, delete_hung=True,
                                              delete_error="error: timed out waiting for the condition on pods/r-1")],
                  rounds_planned=5)
    result = judge("orchestration.k8s.delete_hang", hung)
    assert result["status"] == "fail" and "r-1" in result["summary"]
    failed = report([good_round(0, delete_error="Error from server (Forbidden): pods is forbidden")])
    assert judge("orchestration.k8s.delete_hang", failed)["status"] == "warn"


# ------------------------------------------------------------------ sandbox batches

FIT = ('0/2 nodes are available: 2 Insufficient cpu. preemption: 0/2 nodes are available: 2 No preemption '
       'victims found for incoming pod.')


def pending_pod(name):
    return {"metadata": {"name": name, "creationTimestamp": "2026-12-01T21:05:10Z"}, "spec": {},
            "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False",
                                                            "reason": "Unschedulable", "message": FIT}]}}


def event(name, message, when="2026-12-01T21:05:11Z"):
    return {"involvedObject": {"kind": "Pod", "name": name}, "reason": "FailedScheduling", "type": "Warning",
            "message": message, "lastTimestamp": when}


def test_manifest_is_cpu_only_and_labelled():
    m = k8s_churn.sandbox_pod_manifest("s-b2-0", "s", 2, "busybox:1.36", cpu="40")
    res = m["spec"]["containers"][0]["resources"]
    assert res == {"requests": {"cpu": "40", "memory": "64Mi"}} and "nvidia.com/gpu" not in json.dumps(m)
    assert m["metadata"]["labels"][k8s_churn.SANDBOX_LABEL] == "s"


def test_batch_summary_groups_the_schedulers_reasons():
    pods = {"items": [pod("a", ready="2026-12-01T21:05:12Z"), pod("b", ready="2026-12-01T21:05:16Z"),
                      pending_pod("c"), pending_pod("d"), pending_pod("e")]}
    events = {"items": [event("c", "0/2 nodes are available: 2 node(s) had untolerated taint {x: y}.",
                              "2026-12-01T21:05:10Z"), event("c", FIT), event("d", FIT),
                        event("zz", "other pod, not ours")]}
    s = k8s_churn.batch_summary(5, pods, events)
    assert s["ready"] == 2 and s["pending"] == 3 and s["ready_p50_s"] == 4.0 and s["ready_max_s"] == 6.0
    assert s["pending_reasons"] == {FIT: 2, "no FailedScheduling event": 1}
    starting = pod("f", ready=None, phase="Pending")
    starting["status"]["containerStatuses"] = [{"state": {"waiting": {"reason": "ContainerCreating"}}}]
    s = k8s_churn.batch_summary(1, {"items": [starting]}, {"items": []})
    assert s["pending_reasons"] == {"scheduled on node1 but not Ready: ContainerCreating": 1}


def batch(size, ready=None, p50=2.0, mx=3.0, reasons=None, **over):
    ready = size if ready is None else ready
    b = {"batch": size, "created": size, "ready": ready, "pending": size - ready, "ready_p50_s": p50 if ready else None,
         "ready_max_s": mx if ready else None, "pending_reasons": reasons or {}, "delete_s": 1.0,
         "delete_error": None}
    b.update(over)
    return b


def sandbox(batches, planned=None, **over):
    doc = {"run": "s", "mode": "sandbox", "namespace": "default", "cpu": "40", "memory": "64Mi",
           "batches_planned": planned or [b["batch"] for b in batches], "ready_timeout_s": 8, "api_error": None,
           "interrupted": False, "batches": batches}
    doc.update(over)
    return doc


def judge_sandbox(doc=None, harness="k8s", probe=None):
    probe = probe or {"rc": 0, "stdout": json.dumps(doc), "stderr": ""}
    ctx = Context(subject="_cluster", probes={"orchestration_k8s_sandbox": probe}, options={"harness": harness})
    return checks.evaluate_many("orchestration.k8s.sandbox_batches", ctx, "run")


def test_sandbox_every_status():
    ok = judge_sandbox(sandbox([batch(2), batch(4)]))
    assert [r["status"] for r in ok] == ["pass", "pass"] and [r["params"]["batch"] for r in ok] == [2, 4]
    full = judge_sandbox(sandbox([batch(2), batch(16, ready=10, reasons={FIT: 6})]))
    assert [r["status"] for r in full] == ["pass", "warn"]
    assert "6 of 16" in full[1]["summary"] and "Insufficient cpu" in full[1]["summary"]
    taint = judge_sandbox(sandbox([batch(4, ready=0, reasons={"no FailedScheduling event": 4})]))
    assert taint[0]["status"] == "fail" and "4 of 4" in taint[0]["summary"]
    slow = judge_sandbox(sandbox([batch(2, mx=45.0), batch(4, mx=300.0)]))
    assert [r["status"] for r in slow] == ["warn", "fail"]
    stuck = judge_sandbox(sandbox([batch(2, delete_error="error: timed out waiting for the condition")]))
    assert stuck[0]["status"] == "warn" and "delete failed" in stuck[0]["summary"]
    assert judge_sandbox(sandbox([batch(2)]), harness="slurm")[0]["status"] == "skip"
    assert judge_sandbox(probe={"rc": 127, "stdout": "", "stderr": ""})[0]["status"] == "skip"
    bad = judge_sandbox(probe={"rc": 1, "stdout": '{"run": "s", "bat', "stderr": ""})
    assert bad[0]["status"] == "error"
    refused = sandbox([], api_error="The connection to the server localhost:8080 was refused")
    assert judge_sandbox(refused)[0]["status"] == "error"


def test_sandbox_cut_short_keeps_what_was_measured():
    doc = sandbox([batch(2), batch(4, ready=0)], planned=[2, 4, 16], api_error="Error from server (InternalError)")
    results = judge_sandbox(doc)
    assert [r["status"] for r in results] == ["pass", "error", "skip"]
    assert "not run" in results[2]["summary"] and results[2]["params"]["batch"] == 16
