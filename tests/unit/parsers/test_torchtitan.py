"""Tests for the torchtitan log parser against the real outputs in the corpus."""

from __future__ import annotations

import json
import re

import pytest

from clustereval.parsers import ParseError, parse
from clustereval.parsers.torchtitan import failure_lines
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


# What torchtitan prints beyond the corpus captures' lines, put around them as torchtitan prints it (the line
# formats of torchtitan's trainer.py, components/metrics.py and distributed/parallel_dims.py, 0.2 to 2026).
LLAMA = "titan-rank0-llama3-8b-8gpu-steps-1-30.log"


def test_every_node_of_a_run_over_nodes_logs_its_first_rank_and_rank_zero_is_read():
    text = read_corpus("torchtitan", LLAMA)
    other = text.replace("[rank0]", "[rank8]").replace("tps: 7,034", "tps: 1,000")
    out = parse("torchtitan", text + other)
    assert out["ranks"] == [0, 8] and [s["rank"] for s in out["steps"]] == [0, 0, 0, 0]
    assert out["steps"][1]["tps"] == 7034


def test_under_pipeline_parallelism_the_rank_that_logs_a_real_loss_is_read():
    text = read_corpus("torchtitan", LLAMA)
    first_stage = re.sub(r"loss:\s+[\d.]+", "loss: -1.0000", text)
    out = parse("torchtitan", first_stage + text.replace("[rank0]", "[rank8]"))
    assert {s["rank"] for s in out["steps"]} == {8} and out["summary"]["final_loss"] == 8.1423


def test_validation_lines_are_not_training_steps_and_mfu_na_is_no_mfu():
    text = read_corpus("torchtitan", LLAMA)
    lines = text.splitlines()
    validate = lines[1].replace("step: 10  loss: 10.7069", "validate step: 10  loss:  9.9000")
    na = lines[3].replace("mfu: 41.08%", "mfu: N/A")
    out = parse("torchtitan", "\n".join([lines[0], lines[1], validate, lines[2], na]) + "\n")
    assert [s["step"] for s in out["steps"]] == [1, 10, 20, 30]
    assert out["validation"] == [{"step": 10, "loss": 9.9}]
    assert out["steps"][-1]["mfu_pct"] is None and out["summary"]["mfu_not_reported"] is True


def test_colours_the_mesh_the_model_and_running_out_of_data():
    text = read_corpus("torchtitan", LLAMA)
    # torchtitan colours its metrics line unless metrics.disable_color_printing is set
    coloured = text.replace("step:", "\x1b[31mstep:").replace("  loss:", "  \x1b[32mloss:").replace(
        "  tps:", "  \x1b[34mtps:").replace("%\n", "%\x1b[39m\n")
    head = ("[rank0]:[titan] 2025-06-04 08:51:30,001 - root - INFO - Building device mesh with parallelism: pp=1, "
            "dp_replicate=1, dp_shard=16, cp=1, tp=1, ep=8\n"
            "[rank0]:[titan] 2025-06-04 08:51:31,001 - root - INFO - \x1b[34mModel gpt_oss 20b \x1b[31msize: "
            "20,914,757,184 total parameters\x1b[39m\n")
    tail = "[rank0]:[titan] 2025-06-04 08:52:31,001 - root - WARNING - Ran out of data; last step was canceled.\n"
    out = parse("torchtitan", head + coloured + tail)
    assert [s["tps"] for s in out["steps"]] == [375, 7034, 7022, 7014]
    assert out["mesh"] == {"pp": 1, "dp_replicate": 1, "dp_shard": 16, "cp": 1, "tp": 1, "ep": 8}
    assert out["world_size"] == 16 and out["data_exhausted"] is True and out["complete"] is True
    assert out["model"] == {"name": "gpt_oss", "flavor": "20b", "parameters": 20914757184}


def test_failures_before_any_step_name_the_fabric_when_it_is_the_cause():
    hang = read_corpus("torchtitan", "ezpz-torchtitan-steps-then-HANG-watchdog-sigterm.log")
    no_steps = "\n".join(line for line in hang.splitlines() if "step:" not in line)
    failures, distributed = failure_lines(no_steps)
    assert len(failures) == 1 and "Watchdog" in failures[0] and distributed == []
    failures, distributed = failure_lines("torch.distributed.DistNetworkError: failed to connect\n"
                                          "RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1970, remote exited\n")
    assert len(distributed) == 2
