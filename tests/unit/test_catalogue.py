"""The check catalogue, the check functions, the probe catalogue and the roles stay in step."""

from __future__ import annotations

from pathlib import Path

import yaml

from clustereval import checks
from clustereval.checks import catalogue, probe_catalogue
from clustereval.parsers import tools

REPO = Path(__file__).resolve().parents[2]


def test_every_catalogue_check_has_a_function_or_is_recorded_by_the_harness():
    registered = checks.registered()
    for check_id, entry in catalogue.load().items():
        if entry.get("recorded_by"):  # the results callback, or the run's start
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
        assert check_id.split(".")[0] in ("audit", "harness", "storage", "network", "gpu", "security",
                                          "telemetry", "fault", "lifecycle", "training", "inference", "burnin",
                                          "orchestration"), check_id


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


# ------------------------------------------------------------------ the audit's checks and the probes they read

# Collected on the API host but read by no check; kept as evidence of the API server's version.
UNREAD_PROBES = {"k8s_version"}


def judged_audit_checks() -> dict[str, dict]:
    return {cid: entry for cid, entry in catalogue.load().items()
            if entry["phase"] == "audit" and not entry.get("recorded_by")}


def test_every_judged_audit_check_names_its_probes_and_its_value_type():
    for check_id, entry in judged_audit_checks().items():
        assert isinstance(entry.get("probes"), list), f"{check_id} names no probes (probes: [] when it reads none)"
        assert entry.get("value") in catalogue.VALUE_TYPES, f"{check_id} declares no value type"


def test_every_probe_a_check_or_facts_function_names_exists():
    known = set(probe_catalogue.load())
    for check_id, entry in catalogue.load().items():
        unknown = set(entry.get("probes") or []) - known
        assert not unknown, f"{check_id} names probes that do not exist: {sorted(unknown)}"
    assert checks.fact_probes() <= known


def test_cluster_checks_read_the_fleet_or_their_api_probes_only():
    for check_id, entry in judged_audit_checks().items():
        if entry["scope"] == "cluster":
            node_probes = [p for p in entry["probes"] if probe_catalogue.load()[p]["phase"] != "audit-k8s"]
            assert node_probes == [], f"{check_id} is judged across the fleet but names node probes {node_probes}"


def test_every_audit_probe_is_read_by_a_check_or_a_facts_function():
    named = set(checks.fact_probes())
    for entry in judged_audit_checks().values():
        named.update(entry["probes"])
    audit = {name for name, probe in probe_catalogue.load().items() if probe["phase"] in ("audit", "audit-k8s")}
    assert sorted(audit - named - UNREAD_PROBES) == []
    assert audit - named >= UNREAD_PROBES, "a probe listed as unread is read now: drop it from UNREAD_PROBES"


class Reads(dict):
    """Probe records that remember every name asked for (``get``, ``[]`` and ``in``)."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: set[str] = set()

    def get(self, key, default=None):
        self.asked.add(key)
        return super().get(key, default)

    def __getitem__(self, key):
        self.asked.add(key)
        return super().__getitem__(key)

    def __contains__(self, key):
        self.asked.add(key)
        return super().__contains__(key)


def test_facts_functions_read_only_the_probes_they_declare():
    checks.registered()
    for fn in [fn for fn in checks._FACTS if fn.__module__.startswith("clustereval.checks.")]:
        declared = set(checks._FACT_PROBES[f"{fn.__module__}.{fn.__name__}"])
        probes = Reads()
        fn(checks.Context(subject="n1", probes=probes))
        undeclared = probes.asked - declared
        assert not undeclared, f"{fn.__module__}.{fn.__name__} reads {sorted(undeclared)} without declaring them"
