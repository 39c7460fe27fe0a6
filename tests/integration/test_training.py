"""The training and inference roles through the same path as on a GPU cluster: on two simulated nodes (no GPU, no
torchtitan, no vLLM) every check of theirs is a skip naming the reason, on every node for the runs on one node and
for the node set for the runs over nodes, whose launcher (the simulated nodes' real Open MPI) asked every node
first.

Needs root and Debian's slurm-wlm, munge and openssh-server (``make install``).
"""

from __future__ import annotations

from pathlib import Path

from tests.integration.simrun import REQUIRES_SIM, load_result_list, run_playbook, simulated_cluster

pytestmark = REQUIRES_SIM

TRAINING = {"training.torchtitan.run", "training.torchtitan.tps", "training.torchtitan.mfu",
            "training.torchtitan.stability", "training.torchtitan.loss", "training.torchtitan.scaling"}
INFERENCE = {"inference.vllm.requests", "inference.vllm.ttft", "inference.vllm.tpot", "inference.vllm.scaling"}


def test_without_torchtitan_or_vllm_every_check_says_why_on_every_node_and_for_the_node_set(tmp_path):
    with simulated_cluster(tmp_path / "sim", 2, "reference") as sim:
        # a model to serve, so the serve over nodes gets as far as asking every node for vLLM
        proc = run_playbook(sim / "inventory.ini", "-e", "clustereval_phases=performance",
                            "--tags", "training,inference", "-e", "clustereval_inference_model=facebook/opt-125m",
                            "-e", f"clustereval_out={tmp_path / 'run'}")
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert sorted(Path("/var/tmp").glob("clustereval-torchtitan-*")) == []  # the role removed the dump folders
    results = load_result_list(tmp_path / "run")
    training = [r for r in results if r["check"].startswith("training.")]
    assert {r["check"] for r in training} == TRAINING
    assert all(r["status"] == "skip" for r in training), [r["summary"] for r in training]
    alone = {(r["check"], r["subject"]): r for r in training if r["params"]["run"] == "llama3-8b"}
    assert set(alone) == {(c, n) for c in TRAINING - {"training.torchtitan.scaling"} for n in ("node1", "node2")}
    for (_, node), result in alone.items():
        assert result["summary"].startswith(f"llama3-8b (llama3-8b) on {node}: torchtitan is not installed for "
                                            f"python3 on {node}"), result["summary"]
        assert result["params"] == {"run": "llama3-8b", "model": "llama3-8b", "steps": 30, "nodes": 1}
    over = [r for r in training if r["params"]["run"] != "llama3-8b"]
    assert {r["params"]["run"] for r in over} == {"llama3-8b-nodes", "gpt-oss-20b-ep8"} and len(over) == 12
    # mpirun reached both nodes and each said what it lacks
    assert all(r["subject"] == "node1+node2" and r["params"]["nodes"] == 2
               and "torchtitan is not installed for python3 on node1 node2" in r["summary"] for r in over), \
        [r["summary"] for r in over]
    inference = [r for r in results if r["check"].startswith("inference.")]
    assert {r["check"] for r in inference} == INFERENCE and all(r["status"] == "skip" for r in inference)
    assert {r["subject"] for r in inference} == {"node1", "node2", "node1+node2"}
    assert all(f"vLLM is not installed for python3 on {r['subject'].replace('+', ' ')} " in r["summary"]
               for r in inference), [r["summary"] for r in inference]
