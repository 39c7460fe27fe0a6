"""AMD Instinct audit checks (audit.amd.*, audit.versions.rocm / amdgpu_driver), judged on what the simulated
amd-smi and rocm-smi print for nodes the real profile code renders (healthy MI300X / MI355X, and each fault of
amd-faults), and on the corpus's real rocm-smi capture where amd-smi is absent."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from clustereval import checks, facts
from clustereval.checks import Context
from clustereval.sim.profile import load_profile, render_node
from tests.conftest import read_corpus
from tests.helpers import judge, probe
from tests.unit.test_audit_amd_access import ROOT, devices_text

SHIMS = Path(__file__).resolve().parents[2] / "src" / "clustereval" / "sim" / "shims"
PYTHON = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable
COMMANDS = {"amd_smi_static": ("amd_smi.py", "static", "--asic", "--bus", "--vbios", "--driver", "--vram",
                               "--partition", "--limit"),
            "amd_smi_topology": ("amd_smi.py", "topology", "--access", "--link-type", "--hops"),
            "amd_smi_ras": ("amd_smi.py", "metric", "--ecc", "--ecc-blocks"),
            "rocm_smi": ("rocm_smi.py",)}
NODE_CHECKS = ("audit.amd.gpu.inventory", "audit.amd.gpu.partition", "audit.amd.gpu.vbios", "audit.amd.xgmi.links",
               "audit.amd.ras.counters", "audit.amd.ras.history", "audit.amd.numa_balancing",
               "audit.amd.peer_memory", "audit.versions.rocm", "audit.versions.amdgpu_driver", "audit.versions.rccl",
               "audit.amd.device_access")
TODAY = "2026-12-01"
NOT_INSTALLED = {name: probe(name, "", 127, missing=True)[name] for name in COMMANDS}


def node_state(profile: str, node: str) -> dict[str, Any]:
    return render_node(load_profile(profile, nodes=4), node)


def amd_node_text(state: dict[str, Any], numa: int = 0, kernel: str = "6.8.0-60-generic",
                  modules: tuple[str, ...] = ("amdgpu",), rocm: str | None = "auto") -> str:
    """What the amd_node probe prints on this node: its PCI AMD GPUs (the driver lost none of them), the modules,
    ROCm's version file, NUMA balancing, the kernel and every card's RAS counters and partitions."""
    amd = state.get("amd") or {}
    # the bus still shows a GPU the driver lost: as many as the highest slot in use
    lines = [f"amd_pci_gpus={max(amd['physical_gpus']) + 1}" if amd else "amd_pci_gpus=0"]
    if amd:
        lines.append(f"amdgpu_version={amd['amdgpu_version']}")
        lines += [f"module={m}" for m in modules]
        lines.append(f"rocm_version={amd['rocm_version'] + '-1' if rocm == 'auto' else rocm or 'absent'}")
        firsts = [d for d in amd["gpus"] if d["partition_id"] == 0]
        for card, device in enumerate(firsts, start=1):
            lines += [f"ras=card{card} {block} ue={c['ue']} ce={c['ce']}" for block, c in device["ras"].items()]
            lines.append(f"partition=card{card} {device['compute_partition']} {device['memory_partition']}")
    else:
        lines.append("amdgpu_version=absent")
    lines += [f"numa_balancing={numa}", f"kernel={kernel}", "end=ok"]
    return "\n".join(lines) + "\n"


def rccl_section(state: dict[str, Any], rccl: str | None = "auto") -> str:
    """The versions probe's rccl section on this node: rccl.h's defines (the sim's header) and librccl."""
    amd = state.get("amd") or {}
    version = amd.get("rccl_version") if rccl == "auto" else rccl
    lines = ["### rccl"]
    if amd and version:
        major, minor, patch = version.split(".")
        lines += ["header /opt/rocm/include/rccl/rccl.h", f"#define NCCL_MAJOR {major}",
                  f"#define NCCL_MINOR {minor}", f"#define NCCL_PATCH {patch}"]
    if amd and rccl is not None:
        lines.append(f"lib /opt/rocm/lib/librccl.so.1.0.{amd['rocm_version'].replace('.', '0')}")
    return "\n".join([*lines, "### rccl rc=0"]) + "\n"


def kernel_log(state: dict[str, Any]) -> str:
    lines = state.get("xid") or []
    return ("## account uid=0 sudo=no\n" + f"## source=dmesg rc=0 lines={len(lines) + 40}\n"
            + "".join(line + "\n" for line in lines if "amdgpu" in line or "NVRM" in line))


def probes_of(state: dict[str, Any], tmp_path: Path, rccl: str | None = "auto",
              **node: Any) -> dict[str, dict[str, Any]]:
    """Every probe the AMD checks read, as a run collects them on this node."""
    root = tmp_path / state["node"]
    root.mkdir(parents=True, exist_ok=True)
    (root / "node.json").write_text(json.dumps(state))
    env = {"PATH": os.environ.get("PATH", "/usr/bin"), "SIMNODE_ROOT": str(root), "PYTHONPATH": str(SHIMS)}
    out: dict[str, dict[str, Any]] = {}
    for name, (script, *args) in COMMANDS.items():
        if not state.get("amd"):
            out[name] = NOT_INSTALLED[name]
            continue
        done = subprocess.run([PYTHON, str(SHIMS / script), *args], env=env, capture_output=True, text=True,
                              timeout=30)
        out.update(probe(name, done.stdout, done.returncode, stderr=done.stderr))
    out.update(probe("amd_node", amd_node_text(state, **node)))
    out.update(probe("versions_inventory", rccl_section(state, rccl)))
    out.update(probe("amd_devices", devices_text(state) if state.get("amd") else "id=" + ROOT + "\nend=ok\n"))
    out.update(probe("monitoring_kernel_log", kernel_log(state)))
    out.update(probe("slurm_node", "", 127, missing=True))
    if state.get("amd"):
        out.update(probe("nvidia_smi_q_x", "", 127, missing=True))  # an AMD node has no nvidia-smi
    return out


def fleet_of(states: list[dict[str, Any]], tmp_path: Path) -> dict[str, dict[str, Any]]:
    """The siblings' facts the fleet-judged checks compare with."""
    return {s["node"]: checks.host_facts(Context(subject=s["node"], probes=probes_of(s, tmp_path)))
            for s in states}


def results(state: dict[str, Any], tmp_path: Path, fleet: dict | None = None, **node: Any) -> dict[str, dict]:
    probes = probes_of(state, tmp_path, **node)
    return {check: judge(check, probes, fleet=fleet or {}, subject=state["node"], today=TODAY)
            for check in NODE_CHECKS}


@pytest.mark.parametrize("profile", ["amd-mi300x", "amd-mi355x"])
def test_a_healthy_amd_node_passes_every_check(profile, tmp_path):
    states = [node_state(profile, f"node{i}") for i in (1, 2, 3)]
    fleet = fleet_of(states[1:], tmp_path / "fleet")
    got = results(states[0], tmp_path, fleet)
    assert {check: r["status"] for check, r in got.items()} == dict.fromkeys(NODE_CHECKS, "pass"), \
        {c: r["summary"] for c, r in got.items() if r["status"] != "pass"}
    model = "MI355X" if "355" in profile else "MI300X"
    assert got["audit.amd.gpu.inventory"]["summary"].startswith(f"8 × AMD Instinct {model} (amd-smi static;")
    assert got["audit.amd.gpu.inventory"]["value"] == 8
    assert got["audit.amd.gpu.partition"]["value"] == "SPX/NPS1"
    assert got["audit.amd.xgmi.links"]["summary"] == "all 28 GPU pairs linked over XGMI"
    assert got["audit.versions.rocm"]["value"] == "7.0.2"
    assert got["audit.amd.peer_memory"]["value"] == "dma-buf"


def test_a_gpu_the_driver_lost_is_counted_from_the_pci_bus(tmp_path):
    got = results(node_state("amd-faults", "node2"), tmp_path)["audit.amd.gpu.inventory"]
    assert got["status"] == "fail" and got["value"] == 7
    assert "7 GPU(s) visible to the driver" in got["summary"] and "8 AMD GPUs on the PCI bus" in got["summary"]
    # and against the expected count, with no PCI evidence of the loss
    probes = probes_of(node_state("amd-faults", "node2"), tmp_path / "b")
    probes.update(probe("amd_node", amd_node_text(node_state("amd-mi300x", "node1")).replace("amd_pci_gpus=8",
                                                                                            "amd_pci_gpus=7")))
    got = judge("audit.amd.gpu.inventory", probes, subject="node2", expected_gpus_per_node=8)
    assert got["status"] == "fail" and "7 GPU(s) visible where 8 are expected" in got["summary"]


def test_an_xgmi_link_down_names_the_pair(tmp_path):
    got = results(node_state("amd-faults", "node3"), tmp_path)
    xgmi = got["audit.amd.xgmi.links"]
    assert xgmi["status"] == "fail" and xgmi["value"] == 1
    assert "0000:26:00.0↔0000:85:00.0 PCIE" in xgmi["summary"]  # GPUs 1 and 4 of the profile's buses
    assert got["audit.amd.gpu.inventory"]["status"] == "pass"


def test_a_node_in_other_partition_modes_than_its_siblings_fails(tmp_path):
    states = [node_state("amd-faults", n) for n in ("node4", "node1", "node3")]
    fleet = fleet_of(states[1:], tmp_path / "fleet")
    got = results(states[0], tmp_path, fleet)
    partition = got["audit.amd.gpu.partition"]
    assert partition["status"] == "fail" and partition["value"] == "CPX/NPS4"
    assert "where the fleet runs SPX/NPS1" in partition["summary"] and "64 GPU(s)" in partition["summary"]
    # the 64 logical GPUs are still 8 physical ones
    assert got["audit.amd.gpu.inventory"]["status"] == "pass" and got["audit.amd.gpu.inventory"]["value"] == 8
    # a sibling's view of the CPX node: it differs, the siblings agree
    node1 = results(states[1], tmp_path / "n1", fleet_of([states[0], states[2], node_state("amd-faults", "node2")],
                                                        tmp_path / "fleet1"))
    assert node1["audit.amd.gpu.partition"]["status"] == "pass"


def test_ras_errors_fail_from_the_counters_and_the_kernel_log(tmp_path):
    got = results(node_state("amd-faults", "node2"), tmp_path)
    counters, history = got["audit.amd.ras.counters"], got["audit.amd.ras.history"]
    assert counters["status"] == "fail" and "GPU 3 umc ×2" in counters["summary"]
    assert counters["evidence"]["correctable_total"] == 14
    assert history["status"] == "fail" and "2 uncorrectable RAS error(s)" in history["summary"]


def test_correctable_errors_alone_warn(tmp_path):
    prof = load_profile("amd-mi300x", nodes=4)
    prof["nodes"] = {"node1": {"faults": {"ras_errors": [{"gpu": 0, "block": "xgmi_wafl", "ce": 3}]}}}
    got = results(render_node(prof, "node1"), tmp_path)
    assert got["audit.amd.ras.counters"]["status"] == "warn" and got["audit.amd.ras.counters"]["value"] == 3
    assert got["audit.amd.ras.history"]["status"] == "warn"


def test_the_sysfs_counters_stand_in_for_amd_smi_metric(tmp_path):
    probes = probes_of(node_state("amd-faults", "node2"), tmp_path)
    probes.update(probe("amd_smi_ras", "", 127, missing=True))
    got = judge("audit.amd.ras.counters", probes, subject="node2")
    assert got["status"] == "fail" and "card4 umc ×2" in got["summary"]
    assert got["evidence"]["source"] == "/sys/class/drm/card*/device/ras"


def test_numa_balancing_on_warns(tmp_path):
    got = results(node_state("amd-faults", "node4"), tmp_path, numa=1)["audit.amd.numa_balancing"]
    assert got["status"] == "warn" and "kernel.numa_balancing=1" in got["summary"]


@pytest.mark.parametrize(("kernel", "modules", "status", "value"), [
    ("6.8.0-60-generic", ("amdgpu", "amd_peermem"), "pass", "dma-buf"),
    ("5.4.0-150-generic", ("amdgpu", "amd_peermem"), "pass", "amd_peermem"),
    ("5.4.0-150-generic", ("amdgpu",), "fail", None),
    ("6.8.0-60-generic", (), "fail", None),
])
def test_the_peer_memory_path(tmp_path, kernel, modules, status, value):
    got = results(node_state("amd-mi300x", "node1"), tmp_path, kernel=kernel, modules=modules)["audit.amd.peer_memory"]
    assert got["status"] == status and got["value"] == value, got["summary"]


def test_versions_against_the_table(tmp_path):
    state = node_state("amd-mi300x", "node1")
    old = json.loads(json.dumps(state))
    old["amd"]["amdgpu_version"] = "6.12.9"
    got = results(old, tmp_path / "old", rocm="6.4.1-103")
    assert got["audit.versions.rocm"]["status"] == "fail" and "6.4.3" in got["audit.versions.rocm"]["summary"]
    assert got["audit.versions.amdgpu_driver"]["status"] == "fail"
    # a line older than every rung fails; none recorded is unknown, never a pass
    assert results(state, tmp_path / "ancient", rocm="6.1.2-40")["audit.versions.rocm"]["status"] == "fail"
    unknown = results(state, tmp_path / "none", rocm=None)["audit.versions.rocm"]
    assert unknown["status"] == "warn" and "unknown, not a pass" in unknown["summary"]


def test_a_node_without_amd_gpus_skips_every_check(tmp_path):
    got = results(node_state("reference", "node1"), tmp_path)
    assert {r["status"] for r in got.values()} == {"skip"}
    assert "no AMD GPU on this node" in got["audit.amd.gpu.inventory"]["summary"]


def test_amd_gpus_without_any_amd_tool_are_not_assessed(tmp_path):
    probes = probes_of(node_state("amd-mi300x", "node1"), tmp_path)
    probes.update(NOT_INSTALLED)
    got = judge("audit.amd.gpu.inventory", probes, subject="node1")
    assert got["status"] == "skip" and "8 AMD GPU(s) on the PCI bus but neither amd-smi nor rocm-smi" in got["summary"]


def test_rocm_smi_stands_in_where_amd_smi_is_absent():
    # the corpus's real 4 x MI300X Concise Info (ROCm 6.x layout)
    probes = {**NOT_INSTALLED,
              **probe("rocm_smi", read_corpus("rocm-smi", "rocm-smi-concise-mi300x-x4.txt")),
              **probe("amd_node", "amd_pci_gpus=4\nmodule=amdgpu\nkernel=6.8.0-60-generic\nend=ok\n")}
    got = judge("audit.amd.gpu.inventory", probes, subject="n1")
    assert got["status"] == "pass" and got["summary"].startswith("4 × AMD Instinct MI300X (rocm-smi;")
    assert judge("audit.amd.gpu.partition", probes, subject="n1")["value"] == "SPX/NPS1"


def test_harness_errors(tmp_path):
    probes = probes_of(node_state("amd-mi300x", "node1"), tmp_path)
    cut = probes["amd_smi_static"]["stdout"][:4000] + "\n...\n"
    assert judge("audit.amd.gpu.inventory", {**probes, **probe("amd_smi_static", cut)})["status"] == "error"
    no_links = probes["amd_smi_topology"]["stdout"].split("LINK TYPE TABLE:")[0]
    assert judge("audit.amd.xgmi.links", {**probes, **probe("amd_smi_topology", no_links)})["status"] == "error"
    assert judge("audit.amd.numa_balancing", {**probes, **probe("amd_node", "amd_pci_gpus=8\n")})["status"] == "error"
    denied = "## account uid=0 sudo=no\n## source=dmesg rc=1 lines=0\n"
    unreadable = {**probes, **probe("monitoring_kernel_log", denied)}
    assert judge("audit.amd.ras.history", unreadable)["status"] == "error"


def test_the_hardware_facts_of_an_amd_node(tmp_path):
    state = node_state("amd-faults", "node4")
    merged = checks.host_facts(Context(subject="node4", probes=probes_of(state, tmp_path)))
    assert merged["amd_gpu_count"] == 8 and merged["gpu_devices"] == 64  # the HIP devices a job addresses
    hardware = facts.hardware(merged)
    assert hardware["gpu_vendor"] == "amd" and hardware["gpu_model"] == "AMD Instinct MI300X"
    assert hardware["gpu_count"] == 8 and hardware["driver_version"] == "6.14.14"
    assert hardware["rocm_version"] == "7.0.2"


def test_the_fleet_of_amd_nodes_is_held_together(tmp_path):
    states = [node_state("amd-faults", n) for n in ("node1", "node2", "node3")]
    fleet = fleet_of(states, tmp_path)
    got = judge("audit.fleet.gpu_consistency", fleet=fleet, subject="_cluster")
    assert got["status"] == "fail" and "GPU count differs on node2 (7) from the fleet's 8" in got["summary"]
    healthy = fleet_of([node_state("amd-mi300x", n) for n in ("node1", "node2")], tmp_path / "ok")
    got = judge("audit.fleet.gpu_consistency", fleet=healthy, subject="_cluster")
    assert got["status"] == "pass" and got["summary"] == "2 nodes agree: 8 GPUs each, same model, driver and ROCm"


def test_idle_thermals_of_amd_gpus_named_by_amd_smi(tmp_path):
    # rocm-smi 7.x prints no product name: amd-smi's inventory gives the class (MI355X idles near 210 W)
    probes = probes_of(node_state("amd-mi355x", "node1"), tmp_path)
    got = judge("audit.monitoring.idle_thermals", probes, subject="node1")
    assert got["status"] == "pass" and got["evidence"]["class"] == "mi355" and got["evidence"]["tool"] == "rocm-smi"
    assert got["summary"].startswith("8 idle GPU(s) at most 40.0 °C and 214.0 W (mi355 ceilings 60 °C, 300 W)")


def test_rccl_against_the_table(tmp_path):
    state = node_state("amd-mi300x", "node1")
    got = results(state, tmp_path)["audit.versions.rccl"]
    assert got["status"] == "pass" and got["value"] == "2.26.6"
    assert got["evidence"]["header"] == "/opt/rocm/include/rccl/rccl.h"
    # amd-faults node3 kept the RCCL of ROCm 6.2: older than every maintained line
    old = results(node_state("amd-faults", "node3"), tmp_path / "old")["audit.versions.rccl"]
    assert old["status"] == "fail" and old["value"] == "2.20.5" and "2.27.7" in old["summary"]
    # ROCm 6.4's RCCL below the line's last fix fails; a newer line than the ladder passes
    assert results(state, tmp_path / "a", rccl="2.22.2")["audit.versions.rccl"]["status"] == "fail"
    assert results(state, tmp_path / "b", rccl="2.22.3")["audit.versions.rccl"]["status"] == "pass"
    assert results(state, tmp_path / "c", rccl="2.28.3")["audit.versions.rccl"]["status"] == "pass"
    # a line between the rungs is unknown, never a pass
    assert results(state, tmp_path / "d", rccl="2.24.3")["audit.versions.rccl"]["status"] == "warn"


def test_rccl_unknown_or_absent_warns_and_the_package_stands_in(tmp_path):
    state = node_state("amd-mi300x", "node1")
    library_only = results(state, tmp_path / "lib", rccl="")["audit.versions.rccl"]
    assert library_only["status"] == "warn" and "unknown, not a pass" in library_only["summary"]
    absent = results(state, tmp_path / "none", rccl=None)["audit.versions.rccl"]
    assert absent["status"] == "warn" and "no RCCL on the node" in absent["summary"]
    probes = probes_of(state, tmp_path / "pkg", rccl="")
    row = "rccl\t2.22.3.60403-128~22.04\tii \n"
    text = probes["versions_inventory"]["stdout"].replace("### rccl rc=0", row + "### rccl rc=0")
    got = judge("audit.versions.rccl", {**probes, **probe("versions_inventory", text)}, subject="node1", today=TODAY)
    assert got["status"] == "pass" and got["value"] == "2.22.3" and got["evidence"]["package"].startswith("2.22.3.")
    cut = probes["versions_inventory"]["stdout"].replace("### rccl rc=0\n", "")
    assert judge("audit.versions.rccl", {**probes, **probe("versions_inventory", cut)}, subject="node1",
                 today=TODAY)["status"] == "error"
