"""Software stack & container audit checks against the simulated cluster: the reference profile gives no
`fail` in audit.software.*, the flawed profile audit-software produces the findings its comments describe.
"""

from __future__ import annotations

from tests.integration.simrun import REQUIRES_SIM, audit_sim

pytestmark = REQUIRES_SIM


def test_reference_has_no_software_failures(tmp_path_factory):
    results = audit_sim(tmp_path_factory, "reference", 2, "audit.software")
    ours = {key: r for key, r in results.items() if key[0].startswith("audit.software.")}
    assert len(ours) == 2 * 10
    assert [r for r in ours.values() if r["status"] in ("fail", "error")] == []
    for node in ("node1", "node2"):
        assert results[("audit.software.nccl", node)]["value"] == "2.21.5"
        assert results[("audit.software.batch_path", node)]["status"] == "pass"
        assert results[("audit.software.lmod", node)]["status"] == "pass"
        assert results[("audit.software.enroot", node)]["status"] == "pass"
    warned = {key[0] for key, r in ours.items() if r["status"] == "warn"}
    # What a healthy cluster also shows: no HPC SDK, no Pyxis (not simulable), and the host's docker CLI.
    assert warned <= {"audit.software.hpc_sdk", "audit.software.pyxis", "audit.software.docker"}


def test_software_faults_are_found(tmp_path_factory):
    results = audit_sim(tmp_path_factory, "audit-software", 3, "audit.software")
    nccl = results[("audit.software.nccl", "node2")]
    assert nccl["status"] == "warn" and nccl["value"] == "2.14.3"
    assert results[("audit.software.enroot", "node2")]["status"] == "warn"
    assert results[("audit.software.enroot", "node1")]["status"] == "pass"
    assert results[("audit.software.nccl_topo_container", "node3")]["status"] == "fail"
    batch = results[("audit.software.batch_path", "node3")]
    # SLURM_EXPORT_ENV=NONE: the step gets no PATH, so the login toolkit is gone (or another nvcc is found).
    assert batch["status"] in ("fail", "warn") and "batch step" in batch["summary"]
    assert results[("audit.software.batch_path", "node1")]["status"] == "pass"
