"""Kubernetes audit checks on AMD Instinct MI300X nodes against the simulated cluster, end to end through the audit
role (the API facts collected once on node1, judged on the controller): k8s-amd (the AMD GPU Operator, ROCm device
plugin, node labeller and device metrics exporter) gives no `fail` in audit.k8s.*; on k8s-amd-faults
audit.k8s.gpu_operator fails naming node2 (its device plugin advertises no amd.com/gpu) and node3 (labelled
cpx_nps4 where the other nodes run spx_nps1), and audit.amd.gpu.partition, judging the same node from amd-smi,
agrees about node3.
"""

from __future__ import annotations

from tests.integration.simrun import REQUIRES_SIM, by_key, run_audit, simulated_cluster

pytestmark = REQUIRES_SIM

K8S_VARS = {"clustereval_harness": "k8s", "clustereval_k8s_api_host": "node1", "clustereval_audit_k8s_pvc_wait": "5"}
GPU_OPERATOR = ("audit.k8s.gpu_operator", "_cluster")


def sim_audit(tmp_path_factory, profile: str, nodes: int, tags: str = "audit.k8s"):
    run_dir = tmp_path_factory.mktemp("runs") / profile
    with simulated_cluster(tmp_path_factory.mktemp(f"sim-{profile}"), nodes, profile) as sim:
        items = run_audit(sim / "inventory.ini", run_dir, tags, K8S_VARS)
    return by_key(items)


def test_k8s_amd_has_no_kubernetes_failures(tmp_path_factory):
    results = {k: r for k, r in sim_audit(tmp_path_factory, "k8s-amd", 3).items() if k[0].startswith("audit.k8s.")}
    assert {k: r["summary"] for k, r in results.items() if r["status"] in ("fail", "error")} == {}
    cluster = {k[0]: r for k, r in results.items() if k[1] == "_cluster"}
    assert {c for c, r in cluster.items() if r["status"] != "pass"} == {"audit.k8s.multinode_nvlink"}
    operator = cluster["audit.k8s.gpu_operator"]
    assert operator["summary"] == ("AMD GPU Operator v1.4.1 ready, its device plugin and node labeller on every "
                                   "node; 24 amd.com/gpu allocatable on 3 nodes (spx_nps1)")
    # the hosts' facts (amd-smi: 8 physical MI300X each) agree with what the API advertises
    assert {n: v["host_facts"] for n, v in operator["evidence"]["nodes"].items()} == {
        "node1": 8, "node2": 8, "node3": 8}
    assert cluster["audit.k8s.monitoring_stack"]["summary"].startswith("device-metrics-exporter ready on all 3")
    assert cluster["audit.k8s.gpu_job_attribution"]["status"] == "pass"
    for node in ("node1", "node2", "node3"):
        assert results[("audit.k8s.kubelet_cpu_manager", node)]["status"] == "pass"


def test_k8s_amd_faults_are_found_naming_their_nodes(tmp_path_factory):
    results = sim_audit(tmp_path_factory, "k8s-amd-faults", 4, "audit.k8s,audit.amd.gpu.partition")
    failing = {key: r["summary"] for key, r in results.items() if r["status"] == "fail"}
    assert set(failing) == {GPU_OPERATOR, ("audit.amd.gpu.partition", "node3")}, failing
    summary = failing[GPU_OPERATOR]
    assert "1 AMD GPU node(s) advertise no allocatable amd.com/gpu: node2" in summary
    assert "node3 (cpx_nps4) in another partition mode (amd.com/gpu.compute-memory-partition) than the spx_nps1 " \
           "that 3 of 4 AMD GPU nodes run" in summary
    evidence = results[GPU_OPERATOR]["evidence"]
    assert evidence["nodes"]["node2"]["allocatable"] == 0 and evidence["nodes"]["node2"]["node_labeller"] == 8
    assert evidence["nodes"]["node3"]["allocatable"] == 64
    assert [r for r in results.values() if r["status"] == "error"] == []
