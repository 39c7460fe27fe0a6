"""run.json bookkeeping: options never carry secrets or unrendered playbook expressions."""

from __future__ import annotations

import json

from clustereval import runinfo


def test_safe_options_redacts_secrets_and_drops_expressions():
    options = runinfo.safe_options({
        "clustereval_storage_fio_size_mib": 64,
        "clustereval_registry_token": "hunter2",
        "clustereval_phase_list": "{{ clustereval_phases.split(',') }}",
        "ansible_password": "nope",
        "clustereval_run_dir": "/x",
    })
    assert options == {"clustereval_storage_fio_size_mib": 64, "clustereval_registry_token": "<redacted>"}
    assert "hunter2" not in json.dumps(options)


def test_default_run_dir_is_runs_beside_the_playbooks(tmp_path):
    (tmp_path / "playbooks").mkdir()
    path = runinfo.default_run_dir(tmp_path / "playbooks")
    assert path.startswith(str(tmp_path / "runs") + "/")


def test_mark_ended_keeps_the_start(tmp_path):
    runinfo.write_json(tmp_path / "run.json", {"run_id": "r1", "started": "2026-11-30T00:00:00Z"})
    runinfo.mark_ended(tmp_path, unreachable_hosts=["n3"])
    info = json.loads((tmp_path / "run.json").read_text())
    assert info["started"] == "2026-11-30T00:00:00Z" and info["ended"] and info["unreachable_hosts"] == ["n3"]


def test_secrets_are_redacted_nested_in_urls_and_wherever_their_value_recurs():
    options = runinfo.safe_options({
        "ansible_become_password": "b3come-pw",
        "clustereval_registry": {"url": "https://robot:s3cr3t-value@registry.example/v2", "user": "robot",
                                 "auth": {"token": "tok-123456"}},
        "clustereval_mirrors": ["https://alice:hunter22@mirror.example/pypi", "https://plain.example/simple"],
        "clustereval_note": "became with b3come-pw, token tok-123456",
        "clustereval_storage_fio_size_mib": 64,
    })
    text = json.dumps(options)
    for secret in ("s3cr3t-value", "hunter22", "b3come-pw", "tok-123456", "alice:"):
        assert secret not in text, secret
    assert options["clustereval_registry"]["url"] == "https://<redacted>@registry.example/v2"
    assert options["clustereval_registry"]["auth"] == "<redacted>"
    assert options["clustereval_registry"]["user"] == "robot"
    assert options["clustereval_mirrors"][1] == "https://plain.example/simple"
    assert options["clustereval_note"] == "became with <redacted>, token <redacted>"
    assert options["clustereval_storage_fio_size_mib"] == 64


def test_vault_values_are_redacted_whatever_their_name():
    from ansible._internal._datatag._tags import VaultedValue

    vaulted = VaultedValue(ciphertext="$ANSIBLE_VAULT;1.1;AES256\n6162").tag("vaulted-plaintext")
    options = runinfo.safe_options({"clustereval_site_label": vaulted, "clustereval_echo": "it is vaulted-plaintext"})
    assert options == {"clustereval_site_label": "<redacted>", "clustereval_echo": "it is <redacted>"}
