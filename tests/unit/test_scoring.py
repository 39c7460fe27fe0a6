"""Scoring: rubric loading, category scores, tiers, caps, movers and score.json on disk.

All results here are synthetic fixtures written for these tests (no corpus involved: scoring reads
check results, not tool output).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clustereval.scoring import load_rubric, score_results, score_run, tier_for_score

TIERS = ["Platinum", "Gold", "Silver", "Bronze", "Participation", "Underperforming"]
# A domain of every category of the default rubric: the evidence every tier needs (rubric ``evidence``).
BROAD_DOMAINS = ["audit", "storage", "gpu_compute", "network", "burnin", "fault_injection", "orchestration",
                 "security", "lifecycle", "training", "inference"]


def result(check, subject="node1", status="pass", severity="major", domain=None, phase="audit", **extra):
    out = {
        "run_id": "test-run",
        "check": check,
        "phase": phase,
        "domain": domain or check.split(".")[0],
        "subject": subject,
        "status": status,
        "severity": severity,
        "summary": f"{check} on {subject} is {status}",
        "artifacts": [f"raw/{subject}/{check}.txt"],
    }
    out.update(extra)
    return out


def broad_passes(hosts=("node1", "node2"), per_domain=5):
    return [
        result(f"{domain}.check{i}", subject=host, domain=domain)
        for domain in BROAD_DOMAINS
        for i in range(per_domain)
        for host in hosts
    ]


# One catalogue check per broad domain: a run directory's results.jsonl must name checks the catalogue knows
# (results.load leaves out any other line), so these tell their variants apart by params instead.
CATALOGUED = {"audit": "audit.os.kernel", "storage": "storage.fio.seq_read", "gpu_compute": "gpu.compute.gemm",
              "network": "network.mesh.tcp_bandwidth", "burnin": "burnin.gemm.sustained",
              "security": "audit.isolation.bmc_inband", "lifecycle": "lifecycle.import.torch",
              "training": "training.torchtitan.run", "fault_injection": "fault.inject.detection",
              "orchestration": "orchestration.slurm.submit_rate", "inference": "inference.vllm.requests"}


def catalogued_passes(hosts=("node1", "node2"), per_domain=5):
    """:func:`broad_passes` with catalogue check ids, for tests that score a run directory."""
    return [
        result(CATALOGUED[domain], subject=host, domain=domain, params={"variant": i})
        for domain in BROAD_DOMAINS
        for i in range(per_domain)
        for host in hosts
    ]


def cap_ids(score, binding_only=True):
    return [c["id"] for c in score["caps_applied"] if c["limits_tier"] or not binding_only]


@pytest.fixture(scope="module")
def rubric():
    return load_rubric()


def test_default_rubric_has_the_six_tiers_in_order(rubric):
    assert [t["name"] for t in rubric["tiers"]] == TIERS
    assert rubric["path"].startswith("packaged:")
    assert {"pass", "warn", "fail"} == set(rubric["status_points"])
    assert rubric["severity_weights"]["info"] == 0


def test_tier_thresholds(rubric):
    assert tier_for_score(100, rubric) == "Platinum"
    assert tier_for_score(95, rubric) == "Platinum"
    assert tier_for_score(94.99, rubric) == "Gold"
    assert tier_for_score(0, rubric) == "Underperforming"
    assert tier_for_score(None, rubric) is None


def test_all_pass_over_broad_categories_is_platinum(rubric):
    score = score_results(broad_passes(), rubric)
    assert score["score"] == 100.0
    assert score["tier"] == "Platinum"
    assert score["caps_applied"] == []
    assert score["movers"] == []
    assert score["counts"] == {"pass": 110, "warn": 0, "fail": 0, "skip": 0, "error": 0}
    assert score["provisional"] is None
    assert score["coverage"] == 1.0


def test_warn_earns_half_and_skip_error_leave_the_denominator(rubric):
    results = [
        result("audit.a", status="pass"),
        result("audit.b", status="warn"),
        result("audit.c", status="skip"),
        result("audit.d", status="error"),
    ]
    score = score_results(results, rubric)
    config = score["categories"]["config_os"]  # audit checks of no named area
    assert config["score"] == 75.0
    assert config["counts"] == {"pass": 1, "warn": 1, "fail": 0, "skip": 1, "error": 1}
    assert score["coverage"] == 0.5


def test_severity_weights_a_critical_fail_more_than_a_minor_one(rubric):
    minor = score_results([result("audit.a"), result("audit.b", status="fail", severity="minor")], rubric)
    critical = score_results(
        [result("audit.a"), result("audit.b", status="fail", severity="critical")], rubric
    )
    # 4 of (4 + 1) and 4 of (4 + 8) points earned, with the default weights major 4, minor 1, critical 8
    assert minor["categories"]["config_os"]["score"] == 80.0
    assert critical["categories"]["config_os"]["score"] == pytest.approx(33.33, abs=0.01)


def test_critical_fail_caps_at_bronze_and_names_the_check(rubric):
    failing = result("audit.fleet.gpu_consistency", subject="_cluster", status="fail", severity="critical")
    results = [*broad_passes(per_domain=10), failing]
    score = score_results(results, rubric)
    assert score["tier_before_caps"] == "Platinum"
    assert score["tier"] == "Bronze"
    cap = next(c for c in score["caps_applied"] if c["id"] == "critical_fail")
    assert cap["limits_tier"]
    assert cap["triggers"] == [{"check": "audit.fleet.gpu_consistency", "subject": "_cluster"}]
    mover = score["movers"][0]
    assert (mover["check"], mover["subject"], mover["caps"]) == (
        "audit.fleet.gpu_consistency",
        "_cluster",
        ["critical_fail"],
    )
    assert mover["artifacts"] == ["raw/_cluster/audit.fleet.gpu_consistency.txt"]
    assert any("Capped at Bronze" in line for line in score["explanation"])


def test_major_fail_caps_at_silver(rubric):
    failing = result("storage.mount.options", status="fail", severity="major")
    results = [*broad_passes(per_domain=10), failing]
    score = score_results(results, rubric)
    assert score["tier_before_caps"] == "Platinum"
    assert score["tier"] == "Silver"
    assert cap_ids(score) == ["major_fail"]


@pytest.mark.parametrize("check_id", ["audit.gpustack.pcie_acs", "audit.gpustack.gpudirect_rdma"])
def test_a_disqualifying_finding_caps_at_underperforming(rubric, check_id):
    # ACS redirecting GPU<->NIC traffic, or no GPUDirect RDMA, kills multi-node bandwidth: the methodology
    # disqualifies the cluster, however good everything else is.
    failing = result(check_id, subject="node3", status="fail", severity="major")
    score = score_results([*broad_passes(per_domain=10), failing], rubric)
    assert score["tier_before_caps"] == "Platinum" and score["tier"] == "Underperforming"
    assert cap_ids(score) == ["disqualifying", "major_fail"]
    cap = next(c for c in score["caps_applied"] if c["id"] == "disqualifying")
    assert cap["limits_tier"] and cap["triggers"] == [{"check": check_id, "subject": "node3"}]


def test_a_warn_on_a_disqualifying_check_caps_nothing(rubric):
    warned = result("audit.gpustack.pcie_acs", subject="node3", status="warn", severity="major")
    score = score_results([*broad_passes(per_domain=10), warned], rubric)
    assert "disqualifying" not in cap_ids(score)


def test_minor_fail_lowers_the_score_but_caps_nothing(rubric):
    failing = result("storage.mount.noatime", status="fail", severity="minor")
    results = [*broad_passes(per_domain=10), failing]
    score = score_results(results, rubric)
    assert score["caps_applied"] == []
    assert score["score"] < 100
    assert score["movers"][0]["check"] == "storage.mount.noatime"


def test_unreachable_node_caps_and_is_listed_but_scores_nothing_twice(rubric):
    base = broad_passes()
    reach_fail = result(
        "harness.node.reachable",
        subject="node3",
        status="fail",
        severity="major",
        domain="harness",
        summary="ssh: connect to host node3 port 22: Connection timed out",
    )
    score = score_results([*base, reach_fail], rubric)
    assert score["subjects"]["unreachable"] == ["node3"]
    assert "Connection timed out" in score["subjects"]["unreachable_detail"]["node3"]
    assert "node3" in score["subjects"]["hosts"]
    assert score["tier"] == "Silver"
    assert "unreachable_nodes" in cap_ids(score)
    assert "major_fail" not in cap_ids(score, binding_only=False)  # one cause, one cap
    # harness results are unscored: the node costs its cap, not score points as well
    assert score["score"] == score_results(base, rubric)["score"] == 100.0
    assert score["counts"]["fail"] == 1


def test_node_dying_mid_run_keeps_its_earlier_results(rubric):
    results = [
        *broad_passes(hosts=("node1",)),
        result("harness.node.reachable", subject="node2", status="pass", severity="major", domain="harness"),
        result("audit.gpu.inventory", subject="node2", status="pass", severity="critical"),
        result("harness.node.reachable", subject="node2", status="fail", severity="major", domain="harness"),
    ]
    score = score_results(results, rubric)
    assert score["subjects"]["unreachable"] == ["node2"]
    configuration = [c for c in score["categories"].values() if c["group"] == "configuration"]
    assert sum(c["counts"]["pass"] for c in configuration) == 6  # 5 on node1 + the one node2 finished
    assert score["counts"]["fail"] == 1  # the later reachability fail superseded the earlier pass


def test_low_coverage_caps_at_participation(rubric):
    results = (
        [result(f"audit.a{i}") for i in range(4)]
        + [result(f"audit.s{i}", status="skip", summary="tool missing") for i in range(3)]
        + [result(f"audit.e{i}", status="error", summary="module crashed") for i in range(2)]
    )
    score = score_results(results, rubric)
    assert score["coverage"] == pytest.approx(4 / 9, abs=1e-4)
    assert score["score"] == 100.0  # skip/error are not the cluster's fault ...
    assert score["tier"] == "Participation"  # ... but too little evidence for a high tier
    low = next(c for c in score["caps_applied"] if c["id"] == "coverage_low")
    assert len(low["triggers"]) == 5


def test_partial_coverage_caps_at_silver(rubric):
    results = broad_passes() + [
        result(f"audit.s{i}", status="skip", summary="not applicable") for i in range(40)
    ]
    score = score_results(results, rubric)
    assert 0.5 <= score["coverage"] < 0.8
    assert score["tier"] == "Silver"
    assert cap_ids(score) == ["coverage_partial"]


def test_empty_results_are_never_a_high_tier(rubric):
    score = score_results([], rubric)
    assert score["score"] is None
    assert score["tier_before_caps"] is None
    assert score["tier"] == "Participation"
    assert score["coverage"] == 0.0
    assert all(not c["measured"] for c in score["categories"].values())
    assert "no evidence" in score["explanation"][0]


def test_info_only_results_leave_the_run_unrated(rubric):
    score = score_results([result("audit.inventory.note", severity="info")], rubric)
    assert score["score"] is None
    assert score["tier"] == "Participation"


def test_category_not_measured_is_excluded_and_said(rubric):
    audit_passes = [result(f"audit.a{i}") for i in range(5)]
    score = score_results([*audit_passes, result("storage.b", status="skip", summary="no fio")], rubric)
    storage = score["categories"]["storage"]
    assert storage["measured"] is False and storage["score"] is None
    assert storage["counts"]["skip"] == 1
    assert "storage" in score["not_measured"]
    assert score["score"] == 100.0  # only configuration was measured
    # the honest tier: configuration alone supports Bronze at most (rubric evidence), however good the score
    assert score["tier"] == "Bronze" and score["tier_before_caps"] == "Platinum"
    assert score["provisional"] == {"measured": ["configuration"], "not_measured": [
        "gpu_compute", "network", "storage", "burnin", "remediation", "orchestration", "security", "lifecycle",
        "training", "inference"],
        "supported_tier": "Bronze", "limits_tier": True, "next_tier": "Silver",
        "next_needs": ["gpu_compute", "network"]}
    assert any("based on 1 of 16 categories" in line for line in score["explanation"])  # config_os of 6 areas
    assert ("Provisional: only configuration measured, so the evidence supports Bronze at most; Silver needs "
            "gpu_compute, network measured (this holds the tier).") in score["explanation"]


def test_unknown_domain_counts_for_caps_not_score(rubric):
    results = [*broad_passes(), result("mystery.thing", status="fail", severity="critical", domain="mystery")]
    score = score_results(results, rubric)
    assert score["uncategorised_domains"] == ["mystery"]
    assert score["score"] == 100.0
    assert score["tier"] == "Bronze"


def test_invalid_status_and_severity_are_noted_not_fatal(rubric):
    score = score_results([result("audit.a", status="exploded"), result("audit.b", severity="huge")], rubric)
    assert score["counts"]["error"] == 1
    assert len(score["notes"]) == 2
    assert "exploded" in score["notes"][0]


def test_catalogue_supplies_titles_for_movers(rubric):
    catalogue = {"audit.a": {"id": "audit.a", "title": "Driver version is supported", "domain": "audit"}}
    score = score_results([result("audit.a", status="fail", severity="minor")], rubric, catalogue)
    assert score["movers"][0]["title"] == "Driver version is supported"


def test_custom_rubric_file(tmp_path, rubric):
    custom = dict(rubric)
    custom.pop("path")
    custom["name"] = "strict"
    custom["caps"] = [{"id": "any_warn", "rule": "any warn", "when": {"status": "warn"}, "cap": "Gold"}]
    path = tmp_path / "strict.yml"
    path.write_text(json.dumps(custom))  # JSON is valid YAML
    strict = load_rubric(path)
    assert strict["path"] == str(path)
    score = score_results([*broad_passes(per_domain=20), result("network.x", status="warn")], strict)
    assert score["rubric"]["name"] == "strict"
    assert score["tier"] == "Gold"


def test_broken_rubric_names_its_problems(tmp_path):
    path = tmp_path / "bad.yml"
    path.write_text(
        "status_points: {pass: 1}\nseverity_weights: {}\ncategories: {}\n"
        "tiers: [{name: A, min: 10}, {name: B, min: 50}]\ncaps: [{when: {colour: red}, cap: Z}]\n"
    )
    with pytest.raises(ValueError) as err:
        load_rubric(path)
    message = str(err.value)
    assert "status_points.warn" in message
    assert "ordered best first" in message
    assert "unknown condition(s) colour" in message
    assert "cap 'Z' is not a tier" in message


_statuses = st.sampled_from(["pass", "warn", "fail", "skip", "error"])
_severities = st.sampled_from(["critical", "major", "minor", "info"])
_domains = st.sampled_from(["audit", "storage", "network", "gpu_compute", "harness", "security"])
_results = st.lists(
    st.builds(
        lambda i, status, severity, domain: result(
            f"{domain}.c{i}", status=status, severity=severity, domain=domain
        ),
        st.integers(0, 30),
        _statuses,
        _severities,
        _domains,
    ),
    max_size=40,
)


@settings(max_examples=60, deadline=None)
@given(_results)
def test_points_lost_add_up_to_the_missing_score(results):
    rubric = load_rubric()
    score = score_results(results, rubric | {"movers_limit": 10_000})
    if score["score"] is None:
        assert score["tier"] == "Participation"
        return
    lost = sum(m["points_lost"] for m in score["movers"])
    assert lost == pytest.approx(100.0 - score["score"], abs=0.05)
    assert 0.0 <= score["score"] <= 100.0


@settings(max_examples=60, deadline=None)
@given(_results, st.data())
def test_turning_a_pass_into_a_fail_never_raises_the_tier(results, data):
    passes = [i for i, r in enumerate(results) if r["status"] == "pass"]
    if not passes:
        return
    idx = data.draw(st.sampled_from(passes))
    worse = [dict(r) for r in results]
    worse[idx]["status"] = "fail"
    rubric = load_rubric()
    before, after = score_results(results, rubric), score_results(worse, rubric)
    assert TIERS.index(after["tier"]) >= TIERS.index(before["tier"])


def _write_results(run_dir: Path, results, torn_tail: str | None = None) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    with open(run_dir / "results.jsonl", "w", encoding="utf-8") as fh:
        for r in results:
            fh.write(json.dumps(r) + "\n")
        if torn_tail:
            fh.write(torn_tail)


def test_score_run_writes_score_json_and_survives_a_torn_line(tmp_path):
    results = [*catalogued_passes(), result("audit.gpu.inventory", subject="node2", status="fail", severity="minor")]
    _write_results(tmp_path, results, torn_tail='{"run_id": "test-run", "check": "audit.cut", "sta')
    (tmp_path / "run.json").write_text(
        json.dumps({"run_id": "test-run", "inventory": {"hosts": ["node1", "node2", "node9"], "groups": {}}})
    )
    score = score_run(tmp_path)
    on_disk = json.loads((tmp_path / "score.json").read_text())
    assert on_disk == json.loads(json.dumps(score))
    assert on_disk["total"] == 111
    assert any("results.jsonl:112" in w and "unreadable" in w for w in on_disk["load_warnings"])
    assert on_disk["subjects"]["without_results"] == ["node9"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.jsonl", "run.json", "score.json"]


def test_score_run_without_results_or_run_json(tmp_path):
    score = score_run(tmp_path)
    assert score["tier"] == "Participation"
    assert any("results.jsonl does not exist" in w for w in score["load_warnings"])
    assert any("run.json is missing" in w for w in score["load_warnings"])


def test_score_run_uses_the_rubric_named_in_run_options(tmp_path, rubric):
    custom = {k: v for k, v in rubric.items() if k != "path"} | {"name": "from-options", "caps": [], "evidence": {}}
    rubric_path = tmp_path / "mine.yml"
    rubric_path.write_text(json.dumps(custom))
    _write_results(tmp_path / "run", [result("audit.os.kernel")])
    (tmp_path / "run" / "run.json").write_text(json.dumps({"options": {"rubric": str(rubric_path)}}))
    score = score_run(tmp_path / "run")
    assert score["rubric"]["name"] == "from-options"
    assert score["tier"] == "Platinum"  # no caps and no evidence rule in this rubric


# A crafted line: a critical fail of a real check on a real subject, which caps the tier at Bronze if taken.
CRAFTED = result("audit.gpu.inventory", subject="node1", status="fail", severity="critical",
                 summary="crafted: 0 GPUs")


def _scored_run(run_dir: Path, extra: list[dict], run_info: dict | None = None) -> dict:
    _write_results(run_dir, [*catalogued_passes(), *extra])
    (run_dir / "run.json").write_text(json.dumps(run_info if run_info is not None else {"run_id": "test-run"}))
    return score_run(run_dir)


def _without_warnings(score: dict) -> dict:
    return {key: value for key, value in score.items() if key != "load_warnings"}


def test_the_crafted_line_would_cap_the_tier_when_it_belongs_to_the_run(tmp_path):
    clean = _scored_run(tmp_path / "clean", [])
    taken = _scored_run(tmp_path / "taken", [CRAFTED])
    assert clean["tier"] == "Platinum" and clean["load_warnings"] == []
    assert taken["tier"] == "Bronze" and "critical_fail" in cap_ids(taken) and taken["load_warnings"] == []


@pytest.mark.parametrize(("crafted", "warning"), [
    ({**CRAFTED, "run_id": "another-run"},
     "results.jsonl:111: from another run 'another-run' (this run is 'test-run'), skipped"),
    ({**CRAFTED, "check": "audit.crafted"},
     "results.jsonl:111: check id 'audit.crafted' is not in the catalogue, skipped"),
    # the same identity as a real pass (check, subject, params): it must not supersede it
    ({**CRAFTED, "check": "audit.os.kernel", "params": {"variant": 0}, "run_id": "another-run"},
     "results.jsonl:111: from another run 'another-run' (this run is 'test-run'), skipped"),
    ({**CRAFTED, "check": "audit.os.kernl", "params": {"variant": 0}},
     "results.jsonl:111: check id 'audit.os.kernl' is not in the catalogue, skipped"),
])
def test_a_line_of_another_run_or_an_unknown_check_is_left_out_and_reported(tmp_path, crafted, warning):
    clean = _scored_run(tmp_path / "clean", [])
    score = _scored_run(tmp_path / "crafted", [crafted])
    assert score["load_warnings"] == [warning]
    assert json.loads((tmp_path / "crafted" / "score.json").read_text())["load_warnings"] == [warning]
    # no verdict, count, cap or tier changes: the score is the clean run's, warnings aside
    assert _without_warnings(score) == _without_warnings(clean)
    assert score["tier"] == "Platinum" and score["caps_applied"] == [] and score["counts"]["fail"] == 0


def test_the_report_lists_neither_line_and_shows_both_warnings(tmp_path, capsys):
    from clustereval import cli

    run_dir = tmp_path / "run"
    _scored_run(run_dir, [{**CRAFTED, "run_id": "another-run"}, {**CRAFTED, "check": "audit.crafted"}])
    assert cli.main(["report", str(run_dir)]) == 0
    out = capsys.readouterr()
    assert "from another run 'another-run'" in out.err and "'audit.crafted' is not in the catalogue" in out.err
    assert "Tier: Platinum" in out.out
    md = (run_dir / "report.md").read_text()
    assert "from another run 'another-run'" in md and "'audit.crafted' is not in the catalogue" in md
    assert "crafted: 0 GPUs" not in md


@pytest.mark.parametrize("run_info", [None, {"started": "2026-11-30T00:00:00Z"}, {"run_id": ""}])
def test_without_a_run_id_in_run_json_the_run_id_rule_is_skipped(tmp_path, run_info):
    run_dir = tmp_path / "run"
    _write_results(run_dir, [result("audit.os.kernel"), result("audit.gpu.inventory", run_id="another-run")])
    if run_info is not None:
        (run_dir / "run.json").write_text(json.dumps(run_info))
    score = score_run(run_dir)
    assert score["total"] == 2
    assert not [w for w in score["load_warnings"] if "another run" in w]


def test_checks_that_do_not_apply_leave_the_coverage_denominator():
    from clustereval.scoring import score_results

    base = {"run_id": "r", "phase": "audit", "domain": "audit", "severity": "minor", "value": None}
    results = [{**base, "check": f"audit.x.c{i}", "subject": "n1", "status": "pass", "summary": "ok"}
               for i in range(4)]
    results += [{**base, "check": f"audit.k8s.c{i}", "subject": "_cluster", "status": "skip",
                 "summary": "applies to k8s clusters; this one is slurm",
                 "evidence": {"not_applicable": True}} for i in range(6)]
    assert score_results(results)["coverage"] == 1.0
    results[-1]["evidence"] = {}
    assert score_results(results)["coverage"] < 1.0


def test_a_category_claims_checks_of_another_domain_by_id(rubric):
    # the health check in place (audit.health.*) is the remediation category's evidence, not configuration's
    score = score_results([result("audit.health.healthcheck_program"), result("audit.os.kernel", status="warn")],
                          rubric)
    assert score["categories"]["remediation"]["counts"]["pass"] == 1
    assert score["categories"]["remediation"]["checks"] == ["audit.health.*"]
    assert score["categories"]["config_os"]["counts"] == {"pass": 0, "warn": 1, "fail": 0, "skip": 0, "error": 0}


def test_audit_areas_are_categories_and_configuration_their_group(rubric):
    """Each audit area scores on its own; the evidence rules name the group, measured when any area is: a
    Kubernetes cluster's audit (no Slurm, no RDMA fabric) is not provisional for want of them."""
    score = score_results([result("audit.k8s.node_ready"), result("audit.gpustack.driver", status="fail"),
                           result("gpu.compute.gemm", domain="gpu_compute"),
                           result("network.mesh.tcp_bandwidth", domain="network")], rubric)
    cats = score["categories"]
    assert cats["config_scheduler"]["score"] == 100.0 and cats["config_gpu_stack"]["score"] == 0.0
    assert cats["config_fabric"]["measured"] is False and "config_fabric" in score["not_measured"]
    assert {name for name, c in cats.items() if c["group"] == "configuration"} == {
        "config_gpu_stack", "config_fabric", "config_scheduler", "config_monitoring", "config_access", "config_os"}
    assert sum(c["weight"] for c in cats.values() if c["group"] == "configuration") == 15
    provisional = score["provisional"]
    assert provisional["measured"] == ["configuration", "gpu_compute", "network"]
    assert "config_fabric" not in provisional["not_measured"] and provisional["supported_tier"] == "Silver"


def test_a_group_named_like_a_category_or_evidence_naming_nothing_is_refused(tmp_path):
    import yaml

    from clustereval.scoring.score import DEFAULT_RUBRIC

    base = yaml.safe_load(DEFAULT_RUBRIC.read_text())
    clash = {**base, "categories": {**base["categories"], "network": {**base["categories"]["network"],
                                                                      "group": "storage"}}}
    (tmp_path / "clash.yml").write_text(yaml.safe_dump(clash))
    with pytest.raises(ValueError, match="group 'storage' is also a category name"):
        load_rubric(tmp_path / "clash.yml")
    unknown = {**base, "evidence": {**base["evidence"], "Bronze": ["configurations"]}}
    (tmp_path / "unknown.yml").write_text(yaml.safe_dump(unknown))
    with pytest.raises(ValueError, match=r"evidence\.Bronze must be a list of category or group names"):
        load_rubric(tmp_path / "unknown.yml")


@pytest.mark.parametrize(("bad", "cap"), [
    (result("audit.isolation.bmc_inband", domain="security", status="fail", severity="critical"),
     "security_critical"),
    (result("audit.health.healthcheck_program", domain="audit", status="fail", severity="major"),
     "no_health_check"),
    (result("fault.inject.detection", domain="fault_injection", status="fail", severity="critical", value=None),
     "fault_undetected"),
])
def test_what_disqualifies_a_cluster_caps_it_at_the_bottom_however_good_the_rest(rubric, bad, cap):
    score = score_results([*broad_passes(per_domain=20), bad], rubric)
    assert score["score"] > 95 and score["tier"] == "Underperforming", score["explanation"]
    assert cap in cap_ids(score)


def test_a_late_detection_is_a_critical_fail_not_a_fault_never_detected(rubric):
    late = result("fault.inject.detection", domain="fault_injection", status="fail", severity="critical",
                  value=412.0, unit="s")
    score = score_results([*broad_passes(per_domain=20), late], rubric)
    assert score["tier"] == "Bronze" and cap_ids(score) == ["critical_fail"]
