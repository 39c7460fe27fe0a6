"""The burn-in's parsers on captured output of its own programs (roles/burnin/files, run for real with PyTorch on
the CPU and gloo over two local ranks: tests/unit/data/burnin) and every burn-in check's pass, warn, fail, skip
and error, judged the way the session action judges them: each poll's bytes fed to a Recorder, the checks on the
SessionView at the end."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from clustereval import checks, parsers
from clustereval.checks import Context
from clustereval.facts import hardware
from clustereval.results import now_iso
from clustereval.sessions import Recorder, SessionView, Stream
from tests.helpers import RUN, held_to_contract
from tests.unit.test_telemetry import HEADER, row

DATA = Path(__file__).parent / "data" / "burnin"


def capture(name: str) -> str:
    return (DATA / name).read_text()


# ------------------------------------------------------------------------------------------------ parsers


def test_gemm_parser_reads_every_window_and_the_clean_end():
    parsed = parsers.parse("burnin-gemm", capture("gemm-cpu.jsonl"))
    assert parsed["complete"] and parsed["windows"] == 4 and parsed["done"]["stopped"] == "duration"
    assert {r["device"] for r in parsed["rows"]} == {0} and all(r["tflops"] > 0 for r in parsed["rows"])
    stopped = parsers.parse("burnin-gemm", capture("gemm-cpu-sigterm.jsonl"))
    assert stopped["complete"] and stopped["done"]["stopped"] == "signal"


def test_gemm_parser_keeps_what_a_truncated_output_holds():
    text = capture("gemm-cpu.jsonl")
    cut = text[: text.index('"tflops"', text.index('"window"', text.index('"window"') + 10))]
    parsed = parsers.parse("burnin-gemm", cut)
    assert not parsed["complete"] and parsed["windows"] == 1 and parsed["warnings"]
    for bad in ("", "Traceback (most recent call last):\n"):
        with pytest.raises(parsers.ParseError):
            parsers.parse("burnin-gemm", bad)


def test_collective_loop_parser_reads_windows_per_op_lines_and_a_hang():
    windows = parsers.parse("collective-loop", capture("loop-gloo-windows.jsonl"))
    assert windows["complete"] and windows["windows"] == 12 and windows["ops"] == sum(
        r["ops"] for r in windows["rows"]) > 1000
    first = windows["rows"][0]
    assert (first["collective"], first["ops"], first["wrong"], first["first_iteration"]) == ("all_to_all", 202, 0, 1)
    assert first["busbw_min_gbps"] <= first["busbw_gbps"] <= first["busbw_max_gbps"]
    # --window-s 0: one line per operation, each read as a window of one
    parsed = parsers.parse("collective-loop", capture("loop-gloo.jsonl"))
    assert parsed["complete"] and parsed["ops"] == parsed["windows"] > 30 and not parsed["errors"]
    assert {r["collective"] for r in parsed["rows"]} == {"all_to_all", "all_gather", "reduce_scatter"}
    assert all(r["ops"] == 1 and r["wrong"] == 0 and r["backend"] == "gloo" for r in parsed["rows"])
    assert all(r["busbw_min_gbps"] == r["busbw_gbps"] == r["busbw_max_gbps"] for r in parsed["rows"])
    hang = parsers.parse("collective-loop", capture("loop-gloo-hang.jsonl"))
    assert not hang["complete"] and hang["errors"][0]["timeout"] and "Timed out" in hang["errors"][0]["message"]
    truncated = parsers.parse("collective-loop", capture("loop-gloo.jsonl")[:700])
    assert not truncated["complete"] and truncated["ops"] >= 1
    with pytest.raises(parsers.ParseError):
        parsers.parse("collective-loop", "mpirun was unable to launch\n")


IB = ("=== sample 2026-12-02T12:00:00.000+00:00\nib mlx5_0 1 symbol_error {a}\nib mlx5_0 1 port_rcv_errors 0\n"
      "=== sample 2026-12-02T12:00:30.000+00:00\nib mlx5_0 1 symbol_error {b}\nib mlx5_0 1 port_rcv_errors 0\n")
ABSENT = "=== absent no InfiniBand error counters in /sys/class/infiniband and no NVLink (nvidia-smi nvlink -e)\n"


def test_counter_parser():
    parsed = parsers.parse("burnin-counters", IB.format(a=3, b=5))
    assert [(r["device"], r["counter"], r["value"]) for r in parsed["rows"]][:2] == [
        ("mlx5_0/1", "symbol_error", 3), ("mlx5_0/1", "port_rcv_errors", 0)]
    assert parsers.parse("burnin-counters", ABSENT)["absent"]
    assert parsers.parse("burnin-counters", "ib mlx5_0 1 symbol_error unreadable\n=== sample x\n")["warnings"]
    with pytest.raises(parsers.ParseError):
        parsers.parse("burnin-counters", "sh: 1: syntax error\n")


# ------------------------------------------------------------------------------------------------ a session


STREAMS = [Stream("gemm", "gemm", "burnin-gemm"), Stream("gpu", "nvidia-smi", "nvidia-smi-query-loop", header_lines=1),
           Stream("kernel", "dmesg", "kernel-gpu-events"), Stream("counters", "counters", "burnin-counters"),
           Stream("collective", "mpirun", "collective-loop")]


def window(t: float, device: int, tflops: float, seconds: float = 2.0, backend: str = "cuda") -> str:
    return json.dumps({"event": "window", "timestamp": f"2026-12-02T12:00:{int(t) % 60:02d}.000+00:00",
                       "device": device, "tflops": tflops, "iters": 100, "seconds": seconds, "elapsed_s": t,
                       "dtype": "bfloat16", "backend": backend}) + "\n"


def gemm(per_device: dict[int, list[float]], backend: str = "cuda") -> str:
    lines = [window(2.0 * (i + 1), d, v, backend=backend) for d, vs in per_device.items() for i, v in enumerate(vs)]
    return "".join(lines) + '{"event": "done", "stopped": "duration"}\n'


def judge(tmp_path: Path, check_id: str, *, model: str | None = "NVIDIA H200", load: str = "both",
          session: str = "burnin", overrides: dict | None = None, **outputs: str) -> list[dict[str, Any]]:
    recorder = Recorder(str(tmp_path), "n1", session, STREAMS)
    view = SessionView(recorder, session, started=now_iso())
    streams, offsets = {}, {}
    for key, data in outputs.items():
        name, suffix = key.split("_") if "_" in key and key.endswith(("_out", "_err")) else (key, "out")
        raw = data.encode()
        offsets[f"{name}.{suffix}"] = len(raw)
        streams.setdefault(name, {})[suffix] = {"data": base64.b64encode(raw).decode(), "offset": len(raw)}
    recorder.feed({"state": "ended", "streams": streams}, final=True)
    view.final, view.ended, view.end_reason = True, now_iso(), "duration"
    facts = hardware({"gpu_models": [model] * 2 if model else [], "gpu_count": 2 if model else 0})
    ctx = Context(subject="n1", options={"baseline_overrides": overrides or {}},
                  params={"session": session, "load": load, "duration_s": 60, "interval_ms": 1000}, facts=facts,
                  host_facts={"n1": facts}, session=view, declared=frozenset(), extra_artifacts=recorder.artifacts())
    return [held_to_contract(check_id, r) for r in checks.evaluate_many(check_id, ctx, RUN)]


def statuses(results: list[dict[str, Any]]) -> dict[str, str]:
    return {r["subject"]: r["status"] for r in results}


def test_sustained_gemm_against_the_sustained_reference(tmp_path):
    out = judge(tmp_path / "a", "burnin.gemm.sustained", gemm=gemm({0: [660, 662, 661], 1: [600, 602, 601],
                                                                     2: [500, 505, 510]}))
    assert statuses(out) == {"n1/gpu0": "pass", "n1/gpu1": "warn", "n1/gpu2": "fail"}
    assert out[0]["expected"]["reference"] == 661.0 and out[0]["params"]["load"] == "both"
    assert out[0]["series"] and out[0]["series"][0]["path"].endswith("burnin-gemm.csv")
    cpu = judge(tmp_path / "b", "burnin.gemm.sustained", model=None, gemm=gemm({0: [0.08, 0.08]}, backend="cpu"))
    assert cpu[0]["status"] == "skip" and "no sustained reference for CPU" in cpu[0]["summary"]
    other = judge(tmp_path / "c", "burnin.gemm.sustained", model="NVIDIA A10", gemm=gemm({0: [100, 100]}))
    assert other[0]["status"] == "skip" and "no sustained reference for NVIDIA A10" in other[0]["summary"]
    overridden = judge(tmp_path / "d", "burnin.gemm.sustained", model="NVIDIA A10", gemm=gemm({0: [100, 100]}),
                       overrides={"burnin.gemm.sustained": {"direction": "higher", "warn": 90, "fail": 50}})
    assert overridden[0]["status"] == "pass"
    error = judge(tmp_path / "e", "burnin.gemm.sustained", gemm_err="ImportError: no torch\n")
    assert error[0]["status"] == "error" and "no torch" in error[0]["summary"]


def test_a_gpu_failing_under_load_fails_and_a_partial_burn_in_warns(tmp_path):
    failed = gemm({0: [661, 661]}) + '{"event": "error", "device": 1, "message": "RuntimeError: CUDA error: ECC"}\n'
    out = statuses(judge(tmp_path / "a", "burnin.gemm.sustained", gemm=failed))
    assert out == {"n1/gpu0": "pass", "n1/gpu1": "fail"}
    partial = judge(tmp_path / "b", "burnin.gemm.sustained", load="gpu", gemm=gemm({0: [661, 661]}))
    assert partial[0]["status"] == "warn" and "only the gpu part of the burn-in ran" in partial[0]["summary"]
    assert partial[0]["params"]["load"] == "gpu"
    network = judge(tmp_path / "c", "burnin.gemm.decay", load="network", counters=ABSENT)
    assert network[0]["status"] == "skip" and "load=network" in network[0]["summary"]


def test_decay_and_drift(tmp_path):
    # the end's quarter against the start's: a GPU that fell and stayed down, not one slow window
    runs = {0: [661] * 30 + [450], 1: [661] * 20 + [560] * 11, 2: [661] * 20 + [450] * 11, 3: [661] * 20 + [450] * 3}
    decay = statuses(judge(tmp_path / "a", "burnin.gemm.decay", gemm=gemm(runs)))
    assert decay == {"n1/gpu0": "pass", "n1/gpu1": "warn", "n1/gpu2": "fail", "n1/gpu3": "warn"}
    short = judge(tmp_path / "b", "burnin.gemm.decay", gemm=gemm({0: [661, 661]}))
    assert short[0]["status"] == "skip"
    five = gemm({0: [661], 1: [660], 2: [661], 3: [610], 4: [500]})
    drift = statuses(judge(tmp_path / "c", "burnin.gemm.drift", gemm=five))
    assert drift == {"n1/gpu0": "pass", "n1/gpu1": "pass", "n1/gpu2": "pass", "n1/gpu3": "warn", "n1/gpu4": "fail"}
    alone = judge(tmp_path / "d", "burnin.gemm.drift", gemm=gemm({0: [661]}))
    assert alone[0]["status"] == "skip"
    assert judge(tmp_path / "e", "burnin.gemm.drift", gemm="")[0]["status"] == "error"


def ops(values: list[float]) -> str:
    return "".join(json.dumps({"event": "op", "timestamp": "2026-12-02T12:00:00.000+00:00", "iteration": i,
                               "collective": "all_to_all", "bytes": 1 << 28, "seconds": 0.01, "busbw_gbps": v,
                               "world_size": 4, "backend": "nccl", "correct": True}) + "\n"
                   for i, v in enumerate(values))


def test_collective_checks(tmp_path):
    good = judge(tmp_path / "a", "burnin.collective.errors", collective=capture("loop-gloo.jsonl"))
    assert good[0]["status"] == "pass" and good[0]["subject"] == "n1"
    hang = judge(tmp_path / "b", "burnin.collective.errors", collective=capture("loop-gloo-hang.jsonl"))
    assert hang[0]["status"] == "fail" and "timed out (a hang)" in hang[0]["summary"]
    bw = judge(tmp_path / "c", "burnin.collective.bandwidth", collective=capture("loop-gloo.jsonl"))
    assert {r["params"]["collective"] for r in bw} == {"all_to_all", "all_gather", "reduce_scatter"}
    assert all(r["status"] in ("pass", "warn", "fail") and r["evidence"]["runs"] > 10 for r in bw)
    cases = (([40.0] * 20, "pass"), ([40.0] * 17 + [15.0] * 3, "warn"), ([40.0] * 17 + [5.0] * 3, "fail"))
    for values, status in cases:
        got = judge(tmp_path / status, "burnin.collective.bandwidth", collective=ops(values))
        assert got[0]["status"] == status, got[0]["summary"]
    skipped = judge(tmp_path / "d", "burnin.collective.errors", load="gpu", collective=capture("loop-gloo.jsonl"))
    assert skipped[0]["status"] == "skip"
    error = judge(tmp_path / "e", "burnin.collective.errors", collective_err="mpirun: command not found\n")
    assert error[0]["status"] == "error" and "mpirun" in error[0]["summary"]
    sustained = judge(tmp_path / "f", "burnin.collective.errors", session="sustained", load="gpu",
                      collective=capture("loop-gloo.jsonl"))
    assert sustained[0]["status"] == "pass"  # the load setting is the burn-in's, not the sustained run's


def windows(values: list[tuple[int, float]], wrong: int = 0) -> str:
    """Window lines of all_to_all: (operations, mean busbw) each, 0.01 s per operation."""
    return "".join(json.dumps({"event": "window", "timestamp": "2026-12-02T12:00:00.000+00:00",
                               "collective": "all_to_all", "bytes": 1 << 28, "ops": n, "seconds": n * 0.01,
                               "busbw_gbps": v, "busbw_min_gbps": v * 0.9, "busbw_max_gbps": v * 1.1,
                               "wrong": wrong if i == 0 else 0, "first_iteration": 1, "last_iteration": n,
                               "world_size": 16, "backend": "nccl"}) + "\n" for i, (n, v) in enumerate(values))


def test_collective_windows_are_judged_on_their_time_weighted_mean_and_their_spread(tmp_path):
    real = judge(tmp_path / "a", "burnin.collective.bandwidth", collective=capture("loop-gloo-windows.jsonl"))
    assert {r["params"]["collective"] for r in real} == {"all_to_all", "all_gather", "reduce_scatter"}
    one = next(r for r in real if r["params"]["collective"] == "all_to_all")
    assert one["evidence"]["windows"] == 4 and one["evidence"]["runs"] == 702
    assert one["evidence"]["min_gbps"] == 0.0056 and one["evidence"]["max_gbps"] > one["value"]
    steady = judge(tmp_path / "b", "burnin.collective.bandwidth", collective=windows([(200, 40.0)] * 10))
    assert steady[0]["status"] == "pass" and steady[0]["value"] == 40.0, steady[0]["summary"]
    assert "over 2000 runs in 10 windows" in steady[0]["summary"]
    # the last window, cut short by the end of the run, is not a slow window
    tail = judge(tmp_path / "c", "burnin.collective.bandwidth", collective=windows([(200, 40.0)] * 9 + [(3, 4.0)]))
    assert tail[0]["status"] == "pass", tail[0]["summary"]
    # windows where the fabric stalled (few operations, low bandwidth) in the middle of the run: a fail, and the
    # slowest operation is the minimum
    stall = judge(tmp_path / "d", "burnin.collective.bandwidth",
                  collective=windows([(200, 40.0)] * 5 + [(2, 4.0)] * 2 + [(200, 40.0)] * 3))
    assert stall[0]["status"] == "fail" and "min 3.600" in stall[0]["summary"], stall[0]["summary"]
    wrong = judge(tmp_path / "e", "burnin.collective.errors", collective=windows([(200, 40.0)] * 3, wrong=2))
    assert wrong[0]["status"] == "fail" and wrong[0]["summary"] == "2 of 600 collective results were wrong"


def test_counters(tmp_path):
    assert judge(tmp_path / "a", "burnin.counters", counters=IB.format(a=3, b=3))[0]["status"] == "pass"
    warn = judge(tmp_path / "b", "burnin.counters", counters=IB.format(a=3, b=5))[0]
    assert warn["status"] == "warn" and "mlx5_0/1/symbol_error +2" in warn["summary"]
    assert judge(tmp_path / "c", "burnin.counters", counters=IB.format(a=0, b=500))[0]["status"] == "fail"
    absent = judge(tmp_path / "d", "burnin.counters", counters=ABSENT)[0]
    assert absent["status"] == "skip" and "no link error counters" in absent["summary"]
    assert judge(tmp_path / "e", "burnin.counters", counters_err="sh: nvidia-smi: not found\n")[0]["status"] == "error"


def test_telemetry_checks_judge_the_burn_in_session(tmp_path):
    # under load the SW power cap (0x4) and an SM clock near 1500 MHz are normal; HW slowdown (0x8) is a finding
    samples = HEADER + "".join(row(t, 0, 58, 45, 690.0, 700, 1500, 0x4) + row(t, 1, 60, 46, 640.0, 700, 1100, 0x4 | 0x8)
                               for t in range(5))
    out = statuses(judge(tmp_path / "a", "burnin.gpu.throttle", gpu=samples))
    assert out == {"n1/gpu0": "pass", "n1/gpu1": "fail"}
    partial = judge(tmp_path / "b", "burnin.gpu.throttle", load="gpu", gpu=samples)
    assert [r["status"] for r in partial] == ["warn", "fail"]
    assert "only the gpu part" in partial[0]["summary"]
    assert judge(tmp_path / "c", "burnin.gpu.ecc", load="network", counters=ABSENT)[0]["status"] == "skip"
    assert judge(tmp_path / "d", "burnin.gpu.temperature", gpu_err="nvidia-smi crashed\n")[0]["status"] == "error"


def test_burn_in_xids_are_judged_live_as_the_samplers_are():
    # The same check function as telemetry.kernel.xid: an Xid in hour one of an 8-hour burn-in is recorded at the
    # poll that brings it (the session action judges `judged: live` checks at every poll).
    from clustereval.checks import catalogue

    assert catalogue.entry("burnin.kernel.xid").get("judged") == "live"
    assert catalogue.entry("telemetry.kernel.xid").get("judged") == "live"
