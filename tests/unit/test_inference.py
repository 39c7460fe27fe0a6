"""Inference checks on vLLM's real serving-benchmark blocks (the shared corpus), put in the probes' per-concurrency
layout and judged once for the cluster as the role does: each node's own serve (subject the node) and the serve
over every node (subject the node set); pass, warn, fail, skip (the probe's own reason, on every node and for the
node set; a serve over nodes on one node) and error (a server that never answered, a cut block, a launcher that
reached too few nodes, a timeout)."""

from __future__ import annotations

import pytest

from clustereval import parsers
from clustereval.checks import Context
from tests.conftest import read_corpus
from tests.helpers import judge_many

CHECKS = ("inference.vllm.requests", "inference.vllm.ttft", "inference.vllm.tpot", "inference.vllm.scaling")
MI355 = "benchmark-serving-mi355x-gpt-oss-120b-concurrency4-e2el.txt"  # TTFT p99 522 ms, TPOT p99 3.8 ms
SPARK = "vllm-bench-serve-gb10-dgx-spark-nemotron-reasoning-percentiles.txt"  # TPOT p99 175 ms, 200 tok/s
LAUNCH = ("clustereval-node: n1 vllm=yes gpus=8\nclustereval-node: n2 vllm=yes gpus=8\n"
          "clustereval-launch: nodes=2 gpus_per_node=8 tensor_parallel=8 pipeline_parallel=2 launcher=mpirun "
          "endpoint=10.0.0.1:29600\n")


def sweep(*blocks: tuple[int, str], ready: str = "server-ready: 42") -> str:
    return ready + "\n" + "".join(f"=== concurrency {c}\n{text}\n" for c, text in blocks)


def record(stdout: str, host: str = "n1", nodes: list[str] | None = None, **extra) -> dict:
    name = "vllm_bench_nodes" if nodes else "vllm_bench_sweep"
    return {"name": name, "cmd": name, "rc": 0, "stdout": stdout, "stderr": "", "timed_out": False, "timeout": 3600,
            "parser": "probe-inference", "artifact": f"raw/{host}/{name.replace('_', '-')}.txt",
            "params": {"nodes": nodes} if nodes else {}, **extra}


def judge(check_id: str, host_probes: dict, **options) -> list[dict]:
    ctx = Context(subject="_cluster", host_probes=host_probes, options=options)
    return judge_many(check_id, ctx)


def on_n1(stdout: str, **extra) -> dict:
    return {"n1": {"vllm_bench_sweep": record(stdout, **extra)}}


def test_the_probe_output_is_read_per_concurrency():
    data = parsers.parse("probe-inference", sweep((4, read_corpus("vllm-bench", MI355)), (8, "garbage")))
    assert data["server_ready_s"] == 42 and data["runs"][0]["result"]["ttft_p99_ms"] == 522.23
    assert "error" in data["runs"][1]


def test_latency_and_requests_on_real_blocks():
    probes = on_n1(sweep((4, read_corpus("vllm-bench", MI355)), (50, read_corpus("vllm-bench", SPARK))))
    ttft = judge("inference.vllm.ttft", probes)
    assert [v["status"] for v in ttft] == ["pass", "pass"] and ttft[0]["subject"] == "n1"
    assert ttft[0]["params"] == {"concurrency": 4, "nodes": 1}
    tpot = {v["params"]["concurrency"]: v for v in judge("inference.vllm.tpot", probes)}
    assert tpot[4]["status"] == "pass" and tpot[50]["status"] == "warn"  # 175 ms per token: slower than a reader
    assert {v["status"] for v in judge("inference.vllm.requests", probes)} == {"pass"}
    scaling = judge("inference.vllm.scaling", probes)[0]
    assert scaling["status"] == "fail" and "throughput falls as load grows" in scaling["summary"]  # 1122 -> 200 tok/s
    assert scaling["series"][0]["path"] == "series/n1/vllm-bench.csv"


def test_the_serve_over_nodes_is_judged_for_the_node_set_beside_each_node():
    block = read_corpus("vllm-bench", MI355)
    probes = {"n1": {"vllm_bench_sweep": record(sweep((4, block))),
                     "vllm_bench_nodes": record(LAUNCH + sweep((4, block), (8, block)), nodes=["n1", "n2"])},
              "n2": {"vllm_bench_sweep": record(sweep((4, block)), host="n2")}}
    ttft = judge("inference.vllm.ttft", probes, across_nodes=True)
    assert [(v["subject"], v["params"]) for v in ttft] == [
        ("n1", {"concurrency": 4, "nodes": 1}), ("n1+n2", {"concurrency": 4, "nodes": 2}),
        ("n1+n2", {"concurrency": 8, "nodes": 2}), ("n2", {"concurrency": 4, "nodes": 1})]
    over = [v for v in ttft if v["subject"] == "n1+n2"]
    assert all(v["status"] == "pass" and v["summary"].startswith("the serve over n1+n2: ") for v in over)
    assert over[0]["artifacts"] == ["raw/n1/vllm-bench-nodes.txt"]
    scaling = next(v for v in judge("inference.vllm.scaling", probes, across_nodes=True) if v["subject"] == "n1+n2")
    assert scaling["status"] == "pass" and scaling["evidence"]["launch"]["pipeline_parallel"] == 2
    assert scaling["series"][0]["path"] == "series/n1+n2/vllm-bench.csv"


def test_failed_requests_and_slow_first_tokens_fail():
    block = read_corpus("vllm-bench", SPARK).replace("Failed requests:                         0",
                                                      "Failed requests:                         7")
    assert judge("inference.vllm.requests", on_n1(sweep((50, block))))[0]["status"] == "fail"
    slow = read_corpus("vllm-bench", MI355).replace("P99 TTFT (ms):                           522.23",
                                                     "P99 TTFT (ms):                           15000.00")
    assert judge("inference.vllm.ttft", on_n1(sweep((4, slow))))[0]["status"] == "fail"
    over = {"n1": {"vllm_bench_nodes": record(LAUNCH + sweep((4, slow)), nodes=["n1", "n2"])}, "n2": {}}
    verdict = judge("inference.vllm.ttft", over, across_nodes=True)[0]
    assert verdict["status"] == "fail" and verdict["subject"] == "n1+n2"


@pytest.mark.parametrize("check_id", CHECKS)
def test_the_probes_reason_is_the_skip_on_every_node_and_for_the_serve_over_nodes(check_id):
    skipped = "clustereval-skip: vLLM is not installed for python3 (set clustereval_inference_venv)\n"
    over = "clustereval-node: n1 vllm=no\nclustereval-node: n2 vllm=no\nclustereval-skip: vLLM is not installed " \
           "for python3 on n1 n2 (set clustereval_inference_venv to an environment every node has)\n"
    probes = {"n1": {"vllm_bench_sweep": record(skipped), "vllm_bench_nodes": record(over, nodes=["n1", "n2"])},
              "n2": {"vllm_bench_sweep": record(skipped, host="n2")}}
    results = judge(check_id, probes, across_nodes=True)
    assert [(v["subject"], v["status"]) for v in results] == [("n1", "skip"), ("n1+n2", "skip"), ("n2", "skip")]
    assert all("vLLM is not installed" in v["summary"] for v in results)


def test_a_serve_over_nodes_on_one_node_skips_and_one_that_left_nothing_is_an_error():
    one_node = judge("inference.vllm.requests", on_n1("clustereval-skip: no model to serve\n"), across_nodes=True)
    assert [(v["subject"], v["status"]) for v in one_node] == [("n1", "skip"), ("_cluster", "skip")]
    assert "needs two or more nodes" in one_node[1]["summary"]
    lost = judge("inference.vllm.requests", {"n1": {}, "n2": {}}, across_nodes=True, launch_host="n1")
    assert [(v["subject"], v["status"]) for v in lost] == [("n1+n2", "error")]
    assert judge("inference.vllm.requests", {})[0]["status"] == "skip"


def test_a_dead_server_a_cut_block_a_launcher_short_of_nodes_and_a_timeout_are_errors():
    dead = "server-failed: not answering after 600 s: CUDA out of memory\n"
    assert judge("inference.vllm.requests", on_n1(dead))[0]["status"] == "error"
    cut = sweep((4, "============ Serving Benchmark Result ============\nSuccessful requests: 3\n"))
    assert judge("inference.vllm.requests", on_n1(cut))[0]["status"] == "error"
    short = {"n1": {"vllm_bench_nodes": record("clustereval-node: n1 vllm=yes gpus=8\nclustereval-error: mpirun "
                                               "reached 1 of 2 nodes from n1 (exit status 1): ssh refused\n",
                                               nodes=["n1", "n2"])}, "n2": {}}
    verdict = judge("inference.vllm.ttft", short, across_nodes=True)[0]
    assert verdict["status"] == "error" and "reached 1 of 2" in verdict["summary"]
    timed_out = judge("inference.vllm.tpot", on_n1(sweep((4, read_corpus("vllm-bench", MI355))), timed_out=True))[0]
    assert timed_out["status"] == "error" and "did not finish within 3600" in timed_out["summary"]
    one = judge("inference.vllm.scaling", on_n1(sweep((4, read_corpus("vllm-bench", MI355)))))[0]
    assert one["status"] == "skip"
