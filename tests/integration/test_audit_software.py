"""Software stack & container audit checks against the simulated cluster: the reference profile gives no
`fail` in audit.software.*, the flawed profile audit-software produces the findings its comments describe.
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


def test_reference_has_no_software_failures(tmp_path_factory):
    results = sim_audit(tmp_path_factory, "reference", 2, "audit.software")
    ours = {key: r for key, r in results.items() if key[0].startswith("audit.software.")}
    assert len(ours) == 2 * 10
    assert [r for r in ours.values() if r["status"] in ("fail", "error")] == []
    for node in ("node1", "node2"):
        assert results[("audit.software.nccl", node)]["value"] == "2.21.5"
        assert results[("audit.software.batch_path", node)]["status"] == "pass"
        assert results[("audit.software.lmod", node)]["status"] == "pass"
        assert results[("audit.software.enroot", node)]["status"] == "pass"
    warned = {key[0] for key, r in ours.items() if r["status"] == "warn"}
    # What a healthy cluster also shows: no HPC SDK, no Pyxis (not simulable), and the host's docker CLI.
    assert warned <= {"audit.software.hpc_sdk", "audit.software.pyxis", "audit.software.docker"}


def test_software_faults_are_found(tmp_path_factory):
    results = sim_audit(tmp_path_factory, "audit-software", 3, "audit.software")
    nccl = results[("audit.software.nccl", "node2")]
    assert nccl["status"] == "warn" and nccl["value"] == "2.14.3"
    assert results[("audit.software.enroot", "node2")]["status"] == "warn"
    assert results[("audit.software.enroot", "node1")]["status"] == "pass"
    assert results[("audit.software.nccl_topo_container", "node3")]["status"] == "fail"
    batch = results[("audit.software.batch_path", "node3")]
    # SLURM_EXPORT_ENV=NONE: the step gets no PATH, so the login toolkit is gone (or another nvcc is found).
    assert batch["status"] in ("fail", "warn") and "batch step" in batch["summary"]
    assert results[("audit.software.batch_path", "node1")]["status"] == "pass"
