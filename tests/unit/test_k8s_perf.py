"""network.k8s.pod_start on recorded kubectl JSON (pods and events as kubectl 1.31 prints them), through the pod
runner's readers (clustereval.k8s_pods.pod_reports), every status; and the Job manifest the runner applies."""

from __future__ import annotations

import json

from clustereval import checks, k8s_pods
from clustereval.checks import Context

UNSCHEDULABLE = ("0/3 nodes are available: 3 Insufficient rdma/rdma_shared_device_b. preemption: 0/3 nodes are "
                 "available: 3 No preemption victims found for incoming pod.")
NO_NAD = ('cannot find a network-attachment-definition (rdma-missing) in namespace (default): '
          'network-attachment-definitions.k8s.cni.cncf.io "rdma-missing" not found')
SANDBOX = ('Failed to create pod sandbox: rpc error: code = Unknown desc = failed to setup network for sandbox "b46b'
           '48ad": plugin type="multus-shim" name="multus-cni-network" failed (add): CmdAdd (shim): CNI request '
           "failed with status 400: '... ERRORED: error configuring pod [default/nccl-0-2mqs6] networking: Multus: "
           "[default/nccl-0-2mqs6/d2cb]: error loading k8s delegates k8s args: TryLoadPodDelegates: error in getting "
           "k8s network for pod: GetNetworkDelegates: failed getting the delegate: getKubernetesDelegate: "
           + NO_NAD + "\n'")


def pod(index, node=None, phase="Pending", exit_code=None, scheduled=None, waiting=None, uid=None):
    status = {"phase": phase, "qosClass": "BestEffort"}
    if scheduled:
        status["conditions"] = [{"lastProbeTime": None, "lastTransitionTime": "2026-12-01T21:05:18Z",
                                 "message": scheduled, "reason": "Unschedulable", "status": "False",
                                 "type": "PodScheduled"}]
    elif exit_code is not None:
        status["containerStatuses"] = [{"name": "benchmark", "ready": False, "restartCount": 0, "started": False,
                                        "state": {"terminated": {"exitCode": exit_code,
                                                                 "finishedAt": "2026-12-01T21:05:19Z",
                                                                 "reason": "Completed" if not exit_code else "Error",
                                                                 "startedAt": "2026-12-01T21:05:18Z"}}}]
    elif waiting:
        status["containerStatuses"] = [{"name": "benchmark", "ready": False, "restartCount": 0, "started": False,
                                        "state": {"waiting": {"reason": waiting}}}]
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"nccl-{index}-x{index}abc", "namespace": "default", "uid": uid or f"uid-{index}",
                         "labels": {"batch.kubernetes.io/job-completion-index": str(index), "job-name": "nccl"}},
            "spec": {"nodeName": node, "containers": [{"name": "benchmark"}]} if node else
            {"containers": [{"name": "benchmark"}]},
            "status": status}


def event(index, reason, message, component="kubelet"):
    return {"apiVersion": "v1", "count": 1, "kind": "Event", "type": "Warning", "reason": reason, "message": message,
            "involvedObject": {"apiVersion": "v1", "kind": "Pod", "name": f"nccl-{index}-x{index}abc",
                               "namespace": "default", "uid": f"uid-{index}"},
            "source": {"component": component}}


def listing(items):
    return {"apiVersion": "v1", "items": items, "kind": "List", "metadata": {"resourceVersion": ""}}


def report(pods, events=(), logs=None, **extra):
    out = {"job": "nccl", "namespace": "default", "expected_pods": 3, "api_error": None, "timed_out": False,
           "interrupted": False,
           "pods": k8s_pods.pod_reports(listing(pods), listing(list(events)), logs or {})}
    out.update(extra)
    return out


def judge(stdout, rc=0, harness="k8s", **probe):
    probes = {"k8s_perf_pods": {"cmd": "python -m clustereval.k8s_pods", "rc": rc, "stdout": stdout, "stderr": "",
                                **probe}}
    return checks.evaluate("network.k8s.pod_start", Context(subject="_cluster", probes=probes,
                                                         options={"harness": harness}), "run")


def test_pass_when_every_pod_started_on_its_node():
    pods = [pod(i, f"node{i + 1}", "Succeeded", 0) for i in range(3)]
    logs = {p["metadata"]["name"]: f"node=node{i + 1}\n# Avg bus bandwidth    : 14.1 \n" for i, p in enumerate(pods)}
    result = judge(json.dumps(report(pods, logs=logs)))
    assert result["status"] == "pass", result["summary"]
    assert result["value"] == 3 and "node1, node2, node3" in result["summary"]


def test_fail_names_the_unschedulable_pods_and_the_schedulers_reason():
    pods = [pod(i, scheduled=UNSCHEDULABLE) for i in range(3)]
    events = [event(i, "FailedScheduling", UNSCHEDULABLE, "default-scheduler") for i in range(3)]
    result = judge(json.dumps(report(pods, events)))
    assert result["status"] == "fail"
    assert "3 of 3 benchmark pods never started (Unschedulable)" in result["summary"]
    assert "nccl-0-x0abc" in result["summary"] and "Insufficient rdma/rdma_shared_device_b" in result["summary"]
    assert result["evidence"]["not_started"][0]["message"] == UNSCHEDULABLE


def test_fail_on_a_missing_nad_reads_the_sandbox_event():
    pods = [pod(i, f"node{i + 1}", waiting="ContainerCreating") for i in range(3)]
    events = [e for i in range(3) for e in (event(i, "NoNetworkFound", NO_NAD, "multus"),
                                            event(i, "FailedCreatePodSandBox", SANDBOX))]
    reports = k8s_pods.pod_reports(listing(pods), listing(events))
    assert all(k8s_pods.stuck(r) for r in reports)
    result = judge(json.dumps(report(pods, events)))
    assert result["status"] == "fail"
    assert "FailedCreatePodSandBox" in result["summary"] and "nccl-1-x1abc on node2" in result["summary"]
    assert '"rdma-missing" not found' in result["summary"]


def test_fail_when_fewer_pods_than_nodes_were_created():
    result = judge(json.dumps(report([pod(0, "node1", "Succeeded", 0)])))
    assert result["status"] == "fail" and "2 of 3 pods were never created" in result["summary"]


def test_warn_when_a_pod_started_but_the_benchmark_failed():
    pods = [pod(0, "node1", "Succeeded", 0), pod(1, "node2", "Failed", 1), pod(2, "node3", "Succeeded", 0)]
    result = judge(json.dumps(report(pods)))
    assert result["status"] == "warn" and "nccl-1-x1abc on node2 (exit 1)" in result["summary"]


def test_forbidden_job_creation_is_a_finding():
    text = ('Error from server (Forbidden): error when creating "STDIN": jobs.batch is forbidden: User "tenant" '
            'cannot create resource "jobs" in API group "batch" in the namespace "default"')
    result = judge(json.dumps(report([], api_error=text)), rc=3)
    assert result["status"] == "fail" and "may not create" in result["summary"]


def test_error_only_when_the_api_could_not_be_reached():
    text = "The connection to the server localhost:8080 was refused - did you specify the right host or port?"
    result = judge(json.dumps(report([], api_error=text)), rc=3)
    assert result["status"] == "error" and "could not be used" in result["summary"]
    assert judge("Traceback (most recent call last):", rc=1)["status"] == "error"


def test_skip_when_not_kubernetes_or_without_kubectl():
    assert judge("", harness="slurm")["status"] == "skip"
    assert judge("", rc=127, missing=True)["status"] == "skip"


def test_job_manifest_one_pod_per_node_with_the_resources_and_nad():
    m = k8s_pods.job_manifest("nccl", ["node1", "node2"], "all_reduce_perf -g 8", "img:1", gpus=8,
                              rdma_resource="rdma/rdma_shared_device_a", nad="rdma-ipoib")
    spec = m["spec"]
    assert (spec["completionMode"], spec["completions"], spec["parallelism"], spec["backoffLimit"]) == \
        ("Indexed", 2, 2, 0)
    pod_spec = spec["template"]["spec"]
    assert spec["template"]["metadata"]["annotations"] == {"k8s.v1.cni.cncf.io/networks": "rdma-ipoib"}
    assert pod_spec["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": 8, "rdma/rdma_shared_device_a": 1}
    assert pod_spec["containers"][0]["command"] == ["/bin/sh", "-c", "all_reduce_perf -g 8"]
    match = pod_spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"][0]["matchExpressions"][0]
    assert match == {"key": "kubernetes.io/hostname", "operator": "In", "values": ["node1", "node2"]}
    anti = pod_spec["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]
    assert anti["topologyKey"] == "kubernetes.io/hostname"
    topo = k8s_pods.job_manifest("nccl", ["node1"], "x", "img", gpu_resource="amd.com/gpu",
                                 topology_label="network.topology.nvidia.com/block", topology_values=["block-1"])
    term = topo["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]["matchExpressions"][0]
    assert term["key"] == "network.topology.nvidia.com/block" and "amd.com/gpu" in \
        topo["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
