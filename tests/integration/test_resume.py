"""``clustereval resume``: a run that lost a node is finished once the node is back, and its cluster-wide
checks are judged again over the whole fleet, old results and new. ``--limit`` makes a run of its own.

Needs root and Debian's slurm-wlm, munge and openssh-server (``make install``).
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from clustereval.sim import cluster, power
from tests.integration.simrun import (
    BIN,
    REPO,
    REQUIRES_SIM,
    ansible_env,
    by_key,
    load_result_list,
    read_inventory,
    run_playbook,
    simulated_cluster,
    ssh,
)

pytestmark = REQUIRES_SIM


def clustereval(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / "clustereval"), *args], capture_output=True, text=True, timeout=600,
                          env=ansible_env(), cwd=REPO)


def wait_for_ssh(sim: Path, node: str, timeout_s: float = 120) -> None:
    address = read_inventory(sim)[0][node]
    deadline = time.monotonic() + timeout_s
    while ssh(sim, address, "true").returncode != 0:
        assert time.monotonic() < deadline, f"{node} never came back"
        time.sleep(1)


def test_resume_after_a_node_was_down_finishes_it_and_judges_the_fleet_again(tmp_path):
    run_dir = tmp_path / "run"
    with simulated_cluster(tmp_path / "sim", 3, "reference") as sim:
        assert cluster.kill_node_sshd(sim, "node3")
        first = clustereval("evaluate", "-i", str(sim / "inventory.ini"), "--out", str(run_dir), "--phases", "audit")
        assert first.returncode != 0  # ansible reports the unreachable host
        before = by_key(load_result_list(run_dir))
        assert before[("harness.node.reachable", "node3")]["status"] == "fail"
        assert "2 nodes" in before[("audit.fleet.gpu_consistency", "_cluster")]["summary"]
        assert before[("audit.access.ssh_between_nodes", "node2")]["status"] == "skip"  # its peer was down
        kernel_node1 = before[("audit.os.kernel", "node1")]
        power.request_power(sim, "node3", "reboot")  # the provider brings it back
        wait_for_ssh(sim, "node3")
        time.sleep(3)  # slurmd registers again
        resumed = clustereval("resume", str(run_dir))
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-2000:]
    assert "checks to run, on node2, node3" in resumed.stdout
    after = by_key(load_result_list(run_dir))
    assert after[("harness.node.reachable", "node3")]["status"] == "pass"
    assert after[("audit.gpu.inventory", "node3")]["status"] == "pass"
    assert after[("audit.access.ssh_between_nodes", "node2")]["status"] == "pass"
    assert "3 nodes agree" in after[("audit.fleet.gpu_consistency", "_cluster")]["summary"]
    assert "all 3 nodes" in after[("audit.sharedfs.shared_fs", "_cluster")]["summary"]
    assert after[("audit.os.kernel", "node1")] == kernel_node1  # node1 ran nothing again
    info = json.loads((run_dir / "run.json").read_text())
    assert info["run_id"] == kernel_node1["run_id"] and [r["hosts"] for r in info["resumes"]] == [["node2", "node3"]]
    score = json.loads((run_dir / "score.json").read_text())
    assert score["subjects"]["unreachable"] == [] and score["progress"]["done"] == score["progress"]["planned"]
    assert not score["load_warnings"]
    again = clustereval("resume", str(run_dir))
    assert again.returncode == 0 and "nothing to resume" in again.stdout


def test_a_limited_run_makes_its_run_directory_and_plans_only_its_hosts(tmp_path):
    run_dir = tmp_path / "run"

    def limited(node: str) -> subprocess.CompletedProcess[str]:
        return run_playbook(sim / "inventory.ini", "--limit", node, "--tags", "audit.os.kernel",
                            "-e", "clustereval_phases=audit", "-e", f"clustereval_out={run_dir}")

    with simulated_cluster(tmp_path / "sim", 2, "reference") as sim:
        proc = limited("node2")
        assert proc.returncode == 0, proc.stdout[-3000:]
        keyed = by_key(load_result_list(run_dir))
        assert keyed[("audit.os.kernel", "node2")]["status"] == "pass" and ("audit.os.kernel", "node1") not in keyed
        info = json.loads((run_dir / "run.json").read_text())
        assert info["plan"]["hosts"] == ["node2"] and info["selection"]["limit"] == "node2"
        again = limited("node1")  # a new run into the same folder: the earlier run's results still count
        assert again.returncode == 0, again.stdout[-3000:]
    later = json.loads((run_dir / "run.json").read_text())
    assert later["run_id"] != info["run_id"] and later["previous_run_ids"] == [info["run_id"]]
    score = json.loads((run_dir / "score.json").read_text())
    assert not score["load_warnings"] and {"node1", "node2"} <= set(score["subjects"]["hosts"])


@pytest.mark.parametrize("content", [None, "{not json", '{"run_id": "x"}'])
def test_resume_refuses_what_is_not_a_resumable_run(tmp_path, content):
    if content is not None:
        (tmp_path / "run.json").write_text(content)
    proc = clustereval("resume", str(tmp_path))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "cannot be resumed" in proc.stderr or "records no plan" in proc.stderr
