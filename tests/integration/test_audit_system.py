"""The node's own machine against the audit: the audit-system profile's failures are found by the checks that
read those interfaces, and its node1 (the healthy reference's machine) passes them (see the profile's header)."""

from __future__ import annotations

import pytest

from tests.integration.simrun import REQUIRES_SIM, audit_sim

pytestmark = REQUIRES_SIM

TAGS = ",".join(["audit.isolation.hbm_numa", "audit.isolation.pcie_passthrough", "audit.isolation.bmc_inband",
                 "audit.gpustack.perf_access", "audit.software.enroot", "audit.fabric.nic_link",
                 "audit.scheduler.spool_disk", "audit.versions.kernel_pending", "audit.fleet.kernel_consistency",
                 "audit.os.root_filesystem"])


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    return audit_sim(tmp_path_factory, "audit-system", 3, TAGS)


def status(results, check, node):
    return results[(check, node)]["status"]


def test_the_reference_machine_is_healthy(results):
    for check in ("audit.gpustack.perf_access", "audit.fabric.nic_link", "audit.scheduler.spool_disk",
                  "audit.isolation.bmc_inband", "audit.software.enroot", "audit.versions.kernel_pending",
                  "audit.os.root_filesystem"):
        assert status(results, check, "node1") == "pass", results[(check, "node1")]["summary"]
    assert status(results, "audit.isolation.pcie_passthrough", "node1") == "skip"  # bare metal, no vfio-pci
    assert status(results, "audit.isolation.hbm_numa", "node1") == "skip"  # x86_64


def test_grace_hbm_onlined_as_numa_memory(results):
    found = results[("audit.isolation.hbm_numa", "node2")]
    assert found["status"] == "fail" and "NUMA nodes 2, 3, 4, 5" in found["summary"]


def test_storage_nic_without_link_and_spool_on_root(results):
    nic = results[("audit.fabric.nic_link", "node2")]
    assert nic["status"] == "fail" and "ens41np0" in nic["summary"]
    spool = results[("audit.scheduler.spool_disk", "node2")]
    assert spool["status"] == "warn" and "root filesystem" in spool["summary"]
    assert status(results, "audit.scheduler.spool_disk", "node3") == "pass"


def test_kvm_guest_kernel_drift_and_apparmor_userns(results):
    assert status(results, "audit.isolation.pcie_passthrough", "node3") == "warn"
    assert status(results, "audit.isolation.bmc_inband", "node3") == "skip"
    pending = results[("audit.versions.kernel_pending", "node3")]
    assert pending["status"] == "warn" and "6.1.0-32-amd64" in pending["summary"]
    drift = results[("audit.fleet.kernel_consistency", "_cluster")]
    assert drift["status"] in ("warn", "fail") and "node3 (6.1.0-28-amd64)" in drift["summary"]
    enroot = results[("audit.software.enroot", "node3")]
    assert enroot["status"] == "fail" and "apparmor_restrict_unprivileged_userns=1" in enroot["summary"]


def test_small_full_root_filesystem(results):
    root = results[("audit.os.root_filesystem", "node3")]
    assert root["status"] == "fail" and root["value"] == 93
    assert "50 GiB, 93% used" in root["summary"] and "only 50 GiB on a node with 8 GPUs" in root["summary"]
    assert "1788 GiB, 12% used" in results[("audit.os.root_filesystem", "node1")]["summary"]
