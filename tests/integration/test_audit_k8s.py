"""Kubernetes audit checks against the simulated cluster, end to end through the audit role: the API facts
are collected once on node1 (the kubectl and helm shims answer from the k8s overlay's API state) and
judged on the controller; k8s-reference gives no `fail` in audit.k8s.*, audit-k8s the findings its
comments describe. audit.fabric.nccl_ib_qps runs along: on k8s it tells the fabric's tiers from the
nodes' topology labels.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.integration.simrun import REQUIRES_SIM, by_key, run_audit, simulated_cluster

pytestmark = REQUIRES_SIM

K8S_VARS = {"clustereval_harness": "k8s", "clustereval_k8s_api_host": "node1"}


QPS = ("audit.fabric.nccl_ib_qps", "_cluster")


def sim_audit(tmp_path_factory, profile: str) -> tuple[dict[tuple[str, str], dict], Path]:
    run_dir = tmp_path_factory.mktemp("runs") / profile
    with simulated_cluster(tmp_path_factory.mktemp(f"sim-{profile}"), 2, profile) as sim:
        items = run_audit(sim / "inventory.ini", run_dir, f"audit.k8s,{QPS[0]}", K8S_VARS)
    return {key: r for key, r in by_key(items).items() if key[0].startswith("audit.k8s.") or key == QPS}, run_dir


def test_k8s_reference_has_no_kubernetes_failures(tmp_path_factory):
    results, run_dir = sim_audit(tmp_path_factory, "k8s-reference")
    qps = results.pop(QPS)
    assert qps["status"] == "skip" and "network.topology.nvidia.com/block: one group" in qps["summary"]
    cluster_checks = {key[0]: r for key, r in results.items() if key[1] == "_cluster"}
    assert len(cluster_checks) == 18
    assert {c: r["summary"] for c, r in results.items() if r["status"] in ("fail", "error")} == {}
    # the HGX H100 has no multi-node NVLink domain: that check does not apply, every other one passes
    assert {c for c, r in cluster_checks.items() if r["status"] != "pass"} == {"audit.k8s.multinode_nvlink"}
    assert cluster_checks["audit.k8s.multinode_nvlink"]["status"] == "skip"
    # the GPU Operator's dcgm-exporter and kube-prometheus-stack are found by their real objects
    monitoring = cluster_checks["audit.k8s.monitoring_stack"]
    assert monitoring["value"] == 2 and "Grafana" in monitoring["summary"]
    assert [w["workload"] for w in monitoring["evidence"]["dcgm_exporter"]] == ["gpu-operator/nvidia-dcgm-exporter"]
    assert monitoring["evidence"]["prometheus"][0]["kind"] == "StatefulSet"
    for node in ("node1", "node2"):
        assert results[("audit.k8s.kubelet_cpu_manager", node)]["status"] == "pass"
    # the API facts are kept as artifacts of the cluster subject
    artifacts = cluster_checks["audit.k8s.gpu_operator"]["artifacts"]
    assert artifacts and all(a.startswith("raw/_cluster/") for a in artifacts)
    nodes = json.loads((run_dir / "raw" / "_cluster" / "kubectl-get-nodes.json").read_text())
    assert [n["metadata"]["name"] for n in nodes["items"]] == ["node1", "node2"]


def test_audit_k8s_faults_are_found(tmp_path_factory):
    results, _ = sim_audit(tmp_path_factory, "audit-k8s")
    qps = results.pop(QPS)
    assert qps["status"] == "warn", qps["summary"]
    assert "span 2 values of the node label network.topology.nvidia.com/block" in qps["summary"]
    assert qps["evidence"]["topology"]["racks"] == {"node1": "block-1", "node2": "block-2"}
    failing = {key: r["summary"] for key, r in results.items() if r["status"] == "fail"}
    assert set(failing) == {("audit.k8s.default_storage_class", "_cluster"), ("audit.k8s.rbac_access", "_cluster"),
                            ("audit.k8s.rdma_exposure", "_cluster"), ("audit.k8s.gpu_operator", "_cluster"),
                            ("audit.k8s.monitoring_stack", "_cluster")}
    assert "nvidia-dcgm-exporter 0/2 ready" in failing[("audit.k8s.monitoring_stack", "_cluster")]
    assert "none is the default" in failing[("audit.k8s.default_storage_class", "_cluster")]
    assert "create pods" in failing[("audit.k8s.rbac_access", "_cluster")]
    assert "nvidia.com/mlnxics" in failing[("audit.k8s.rdma_exposure", "_cluster")]
    assert "node2" in failing[("audit.k8s.gpu_operator", "_cluster")]
    assert results[("audit.k8s.kubelet_cpu_manager", "node2")]["status"] == "warn"
    assert results[("audit.k8s.kubelet_cpu_manager", "node1")]["status"] == "pass"
    assert [r for r in results.values() if r["status"] == "error"] == []
