"""The training and inference roles through the same path as on a GPU cluster: on the simulated nodes (no GPU, no
torchtitan, no vLLM) every check of theirs is a skip naming the reason.

Needs root and Debian's slurm-wlm, munge and openssh-server (``make install``).
"""

from __future__ import annotations

from tests.integration.simrun import REQUIRES_SIM, load_result_list, run_playbook, simulated_cluster

pytestmark = REQUIRES_SIM


def test_without_torchtitan_every_training_check_says_why(tmp_path):
    with simulated_cluster(tmp_path / "sim", 1, "reference") as sim:
        proc = run_playbook(sim / "inventory.ini", "-e", "clustereval_phases=performance",
                            "--tags", "training,inference", "-e", f"clustereval_out={tmp_path / 'run'}")
    assert proc.returncode == 0, proc.stdout[-3000:]
    training = [r for r in load_result_list(tmp_path / "run") if r["check"].startswith("training.")]
    assert {r["check"] for r in training} == {"training.torchtitan.run", "training.torchtitan.tps",
                                              "training.torchtitan.mfu", "training.torchtitan.stability",
                                              "training.torchtitan.loss"}
    assert all(r["status"] == "skip" and "torchtitan is not installed" in r["summary"] for r in training), \
        [r["summary"] for r in training]
    assert all(r["params"] == {"model": "llama3-8b", "steps": 30} for r in training)
    inference = [r for r in load_result_list(tmp_path / "run") if r["check"].startswith("inference.")]
    assert {r["check"] for r in inference} == {"inference.vllm.requests", "inference.vllm.ttft",
                                               "inference.vllm.tpot", "inference.vllm.scaling"}
    assert all(r["status"] == "skip" and "vLLM is not installed" in r["summary"] for r in inference)
