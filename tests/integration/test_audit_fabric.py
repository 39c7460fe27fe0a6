"""Fabric audit checks against the simulated cluster: the reference profile has no fabric failure, the
audit-fabric profile's faults (port down, degraded rate, misnamed HCA, NCCL overrides, bypassed PKey
partition) are found on the right nodes.
"""

from __future__ import annotations

from pathlib import Path

from clustereval.results import problems
from tests.integration.simrun import REQUIRES_SIM, audit_sim_items, by_key

pytestmark = REQUIRES_SIM


def audit_fabric(tmp_path: Path, profile: str, nodes: int) -> dict[tuple[str, str], dict]:
    items = audit_sim_items(tmp_path, profile, nodes, "audit.fabric")
    for item in items:
        assert problems(item) == []
    assert {r["check"] for r in items} <= {c for c in _catalogue() if c.startswith("audit.fabric.")}
    return by_key(items)


def _catalogue() -> set[str]:
    from clustereval.checks import catalogue
    return set(catalogue.load())


def test_reference_has_no_fabric_failure(tmp_path):
    keyed = audit_fabric(tmp_path, "reference", 2)
    assert not [key for key, r in keyed.items() if r["status"] in ("fail", "error")], \
        {k: r["summary"] for k, r in keyed.items() if r["status"] in ("fail", "error")}
    rate = keyed[("audit.fabric.port_rate", "node1")]
    assert rate["status"] == "pass" and "8 × 400 Gb/s" in rate["summary"]
    assert keyed[("audit.fabric.class", "node2")]["summary"].startswith("InfiniBand fabric, 8 active port(s)")
    assert keyed[("audit.fabric.hca_naming", "node1")]["status"] == "pass"
    # The reference tenant sits in its own partition (0x8001) and only limited in the default one.
    assert keyed[("audit.fabric.ib_isolation", "node1")]["status"] == "pass"
    assert keyed[("audit.fabric.topology", "_cluster")]["status"] == "pass"
    assert keyed[("audit.fabric.imex", "node1")]["status"] == "skip"
    assert keyed[("audit.fabric.nccl_ib_qps", "_cluster")]["status"] == "skip"
    assert keyed[("audit.fabric.fleet_consistency", "_cluster")]["status"] == "pass"


def test_audit_fabric_profile_findings(tmp_path):
    keyed = audit_fabric(tmp_path, "audit-fabric", 3)
    isolation = keyed[("audit.fabric.ib_isolation", "node1")]
    assert isolation["status"] == "fail" and "isolates nothing" in isolation["summary"]
    rate = keyed[("audit.fabric.port_rate", "node2")]
    assert rate["status"] == "fail"
    assert "mlx5_7/1 DOWN/Disabled" in rate["summary"] and "mlx5_5/1 at 200 Gb/s (expected 400)" in rate["summary"]
    assert rate["artifacts"] == ["raw/node2/fabric-rdma-sysfs.txt"]
    assert keyed[("audit.fabric.port_rate", "node1")]["status"] == "pass"
    naming = keyed[("audit.fabric.hca_naming", "node3")]
    assert naming["status"] == "fail" and "ibp94s0" in naming["summary"]
    nccl = keyed[("audit.fabric.nccl_conf", "node3")]
    assert nccl["status"] == "fail" and "mlx5_3, absent" in nccl["summary"] and "NCCL_ALGO=Ring" in nccl["summary"]
    assert keyed[("audit.fabric.nccl_conf", "node1")]["status"] == "pass"
    fleet = keyed[("audit.fabric.fleet_consistency", "_cluster")]
    assert fleet["status"] == "fail" and "node2" in fleet["summary"] and "node3" in fleet["summary"]
