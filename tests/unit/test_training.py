"""Training checks on real torchtitan logs (the shared corpus) and on logs built to show each finding: pass,
warn, fail, skip (the probe's own reason, no reference) and error."""

from __future__ import annotations

import pytest

from clustereval import checks
from tests.conftest import read_corpus
from tests.helpers import PROBLEM_WORDS

PROBE = "torchtitan_train"
H100 = {"gpu_model": "NVIDIA H100 80GB HBM3"}


def judge(check_id: str, stdout: str, rc: int = 0, facts: dict | None = None, model: str = "llama3-8b"):
    ctx = checks.Context(subject="node1", probes={PROBE: {"name": PROBE, "rc": rc, "stdout": stdout,
                                                          "parser": "torchtitan"}},
                         facts=dict(H100 if facts is None else facts), params={"model": model})
    verdict = checks.run_check(check_id, checks.registered()[check_id], ctx)
    assert not (verdict.status == "pass" and PROBLEM_WORDS.search(verdict.summary)), verdict.summary
    return verdict


def log(steps: list[tuple[int, float, float, float]], end: str = "Training completed") -> str:
    lines = [f"[rank0]:[titan] 2026-12-01 10:00:{i:02d},000 - root - INFO - step: {step:2d}  loss: {loss:.4f}  "
             f"memory: 30.99GiB(32.62%)  tps: {tps:,.0f}  tflops: 400.0  mfu: {mfu:.2f}%"
             for i, (step, loss, tps, mfu) in enumerate(steps)]
    return "\n".join([*lines, f"[rank0]:[titan] 2026-12-01 10:01:00,000 - root - INFO - {end}"]) + "\n"


def test_the_corpus_run_on_h100_is_healthy():
    text = read_corpus("torchtitan", "titan-rank0-llama3-8b-8gpu-steps-1-30.log") + "Training completed\n"
    assert judge("training.torchtitan.run", text).status == "pass"
    tps = judge("training.torchtitan.tps", text)
    assert tps.status == "pass" and tps.value == pytest.approx(7023.33, abs=1) and tps.expected["min"] == 6000
    assert judge("training.torchtitan.mfu", text).status == "pass"
    assert judge("training.torchtitan.loss", text).status == "pass"
    # three steady steps: stable
    assert judge("training.torchtitan.stability", text).status == "pass"


def test_a_run_that_hangs_and_is_killed_fails_and_a_log_without_the_end_warns():
    hung = read_corpus("torchtitan", "ezpz-torchtitan-steps-then-HANG-watchdog-sigterm.log")
    verdict = judge("training.torchtitan.run", hung)
    assert verdict.status == "fail" and "died at step 37" in verdict.summary and "Watchdog" in verdict.summary
    unfinished = log([(1, 12.0, 300, 2), (10, 10.0, 7000, 41), (20, 9.0, 7000, 41)], end="saving checkpoint")
    assert judge("training.torchtitan.run", unfinished).status == "warn"
    died = judge("training.torchtitan.run", log([(1, 12.0, 300, 2), (10, 10.0, 7000, 41)], end="x"), rc=1)
    assert died.status == "fail"


def test_throughput_and_mfu_below_the_reference():
    slow = log([(1, 12.0, 300, 2), (10, 10.0, 5000, 30), (20, 9.0, 5000, 30), (30, 8.5, 5000, 30)])
    assert judge("training.torchtitan.tps", slow).status == "warn"
    assert judge("training.torchtitan.mfu", slow).status == "warn"
    crawling = log([(1, 12.0, 300, 2), (10, 10.0, 3000, 15), (20, 9.0, 3000, 15)])
    assert judge("training.torchtitan.tps", crawling).status == "fail"
    assert judge("training.torchtitan.mfu", crawling).status == "fail"
    other = judge("training.torchtitan.tps", slow, facts={"gpu_model": "NVIDIA A100-SXM4-80GB"})
    assert other.status == "skip" and "tokens/s per GPU 5000" in other.summary


def test_unstable_steps_and_a_loss_that_does_not_go_down():
    jittery = log([(1, 12.0, 300, 2), (2, 11.0, 7000, 41), (3, 10.0, 4000, 25), (4, 9.5, 7000, 41),
                   (5, 9.0, 3500, 20)])
    assert judge("training.torchtitan.stability", jittery).status == "fail"
    wobbly = log([(1, 12.0, 300, 2), (2, 11.0, 7000, 41), (3, 10.0, 6000, 36), (4, 9.5, 7000, 41),
                  (5, 9.0, 6200, 37)])
    assert judge("training.torchtitan.stability", wobbly).status == "warn"
    assert judge("training.torchtitan.stability", log([(1, 12.0, 300, 2), (2, 11.0, 7000, 41)])).status == "skip"
    flat = log([(1, 12.0, 300, 2), (10, 11.8, 7000, 41), (20, 11.7, 7000, 41)])
    assert judge("training.torchtitan.loss", flat).status == "warn"
    rising = log([(1, 12.0, 300, 2), (10, 12.5, 7000, 41), (20, 13.0, 7000, 41)])
    assert judge("training.torchtitan.loss", rising).status == "fail"
    nan = log([(1, 12.0, 300, 2), (10, float("nan"), 7000, 41)])
    assert judge("training.torchtitan.loss", nan).status == "fail"


def test_the_probes_own_reason_is_the_skip_and_an_unreadable_log_is_an_error():
    skipped = "clustereval-skip: PyTorch sees no CUDA GPU on this node: torchtitan pretraining needs GPUs\n"
    for check_id in ("training.torchtitan.run", "training.torchtitan.tps", "training.torchtitan.loss"):
        verdict = judge(check_id, skipped)
        assert verdict.status == "skip" and "no CUDA GPU" in verdict.summary
    assert judge("training.torchtitan.run", "ModuleNotFoundError: torchtitan\n", rc=1).status == "error"
    assert judge("training.torchtitan.tps", "no metrics at all\n").status == "error"
