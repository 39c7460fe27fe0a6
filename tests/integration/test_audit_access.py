"""Access & identity audit checks against the simulated cluster: the reference profile gives no `fail`
in audit.access.*, the flawed profile audit-access produces the findings its comments describe.
"""

from __future__ import annotations

from tests.integration.simrun import REQUIRES_SIM, audit_sim

pytestmark = REQUIRES_SIM


def test_reference_has_no_access_failures(tmp_path_factory):
    results = audit_sim(tmp_path_factory, "reference", 2, "audit.access")
    ours = {key: r for key, r in results.items() if key[0].startswith("audit.access.")}
    assert len(ours) == 2 * 4 + 1
    assert [r for r in ours.values() if r["status"] in ("fail", "error")] == []
    for node in ("node1", "node2"):
        assert results[("audit.access.ssh_between_nodes", node)]["status"] == "pass"
        assert results[("audit.access.sudo", node)]["status"] == "pass"
    assert results[("audit.access.fleet_identity", "_cluster")]["status"] == "pass"
    # Local accounts are the one warn: common on healthy clusters run by configuration management.
    assert {key[0] for key, r in ours.items() if r["status"] == "warn"} <= {"audit.access.external_idp"}


def test_access_faults_are_found(tmp_path_factory):
    results = audit_sim(tmp_path_factory, "audit-access", 3, "audit.access")
    ssh = results[("audit.access.ssh_between_nodes", "node2")]
    assert ssh["status"] == "fail" and ssh["value"] == "refused"
    assert results[("audit.access.ssh_between_nodes", "node1")]["status"] == "pass"
    idp = results[("audit.access.external_idp", "node3")]
    assert idp["status"] == "fail" and "sssd" in idp["summary"]
    assert results[("audit.access.external_idp", "node1")]["status"] == "warn"
    assert results[("audit.access.sudo", "node3")]["status"] == "pass"
