"""Slurm configuration failures of the simulated cluster, seen through Slurm's own interfaces and found by the
audit (profile ``audit-scheduler``, 3 nodes): slurmctld on node1, racks in topology.conf and the inventory,
PrologEpilogTimeout=10 with node2's 12 s prolog, node3's health check that drains nothing, node1's that checks
Xids only, ReturnToService=0 and no DefCpuPerGPU.
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from clustereval.sim import cluster
from tests.integration.simrun import REQUIRES_SIM, by_key, run_audit, simulated_cluster

pytestmark = REQUIRES_SIM
TAGS = ("audit.scheduler.controller_colocated,audit.scheduler.resource_limits,audit.health.healthcheck_program,"
        "audit.health.prolog,audit.health.auto_remediation,audit.health.dcgm,audit.fabric.topology")


@pytest.fixture(scope="module")
def audited(tmp_path_factory):
    sim, run_dir = tmp_path_factory.mktemp("sim-audit-scheduler"), tmp_path_factory.mktemp("runs") / "sched"
    with simulated_cluster(sim, 3, "audit-scheduler"):
        env = {**os.environ, "SLURM_CONF": str(sim / "slurm" / "slurm.conf")}
        seen = {what: subprocess.run(["scontrol", "show", what], env=env, capture_output=True, text=True).stdout
                for what in ("config", "topology")}
        state = json.loads((sim / "state.json").read_text())
        ctl = state["processes"]["slurmctld"]["pid"]
        seen["slurmctld_uts"] = os.readlink(f"/proc/{ctl}/ns/uts")
        seen["node1_uts"] = state["namespaces"]["node1"][1]
        seen["group_vars"] = (sim / "group_vars" / "gpu_nodes.yml").read_text()
        seen["results"] = by_key(run_audit(sim / "inventory.ini", run_dir, TAGS))
        seen["node2"] = subprocess.run(["sinfo", "-h", "-n", "node2", "-o", "%t|%E"], env=env, capture_output=True,
                                       text=True).stdout.strip()
        seen["truth"] = cluster.ground_truth(sim, "node3")
        yield seen


def test_the_controller_runs_on_node1_and_only_node1_fails(audited):
    assert "SlurmctldHost[0]        = node1(" in audited["config"]
    assert audited["slurmctld_uts"] == audited["node1_uts"]  # slurmctld's hostname is node1's
    results = audited["results"]
    node1 = results[("audit.scheduler.controller_colocated", "node1")]
    assert node1["status"] == "fail" and "the only slurmctld (node1) runs on this compute node" in node1["summary"]
    assert results[("audit.scheduler.controller_colocated", "node2")]["status"] == "pass"


def test_racks_give_slurm_a_tree_and_the_audit_its_rack_facts(audited):
    assert "SwitchName=rack1 Level=0" in audited["topology"] and "Nodes=node1,node2" in audited["topology"]
    assert "Switches=rack1,rack2" in audited["topology"]
    assert 'clustereval_audit_rack_of: {"node1": "rack1", "node2": "rack1", "node3": "rack2"}' in audited["group_vars"]
    topology = audited["results"][("audit.fabric.topology", "_cluster")]
    assert topology["status"] == "pass" and "topology/tree" in topology["summary"], topology
    assert topology["evidence"]["rack_source"] == "inventory rack_of" and topology["evidence"]["rack_count"] == 2


def test_a_prolog_past_prolog_epilog_timeout_fails_and_drains_the_node(audited):
    assert "PrologEpilogTimeout     = 10" in audited["config"]
    node2 = audited["results"][("audit.health.prolog", "node2")]
    assert node2["status"] == "fail", node2
    assert "Job prolog failed" in node2["summary"] and "past PrologEpilogTimeout=10 s" in node2["summary"]
    assert audited["node2"].startswith("drain") and audited["node2"].endswith("Prolog error")
    node1 = audited["results"][("audit.health.prolog", "node1")]
    assert node1["status"] == "pass" and "an empty job step took" in node1["summary"], node1


def test_health_checks_that_drain_nothing_or_skip_dcgm(audited):
    results = audited["results"]
    node3 = results[("audit.health.healthcheck_program", "node3")]
    assert node3["status"] == "warn" and "never drains the node" in node3["summary"], node3
    assert results[("audit.health.healthcheck_program", "node2")]["status"] == "pass"
    assert any(e["event"] == "healthcheck_run" and e["mode"] == "exit_1" for e in audited["truth"])
    node1 = results[("audit.health.dcgm", "node1")]
    assert node1["status"] == "warn" and "never calls dcgmi" in node1["summary"], node1
    assert results[("audit.health.dcgm", "node2")]["status"] == "pass"


def test_return_to_service_0_and_no_cpu_default(audited):
    results = audited["results"]
    remediation = results[("audit.health.auto_remediation", "node2")]
    assert remediation["status"] == "fail" and "ReturnToService=0" in remediation["summary"]
    limits = results[("audit.scheduler.resource_limits", "node3")]
    assert limits["status"] == "warn" and "no DefCpuPerGPU (partition gpu, nor in slurm.conf)" in limits["summary"]
