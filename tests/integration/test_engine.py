"""The engine end to end on the simulated cluster: variants, pair and GPU subjects, series, sessions that
record as they go, select-before-run, interruption, the action journal and undo.

Needs root and the Debian packages `make install` sets up (slurm-wlm, munge, openssh-server, iperf3,
nftables); iperf3, ping and the sessions run for real on the simulated nodes.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from clustereval import journal, results
from clustereval.sim import cluster
from tests.integration.simrun import (
    BIN,
    PLAYBOOK,
    REPO,
    REQUIRES_SIM,
    ansible_env,
    load_result_list,
    read_inventory,
    run_playbook,
    simulated_cluster,
    ssh,
)

pytestmark = [*REQUIRES_SIM, pytest.mark.skipif(shutil.which("iperf3") is None, reason="iperf3 is not installed")]

MESH = ["-e", "clustereval_phases=performance", "--tags", "network.mesh", "-e", "clustereval_network_mesh_duration_s=2",
        "-e", "clustereval_network_mesh_streams=2", "-e", "clustereval_network_mesh_ping_count=10"]
SESSION_BASE = Path("/var/tmp/clustereval/sessions")


def telemetry(duration: int, poll: float = 1) -> list[str]:
    # Only the sampler: the rest of the reliability phase (burn-in, endurance loads, orchestration churn) is not
    # what these tests watch.
    return ["-e", "clustereval_phases=reliability", "--tags", "telemetry",
            "-e", f"clustereval_telemetry_duration_s={duration}", "-e", f"clustereval_telemetry_poll_s={poll}"]


def start_playbook(inventory: Path, *args: str) -> subprocess.Popen:
    """ansible-playbook in its own process group, as a terminal runs it (Ctrl-C reaches the whole group)."""
    return subprocess.Popen([str(BIN / "ansible-playbook"), str(PLAYBOOK), "-i", str(inventory), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=ansible_env(),
                            cwd=REPO, start_new_session=True)


def series_rows(path: Path) -> list[dict]:
    if not path.exists():
        return []
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def processes(pattern: str) -> list[str]:
    """Command lines of live processes containing ``pattern`` (the simulated nodes share this PID space)."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if pattern in cmdline and "pytest" not in cmdline:
            found.append(cmdline.strip())
    return found


def session_processes(run_id: str) -> list[int]:
    """Live processes of a run's sessions on the simulated nodes: the supervisors and their streams work
    in their session's directory, <base>/<run id>/<host>.<name>."""
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                if f"/{run_id}/" in os.readlink(f"/proc/{pid}/cwd") + "/":
                    found.append(int(pid))
            except OSError:
                continue
    return found


def by_identity(items: list[dict]) -> dict:
    return {results.identity(r)[:2]: r for r in results.latest(items)}


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    with simulated_cluster(tmp_path_factory.mktemp("sim-engine"), 2, "reference") as directory:
        yield directory


# ----------------------------------------------------------------------------------------- the mesh


@pytest.fixture(scope="module")
def mesh(tmp_path_factory):
    with simulated_cluster(tmp_path_factory.mktemp("sim-netfaults"), 3, "network-faults") as directory:
        run_dir = tmp_path_factory.mktemp("runs") / "mesh"
        proc = run_playbook(directory / "inventory.ini", *MESH, "-e", f"clustereval_out={run_dir}", timeout=300)
        assert proc.returncode == 0, proc.stdout[-3000:]
        yield directory, run_dir


def test_mesh_names_the_slow_lossy_and_asymmetric_pairs(mesh):
    _, run_dir = mesh
    items = load_result_list(run_dir)
    assert all(results.problems(r) == [] for r in items)
    keyed = by_identity(items)
    into3 = [keyed[("network.mesh.tcp_bandwidth", f"node{n}->node3")] for n in (1, 2)]
    assert all(r["status"] == "fail" and r["value"] < 1.0 for r in into3), into3
    assert all(r["params"] == {"streams": 2, "duration_s": 2} for r in into3)
    out_of3 = keyed[("network.mesh.tcp_bandwidth", "node3->node1")]
    assert out_of3["status"] != "fail" and out_of3["value"] > 1.0
    healthy = keyed[("network.mesh.tcp_bandwidth", "node1->node2")]
    assert healthy["status"] != "fail", healthy["summary"]
    for pair in ("node1+node3", "node2+node3"):
        assert keyed[("network.mesh.tcp_asymmetry", pair)]["status"] == "fail"
    assert any(keyed[("network.mesh.loss", f"node{n}->node3")]["status"] != "pass" for n in (1, 2))
    summary = keyed[("network.mesh.pairs", "_cluster")]
    assert summary["status"] == "fail" and summary["value"] == 6
    assert "node1->node3" in summary["summary"] and "node2->node3" in summary["summary"]
    # every pair's raw output is kept and pointed at; the intervals are one series for all pairs
    for r in [*into3, out_of3]:
        assert r["artifacts"] and all((run_dir / a).is_file() for a in r["artifacts"])
        assert r["series"][0]["path"] == "series/_cluster/network-mesh-tcp.csv"
    rows = series_rows(run_dir / "series/_cluster/network-mesh-tcp.csv")
    assert {(r["source"], r["destination"]) for r in rows} == {
        (f"node{a}", f"node{b}") for a in (1, 2, 3) for b in (1, 2, 3) if a != b}


def test_mesh_servers_are_journaled_and_gone(mesh):
    directory, run_dir = mesh
    entries = journal.load(run_dir)
    assert sum(1 for e in entries if e["state"] == "applied") == 3
    assert journal.pending(run_dir) == []
    hosts, _ = read_inventory(directory)
    assert not [p for p in processes("iperf3 -s") if any(a in p for a in hosts.values())]
    assert not (SESSION_BASE / json.loads((run_dir / "run.json").read_text())["run_id"]).exists()


def test_variants_of_one_check_do_not_overwrite_each_other(mesh):
    directory, run_dir = mesh
    before = load_result_list(run_dir)
    proc = run_playbook(directory / "inventory.ini", *MESH, "-e", "clustereval_network_mesh_streams=1",
                        "--tags", "network.mesh.tcp_bandwidth", "-e", f"clustereval_out={run_dir}", timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:]
    latest = results.latest(load_result_list(run_dir))
    variants = [r for r in latest if r["check"] == "network.mesh.tcp_bandwidth" and r["subject"] == "node1->node2"]
    assert sorted(r["params"]["streams"] for r in variants) == [1, 2]
    assert len(latest) > len(results.latest(before))
    score = json.loads((run_dir / "score.json").read_text())
    assert score["counts"]["pass"] + score["counts"]["warn"] + score["counts"]["fail"] >= len(variants)
    report = (run_dir / "report.md").read_text()
    for streams in (1, 2):  # Markdown cells escape ">"
        assert f"node1-&gt;node2 · duration_s=2, streams={streams}" in report
    junit = (run_dir / "junit.xml").read_text()
    assert junit.count('name="node1-&gt;node2 · duration_s=2, streams=') >= 2


# ----------------------------------------------------------------------------------------- the sampler


def test_sampler_records_mid_run_faults_per_gpu_and_the_xid_as_it_comes(tmp_path):
    with simulated_cluster(tmp_path / "sim", 3, "telemetry-faults") as directory:
        run_dir = tmp_path / "run"
        proc = run_playbook(directory / "inventory.ini", *telemetry(12, 1), "-e", f"clustereval_out={run_dir}")
        assert proc.returncode == 0, proc.stdout[-3000:]
    items = load_result_list(run_dir)
    keyed = by_identity(items)
    assert keyed[("telemetry.kernel.xid", "node3/gpu2")]["status"] == "fail"
    assert keyed[("telemetry.gpu.throttle", "node3/gpu1")]["status"] == "fail"
    assert "hw_slowdown" in keyed[("telemetry.gpu.throttle", "node3/gpu1")]["summary"]
    assert keyed[("telemetry.gpu.temperature", "node2/gpu3")]["status"] == "fail"
    assert keyed[("telemetry.gpu.temperature", "node1/gpu0")]["status"] == "pass"
    assert keyed[("telemetry.gpu.throttle", "node1/gpu0")]["status"] == "pass"
    assert keyed[("telemetry.gpu.temperature", "node2/gpu3")]["expected"]["matched"] == "hopper"
    # the Xid was recorded at the poll that brought it, before the session ended
    xids = [r for r in items if r["check"] == "telemetry.kernel.xid" and r["subject"] == "node3/gpu2"]
    session_end = keyed[("telemetry.sampler.samples", "node3")]["measured"]["ended"]
    assert len(xids) == 2 and xids[0]["started"] < session_end
    # the series round-trips: one row per GPU per sample, loadable as CSV
    ref = keyed[("telemetry.gpu.temperature", "node1/gpu0")]["series"][0]
    rows = series_rows(run_dir / ref["path"])
    assert len(rows) == ref["rows"] and {r["index"] for r in rows} == {str(i) for i in range(8)}
    assert len(rows) // 8 >= 8 and {"timestamp", "temperature.gpu", "host"} <= set(rows[0])
    kernel = series_rows(run_dir / "series/node3/telemetry-kernel.csv")
    assert [r["code"] for r in kernel] == ["79"]


def test_sigint_mid_session_keeps_the_samples_and_the_report_says_interrupted(reference, tmp_path):
    run_dir = tmp_path / "run"
    proc = start_playbook(reference / "inventory.ini", *telemetry(90, 1), "-e", f"clustereval_out={run_dir}")
    try:
        series = [run_dir / "series" / node / "telemetry-gpu.csv" for node in ("node1", "node2")]
        assert cluster._wait(lambda: all(len(series_rows(s)) >= 16 for s in series), 60), proc.stdout
        seen = [len(series_rows(s)) for s in series]
        os.killpg(proc.pid, signal.SIGINT)
        proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode != 0
    assert [len(series_rows(s)) for s in series] >= seen
    info = json.loads((run_dir / "run.json").read_text())
    assert info.get("interrupted") and info.get("ended")
    keyed = by_identity(load_result_list(run_dir))
    for node in ("node1", "node2"):
        samples = keyed[("telemetry.sampler.samples", node)]
        assert samples["status"] == "error" and "cut short" in samples["summary"]
        assert samples["measured"]["interrupted"]
        assert keyed[("telemetry.gpu.temperature", f"{node}/gpu0")]["status"] == "pass"
    assert keyed[("harness.run.interrupted", "_cluster")]["status"] == "error"
    assert "This run is incomplete: interrupted" in (run_dir / "report.md").read_text()
    assert journal.pending(run_dir) == []
    assert cluster._wait(lambda: not session_processes(info["run_id"]), 10), session_processes(info["run_id"])
    assert not (SESSION_BASE / info["run_id"]).exists()


def test_a_deselected_slow_test_never_starts_on_the_node(reference, tmp_path):
    seen: list[str] = []
    stop = threading.Event()

    def watch():
        while not stop.is_set():
            seen.extend(p for p in processes("nvidia-smi") if "-lms" in p)
            seen.extend(processes("iperf3 -s"))
            time.sleep(0.05)

    unselected = ["--skip-tags", "telemetry,network,gpu.compute,burnin,orchestration"]
    for selected, tags in ((False, unselected), (True, ["--tags", "telemetry"])):
        seen.clear()
        stop.clear()
        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        run_dir = tmp_path / f"run-{selected}"
        proc = run_playbook(reference / "inventory.ini", "-e", "clustereval_phases=performance,reliability",
                            "-e", "clustereval_telemetry_duration_s=3", "-e", "clustereval_telemetry_poll_s=1",
                            "-e", "clustereval_network_mesh_duration_s=1", "--skip-tags", "storage", *tags,
                            "-e", f"clustereval_out={run_dir}")
        stop.set()
        watcher.join()
        assert proc.returncode == 0, proc.stdout[-3000:]
        checks = {r["check"] for r in load_result_list(run_dir)} if (run_dir / "results.jsonl").exists() else set()
        if selected:  # the control: the same watcher sees the sampler when it is selected
            assert seen and any(c.startswith("telemetry.") for c in checks)
        else:
            assert seen == [] and not any(c.startswith(("telemetry.", "network.")) for c in checks)
            assert not list((run_dir / "raw").glob("*/network-*")) and not (run_dir / "journal.jsonl").exists()


def test_a_journal_entry_left_by_a_killed_run_is_undone(reference, tmp_path):
    run_dir = tmp_path / "runs" / "killed"
    proc = start_playbook(reference / "inventory.ini", *telemetry(300, 2), "-e", f"clustereval_out={run_dir}")
    try:
        assert cluster._wait(lambda: len(journal.pending(run_dir)) == 2 and len(
            series_rows(run_dir / "series" / "node1" / "telemetry-gpu.csv")) >= 8, 60), proc.stdout
        family = {proc.pid} | cluster._descendants({proc.pid})
        for pid in family:  # a lost controller: nothing of ansible-playbook gets to clean up
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    run_id = json.loads((run_dir / "run.json").read_text())["run_id"]
    assert len(journal.pending(run_dir)) == 2
    assert len(session_processes(run_id)) >= 4  # the nodes' sessions run on, nobody watching

    # the next run in the same runs folder says so
    later = tmp_path / "runs" / "later"
    proc2 = run_playbook(reference / "inventory.ini", "-e", "clustereval_phases=audit", "--tags", "audit.os.kernel",
                         "-e", f"clustereval_out={later}")
    assert proc2.returncode == 0, proc2.stdout[-2000:]
    leftovers = by_identity(load_result_list(later))[("harness.journal.leftovers", "_cluster")]
    assert leftovers["status"] == "warn" and str(run_dir) in leftovers["summary"]

    undo = subprocess.run([str(BIN / "clustereval"), "undo", str(run_dir)], capture_output=True, text=True,
                          env=ansible_env(), cwd=REPO, timeout=120)
    assert undo.returncode == 0, undo.stdout + undo.stderr
    assert journal.pending(run_dir) == []
    assert [e["by"] for e in journal.load(run_dir) if e["state"] == "restored"] == ["undo", "undo"]
    assert cluster._wait(lambda: not session_processes(run_id), 10), session_processes(run_id)
    hosts, _ = read_inventory(reference)
    assert ssh(reference, hosts["node1"], f"test -e {SESSION_BASE / run_id} && echo left || echo gone"
               ).stdout.strip() == "gone"
    again = subprocess.run([str(BIN / "clustereval"), "undo", str(run_dir)], capture_output=True, text=True,
                           env=ansible_env(), cwd=REPO, timeout=60)
    assert again.returncode == 0 and "nothing to undo" in again.stdout


def test_a_role_included_from_another_playbook_starts_its_own_run(reference, tmp_path):
    playbook = tmp_path / "bring-up.yml"
    out = tmp_path / "bring-up-run"
    playbook.write_text(f"""---
- name: A provider's bring-up pipeline using one clustereval role
  hosts: gpu_nodes
  gather_facts: false
  tasks:
    - name: Sample the GPUs for a few seconds
      ansible.builtin.include_role:
        name: clustereval.gpu.telemetry
      vars:
        clustereval_out: {out}
        clustereval_telemetry_duration_s: 2
        clustereval_telemetry_poll_s: 1
""")
    proc = subprocess.run([str(BIN / "ansible-playbook"), str(playbook), "-i", str(reference / "inventory.ini")],
                          capture_output=True, text=True, env=ansible_env(), cwd=REPO, timeout=180)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert (out / "run.json").is_file() and (out / "facts" / "node1.json").is_file()
    keyed = by_identity(load_result_list(out))
    assert keyed[("telemetry.sampler.samples", "node1")]["status"] == "pass"
    assert json.loads((out / "facts" / "node1.json").read_text())["gpu_model"] == "NVIDIA H100 80GB HBM3"
    # and a bad value stops the role before anything runs, naming the variable
    bad = subprocess.run([str(BIN / "ansible-playbook"), str(playbook), "-i", str(reference / "inventory.ini"),
                          "-e", "clustereval_telemetry_interval_ms=5"], capture_output=True, text=True,
                         env=ansible_env(), cwd=REPO, timeout=120)
    assert bad.returncode != 0 and "clustereval_telemetry_interval_ms" in bad.stdout
