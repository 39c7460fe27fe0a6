"""The inject drill on a simulated AMD MI300X node: an uncorrectable UMC RAS error instead of the Xid, timed the
same way and compared with the simulator's ground truth, under Slurm and under Kubernetes.

The provider is amd-mi300x's (its health check drains on amdgpu's uncorrectable RAS lines and on a short GPU
count), made as quick as the NVIDIA drills' fault-drills profile: a 5 s HealthCheckInterval and a reboot of a
node drained for 5 s. The sim has no debugfs, so ``auto`` falls back from ``ras`` to the kernel log.
"""

from __future__ import annotations

import json
import subprocess
import time

import yaml

from clustereval import journal, results
from clustereval.sim import cluster
from tests.integration.simrun import BIN, REPO, REQUIRES_SIM, ansible_env, simulated_cluster, truth
from tests.integration.test_fault_drills import FAST, drill, drill_log, fault_time, faults, latest

pytestmark = REQUIRES_SIM

FAULT = {"method": "auto", "fault": "ras_umc_ue"}


def test_a_ras_error_is_detected_drained_and_returned_like_an_xid(tmp_path):
    profile = tmp_path / "amd-drills.yml"
    profile.write_text(yaml.safe_dump({
        "extends": "amd-mi300x",
        "cluster": {"name": "amd-drills", "provider": {
            "health_check": {"mode": "drain", "interval_s": 5, "after_s": 0, "checks": ["amd_ras", "amd_gpu_count"]},
            "remediation": {"mode": "reboot", "after_s": 5},
            "reboot": {"shutdown_s": 1, "down_s": 2, "slurmd_s": 1}}},
    }))
    with simulated_cluster(tmp_path / "sim", 2, str(profile)) as directory:
        run_dir = tmp_path / "run"
        began = time.time()
        proc = drill(directory, run_dir, "node2", "-e", "clustereval_fault_injection_reboot=false",
                     *faults({"method": "auto", "xid": 79}))
        assert proc.returncode == 0, proc.stdout[-4000:]
        got = latest(run_dir)
        key = results.params_key(FAULT)
        detection = got[("fault.inject.detection", "node2", key)]
        assert detection["status"] == "pass" and detection["params"] == FAULT, detection
        injection = detection["evidence"]["injection"]
        assert injection["method"] == "kmsg" and injection["fault"] == "ras_umc_ue"  # no debugfs in the sim
        assert injection["line"] == "amdgpu 0000:05:00.0: 1 uncorrectable hardware errors detected in umc block"
        assert detection["evidence"]["timeline"]["detected"]["reason"].startswith("AMD RAS UE umc 0000:05:00.0")
        log = drill_log(run_dir, "node2", "fault-inject-auto-ras_umc_ue")
        prepared = [e["step"] for e in log if e.get("step", "").startswith("prepare-")]
        assert prepared == ["prepare-ras", "prepare-kmsg"], prepared
        assert "debugfs is not mounted" in log[[e.get("step") for e in log].index("prepare-ras")]["stdout"]
        for check in ("fault.inject.return", "fault.inject.cleared", "fault.inject.action", "fault.drill.bystanders"):
            assert got[(check, "node2", key)]["status"] == "pass", got[(check, "node2", key)]

        # the times measured are the simulator's: the fault to the drain, and the drain to the resume
        t0 = next(e["fault_at"] for e in log if e["kind"] == "fault")
        sim_fault = truth(directory, "node2", "fault", t0 - 2)[0]
        assert "uncorrectable hardware errors detected in umc block" in sim_fault["line"]
        drained = truth(directory, "node2", "drained", sim_fault["t"])[0]
        assert drained["reason"] == "AMD RAS UE umc 0000:05:00.0"
        assert abs(detection["value"] - (drained["t"] - sim_fault["t"])) <= 1.0, (detection["value"], drained)
        resumed = truth(directory, "node2", "resumed", drained["t"])[0]
        back = got[("fault.inject.return", "node2", key)]
        assert abs(back["evidence"]["drain_s"] - (resumed["t"] - drained["t"])) <= 1.5, (back["evidence"], resumed)
        assert got[("fault.inject.cleared", "node2", key)]["value"] == 8  # amd-smi's physical GPUs

        # journaled and restored: the kernel log says the RAS line was a drill's (written once the node was back
        # from the provider's reboot, which emptied the ring buffer)
        applied = [e for e in journal.load(run_dir) if e["state"] == "applied"]
        assert [(e["detail"]["method"], e["detail"]["fault"]) for e in applied] == [("kmsg", "ras_umc_ue")]
        assert journal.pending(run_dir) == []
        kmsg = (directory / "nodes" / "node2" / "root" / "kmsg").read_text()
        assert "clustereval: the uncorrectable umc RAS error line above for 0000:05:00.0" in kmsg, kmsg[-2000:]

        # node1 was left alone
        assert not [e for e in cluster.ground_truth(directory, "node1") if e["t"] >= began and e["event"] in
                    ("fault", "drained", "reboot_requested", "down")], cluster.ground_truth(directory, "node1")
        assert "ras_umc_ue" not in json.dumps([r for r in latest(run_dir).values() if r["subject"] == "node1"])


def test_kubernetes_detects_the_ras_error_by_amds_node_condition_and_returns_the_node(tmp_path):
    """k8s-amd-fault-drills: the node problem detector's AMDGPUHBMError condition, the remediation reboot, our
    GPU job run as a ROCm pod and gone; the times are the simulator's."""
    with simulated_cluster(tmp_path / "sim", 2, "k8s-amd-fault-drills") as directory:
        run_dir = tmp_path / "run"
        env = {**ansible_env(), **cluster.kubectl_env(directory)}  # kubectl and its API on the controller
        proc = subprocess.run(
            [str(BIN / "ansible-playbook"), str(REPO / "playbooks" / "evaluate.yml"), "-i",
             str(directory / "inventory.ini"), *FAST, "-e", "clustereval_allow_destructive=true",
             "-e", "clustereval_destructive_targets=node2", "-e", "clustereval_harness=k8s",
             "-e", "clustereval_k8s_api_host=localhost", "-e", f"clustereval_out={run_dir}",
             "-e", "clustereval_fault_injection_reboot=false", *faults({"method": "auto", "xid": 79})],
            capture_output=True, text=True, env=env, cwd=REPO, timeout=400)
        assert proc.returncode == 0, proc.stdout[-4000:]
        got = latest(run_dir)
        key = results.params_key(FAULT)
        detection = got[("fault.inject.detection", "node2", key)]
        assert detection["status"] == "pass" and "AMDGPUHBMError" in detection["summary"], detection
        assert detection["evidence"]["injection"]["fault"] == "ras_umc_ue"
        for check in ("fault.inject.return", "fault.inject.cleared", "fault.inject.action", "fault.drill.bystanders"):
            assert got[(check, "node2", key)]["status"] == "pass", got[(check, "node2", key)]
        t0 = fault_time(run_dir, "node2", "fault-inject-auto-ras_umc_ue")
        sim_fault = truth(directory, "node2", "fault", t0 - 2)[0]
        assert "uncorrectable hardware errors detected in umc block" in sim_fault["line"]
        detected = truth(directory, "node2", "k8s_detected", sim_fault["t"])[0]
        assert detected["reason"] == "AMDGPURASError" and detected["condition"] == "AMDGPUHBMError", detected
        assert abs(detection["value"] - (detected["t"] - sim_fault["t"])) <= 1.0
        assert truth(directory, "node2", "reboot_requested", sim_fault["t"], by="remediation")
        # the GPU job after the return ran as a pod asking for amd.com/gpu with ROCm's image, and succeeded
        job = next(e for e in drill_log(run_dir, "node2", "fault-inject-auto-ras_umc_ue") if e.get("step") == "gpu_job")
        assert "amd.com/gpu" in job["cmd"] and "rocm/" in job["cmd"] and "phase=Succeeded" in job["stdout"], job
        assert journal.pending(run_dir) == []
        pods = subprocess.run(["kubectl", "get", "pods", "-A", "-o", "json"], capture_output=True, text=True,
                              env=env, timeout=30)
        assert "clustereval-drill" not in pods.stdout
        assert not truth(directory, "node1", "k8s_detected")
