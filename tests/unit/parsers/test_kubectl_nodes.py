"""Tests for the kubectl/oc node parser against the real outputs in the corpus and kubectl fixtures."""

from __future__ import annotations

import json

import pytest

from clustereval.parsers import ParseError, parse
from tests.conftest import corpus_files, read_corpus


@pytest.mark.parametrize("path", corpus_files("kubectl-nodes"), ids=lambda p: p.name)
def test_every_corpus_file(path):
    out = parse("kubectl-nodes", path.read_bytes())
    json.dumps(out)
    assert len(out["nodes"]) == 1
    # the grep-filtered fragment is only part of the label map
    assert out["complete"] is (not path.name.endswith(".txt"))


def _node(name):
    return parse("kubectl-nodes", read_corpus("kubectl-nodes", name))["nodes"][0]


def test_capacity_gpu_counts():
    assert _node("oc-get-node-jq-capacity-nvidia-gpu-1.json")["capacity_gpus"] == 1
    node = _node("oc-get-node-jq-capacity-t4-timeslicing-gpu-8.json")
    assert node["capacity_gpus"] == 8 and node["capacity"]["cpu"] == "4"


def test_mig_mixed_labels():
    node = _node("node-labels-h100-mig-mixed-gfd.json")
    assert node["name"] == "s4124-0073"
    assert node["gpu_product"] == "NVIDIA-H100-80GB-HBM3" and node["gpu_memory_mib"] == 81559
    assert node["mig_strategy"] == "mixed"
    assert node["mig_devices"]["1g.10gb"] == 2 and node["mig_devices"]["2g.20gb"] == 1
    assert node["mig_devices"]["3g.40gb"] == 1


def test_mig_single_labels():
    node = _node("node-labels-h100-mig-single-1g.10gb-gfd.json")
    assert node["mig_strategy"] == "single" and node["mig_config_state"] == "success"
    assert node["gpu_count"] == 1 and node["gpu_replicas"] == 1


def test_grep_fragment_time_slicing():
    text = read_corpus("kubectl-nodes", "oc-get-node-jq-labels-grep-nvidia-t4-shared.txt")
    out = parse("kubectl-nodes", text)
    assert out["format"] == "labels_fragment"
    node = out["nodes"][0]
    assert node["gpu_product"] == "Tesla-T4-SHARED" and node["gpu_replicas"] == 8
    assert node["driver_version"] == "510.73.08" and node["cuda_runtime_version"] == "11.7"
    assert node["gpu_memory_mib"] == 16106127360 // 2**20


def test_text_table():
    text = ("NAME     STATUS                        ROLES           AGE   VERSION\n"
            "cp-1     Ready                         control-plane   40d   v1.29.3\n"
            "gpu-02   Ready,SchedulingDisabled      <none>          12d   v1.29.3\n")
    nodes = parse("kubectl-nodes", text)["nodes"]
    assert [(n["name"], n["status"], n["schedulable"], n["roles"]) for n in nodes] == [
        ("cp-1", "Ready", True, ["control-plane"]), ("gpu-02", "Ready", False, [])]
    assert nodes[0]["version"] == "v1.29.3"


def test_json_list_with_conditions_and_gpus():
    doc = {"apiVersion": "v1", "kind": "List", "items": [{
        "kind": "Node", "metadata": {"name": "gpu-01", "labels": {
            "node-role.kubernetes.io/worker": "", "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}},
        "spec": {"unschedulable": True},
        "status": {"capacity": {"cpu": "96", "nvidia.com/gpu": "8"},
                   "allocatable": {"cpu": "95", "nvidia.com/gpu": "7"},
                   "conditions": [{"type": "Ready", "status": "False"}],
                   "nodeInfo": {"kubeletVersion": "v1.29.3"}}}]}
    (node,) = parse("kubectl-nodes", json.dumps(doc))["nodes"]
    assert node["status"] == "NotReady" and node["ready"] is False and node["schedulable"] is False
    assert node["capacity_gpus"] == 8 and node["allocatable_gpus"] == 7
    assert node["roles"] == ["worker"] and node["version"] == "v1.29.3"


def test_errors():
    with pytest.raises(ParseError, match="empty"):
        parse("kubectl-nodes", "")
    with pytest.raises(ParseError, match="truncated"):
        parse("kubectl-nodes", read_corpus("kubectl-nodes", "node-labels-h100-mig-mixed-gfd.json")[:300])
    with pytest.raises(ParseError, match="not kubectl"):
        parse("kubectl-nodes", "error: You must be logged in to the server (Unauthorized)\n")
