"""The simulated nvidia-smi under load and the burn-in's faults during a run (``ecc_growth``, ``clock_loss``,
profile ``burnin-faults``).

A loop reads the node's load from the CPU time its processes use between samples (the node's cgroup v2
``cpu.stat``); here ``SIMNODE_CPU_STAT`` (test-only) points the shim at a ``cpu.stat`` file the test writes:
growing one core-second per second is a busy node, a constant one an idle node. The scenario math is
tested on the shim's own functions, the output through the standalone shim as a node runs it.
"""

from __future__ import annotations

import importlib.util
import re
import sys
import threading
import time

import pytest

from clustereval import parsers
from clustereval.sim import profile as sim_profile
from clustereval.sim.profile import load_profile, render_node
from tests.unit.test_sim_telemetry import SAMPLER_FIELDS, SHIM, by_gpu, node_root, run_loop

SPEC = importlib.util.spec_from_file_location("nvidia_smi_shim", SHIM)
smi = importlib.util.module_from_spec(SPEC)
sys.path.insert(0, str(SHIM.parent))  # as the shim launcher does: the shims share simnode
try:
    SPEC.loader.exec_module(smi)
finally:
    sys.path.remove(str(SHIM.parent))
node_load = sys.modules["simnode"]  # the load model both GPU loops share


class BusyNode:
    """Writes the node's cpu.stat as one busy core would grow it, until stopped."""

    def __init__(self, root, cores: float = 1.0):
        self.path, self.cores, self.done = root / "cpu.stat", cores, threading.Event()
        self.start = time.monotonic()
        self.write()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def write(self) -> None:
        usec = int((time.monotonic() - self.start) * self.cores * 1e6)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(f"usage_usec {usec}\nuser_usec {usec}\nsystem_usec 0\n")
        tmp.replace(self.path)  # whole files only: the shim never reads half a write

    def run(self) -> None:
        while not self.done.wait(0.01):
            self.write()

    def stop(self) -> None:
        self.done.set()
        self.thread.join(timeout=2)


def loop_rows(root, samples: int, cores: float | None = None) -> list[dict]:
    busy = BusyNode(root, cores) if cores else None
    try:
        text = run_loop(root, SAMPLER_FIELDS, samples=samples)
    finally:
        if busy:
            busy.stop()
    result = parsers.parse("nvidia-smi-query-loop", text)
    assert result["complete"] and result["warnings"] == []
    return result["rows"]


# ------------------------------------------------------------------------------------------ scenario math


def test_load_is_zero_below_the_idle_threshold_and_saturates_at_one_core():
    assert node_load.load_of(0.0) == 0.0 and node_load.load_of(node_load.LOAD_IDLE_CORES - 0.01) == 0.0
    assert node_load.load_of(0.5) == pytest.approx(0.5) and node_load.load_of(7.5) == 1.0


def test_heat_follows_the_load_with_its_time_constant():
    assert node_load.heat_step(0.0, 0.0, 100) == 0.0, "an idle GPU never warms"
    assert node_load.heat_step(0.0, 1.0, node_load.HEAT_TAU_S) == pytest.approx(1 - 2.718281828 ** -1)
    assert node_load.heat_step(0.5, 1.0, 0) == 0.5 and node_load.heat_step(1.0, 0.0, 10 * node_load.HEAT_TAU_S) < 0.001


def gpu0(profile: str = "reference", node: str = "node1") -> dict:
    return render_node(load_profile(profile), node)["gpus"][0]


def test_a_fully_loaded_gpu_sits_at_its_cap_with_sw_power_cap_and_the_clock_falls_as_it_warms():
    gpu = gpu0()
    cold = smi.loaded(gpu, dict(gpu), 1.0, 0.0, 0.5)
    warm = smi.loaded(gpu, dict(gpu), 1.0, 1.0, 0.5)
    for state in (cold, warm):
        assert state["clocks_event_reasons"] == smi.REASON_SW_POWER_CAP
        assert gpu["power_limit_w"] - smi.CAP_MARGIN_W <= state["power_draw_w"] <= gpu["power_limit_w"]
        assert state["utilization_pct"] == 100 and state["performance_state"] == "P0"
    assert cold["sm_clock_mhz"] == 1620 and warm["sm_clock_mhz"] == 1485  # of 1980: H200/H100 measured ~1500
    assert cold["temperature_c"] == gpu["temperature_c"]
    assert warm["temperature_c"] == smi.LOADED_TEMP_C and warm["memory_temperature_c"] == smi.LOADED_MEMORY_TEMP_C
    assert warm["temperature_c"] < smi.TLIMIT_TEMP_C, "a healthy GPU under load has no thermal event"


def test_a_light_load_stays_under_the_cap_at_max_clock_and_no_load_changes_nothing():
    gpu = gpu0()
    light = smi.loaded(gpu, dict(gpu), 0.3, 0.0, 0.5)
    assert light["clocks_event_reasons"] == 0 and light["sm_clock_mhz"] == gpu["max_sm_clock_mhz"]
    assert gpu["power_draw_w"] < light["power_draw_w"] < gpu["power_limit_w"] - smi.CAP_MARGIN_W
    assert light["utilization_pct"] == 60
    assert smi.loaded(gpu, dict(gpu), 0.0, 0.0, 0.5) == gpu


def test_the_node_cgroup_is_found_only_for_the_node_itself():
    # this test process is in no simulated node's cgroup
    assert node_load.node_cgroup("node-that-is-not-here") is None


# ------------------------------------------------------------------------------------------ through the shim


def test_a_busy_node_reads_as_under_a_gemm_and_an_idle_one_as_idle(tmp_path):
    busy = loop_rows(node_root(tmp_path / "busy", "reference", "node1"), samples=50, cores=1.0)
    idle = loop_rows(node_root(tmp_path / "idle", "reference", "node1"), samples=50)
    limit = busy[0]["power.limit"]
    first, *_, last = [r for _, r in by_gpu(busy, 0)]
    assert first["throttle_reasons_active"] == [] and first["clocks.current.sm"] == 1980  # no interval yet
    for _, row in by_gpu(busy, 0)[2:]:
        assert row["throttle_reasons_active"] == ["sw_power_cap"] and row["utilization.gpu"] == 100
        assert limit - smi.CAP_MARGIN_W <= row["power.draw"] <= limit
        assert 1485 <= row["clocks.current.sm"] <= 1620
    # 50 samples of -lms 1000 are 2.5 tau: warm, near the steady 58 C, the clock down to ~1500 MHz
    assert last["clocks.current.sm"] <= 1515 and 50 <= last["temperature.gpu"] <= smi.LOADED_TEMP_C
    for row in idle[16:]:
        assert row["clocks_event_reasons.active"] == 0 and row["utilization.gpu"] == 0
        assert row["clocks.current.sm"] == 1980 and row["power.draw"] < 100


def test_burnin_faults_node2_gpu5_heats_and_thermally_throttles_under_load(tmp_path):
    rows = loop_rows(node_root(tmp_path, "burnin-faults", "node2"), samples=12, cores=1.0)
    gpu5 = by_gpu(rows, 5)
    before = [r for t, r in gpu5 if 1 <= t < 2.5]
    after = [r for t, r in gpu5 if t >= 8]
    assert before and all(r["throttle_reasons_active"] == ["sw_power_cap"] for r in before)
    assert after and all(r["temperature.gpu"] == 92 for r in after)
    assert all({"sw_power_cap", "sw_thermal_slowdown", "hw_thermal_slowdown"} == set(r["throttle_reasons_active"])
               and r["clocks.current.sm"] == 990 for r in after)
    assert all(r["throttle_reasons_active"] == ["sw_power_cap"] for t, r in by_gpu(rows, 4) if t >= 1)


def test_burnin_faults_node3_ecc_grows_and_a_gpu_drifts_with_no_reason(tmp_path):
    rows = loop_rows(node_root(tmp_path, "burnin-faults", "node3"), samples=12, cores=1.0)
    ecc = [(t, r["ecc.errors.corrected.volatile.total"]) for t, r in by_gpu(rows, 2)]
    assert all(n == 0 for t, n in ecc if t < 2)
    assert [n for _, n in ecc] == sorted(n for _, n in ecc), "a volatile count only grows"
    t_last, n_last = ecc[-1]
    assert n_last == int(120 * (t_last - 2) / 60) or n_last == int(120 * (t_last - 2) / 60) + 1
    assert n_last >= 16 and all(r["ecc.errors.uncorrected.volatile.total"] == 0 for r in rows)
    drift = [r for t, r in by_gpu(rows, 6) if t >= 2.5]
    assert drift and all(r["clocks.current.sm"] == 1200 and r["throttle_reasons_active"] == [] for r in drift)
    assert all(r["power.draw"] < r["power.limit"] - 100 for r in drift), "slower than the cap asks, so under it"
    assert all(r["clocks.current.sm"] >= 1485 for t, r in by_gpu(rows, 5) if t >= 2.5)


def test_ecc_growth_counts_uncorrected_errors_from_its_time_idle_or_not(tmp_path):
    path = tmp_path / "p.yml"
    path.write_text("extends: reference\nnodes:\n  node1:\n    faults:\n"
                    "      ecc_growth: {gpu: 0, after_s: 3, corrected_per_min: 60, uncorrected: 2}\n")
    rows = loop_rows(node_root(tmp_path, load_profile(path), "node1"), samples=6)
    for t, row in by_gpu(rows, 0):
        assert row["ecc.errors.uncorrected.volatile.total"] == (2 if t >= 3 else 0)
        assert row["ecc.errors.corrected.volatile.total"] == (int(t - 3) if t >= 3 else 0)
        assert row["throttle_reasons_active"] == []


def test_single_shots_stay_idle_and_print_the_node_as_it_is(tmp_path):
    import subprocess

    from tests.unit.test_sim_telemetry import PYTHON, shim_env

    root = node_root(tmp_path, "burnin-faults", "node3")
    BusyNode(root).stop()
    out = subprocess.run([PYTHON, str(SHIM), f"--query-gpu={SAMPLER_FIELDS}", "--format=csv"],
                         capture_output=True, text=True, env=shim_env(root), timeout=10)
    rows = parsers.parse("nvidia-smi-query-loop", out.stdout)["rows"]
    assert all(r["clocks.current.sm"] == 1980 and r["ecc.errors.corrected.volatile.total"] == 0 for r in rows)


@pytest.mark.parametrize(
    ("faults", "message"),
    [
        ("{clock_loss: {gpu: 1}}", "missing keys ['sm_clock_mhz']"),
        ("{clock_loss: {gpu: 1, sm_clock_mhz: fast}}", "sm_clock_mhz must be a non-negative integer"),
        ("{ecc_growth: {gpu: 1, corrected_per_min: -3}}", "corrected_per_min must be a non-negative number"),
        ("{ecc_growth: {gpu: 1, uncorrected: 1.5}}", "uncorrected must be a non-negative integer"),
        ("{ecc_growth: {gpu: 1, rate: 3}}", "unknown keys ['rate']"),
    ],
)
def test_bad_ecc_growth_and_clock_loss_are_refused(tmp_path, faults, message):
    path = tmp_path / "bad.yml"
    path.write_text(f"extends: reference\nnodes:\n  node2:\n    faults: {faults}\n")
    with pytest.raises(sim_profile.ProfileError, match=re.escape(message)):
        load_profile(path)
