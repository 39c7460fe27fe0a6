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
