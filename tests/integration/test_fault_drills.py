"""Fault drills against the simulated provider (profile fault-drills): the role reboots nodes and injects Xids
through the nodes' real interfaces, and what it measures is compared with the simulator's ground truth.

Ground truth (``cluster.ground_truth``): when the sim saw the fault, when its health check drained the node,
when the provider rebooted and resumed it. The drills' times must match it within the poll's resolution.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest
import yaml

from clustereval import journal, results
from clustereval.sim import cluster
from tests.integration.simrun import (
    BIN,
    REPO,
    REQUIRES_SIM,
    ansible_env,
    load_result_list,
    run_playbook,
    simulated_cluster,
    truth,
)
from tests.integration.test_engine import processes, start_playbook

pytestmark = REQUIRES_SIM

FAST = ["-e", "clustereval_phases=reliability", "--tags", "fault",
        "-e", "clustereval_fault_injection_poll_interval_s=0.25", "-e", "clustereval_fault_injection_detect_limit_s=20",
        "-e", "clustereval_fault_injection_return_limit_s=45"]


def drill(directory: Path, run_dir: Path, targets: str, *args: str, opt_in: bool = True,
          timeout: int = 400) -> subprocess.CompletedProcess[str]:
    flags = ["-e", "clustereval_allow_destructive=true"] if opt_in else []
    return run_playbook(directory / "inventory.ini", *FAST, *flags, "-e", f"clustereval_destructive_targets={targets}",
                        "-e", f"clustereval_out={run_dir}", *args, timeout=timeout)


def faults(*entries: dict) -> list[str]:
    return ["-e", json.dumps({"clustereval_fault_injection_faults": list(entries)})]


def latest(run_dir: Path) -> dict:
    return {(r["check"], r["subject"], results.params_key(r.get("params"))): r
            for r in results.latest(load_result_list(run_dir))}


def drill_log(run_dir: Path, node: str, name: str) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "raw" / node / f"{name}.jsonl").read_text().splitlines()]


def fault_time(run_dir: Path, node: str, name: str) -> float:
    return next(e["fault_at"] for e in drill_log(run_dir, node, name) if e["kind"] == "fault")


@pytest.fixture(scope="module")
def drills(tmp_path_factory):
    with simulated_cluster(tmp_path_factory.mktemp("sim-drills"), 5, "fault-drills") as directory:
        yield directory


@pytest.fixture(scope="module")
def main_run(drills, tmp_path_factory):
    """Two targets, one at a time: each rebooted, then an Xid 79 by /dev/kmsg and by a secondary bus reset."""
    run_dir = tmp_path_factory.mktemp("runs") / "main"
    proc = drill(drills, run_dir, "node1,node2", "-e", "clustereval_fault_injection_max_nodes=1",
                 *faults({"method": "kmsg", "xid": 79}, {"method": "sbr", "xid": 79}))
    assert proc.returncode == 0, proc.stdout[-4000:]
    return run_dir


def test_every_drill_passes_on_a_provider_that_detects_and_repairs(main_run):
    got = latest(main_run)
    for node in ("node1", "node2"):
        assert got[("fault.reboot.recovery", node, "")]["status"] == "pass", got[("fault.reboot.recovery", node, "")]
        for method in ("kmsg", "sbr"):
            key = results.params_key({"method": method, "xid": 79})
            for check in ("fault.inject.detection", "fault.inject.return", "fault.inject.cleared",
                          "fault.inject.action", "fault.drill.bystanders"):
                assert got[(check, node, key)]["status"] == "pass", got[(check, node, key)]
    sbr = got[("fault.inject.detection", "node1", results.params_key({"method": "sbr", "xid": 79}))]
    assert "setpci -A linux-sysfs" in sbr["evidence"]["injection"]["command"]
    kmsg = got[("fault.inject.detection", "node1", results.params_key({"method": "kmsg", "xid": 79}))]
    assert kmsg["evidence"]["injection"]["line"].startswith("NVRM: Xid (PCI:0000:")


def test_measured_times_match_the_simulated_ground_truth(main_run, drills):
    got = latest(main_run)
    for node in ("node1", "node2"):
        for method in ("kmsg", "sbr"):
            name = f"fault-inject-{method}-xid79"
            t0 = fault_time(main_run, node, name)
            sim_fault = truth(drills, node, "fault", t0 - 2)[0]["t"]
            drained = truth(drills, node, "drained", sim_fault)[0]["t"]
            measured = got[("fault.inject.detection", node, results.params_key({"method": method, "xid": 79}))]
            assert abs(measured["value"] - (drained - sim_fault)) <= 1.0, (node, method, measured["value"],
                                                                          drained - sim_fault)
        t0 = fault_time(main_run, node, "fault-reboot")
        down = truth(drills, node, "down", t0 - 1)[0]["t"]
        up = truth(drills, node, "sshd_up", down)[0]["t"]
        timeline = got[("fault.reboot.recovery", node, "")]["evidence"]["timeline"]
        assert abs(timeline["down"]["after_s"] - (down - t0)) <= 1.0
        assert abs(timeline["ssh_back"]["after_s"] - (up - t0)) <= 1.0


def test_never_more_than_the_configured_number_of_nodes_at_once(main_run, drills):
    for name in ("fault-reboot", "fault-inject-kmsg-xid79", "fault-inject-sbr-xid79"):
        windows = []
        for node in ("node1", "node2"):
            times = [t for e in drill_log(main_run, node, name) for t in (e.get("sent"), e.get("at")) if t]
            windows.append((min(times), max(times)))
        (_, first_ended), (second_began, _) = sorted(windows)
        assert first_ended <= second_began, f"{name}: the second node's drill began before the first's ended"
    # and the simulated nodes agree: node2 was not rebooted while node1 was down
    node1_down = truth(drills, "node1", "down")[0]["t"]
    node1_up = truth(drills, "node1", "sshd_up", node1_down)[0]["t"]
    assert not truth(drills, "node2", "down", node1_down - 0.01) or \
        truth(drills, "node2", "down", node1_down - 0.01)[0]["t"] > node1_up


def test_every_change_was_journaled_and_restored(main_run):
    entries = journal.load(main_run)
    applied = [e for e in entries if e["state"] == "applied"]
    assert applied and all(e["destructive"] for e in applied)
    assert {e["detail"].get("method") for e in applied} >= {"kmsg", "sbr"}
    assert journal.pending(main_run) == []


def test_the_report_draws_each_drills_timeline(main_run):
    report = (main_run / "report.md").read_text()
    assert "## Timelines" in report and "detected +" in report and "gpu_job +" in report
    series = (main_run / "series" / "node1" / "fault-inject-sbr-xid79.csv").read_text().splitlines()
    assert series[0].startswith("event,after_s,uncertainty_s") and any(r.startswith("detected,") for r in series)


def test_a_health_check_whose_exit_status_nobody_reads_fails_detection(drills, tmp_path):
    run_dir = tmp_path / "run"
    proc = drill(drills, run_dir, "node3", "-e", "clustereval_fault_injection_reboot=false",
                 "-e", "clustereval_fault_injection_detect_limit_s=12", *faults({"method": "kmsg", "xid": 79}))
    assert proc.returncode == 0, proc.stdout[-3000:]
    key = results.params_key({"method": "kmsg", "xid": 79})
    got = latest(run_dir)
    detection = got[("fault.inject.detection", "node3", key)]
    assert detection["status"] == "fail" and "within 12 s" in detection["summary"]
    assert detection["evidence"]["polls"] >= 20 and detection["series"][0]["path"].endswith(".csv")
    assert got[("fault.inject.action", "node3", key)]["status"] == "fail"
    assert got[("fault.inject.return", "node3", key)]["status"] == "skip"
    assert truth(drills, "node3", "healthcheck_run")  # the check did run: it just drained nothing


@pytest.mark.parametrize("opt_in, targets, said", [
    (False, "node4", "clustereval_allow_destructive=true AND"),
    (True, "", "clustereval_allow_destructive=true AND"),
    (True, "node9", "the inventory does not have: node9"),
])
def test_refuses_to_start_without_the_flag_and_the_target_list(drills, tmp_path, opt_in, targets, said):
    before = len(cluster.ground_truth(drills, "node4"))
    run_dir = tmp_path / "run"
    args = ["-e", f"clustereval_destructive_targets={targets}"] if targets else []
    proc = run_playbook(drills / "inventory.ini", *FAST, *args, "-e", f"clustereval_out={run_dir}",
                        *(["-e", "clustereval_allow_destructive=true"] if opt_in else []), timeout=120)
    assert proc.returncode != 0 and said in proc.stdout, proc.stdout[-2000:]
    assert not (run_dir / "journal.jsonl").exists()
    assert not [e for e in cluster.ground_truth(drills, "node4")[before:] if e["event"] in ("fault",
                                                                                          "reboot_requested")]


def test_a_dry_run_changes_nothing_and_shows_the_plan(drills, tmp_path):
    before = len(cluster.ground_truth(drills, "node4"))
    run_dir = tmp_path / "run"
    proc = drill(drills, run_dir, "node4", "-e", "clustereval_fault_injection_dry_run=true",
                 *faults({"method": "sbr", "xid": 79}), opt_in=False)
    assert proc.returncode == 0, proc.stdout[-3000:]
    got = latest(run_dir)
    reboot = got[("fault.reboot.recovery", "node4", "")]
    assert reboot["status"] == "skip" and "systemctl reboot" in reboot["summary"]
    sbr = got[("fault.inject.detection", "node4", results.params_key({"method": "sbr", "xid": 79}))]
    assert sbr["status"] == "skip" and "BRIDGE_CONTROL.w=0040:0040" in sbr["summary"]
    assert not (run_dir / "journal.jsonl").exists()
    assert not [e for e in cluster.ground_truth(drills, "node4")[before:] if e["event"] in ("fault",
                                                                                          "reboot_requested")]


def test_ctrl_c_mid_drill_restores_keeps_the_log_and_leaves_nothing(drills, tmp_path):
    run_dir = tmp_path / "run"
    proc = start_playbook(drills / "inventory.ini", *FAST, "-e", "clustereval_allow_destructive=true",
                          "-e", "clustereval_destructive_targets=node4",
                          "-e", "clustereval_fault_injection_reboot=false",
                          "-e", f"clustereval_out={run_dir}", *faults({"method": "dcgm", "xid": 48}))
    log = run_dir / "raw" / "node4" / "fault-inject-dcgm-xid48.jsonl"
    try:
        assert cluster._wait(lambda: log.exists() and '"kind": "fault"' in log.read_text(), 90), proc.stdout
        os.killpg(proc.pid, signal.SIGINT)
        proc.wait(timeout=90)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    entries = [json.loads(line) for line in log.read_text().splitlines()]
    assert entries[-1]["kind"] == "end" and entries[-1]["reason"] == "interrupted"
    assert [e for e in entries if e.get("step") == "restore" and e.get("rc") == 0]
    assert journal.pending(run_dir) == []
    assert truth(drills, "node4", "fault", entries[0]["at"], value=0)  # the injected DCGM field is back at 0
    assert not processes("fault_drill") and "INTERRUPTED" in (run_dir / "report.md").read_text().upper()
    got = latest(run_dir)
    detection = got[("fault.inject.detection", "node4", results.params_key({"method": "dcgm", "xid": 48}))]
    assert detection["status"] in ("error", "pass"), detection
    undo = subprocess.run([str(BIN / "clustereval"), "undo", str(run_dir)], capture_output=True, text=True,
                          env=ansible_env(), cwd=REPO, timeout=120)
    assert undo.returncode == 0 and "nothing to undo" in undo.stdout, undo.stdout + undo.stderr


def test_bystanders_and_a_resume_without_repair_are_caught(tmp_path):
    profile = tmp_path / "careless.yml"
    profile.write_text(yaml.safe_dump({
        "extends": "fault-drills",
        "nodes": {
            # resumes after 15 s without a reboot: the GPU stays off the bus
            "node1": {"provider": {"remediation": {"mode": "resume", "after_s": 15}}},
            # its own check starts hanging 20 s after boot (the drill's baseline is taken before)
            "node2": {"provider": {"health_check": {"mode": "times_out", "from_s": 20}}},
        },
    }))
    with simulated_cluster(tmp_path / "sim", 3, str(profile)) as directory:
        run_dir = tmp_path / "run"
        proc = drill(directory, run_dir, "node1", "-e", "clustereval_fault_injection_reboot=false",
                     *faults({"method": "sbr", "xid": 79}))
        assert proc.returncode == 0, proc.stdout[-3000:]
        key = results.params_key({"method": "sbr", "xid": 79})
        got = latest(run_dir)
        cleared = got[("fault.inject.cleared", "node1", key)]
        assert cleared["status"] == "fail" and "the fault persists" in cleared["summary"]
        action = got[("fault.inject.action", "node1", key)]
        assert action["status"] == "fail" and "without one" in action["summary"]
        bystanders = got[("fault.drill.bystanders", "node1", key)]
        assert bystanders["status"] == "fail" and bystanders["value"] == ["node2"], bystanders
        assert journal.pending(run_dir) == []
        # the drill's restore rebooted node1, whose GPU the provider had left off the bus
        assert truth(directory, "node1", "reboot_requested", by="systemctl reboot")


def test_kubernetes_reboot_and_detection_by_the_providers_node_condition(tmp_path):
    with simulated_cluster(tmp_path / "sim", 3, "k8s-fault-drills") as directory:
        run_dir = tmp_path / "run"
        env = {**ansible_env(), **cluster.kubectl_env(directory)}  # kubectl and its API on the controller
        proc = subprocess.run(
            [str(BIN / "ansible-playbook"), str(REPO / "playbooks" / "evaluate.yml"), "-i",
             str(directory / "inventory.ini"), *FAST, "-e", "clustereval_allow_destructive=true",
             "-e", "clustereval_destructive_targets=node2", "-e", "clustereval_harness=k8s",
             "-e", "clustereval_k8s_api_host=localhost", "-e", f"clustereval_out={run_dir}",
             *faults({"method": "kmsg", "xid": 79})], capture_output=True, text=True, env=env, cwd=REPO, timeout=400)
        assert proc.returncode == 0, proc.stdout[-4000:]
        got = latest(run_dir)
        reboot = got[("fault.reboot.recovery", "node2", "")]
        assert reboot["status"] == "pass", reboot
        key = results.params_key({"method": "kmsg", "xid": 79})
        detection = got[("fault.inject.detection", "node2", key)]
        assert detection["status"] == "pass" and "NvidiaGPUProblem" in detection["summary"], detection
        for check in ("fault.inject.return", "fault.inject.cleared", "fault.inject.action", "fault.drill.bystanders"):
            assert got[(check, "node2", key)]["status"] == "pass", got[(check, "node2", key)]
        t0 = fault_time(run_dir, "node2", "fault-inject-kmsg-xid79")
        sim_fault = truth(directory, "node2", "fault", t0 - 2)[0]["t"]
        detected = truth(directory, "node2", "k8s_detected", sim_fault)[0]["t"]
        assert abs(detection["value"] - (detected - sim_fault)) <= 1.0
        # our cordon was lifted once the node was back, and every test pod is gone
        assert truth(directory, "node2", "k8s_uncordoned", by="kubectl")
        applied = [e for e in journal.load(run_dir) if e["state"] == "applied"]
        assert any(e["host"] == "localhost" and "uncordon" in e["undo"]["cmd"] for e in applied)
        assert journal.pending(run_dir) == []
        pods = subprocess.run(["kubectl", "get", "pods", "-A", "-o", "json"], capture_output=True, text=True,
                              env=env, timeout=30)
        assert "clustereval-drill" not in pods.stdout
