"""GPU-node taints, DaemonSet tolerations and tenant NetworkPolicies on the simulated Kubernetes cluster, end to end
through the audit role (profile audit-k8s-isolation, 2 nodes): the API facts are collected once on node1 and judged
on the controller. node2's taint value is one the GPU Operator's dcgm-exporter does not tolerate and node-exporter
tolerates neither GPU taint, so audit.k8s.monitoring_stack fails naming DaemonSets, taints and nodes; tenant-b has
no NetworkPolicy, so audit.k8s.network_policy fails naming it. The host's kubectl (the cluster's kubectl_env) sees
the same taints, started in the live state by the power daemon, and keeps them through a cordon."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from clustereval.sim import cluster
from tests.integration.simrun import REQUIRES_SIM, by_key, run_audit, simulated_cluster

pytestmark = REQUIRES_SIM

K8S_VARS = {"clustereval_harness": "k8s", "clustereval_k8s_api_host": "node1"}
CHECKS = ("audit.k8s.monitoring_stack", "audit.k8s.network_policy")


@pytest.fixture(scope="module")
def audited(tmp_path_factory):
    """The two checks' results, and the Node objects the host's kubectl lists before and during a cordon."""
    with simulated_cluster(tmp_path_factory.mktemp("sim-k8s-isolation"), 2, "audit-k8s-isolation") as sim:
        items = run_audit(sim / "inventory.ini", tmp_path_factory.mktemp("runs") / "isolation", ",".join(CHECKS),
                          K8S_VARS)
        env = {**os.environ, **cluster.kubectl_env(sim)}

        def nodes():
            proc = subprocess.run(["kubectl", "get", "nodes", "-o", "json"], env=env, capture_output=True,
                                  text=True, timeout=30)
            assert proc.returncode == 0, proc.stderr
            return {n["metadata"]["name"]: n["spec"].get("taints") for n in json.loads(proc.stdout)["items"]}

        before = nodes()
        subprocess.run(["kubectl", "cordon", "node2"], env=env, check=True, capture_output=True, timeout=30)
        during = nodes()
    return {key[0]: r for key, r in by_key(items).items() if key[0] in CHECKS}, before, during


def test_unmonitored_gpu_nodes_are_named(audited):
    results, _, _ = audited
    monitoring = results["audit.k8s.monitoring_stack"]
    assert monitoring["status"] == "fail", monitoring["summary"]
    assert monitoring["summary"].startswith("GPU nodes unmonitored: dcgm-exporter never runs on 1 of 2 GPU node(s): "
                                            "DaemonSet gpu-operator/nvidia-dcgm-exporter does not tolerate taint "
                                            "nvidia.com/gpu=true:NoSchedule (node2); node-exporter never runs on 2 "
                                            "of 2 GPU node(s)")
    assert monitoring["value"] == 1
    assert monitoring["evidence"]["unmonitored_gpu_nodes"]["node_exporter"].keys() == {"node1", "node2"}


def test_tenant_namespace_without_network_policy_is_named(audited):
    results, _, _ = audited
    policy = results["audit.k8s.network_policy"]
    assert policy["status"] == "fail" and policy["value"] == 1
    assert policy["summary"] == ("1 of 4 tenant namespace(s) are open to pods of other tenants: tenant-b (no "
                                 "NetworkPolicy)")
    assert policy["evidence"]["tenant_namespaces"]["tenant-a"]["state"] == "isolated"
    assert "raw/_cluster/kubectl-get-network-policies.json" in policy["artifacts"], policy["artifacts"]


def test_the_hosts_kubectl_sees_the_taints_through_a_cordon(audited):
    _, before, during = audited
    present = {"effect": "NoSchedule", "key": "nvidia.com/gpu", "value": "present"}
    true = {"effect": "NoSchedule", "key": "nvidia.com/gpu", "value": "true"}
    assert before == {"node1": [present], "node2": [true]}
    assert during["node1"] == [present]
    assert [t["key"] for t in during["node2"]] == ["nvidia.com/gpu", "node.kubernetes.io/unschedulable"]
