"""The simulated ``amd-smi monitor``: the ``--violation`` columns and the watch loop under load and run faults.

The layout of ``-V`` is held against the corpus capture (``amd-smi/monitor-violation-32-partitions.txt``); the
loop's readings go through the parser the telemetry and burn-in roles use (``gpu-telemetry-loop``), so what is
asserted is what a check would see. Load comes from a ``cpu.stat`` file the test grows (``SIMNODE_CPU_STAT``,
as in test_sim_gpu_load); each watch run samples once a second, a few times.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from clustereval import parsers
from tests.conftest import read_corpus
from tests.unit.test_sim_amd_shims import PYTHON, SHIMS, amd_root
from tests.unit.test_sim_gpu_load import BusyNode

MONITOR = ["monitor", "-p", "-t", "-u", "-m", "-e", "-V"]


def amd_smi(root: Path, *args: str, cpu_stat: Path | None = None) -> str:
    env = {"PATH": os.environ.get("PATH", "/usr/bin"), "SIMNODE_ROOT": str(root)}
    if cpu_stat is not None:
        env["SIMNODE_CPU_STAT"] = str(cpu_stat)
    done = subprocess.run([PYTHON, str(SHIMS / "amd_smi.py"), *args], env=env, capture_output=True, timeout=60,
                          text=True, encoding="utf-8")
    assert done.returncode == 0 and done.stderr == "", done.stderr
    return done.stdout


def watch(root: Path, samples: int, busy: bool = False) -> list[dict]:
    """The loop's rows (parsed as the roles parse them) over ``samples`` one-second intervals."""
    load = BusyNode(root) if busy else None
    if not busy:  # an idle node: its cpu.stat does not grow (without one the shim would read the whole machine's)
        (root / "cpu.stat").write_text("usage_usec 1000\nuser_usec 1000\nsystem_usec 0\n")
    try:
        text = amd_smi(root, *MONITOR, "-w", "1", "-i", str(samples), cpu_stat=root / "cpu.stat")
    finally:
        if load:
            load.stop()
    result = parsers.parse("gpu-telemetry-loop", text)
    assert result["complete"] and result["samples"] == samples
    return result["rows"]


def last(rows: list[dict], index: int) -> dict:
    return [r for r in rows if r["index"] == index][-1]


def test_violation_columns_have_the_real_tools_layout(tmp_path):
    real = read_corpus("amd-smi", "monitor-violation-32-partitions.txt").splitlines()
    ours = amd_smi(amd_root(tmp_path), "monitor", "-V").splitlines()
    assert ours[0] == real[0]
    assert ours[1:9] == real[1:9], "GPUs 0-7 at 0 %, each cell right-aligned to the real widths"
    parsed = parsers.parse("gpu-telemetry-loop", "\n".join(ours) + "\n")
    assert {r["throttle_reasons_source"] for r in parsed["rows"]} == {"amd-smi --violation"}
    assert all(r["throttle_reasons_active"] == [] for r in parsed["rows"])


def test_violation_comes_after_every_other_column_and_help_lists_it(tmp_path):
    root = amd_root(tmp_path)
    header = amd_smi(root, *MONITOR).splitlines()[0]
    assert header.split() == ["GPU", "POWER", "PWR_CAP", "GPU_T", "MEM_T", "GFX_CLK", "GFX%", "MEM%", "MEM_CLOCK",
                              "SINGLE_ECC", "DOUBLE_ECC", "PCIE_REPLAY", "PVIOL", "TVIOL", "PHOT_TVIOL", "VR_TVIOL",
                              "HBM_TVIOL"]
    assert "--violation" in amd_smi(root, "monitor", "--help"), "the role asks --help before it passes -V"


def test_an_idle_node_reads_idle_with_no_violation(tmp_path):
    rows = watch(amd_root(tmp_path), samples=3)
    assert len(rows) == 24
    assert all(r["throttle_reasons_active"] == [] and r["utilization.gpu"] == 0 for r in rows)
    assert {r["power.draw"] for r in rows} == {133}


def test_a_busy_node_runs_at_the_power_cap_with_pviol(tmp_path):
    rows = watch(amd_root(tmp_path), samples=4, busy=True)
    first, loaded = next(r for r in rows if r["index"] == 0), last(rows, 0)
    assert first["utilization.gpu"] == 0, "the first sample has no interval to measure load over"
    assert loaded["utilization.gpu"] == 100 and loaded["power.draw"] == 747
    assert loaded["throttle_reasons_active"] == ["sw_power_cap"], "the power cap is normal under load"
    assert 1300 < loaded["clocks.current.sm"] < 2100 and loaded["temperature.gpu"] > 36


def test_partitions_share_their_sockets_power_under_load(tmp_path):
    root = amd_root(tmp_path, faults={"amd_partition": {"compute": "CPX", "memory": "NPS4"}})
    rows = watch(root, samples=3, busy=True)
    assert len({r["index"] for r in rows}) == 64
    assert last(rows, 0)["power.draw"] == 747, "partition 0 reports the socket's power"
    assert last(rows, 1)["power.draw"] is None, "the other partitions print N/A, as on a real CPX node"


def test_run_faults_show_in_the_violation_columns(tmp_path):
    faults = {"gpu_throttle": {"gpu": 1, "after_s": 0, "reason": "hw_slowdown", "sm_clock_mhz": 900},
              "gpu_hot": {"gpu": 2, "after_s": 0, "temperature_c": 104},
              "ecc_growth": {"gpu": 3, "after_s": 0, "corrected_per_min": 600, "uncorrected": 1}}
    rows = watch(amd_root(tmp_path, faults=faults), samples=6)
    throttled, hot, ecc = last(rows, 1), last(rows, 2), last(rows, 3)
    assert throttled["throttle_reasons_active"] == ["hw_slowdown"] and throttled["clocks.current.sm"] == 900
    assert hot["temperature.gpu"] == 104 and hot["temperature.memory"] == 110
    assert hot["throttle_reasons_active"] == ["sw_thermal_slowdown"], "past the 100 C hotspot slowdown limit"
    assert ecc["ecc.errors.uncorrected.volatile.total"] == 1 and ecc["ecc.errors.corrected.volatile.total"] >= 40
    assert last(rows, 0)["throttle_reasons_active"] == [], "the other GPUs are untouched"
