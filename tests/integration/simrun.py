"""What the integration tests share: bringing a simulated cluster up and down around a run of
``playbooks/evaluate.yml`` (ansible-core 2.19, the venv's own ``ansible-playbook``) and reading the
``results.jsonl`` it writes.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from clustereval.sim import cluster
from tests.helpers import PROBLEM_WORDS

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
PLAYBOOK = REPO / "playbooks" / "evaluate.yml"
AUDIT_TIMEOUT_S = 240

# What every test that brings up the simulated cluster needs: assign (or extend) as the module's `pytestmark`.
REQUIRES_SIM = [
    pytest.mark.integration,
    pytest.mark.skipif(os.geteuid() != 0, reason="the simulated cluster needs root"),
    pytest.mark.skipif(not Path("/usr/sbin/slurmctld").exists(), reason="slurm-wlm is not installed"),
    pytest.mark.skipif(shutil.which("sshd") is None and not Path("/usr/sbin/sshd").exists(),
                       reason="openssh-server is not installed"),
]

Results = dict[tuple[str, str], dict]


def ansible_env() -> dict[str, str]:
    """The environment for ansible-playbook and the clustereval CLI: the repo's ansible.cfg, the venv first
    on PATH (the controller-side Python and its ansible), no colour codes in the output we assert on."""
    return {**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "PATH": f"{BIN}:{os.environ['PATH']}",
            "ANSIBLE_NOCOLOR": "1"}


# A whole evaluation of the simulated reference (audit and every performance role) takes about 8 minutes on
# 4 nodes of a 2-core machine.
PLAYBOOK_TIMEOUT_S = 900


def run_playbook(inventory: Path, *args: str, timeout: int = PLAYBOOK_TIMEOUT_S) -> subprocess.CompletedProcess[str]:
    """``ansible-playbook playbooks/evaluate.yml -i inventory *args`` from the repo root."""
    return subprocess.run([str(BIN / "ansible-playbook"), str(PLAYBOOK), "-i", str(inventory), *args],
                          capture_output=True, text=True, timeout=timeout, env=ansible_env(), cwd=REPO)


def load_result_list(run_dir: Path) -> list[dict]:
    """Every result of a run directory's results.jsonl, in the order written; none of them a pass whose
    summary states a problem (the rule every check is held to, see tests/helpers.PROBLEM_WORDS)."""
    results = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines() if line.strip()]
    stating = [f"{r['check']} on {r['subject']}: {r['summary']}" for r in results
               if r.get("status") == "pass" and PROBLEM_WORDS.search(str(r.get("summary") or ""))]
    assert not stating, f"passes whose summary states a problem: {stating[:5]}"
    return results


def by_key(items: list[dict]) -> Results:
    return {(r["check"], r["subject"]): r for r in items}


def load_results(run_dir: Path) -> Results:
    """A run directory's results keyed by (check, subject)."""
    return by_key(load_result_list(run_dir))


def _extra_var_args(extra_vars: dict[str, str] | None) -> list[str]:
    return [arg for name, value in (extra_vars or {}).items() for arg in ("-e", f"{name}={value}")]


def run_audit(inventory: Path, run_dir: Path, tags: str, extra_vars: dict[str, str] | None = None) -> list[dict]:
    """The audit phase of the checks under ``tags`` into ``run_dir``; asserts the playbook succeeded."""
    proc = run_playbook(inventory, "-e", "clustereval_phases=audit", "--tags", tags,
                        "-e", f"clustereval_out={run_dir}", *_extra_var_args(extra_vars), timeout=AUDIT_TIMEOUT_S)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    return load_result_list(run_dir)


@contextmanager
def simulated_cluster(directory: Path, nodes: int, profile: str) -> Iterator[Path]:
    """A simulated cluster in ``directory`` for the ``with`` block, brought down however the block ends
    (also when ``up`` fails half-way, so nothing it started outlives the test)."""
    try:
        cluster.up(directory, nodes, profile)
        yield directory
    finally:
        cluster.down(directory)


def truth(directory: Path, node: str, event: str, after: float = 0.0, **match: object) -> list[dict]:
    """The simulator's ground-truth events ``event`` of ``node`` at or after ``after`` whose fields match."""
    return [e for e in cluster.ground_truth(directory, node) if e["event"] == event and e["t"] >= after
            and all(e.get(k) == v for k, v in match.items())]


def _sim_and_run_dirs(tmp: Path | pytest.TempPathFactory, profile: str) -> tuple[Path, Path]:
    if isinstance(tmp, pytest.TempPathFactory):
        return tmp.mktemp(f"sim-{profile}"), tmp.mktemp("runs") / profile
    return tmp / "sim", tmp / "run"


def audit_sim_items(tmp: Path | pytest.TempPathFactory, profile: str, nodes: int, tags: str,
                    extra_vars: dict[str, str] | None = None) -> list[dict]:
    """Brings up ``nodes`` nodes of ``profile``, audits ``tags`` and brings the cluster down; the results
    in the order written. ``tmp`` is a test's ``tmp_path`` (sim/ and run/ under it) or ``tmp_path_factory``."""
    sim, run_dir = _sim_and_run_dirs(tmp, profile)
    with simulated_cluster(sim, nodes, profile):
        return run_audit(sim / "inventory.ini", run_dir, tags, extra_vars)


def audit_sim(tmp: Path | pytest.TempPathFactory, profile: str, nodes: int, tags: str,
              extra_vars: dict[str, str] | None = None) -> Results:
    """:func:`audit_sim_items` keyed by (check, subject)."""
    return by_key(audit_sim_items(tmp, profile, nodes, tags, extra_vars))


SSH_OPTS = [
    "-o",
    "StrictHostKeyChecking=no",
    "-o",
    "UserKnownHostsFile=/dev/null",
    "-o",
    "LogLevel=ERROR",
    "-o",
    "BatchMode=yes",
    "-o",
    "ConnectTimeout=5",
]


def read_inventory(directory: Path) -> tuple[dict[str, str], dict[str, str]]:
    """(host -> address, group vars) from the generated inventory.ini."""
    hosts, variables, section = {}, {}, None
    for line in (directory / "inventory.ini").read_text().splitlines():
        if line.startswith("["):
            section = line.strip("[]")
        elif line.strip() and section == "gpu_nodes":
            name, address = line.split()
            hosts[name] = address.split("=", 1)[1]
        elif line.strip() and section == "gpu_nodes:vars":
            key, value = line.split("=", 1)
            variables[key] = value
    return hosts, variables


def ssh(directory: Path, address: str, command: str) -> subprocess.CompletedProcess[str]:
    key = directory / "ssh" / "id_ed25519"
    return subprocess.run(
        ["ssh", *SSH_OPTS, "-i", str(key), f"root@{address}", command],
        capture_output=True,
        text=True,
        timeout=20,
    )
