"""AWX/AAP packaging: ``ansible-builder create`` turns execution-environment.yml into a build context (no
image is built: there is no container engine here), every plugin and role has documentation ansible-doc
shows, and the changelog fragments pass antsibull-changelog's lint."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
pytestmark = pytest.mark.integration


def _run(cmd: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), **env})
    assert proc.returncode == 0, f"{cmd}: rc={proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


def test_ansible_builder_creates_the_execution_environment_context(tmp_path):
    _run([str(BIN / "ansible-galaxy"), "collection", "build", "--output-path", str(tmp_path)], REPO)
    version = yaml.safe_load((REPO / "galaxy.yml").read_text())["version"]
    tarball = tmp_path / f"clustereval-gpu-{version}.tar.gz"
    assert tarball.is_file()
    definition = yaml.safe_load((REPO / "execution-environment.yml").read_text())
    galaxy = definition["dependencies"]["galaxy"]["collections"]
    assert galaxy == [{"name": f"galaxy/{tarball.name}", "type": "file"}], "the EE names another collection version"
    shutil.copy(REPO / "execution-environment.yml", tmp_path)
    _run([str(BIN / "ansible-builder"), "create", "-f", "execution-environment.yml", "-c", "context",
          "--output-filename", "Containerfile"], tmp_path)
    context = tmp_path / "context"
    containerfile = (context / "Containerfile").read_text()
    assert "ansible-galaxy collection install" in containerfile and "install-from-bindep" in containerfile
    assert (context / "_build" / "galaxy" / tarball.name).is_file(), "the collection is not in the build context"
    requirements = yaml.safe_load((context / "_build" / "requirements.yml").read_text())
    assert requirements["collections"][0]["name"] == f"galaxy/{tarball.name}"


def test_ansible_doc_shows_every_plugin_and_role():
    listed = json.loads(_run([str(BIN / "ansible-doc"), "-l", "-j", "clustereval.gpu"], REPO).stdout)
    actions = {p.stem for p in (REPO / "plugins" / "action").glob("*.py")}
    assert {f"clustereval.gpu.{name}" for name in actions} <= set(listed), listed
    for kind in ("module", "filter", "lookup", "callback"):
        names = json.loads(_run([str(BIN / "ansible-doc"), "-t", kind, "-l", "-j", "clustereval.gpu"], REPO).stdout)
        assert names, f"no {kind} plugins listed"
        docs = json.loads(_run([str(BIN / "ansible-doc"), "-t", kind, "-j", *names], REPO).stdout)
        for name in names:
            assert docs[name]["doc"].get("short_description"), f"{kind} {name} has no documentation"
    roles = json.loads(_run([str(BIN / "ansible-doc"), "-t", "role", "-l", "-j", "clustereval.gpu"], REPO).stdout)
    on_disk = {f"clustereval.gpu.{p.name}" for p in (REPO / "roles").iterdir() if (p / "meta").is_dir()}
    assert on_disk <= set(roles), sorted(on_disk - set(roles))


def test_changelog_fragments_lint():
    _run([str(BIN / "antsibull-changelog"), "lint"], REPO)
