"""The whole evaluation against the simulated cluster, through both entry points.

Needs root and Debian's slurm-wlm, munge and openssh-server (``make install``); fio runs for real on
each node's scratch directory.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import threading
import time
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

import pytest
import yaml

from clustereval.report import fleet
from clustereval.results import problems
from clustereval.sim import cluster
from tests.integration.simrun import (
    BIN,
    PLAYBOOK_TIMEOUT_S,
    REPO,
    REQUIRES_SIM,
    ansible_env,
    by_key,
    simulated_cluster,
)
from tests.integration.simrun import load_result_list as results
from tests.integration.simrun import run_playbook as playbook

SMALL_FIO = ["-e", "clustereval_storage_fio_size_mib=32", "-e", "clustereval_storage_fio_runtime_s=1"]
# What the reachability tests run: both phases, but of the performance roles only fio (a node lost mid-run is the
# harness's concern, not a benchmark's; every other performance role has its own test, and together they take
# minutes per run here).
AUDIT_AND_FIO = ["--tags", "audit,storage.fio"]
NODE_CHECKS = {"harness.node.reachable", "audit.gpu.inventory", "audit.os.kernel", "audit.slurm.node_state",
               "audit.slurm.gres"}

pytestmark = [*REQUIRES_SIM, pytest.mark.skipif(shutil.which("fio") is None, reason="fio is not installed")]


def clustereval(*args: str, timeout: int = PLAYBOOK_TIMEOUT_S) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / "clustereval"), *args], capture_output=True, text=True, timeout=timeout,
                          env=ansible_env(), cwd=REPO)


def profile_with(tmp: Path, nodes: dict) -> Path:
    """A profile of our own: the packaged reference with per-node overrides."""
    path = tmp / "profile.yml"
    path.write_text(yaml.safe_dump({"extends": "reference", "nodes": nodes}))
    return path


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    with simulated_cluster(tmp_path_factory.mktemp("sim-ref"), 4, "reference") as directory:
        yield directory


@pytest.fixture(scope="module")
def cli_run(reference, tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("runs") / "cli"
    # --fail-on never: fio on this machine may miss a reference; the run directory is what this run is about
    proc = clustereval("evaluate", "-i", str(reference / "inventory.ini"), "--out", str(run_dir), *SMALL_FIO,
                       "--fail-on", "never")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return run_dir, proc


def test_cli_writes_the_whole_run_directory(cli_run):
    run_dir, proc = cli_run
    assert f"Run directory: {run_dir}" in proc.stdout
    assert "Tier:" in proc.stdout
    # the default phases (audit, performance) never run the burn-in: a provisional tier, Silver at most
    assert "(provisional: " in proc.stdout and "Gold needs burnin" in proc.stdout
    assert "checks" in proc.stderr  # progress lines: hosts x checks done
    for name in ("results.jsonl", "score.json", "report.md", "junit.xml", "run.json"):
        assert (run_dir / name).is_file(), name
    assert (run_dir.stat().st_mode & 0o777) == 0o700  # raw outputs are the operator's alone
    items = results(run_dir)
    assert all(problems(r) == [] for r in items)
    keyed = by_key(items)
    for node in ("node1", "node2", "node3", "node4"):
        for check in NODE_CHECKS | {"storage.fio.seq_write", "storage.fio.seq_read"}:
            assert (check, node) in keyed, (check, node)
        inventory = keyed[("audit.gpu.inventory", node)]
        assert inventory["status"] == "pass" and inventory["value"] == 8
        assert keyed[("audit.slurm.gres", node)]["status"] == "pass"
        fio = keyed[("storage.fio.seq_read", node)]
        assert fio["status"] in ("pass", "warn", "fail") and fio["value"] > 0 and fio["unit"] == "MB/s"
    assert keyed[("audit.fleet.gpu_consistency", "_cluster")]["status"] == "pass"
    for item in items:
        for artifact in item["artifacts"]:
            assert (run_dir / artifact).is_file(), artifact
    assert (run_dir / "raw/node1/nvidia-smi-q-x.xml").read_text().startswith("<?xml")
    fio_json = json.loads((run_dir / "raw/node2/fio-seq-write.json").read_text())
    assert fio_json["jobs"][0]["jobname"] == "seq_write"


def test_score_run_json_and_junit(cli_run):
    run_dir, _ = cli_run
    score = json.loads((run_dir / "score.json").read_text())
    assert score["tier"] in ("Silver", "Bronze", "Participation", "Underperforming")  # what the evidence supports
    assert score["provisional"]["supported_tier"] == "Silver"
    assert score["provisional"]["next_tier"] == "Gold" and "burnin" in score["provisional"]["next_needs"]
    assert {"gpu_compute", "network", "remediation"} <= set(score["provisional"]["measured"])  # audit.health.*
    assert sum(score["counts"].values()) == len(results(run_dir))
    assert "categories" in score
    run = json.loads((run_dir / "run.json").read_text())
    assert run["versions"]["clustereval"] and run["versions"]["ansible_core"]
    assert run["phases"] == ["audit", "performance"] and run["ended"]
    assert sorted(run["inventory"]["hosts"]) == ["node1", "node2", "node3", "node4"]
    junit = ET.parse(run_dir / "junit.xml").getroot()
    # every result that is not a pass has its own testcase; a check's passes are one testcase once there are more
    # than FOLD_PASSES_AT of them, whose name says how many it stands for
    cases = junit.findall(".//testcase")
    folded = [c for c in cases if c.get("name", "").endswith(" passing subjects")]
    stood_for = len(cases) - len(folded) + sum(int(c.get("name").split()[0]) for c in folded)
    assert stood_for == len(results(run_dir))
    passes_per_check = Counter(r["check"] for r in results(run_dir) if r["status"] == "pass")
    assert sorted(c.get("classname") for c in folded) == sorted(
        check for check, n in passes_per_check.items() if n > fleet.FOLD_PASSES_AT)
    non_pass = [r for r in results(run_dir) if r["status"] != "pass"]
    assert len([c for c in cases if c.find("failure") is not None or c.find("error") is not None
                or c.find("skipped") is not None]) == sum(r["status"] in ("fail", "error", "skip") for r in non_pass)


def test_report_rerenders_without_the_cluster(cli_run, tmp_path):
    run_dir, _ = cli_run
    copy = tmp_path / "copy"
    shutil.copytree(run_dir, copy)
    (copy / "report.md").unlink()
    (copy / "score.json").unlink()
    proc = clustereval("report", str(copy), "--fail-on", "never")
    assert proc.returncode == 0, proc.stderr
    rescored = json.loads((copy / "score.json").read_text())
    assert rescored["tier"] == json.loads((run_dir / "score.json").read_text())["tier"]
    assert "raw/node1/nvidia-smi-q-x.xml" in (copy / "report.md").read_text()


def test_ansible_playbook_and_cli_give_the_same_run_directory(reference, tmp_path):
    via_playbook, via_cli = tmp_path / "playbook", tmp_path / "cli"
    proc = playbook(reference / "inventory.ini", "-e", "clustereval_phases=audit",
                    "-e", f"clustereval_out={via_playbook}")
    assert proc.returncode == 0, proc.stdout[-3000:]
    proc = clustereval("evaluate", "-i", str(reference / "inventory.ini"), "--phases", "audit",
                       "--out", str(via_cli))
    assert proc.returncode == 0, proc.stderr[-3000:]

    def shape(run_dir: Path) -> tuple:
        files = sorted(str(p.relative_to(run_dir)) for p in run_dir.rglob("*") if p.is_file())
        verdicts = sorted((r["check"], r["subject"], r["status"], json.dumps(r["value"] if r["unit"] != "s" else None))
                          for r in results(run_dir))
        return files, verdicts

    assert shape(via_playbook) == shape(via_cli)
    assert json.loads((via_playbook / "run.json").read_text())["phases"] == ["audit"]


def test_tags_select_single_checks(reference, tmp_path):
    run_dir = tmp_path / "tags"
    proc = playbook(reference / "inventory.ini", "--tags", "audit.slurm", "--skip-tags", "audit.slurm.gres",
                    "-e", f"clustereval_out={run_dir}")
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert {r["check"] for r in results(run_dir)} == {"audit.slurm.node_state"}


def test_bad_variable_is_refused_before_anything_runs(reference, tmp_path):
    run_dir = tmp_path / "never"
    proc = playbook(reference / "inventory.ini", "-e", "clustereval_storage_fio_size_mib=-5",
                    "-e", f"clustereval_out={run_dir}")
    assert proc.returncode != 0
    assert "clustereval_storage_fio_size_mib" in proc.stdout
    assert not run_dir.exists()
    proc = playbook(reference / "inventory.ini", "-e", "clustereval_storage_fio_iodepth=lots",
                    "-e", f"clustereval_out={run_dir}")
    assert proc.returncode != 0 and "clustereval_storage_fio_iodepth" in proc.stdout
    assert not run_dir.exists()


def test_flawed_profile_findings(tmp_path):
    with simulated_cluster(tmp_path / "sim", 4, "flawed") as sim:
        run_dir = tmp_path / "run"
        proc = clustereval("evaluate", "-i", str(sim / "inventory.ini"), "--phases", "audit", "--out", str(run_dir))
    # measured and reported, and it found fails: the exit status a pipeline gates on (--fail-on fail, the default)
    assert proc.returncode == 3, proc.stderr[-3000:]
    assert "check results failed (--fail-on fail)" in proc.stderr
    keyed = by_key(results(run_dir))
    assert keyed[("audit.gpu.inventory", "node1")]["status"] == "pass"
    inventory = keyed[("audit.gpu.inventory", "node2")]
    # Slurm declares 8, its siblings show 8 and baseboard slot 5 is empty: not a pass ("7 × H100").
    assert inventory["value"] == 7 and inventory["status"] == "fail" and "Slurm declares" in inventory["summary"]
    assert inventory["evidence"]["siblings_gpus"]["majority"] == 8
    gres = keyed[("audit.slurm.gres", "node2")]
    assert gres["status"] == "fail" and "8" in gres["summary"] and "7" in gres["summary"]
    state = keyed[("audit.slurm.node_state", "node3")]
    assert state["status"] == "fail" and "XID 79" in state["summary"]
    truncated = keyed[("audit.gpu.inventory", "node4")]
    assert truncated["status"] == "error" and truncated["artifacts"] == ["raw/node4/nvidia-smi-q-x.xml"]
    fleet = keyed[("audit.fleet.gpu_consistency", "_cluster")]
    assert fleet["status"] == "fail"
    assert "node2 (7)" in fleet["summary"] and "535.183.01" in fleet["summary"]
    assert "node4" in fleet["evidence"]["not_assessed"]
    score = json.loads((run_dir / "score.json").read_text())
    assert score["tier"] in ("Bronze", "Participation", "Underperforming")


def test_unreachable_node_from_the_start(tmp_path):
    unreachable_node3 = str(profile_with(tmp_path, {"node3": {"faults": {"unreachable": True}}}))
    with simulated_cluster(tmp_path / "sim", 3, unreachable_node3) as sim:
        run_dir = tmp_path / "run"
        proc = clustereval("evaluate", "-i", str(sim / "inventory.ini"), "--out", str(run_dir), *SMALL_FIO,
                           *AUDIT_AND_FIO)
        assert proc.returncode != 0  # ansible reports the unreachable host
    keyed = by_key(results(run_dir))
    assert keyed[("harness.node.reachable", "node3")]["status"] == "fail"
    assert ("audit.gpu.inventory", "node3") not in keyed
    # node2's SSH peer is node3: the dead node is not blamed on its healthy neighbour
    blamed = keyed[("audit.access.ssh_between_nodes", "node2")]
    assert blamed["status"] == "skip" and "unreachable in this run for the controller too" in blamed["summary"]
    assert keyed[("audit.access.ssh_between_nodes", "node1")]["status"] == "pass"
    for node in ("node1", "node2"):
        assert keyed[("audit.gpu.inventory", node)]["status"] == "pass"
        assert ("storage.fio.seq_write", node) in keyed
    assert "node3" in (run_dir / "report.md").read_text()
    assert json.loads((run_dir / "score.json").read_text())["tier"] != "Platinum"


def test_sshd_dies_mid_run_keeps_what_was_measured(tmp_path):
    sim = tmp_path / "sim"
    run_dir = tmp_path / "run"
    killed: list[int] = []

    def kill_after_audit() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            path = run_dir / "results.jsonl"
            if path.exists() and '"audit.fleet.gpu_consistency"' in path.read_text():
                killed.extend(cluster.kill_node_sshd(sim, "node2"))
                return
            time.sleep(0.05)

    watcher = threading.Thread(target=kill_after_audit)
    with simulated_cluster(sim, 3, "reference"):
        watcher.start()
        try:
            proc = playbook(sim / "inventory.ini", "-e", f"clustereval_out={run_dir}", *AUDIT_AND_FIO,
                            "-e", "clustereval_storage_fio_size_mib=32", "-e", "clustereval_storage_fio_runtime_s=2")
        finally:
            watcher.join()
    assert killed, "the watcher never saw the audit finish"
    assert proc.returncode != 0
    keyed = by_key(results(run_dir))
    for check in NODE_CHECKS:  # measured before sshd died: still on disk
        assert (check, "node2") in keyed
    assert keyed[("harness.node.reachable", "node2")]["status"] == "fail"
    assert ("storage.fio.seq_write", "node2") not in keyed
    for node in ("node1", "node3"):
        assert ("storage.fio.seq_read", node) in keyed
    assert (run_dir / "score.json").exists() and "node2" in (run_dir / "report.md").read_text()


def test_reachability_is_measured_afresh_not_through_a_kept_connection(tmp_path):
    # `systemctl stop ssh` stops only the listener (KillMode=process): sessions live on, and so does an SSH
    # master connection an earlier run kept (ControlPersist). A re-run must still find the node unreachable.
    sim = tmp_path / "sim"
    with simulated_cluster(sim, 2, "reference"):
        first = playbook(sim / "inventory.ini", "-e", "clustereval_phases=audit", "--tags", "audit.os.kernel",
                         "-e", f"clustereval_out={tmp_path / 'first'}")
        assert first.returncode == 0, first.stdout[-2000:]
        listener = json.loads((sim / "state.json").read_text())["processes"]["sshd:node2"]["pid"]
        os.kill(listener, signal.SIGTERM)
        time.sleep(0.5)
        again = playbook(sim / "inventory.ini", "-e", "clustereval_phases=audit", "--tags", "audit.os.kernel",
                         "-e", f"clustereval_out={tmp_path / 'again'}")
    keyed = by_key(results(tmp_path / "again"))
    assert keyed[("harness.node.reachable", "node2")]["status"] == "fail", again.stdout[-2000:]
    assert keyed[("audit.os.kernel", "node1")]["status"] == "pass"
