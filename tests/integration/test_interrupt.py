"""Ctrl-C on ``clustereval evaluate`` against the simulated cluster: the whole run stops within seconds, on the
controller and on the nodes, cleans up after itself and keeps what it measured.

Needs root and Debian's slurm-wlm, munge, openssh-server and fio (``make install``).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.integration.simrun import BIN, REPO, REQUIRES_SIM, ansible_env, simulated_cluster

pytestmark = [*REQUIRES_SIM, pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed")]

# What the run starts: ansible-playbook and its workers, SSH clients and master connections of the run's own
# ControlPath folder, the probe runner on the nodes and the probes it runs.
RUN_MARKERS = (b"ansible-playbook", b"clustereval-runner-", b"Run probe commands on a node", b"fio\0--name=",
               b"fio --name=")
LEFT_BEHIND_WITHIN_S = 10.0


def run_processes() -> list[str]:
    """Every process on this host (the controller and the simulated nodes alike) that belongs to a run."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state not in ("Z", "X") and any(marker in cmdline for marker in RUN_MARKERS):
            words = cmdline.replace(b"\0", b" ")[:160].decode(errors="replace")
            found.append(f"{entry.name}: {words}")
    return found


def fio_files(sim: Path) -> list[Path]:
    return sorted(sim.glob("nodes/*/root/scratch/clustereval-fio.*"))


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    with simulated_cluster(tmp_path_factory.mktemp("sim-int"), 2, "reference") as directory:
        yield directory


def interrupt_when(sim: Path, run_dir: Path, args: list[str], ready, sig: int = signal.SIGINT):
    """Start ``clustereval evaluate``, send ``sig`` to its process group (as a terminal's Ctrl-C does) once
    ``ready()`` holds; (exit status, output, seconds from the signal to the exit)."""
    proc = subprocess.Popen([str(BIN / "clustereval"), "evaluate", "-i", str(sim / "inventory.ini"),
                             "--out", str(run_dir), *args], env=ansible_env(), cwd=REPO, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 240
    while not ready() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert proc.poll() is None, "the run ended before it could be interrupted:\n" + proc.communicate()[0][-3000:]
    assert ready(), "the run never reached the point to interrupt it"
    signalled = time.monotonic()
    os.killpg(proc.pid, sig)
    output = proc.communicate(timeout=120)[0]
    return proc.returncode, output, time.monotonic() - signalled, signalled


def assert_nothing_left(signalled: float) -> None:
    left = run_processes()
    while left and time.monotonic() - signalled < LEFT_BEHIND_WITHIN_S:
        time.sleep(0.2)
        left = run_processes()
    assert not left, f"still running {LEFT_BEHIND_WITHIN_S:.0f} s after the interruption:\n" + "\n".join(left)


def assert_interrupted_run(run_dir: Path, output: str) -> dict:
    info = json.loads((run_dir / "run.json").read_text())
    assert info["interrupted"].startswith("SIGINT (Ctrl-C) at "), info.get("interrupted")
    lines = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines() if line.strip()]
    assert any(r["check"] == "harness.run.interrupted" for r in lines)
    score = json.loads((run_dir / "score.json").read_text())
    done, planned = score["progress"]["done"], score["progress"]["planned"]
    assert planned > done
    headline = (run_dir / "report.md").read_text()
    assert "interrupted — SIGINT (Ctrl-C) at" in headline and f"{done} of {planned} checks done" in headline
    assert output.count("INTERRUPTED (SIGINT (Ctrl-C) at") == 1 and f"{done} of {planned} checks done" in output
    return score


def test_ctrl_c_during_the_audit_stops_everything_and_keeps_a_partial_results_file(sim, tmp_path):
    run_dir = tmp_path / "run"
    rc, output, took, signalled = interrupt_when(
        sim, run_dir, ["--phases", "audit"],
        lambda: any("Run probe commands on a node" in p for p in run_processes()))
    assert rc == 130, output[-3000:]
    assert took < LEFT_BEHIND_WITHIN_S, f"the CLI took {took:.1f} s to exit"
    assert_nothing_left(signalled)
    score = assert_interrupted_run(run_dir, output)
    assert score["progress"]["done"] < score["progress"]["planned"]


def test_ctrl_c_during_fio_stops_it_on_every_node_and_removes_its_file(sim, tmp_path):
    run_dir = tmp_path / "run"
    rc, output, took, signalled = interrupt_when(
        sim, run_dir, ["--phases", "performance", "--tags", "storage",
                       "-e", "clustereval_storage_fio_size_mib=256", "-e", "clustereval_storage_fio_runtime_s=60"],
        lambda: len(fio_files(sim)) == 2 and sum("fio --name=seq_write" in p for p in run_processes()) >= 2)
    assert rc == 130, output[-3000:]
    assert took < LEFT_BEHIND_WITHIN_S, f"the CLI took {took:.1f} s to exit"
    assert_nothing_left(signalled)
    assert fio_files(sim) == [], "the fio test file outlived the run"
    score = assert_interrupted_run(run_dir, output)
    missing = {tuple(unit) for unit in score["progress"]["missing"]}
    assert {("storage.fio.seq_write", "node1"), ("storage.fio.seq_read", "node2")} <= missing
    # what was measured before fio is kept (the scratch device facts the storage checks are matched on)
    assert list((run_dir / "facts").glob("node*.json"))
