"""Training checks on real torchtitan logs (the shared corpus) and on logs built to show each finding, judged once
for the cluster as the role does: runs on each node alone (subject the node) and runs over nodes (subject the node
set), each its own variant; pass, warn, fail, skip (the probe's own reason on every node, no reference, a run over
nodes on one node) and error (the harness: a timeout, an unreadable log, a launcher that reached too few nodes)."""

from __future__ import annotations

import re

import pytest

from clustereval.checks import Context
from tests.conftest import read_corpus
from tests.helpers import judge_many

CHECKS = ("training.torchtitan.run", "training.torchtitan.tps", "training.torchtitan.mfu",
          "training.torchtitan.stability", "training.torchtitan.loss", "training.torchtitan.scaling")
NODE_CHECKS = CHECKS[:-1]
H100 = {"gpu_model": "NVIDIA H100 80GB HBM3"}
LLAMA = "titan-rank0-llama3-8b-8gpu-steps-1-30.log"
HANG = "ezpz-torchtitan-steps-then-HANG-watchdog-sigterm.log"


def launch(nodes: int = 1, gpus: int = 8) -> str:
    launcher = "standalone" if nodes == 1 else "mpirun"
    return f"clustereval-launch: nodes={nodes} gpus_per_node={gpus} world_size={nodes * gpus} launcher={launcher}\n"


def record(run: str, stdout: str, nodes: list[str], rc: int = 0, model: str = "llama3-8b", steps: int = 30,
           **extra) -> dict:
    probe = "torchtitan_train_nodes" if len(nodes) > 1 else "torchtitan_train"
    return {"name": f"{probe}@{run}", "probe": probe, "cmd": probe, "rc": rc, "stdout": stdout, "stderr": "",
            "timed_out": False, "parser": "probe-training", "timeout": 1800,
            "artifact": f"raw/{nodes[0]}/{probe.replace('_', '-')}-{run}.log",
            "params": {"run": run, "model": model, "steps": steps, "nodes": nodes}, **extra}


def kept(*records: dict, hosts: tuple[str, ...] = ("n1", "n2")) -> dict:
    """``host_probes`` as the judge loads them: each record on the node that ran (or launched) it."""
    out: dict = {h: {} for h in hosts}
    for rec in records:
        out[rec["params"]["nodes"][0]][rec["name"]] = rec
    return out


def judge(check_id: str, host_probes: dict, facts: dict | None = None, **options) -> list[dict]:
    ctx = Context(subject="_cluster", host_probes=host_probes,
                  host_facts={h: dict(H100 if facts is None else facts) for h in host_probes}, options=options)
    return judge_many(check_id, ctx)


def one(check_id: str, host_probes: dict, **kwargs) -> dict:
    results = judge(check_id, host_probes, **kwargs)
    assert len(results) == 1, results
    return results[0]


def log(steps: list[tuple[int, float, float, float]], end: str = "Training completed", rank: int = 0) -> str:
    lines = [f"[rank{rank}]:[titan] 2026-12-01 10:00:{i:02d},000 - root - INFO - step: {step:2d}  loss: {loss:.4f}  "
             f"memory: 30.99GiB(32.62%)  tps: {tps:,.0f}  tflops: 400.0  mfu: {mfu:.2f}%"
             for i, (step, loss, tps, mfu) in enumerate(steps)]
    return "\n".join([*lines, f"[rank{rank}]:[titan] 2026-12-01 10:01:00,000 - root - INFO - {end}"]) + "\n"


def corpus_run(scale: float = 1.0, rank: int = 0) -> str:
    """The corpus Llama 3.1 8B log (rank 0 of 8 H100), its tokens/s scaled, as rank ``rank`` logs it."""
    def scaled(match: re.Match) -> str:
        return f"tps: {float(match.group(1).replace(',', '')) * scale:,.0f}"
    text = re.sub(r"tps: ([\d,]+)", scaled, read_corpus("torchtitan", LLAMA))
    return text.replace("[rank0]", f"[rank{rank}]") + f"[rank{rank}]:[titan] - root - INFO - Training completed\n"


def test_the_corpus_run_on_h100_is_healthy_on_each_node_with_its_own_subject_and_variant():
    probes = kept(record("llama3-8b", launch() + corpus_run(), ["n1"]),
                  record("llama3-8b", launch() + corpus_run(), ["n2"]))
    runs = judge("training.torchtitan.run", probes)
    assert [(r["subject"], r["status"]) for r in runs] == [("n1", "pass"), ("n2", "pass")]
    assert runs[0]["params"] == {"run": "llama3-8b", "model": "llama3-8b", "steps": 30, "nodes": 1}
    assert runs[0]["artifacts"] == ["raw/n1/torchtitan-train-llama3-8b.log"]
    tps = judge("training.torchtitan.tps", probes)[0]
    assert tps["status"] == "pass" and tps["value"] == pytest.approx(7023.33, abs=1) and tps["expected"]["min"] == 6000
    assert tps["evidence"]["world_size"] == 8 and tps["evidence"]["cluster_tok_per_s"] == pytest.approx(56186.7, abs=1)
    assert {r["status"] for r in judge("training.torchtitan.mfu", probes)} == {"pass"}
    assert {r["status"] for r in judge("training.torchtitan.loss", probes)} == {"pass"}
    stability = judge("training.torchtitan.stability", probes)[0]
    assert stability["status"] == "pass"  # three steady steps
    assert stability["series"][0]["path"] == "series/n1/torchtitan-llama3-8b.csv"
    assert one("training.torchtitan.scaling", probes)["status"] == "skip"  # no run over nodes


def test_a_run_over_nodes_reads_rank_zero_and_is_judged_for_the_node_set_against_the_nodes_alone():
    alone = [record("llama3-8b", launch() + corpus_run(), [h]) for h in ("n1", "n2")]
    # mpirun brings every node's first rank back to the launching node: rank 0's steps are the run's
    over = record("llama3-8b-nodes", launch(2) + corpus_run(0.97) + corpus_run(0.5, rank=8), ["n1", "n2"])
    probes = kept(*alone, over)
    tps = next(r for r in judge("training.torchtitan.tps", probes) if r["subject"] == "n1+n2")
    assert tps["status"] == "pass" and tps["params"]["nodes"] == 2 and tps["value"] == pytest.approx(6812, abs=2)
    assert tps["evidence"]["world_size"] == 16 and "over 16 GPUs" in tps["summary"]
    scaling = one("training.torchtitan.scaling", probes)
    assert scaling["status"] == "pass" and scaling["subject"] == "n1+n2"
    assert scaling["value"] == pytest.approx(0.97, 0.01)
    assert scaling["evidence"]["single_node_tps"] == {h: pytest.approx(7023.3, 0.1) for h in ("n1", "n2")}
    slow = kept(*alone, record("llama3-8b-nodes", launch(2) + corpus_run(0.8), ["n1", "n2"]))
    verdict = one("training.torchtitan.scaling", slow)
    assert verdict["status"] == "warn" and "drops across nodes" in verdict["summary"]
    crawling = kept(*alone, record("llama3-8b-nodes", launch(2) + corpus_run(0.6), ["n1", "n2"]))
    assert one("training.torchtitan.scaling", crawling)["status"] == "fail"
    other_model = kept(*alone, record("gpt-oss", launch(2) + corpus_run(), ["n1", "n2"], model="gpt-oss-20b"))
    assert one("training.torchtitan.scaling", other_model)["status"] == "skip"


def test_a_run_that_hangs_and_is_killed_fails_and_a_log_without_the_end_warns():
    hung = one("training.torchtitan.run", kept(record("r", read_corpus("torchtitan", HANG), ["n1"]), hosts=("n1",)))
    assert hung["status"] == "fail" and "died at step 37" in hung["summary"] and "Watchdog" in hung["summary"]
    unfinished = log([(1, 12.0, 300, 2), (10, 10.0, 7000, 41), (20, 9.0, 7000, 41)], end="saving checkpoint")
    assert one("training.torchtitan.run", kept(record("r", unfinished, ["n1"]), hosts=("n1",)))["status"] == "warn"
    died = log([(1, 12.0, 300, 2), (10, 10.0, 7000, 41)], end="x")
    assert one("training.torchtitan.run", kept(record("r", died, ["n1"], rc=1), hosts=("n1",)))["status"] == "fail"
    out_of_data = log([(1, 12.0, 300, 2), (10, 10.0, 7000, 41)]).replace(
        "Training completed", "Ran out of data; last step was canceled.\n[rank0]: Training completed")
    verdict = one("training.torchtitan.run", kept(record("r", out_of_data, ["n1"]), hosts=("n1",)))
    assert verdict["status"] == "error" and "data ran out at step 10 of 30" in verdict["summary"]


def test_throughput_and_mfu_below_the_reference():
    def on_one(text, **kwargs):
        return kept(record("r", text, ["n1"], **kwargs), hosts=("n1",))
    slow = log([(1, 12.0, 300, 2), (10, 10.0, 5000, 30), (20, 9.0, 5000, 30), (30, 8.5, 5000, 30)])
    assert one("training.torchtitan.tps", on_one(slow))["status"] == "warn"
    assert one("training.torchtitan.mfu", on_one(slow))["status"] == "warn"
    crawling = log([(1, 12.0, 300, 2), (10, 10.0, 3000, 15), (20, 9.0, 3000, 15)])
    assert one("training.torchtitan.tps", on_one(crawling))["status"] == "fail"
    assert one("training.torchtitan.mfu", on_one(crawling))["status"] == "fail"
    other = one("training.torchtitan.tps", on_one(slow), facts={"gpu_model": "NVIDIA A100-SXM4-80GB"})
    assert other["status"] == "skip" and "tokens/s per GPU 5000" in other["summary"]
    overridden = one("training.torchtitan.tps", on_one(slow),
                     baseline_overrides={"training.torchtitan.tps": {"warn": 4000, "fail": 3000}})
    assert overridden["status"] == "pass" and "inventory override" in overridden["expected"]["source"]


def test_a_moe_run_with_expert_parallelism_is_held_to_the_moe_mfu_and_has_no_tokens_reference_yet():
    def moe(mfu):
        text = log([(1, 12.2, 200, 1), (10, 11.0, 2600, mfu), (20, 10.4, 2650, mfu), (30, 10.0, 2620, mfu)])
        return kept(record("gpt-oss-20b-ep8", launch(2) + text, ["n1", "n2"], model="gpt-oss-20b"))
    healthy = one("training.torchtitan.mfu", moe(9.0))
    assert healthy["status"] == "pass" and healthy["expected"]["matched"] == "moe-ep-hopper-blackwell"
    assert healthy["subject"] == "n1+n2" and healthy["params"]["model"] == "gpt-oss-20b"
    assert one("training.torchtitan.mfu", moe(5.0))["status"] == "warn"
    assert one("training.torchtitan.mfu", moe(3.0))["status"] == "fail"
    tps = one("training.torchtitan.tps", moe(9.0))
    assert tps["status"] == "skip" and "model=gpt-oss-20b" in tps["summary"]
    # with FP8 or MX on, torchtitan prints "mfu: N/A": no MFU to judge, and the check says why
    quantised = log([(1, 12.2, 200, 1), (10, 11.0, 2600, 9), (20, 10.4, 2650, 9)]).replace("mfu: 9.00%", "mfu: N/A")
    na = one("training.torchtitan.mfu", kept(record("q", quantised, ["n1"], model="gpt-oss-20b"), hosts=("n1",)))
    assert na["status"] == "skip" and "N/A" in na["summary"]


def test_unstable_steps_and_a_loss_that_does_not_go_down():
    def check(check_id, text):
        return one(check_id, kept(record("r", text, ["n1"]), hosts=("n1",)))["status"]
    jittery = log([(1, 12.0, 300, 2), (2, 11.0, 7000, 41), (3, 10.0, 4000, 25), (4, 9.5, 7000, 41),
                   (5, 9.0, 3500, 20)])
    assert check("training.torchtitan.stability", jittery) == "fail"
    wobbly = log([(1, 12.0, 300, 2), (2, 11.0, 7000, 41), (3, 10.0, 6000, 36), (4, 9.5, 7000, 41),
                  (5, 9.0, 6200, 37)])
    assert check("training.torchtitan.stability", wobbly) == "warn"
    assert check("training.torchtitan.stability", log([(1, 12.0, 300, 2), (2, 11.0, 7000, 41)])) == "skip"
    assert check("training.torchtitan.loss", log([(1, 12.0, 300, 2), (10, 11.8, 7000, 41), (20, 11.7, 7000, 41)])) \
        == "warn"
    assert check("training.torchtitan.loss", log([(1, 12.0, 300, 2), (10, 12.5, 7000, 41), (20, 13.0, 7000, 41)])) \
        == "fail"
    assert check("training.torchtitan.loss", log([(1, 12.0, 300, 2), (10, float("nan"), 7000, 41)])) == "fail"


def test_pipeline_parallel_ranks_outside_the_last_stage_do_not_stand_for_the_loss():
    # rank 0 (first stage) logs the loss as -1; rank 8 (last stage) logs the real one
    first_stage = log([(1, -1.0, 300, 2), (10, -1.0, 7000, 41), (20, -1.0, 7000, 41)])
    last_stage = log([(1, 12.0, 300, 2), (10, 10.0, 7000, 41), (20, 9.0, 7000, 41)], rank=8)
    probes = kept(record("pp", launch(2) + first_stage + last_stage, ["n1", "n2"]))
    assert one("training.torchtitan.loss", probes)["status"] == "pass"


@pytest.mark.parametrize("check_id", NODE_CHECKS)
def test_the_probes_own_reason_is_the_skip_on_every_node_and_for_a_run_over_nodes(check_id):
    reason = "clustereval-skip: PyTorch sees no CUDA GPU on {}: torchtitan pretraining needs GPUs\n"
    probes = kept(record("llama3-8b", reason.format("n1"), ["n1"]), record("llama3-8b", reason.format("n2"), ["n2"]),
                  record("moe", reason.format("n1 n2"), ["n1", "n2"]))
    results = judge(check_id, probes)
    assert [(r["subject"], r["status"]) for r in results] == [("n1", "skip"), ("n2", "skip"), ("n1+n2", "skip")]
    assert all("no CUDA GPU" in r["summary"] for r in results)


def test_the_harness_failing_is_an_error_never_the_clusters():
    def verdict(rec):
        return one("training.torchtitan.run", kept(rec, hosts=tuple(rec["params"]["nodes"])))
    usage = verdict(record("r", "error: unrecognized arguments: --module llama3\n", ["n1"], rc=2))
    assert usage["status"] == "error" and "before any step" in usage["summary"] and "unrecognized" in usage["summary"]
    assert verdict(record("r", "no metrics at all\n", ["n1"]))["status"] == "error"
    timed_out = verdict(record("r", launch() + corpus_run(), ["n1"], timed_out=True))
    assert timed_out["status"] == "error" and "did not finish within 1800" in timed_out["summary"]
    reached = verdict(record("r", "clustereval-node: n1 torchtitan=yes config=ok gpus=8\nclustereval-error: mpirun "
                                  "reached 1 of 2 nodes from n1 (exit status 1): ssh: connect to host n2\n",
                             ["n1", "n2"]))
    assert reached["status"] == "error" and "reached 1 of 2" in reached["summary"]
    assert verdict(record("r", "", ["n1"]))["status"] == "error"


def test_a_run_over_nodes_dying_on_the_fabric_before_its_first_step_fails():
    text = launch(2) + ("[rank0]:[titan] - root - INFO - Building device mesh with parallelism: pp=1, dp_replicate=1, "
                        "dp_shard=16, cp=1, tp=1, ep=8\ntorch.distributed.DistNetworkError: failed to connect to "
                        "10.0.0.1:29400 (RendezvousConnectionError)\n")
    verdict = one("training.torchtitan.run", kept(record("moe", text, ["n1", "n2"], rc=1)))
    assert verdict["status"] == "fail" and "before its first step" in verdict["summary"]


def test_a_planned_run_over_nodes_says_why_it_left_nothing():
    runs = [{"name": "llama3-8b", "model": "llama3-8b", "nodes": 1}, {"name": "moe", "model": "gpt-oss-20b",
                                                                      "nodes": "all", "steps": 30}]
    alone = judge("training.torchtitan.run", kept(record("llama3-8b", launch() + corpus_run(), ["n1"]), hosts=("n1",)),
                  runs=runs)
    assert [(r["subject"], r["status"]) for r in alone] == [("n1", "pass"), ("_cluster", "skip")]
    assert "needs two or more nodes" in alone[1]["summary"] and alone[1]["params"]["run"] == "moe"
    lost = judge("training.torchtitan.tps", kept(), runs=[*runs[:1], {**runs[1], "steps": None}], launch_host="n1",
                 steps=25)
    assert [(r["subject"], r["status"], r["params"]["steps"]) for r in lost] == [("n1+n2", "error", 25)]
    assert "n1, which launches the run over nodes, kept no output" in lost[0]["summary"]
    assert one("training.torchtitan.scaling", kept(), runs=runs, launch_host="n1")["status"] == "error"
    assert one("training.torchtitan.run", {})["status"] == "skip"
