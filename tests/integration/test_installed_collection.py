"""The collection as a new user meets it: the built tarball installed into a clean collections path, a
clean venv set up the way the README says, and a playbook of their own (outside the repository) that uses
a role and a filter by FQCN against the simulated cluster. No ansible.cfg of ours is anywhere in sight, so
the results callback is not enabled: the run directory, results, score and reports must appear anyway, and
nothing may be written into the installed collection. Then ``pip install`` of the package alone runs
``clustereval evaluate`` with the collection it ships (no CLUSTEREVAL_HOME, no collections path)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.integration.simrun import REPO, REQUIRES_SIM, load_result_list, simulated_cluster

pytestmark = REQUIRES_SIM
BIN = Path(sys.executable).parent
ANSIBLE_CORE = "ansible-core>=2.16,<2.22"
TAGS = "audit.os.kernel,audit.os.root_filesystem"

PLAYBOOK = """\
- name: A provider's own bring-up play using clustereval's audit role
  hosts: gpu_nodes
  gather_facts: false
  roles:
    - role: clustereval.gpu.audit
  tasks:
    - name: Ping the controller's side of the node
      ansible.builtin.command: ping -c 2 -i 0.2 127.0.0.1
      register: own_ping
      changed_when: false
      tags: [always]
    - name: Parse it with clustereval's filter
      ansible.builtin.debug:
        msg: "own-check loss={{ (own_ping.stdout | clustereval.gpu.parse('ping')).loss_pct }}"
      tags: [always]
"""


def _clean_env(**extra: str) -> dict[str, str]:
    """The user's shell: none of the repository's Ansible settings, the clean venv first on PATH."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANSIBLE_", "CLUSTEREVAL_", "VIRTUAL_ENV"))}
    env.update(ANSIBLE_NOCOLOR="1", **extra)
    return env


def _run(cmd: list[str], cwd: Path, env: dict[str, str], timeout: int = 600) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{cmd}: rc={proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


def _only_run_dir(runs: Path) -> Path:
    found = [p for p in runs.iterdir() if p.is_dir()]
    assert len(found) == 1, found
    return found[0]


def _assert_reported(run_dir: Path) -> dict:
    results = load_result_list(run_dir)
    checks = {r["check"] for r in results}
    assert {"audit.os.kernel", "audit.os.root_filesystem"} <= checks, checks
    for name in ("run.json", "score.json", "report.md", "junit.xml", "report.html", "metrics.prom"):
        assert (run_dir / name).is_file(), f"{name} missing from {run_dir}"
    assert json.loads((run_dir / "run.json").read_text())["ended"], "run.json was not marked ended"
    score = json.loads((run_dir / "score.json").read_text())
    assert score["counts"]["pass"] >= 1, score["counts"]
    return score


def test_the_built_collection_works_from_a_users_own_playbook(tmp_path):
    env = _clean_env()
    _run([str(BIN / "ansible-galaxy"), "collection", "build", "--output-path", str(tmp_path)], REPO, env)
    tarball = next(tmp_path.glob("clustereval-gpu-*.tar.gz"))
    collections = tmp_path / "collections"
    _run([str(BIN / "ansible-galaxy"), "collection", "install", str(tarball), "-p", str(collections)], tmp_path, env)
    installed = collections / "ansible_collections" / "clustereval" / "gpu"
    assert (installed / "requirements.txt").is_file() and (installed / "meta" / "execution-environment.yml").is_file()

    # The README's two commands: a venv with ansible-core, then the collection's requirements.txt.
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", str(venv)], tmp_path, env)
    _run([str(venv / "bin" / "pip"), "install", "-q", ANSIBLE_CORE, "-r", str(installed / "requirements.txt")],
         tmp_path, env, timeout=900)
    user_env = _clean_env(PATH=f"{venv / 'bin'}:{os.environ['PATH']}", ANSIBLE_COLLECTIONS_PATH=str(collections))

    # ansible-builder sees the collection's dependencies (the repository's dev venv has ansible-builder).
    introspect = _run([str(BIN / "ansible-builder"), "introspect", str(collections)], tmp_path, env).stdout
    assert "matplotlib" in introspect and "openssh-client" in introspect, introspect

    project = tmp_path / "project"
    project.mkdir()
    (project / "site.yml").write_text(PLAYBOOK)
    with simulated_cluster(tmp_path / "sim", 2, "reference") as sim:
        inventory = str(sim / "inventory.ini")
        proc = _run([str(venv / "bin" / "ansible-playbook"), "site.yml", "-i", inventory, "--tags", TAGS],
                    project, user_env)
        assert "own-check loss=0.0" in proc.stdout, proc.stdout[-3000:]
        score = _assert_reported(_only_run_dir(project / "runs"))
        assert score["tier"], score
        assert not (installed / "runs").exists(), "a run was written into the installed collection"

        # The collection's own playbook by FQCN, from the user's directory.
        _run([str(venv / "bin" / "ansible-playbook"), "clustereval.gpu.audit", "-i", inventory, "--tags", TAGS,
              "-e", f"clustereval_out={tmp_path / 'fqcn-run'}"], project, user_env)
        _assert_reported(tmp_path / "fqcn-run")

        # A plain `pip install` of the package runs `clustereval evaluate` with the collection it ships.
        _run([str(venv / "bin" / "pip"), "install", "-q", str(REPO)], tmp_path, env, timeout=900)
        cli_env = _clean_env(PATH=f"{venv / 'bin'}:{os.environ['PATH']}")
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        _run([str(venv / "bin" / "clustereval"), "evaluate", "-i", inventory, "--phases", "audit", "--tags", TAGS],
             elsewhere, cli_env)
        _assert_reported(_only_run_dir(elsewhere / "runs"))
