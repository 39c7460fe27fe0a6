"""Destructive drills on the simulated Kubernetes cluster, driven from the host as a role on the controller drives
them: kubectl (the cluster's shim, PATH and CLUSTEREVAL_SIM_K8S_API from cluster.kubectl_env) for cordon, drain,
pods and node state; SSH to the nodes for boot ids, reboots and /dev/kmsg; ground truth from the simulation."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from clustereval.sim import cluster
from tests.integration.simrun import REQUIRES_SIM, read_inventory, ssh, truth

pytestmark = REQUIRES_SIM

# node1: cordon/drain and a pod; node2: reboot over SSH; node3: Xid 79 → condition → provider reboot → cleared
PROFILE = """extends: k8s-fault-drills
cluster:
  provider:
    reboot: {shutdown_s: 0.5, down_s: 1.5, slurmd_s: 0.5}
    k8s: {interval_s: 1, after_s: 1}
  k8s: {node_monitor_grace_s: 1}
"""
XID_79 = "NVRM: Xid (PCI:0000:4c:00): 79, pid=1824, name=python, GPU has fallen off the bus."


def wait(predicate, timeout: float, interval: float = 0.1) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return bool(predicate())


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    base = tmp_path_factory.mktemp("k8spower")
    (base / "drills.yml").write_text(PROFILE)
    directory = base / "sim"
    cluster.up(directory, 3, str(base / "drills.yml"))
    hosts, _ = read_inventory(directory)
    env = {**os.environ, **cluster.kubectl_env(directory)}

    def kubectl(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["kubectl", *args], env=env, input=stdin, capture_output=True, text=True, timeout=90)

    yield directory, hosts, kubectl
    cluster.down(directory)


def node(kubectl, name: str) -> dict:
    proc = kubectl("get", "node", name, "-o", "json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def condition(obj: dict, kind: str) -> dict:
    return next(c for c in obj["status"]["conditions"] if c["type"] == kind)


def test_kubectl_runs_on_the_host_with_the_clusters_env(sim):
    directory, _, kubectl = sim
    env = cluster.kubectl_env(directory)
    assert env["PATH"].split(":")[0] == str(directory / "k8s" / "bin")
    assert sorted(p.name for p in (directory / "k8s" / "bin").iterdir()) == ["helm", "kubectl"]
    assert cluster.status(directory)["kubectl"]["CLUSTEREVAL_SIM_K8S_API"] == env["CLUSTEREVAL_SIM_K8S_API"]
    listed = json.loads(kubectl("get", "nodes", "-o", "json").stdout)
    assert [n["metadata"]["name"] for n in listed["items"]] == ["node1", "node2", "node3"]
    one = listed["items"][0]
    assert condition(one, "Ready")["status"] == "True"
    assert one["status"]["nodeInfo"]["bootID"] == (directory / "nodes" / "node1" / "boot_id").read_text().strip()
    assert one["status"]["allocatable"]["nvidia.com/gpu"] == "8"
    assert kubectl("get", "node", "node1", "-o", "jsonpath={.status.nodeInfo.bootID}").stdout == \
        one["status"]["nodeInfo"]["bootID"]


def test_cordon_drain_uncordon_and_a_pod_on_its_node(sim):
    directory, _, kubectl = sim
    assert kubectl("cordon", "node1").stdout == "node/node1 cordoned\n"
    assert kubectl("cordon", "node1").stdout == "node/node1 already cordoned\n"
    cordoned = node(kubectl, "node1")
    assert cordoned["spec"]["unschedulable"] is True
    # cordon adds the node controller's taint beside the GPU taint the profile gives the node
    assert [(t["key"], t["effect"]) for t in cordoned["spec"]["taints"]] == [
        ("nvidia.com/gpu", "NoSchedule"), ("node.kubernetes.io/unschedulable", "NoSchedule")]
    assert kubectl("uncordon", "node1").stdout == "node/node1 uncordoned\n"
    assert "unschedulable" not in node(kubectl, "node1")["spec"]

    manifest = """apiVersion: v1
kind: Pod
metadata:
  name: gpu-check
spec:
  nodeName: node1
  restartPolicy: Never
  containers:
  - name: main
    image: nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04
    command: ["sh", "-c"]
    args: ["hostname; nvidia-smi -L"]
    resources:
      limits:
        nvidia.com/gpu: 8
"""
    created = kubectl("create", "-f", "-", stdin=manifest)
    assert created.stdout == "pod/gpu-check created\n", created.stderr
    assert wait(lambda: kubectl("get", "pod", "gpu-check", "-o", "jsonpath={.status.phase}").stdout == "Succeeded",
                10)
    logs = kubectl("logs", "gpu-check").stdout.splitlines()
    assert logs[0] == "node1" and len(logs) == 9 and logs[1].startswith("GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-")
    pod = json.loads(kubectl("get", "pod", "gpu-check", "-o", "json").stdout)
    assert pod["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 0
    assert [e["exit_code"] for e in truth(directory, "node1", "pod_finished")] == [0]
    assert kubectl("delete", "pod", "gpu-check").stdout == 'pod "gpu-check" deleted\n'
    missing = kubectl("get", "pod", "gpu-check", "-o", "json")
    assert (missing.returncode, missing.stderr) == (1, 'Error from server (NotFound): pods "gpu-check" not found\n')

    sleeper = json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "sleeper", "namespace": "default"},
                          "spec": {"nodeName": "node1", "restartPolicy": "Never", "containers": [
                              {"name": "main", "image": "busybox:1.36", "command": ["sleep", "600"]}]}})
    assert kubectl("create", "-f", "-", stdin=sleeper).returncode == 0
    assert wait(lambda: kubectl("get", "pod", "sleeper", "-o", "jsonpath={.status.phase}").stdout == "Running", 5)
    refused = kubectl("drain", "node1", "--ignore-daemonsets", "--delete-emptydir-data")
    assert refused.returncode == 1
    assert refused.stderr.endswith("cannot delete Pods that declare no controller (use --force to override): "
                                   "default/sleeper\n")
    drained = kubectl("drain", "node1", "--ignore-daemonsets", "--delete-emptydir-data", "--force", "--timeout=30s",
                      "--grace-period=1")
    assert drained.returncode == 0, drained.stderr
    assert drained.stdout == ("node/node1 already cordoned\nevicting pod default/sleeper\npod/sleeper evicted\n"
                              "node/node1 drained\n")
    assert drained.stderr.startswith("Warning: deleting Pods that declare no controller: default/sleeper; "
                                     "ignoring DaemonSet-managed Pods: gpu-operator/nvidia-dcgm-exporter-")
    assert truth(directory, "node1", "pod_finished")[-1]["exit_code"] == 143  # SIGTERM
    assert kubectl("uncordon", "node1").stdout == "node/node1 uncordoned\n"
    assert [e["by"] for e in truth(directory, "node1", "k8s_cordoned")] == ["kubectl", "kubectl"]


def test_reboot_over_ssh_makes_the_node_unknown_then_ready_with_a_new_boot_id(sim):
    directory, hosts, kubectl = sim
    before = node(kubectl, "node2")["status"]["nodeInfo"]["bootID"]
    assert ssh(directory, hosts["node2"], "cat /proc/sys/kernel/random/boot_id").stdout.strip() == before
    ssh(directory, hosts["node2"], "systemctl reboot")
    assert wait(lambda: condition(node(kubectl, "node2"), "Ready")["status"] == "Unknown", 10)
    down = node(kubectl, "node2")
    ready = condition(down, "Ready")
    assert (ready["reason"], ready["message"]) == ("NodeStatusUnknown", "Kubelet stopped posting node status.")
    assert {(t["key"], t["effect"]) for t in down["spec"]["taints"]} == {("nvidia.com/gpu", "NoSchedule"),
        ("node.kubernetes.io/unreachable", "NoSchedule"), ("node.kubernetes.io/unreachable", "NoExecute")}
    assert wait(lambda: condition(node(kubectl, "node2"), "Ready")["status"] == "True", 15)
    after = node(kubectl, "node2")
    assert after["status"]["nodeInfo"]["bootID"] != before
    assert after["spec"]["taints"] == [{"effect": "NoSchedule", "key": "nvidia.com/gpu", "value": "present"}]
    assert ssh(directory, hosts["node2"], "cat /proc/sys/kernel/random/boot_id").stdout.strip() == \
        after["status"]["nodeInfo"]["bootID"]
    names = [e["event"] for e in cluster.ground_truth(directory, "node2")]
    tail = names[names.index("reboot_requested"):]
    assert [n for n in tail if n in ("down", "k8s_not_ready", "sshd_up", "k8s_ready")] == [
        "down", "k8s_not_ready", "sshd_up", "k8s_ready"]


def test_kmsg_xid_sets_the_condition_and_the_provider_reboots_and_clears_it(sim):
    directory, hosts, kubectl = sim
    written = time.time()
    out = ssh(directory, hosts["node3"], f"printf '<4>%s\\n' '{XID_79}' | timeout 5 tee /dev/kmsg >/dev/null")
    assert out.returncode == 0, out.stderr
    assert wait(lambda: condition(node(kubectl, "node3"), "NvidiaGPUProblem")["status"] == "True", 5)
    problem = condition(node(kubectl, "node3"), "NvidiaGPUProblem")
    assert (problem["reason"], problem["message"]) == ("XID79", XID_79)
    detected = truth(directory, "node3", "k8s_detected")[-1]
    assert detected["how"] == "condition" and detected["reason"] == "XID79" and detected["t"] >= written
    assert wait(lambda: bool(truth(directory, "node3", "k8s_cleared")), 25)
    reboot = truth(directory, "node3", "reboot_requested")[-1]
    assert reboot["by"] == "remediation" and reboot["t"] - detected["t"] >= 1
    cleared = truth(directory, "node3", "k8s_cleared")[-1]
    assert cleared["t"] > truth(directory, "node3", "k8s_ready")[-1]["t"]
    final = node(kubectl, "node3")
    assert condition(final, "NvidiaGPUProblem")["status"] == "False"
    assert condition(final, "Ready")["status"] == "True"


def test_down_leaves_nothing_running(tmp_path):
    directory = tmp_path / "short"
    cluster.up(directory, 1, "k8s-fault-drills")
    env = {**os.environ, **cluster.kubectl_env(directory)}
    pod = json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "long"}, "spec": {
        "nodeName": "node1", "containers": [{"name": "main", "image": "busybox:1.36", "command": ["sleep", "900"]}]}})
    assert subprocess.run(["kubectl", "create", "-f", "-"], env=env, input=pod, capture_output=True,
                          text=True).returncode == 0
    assert wait(lambda: any(e["event"] == "pod_started" for e in cluster.ground_truth(directory, "node1")), 5)
    pid = next(e["pid"] for e in cluster.ground_truth(directory, "node1") if e["event"] == "pod_started")
    cluster.down(directory)
    assert not cluster.pid_alive(pid)

    def cmdline(p: int) -> str:
        try:
            return Path(f"/proc/{p}/cmdline").read_bytes().decode(errors="replace")
        except OSError:
            return ""

    assert [p for p in cluster._all_pids() if str(directory) in cmdline(p) or "sleep\x00900" in cmdline(p)] == []
