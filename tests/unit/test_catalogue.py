"""The check catalogue, the check functions, the probe catalogue and the roles stay in step."""

from __future__ import annotations

from pathlib import Path

import yaml

from clustereval import checks
from clustereval.checks import catalogue, probe_catalogue
from clustereval.parsers import tools

REPO = Path(__file__).resolve().parents[2]


def test_every_catalogue_check_has_a_function_or_is_recorded_by_the_callback():
    registered = checks.registered()
    for check_id, entry in catalogue.load().items():
        if entry.get("recorded_by") == "callback":
            assert check_id not in registered
        else:
            assert check_id in registered, f"{check_id} has no @check function"


def test_every_check_function_is_in_the_catalogue():
    assert set(checks.registered()) <= set(catalogue.load())


def test_catalogue_entries_are_well_formed():
    for check_id, entry in catalogue.load().items():
        assert entry["phase"] in ("audit", "performance", "reliability"), check_id
        assert entry["severity"] in ("critical", "major", "minor", "info"), check_id
        assert set(entry["harnesses"]) <= {"slurm", "k8s", "standalone"} and entry["harnesses"], check_id
        assert entry["why"].strip() and entry["fix"].strip(), check_id
        assert check_id.split(".")[0] in ("audit", "harness", "storage", "network", "gpu", "security"), check_id


def test_cmax_ids_name_public_criteria():
    report = catalogue.coverage()
    assert report["unknown_ids"] == {}
    assert report["total"] == 73


def test_probes_name_registered_parsers_and_unique_artifacts():
    known = set(tools())
    artifacts = set()
    for name, probe in probe_catalogue.load().items():
        if probe.get("parser"):
            assert probe["parser"] in known, f"probe {name}: no parser {probe['parser']!r}"
        artifact = probe.get("artifact") or f"{name}.txt"
        assert artifact not in artifacts, f"probe {name}: artifact {artifact} used twice"
        artifacts.add(artifact)


def test_roles_only_name_catalogue_checks():
    ids = set(catalogue.load())
    for path in (REPO / "roles").rglob("*.yml"):
        data = yaml.safe_load(path.read_text()) or []
        for task in data if isinstance(data, list) else []:
            for block in [task, *task.get("block", [])]:
                judge = block.get("clustereval.gpu.judge") if isinstance(block, dict) else None
                if judge and isinstance(judge.get("checks"), list):
                    assert set(judge["checks"]) <= ids, path
