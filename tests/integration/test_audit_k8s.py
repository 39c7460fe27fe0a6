"""Kubernetes audit checks against the simulated cluster, end to end through the audit role: the API facts
are collected once on node1 (the kubectl and helm shims answer from the k8s overlay's API state) and
judged on the controller; k8s-reference gives no `fail` in audit.k8s.*, audit-k8s the findings its
comments describe. audit.fabric.nccl_ib_qps runs along: on k8s it tells the fabric's tiers from the
nodes' topology labels.

audit.k8s.csi_rwx acts: its provisioning test creates a ReadWriteMany claim on node1's API and deletes it.
After every audit the claims are listed through the kubectl shim on node1 (as the audit sees the API):
none of the test's may remain. With actions switched off nothing is created and the check says so.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.integration.simrun import REQUIRES_SIM, by_key, run_audit, simulated_cluster

pytestmark = REQUIRES_SIM

# The provisioning test waits 5 s (not 30) for a claim that does not bind (audit-k8s).
K8S_VARS = {"clustereval_harness": "k8s", "clustereval_k8s_api_host": "node1", "clustereval_audit_k8s_pvc_wait": "5"}


QPS = ("audit.fabric.nccl_ib_qps", "_cluster")
RWX = ("audit.k8s.csi_rwx", "_cluster")


def node1_claims(sim: Path) -> list[str]:
    """``namespace/name`` of every PersistentVolumeClaim the API on node1 holds, read with its kubectl (the shim)."""
    address = next(line.split("ansible_host=")[1].split()[0] for line in (sim / "inventory.ini").read_text()
                   .splitlines() if line.startswith("node1 "))
    proc = subprocess.run(["ssh", "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
                           "-o", "LogLevel=ERROR", "-o", "BatchMode=yes", "-i", str(sim / "ssh" / "id_ed25519"),
                           f"root@{address}", "kubectl get persistentvolumeclaims -A -o json"],
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    return [f"{i['metadata']['namespace']}/{i['metadata']['name']}" for i in json.loads(proc.stdout)["items"]]


def sim_audit(tmp_path_factory, profile: str, quiet: bool = False):
    """The audit's k8s results, its run directory, the claims left on node1 afterwards and, with ``quiet``,
    the csi_rwx result of a second audit with actions switched off (and the claims left after it)."""
    run_dir = tmp_path_factory.mktemp("runs") / profile
    quiet_rwx, quiet_claims = None, None
    with simulated_cluster(tmp_path_factory.mktemp(f"sim-{profile}"), 2, profile) as sim:
        items = run_audit(sim / "inventory.ini", run_dir, f"audit.k8s,{QPS[0]}", K8S_VARS)
        claims = node1_claims(sim)
        if quiet:
            quiet_items = run_audit(sim / "inventory.ini", run_dir.with_name(f"{profile}-no-actions"), RWX[0],
                                    {**K8S_VARS, "clustereval_audit_allow_actions": "false"})
            quiet_rwx, quiet_claims = by_key(quiet_items)[RWX], node1_claims(sim)
    results = {key: r for key, r in by_key(items).items() if key[0].startswith("audit.k8s.") or key == QPS}
    return results, run_dir, claims, quiet_rwx, quiet_claims


def test_k8s_reference_has_no_kubernetes_failures(tmp_path_factory):
    results, run_dir, claims, quiet_rwx, quiet_claims = sim_audit(tmp_path_factory, "k8s-reference", quiet=True)
    # the provisioning test's claim bound on the NFS class and is gone: only the tenant's own claim is left
    rwx = results[RWX]
    assert rwx["status"] == "pass" and " on shared-fs (nfs.csi.k8s.io) (ReadWriteMany, 1Gi) bound in " in \
        rwx["summary"] and rwx["summary"].endswith(" s and deleted"), rwx["summary"]
    test = rwx["evidence"]["provisioning_test"]
    assert test["outcome"] == "bound" and test["delete_rc"] == 0 and test["namespace"] == "default"
    assert claims == ["training/datasets"]
    raw = (run_dir / "raw" / "_cluster" / "kubectl-pvc-provisioning-test.txt").read_text()
    assert f"create=persistentvolumeclaim/{test['name']} created" in raw
    assert f'delete=persistentvolumeclaim "{test["name"]}" deleted' in raw
    # actions switched off: nothing created, graded from the API objects, and the summary says so
    assert quiet_rwx["status"] == "pass" and quiet_rwx["summary"].endswith(
        "provisioning not tried (actions disabled: clustereval_audit_allow_actions=false)")
    assert quiet_rwx["evidence"]["provisioning_test"]["tried"] is False and quiet_claims == ["training/datasets"]
    qps = results.pop(QPS)
    assert qps["status"] == "skip" and "network.topology.nvidia.com/block: one group" in qps["summary"]
    cluster_checks = {key[0]: r for key, r in results.items() if key[1] == "_cluster"}
    assert len(cluster_checks) == 19
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
    results, _, claims, _, _ = sim_audit(tmp_path_factory, "audit-k8s")
    qps = results.pop(QPS)
    assert qps["status"] == "warn", qps["summary"]
    assert "span 2 values of the node label network.topology.nvidia.com/block" in qps["summary"]
    assert qps["evidence"]["topology"]["racks"] == {"node1": "block-1", "node2": "block-2"}
    failing = {key: r["summary"] for key, r in results.items() if r["status"] == "fail"}
    assert set(failing) == {("audit.k8s.default_storage_class", "_cluster"), ("audit.k8s.rbac_access", "_cluster"),
                            ("audit.k8s.rdma_exposure", "_cluster"), ("audit.k8s.gpu_operator", "_cluster"),
                            ("audit.k8s.monitoring_stack", "_cluster"), RWX}
    # the NFS provisioner cannot mount its server: the test claim stayed Pending with the provisioner's error,
    # and was deleted all the same
    assert "did not bind: ProvisioningFailed: failed to provision volume with StorageClass \"shared-fs\"" in \
        failing[RWX] and "mount.nfs: Connection timed out" in failing[RWX]
    assert failing[RWX].endswith("; the test PVC was deleted")
    assert results[RWX]["evidence"]["provisioning_test"]["waited_s"] >= 5
    assert claims == ["training/datasets"]
    assert "nvidia-dcgm-exporter 0/2 ready" in failing[("audit.k8s.monitoring_stack", "_cluster")]
    assert "none is the default" in failing[("audit.k8s.default_storage_class", "_cluster")]
    assert "create pods" in failing[("audit.k8s.rbac_access", "_cluster")]
    assert "nvidia.com/mlnxics" in failing[("audit.k8s.rdma_exposure", "_cluster")]
    assert "node2" in failing[("audit.k8s.gpu_operator", "_cluster")]
    assert results[("audit.k8s.kubelet_cpu_manager", "node2")]["status"] == "warn"
    assert results[("audit.k8s.kubelet_cpu_manager", "node1")]["status"] == "pass"
    assert [r for r in results.values() if r["status"] == "error"] == []
