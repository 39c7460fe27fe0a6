"""The whole audit against simulated AMD Instinct clusters: a healthy MI300X and MI355X cluster has no fail and no
error anywhere; each fault of amd-faults is caught on its node by the check that names it, and only there."""

from __future__ import annotations

from pathlib import Path

import pytest

from clustereval.results import problems
from tests.integration.simrun import REQUIRES_SIM, audit_sim_items, by_key

pytestmark = REQUIRES_SIM
AMD_CHECKS = ("audit.amd.gpu.inventory", "audit.amd.gpu.partition", "audit.amd.gpu.vbios", "audit.amd.xgmi.links",
              "audit.amd.ras.counters", "audit.amd.ras.history", "audit.amd.numa_balancing", "audit.amd.peer_memory",
              "audit.versions.rocm", "audit.versions.amdgpu_driver", "audit.versions.rccl", "audit.amd.device_access")
def audit(tmp_path: Path, profile: str, nodes: int) -> dict[tuple[str, str], dict]:
    items = audit_sim_items(tmp_path, profile, nodes, "audit")
    for item in items:
        assert problems(item) == []
    return by_key(items)


@pytest.mark.parametrize(("profile", "model"), [("amd-mi300x", "MI300X"), ("amd-mi355x", "MI355X")])
def test_a_healthy_amd_cluster_has_no_fail(tmp_path, profile, model):
    keyed = audit(tmp_path, profile, 2)
    bad = {key: r["summary"] for key, r in keyed.items() if r["status"] in ("fail", "error")}
    assert not bad, bad
    judged = list(AMD_CHECKS)
    for node in ("node1", "node2"):
        assert {check: keyed[(check, node)]["status"] for check in judged} == dict.fromkeys(judged, "pass")
        assert keyed[("audit.versions.rccl", node)]["value"] == "2.26.6"
        access = keyed[("audit.amd.device_access", node)]
        assert "can open /dev/kfd and the 8 GPU render node(s) (through group render)" in access["summary"]
        # AMD's own exporter, and the GPU<->NIC PCIe path judged for the AMD GPUs
        exporters = keyed[("audit.monitoring.exporters", node)]
        assert exporters["status"] == "pass" and "amd-metrics-exporter" in exporters["summary"]
        assert keyed[("audit.gpustack.pcie_acs", node)]["status"] == "pass"
        assert keyed[("audit.gpustack.iommu_mode", node)]["status"] in ("pass", "warn")
        assert keyed[("audit.amd.gpu.inventory", node)]["summary"].startswith(f"8 × AMD Instinct {model} (amd-smi")
        # the evidence it read: amd-smi's inventory, the PCI bus count, Slurm's GRES
        assert keyed[("audit.amd.gpu.inventory", node)]["artifacts"] == [
            f"raw/{node}/amd-smi-static.txt", f"raw/{node}/amd-node.txt", f"raw/{node}/scontrol-show-node.txt"]
        assert keyed[("audit.slurm.gres", node)]["summary"].endswith("matches the 8 GPUs amd-smi static sees")
        assert "check_amd_ras" in keyed[("audit.health.healthcheck_program", node)]["summary"]
        idle = keyed[("audit.monitoring.idle_thermals", node)]
        assert idle["status"] == "pass" and idle["evidence"]["tool"] == "rocm-smi"
        assert len(idle["evidence"]["gpus"]) == 8
        # the NVIDIA checks say why they do not apply
        assert keyed[("audit.gpustack.driver", node)]["status"] == "skip"
    assert keyed[("audit.fleet.gpu_consistency", "_cluster")]["summary"].endswith("same model, driver and ROCm")


def test_each_amd_fault_is_caught_by_the_check_that_names_it(tmp_path):
    keyed = audit(tmp_path, "amd-faults", 4)
    failing = {key for key, r in keyed.items() if r["status"] == "fail"}
    # node2 lost GPU 6 and logged uncorrectable UMC errors on GPU 3: its health check drained it
    assert {("audit.amd.gpu.inventory", "node2"), ("audit.amd.ras.counters", "node2"),
            ("audit.amd.ras.history", "node2"), ("audit.slurm.gres", "node2"),
            ("audit.slurm.node_state", "node2")} <= failing
    assert "AMD RAS UE umc 0000:65:00.0" in keyed[("audit.slurm.node_state", "node2")]["summary"]
    assert "GPU 3 umc ×2" in keyed[("audit.amd.ras.counters", "node2")]["summary"]
    # node3: the XGMI link between GPUs 1 and 4 is down
    xgmi = keyed[("audit.amd.xgmi.links", "node3")]
    assert xgmi["status"] == "fail" and "0000:26:00.0↔0000:85:00.0 PCIE" in xgmi["summary"]
    # node4: left in CPX/NPS4 with NUMA balancing on
    partition = keyed[("audit.amd.gpu.partition", "node4")]
    assert partition["status"] == "fail" and "CPX/NPS4 where the fleet runs SPX/NPS1" in partition["summary"]
    assert keyed[("audit.amd.numa_balancing", "node4")]["status"] == "warn"
    assert keyed[("audit.amd.gpu.inventory", "node4")]["status"] == "pass"  # 64 logical GPUs, 8 physical
    # node4's /dev/kfd was left 0660 root:root: only root can run a ROCm program there
    access = keyed[("audit.amd.device_access", "node4")]
    assert access["status"] == "fail" and access["summary"].endswith("node(s): /dev/kfd 0660 root:root")
    assert len(access["evidence"]["gpu_render_nodes"]) == 64
    assert {key[1] for key in failing if key[0] == "audit.amd.device_access"} == {"node4"}
    # node3 kept the RCCL of an older image
    rccl = keyed[("audit.versions.rccl", "node3")]
    assert rccl["status"] == "fail" and rccl["value"] == "2.20.5"
    assert {key[1] for key in failing if key[0] == "audit.versions.rccl"} == {"node3"}
    # node1 is healthy, and no fault leaks onto another node's checks
    assert not {key for key in failing if key[1] == "node1"}
    assert {key[1] for key in failing if key[0] == "audit.amd.xgmi.links"} == {"node3"}
    assert {key[1] for key in failing if key[0] == "audit.amd.gpu.partition"} == {"node4"}
    assert keyed[("audit.fleet.gpu_consistency", "_cluster")]["status"] == "fail"
