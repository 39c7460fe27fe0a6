"""A run's plan: "N of M checks done" for an interrupted run, and what ``clustereval resume`` runs again."""

from __future__ import annotations

from clustereval import plan
from clustereval.checks import catalogue

NODE_CHECK, OTHER_NODE_CHECK, CLUSTER_CHECK = "audit.os.kernel", "audit.gpu.inventory", "audit.fleet.gpu_consistency"


def result(check, subject, status="pass", started="2026-12-02T10:00:00.000Z", **evidence):
    return {"check": check, "subject": subject, "status": status, "started": started, "evidence": evidence}


def small_plan():
    return {"hosts": ["node1", "node2"], "destructive_hosts": [], "node_checks": [NODE_CHECK, OTHER_NODE_CHECK],
            "destructive_checks": [], "cluster_checks": [CLUSTER_CHECK]}


def test_the_plan_holds_what_the_phases_and_tags_select():
    made = plan.make(["audit"], ["audit.os"], [], ["node2", "node1"])
    assert made["hosts"] == ["node1", "node2"]
    assert made["node_checks"] and all(c.startswith("audit.os.") for c in made["node_checks"])
    assert not any(catalogue.entry(c).get("recorded_by") for c in made["node_checks"] + made["cluster_checks"])
    everything = plan.make(["audit", "reliability"], ["all"], ["audit.os.kernel"], ["node1"], ["node1"])
    assert "audit.os.kernel" not in everything["node_checks"]
    assert everything["destructive_checks"] and everything["destructive_hosts"] == ["node1"]
    # without the opt-in, no destructive drill is planned on any host
    assert plan.units(plan.make(["reliability"], ["all"], [], ["node1"]))
    assert not [u for u in plan.units(plan.make(["reliability"], ["all"], [], ["node1"]))
                if catalogue.entry(u[0]).get("acts") == "destructive"]


def test_progress_counts_a_host_covered_by_its_components_and_the_cluster_by_any_result():
    results = [result(NODE_CHECK, "node1"), result(OTHER_NODE_CHECK, "node1/gpu3"), result(CLUSTER_CHECK, "_cluster")]
    found = plan.progress(small_plan(), results)
    assert (found["done"], found["planned"]) == (3, 5)
    assert sorted(found["missing"]) == [[OTHER_NODE_CHECK, "node2"], [NODE_CHECK, "node2"]]
    assert plan.phrase(found) == "3 of 5 checks done"
    assert plan.progress(None, results) is None and plan.phrase(None) == ""


def test_resume_runs_again_errors_unreachable_hosts_and_skips_that_waited_on_them():
    results = [
        result(NODE_CHECK, "node1"), result(OTHER_NODE_CHECK, "node1", "error"),
        result(NODE_CHECK, "node2", "skip", unreachable_peer="node3"),
        result(OTHER_NODE_CHECK, "node2"),
        result("harness.node.reachable", "node3", "fail"), result(NODE_CHECK, "node3", "fail"),
        result(CLUSTER_CHECK, "_cluster"),
    ]
    info = {"plan": {**small_plan(), "hosts": ["node1", "node2", "node3"]}}
    request = plan.resume_request(info, results)
    assert request["only"] == {"node1": [OTHER_NODE_CHECK], "node2": [NODE_CHECK],
                               "node3": [NODE_CHECK, OTHER_NODE_CHECK]}
    assert request["fleet"] == ["node1", "node2", "node3"]
    assert (request["to_run"], request["planned"]) == (4, 7)
    # without the unreachable peer, the same skip is an answer and stays
    settled = [r for r in results if r["subject"] != "node3"]
    assert "node2" not in plan.resume_request(info, settled)["only"]


def test_a_resume_makes_the_harness_reports_on_the_hosts_it_ran_again_obsolete():
    before, after = "2026-12-02T10:00:00.000Z", "2026-12-02T11:00:01.000Z"
    results = [
        result("harness.node.reachable", "node3", "fail", before),
        result("harness.task.failed", "node2", "error", before),
        result("harness.task.failed", "node1", "error", before),  # node1 was not run again: kept
        result("harness.run.interrupted", "_cluster", "error", before),
        result(NODE_CHECK, "node3", "fail", before),  # a check's own verdict is superseded only by a new one
        result("harness.node.reachable", "node3", "pass", after),
    ]
    info = {"resumes": [{"started": "2026-12-02T11:00:00Z", "hosts": ["node2", "node3"]}]}
    kept = {(r["check"], r["subject"], r["status"]) for r in plan.current(results, info)}
    assert kept == {("harness.task.failed", "node1", "error"), (NODE_CHECK, "node3", "fail"),
                    ("harness.node.reachable", "node3", "pass")}
    assert plan.current(results, {}) == results
