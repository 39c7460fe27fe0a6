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
