"""Tenant-isolation audit checks against the simulated cluster: the flawed profile audit-isolation produces
its findings (the reference run is in test_audit_gpustack.py, which covers both areas).
"""

from __future__ import annotations

from tests.integration.simrun import REQUIRES_SIM, audit_sim

pytestmark = REQUIRES_SIM


def test_isolation_faults_are_found(tmp_path_factory):
    results = audit_sim(tmp_path_factory, "audit-isolation", 2, "audit.isolation")
    ib = results[("audit.isolation.ib_tenant", "node2")]
    assert ib["status"] == "warn" and "0xffff" in ib["summary"]
    rshim = results[("audit.isolation.dpu_rshim", "node2")]
    assert rshim["status"] == "fail" and "tmfifo_net0" in rshim["summary"]
    assert results[("audit.isolation.ib_tenant", "node1")]["status"] == "pass"
    assert results[("audit.isolation.dpu_rshim", "node1")]["status"] == "skip"
    # Read-only: the BMC check contacted nothing and found no in-band path on the simulated nodes.
    bmc = results[("audit.isolation.bmc_inband", "node1")]
    assert bmc["evidence"].get("contacted", "nothing").startswith("nothing") or bmc["status"] == "skip"
