"""Software stack & container audit checks against the simulated cluster: the reference profile gives no
`fail` in audit.software.*, the flawed profile audit-software produces the findings its comments describe,
and the enroot import test leaves nothing behind on the nodes.
"""

from __future__ import annotations

from tests.integration.simrun import (
    REQUIRES_SIM,
    audit_sim,
    by_key,
    read_inventory,
    run_audit,
    simulated_cluster,
    ssh,
)

pytestmark = REQUIRES_SIM


def test_reference_has_no_software_failures(tmp_path_factory):
    results = audit_sim(tmp_path_factory, "reference", 2, "audit.software")
    ours = {key: r for key, r in results.items() if key[0].startswith("audit.software.")}
    assert len(ours) == 2 * 11
    assert [r for r in ours.values() if r["status"] in ("fail", "error")] == []
    for node in ("node1", "node2"):
        assert results[("audit.software.nccl", node)]["value"] == "2.21.5"
        assert results[("audit.software.batch_path", node)]["status"] == "pass"
        assert results[("audit.software.lmod", node)]["status"] == "pass"
        assert results[("audit.software.enroot", node)]["status"] == "pass"
        imported = results[("audit.software.enroot_import", node)]
        assert imported["status"] == "pass" and imported["evidence"]["squashfs_bytes"] > 0, imported["summary"]
        assert imported["evidence"]["image"] == "docker://busybox:1.36"
    warned = {key[0] for key, r in ours.items() if r["status"] == "warn"}
    # What a healthy cluster also shows: no HPC SDK, no Pyxis (not simulable), and the host's docker CLI.
    assert warned <= {"audit.software.hpc_sdk", "audit.software.pyxis", "audit.software.docker"}


def test_software_faults_are_found(tmp_path_factory):
    sim, runs = tmp_path_factory.mktemp("sim-audit-software"), tmp_path_factory.mktemp("runs")
    with simulated_cluster(sim, 3, "audit-software"):
        results = by_key(run_audit(sim / "inventory.ini", runs / "audit", "audit.software"))
        # With actions switched off the import is not tried: skipped and said so, never passed.
        quiet = by_key(run_audit(sim / "inventory.ini", runs / "no-actions", "audit.software.enroot_import",
                                 {"clustereval_audit_allow_actions": "false"}))
        # Nothing of the import is left on a node: the directories the probe reported, nor any other.
        hosts, _ = read_inventory(sim)
        looked = {node: ssh(sim, address, "ls -d ${TMPDIR:-/tmp}/clustereval-enroot-* 2>/dev/null; true")
                  for node, address in hosts.items()}
    assert all(proc.returncode == 0 for proc in looked.values()), {n: p.stderr for n, p in looked.items()}
    listing = {node: proc.stdout for node, proc in looked.items()}
    nccl = results[("audit.software.nccl", "node2")]
    assert nccl["status"] == "warn" and nccl["value"] == "2.14.3"
    assert results[("audit.software.enroot", "node2")]["status"] == "warn"
    assert results[("audit.software.enroot", "node1")]["status"] == "pass"
    assert results[("audit.software.nccl_topo_container", "node3")]["status"] == "fail"
    batch = results[("audit.software.batch_path", "node3")]
    # SLURM_EXPORT_ENV=NONE: the step gets no PATH, so the login toolkit is gone (or another nvcc is found).
    assert batch["status"] in ("fail", "warn") and "batch step" in batch["summary"]
    assert results[("audit.software.batch_path", "node1")]["status"] == "pass"
    imports = {node: results[("audit.software.enroot_import", node)] for node in hosts}
    assert imports["node1"]["status"] == "pass", imports["node1"]["summary"]
    assert imports["node2"]["status"] == "skip" and "enroot is not installed" in imports["node2"]["summary"]
    limited = imports["node3"]
    assert limited["status"] == "warn" and "HTTP 429" in limited["summary"], limited["summary"]
    assert "returned error code: 429 Too Many Requests" in limited["evidence"]["error"]
    for node in hosts:
        off = quiet[("audit.software.enroot_import", node)]
        assert off["status"] == "skip" and "import not tried: actions are switched off" in off["summary"]
    for node, result in imports.items():
        workdir = result["evidence"].get("workdir")
        assert (workdir is not None) == (node != "node2")
        assert "left_behind" not in result["evidence"]
        # Other audits may share /tmp with the simulated nodes: this run's directories must be gone.
        assert workdir not in listing[node].split()
