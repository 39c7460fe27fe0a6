"""Benchmarks as pods on the simulated Kubernetes cluster: the pod runner (as the probe runs it, on the host with
the cluster's kubectl) applies an indexed Job, the simulated scheduler binds one pod per node, the kubelet runs the
real command on that node; a wrong RDMA resource name or a missing NAD is a finding of network.k8s.pod_start."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from clustereval import checks
from clustereval.checks import Context
from clustereval.sim import cluster
from tests.integration.simrun import REQUIRES_SIM, truth

pytestmark = REQUIRES_SIM

COMMAND = 'echo "pod on $(uname -n) as $NODE_NAME index $JOB_COMPLETION_INDEX"; all_reduce_perf -b 8 -e 1M -f 2 -g 8'


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    directory = tmp_path_factory.mktemp("k8sperf") / "sim"
    cluster.up(directory, 3, "k8s-reference")
    env = {**os.environ, **cluster.kubectl_env(directory)}
    yield directory, env
    cluster.down(directory)


def run_pods(env, name, rdma="rdma/rdma_shared_device_a", nad="rdma-ipoib"):
    proc = subprocess.run(
        [sys.executable, "-m", "clustereval.k8s_pods", "--name", name, "--nodes", "node1,node2,node3",
         "--command", COMMAND, "--image", "nvcr.io/nvidia/hpc-benchmarks:25.04", "--rdma-resource", rdma,
         "--nad", nad, "--timeout", "40", "--stuck", "2", "--poll", "0.3"],
        env=env, capture_output=True, text=True, timeout=90)
    probe = {"cmd": "python -m clustereval.k8s_pods", "rc": proc.returncode, "stdout": proc.stdout,
             "stderr": proc.stderr}
    result = checks.evaluate("network.k8s.pod_start", Context(subject="_cluster", probes={"k8s_perf_pods": probe},
                                                           options={"harness": "k8s"}), "run")
    return json.loads(proc.stdout), result


def kubectl_json(env, *args):
    proc = subprocess.run(["kubectl", *args, "-o", "json"], env=env, capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_every_pod_ran_its_command_on_its_own_node(sim):
    directory, env = sim
    report, result = run_pods(env, "nccl-ok")
    assert result["status"] == "pass", result["summary"]
    assert [p["node"] for p in report["pods"]] == ["node1", "node2", "node3"]
    for index, p in enumerate(report["pods"]):
        node = f"node{index + 1}"
        assert p["phase"] == "Succeeded" and p["exit_code"] == 0
        assert f"pod on {node} as {node} index {index}" in p["logs"]
        assert "# Avg bus bandwidth" in p["logs"]
        assert truth(directory, node, "pod_started", pod=f"default/{p['name']}")
    # the Job and its pods are gone afterwards
    assert kubectl_json(env, "get", "jobs")["items"] == []
    assert kubectl_json(env, "get", "pods", "-l", "job-name=nccl-ok")["items"] == []


def test_a_wrong_rdma_resource_leaves_the_pods_unschedulable(sim):
    _, env = sim
    report, result = run_pods(env, "nccl-rdma", rdma="rdma/rdma_shared_device_b")
    assert result["status"] == "fail"
    assert all(p["reason"] == "Unschedulable" and p["node"] is None for p in report["pods"])
    assert report["pods"][0]["message"] == (
        "0/3 nodes are available: 3 Insufficient rdma/rdma_shared_device_b. preemption: 0/3 nodes are available: "
        "3 No preemption victims found for incoming pod.")
    assert "Insufficient rdma/rdma_shared_device_b" in result["summary"]
    assert [e["reason"] for e in report["pods"][0]["events"]] == ["FailedScheduling"]


def test_a_missing_nad_is_a_sandbox_finding(sim):
    _, env = sim
    report, result = run_pods(env, "nccl-nad", nad="rdma-missing")
    assert result["status"] == "fail"
    assert {p["node"] for p in report["pods"]} == {"node1", "node2", "node3"}
    assert all(p["reason"] == "FailedCreatePodSandBox" and p["started"] is None for p in report["pods"])
    assert 'network-attachment-definitions.k8s.cni.cncf.io "rdma-missing" not found' in result["summary"]
    assert kubectl_json(env, "get", "pods", "-l", "job-name=nccl-nad")["items"] == []
