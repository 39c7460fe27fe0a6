"""GPU-stack and isolation audit checks against the simulated cluster: the reference profile gives no `fail`
in audit.gpustack.* / audit.isolation.*, and the flawed profile audit-gpustack produces its findings.
"""

from __future__ import annotations

from tests.integration.simrun import REQUIRES_SIM, audit_sim

pytestmark = REQUIRES_SIM


# Warns a healthy cluster shows too: GDRCopy not installed (optional; the gpustack overlay's gdrcopy section can
# install its library and load gdrdrv, but not make a per-node /dev/gdrdrv yet, so a reference with it would be
# half-installed), and VMSCAPE, which reads the CPU of the machine the simulation runs on
# (/sys/devices/system/cpu/vulnerabilities cannot be overlaid per node).
HEALTHY_WARNS = {"audit.gpustack.gdrcopy", "audit.isolation.vmscape"}


def test_reference_has_no_failures(tmp_path_factory):
    results = audit_sim(tmp_path_factory, "reference", 2, "audit.gpustack,audit.isolation")
    ours = {key: r for key, r in results.items() if key[0].startswith(("audit.gpustack.", "audit.isolation."))}
    assert len(ours) == 2 * 20
    assert [(k, r["summary"]) for k, r in ours.items() if r["status"] in ("fail", "error")] == []
    for node in ("node1", "node2"):
        assert results[("audit.gpustack.driver", node)]["status"] == "pass"
        assert results[("audit.gpustack.pcie_acs", node)]["status"] == "pass"
        assert results[("audit.gpustack.iommu_mode", node)]["value"] == "identity"
        assert results[("audit.isolation.nvlink_boundary", node)]["status"] == "pass"
        assert results[("audit.isolation.ib_tenant", node)]["status"] == "pass"
        # profiling allowed (RmProfilingAdminOnly=0, Nsight Compute installed), perf events open to users
        assert results[("audit.gpustack.ncu_profiling", node)]["status"] == "pass"
        assert results[("audit.gpustack.perf_access", node)]["status"] == "pass"
    warned = {key[0] for key, r in ours.items() if r["status"] == "warn"}
    assert warned <= HEALTHY_WARNS, warned


def test_gpustack_faults_are_found(tmp_path_factory):
    results = audit_sim(tmp_path_factory, "audit-gpustack", 3, "audit.gpustack")
    acs = results[("audit.gpustack.pcie_acs", "node2")]
    assert acs["status"] == "fail" and acs["value"] == 16 and "ReqRedir" in acs["summary"]
    assert results[("audit.gpustack.iommu_mode", "node2")]["status"] == "fail"
    driver = results[("audit.gpustack.driver", "node3")]
    assert driver["status"] == "fail" and "550.54.15" in driver["summary"]
    assert results[("audit.gpustack.container_toolkit", "node3")]["status"] == "warn"
    gdrcopy = results[("audit.gpustack.gdrcopy", "node3")]
    assert gdrcopy["status"] == "fail" and "/dev/gdrdrv" in gdrcopy["summary"], gdrcopy["summary"]
    for check in ("audit.gpustack.pcie_acs", "audit.gpustack.iommu_mode", "audit.gpustack.driver",
                  "audit.gpustack.container_toolkit"):
        assert results[(check, "node1")]["status"] == "pass", check
