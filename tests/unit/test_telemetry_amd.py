"""GPU telemetry on AMD Instinct nodes: the simulated MI300X node's ``amd-smi monitor`` in watch mode (the command the
telemetry role runs there) fed poll by poll through the session Recorder with the ``gpu-telemetry-loop`` parser,
and judged by the same telemetry checks as NVIDIA GPUs (healthy node, a hot GPU, a poll cut inside a table)."""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

import pytest
import yaml

from clustereval.results import now_iso
from clustereval.sessions import Recorder, SessionView, Stream
from tests.unit.test_sim_amd_shims import PYTHON, SHIMS, amd_root
from tests.unit.test_telemetry import CHECKS, Session, statuses

REPO = Path(__file__).resolve().parents[2]
MODEL = "AMD Instinct MI300X"


def amd_session(tmp_path: Path, duration_s: int = 2) -> Session:
    session = Session(tmp_path / "run", gpu_model=MODEL, overrides={}, duration_s=duration_s)
    session.variant["interval_ms"] = 1000
    streams = [Stream(name="gpu", cmd="amd-smi monitor -p -t -u -m -e -w 1", parser="gpu-telemetry-loop",
                      header_lines=1),
               Stream(name="kernel", cmd="tail -F -n 0 -q /var/log/kern.log", parser="kernel-gpu-events")]
    session.recorder = Recorder(str(tmp_path / "run"), "n1", "telemetry", streams)
    session.view = SessionView(session.recorder, "telemetry", started=now_iso())
    return session


def role_command_output(root: Path, interval_ms: int = 1000, iterations: int = 2) -> str:
    """The telemetry role's GPU command run on the node: no nvidia-smi, amd-smi on PATH (the shim), stopped after
    ``iterations`` samples by adding ``-i`` to what the role's command executes."""
    cmd = yaml.safe_load((REPO / "roles/telemetry/vars/main.yml").read_text())["__clustereval_telemetry_gpu_cmd"]
    bindir = root / "bin"
    bindir.mkdir()
    launcher = bindir / "amd-smi"
    launcher.write_text(f"#!/bin/sh\nexec {shlex.quote(PYTHON)} {shlex.quote(str(SHIMS / 'amd_smi.py'))} \"$@\" "
                        f"-i {iterations}\n")
    launcher.chmod(0o755)
    idle = root / "cpu.stat"  # the node's CPU time, not growing: an idle node (the shim reads its load from it)
    idle.write_text("usage_usec 1000\nuser_usec 1000\nsystem_usec 0\n")
    env = {"PATH": f"{bindir}:/usr/bin:/bin", "SIMNODE_ROOT": str(root), "CLUSTEREVAL_INTERVAL_MS": str(interval_ms),
           "CLUSTEREVAL_FIELDS": "timestamp,index", "SIMNODE_CPU_STAT": str(idle)}
    out = subprocess.run(["sh", "-c", cmd], env=env, capture_output=True, text=True, encoding="utf-8", timeout=30)
    assert out.returncode == 0 and out.stderr == "", out.stderr
    return out.stdout


@pytest.fixture(scope="module")
def healthy_output(tmp_path_factory) -> str:
    # the amd-mi300x profile's idle junction temperatures
    return role_command_output(amd_root(tmp_path_factory.mktemp("healthy"),
                                        idle={"temperature_c": [35, 37, 34, 38, 36, 35, 37, 36]}))


def test_the_role_runs_amd_smi_watch_mode_where_nvidia_smi_is_missing(healthy_output):
    lines = healthy_output.splitlines()
    assert lines[0] == "'CTRL' + 'C' to stop watching output:"
    assert lines[1] == (" TIMESTAMP  GPU  POWER  PWR_CAP   GPU_T   MEM_T   GFX_CLK   GFX%   MEM%  MEM_CLOCK  SINGLE_ECC"
                        "  DOUBLE_ECC  PCIE_REPLAY     PVIOL     TVIOL  PHOT_TVIOL  VR_TVIOL  HBM_TVIOL")
    assert healthy_output.count(" TIMESTAMP  GPU") == 2


def test_healthy_mi300x_node_through_the_telemetry_checks(tmp_path, healthy_output):
    session = amd_session(tmp_path)
    data = healthy_output.encode()
    first = data.index(b"\n\n\n") + 3
    session.poll(gpu_out=data[:first])
    session.poll(gpu_out=data[first:])
    session.end()
    rows = list(session.view.rows("gpu"))
    assert len(rows) == 16 and {r["index"] for r in rows} == set(range(8))
    assert rows[0]["temperature.gpu"] == 35 and rows[0]["power.draw"] == 133 and rows[0]["power.limit"] == 750
    assert rows[0]["sampler"] == "amd-smi" and rows[0]["pci.bus_id"] is None
    judged = {check: session.judge(check) for check in CHECKS}
    for check in ("telemetry.gpu.temperature", "telemetry.gpu.clocks", "telemetry.gpu.power", "telemetry.gpu.ecc",
                  "telemetry.gpu.throttle", "telemetry.sampler.samples"):
        assert set(statuses(judged[check]).values()) == {"pass"}, (check, statuses(judged[check]))
    temperature = judged["telemetry.gpu.temperature"]["n1/gpu3"]
    assert temperature["value"] == 38 and temperature["expected"]["source"].startswith("baselines/telemetry.yml")
    assert "instinct-cdna3" in str(temperature["expected"])
    assert judged["telemetry.gpu.throttle"]["n1/gpu0"]["evidence"]["reasons_samples"] == {}
    results = judged["telemetry.kernel.xid"]
    assert len(results) == 8 and set(statuses(results).values()) == {"pass"}
    assert "no amdgpu RAS error" in results["n1/gpu0"]["summary"]


def test_throttle_skips_where_amd_smi_has_no_violation_columns(tmp_path):
    # an amd-smi older than ROCm 6.3: the role's stream runs without -V
    root = amd_root(tmp_path)
    (root / "cpu.stat").write_text("usage_usec 1000\nuser_usec 1000\nsystem_usec 0\n")
    done = subprocess.run([PYTHON, str(SHIMS / "amd_smi.py"), "monitor", "-p", "-t", "-u", "-m", "-e", "-w", "1",
                           "-i", "2"], env={"PATH": "/usr/bin:/bin", "SIMNODE_ROOT": str(root),
                                            "SIMNODE_CPU_STAT": str(root / "cpu.stat")},
                          capture_output=True, text=True, encoding="utf-8", timeout=30)
    session = amd_session(tmp_path)
    session.poll(gpu_out=done.stdout.encode())
    session.end()
    results = session.judge("telemetry.gpu.throttle")
    assert len(results) == 8 and set(statuses(results).values()) == {"skip"}
    assert "--violation" in results["n1/gpu0"]["summary"]


def test_a_gpu_held_by_prochot_fails_throttle(tmp_path):
    root = amd_root(tmp_path, faults={"gpu_throttle": {"gpu": 4, "after_s": 0, "reason": "hw_slowdown",
                                                       "sm_clock_mhz": 800}})
    session = amd_session(tmp_path)
    session.poll(gpu_out=role_command_output(root, iterations=3).encode())
    session.end()
    results = session.judge("telemetry.gpu.throttle")
    got = statuses(results)
    assert got["n1/gpu4"] == "fail" and "hw_slowdown" in results["n1/gpu4"]["summary"]
    assert {got[f"n1/gpu{i}"] for i in (0, 1, 2, 3, 5, 6, 7)} == {"pass"}


def test_a_hot_mi300x_gpu_fails(tmp_path):
    temps = [35, 37, 103, 38, 36, 94, 37, 36]  # GPU 2 past the 100 °C hotspot slowdown, GPU 5 near it
    root = amd_root(tmp_path, idle={"temperature_c": temps})
    session = amd_session(tmp_path)
    session.poll(gpu_out=role_command_output(root, interval_ms=400))  # 400 ms rounds up to -w 1, never 0
    session.end()
    results = session.judge("telemetry.gpu.temperature")
    got = statuses(results)
    assert got["n1/gpu2"] == "fail" and got["n1/gpu5"] == "warn"
    assert {got[f"n1/gpu{i}"] for i in (0, 1, 3, 4, 6, 7)} == {"pass"}
    assert "GPU 2 reached 103 °C, HBM 111 °C" in results["n1/gpu2"]["summary"]


def test_a_poll_cut_inside_a_table_loses_rows_not_the_sampler(tmp_path, healthy_output):
    session = amd_session(tmp_path)
    data = healthy_output.encode()
    lines = data.split(b"\n")
    cut = len(b"\n".join(lines[:6])) + 1  # banner, header, GPUs 0-3 of the first interval
    session.poll(gpu_out=data[:cut])
    session.poll(gpu_out=data[cut:])
    session.end()
    rows = list(session.view.rows("gpu"))
    assert len(rows) == 12  # GPUs 4-7 of the first interval came without their header
    assert session.recorder.stats()["gpu"]["parse_errors"] == 0
    assert statuses(session.judge("telemetry.sampler.samples")) == {"n1": "pass"}


def test_nvidia_nodes_still_run_nvidia_smi(tmp_path):
    cmd = yaml.safe_load((REPO / "roles/telemetry/vars/main.yml").read_text())["__clustereval_telemetry_gpu_cmd"]
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for tool in ("nvidia-smi", "amd-smi"):
        (bindir / tool).write_text(f"#!/bin/sh\necho {tool} \"$@\"\n")
        (bindir / tool).chmod(0o755)
    env = {"PATH": f"{bindir}:/usr/bin:/bin", "CLUSTEREVAL_INTERVAL_MS": "500", "CLUSTEREVAL_FIELDS": "index"}
    out = subprocess.run(["sh", "-c", cmd], env=env, capture_output=True, text=True, timeout=10)
    assert out.stdout == "nvidia-smi --query-gpu=index --format=csv -lms 500\n"
    os.remove(bindir / "nvidia-smi")
    out = subprocess.run(["sh", "-c", cmd], env=env, capture_output=True, text=True, timeout=10)
    assert out.stdout == "amd-smi monitor -p -t -u -m -e -w 1\n", "an amd-smi without --violation: no -V"
    (bindir / "amd-smi").write_text('#!/bin/sh\n[ "$2" = --help ] && echo "  -V, --violation" || echo amd-smi "$@"\n')
    out = subprocess.run(["sh", "-c", cmd], env=env, capture_output=True, text=True, timeout=10)
    assert out.stdout == "amd-smi monitor -p -t -u -m -e -V -w 1\n"


def test_the_streams_name_the_parser_for_both_vendors():
    for path in ("roles/telemetry/tasks/main.yml", "roles/burnin/tasks/burnin.yml"):
        text = (REPO / path).read_text()
        assert "parser: gpu-telemetry-loop" in text and "nvidia-smi-query-loop" not in text, path


RAS_UE = ("2026-12-04T05:00:01.000000+00:00 node2 kernel: [ 4711.000001] amdgpu 0000:65:00.0: amdgpu: 2 uncorrectable "
          "hardware errors detected in umc block\n")
RAS_CE = ("2026-12-04T05:00:02.000000+00:00 node2 kernel: [ 4712.000001] amdgpu 0000:75:00.0: amdgpu: 3 correctable "
          "hardware errors detected in umc block\n")


def test_amdgpu_ras_lines_while_watched_are_judged_live_under_their_device(tmp_path, healthy_output):
    session = amd_session(tmp_path)
    data = healthy_output.encode()
    first = data.index(b"\n\n\n") + 3
    session.poll(gpu_out=data[:first])
    _, recorded = session.poll(gpu_out=data[first:], kernel_out=RAS_UE + RAS_CE + RAS_UE)
    live = {r["subject"]: r for r in recorded}
    assert live["n1/pci:0000:65:00.0"]["status"] == "fail", "judged at the poll that brought it"
    assert "2 uncorrectable" in live["n1/pci:0000:65:00.0"]["summary"]
    assert live["n1/pci:0000:75:00.0"]["status"] == "warn"
    session.end()
    results = session.judge("telemetry.kernel.xid")
    got = statuses(results)
    assert got["n1/pci:0000:65:00.0"] == "fail" and got["n1/pci:0000:75:00.0"] == "warn"
    assert results["n1/pci:0000:65:00.0"]["value"] == 1, "a line carried twice is one event"
    gpu_verdicts = {s for k, s in got.items() if "/gpu" in k}
    assert gpu_verdicts == {"skip"} and "0000:65:00.0" in results["n1/gpu0"]["summary"]
