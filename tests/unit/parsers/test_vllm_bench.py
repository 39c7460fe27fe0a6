"""Tests for the vLLM serving benchmark parser against the real outputs in the corpus."""

from __future__ import annotations

import json

import pytest

from clustereval.parsers import ParseError, parse
from tests.conftest import corpus_files, read_corpus


@pytest.mark.parametrize("path", corpus_files("vllm-bench"), ids=lambda p: p.name)
def test_every_corpus_file(path):
    out = parse("vllm-bench", path.read_bytes())
    json.dumps(out)
    assert out["complete"] is True and out["warnings"] == []


def test_mi355x_concurrency_and_e2el():
    text = read_corpus("vllm-bench", "benchmark-serving-mi355x-gpt-oss-120b-concurrency4-e2el.txt")
    out = parse("vllm-bench", text)
    assert out["successful_requests"] == 32 and out["max_concurrency"] == 4
    assert out["request_throughput_rps"] == 1.10 and out["output_throughput_tok_per_s"] == 1122.33
    assert out["ttft_mean_ms"] == 89.77 and out["ttft_median_ms"] == 51.25 and out["ttft_p99_ms"] == 522.23
    assert out["tpot_p99_ms"] == 3.81 and out["itl_p99_ms"] == 8.25
    assert out["e2el_median_ms"] == 3591.23
    assert out["latency_ms"]["ttft"]["p99"] == 522.23


def test_older_format():
    out = parse("vllm-bench", read_corpus(
        "vllm-bench", "benchmark-serving-py-older-format-qwen2.5-1.5b-2000req-saturated.txt"))
    assert out["successful_requests"] == 2000 and out["duration_s"] == 102.57
    assert out["total_throughput_tok_per_s"] == 12289.38
    assert out["ttft_p99_ms"] == 93520.20 and "e2el" not in out["latency_ms"]


def test_percentiles_and_failed_requests():
    out = parse("vllm-bench", read_corpus(
        "vllm-bench", "vllm-bench-serve-gb10-dgx-spark-nemotron-reasoning-percentiles.txt"))
    assert out["failed_requests"] == 0 and out["request_rate_configured_rps"] == 0.20
    assert out["peak_output_throughput_tok_per_s"] == 133.00
    assert out["ttft_p90_ms"] == 803.44 and out["itl_p95_ms"] == 317.42 and out["e2el_p99_ms"] == 939497.39


def test_cut_block_is_incomplete():
    text = read_corpus("vllm-bench", "benchmark-serving-mi355x-gpt-oss-120b-concurrency4-e2el.txt")
    out = parse("vllm-bench", text[: text.index("Mean ITL")])
    assert out["complete"] is False and out["tpot_mean_ms"] == 3.48 and "itl" not in out["latency_ms"]


def test_saved_json():
    doc = {"completed": 10, "request_throughput": 2.5, "output_throughput": 300.0,
           "mean_ttft_ms": 40.0, "p99_ttft_ms": 90.0, "median_tpot_ms": 5.0}
    out = parse("vllm-bench", json.dumps(doc))
    assert out["format"] == "json" and out["successful_requests"] == 10
    assert out["ttft_p99_ms"] == 90.0 and out["latency_ms"]["tpot"]["median"] == 5.0


def test_no_result_block():
    with pytest.raises(ParseError, match="no 'Serving Benchmark Result'"):
        parse("vllm-bench", "Traceback (most recent call last):\nRuntimeError: CUDA error: out of memory\n")
