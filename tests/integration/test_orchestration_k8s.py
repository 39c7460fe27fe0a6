"""Kubernetes GPU pod churn on the simulated cluster: the churn runner (clustereval.k8s_churn, as the probe runs it
on the controller with the cluster's kubectl) creates and deletes GPU pods; on k8s-reference every round passes
and nothing is left; on k8s-stuck-delete (a pod finalizer nothing clears) the first delete hangs: a fail. The
sandbox batches; and the PVC lifecycle through the simulated storage controllers (a real backing directory per
volume, bind-mounted into the writer pod): a pass on k8s-reference, slow figures on k8s-slow-volumes, a leak on
k8s-volume-leak, a provisioner's error."""

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
                            "orchestration.k8s.sandbox_batches,orchestration.k8s.pvc_lifecycle",
                            "-e", f"clustereval_out={run_dir}", timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:]
    keyed = by_key(load_result_list(run_dir))
    assert keyed[("orchestration.k8s.gpu_pod_churn", "_cluster")]["status"] == "pass"
    assert keyed[("orchestration.k8s.delete_hang", "_cluster")]["status"] == "pass"
    pvc = keyed[("orchestration.k8s.pvc_lifecycle", "_cluster")]
    assert pvc["status"] == "pass" and pvc["artifacts"] == ["raw/_cluster/orchestration-k8s-pvc.json"], pvc
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


# ------------------------------------------------------------------ the PVC lifecycle (clustereval.k8s_pvc)

def pvc_lifecycle(tmp_path, profile, *extra, overrides=None):
    """The PVC runner against a 2-node simulated cluster (3 rounds of 4 MiB, round 0 the warm-up); its report, the
    check's result, and what the API and the volumes' backing directories hold afterwards."""
    directory = tmp_path / "sim"
    cluster.up(directory, 2, profile)
    env = {**os.environ, **cluster.kubectl_env(directory)}
    try:
        proc = subprocess.run([sys.executable, "-m", "clustereval.k8s_pvc", "--run", "pvc", "--image", "busybox:1.36",
                               "--rounds", "3", "--write-mib", "4", "--tolerate", "nvidia.com/gpu", "--bind-timeout",
                               "20", "--pod-timeout", "20", "--cleanup-timeout", "4", "--poll", "0.2", *extra],
                              env=env, capture_output=True, text=True, timeout=180)
        left = {kind: json.loads(subprocess.run(["kubectl", "get", kind, "-o", "json"], env=env, capture_output=True,
                                                text=True, timeout=30).stdout)["items"] for kind in ("pvc", "pv")}
        backing = sorted(p.name for p in (directory / "k8s" / "volumes").glob("*"))
    finally:
        cluster.down(directory)
    probe = {"cmd": "python -m clustereval.k8s_pvc", "rc": proc.returncode, "stdout": proc.stdout,
             "stderr": proc.stderr}
    result = checks.evaluate("orchestration.k8s.pvc_lifecycle", Context(
        subject="_cluster", probes={"orchestration_k8s_pvc": probe},
        options={"harness": "k8s", **({"baseline_overrides": overrides} if overrides else {})}), "run")
    return json.loads(proc.stdout), result, left, backing


def test_pvc_rounds_write_through_a_real_volume_and_leave_nothing(tmp_path):
    report, result, left, backing = pvc_lifecycle(tmp_path, "k8s-reference")
    rounds = report["rounds"]
    assert [r["warmup"] for r in rounds] == [True, False, False]
    # the default class (local-path, WaitForFirstConsumer) bound each claim once its pod was scheduled; the pod
    # wrote the whole file through the bind-mounted volume and the volume went with its claim
    assert all(r["write_ok"] and r["written_bytes"] == 4 * 1048576 and r["volume"] for r in rounds), rounds
    assert result["status"] == "pass", result["summary"]
    assert "over 2 measured rounds (warm-up round excluded:" in result["summary"]
    assert left == {"pvc": [], "pv": []} and backing == []


def test_a_slow_control_plane_and_provisioner_show_in_the_figures(tmp_path):
    # 1 s to schedule, 3 s to provision once scheduled, 2 s to delete a volume: a write after >= 4 s, a cleanup
    # after >= 2 s; graded against tight limits it warns, and says both figures
    tight = {"orchestration.k8s.pvc_lifecycle": {"warn": 3, "fail": 60},
             "orchestration.k8s.pvc_cleanup": {"warn": 60, "fail": 300}}
    report, result, left, _ = pvc_lifecycle(tmp_path, "k8s-slow-volumes", overrides=tight)
    measured = [r for r in report["rounds"] if not r["warmup"]]
    assert all(r["write_ok"] for r in report["rounds"]), report["rounds"]
    assert all(r["written_s"] >= 3.5 and r["cleanup_s"] >= 1.5 for r in measured), measured
    assert result["status"] == "warn", result["summary"]
    assert "write expected within 3" in result["summary"]
    assert left["pv"] == []


def test_a_volume_the_provisioner_never_deletes_is_a_leak_and_stops_the_run(tmp_path):
    report, result, left, backing = pvc_lifecycle(tmp_path, "k8s-volume-leak")
    assert len(report["rounds"]) == 1 and report["rounds"][0]["cleanup_timed_out"]
    assert result["status"] == "fail", result["summary"]
    assert "the warm-up round 0" in result["summary"] and "phase Released" in result["summary"]
    assert [pv["status"]["phase"] for pv in left["pv"]] == ["Released"] and len(backing) == 1


def test_a_claim_the_provisioner_cannot_serve_fails_with_its_event(tmp_path):
    profile = tmp_path / "nfs-broken.yml"
    profile.write_text("extends: k8s-reference\nnodes:\n  node1:\n    faults:\n      k8s_pvc_provisioning_fails: "
                       "'rpc error: code = DeadlineExceeded desc = mount nfs.storage.internal:/export timed out'\n")
    report, result, left, _ = pvc_lifecycle(tmp_path, str(profile), "--storage-class", "shared-fs",
                                            "--bind-timeout", "3")
    assert report["rounds"][0]["bound_s"] is None
    assert result["status"] == "fail", result["summary"]
    assert 'ProvisioningFailed: failed to provision volume with StorageClass "shared-fs"' in result["summary"]
    assert "timed out" in result["summary"] and left["pvc"] == []
