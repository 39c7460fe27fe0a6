"""Provider settings of sim profiles, the dcgmi health report with incidents, dcgmi test --inject, and the
simulated PCI sysfs (no cluster needed)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from clustereval.sim import pcisysfs, profile

SHIMS = Path(profile.__file__).resolve().parent / "shims"


def shim(name):
    spec = importlib.util.spec_from_file_location(f"sim_shim_{name}", SHIMS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(SHIMS))  # as the shim launcher does: the shims share simnode
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(SHIMS))
    return module


def write_profile(tmp_path, text):
    path = tmp_path / "p.yml"
    path.write_text(text)
    return path


def test_defaults_keep_todays_behaviour():
    prof = profile.load_profile("reference")
    settings = profile.provider_settings(prof, "node1")
    assert settings["health_check"]["mode"] == "drain" and settings["health_check"]["interval_s"] == 30
    assert settings["remediation"]["mode"] == "none" and settings["dcgm_injection"] is True
    assert 79 in settings["health_check"]["drain_xids"] and 13 not in settings["health_check"]["drain_xids"]
    drills = profile.load_profile("fault-drills")
    assert profile.provider_settings(drills, "node3")["health_check"]["mode"] == "exit_1"
    assert profile.provider_settings(drills, "node1")["remediation"] == {
        "mode": "reboot", "after_s": 5.0, "spare": "node5", "return_to_service": 2, "reboot_program": None,
        "resume_program": None, "suspend_program": None}
    assert settings["health_check"]["checks"] == ["xid", "dcgm_health"]
    assert settings["health_check"]["node_state"] == "ANY"


@pytest.mark.parametrize(("text", "message"), [
    ("cluster: {provider: {health_check: {mode: sometimes}}}", "health_check.mode must be one of"),
    ("cluster: {provider: {bogus: 1}}", "unknown keys ['bogus']"),
    ("cluster: {}\nnodes: {node2: {provider: {health_check: {interval_s: 5}}}}", "cluster-wide only"),
    ("cluster: {provider: {remediation: {after_s: -1}}}", "remediation.after_s must be a non-negative"),
    ("cluster: {provider: {health_check: {drain_xids: [79, x]}}}", "drain_xids must be a list"),
    ("cluster: {provider: {dcgm_injection: maybe}}", "dcgm_injection must be true or false"),
    ("cluster: {provider: {health_check: {checks: [xid, smart]}}}", "health_check.checks must be a list of"),
    ("cluster: {provider: {health_check: {node_state: BUSY}}}", "health_check.node_state must be one or more"),
    ("cluster: {}\nnodes: {node2: {provider: {health_check: {node_state: IDLE}}}}", "node_state is cluster-wide"),
    ("cluster: {provider: {remediation: {return_to_service: 3}}}", "return_to_service must be 0, 1 or 2"),
    ("cluster: {}\nnodes: {node2: {provider: {remediation: {return_to_service: 0}}}}", "cluster-wide only"),
    ("cluster: {provider: {remediation: {resume_program: resume.sh}}}", "resume_program must be an absolute path"),
    ("cluster: {slurm: {controller: login1}}", "slurm.controller must be a node name"),
    ("cluster: {slurm: {prolog_s: -2}}", "slurm.prolog_s must be a non-negative"),
    ("cluster: {slurm: {message_timeout_s: 2.5}}", "slurm.message_timeout_s must be a non-negative integer"),
    ("cluster: {slurm: {job_defaults: {cpus_per_task: 4}}}", "slurm.job_defaults must be a mapping with keys"),
    ("cluster: {slurm: {bogus: 1}}", "slurm has unknown keys ['bogus']"),
    ("cluster: {}\nnodes: {node2: {slurm: {controller: node2}}}", "slurm.controller is cluster-wide only"),
    ("cluster: {racks: {r1: node1}}", "racks must map each rack name to a list of node names"),
    ("cluster: {}\nnodes: {node2: {racks: {r1: [node2]}}}", "racks is cluster-wide"),
    ("cluster: {rack: r1}", "rack is per node"),
])
def test_bad_provider_sections_are_refused_naming_the_key(tmp_path, text, message):
    with pytest.raises(profile.ProfileError) as caught:
        profile.load_profile(write_profile(tmp_path, text))
    assert message in str(caught.value)


def test_health_report_layout_with_incidents(tmp_path, monkeypatch):
    dcgmi = shim("dcgmi")
    monkeypatch.setenv("SIMNODE_ROOT", str(tmp_path))
    (tmp_path / "run").mkdir()
    node = profile.render_node(profile.load_profile("reference"), "node1")
    assert "| Overall Health            | Healthy" in dcgmi.health_report(node)
    (tmp_path / "run" / "runtime.json").write_text(json.dumps({"lost_gpus": [1]}))
    assert dcgmi.health_report(node).splitlines()[3:] == [
        "| Overall Health            | Failure                                                  |",
        "| GPU                       |                                                          |",
        "| -> 1                      | Failure                                                  |",
        "|    -> Errors              |                                                          |",
        "|       -> Internal error   | Failure                                                  |",
        "|                           | GPU 1 has fallen off the bus  (triggered by XID 79: GPU  |",
        "|                           | %d has fallen off the bus)                               |",
        "+---------------------------+----------------------------------------------------------+",
    ]


def test_inject_and_its_failure_without_injection_support(tmp_path, monkeypatch, capsys):
    dcgmi = shim("dcgmi")
    monkeypatch.setenv("SIMNODE_ROOT", str(tmp_path))
    node = profile.render_node(profile.load_profile("reference"), "node1")
    (tmp_path / "provider.json").write_text(json.dumps({"dcgm_injection": True}))
    assert dcgmi.test_command(node, ["--inject", "--gpuid", "2", "-f", "230", "-v", "48"]) == 0
    assert capsys.readouterr().out == "Successfully injected field info.\n"
    assert "Detected XID 48 for GPU 2  (triggered by XID 48: Double" in dcgmi.health_report(node)
    (tmp_path / "provider.json").write_text(json.dumps({"dcgm_injection": False}))
    assert dcgmi.test_command(node, ["--inject", "--gpuid", "2", "--field", "311", "--value", "1"]) == 250
    assert capsys.readouterr().out == "Error: Unable to inject info. Return: Feature not supported\n"


def test_pci_tree_matches_nvidia_smi_bus_ids(tmp_path):
    state = profile.render_node(profile.load_profile("reference"), "node1")
    funcs = pcisysfs.build(state, tmp_path)
    gpu0 = state["gpus"][0]["pci_bus_id"]  # 00000000:19:00.0
    link = tmp_path / "devices" / gpu0[4:].lower()
    assert link.resolve().parent.name == "0000:17:01.0"
    config = (tmp_path / "hierarchy" / next(f["path"] for f in funcs if f["bdf"] == "0000:17:01.0") / "config")
    raw = config.read_bytes()
    assert len(raw) == 4096 and raw[0x0E] == 1 and raw[0x19] == 0x19 and raw[0x3E:0x40] == b"\x02\x00"
    assert (link / "vendor").read_text() == "0x10de\n" and (link / "class").read_text() == "0x030200\n"
    watch = next(w for w in pcisysfs.watches(funcs, tmp_path) if w["bdf"] == "0000:17:01.0")
    assert watch["gpus"] == [0] and pcisysfs.bridge_control(watch["config"]) == 0x0002
