"""The pure pieces of Kubernetes fault drills in the sim: the kubectl shim's YAML manifests, drain filters and
durations, the live node state (k8s_live: cordon, taints, conditions, the Node as it is now), cordon/uncordon,
drain refusals and pods as kubectl prints them in a laid-out cluster directory (no power daemon: pods stay
Pending), and the provider.k8s profile keys."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
from pathlib import Path

import pytest

from clustereval.sim import profile
from tests.unit.test_sim_kubectl import sim_cluster

SHIMS = Path(profile.__file__).resolve().parent / "shims"


def shim(name):
    spec = importlib.util.spec_from_file_location(f"sim_shim_{name}", SHIMS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


kubectl = shim("kubectl")
live = shim("k8s_live")


def test_yaml_manifests_as_kubectl_reads_them():
    docs = kubectl.yaml_documents("""# a drill pod
apiVersion: v1
kind: Pod
metadata:
  name: gpu-check   # trailing comment
  labels: {app: drill, "tier": "gpu"}
spec:
  nodeName: node3
  restartPolicy: Never
  containers:
  - name: main
    image: "nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04"
    command: ["sh", "-c"]
    args:
      - |
        nvidia-smi -L
        echo 'done: yes'
    resources:
      limits:
        nvidia.com/gpu: 1
  volumes:
  - name: scratch
    emptyDir: {}
---
kind: List
items: []
""")
    assert docs[0]["metadata"] == {"name": "gpu-check", "labels": {"app": "drill", "tier": "gpu"}}
    container = docs[0]["spec"]["containers"][0]
    assert container["command"] == ["sh", "-c"] and container["args"] == ["nvidia-smi -L\necho 'done: yes'\n"]
    assert container["resources"] == {"limits": {"nvidia.com/gpu": 1}}
    assert docs[0]["spec"]["volumes"] == [{"name": "scratch", "emptyDir": {}}]
    assert docs[1] == {"kind": "List", "items": []}


def test_durations_parse_and_print_as_go_does():
    assert kubectl._duration("300s") == 300 and kubectl._duration("1m30s") == 90 and kubectl._duration("0") == 0
    assert kubectl.go_duration(5) == "5s" and kubectl.go_duration(300) == "5m0s" and kubectl.go_duration(3600) == \
        "1h0m0s"
    with pytest.raises(kubectl.KubectlError, match="invalid duration"):
        kubectl._duration("5 minutes")


def test_drain_filters_follow_kubectls_order():
    flags = {"ignore_daemonsets": False, "delete_emptydir_data": False, "force": False}
    bare = {"metadata": {"name": "p"}, "spec": {}, "status": {"phase": "Running"}}
    assert kubectl.drain_filters(bare, flags) == (
        False, "Error", "cannot delete Pods that declare no controller (use --force to override)")
    assert kubectl.drain_filters(bare, dict(flags, force=True))[1:] == ("Warning",
                                                                          "deleting Pods that declare no controller")
    scratch = dict(bare, spec={"volumes": [{"name": "s", "emptyDir": {}}]})
    assert "local storage" in kubectl.drain_filters(scratch, flags)[2]
    done = dict(bare, status={"phase": "Succeeded"})
    assert kubectl.drain_filters(done, flags) == (True, "Okay", "")  # a finished pod goes without --force


def test_cordon_taints_and_the_unknown_node():
    entry = {}
    assert live.cordon(entry) and not live.cordon(entry)
    assert entry["unschedulable"] and entry["taints"][0]["key"] == live.UNSCHEDULABLE and "timeAdded" in \
        entry["taints"][0]
    assert live.uncordon(entry) and entry == {"unschedulable": False, "taints": []}
    assert live.parse_taint("nvidia.com/gpu-unhealthy=true:NoSchedule") == {
        "effect": "NoSchedule", "key": "nvidia.com/gpu-unhealthy", "value": "true"}
    assert live.parse_taint("bad taint") is None
    conditions = live.kubelet_conditions(1000, 1000)
    assert [c["type"] for c in conditions] == ["MemoryPressure", "DiskPressure", "PIDPressure", "Ready"]
    unknown = live.unknown_conditions(conditions, 2000)
    assert {(c["status"], c["reason"], c["message"]) for c in unknown} == {
        ("Unknown", "NodeStatusUnknown", "Kubelet stopped posting node status.")}
    assert unknown[-1]["lastHeartbeatTime"] == live.stamp(1000) and unknown[-1]["lastTransitionTime"] == \
        live.stamp(2000)


def test_live_node_shows_boot_id_lost_gpus_and_cordon(tmp_path):
    node_dir = tmp_path / "nodes" / "node1"
    (node_dir / "root" / "run").mkdir(parents=True)
    (node_dir / "boot_id").write_text("6f1c2e9a-0000-4000-8000-000000000001\n")
    (node_dir / "root" / "run" / "runtime.json").write_text(json.dumps({"lost_gpus": [1]}))
    obj = {"metadata": {"name": "node1"}, "spec": {}, "status": {
        "capacity": {"nvidia.com/gpu": "8"}, "allocatable": {"nvidia.com/gpu": "8"}, "nodeInfo": {}}}
    doc = live.empty()
    live.cordon(doc["nodes"].setdefault("node1", {}))
    shown = live.live_node(str(tmp_path), obj, doc)
    assert shown["status"]["nodeInfo"]["bootID"] == "6f1c2e9a-0000-4000-8000-000000000001"
    # the device plugin reports the lost GPU unhealthy: still in capacity, gone from allocatable
    assert (shown["status"]["capacity"]["nvidia.com/gpu"], shown["status"]["allocatable"]["nvidia.com/gpu"]) == \
        ("8", "7")
    assert shown["spec"]["unschedulable"] is True and obj["spec"] == {}


@pytest.fixture
def laid_out(tmp_path):
    return sim_cluster(tmp_path, "k8s-reference")


def run(env, *args, stdin=None):
    return subprocess.run(["kubectl", *args], env=env, input=stdin, capture_output=True, text=True, timeout=30)


def test_cordon_drain_and_pods_in_a_laid_out_cluster(laid_out, tmp_path):
    gpu_taint = {"effect": "NoSchedule", "key": "nvidia.com/gpu", "value": "present"}
    assert run(laid_out, "cordon", "node2").stdout == "node/node2 cordoned\n"
    node = json.loads(run(laid_out, "get", "node", "node2", "-o", "json").stdout)
    assert node["spec"]["unschedulable"] is True
    # the profile's GPU taint stays beside the cordon's, and alone after the uncordon
    assert [t["key"] for t in node["spec"]["taints"]] == ["nvidia.com/gpu", "node.kubernetes.io/unschedulable"]
    assert run(laid_out, "get", "nodes", "--field-selector", "spec.unschedulable=true", "-o",
               "jsonpath={.items[*].metadata.name}").stdout == "node2"
    assert run(laid_out, "uncordon", "node2").stdout == "node/node2 uncordoned\n"
    assert run(laid_out, "uncordon", "node2").stdout == "node/node2 already uncordoned\n"
    assert json.loads(run(laid_out, "get", "node", "node2", "-o", "json").stdout)["spec"]["taints"] == [gpu_taint]
    missing = run(laid_out, "cordon", "node9")
    assert (missing.returncode, missing.stderr) == (1, 'Error from server (NotFound): nodes "node9" not found\n')
    refused = run(laid_out, "drain", "node1")
    assert refused.returncode == 1
    assert refused.stdout == "node/node1 cordoned\n"
    assert refused.stderr.startswith('error: unable to drain node "node1" due to error: cannot delete DaemonSet-'
                                     'managed Pods (use --ignore-daemonsets to ignore): gpu-operator/nvidia-dcgm-')
    assert "There are pending nodes to be drained:\n node1\n" in refused.stderr
    drained = run(laid_out, "drain", "node1", "--ignore-daemonsets")
    assert drained.stdout == "node/node1 already cordoned\nnode/node1 drained\n"
    assert drained.stderr.startswith("Warning: ignoring DaemonSet-managed Pods: gpu-operator/nvidia-dcgm-exporter-")

    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p1"}, "spec": {"nodeName": "node1",
           "containers": [{"name": "c", "image": "busybox", "command": ["true"],
                           "resources": {"limits": {"nvidia.com/gpu": 1}}}]}}
    assert run(laid_out, "create", "-f", "-", stdin=json.dumps(pod)).stdout == "pod/p1 created\n"
    again = run(laid_out, "create", "-f", "-", stdin=json.dumps(pod))
    assert again.stderr == 'Error from server (AlreadyExists): error when creating "STDIN": pods "p1" already exists\n'
    shown = json.loads(run(laid_out, "get", "pod", "p1", "-o", "json").stdout)
    assert shown["status"] == {"phase": "Pending", "qosClass": "BestEffort"}
    container = shown["spec"]["containers"][0]
    assert container["imagePullPolicy"] == "Always" and container["resources"]["requests"] == {"nvidia.com/gpu": "1"}
    # DefaultTolerationSeconds, then ExtendedResourceToleration (k8s-reference enables it) for the GPUs asked for
    assert [(t["key"], t["effect"]) for t in shown["spec"]["tolerations"]] == [
        ("node.kubernetes.io/not-ready", "NoExecute"), ("node.kubernetes.io/unreachable", "NoExecute"),
        ("nvidia.com/gpu", "NoSchedule")]
    assert shown["spec"]["tolerations"][2] == {"effect": "NoSchedule", "key": "nvidia.com/gpu", "operator": "Exists"}
    assert run(laid_out, "get", "pods", "--field-selector", "spec.nodeName=node1", "-o",
               "jsonpath={.items[*].metadata.name}").stdout == "p1"
    waiting = run(laid_out, "logs", "p1")
    assert waiting.stderr == ('Error from server (BadRequest): container "c" in pod "p1" is waiting to start: '
                              'ContainerCreating\n')
    assert run(laid_out, "delete", "pod", "p1", "--wait=false").stdout == 'pod "p1" deleted\n'
    assert run(laid_out, "delete", "pod", "p1", "--ignore-not-found").stdout == ""
    gone = run(laid_out, "logs", "p1")
    assert gone.stderr == 'Error from server (NotFound): pods "p1" not found\n'
    # ground truth of the cordons, in the node's log
    lines = [json.loads(x) for x in (tmp_path / "nodes" / "node1" / "ground-truth.jsonl").read_text().splitlines()]
    assert [(e["event"], e["by"]) for e in lines] == [("k8s_cordoned", "kubectl")]
    assert os.path.exists(tmp_path / "k8s" / "cluster.json")


def write_profile(tmp_path, text):
    path = tmp_path / "p.yml"
    path.write_text(text)
    return path


def test_provider_k8s_settings_and_defaults():
    drills = profile.provider_settings(profile.load_profile("k8s-fault-drills"), "node2")
    assert drills["k8s"] == {"detector": "condition", "interval_s": 5.0, "condition": "NvidiaGPUProblem",
                             "taint": "nvidia.com/gpu-unhealthy=true:NoSchedule", "remediation": "reboot",
                             "after_s": 5.0}
    assert drills["reboot"] == {"shutdown_s": 1.0, "down_s": 2.0, "slurmd_s": 1.0}
    assert profile.provider_settings(profile.load_profile("k8s-reference"), "node1")["k8s"]["detector"] == "none"


@pytest.mark.parametrize(("text", "message"), [
    ("extends: k8s-reference\ncluster: {provider: {k8s: {detector: smoke}}}", "k8s.detector must be one of"),
    ("extends: k8s-reference\ncluster: {provider: {k8s: {remediation: resume}}}", "k8s.remediation must be one of"),
    ("extends: k8s-reference\ncluster: {provider: {k8s: {taint: 'gpu:Sometimes'}}}", "k8s.taint must be"),
    ("extends: k8s-reference\ncluster: {provider: {k8s: {condition: 'gpu bad'}}}", "k8s.condition must be"),
    ("extends: k8s-reference\ncluster: {provider: {k8s: {interval_s: 0}}}", "k8s.interval_s must be a positive"),
    ("extends: k8s-reference\ncluster: {provider: {k8s: {every: 1}}}", "k8s has unknown keys ['every']"),
    ("extends: reference\nnodes: {node2: {provider: {k8s: {detector: taint}}}}",
     "nodes.node2.provider.k8s needs the simulated Kubernetes API"),
])
def test_bad_provider_k8s_sections_are_refused(tmp_path, text, message):
    with pytest.raises(profile.ProfileError) as caught:
        profile.load_profile(write_profile(tmp_path, text))
    assert message in str(caught.value)
