"""Fault drills on an AMD Instinct node: an uncorrectable UMC RAS error injected and timed as the Xid is.

The command builders run in a real ``sh`` where they can (a fake ``amd-smi`` on PATH, a fake sysfs/debugfs tree
under ``tmp_path``); the drill end to end runs against the scripted node of ``test_drill.py`` answering as an
AMD node does (``amd-smi list``, no ``nvidia-smi``), its provider draining with the reason ``AMD RAS UE umc
<bdf>`` as the AMD health check does.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from clustereval.drills import AUTO_ORDER, AUTO_ORDER_AMD, RAS_UMC_UE, auto_order, commands, runner, timeline
from clustereval.parsers import parse
from tests.unit.test_drill import FakeNode, Provider, judge

CORPUS_LIST = Path(__file__).resolve().parents[3] / "shared" / "corpus" / "amd-smi" / \
    "list-kfd-id-node-id-redacted-uuid.txt"
BUSES = ["05", "26", "46", "65", "85", "a6", "c6", "e5"]
CTRL = "/sys/kernel/debug/dri/1/ras/ras_ctrl"


def amd_smi_list(gpus: int = 8, partitions: int = 1) -> str:
    """``amd-smi list`` as AMD SMI prints it (the corpus layout): one block per logical GPU."""
    blocks = []
    for index in range(gpus * partitions):
        physical, part = divmod(index, partitions)
        blocks.append(f"GPU: {index}\n    BDF: 0000:{BUSES[physical]}:00.{part}\n    UUID: <redacted>\n"
                      f"    KFD_ID: {45412 + index}\n    NODE_ID: {index + 2}\n    PARTITION_ID: {part}\n")
    return "\n".join(blocks) + "\n"


def sh(cmd: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["sh", "-c", cmd], capture_output=True, text=True, timeout=30,
                          env={**os.environ, **(env or {})})


def fake_tools(tmp_path: Path, listing: str) -> dict[str, str]:
    """A PATH holding ``amd-smi`` (printing ``listing``) and the basic tools, and no ``nvidia-smi``."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "listing.txt").write_text(listing)
    tool = bin_dir / "amd-smi"
    tool.write_text(f"#!/bin/sh\n[ \"$1\" = list ] || exit 2\ncat {bin_dir / 'listing.txt'}\n")
    tool.chmod(0o755)
    for name in ("sh", "cat", "date", "timeout", "grep", "sed"):
        found = subprocess.run(["sh", "-c", f"command -v {name}"], capture_output=True, text=True).stdout.strip()
        if found.startswith("/"):
            (bin_dir / name).symlink_to(found)
    return {"PATH": str(bin_dir)}


# ----------------------------------------------------------------------------------------- builders and parsing

def test_the_vendor_comes_from_the_nodes_own_tools(tmp_path):
    env = fake_tools(tmp_path, amd_smi_list())
    done = sh(commands.gpu_bus_ids(), env)
    observed = parse("probe-drill-step", done.stdout)
    assert observed["gpu_vendor"] == "amd"
    assert observed["gpu_bus"] == {i: f"0000:{b}:00.0" for i, b in enumerate(BUSES)}
    nvidia = parse("probe-drill-step", "## gpu_bus\n0, 00000000:18:00.0\n## end rc=0\n")
    assert nvidia["gpu_vendor"] == "nvidia" and nvidia["gpu_bus"] == {0: "00000000:18:00.0"}


def test_a_poll_lists_the_physical_gpus_amd_smi_prints(tmp_path):
    env = fake_tools(tmp_path, amd_smi_list(gpus=8, partitions=8))  # CPX: 64 logical GPUs, 8 physical
    observed = parse("probe-drill-step", sh(commands.poll("node2", gpus=True, scheduler="none"), env).stdout)
    assert observed["gpus"]["tool"] == "amd-smi" and observed["gpus"]["count"] == 8
    assert observed["gpus"]["bdfs"][0] == "0000:05:00.0" and timeline.gpus_listed(observed["gpus"])
    # a GPU the driver lost is not listed: the count says so
    env = fake_tools(tmp_path / "lost", amd_smi_list(gpus=7))
    observed = parse("probe-drill-step", sh(commands.poll("node2", gpus=True, scheduler="none"), env).stdout)
    assert observed["gpus"]["count"] == 7


def test_the_corpus_listing_parses():
    if not CORPUS_LIST.exists():
        pytest.skip(f"{CORPUS_LIST} is not there")
    observed = parse("probe-drill-step", "## gpu_bus vendor=amd tool=amd-smi\n" + CORPUS_LIST.read_text()
                     + "## end rc=0\n")
    assert observed["gpu_bus"] == {0: "0000:23:00.0", 1: "0000:26:00.0"}


def test_the_kernel_line_is_the_drivers_ras_report_for_that_gpu():
    line = commands.kmsg_line(79, "0000:05:00.0", vendor="amd")
    assert line == "amdgpu 0000:05:00.0: 1 uncorrectable hardware errors detected in umc block"
    events = parse("kernel-amd-ras", line)
    assert events["events"][0]["kind"] == "ue" and events["events"][0]["block"] == "umc", events
    cmd = commands.inject("kmsg", 0, "0000:05:00.0", 79, vendor="amd")
    assert f"'<6>{line}'" in cmd and "/dev/kmsg" in cmd and "NVRM" not in cmd
    undo = commands.undo("kmsg", 0, "0000:05:00.0", 79, 8, "systemctl reboot", vendor="amd")
    assert "<5>clustereval: the uncorrectable umc RAS error line above for 0000:05:00.0" in undo
    assert "hardware errors detected" not in undo  # the notice is no RAS report itself
    # NVIDIA's stay as they were
    assert commands.kmsg_line(79, "00000000:3B:00.0").startswith("NVRM: Xid (PCI:0000:3b:00): 79,")


def test_dcgm_is_unavailable_on_an_amd_node_and_ras_on_an_nvidia_one():
    for method, vendor, said in (("dcgm", "amd", "DCGM injects NVIDIA Xids"), ("ras", "nvidia", "no AMD GPU")):
        done = sh(commands.prepare(method, 0, "0000:05:00.0", 79, vendor))
        assert done.returncode == commands.UNAVAILABLE_RC, done
        assert said in parse("probe-drill-step", done.stdout)["unavailable"]


def test_fallback_order():
    assert AUTO_ORDER_AMD == ("ras", "kmsg", "sbr") and auto_order("amd") == AUTO_ORDER_AMD
    assert auto_order("nvidia") == AUTO_ORDER == ("dcgm", "kmsg", "sbr") and auto_order(None) == AUTO_ORDER


@pytest.fixture
def ras_tree(tmp_path, monkeypatch):
    """A sysfs/debugfs tree where amdgpu's RAS injection is possible on 0000:05:00.0 (its DRM debugfs
    directory is minor 1, whose ``name`` says so)."""
    debugfs, pci, params = tmp_path / "debug", tmp_path / "pci", tmp_path / "amdgpu"
    (debugfs / "dri" / "0").mkdir(parents=True)  # the BMC's display adapter: no RAS
    (debugfs / "dri" / "0" / "name").write_text("ast dev=0000:02:00.0 unique=0000:02:00.0\n")
    card = debugfs / "dri" / "1"
    (card / "ras").mkdir(parents=True)
    (card / "name").write_text("amdgpu dev=0000:05:00.0 unique=0000:05:00.0\n")
    (card / "ras" / "ras_ctrl").write_text("")
    (pci / "0000:05:00.0" / "ras").mkdir(parents=True)
    (pci / "0000:05:00.0" / "ras" / "features").write_text("feature mask: 0x3fbf\n")
    (pci / "0000:05:00.0" / "ras" / "gpu_vram_bad_pages").write_text("")
    params.mkdir()
    (params / "ras_enable").write_text("-1\n")
    mounts = tmp_path / "mounts"
    mounts.write_text(f"debugfs {debugfs} debugfs rw,relatime 0 0\n")
    for name, value in (("DEBUGFS", debugfs), ("PCI_DEVICES", pci), ("AMDGPU_PARAMETERS", params),
                        ("PROC_MOUNTS", mounts)):
        monkeypatch.setattr(commands, name, str(value))
    return {"ctrl": card / "ras" / "ras_ctrl", "pci": pci / "0000:05:00.0", "params": params, "mounts": mounts}


def test_ras_prepare_finds_the_gpus_control_and_the_injection_writes_the_kernels_syntax(ras_tree):
    done = sh(commands.prepare("ras", 0, "0000:05:00.0", 79, "amd"))
    ready = parse("probe-drill-step", done.stdout)["ready"]
    assert done.returncode == 0 and ready == {"ctrl": str(ras_tree["ctrl"]), "features": "0x3fbf"}, done
    done = sh(commands.inject("ras", 0, "0000:05:00.0", 79, vendor="amd", ctrl=ready["ctrl"]))
    step = parse("probe-drill-step", done.stdout)
    assert done.returncode == 0 and step["fault_at"] is not None and step["rcs"]["ras"] == 0
    # amdgpu_ras_debugfs_ctrl_parse_data: "inject <block> <error> <sub-block> <address> <value> [<mask>]"
    assert ras_tree["ctrl"].read_text() == "inject umc ue 0x0 0x0 0x0\n"
    undo = commands.undo("ras", 0, "0000:05:00.0", 79, 8, "systemctl reboot", vendor="amd", ctrl=ready["ctrl"])
    assert "amd-smi list" in undo and "PARTITION_ID: 0" in undo and "systemctl reboot" in undo
    assert "ras_eeprom_reset" not in undo and "ras_ctrl" in undo  # the notice names what was written, nothing undone


@pytest.mark.parametrize("change, said", [
    (lambda t: t["mounts"].write_text("proc /proc proc rw 0 0\n"), "debugfs is not mounted"),
    (lambda t: (t["params"] / "ras_enable").write_text("0\n"), "RAS is off in the driver"),
    (lambda t: t["ctrl"].unlink(), "no amdgpu RAS control for 0000:05:00.0"),
    (lambda t: (t["pci"] / "ras" / "features").write_text("feature mask: 0x3fbe\n"), "UMC RAS is not enabled"),
    (lambda t: (t["pci"] / "ras" / "gpu_vram_bad_pages").write_text("0x00000000 : 0x00001000 : R\n"),
     "VRAM page 0 of 0000:05:00.0 is retired already"),
])
def test_ras_prepare_says_why_it_cannot(ras_tree, change, said):
    change(ras_tree)
    done = sh(commands.prepare("ras", 0, "0000:05:00.0", 79, "amd"))
    assert done.returncode == commands.UNAVAILABLE_RC, done
    assert said in parse("probe-drill-step", done.stdout)["unavailable"], done.stdout


@pytest.mark.parametrize("method", ["ras", "kmsg", "sbr", "dcgm"])
def test_every_amd_step_is_valid_shell(method):
    steps = [commands.prepare(method, 0, "0000:05:00.0", 79, "amd"),
             commands.inject(method, 0, "0000:05:00.0", 79, "0000:04:00.0", "0002", vendor="amd", ctrl=CTRL),
             commands.undo(method, 0, "0000:05:00.0", 79, 8, "systemctl reboot", "0000:04:00.0", "0002",
                           vendor="amd", ctrl=CTRL)]
    for step in steps:
        assert subprocess.run(["sh", "-n", "-c", step]).returncode == 0, step
    if method == "sbr":
        assert "amd-smi list" in steps[2] and "nvidia-smi" not in steps[2]


# ----------------------------------------------------------------------------------------- the drill on an AMD node

class FakeAmdNode(FakeNode):
    """The scripted node of test_drill.py as an MI300X node: amd-smi, no nvidia-smi, debugfs where told, and a
    provider whose health check drains with the reason AMD's RAS check gives."""

    debugfs: bool = False

    def _state(self) -> tuple[str, str | None]:
        state, reason = super()._state()
        return (state, "AMD RAS UE umc 0000:05:00.0") if reason == "XID 79" else (state, reason)

    def run(self, cmd: str, timeout_s: float) -> tuple[int, str, str]:
        if "nvidia-smi --query-gpu" in cmd:  # the gpu_bus step: this node has no nvidia-smi, so amd-smi
            self.now += 0.05
            self.commands.append(cmd)
            assert "amd-smi list" in cmd
            return 0, f"## gpu_bus vendor=amd tool=amd-smi\n{amd_smi_list(self.gpus)}## end rc=0\n", ""
        if "PARTITION_ID: 0" in cmd and "nohup" in cmd:  # a restore checking the GPUs (ras, sbr): all there
            self.commands.append(cmd)
            return 0, "", ""
        if "## ready ctrl=" in cmd:  # the RAS prepare
            self.now += 0.05
            self.commands.append(cmd)
            if not self.debugfs:
                return 3, "## unavailable why=debugfs is not mounted at /sys/kernel/debug\n", ""
            return 0, f"## ready ctrl={CTRL} features=0x3fbf\n", ""
        if "## unavailable why=DCGM" in cmd:
            self.commands.append(cmd)
            return 3, "## unavailable why=DCGM injects NVIDIA Xids; this node has AMD GPUs\n", ""
        if "inject umc ue 0x0 0x0 0x0" in cmd and "## ras rc=" in cmd:
            self.now += 0.05
            self.commands.append(cmd)
            self.t0 = self.now
            return 0, f"## fault t={self.now}\n## ras rc=0 ctrl={CTRL}\n", ""
        if "> /dev/kmsg' sh '<6>amdgpu " in cmd:
            self.now += 0.05
            self.commands.append(cmd)
            self.t0 = self.now
            return 0, f"## fault t={self.now}\n## kmsg rc=0 line={commands.kmsg_line(0, '0000:05:00.0', 'amd')}\n", ""
        rc, out, err = super().run(cmd, timeout_s)
        if "## clock" in cmd and "nvidia-smi -L" in cmd:  # a poll with GPUs: amd-smi lists them (no nvidia-smi)
            assert "amd-smi list" in cmd
            out = out.split("## gpus rc=0\n")[0] + "## gpus rc=0 tool=amd-smi\n" + amd_smi_list(self.gpus)
        elif "## job" in cmd:
            if "amd-smi list" not in cmd:
                return 0, "## job rc=127\nsh: 1: nvidia-smi: not found\n", ""
            out = "## job rc=0\n" + amd_smi_list(1)
        return rc, out, err


def amd_drill(tmp_path, provider: Provider, method: str = "auto", debugfs: bool = False, **settings: Any):
    node = FakeAmdNode(provider)
    node.debugfs = debugfs
    path = str(tmp_path / "raw" / "node2" / "fault-inject.jsonl")
    journal: list[tuple[str, str, Any]] = []

    def applied(what: str, undo: str, detail: dict[str, Any], on_controller: bool) -> str:
        journal.append(("applied", what, detail))
        return f"j{len(journal)}"

    s = runner.Settings(kind="inject", target="node2", targets=["node2"], method=method, poll_s=0.5,
                        detect_limit_s=settings.pop("detect_limit_s", 30),
                        return_limit_s=settings.pop("return_limit_s", 60), job_every_s=1, **settings)
    d = runner.Drill(node, s, runner.DrillLog(path, node.clock),
                     runner.Journal(applied, lambda jid, outcome, detail: journal.append(("restored", jid, outcome))),
                     clock=node.clock, sleep=node.sleep)
    d.run()
    with open(path, encoding="utf-8") as fh:
        return node, d, fh.read(), journal


def test_auto_falls_back_from_ras_to_the_kernel_log_and_is_judged_like_the_xid(tmp_path):
    node, d, text, journal = amd_drill(tmp_path, Provider())
    assert d.end["reason"] == "complete" and d.method == "kmsg", d.end
    assert d.end["fault"] == RAS_UMC_UE and d.end["vendor"] == "amd"
    prepares = [c for c in node.commands if "## ready ctrl=" in c or "echo '## ready'" in c]
    assert "ras_ctrl" in prepares[0] and "/dev/kmsg" in prepares[1]  # ras first, then kmsg
    assert not any("dcgmi" in c for c in node.commands)
    params = {"method": "auto", "fault": RAS_UMC_UE}
    detection = judge(text, "fault.inject.detection", params, facts={"gpu_model": "AMD Instinct MI300X"})
    assert detection["status"] == "pass" and 2.4 <= detection["value"] <= 3.6, detection
    assert "UMC RAS UE injected by kmsg" in detection["summary"]
    assert "AMD RAS UE umc 0000:05:00.0" in detection["summary"] and detection["params"] == params
    injection = detection["evidence"]["injection"]
    assert injection["fault"] == RAS_UMC_UE and "xid" not in injection
    assert injection["line"] == "amdgpu 0000:05:00.0: 1 uncorrectable hardware errors detected in umc block"
    back = judge(text, "fault.inject.return", params)
    assert back["status"] == "pass" and back["evidence"]["drain_s"] > 0, back
    cleared = judge(text, "fault.inject.cleared", params)
    assert cleared["status"] == "pass" and cleared["value"] == 8  # amd-smi's physical GPUs, before and after
    action = judge(text, "fault.inject.action", params)
    assert action["status"] == "pass" and "AMD: RESET_GPU" in action["summary"], action
    assert action["evidence"]["fault"] == RAS_UMC_UE
    assert judge(text, "fault.drill.bystanders", params)["status"] == "pass"
    jobs = [c for c in node.commands if "## job" in c]
    assert jobs and all("amd-smi list" in c and "nvidia-smi" not in c for c in jobs)
    [(_, what, detail)] = [j for j in journal if j[0] == "applied"]
    assert "uncorrectable UMC RAS error" in what and detail["fault"] == RAS_UMC_UE
    assert detail["line"].startswith("amdgpu 0000:05:00.0:") and ("restored", "j1", "restored") in journal


def test_ras_injection_where_debugfs_allows_it(tmp_path):
    _, d, text, journal = amd_drill(tmp_path, Provider(), debugfs=True)
    assert d.end["reason"] == "complete" and d.method == "ras", d.end
    [(_, _, detail)] = [j for j in journal if j[0] == "applied"]
    assert detail["ras_ctrl"] == CTRL and "inject umc ue 0x0 0x0 0x0" in detail["command"]
    assert "amd-smi list" in detail["undo"]  # the restore reboots if a GPU stayed missing
    tl = timeline.build(parse("fault-drill-log", text))
    assert tl.start["fault"] == RAS_UMC_UE and list(tl.milestones)[:1] == ["detected"]
    assert [r["event"] for r in tl.rows()][:2] == ["fault", "detected"] and tl.rows()[0]["detail"] == "auto"
    assert judge(text, "fault.inject.detection")["status"] == "pass"


def test_nothing_detected_names_the_ras_fault(tmp_path):
    _, d, text, _ = amd_drill(tmp_path, Provider(detect_after=None, reboot_after=None, resume_after=None),
                              method="kmsg", detect_limit_s=6)
    assert d.end["reason"] == "not_detected"
    detection = judge(text, "fault.inject.detection")
    assert detection["status"] == "fail" and detection["summary"].startswith("UMC RAS UE injected on node2 by kmsg")
    action = judge(text, "fault.inject.action")
    assert action["status"] == "fail" and "needs a GPU reset (AMD: RESET_GPU)" in action["summary"]


def test_dcgm_asked_on_an_amd_node_is_skipped_saying_why(tmp_path):
    node, d, text, journal = amd_drill(tmp_path, Provider(), method="dcgm")
    assert d.end["reason"] == "unavailable" and "DCGM injects NVIDIA Xids" in d.end["detail"]
    assert node.t0 is None and not journal
    assert judge(text, "fault.inject.detection")["status"] == "skip"


def test_a_dry_run_plans_the_ras_fallback(tmp_path):
    node, d, _, journal = amd_drill(tmp_path, Provider(), dry_run=True)
    assert d.end["reason"] == "dry_run" and not journal and node.t0 is None
    plan = d.end["plan"]
    assert [p.get("method") for p in plan[:2]] == ["ras", "kmsg"] and plan[0]["possible"] is False
    assert plan[1]["fault"] == RAS_UMC_UE and "amdgpu 0000:05:00.0" in plan[1]["command"]
    assert plan[-1]["gpu_job"].endswith("amd-smi list")


def test_a_reboot_drill_on_an_amd_node_runs_its_gpu_job_with_amd_smi(tmp_path):
    node = FakeAmdNode(Provider(), kind="reboot")
    path = str(tmp_path / "fault-reboot.jsonl")
    s = runner.Settings(kind="reboot", target="node2", targets=["node2"], poll_s=0.5, return_limit_s=60, job_every_s=1)
    d = runner.Drill(node, s, runner.DrillLog(path, node.clock), runner.Journal(lambda *a: "j", lambda *a: None),
                     clock=node.clock, sleep=node.sleep)
    d.run()
    assert d.end["reason"] == "complete" and d.end["vendor"] == "amd" and "fault" not in d.end, d.end
    job = next(c for c in node.commands if "## job" in c)
    assert "-t 2 --immediate=10 amd-smi list'" in job and "nvidia-smi" not in job, job
    with open(path, encoding="utf-8") as fh:
        assert judge(fh.read(), "fault.reboot.recovery")["status"] == "pass"
