"""Kubernetes audit checks against the simulated cluster, end to end through the audit role: the API facts
are collected once on node1 (the kubectl and helm shims answer from the k8s overlay's API state) and
judged on the controller; k8s-reference gives no `fail` in audit.k8s.*, audit-k8s the findings its
comments describe.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from clustereval.sim import cluster

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(os.geteuid() != 0, reason="the simulated cluster needs root"),
    pytest.mark.skipif(not Path("/usr/sbin/slurmctld").exists(), reason="slurm-wlm is not installed"),
]


def audit(directory: Path, run_dir: Path) -> dict[tuple[str, str], dict]:
    env = {**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "PATH": f"{BIN}:{os.environ['PATH']}",
           "ANSIBLE_NOCOLOR": "1"}
    proc = subprocess.run([str(BIN / "ansible-playbook"), str(REPO / "playbooks" / "evaluate.yml"),
                           "-i", str(directory / "inventory.ini"), "-e", "clustereval_phases=audit",
                           "-e", "clustereval_harness=k8s", "-e", "clustereval_k8s_api_host=node1",
                           "--tags", "audit.k8s", "-e", f"clustereval_out={run_dir}"],
                          capture_output=True, text=True, timeout=240, env=env, cwd=REPO)
    assert proc.returncode == 0, proc.stdout[-3000:]
    items = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines() if line.strip()]
    return {(r["check"], r["subject"]): r for r in items if r["check"].startswith("audit.k8s.")}


def sim_audit(tmp_path_factory, profile: str) -> tuple[dict[tuple[str, str], dict], Path]:
    directory = tmp_path_factory.mktemp(f"sim-{profile}")
    run_dir = tmp_path_factory.mktemp("runs") / profile
    cluster.up(directory, 2, profile)
    try:
        return audit(directory, run_dir), run_dir
    finally:
        cluster.down(directory)


def test_k8s_reference_has_no_kubernetes_failures(tmp_path_factory):
    results, run_dir = sim_audit(tmp_path_factory, "k8s-reference")
    cluster_checks = {key[0]: r for key, r in results.items() if key[1] == "_cluster"}
    assert len(cluster_checks) == 17
    assert {c: r["summary"] for c, r in results.items() if r["status"] in ("fail", "error")} == {}
    # the HGX H100 has no multi-node NVLink domain: that check does not apply, every other one passes
    assert {c for c, r in cluster_checks.items() if r["status"] != "pass"} == {"audit.k8s.multinode_nvlink"}
    assert cluster_checks["audit.k8s.multinode_nvlink"]["status"] == "skip"
    for node in ("node1", "node2"):
        assert results[("audit.k8s.kubelet_cpu_manager", node)]["status"] == "pass"
    # the API facts are kept as artifacts of the cluster subject
    artifacts = cluster_checks["audit.k8s.gpu_operator"]["artifacts"]
    assert artifacts and all(a.startswith("raw/_cluster/") for a in artifacts)
    nodes = json.loads((run_dir / "raw" / "_cluster" / "kubectl-get-nodes.json").read_text())
    assert [n["metadata"]["name"] for n in nodes["items"]] == ["node1", "node2"]


def test_audit_k8s_faults_are_found(tmp_path_factory):
    results, _ = sim_audit(tmp_path_factory, "audit-k8s")
    failing = {key: r["summary"] for key, r in results.items() if r["status"] == "fail"}
    assert set(failing) == {("audit.k8s.default_storage_class", "_cluster"), ("audit.k8s.rbac_access", "_cluster"),
                            ("audit.k8s.rdma_exposure", "_cluster"), ("audit.k8s.gpu_operator", "_cluster")}
    assert "none is the default" in failing[("audit.k8s.default_storage_class", "_cluster")]
    assert "create pods" in failing[("audit.k8s.rbac_access", "_cluster")]
    assert "nvidia.com/mlnxics" in failing[("audit.k8s.rdma_exposure", "_cluster")]
    assert "node2" in failing[("audit.k8s.gpu_operator", "_cluster")]
    assert results[("audit.k8s.kubelet_cpu_manager", "node2")]["status"] == "warn"
    assert results[("audit.k8s.kubelet_cpu_manager", "node1")]["status"] == "pass"
    assert [r for r in results.values() if r["status"] == "error"] == []
