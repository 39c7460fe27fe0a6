"""The training and inference probes' own lines around torchtitan's log and vLLM's result blocks (the corpus
captures): what each line becomes, and any damage gives a result or a ParseError, nothing else."""

from __future__ import annotations

import json
import random

import pytest

from clustereval import parsers
from clustereval.parsers import _mutate, parse
from clustereval.parsers._common import clean
from tests.conftest import read_corpus

LLAMA = "titan-rank0-llama3-8b-8gpu-steps-1-30.log"
MI355 = "benchmark-serving-mi355x-gpt-oss-120b-concurrency4-e2el.txt"
PREFLIGHT = ("clustereval-node: n1 torchtitan=yes config=ok gpus=8\n"
             "clustereval-node: n2 torchtitan=yes config=ok gpus=8\n")
LAUNCH = "clustereval-launch: nodes=2 gpus_per_node=8 world_size=16 launcher=mpirun endpoint=10.0.0.1:29400\n"


def training_sample() -> str:
    return PREFLIGHT + LAUNCH + read_corpus("torchtitan", LLAMA)


def inference_sample() -> str:
    return ("clustereval-node: n1 vllm=yes gpus=8\nclustereval-node: n2 vllm=yes gpus=8\n"
            "clustereval-launch: nodes=2 gpus_per_node=8 tensor_parallel=8 pipeline_parallel=2 launcher=mpirun "
            "endpoint=10.0.0.1:29600\nserver-ready: 240\n=== concurrency 4\n" + read_corpus("vllm-bench", MI355))


def test_a_run_over_nodes_gives_its_preflight_its_launch_and_the_log():
    out = parse("probe-training", training_sample())
    assert out["nodes"] == [{"host": "n1", "torchtitan": "yes", "config": "ok", "gpus": 8},
                            {"host": "n2", "torchtitan": "yes", "config": "ok", "gpus": 8}]
    assert out["launch"] == {"nodes": 2, "gpus_per_node": 8, "world_size": 16, "launcher": "mpirun",
                             "endpoint": "10.0.0.1:29400"}
    assert out["log"]["summary"]["last_step"] == 30 and out["skip"] is None and out["error"] is None
    assert out["complete"] is True


def test_a_skip_an_error_and_a_run_that_logged_no_step():
    assert parse("probe-training", "clustereval-skip: torchtitan is not installed for python3 on n1\n")["skip"] \
        == "torchtitan is not installed for python3 on n1"
    error = parse("probe-training", PREFLIGHT + "clustereval-error: mpirun reached 1 of 2 nodes\n")
    assert error["error"] == "mpirun reached 1 of 2 nodes" and error["log"] is None
    died = parse("probe-training", LAUNCH + "Traceback (most recent call last):\nRuntimeError: NCCL error in: x\n")
    assert died["log"] is None and "no torchtitan" in died["log_error"]
    assert died["distributed_failures"] == ["RuntimeError: NCCL error in: x"] and len(died["failures"]) == 2
    assert died["tail"][-1] == "RuntimeError: NCCL error in: x"
    with pytest.raises(parsers.ParseError):
        parse("probe-training", "")


def test_the_serve_over_nodes_gives_its_launch_and_each_block():
    out = parse("probe-inference", inference_sample())
    assert out["launch"]["pipeline_parallel"] == 2 and [n["host"] for n in out["nodes"]] == ["n1", "n2"]
    assert out["server_ready_s"] == 240 and out["runs"][0]["result"]["ttft_p99_ms"] == 522.23
    refused = parse("probe-inference", "clustereval-error: srun reached 0 of 2 nodes from n1\n")
    assert refused["error"] == "srun reached 0 of 2 nodes from n1" and refused["runs"] == []


def _outcome(tool: str, data: bytes) -> dict | None:
    try:
        result = parsers.get(tool)(clean(data))
    except parsers.ParseError as exc:
        assert str(exc).strip()
        return None
    json.dumps(result, allow_nan=False)
    return result


@pytest.mark.parametrize("tool,sample", [("probe-training", training_sample), ("probe-inference", inference_sample)])
@pytest.mark.parametrize("mutation", sorted(_mutate.MUTATIONS))
def test_damaged_output_gives_a_result_or_a_parse_error(tool, sample, mutation):
    for seed in range(3):
        _outcome(tool, _mutate.MUTATIONS[mutation](sample().encode(), random.Random(seed)))


@pytest.mark.parametrize("tool,sample", [("probe-training", training_sample), ("probe-inference", inference_sample)])
def test_every_cut_gives_a_result_or_a_parse_error(tool, sample):
    data = sample().encode()
    for cut in range(0, len(data) + 1, 7):
        _outcome(tool, data[:cut])
