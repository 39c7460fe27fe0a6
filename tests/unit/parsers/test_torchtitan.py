"""Tests for the torchtitan log parser against the real outputs in the corpus."""

from __future__ import annotations

import json

import pytest

from clustereval.parsers import ParseError, parse
from tests.conftest import corpus_files, read_corpus


@pytest.mark.parametrize("path", corpus_files("torchtitan"), ids=lambda p: p.name)
def test_every_corpus_file(path):
    out = parse("torchtitan", path.read_bytes())
    json.dumps(out)
    assert out["complete"] is ("HANG" not in path.name)
    assert out["steps"]


def _out(name):
    return parse("torchtitan", read_corpus("torchtitan", name))


def test_llama3_8b_steps_and_warmup():
    out = _out("titan-rank0-llama3-8b-8gpu-steps-1-30.log")
    assert [s["step"] for s in out["steps"]] == [1, 10, 20, 30]
    first, tenth = out["steps"][0], out["steps"][1]
    assert first["tps"] == 375 and first["mfu_pct"] == 2.20
    assert tenth["tps"] == 7034 and tenth["tflops"] == 407.35 and tenth["mfu_pct"] == 41.19
    assert tenth["memory_gib"] == 30.99 and tenth["memory_pct"] == 32.62
    assert tenth["grad_norm"] is None and tenth["rank"] == 0
    assert tenth["timestamp"] == "2025-06-04 08:51:58,557"
    summary = out["summary"]
    assert summary["warmup_step_excluded"] is True
    assert summary["tps_mean"] == pytest.approx((7034 + 7022 + 7014) / 3)
    assert summary["final_loss"] == 8.1423 and summary["last_step"] == 30


def test_grad_norm_and_interleaved_info_line():
    out = _out("titan-rank0-qwen3-vl-text-only-h200-with-grad-norm.log")
    assert [s["grad_norm"] for s in out["steps"]] == [8.2782, 8.0045, 7.9040]
    assert out["summary"]["memory_peak_gib"] == 116.16


def test_ezpz_format():
    steps = _out("ezpz-torchtitan-llama2-7b-first-steps-with-warnings.log")["steps"]
    assert steps[1]["tps"] == 6697 and steps[1]["loss"] == 14.4458
    assert steps[0]["timestamp"] == "2025-09-11 14:09:46,954794"


def test_hang_is_incomplete_with_the_watchdog_line():
    out = _out("ezpz-torchtitan-steps-then-HANG-watchdog-sigterm.log")
    assert out["summary"]["last_step"] == 37
    assert any("Watchdog: no output for 1800.0s" in w for w in out["warnings"])


def test_no_steps():
    with pytest.raises(ParseError, match="no torchtitan"):
        parse("torchtitan", "[rank0]:[titan] 2025-06-04 08:51:40,001 - root - INFO - Starting job\n")
