"""Inference checks on vLLM's real serving-benchmark blocks (the shared corpus), put in the probe's per-concurrency
layout: pass, warn, fail, skip (the probe's own reason) and error (a server that never answered, a cut block)."""

from __future__ import annotations

from clustereval import checks, parsers
from tests.conftest import read_corpus
from tests.helpers import PROBLEM_WORDS

PROBE = "vllm_bench_sweep"
MI355 = "benchmark-serving-mi355x-gpt-oss-120b-concurrency4-e2el.txt"  # TTFT p99 522 ms, TPOT p99 3.8 ms
SPARK = "vllm-bench-serve-gb10-dgx-spark-nemotron-reasoning-percentiles.txt"  # TPOT p99 175 ms, 200 tok/s


def sweep(*blocks: tuple[int, str], ready: str = "server-ready: 42") -> str:
    return ready + "\n" + "".join(f"=== concurrency {c}\n{text}\n" for c, text in blocks)


def judge(check_id: str, stdout: str) -> list[checks.Verdict]:
    ctx = checks.Context(subject="node1", probes={PROBE: {"name": PROBE, "rc": 0, "stdout": stdout,
                                                          "parser": "probe-inference"}})
    outcome = checks.run_check(check_id, checks.registered()[check_id], ctx)
    verdicts = outcome if isinstance(outcome, list) else [outcome]
    for verdict in verdicts:
        assert not (verdict.status == "pass" and PROBLEM_WORDS.search(verdict.summary)), verdict.summary
    return verdicts


def test_the_probe_output_is_read_per_concurrency():
    data = parsers.parse("probe-inference", sweep((4, read_corpus("vllm-bench", MI355)), (8, "garbage")))
    assert data["server_ready_s"] == 42 and data["runs"][0]["result"]["ttft_p99_ms"] == 522.23
    assert "error" in data["runs"][1]


def test_latency_and_requests_on_real_blocks():
    text = sweep((4, read_corpus("vllm-bench", MI355)), (50, read_corpus("vllm-bench", SPARK)))
    ttft = judge("inference.vllm.ttft", text)
    assert [v.status for v in ttft] == ["pass", "pass"]
    tpot = {v.params["concurrency"]: v for v in judge("inference.vllm.tpot", text)}
    assert tpot[4].status == "pass" and tpot[50].status == "warn"  # 175 ms per token: slower than a reader
    assert {v.status for v in judge("inference.vllm.requests", text)} == {"pass"}
    scaling = judge("inference.vllm.scaling", text)[0]
    assert scaling.status == "fail" and "throughput falls as load grows" in scaling.summary  # 1122 -> 200 tok/s


def test_failed_requests_and_slow_first_tokens_fail():
    block = read_corpus("vllm-bench", SPARK).replace("Failed requests:                         0",
                                                      "Failed requests:                         7")
    assert judge("inference.vllm.requests", sweep((50, block)))[0].status == "fail"
    slow = read_corpus("vllm-bench", MI355).replace("P99 TTFT (ms):                           522.23",
                                                     "P99 TTFT (ms):                           15000.00")
    assert judge("inference.vllm.ttft", sweep((4, slow)))[0].status == "fail"


def test_the_probes_reason_is_the_skip_and_a_dead_server_is_an_error():
    skipped = "clustereval-skip: vLLM is not installed for python3 (set clustereval_inference_venv)\n"
    for check_id in ("inference.vllm.requests", "inference.vllm.ttft", "inference.vllm.scaling"):
        verdict = judge(check_id, skipped)[0]
        assert verdict.status == "skip" and "vLLM is not installed" in verdict.summary
    dead = "server-failed: not answering after 600 s: CUDA out of memory\n"
    assert judge("inference.vllm.requests", dead)[0].status == "error"
    cut = sweep((4, "============ Serving Benchmark Result ============\nSuccessful requests: 3\n"))
    assert judge("inference.vllm.requests", cut)[0].status == "error"
    one = judge("inference.vllm.scaling", sweep((4, read_corpus("vllm-bench", MI355))))[0]
    assert one.status == "skip"
