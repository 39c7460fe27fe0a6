"""Access & identity audit checks against the simulated cluster: the reference profile gives no `fail`
in audit.access.*, the flawed profile audit-access produces the findings its comments describe.
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


def audit(directory: Path, run_dir: Path, tags: str) -> dict[tuple[str, str], dict]:
    env = {**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "PATH": f"{BIN}:{os.environ['PATH']}",
           "ANSIBLE_NOCOLOR": "1"}
    proc = subprocess.run([str(BIN / "ansible-playbook"), str(REPO / "playbooks" / "evaluate.yml"),
                           "-i", str(directory / "inventory.ini"), "-e", "clustereval_phases=audit",
                           "--tags", tags, "-e", f"clustereval_out={run_dir}"],
                          capture_output=True, text=True, timeout=240, env=env, cwd=REPO)
    assert proc.returncode == 0, proc.stdout[-3000:]
    items = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines() if line.strip()]
    return {(r["check"], r["subject"]): r for r in items}


def sim_audit(tmp_path_factory, profile: str, nodes: int, tags: str):
    directory = tmp_path_factory.mktemp(f"sim-{profile}")
    cluster.up(directory, nodes, profile)
    try:
        return audit(directory, tmp_path_factory.mktemp("runs") / profile, tags)
    finally:
        cluster.down(directory)


def test_reference_has_no_access_failures(tmp_path_factory):
    results = sim_audit(tmp_path_factory, "reference", 2, "audit.access")
    ours = {key: r for key, r in results.items() if key[0].startswith("audit.access.")}
    assert len(ours) == 2 * 4 + 1
    assert [r for r in ours.values() if r["status"] in ("fail", "error")] == []
    for node in ("node1", "node2"):
        assert results[("audit.access.ssh_between_nodes", node)]["status"] == "pass"
        assert results[("audit.access.sudo", node)]["status"] == "pass"
    assert results[("audit.access.fleet_identity", "_cluster")]["status"] == "pass"
    # Local accounts are the one warn: common on healthy clusters run by configuration management.
    assert {key[0] for key, r in ours.items() if r["status"] == "warn"} <= {"audit.access.external_idp"}


def test_access_faults_are_found(tmp_path_factory):
    results = sim_audit(tmp_path_factory, "audit-access", 3, "audit.access")
    ssh = results[("audit.access.ssh_between_nodes", "node2")]
    assert ssh["status"] == "fail" and ssh["value"] == "refused"
    assert results[("audit.access.ssh_between_nodes", "node1")]["status"] == "pass"
    idp = results[("audit.access.external_idp", "node3")]
    assert idp["status"] == "fail" and "sssd" in idp["summary"]
    assert results[("audit.access.external_idp", "node1")]["status"] == "warn"
    assert results[("audit.access.sudo", "node3")]["status"] == "pass"
