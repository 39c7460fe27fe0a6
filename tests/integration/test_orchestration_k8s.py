"""Kubernetes GPU pod churn on the simulated cluster: the churn runner (clustereval.k8s_churn, as the probe runs it
on the controller with the cluster's kubectl) creates and deletes GPU pods; on k8s-reference every round passes
and nothing is left; on k8s-stuck-delete (a pod finalizer nothing clears) the first delete hangs: a fail."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from clustereval import checks
from clustereval.checks import Context
from clustereval.sim import cluster
from tests.integration.simrun import REQUIRES_SIM, by_key, load_result_list, run_playbook, simulated_cluster

pytestmark = REQUIRES_SIM


def churn(tmp_path, profile, rounds=3):
    directory = tmp_path / "sim"
    cluster.up(directory, 2, profile)
    env = {**os.environ, **cluster.kubectl_env(directory)}
    try:
        proc = subprocess.run([sys.executable, "-m", "clustereval.k8s_churn", "--run", "churn", "--image",
                               "busybox:1.36", "--rounds", str(rounds), "--ready-timeout", "20", "--delete-timeout",
                               "3", "--poll", "0.3"], env=env, capture_output=True, text=True, timeout=120)
        left = json.loads(subprocess.run(["kubectl", "get", "pods", "-o", "json"], env=env, capture_output=True,
                                         text=True, timeout=30).stdout)["items"]
    finally:
        cluster.down(directory)
    probe = {"cmd": "python -m clustereval.k8s_churn", "rc": proc.returncode, "stdout": proc.stdout,
             "stderr": proc.stderr}
    results = {c: checks.evaluate(c, Context(subject="_cluster", probes={"orchestration_k8s_churn": probe},
                                             options={"harness": "k8s"}), "run")
               for c in ("orchestration.k8s.gpu_pod_churn", "orchestration.k8s.pod_start_latency",
                         "orchestration.k8s.delete_hang")}
    return json.loads(proc.stdout), results, left


def test_churn_on_the_reference_cluster(tmp_path):
    report, results, left = churn(tmp_path, "k8s-reference")
    assert len(report["rounds"]) == 3
    assert all(r["allocation_ok"] and r["allocatable"] == 8 and r["requested"] == 1 for r in report["rounds"])
    assert {c: r["status"] for c, r in results.items()} == {c: "pass" for c in results}, \
        {c: r["summary"] for c, r in results.items()}
    assert left == []


def test_a_finalizer_nobody_clears_is_a_hung_delete(tmp_path):
    report, results, left = churn(tmp_path, "k8s-stuck-delete")
    assert len(report["rounds"]) == 1 and report["rounds"][0]["delete_hung"]
    assert results["orchestration.k8s.delete_hang"]["status"] == "fail"
    assert "timed out waiting for the condition on pods/churn-0" in results["orchestration.k8s.delete_hang"]["summary"]
    assert [p["metadata"]["finalizers"] for p in left] == [["example.com/never-cleared"]]
    assert "deletionTimestamp" in left[0]["metadata"]


def test_the_role_runs_the_churn_from_the_controller(tmp_path, monkeypatch):
    run_dir = tmp_path / "run"
    with simulated_cluster(tmp_path / "sim", 2, "k8s-reference") as sim:
        # the controller's kubectl is the cluster's (as an operator's kubeconfig points at the real API)
        for key, value in cluster.kubectl_env(sim).items():
            monkeypatch.setenv(key, value)
        proc = run_playbook(sim / "inventory.ini", "-e", "clustereval_phases=reliability", "-e",
                            "clustereval_harness=k8s", "-e", "clustereval_k8s_api_host=node1", "--tags",
                            "orchestration.k8s.gpu_pod_churn,orchestration.k8s.delete_hang,"
                            "orchestration.k8s.sandbox_batches",
                            "-e", f"clustereval_out={run_dir}", timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:]
    keyed = by_key(load_result_list(run_dir))
    assert keyed[("orchestration.k8s.gpu_pod_churn", "_cluster")]["status"] == "pass"
    assert keyed[("orchestration.k8s.delete_hang", "_cluster")]["status"] == "pass"
    # the SIM batches [2, 4, 16] of 40-CPU pods: two Ready, one with pods Pending for Insufficient cpu
    sandbox = sorted((r for r in load_result_list(run_dir) if r["check"] == "orchestration.k8s.sandbox_batches"),
                     key=lambda r: r["params"]["batch"])
    assert [(r["params"]["batch"], r["status"]) for r in sandbox] == [(2, "pass"), (4, "pass"), (16, "warn")], \
        [r["summary"] for r in sandbox]
    assert "Insufficient cpu" in sandbox[2]["summary"]
    # select before run: the unselected latency check was not judged
    assert ("orchestration.k8s.pod_start_latency", "_cluster") not in keyed


def test_sandbox_batches_ready_and_one_that_cannot_fit(tmp_path):
    # nodes of 222 allocatable CPUs: batches of 2 and 4 pods of 40 CPUs fit, 16 cannot (Insufficient cpu); the
    # GPU nodes' nvidia.com/gpu taint is tolerated (without it every pod stays Pending for the taint)
    directory = tmp_path / "sim"
    cluster.up(directory, 2, "k8s-reference")
    env = {**os.environ, **cluster.kubectl_env(directory)}
    try:
        proc = subprocess.run([sys.executable, "-m", "clustereval.k8s_churn", "--run", "sbx", "--image",
                               "busybox:1.36", "--sandbox-batches", "2,4,16", "--cpu", "40", "--tolerate",
                               "nvidia.com/gpu", "--ready-timeout", "6", "--delete-timeout", "10", "--poll", "0.3"],
                              env=env, capture_output=True, text=True, timeout=120)
        left = json.loads(subprocess.run(["kubectl", "get", "pods", "-l", "clustereval/sandbox", "-o", "json"],
                                         env=env, capture_output=True, text=True, timeout=30).stdout)["items"]
    finally:
        cluster.down(directory)
    report = json.loads(proc.stdout)
    probe = {"cmd": "python -m clustereval.k8s_churn", "rc": proc.returncode, "stdout": proc.stdout,
             "stderr": proc.stderr}
    results = checks.evaluate_many("orchestration.k8s.sandbox_batches", Context(
        subject="_cluster", probes={"orchestration_k8s_sandbox": probe}, options={"harness": "k8s"}), "run")
    assert [b["ready"] for b in report["batches"]] == [2, 4, report["batches"][2]["ready"]]
    assert 0 < report["batches"][2]["pending"] < 16
    assert [r["status"] for r in results] == ["pass", "pass", "warn"], [r["summary"] for r in results]
    assert "Insufficient cpu" in results[2]["summary"], results[2]["summary"]
    assert left == []
