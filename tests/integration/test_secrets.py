"""Canary secrets given every way an operator gives them — nested in a ``clustereval_*`` setting, inside a URL,
from Ansible Vault, from the environment — are found in no file of the run directory, in no file the run left
in ``$TMPDIR`` and not in the progress output.

Needs root and Debian's slurm-wlm, munge and openssh-server (``make install``).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import yaml

from tests.integration.simrun import BIN, REPO, REQUIRES_SIM, ansible_env, simulated_cluster

pytestmark = REQUIRES_SIM

NESTED, IN_URL, VAULTED, FROM_ENV = "CANARY-NESTED-7f3a9", "CANARY-URL-91b2c", "CANARY-VAULT-c4d1e", "CANARY-ENV-5e6f0"
VAULTED_EXTRA = "CANARY-VAULT-EXTRA-a8b7"
VAULT_PASSWORD = "correct horse battery staple"


def vault_encrypt(value: str, password_file: Path) -> str:
    proc = subprocess.run([str(BIN / "ansible-vault"), "encrypt_string", "--vault-password-file",
                           str(password_file), value], capture_output=True, text=True, check=True)
    return proc.stdout


def files_holding(folder: Path, secrets: list[str]) -> list[str]:
    hits = []
    for path in folder.rglob("*"):
        if path.is_file() and not path.is_symlink():
            data = path.read_bytes()
            hits += [f"{path}: {s}" for s in secrets if s.encode() in data]
    return hits


def test_no_canary_secret_reaches_the_run_directory_tmpdir_or_the_output(tmp_path):
    password_file = tmp_path / "vault-pass"
    password_file.write_text(VAULT_PASSWORD)
    settings = tmp_path / "settings.yml"
    settings.write_text(yaml.safe_dump({
        "clustereval_object_storage": {"endpoint": "https://s3.example", "credentials": {"secret_key": NESTED}},
        "clustereval_pip_index_url": f"https://mirror-user:{IN_URL}@mirror.example/simple",
        "clustereval_site_setting": "{{ lookup('ansible.builtin.env', 'SITE_SECRET') }}",
    }))
    vaulted_settings = tmp_path / "vaulted.yml"  # -e @file with a Vault value: Ansible decrypts it, not clustereval
    vaulted_settings.write_text("clustereval_bucket_access: " + vault_encrypt(VAULTED_EXTRA, password_file))
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    with simulated_cluster(tmp_path / "sim", 2, "reference") as sim:
        vault_vars = sim / "group_vars" / "all"
        vault_vars.mkdir(parents=True, exist_ok=True)
        (vault_vars / "vault.yml").write_text("clustereval_registry_password: " + vault_encrypt(VAULTED, password_file))
        env = {**ansible_env(), "TMPDIR": str(tmpdir), "SITE_SECRET": FROM_ENV,
               "ANSIBLE_VAULT_PASSWORD_FILE": str(password_file)}
        proc = subprocess.run([str(BIN / "clustereval"), "evaluate", "-i", str(sim / "inventory.ini"), "--out",
                               str(tmp_path / "run"), "--phases", "audit", "-e", f"@{settings}",
                               "-e", f"@{vaulted_settings}"],
                              capture_output=True, text=True, timeout=600, env=env, cwd=REPO)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    run_json = (tmp_path / "run" / "run.json").read_text()
    for name in ("clustereval_object_storage", "mirror.example", "clustereval_bucket_access"):
        assert name in run_json  # recorded, redacted
    canaries = [NESTED, IN_URL, VAULTED, FROM_ENV, VAULTED_EXTRA]
    assert files_holding(tmp_path / "run", canaries) == []
    assert files_holding(tmpdir, canaries) == []
    assert not [s for s in canaries if s in proc.stdout + proc.stderr]
    assert not [p for p in os.listdir(tmpdir) if p.startswith("clustereval-runner-")]  # removed after the run
