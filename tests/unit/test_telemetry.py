"""The GPU telemetry checks, judged the way the session action judges them: each poll's answer fed to a Recorder
(raw bytes kept, lines parsed into series), the Xid check judged live at every poll, every check judged on the
SessionView at the end. The GPU stream is the real H200 capture (idle, burn, idle) split at awkward bytes, and rows
written in the same ``nvidia-smi --query-gpu --format=csv`` format with the role's fields."""

from __future__ import annotations

import base64
import itertools
from pathlib import Path
from typing import Any

import pytest

from clustereval import checks
from clustereval.checks import Context
from clustereval.facts import hardware
from clustereval.results import now_iso, problems
from clustereval.sessions import Recorder, SessionView, Stream
from tests.conftest import read_corpus
from tests.helpers import RUN

CAPTURE = ("nvidia-smi-query-loop", "h200-query-lms1000-idle-burn-idle-clock-event-reasons.csv")
VARIANT = {"duration_s": 50, "interval_ms": 1000}  # the capture: 49 one-second samples
CHECKS = ["telemetry.gpu.temperature", "telemetry.gpu.throttle", "telemetry.gpu.clocks", "telemetry.gpu.power",
          "telemetry.gpu.ecc", "telemetry.kernel.xid", "telemetry.sampler.samples"]
# The levels these tests are written against, as inventory overrides: baselines/telemetry.yml may be tuned.
PINNED = {"telemetry.gpu.temperature": {"warn": 80, "fail": 87},
          "telemetry.gpu.memory_temperature": {"warn": 85, "fail": 95},
          "telemetry.gpu.clocks": {"warn": 0.9, "fail": 0.75}}
HEADER = ("timestamp, index, pci.bus_id, temperature.gpu, temperature.memory, power.draw [W], power.limit [W], "
          "clocks.current.sm [MHz], clocks.current.memory [MHz], utilization.gpu [%], clocks_event_reasons.active, "
          "ecc.errors.corrected.volatile.total, ecc.errors.uncorrected.volatile.total\n")
BUS = {0: "1B", 1: "43", 2: "52", 3: "61", 4: "9B"}


def row(t: int, gpu: int, temp: Any, hbm: Any, power: Any, limit: float, sm: Any, mask: int | None,
        corrected: Any = 0, uncorrected: Any = 0) -> str:
    """One line as nvidia-smi prints it (values with their units, N/A fields as ``[N/A]``)."""
    def unit(value: Any, text: str) -> str:
        return value if isinstance(value, str) else text.format(value)
    return (f"2026/11/30 00:20:{t:02d}.{gpu:03d}, {gpu}, 00000000:{BUS[gpu]}:00.0, {unit(temp, '{}')}, "
            f"{unit(hbm, '{}')}, {unit(power, '{:.2f} W')}, {limit:.2f} W, {unit(sm, '{} MHz')}, 3201 MHz, 100 %, "
            f"{'[N/A]' if mask is None else f'0x{mask:016x}'}, {corrected}, {uncorrected}\n")


def fleet_rows(t: int) -> str:
    """Five GPUs under load at sample ``t`` (0-9): GPU 0 and 4 healthy (at their power cap, which is normal), GPU 1
    slowed by hardware (0x8) for three samples and clocking low, GPU 2 hot with HW thermal slowdown (0x40) late and
    over its power limit, GPU 3 very hot, capped lower than its peers, SW thermal slowdown at the end, ECC off."""
    return "".join([
        row(t, 0, 58, 45, 690.1, 700, 1500, 0x4),
        row(t, 1, 60, 46, 640.0, 700, 1100, 0x4 | (0x8 if t in (3, 4, 5) else 0), corrected=t // 3),
        row(t, 2, 84, 90, 760.0, 700, 1500, 0x4 | (0x40 if t >= 7 else 0), uncorrected=int(t >= 8)),
        row(t, 3, 92, 70, 480.0, 500, 1300, 0x4 | (0x20 if t == 9 else 0), corrected="[N/A]", uncorrected="[N/A]"),
        row(t, 4, 57, 44, 688.0, 700, 1500, 0x4),
    ])


def xid_line(bus: str, code: int, message: str, layout: str = "dmesg") -> str:
    text = f"NVRM: Xid (PCI:0000:{bus.lower()}:00): {code}, pid='<unknown>', name=<unknown>, {message}"
    if layout == "rsyslog":  # /var/log/kern.log (rsyslog's high-precision format keeps dmesg's own stamp)
        return f"2026-11-30T00:20:04.512345+00:00 n1 kernel: [ 8123.617543] {text}\n"
    return f"[ 8123.617543] {text}\n"


class Session:
    """A telemetry session on host n1 as the session action runs it."""

    def __init__(self, run_dir: Path, gpu_model: str | None = "NVIDIA H200", overrides: dict | None = None,
                 duration_s: int = VARIANT["duration_s"]):
        streams = [Stream(name="gpu", cmd="nvidia-smi --query-gpu=... --format=csv -lms 1000",
                          parser="nvidia-smi-query-loop", header_lines=1),
                   Stream(name="kernel", cmd="tail -F -n 0 -q /var/log/kern.log & dmesg --follow-new",
                          parser="kernel-gpu-events")]
        self.recorder = Recorder(str(run_dir), "n1", "telemetry", streams)
        self.view = SessionView(self.recorder, "telemetry", started=now_iso())
        self.offsets: dict[str, int] = {}
        self.facts = hardware({"gpu_models": [gpu_model] * 8 if gpu_model else [], "gpu_count": 8})
        self.overrides = PINNED if overrides is None else overrides
        self.variant = {**VARIANT, "duration_s": duration_s}

    def context(self) -> Context:
        return Context(subject="n1", options={"baseline_overrides": self.overrides}, params=dict(self.variant),
                       facts=self.facts, host_facts={"n1": self.facts}, session=self.view, declared=frozenset(),
                       extra_artifacts=self.recorder.artifacts())

    def answer(self, **parts: bytes | str) -> dict[str, Any]:
        streams: dict[str, Any] = {}
        for key, data in parts.items():
            data = data.encode() if isinstance(data, str) else data
            stream, suffix = key.split("_")
            self.offsets[f"{stream}.{suffix}"] = self.offsets.get(f"{stream}.{suffix}", 0) + len(data)
            streams.setdefault(stream, {})[suffix] = {"data": base64.b64encode(data).decode(),
                                                      "offset": self.offsets[f"{stream}.{suffix}"]}
        return {"state": "running", "streams": streams}

    def poll(self, **parts: bytes | str) -> tuple[Any, list[dict[str, Any]]]:
        """Feed one poll; returns what the Xid check itself returned and the results recorded for it."""
        self.view.chunks = self.recorder.feed(self.answer(**parts))
        raw = checks.registered()["telemetry.kernel.xid"](self.context())
        recorded = checks.evaluate_many("telemetry.kernel.xid", self.context(), RUN, empty_ok=True)
        for result in recorded:
            assert problems(result) == [], result
        return raw, recorded

    def end(self, reason: str = "duration", interrupted: str | None = None, **parts: bytes | str) -> None:
        self.recorder.feed(self.answer(**parts), final=True)
        self.view.chunks, self.view.final, self.view.ended = {}, True, now_iso()
        self.view.end_reason, self.view.interrupted = reason, interrupted

    def judge_after(self, gpu_out: str, check_id: str = "telemetry.sampler.samples") -> list[dict[str, Any]]:
        """One poll bringing ``gpu_out``, the end, and ``check_id``'s results."""
        self.poll(gpu_out=gpu_out)
        self.end()
        return list(self.judge(check_id).values())

    def judge(self, check_id: str) -> dict[str, dict[str, Any]]:
        out = {}
        for result in checks.evaluate_many(check_id, self.context(), RUN):
            assert problems(result) == [], result
            assert result["params"] == self.variant and result["subject"] not in out
            out[result["subject"]] = result
        return out


def statuses(results: dict[str, dict[str, Any]]) -> dict[str, str]:
    return {subject: result["status"] for subject, result in results.items()}


def chunked(data: bytes, cuts: list[int]) -> list[bytes]:
    edges = [0, *sorted(set(cuts)), len(data)]
    return [data[a:b] for a, b in itertools.pairwise(edges)]


# ------------------------------------------------------------------------------------------------ the real capture


def test_the_h200_capture_passes_and_its_power_cap_is_normal(tmp_path):
    data = read_corpus(*CAPTURE).encode()
    header_end = data.index(b"\n")
    session = Session(tmp_path)
    # polls cutting the header, a value, a unit and a line end; the kernel log says something unrelated
    for i, piece in enumerate(chunked(data, [11, header_end, header_end + 2, 700, 1399, 1400, 2345, len(data) - 3])):
        raw, recorded = session.poll(gpu_out=piece, **({"kernel_out": "[ 8120.1] mlx5_core: link up\n"} if i == 2
                                                          else {}))
        assert raw is None and recorded == []  # no Xid: nothing to record live
    session.end()
    assert session.recorder.raw_path("gpu").read_bytes() == data
    temperature = session.judge("telemetry.gpu.temperature")["n1/gpu0"]
    assert temperature["status"] == "pass" and temperature["value"] == 61.0 and temperature["evidence"]["samples"] == 49
    assert temperature["evidence"]["memory_temperature"]["max"] == 52.0
    assert temperature["expected"]["matched"] == "hopper" and temperature["series"][0]["path"] == (
        "series/n1/telemetry-gpu.csv")
    assert temperature["measured"]["end_reason"] == "duration" and temperature["measured"]["started"]
    throttle = session.judge("telemetry.gpu.throttle")["n1/gpu0"]
    assert throttle["status"] == "pass" and throttle["value"] == 0.0
    assert throttle["summary"] == ("GPU 0: no thermal or hardware slowdown in 49 samples; at its power cap in 41 "
                                   "samples (normal under load)")
    assert throttle["evidence"]["reasons_samples"] == {"gpu_idle": 7, "sw_power_cap": 41}
    [clocks] = session.judge("telemetry.gpu.clocks").values()
    assert clocks["status"] == "skip" and "needs two or more GPUs" in clocks["summary"] and clocks["subject"] == "n1"
    power = session.judge("telemetry.gpu.power")["n1/gpu0"]
    assert power["status"] == "pass" and power["value"] == 693.6 and "W peak" in power["summary"]
    assert session.judge("telemetry.gpu.ecc")["n1/gpu0"]["status"] == "pass"
    assert statuses(session.judge("telemetry.kernel.xid")) == {"n1/gpu0": "pass"}
    [samples] = session.judge("telemetry.sampler.samples").values()
    assert samples["status"] == "pass" and samples["value"] == 49 and samples["subject"] == "n1"
    assert samples["evidence"]["streams"]["gpu"]["parse_errors"] == 0


# ------------------------------------------------------------------------------------------------ findings


@pytest.fixture
def fleet(tmp_path) -> Session:
    """Five GPUs sampled ten times in six polls, Xids arriving in the kernel stream along the way."""
    session = Session(tmp_path, duration_s=10)
    text = HEADER + "".join(fleet_rows(t) for t in range(10))
    pieces = chunked(text.encode(), [50, len(HEADER) + 13, 1111, 2050, 3001])
    kernel = [
        "[ 8120.000001] mlx5_core 0000:0c:00.0: Link up\n",
        xid_line("43", 79, "GPU has fallen off the bus.", "rsyslog"),  # kern.log, before any GPU sample
        xid_line("43", 79, "GPU has fallen off the bus."),  # the same Xid from dmesg, a poll later
        "",
        xid_line("52", 13, "Graphics Exception: ESR 0x404600"),
        xid_line("9B", 43, "Ch 00000010") + xid_line("C1", 31, "MMU Fault: ENGINE GRAPHICS"),
    ]
    session.live = []
    for piece, lines in zip(pieces, kernel, strict=True):
        session.live.append(session.poll(gpu_out=piece, **({"kernel_out": lines} if lines else {})))
    session.end()
    return session


def test_xids_are_judged_at_the_poll_that_brings_them(fleet):
    (first, none1), (second, early), (third, live3), (fourth, none4), (fifth, live5), (sixth, live6) = fleet.live
    assert first is None and none1 == [] and fourth is None and none4 == []  # nothing new: nothing recorded
    # the Xid came before the first GPU sample: which GPU bus 43 is, only the samples say; left to the end
    assert second is None and early == []
    [fallen] = live3
    assert third is not None and len(third) == 1
    assert (fallen["subject"], fallen["status"], fallen["value"]) == ("n1/gpu1", "fail", 1)
    assert "Xid 79 (GPU has fallen off the bus)" in fallen["summary"]
    assert fallen["evidence"]["codes"] == [79] and fallen["measured"]["events"][0]["code"] == 79
    assert {r["subject"]: r["status"] for r in live5} == {"n1/gpu2": "warn"} and fifth  # 13 is minor
    # 43 is info; 31 on a bus no sampled GPU has (the GPU nvidia-smi no longer lists) is named by its bus
    assert {r["subject"]: r["status"] for r in live6} == {"n1/gpu4": "pass", "n1/pci:0000:c1:00": "warn"}
    assert sixth is not None


def test_at_the_end_every_gpu_has_its_xid_verdict_each_xid_counted_once(fleet):
    xid = fleet.judge("telemetry.kernel.xid")
    assert statuses(xid) == {"n1/gpu0": "pass", "n1/gpu1": "fail", "n1/gpu2": "warn", "n1/gpu3": "pass",
                             "n1/gpu4": "pass", "n1/pci:0000:c1:00": "warn"}
    assert xid["n1/gpu1"]["value"] == 1  # kern.log and dmesg carried it, in two polls: one event
    assert xid["n1/gpu0"]["value"] == 0 and xid["n1/gpu0"]["summary"] == "GPU 0: no Xid while it was watched"
    assert xid["n1/gpu4"]["value"] == 1 and "Xid 43" in xid["n1/gpu4"]["summary"]
    assert xid["n1/gpu1"]["series"][0]["path"] == "series/n1/telemetry-kernel.csv"


def test_temperature_per_gpu_against_the_matched_reference(fleet):
    temperature = fleet.judge("telemetry.gpu.temperature")
    assert statuses(temperature) == {"n1/gpu0": "pass", "n1/gpu1": "pass", "n1/gpu2": "warn", "n1/gpu3": "fail",
                                     "n1/gpu4": "pass"}
    hot = temperature["n1/gpu3"]
    assert hot["value"] == 92.0 and hot["unit"] == "°C" and hot["expected"]["max"] == 80
    assert hot["summary"] == ("GPU 3 reached 92 °C, HBM 70 °C, limits: GPU warn 80/fail 87 °C, HBM warn 85/fail 95 °C "
                              "(hopper)")
    assert "HBM 90 °C" in temperature["n1/gpu2"]["summary"] and temperature["n1/gpu2"]["evidence"]["samples"] == 10
    assert temperature["n1/gpu0"]["artifacts"] == ["raw/n1/telemetry/gpu.out", "raw/n1/telemetry/kernel.out"]


def test_hardware_slowdown_fails_sw_thermal_warns_and_the_power_cap_passes(fleet):
    throttle = fleet.judge("telemetry.gpu.throttle")
    assert statuses(throttle) == {"n1/gpu0": "pass", "n1/gpu1": "fail", "n1/gpu2": "fail", "n1/gpu3": "warn",
                                  "n1/gpu4": "pass"}
    assert throttle["n1/gpu1"]["summary"] == "GPU 1 was slowed by hardware: hw_slowdown in 3 of 10 samples"
    assert throttle["n1/gpu1"]["value"] == 3.0  # seconds, at 1000 ms a sample
    assert "hw_thermal_slowdown in 3 of 10 samples" in throttle["n1/gpu2"]["summary"]
    assert "sw_thermal_slowdown in 1 of 10 samples" in throttle["n1/gpu3"]["summary"]
    assert "at its power cap in 10 samples (normal under load)" in throttle["n1/gpu0"]["summary"]


def test_clocks_power_and_ecc_per_gpu(fleet):
    clocks = fleet.judge("telemetry.gpu.clocks")
    assert statuses(clocks) == {"n1/gpu0": "pass", "n1/gpu1": "fail", "n1/gpu2": "pass", "n1/gpu3": "warn",
                                "n1/gpu4": "pass"}
    assert clocks["n1/gpu1"]["evidence"]["ratio_to_node_median"] == 0.733 and clocks["n1/gpu1"]["value"] == 1100.0
    power = fleet.judge("telemetry.gpu.power")
    assert statuses(power) == {"n1/gpu0": "pass", "n1/gpu1": "pass", "n1/gpu2": "warn", "n1/gpu3": "warn",
                               "n1/gpu4": "pass"}
    assert power["n1/gpu2"]["summary"] == "GPU 2 drew 760 W, above its 700 W limit"
    assert power["n1/gpu3"]["summary"] == "GPU 3 is capped at 500 W where its node's GPUs have 700 W"
    ecc = fleet.judge("telemetry.gpu.ecc")
    assert statuses(ecc) == {"n1/gpu0": "pass", "n1/gpu1": "warn", "n1/gpu2": "fail", "n1/gpu3": "skip",
                             "n1/gpu4": "pass"}
    assert ecc["n1/gpu1"]["summary"] == "GPU 1: 3 corrected ECC errors during the session"
    assert ecc["n1/gpu2"]["summary"] == "GPU 2: 1 uncorrectable ECC errors during the session"
    assert "ECC counters not readable" in ecc["n1/gpu3"]["summary"]
    [samples] = fleet.judge("telemetry.sampler.samples").values()
    assert samples["status"] == "pass" and samples["value"] == 50 and "(10–10 each)" in samples["summary"]


# ------------------------------------------------------------------------------------------------ the sampler


def test_a_gpu_that_stops_answering(tmp_path):
    session = Session(tmp_path, duration_s=4)
    lost = "[GPU is lost]"
    text = HEADER + "".join(row(t, 0, 50, 40, 300.0, 700, 1500, 0x4) + row(t, 1, lost, lost, lost, 700, lost, None,
                                                                           lost, lost)
                            + row(t, 2, 51, 41, 310.0, 700, 1500, 0x4) for t in range(4))
    session.poll(gpu_out=text)
    session.end()
    temperature = session.judge("telemetry.gpu.temperature")
    assert temperature["n1/gpu1"]["status"] == "fail" and "no temperature reading in 4 samples" in temperature[
        "n1/gpu1"]["summary"]
    assert session.judge("telemetry.gpu.power")["n1/gpu1"]["status"] == "fail"
    assert session.judge("telemetry.gpu.clocks")["n1/gpu1"]["status"] == "fail"
    [samples] = session.judge("telemetry.sampler.samples").values()
    assert samples["status"] == "warn" and samples["evidence"]["unreadable_samples"] == {1: 4}
    assert "GPU(s) 1 stopped giving readings (4 samples without values)" in samples["summary"]


def test_no_gpu_on_the_node_is_a_skip_and_a_broken_sampler_an_error(tmp_path):
    session = Session(tmp_path / "nogpu")
    session.poll(gpu_out="No devices were found\n")
    session.end(reason="streams_exited")
    for check_id in CHECKS:
        for result in session.judge(check_id).values():
            assert result["status"] == "skip", (check_id, result["summary"])
            if check_id != "telemetry.kernel.xid":
                assert result["summary"] == "no GPU samples: No devices were found"
    broken = Session(tmp_path / "broken")
    broken.poll(gpu_err="nvidia-smi: error while loading shared libraries: libnvidia-ml.so.1\n")
    broken.end(reason="streams_exited")
    for check_id in CHECKS:
        [result] = broken.judge(check_id).values()
        if check_id == "telemetry.kernel.xid":  # no GPU and no Xid: nothing to judge
            assert result["status"] == "skip" and "nothing to judge" in result["summary"]
            continue
        assert result["status"] == "error" and "the GPU sampler produced no sample: nvidia-smi: error while" in \
            result["summary"], check_id
    for check_id in CHECKS:
        [result] = checks.evaluate_many(check_id, Context(subject="n1", declared=frozenset()), RUN)
        assert result["status"] == "error" and result["summary"] == "no telemetry session was handed to this check"


def test_a_sampler_that_died_early_is_said(tmp_path):
    # nvidia-smi exited after three samples while the kernel stream kept the session running to its end
    session = Session(tmp_path, duration_s=10)
    session.poll(gpu_out=HEADER + fleet_rows(0) + fleet_rows(1) + fleet_rows(2),
                 gpu_err="Unable to determine the device handle for GPU0000:43:00.0: Unknown Error\n")
    session.end(reason="duration")
    [samples] = session.judge("telemetry.sampler.samples").values()
    assert samples["status"] == "warn" and samples["evidence"]["expected_samples"] == 10
    assert samples["summary"] == ("15 samples of 5 GPUs; GPU(s) 0, 1, 2, 3, 4 gave 3, 3, 3, 3, 3 of about 10 samples "
                                  "(the sampler stopped early)")
    [full] = Session(tmp_path / "full", duration_s=6).judge_after(HEADER + "".join(map(fleet_rows, range(3))))
    assert full["status"] == "pass"  # half of what was asked for or more: the sampler ran


def test_an_interrupted_session_keeps_its_samples_and_says_so(tmp_path):
    session = Session(tmp_path)
    session.poll(gpu_out=HEADER + fleet_rows(0) + fleet_rows(1)[:40])
    session.end(reason=None, interrupted="the run was interrupted (SIGTERM: Ctrl-C or a cancelled job)")
    [samples] = session.judge("telemetry.sampler.samples").values()
    assert samples["status"] == "error" and "cut short" in samples["summary"] and samples["value"] == 5
    assert samples["measured"]["interrupted"].startswith("the run was interrupted")
    temperature = session.judge("telemetry.gpu.temperature")["n1/gpu0"]
    assert temperature["status"] == "pass" and temperature["summary"].endswith(
        "(the session was cut short: the run was interrupted (SIGTERM: Ctrl-C or a cancelled job))")


def test_unparseable_sampler_output_is_an_error_of_the_harness(tmp_path):
    session = Session(tmp_path)
    session.poll(gpu_out=HEADER + fleet_rows(0))
    session.poll(gpu_out="Unable to determine the device handle for GPU0000:43:00.0: Unknown Error\n")
    session.end()
    [samples] = session.judge("telemetry.sampler.samples").values()
    assert samples["status"] == "error" and "1 chunks of sampler output could not be parsed" in samples["summary"]


def test_the_packaged_reference_is_used_without_overrides(tmp_path):
    session = Session(tmp_path, gpu_model="NVIDIA B200", overrides={})
    session.poll(gpu_out=HEADER + fleet_rows(0))
    session.end()
    temperature = session.judge("telemetry.gpu.temperature")
    assert {r["expected"]["matched"] for r in temperature.values()} == {"blackwell"}
    assert temperature["n1/gpu0"]["status"] == "pass" and temperature["n1/gpu3"]["status"] == "fail"  # 58 / 92 °C
    unknown = Session(tmp_path / "unknown", gpu_model=None, overrides={})
    unknown.poll(gpu_out=HEADER + fleet_rows(0))
    unknown.end()
    assert {r["expected"]["matched"] for r in unknown.judge("telemetry.gpu.temperature").values()} == {"any-gpu"}
