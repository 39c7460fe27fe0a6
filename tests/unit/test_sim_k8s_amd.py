"""AMD Instinct nodes under the simulated Kubernetes API (profiles k8s-amd, k8s-amd-faults): the Node objects
(labels of the AMD GPU Operator's NFD rule and node labeller, the ROCm device plugin's amd.com/gpu), the AMD GPU
Operator's workloads and DeviceConfig, read through the kubectl shim as ``clustereval sim up`` lays it out, the
audit's Kubernetes checks on them, and the drill's GPU test pod on an AMD node."""

from __future__ import annotations

import json

import pytest

from clustereval.drills import commands
from clustereval.sim.overlays import Tree, k8s
from clustereval.sim.profile import ProfileError, load_profile, node_settings, render_node
from tests.unit.test_sim_k8s_isolation import kubectl_json
from tests.unit.test_sim_kubectl import sh, sim_cluster, verdicts


@pytest.fixture(scope="module")
def healthy(tmp_path_factory):
    return sim_cluster(tmp_path_factory.mktemp("k8s-amd"), "k8s-amd", nodes=4)


@pytest.fixture(scope="module")
def flawed(tmp_path_factory):
    return sim_cluster(tmp_path_factory.mktemp("k8s-amd-faults"), "k8s-amd-faults", nodes=4)


def node_of(profile: str, name: str, **k8s_keys):
    prof = load_profile(profile)
    settings = node_settings(prof, name)
    settings["k8s"] = {**settings["k8s"], **k8s_keys}
    return k8s.node_object(settings, render_node(prof, name))


def test_an_amd_node_is_labelled_as_the_operators_nfd_rule_and_node_labeller_label_it():
    obj = node_of("k8s-amd", "node1")
    labels = obj["metadata"]["labels"]
    assert labels["feature.node.kubernetes.io/amd-gpu"] == "true"
    assert labels["feature.node.kubernetes.io/amd-gpu-mi300x"] == "true"
    expected = {"product-name": "AMD_Instinct_MI300X", "device-id": "74a1", "family": "AI", "vram": "192G",
                "cu-count": "304", "simd-count": "1216"}
    for kind, value in expected.items():
        assert labels[f"amd.com/gpu.{kind}"] == value and labels[f"beta.amd.com/gpu.{kind}"] == value
        assert labels[f"beta.amd.com/gpu.{kind}.{value}"] == "8"  # the labeller's per-value device count
    assert labels["amd.com/gpu.driver-version"] == "6.14.14"
    assert labels["amd.com/gpu.compute-memory-partition"] == "spx_nps1"
    assert labels["amd.com/gpu.compute-partitioning-supported"] == "true"
    assert labels["amd.com/gpu.memory-partitioning-supported"] == "true"
    # nothing NVIDIA: no GPU Feature Discovery labels, no nvidia.com/gpu
    assert not [k for k in labels if k.startswith("nvidia.com/") or "pci-10de" in k]
    assert obj["status"]["capacity"]["amd.com/gpu"] == obj["status"]["allocatable"]["amd.com/gpu"] == "8"
    assert "nvidia.com/gpu" not in obj["status"]["capacity"]
    assert "taints" not in obj["spec"]  # the AMD GPU Operator sets no GPU taint


def test_cpx_counts_every_partition_and_mixed_naming_names_the_mode():
    obj = node_of("k8s-amd-faults", "node3")
    labels = obj["metadata"]["labels"]
    assert labels["amd.com/gpu.compute-memory-partition"] == "cpx_nps4"
    assert (labels["amd.com/gpu.vram"], labels["amd.com/gpu.cu-count"]) == ("48G", "38")
    assert labels["beta.amd.com/gpu.device-id.74a1"] == "64"
    assert obj["status"]["allocatable"]["amd.com/gpu"] == "64"
    mixed = node_of("k8s-amd-faults", "node3", amd_resource_naming="mixed")["status"]["capacity"]
    assert mixed["amd.com/cpx_nps4"] == "64" and "amd.com/gpu" not in mixed
    # the device plugin's pod fails on node2: it advertises none, the labeller still counts its 8 GPUs
    node2 = node_of("k8s-amd-faults", "node2")
    assert node2["status"]["allocatable"]["amd.com/gpu"] == "0"
    assert node2["metadata"]["labels"]["beta.amd.com/gpu.device-id.74a1"] == "8"


def test_an_unknown_resource_naming_strategy_is_refused():
    with pytest.raises(ProfileError, match=r"k8s\.amd_resource_naming must be one of"):
        k8s.validate_settings({"k8s": {"amd_resource_naming": "partitioned"}})


def test_the_api_runs_the_amd_gpu_operator_instead_of_nvidias(healthy):
    daemonsets = {d["metadata"]["name"]: d for d in kubectl_json(healthy, "get daemonsets.apps -A")["items"]}
    for name in ("default-device-plugin", "default-node-labeller", "default-metrics-exporter", "amd-gpu-nfd-worker"):
        assert daemonsets[name]["metadata"]["namespace"] == "kube-amd-gpu"
        assert daemonsets[name]["status"]["numberReady"] == 4, name
    plugin = daemonsets["default-device-plugin"]["spec"]["template"]["spec"]
    assert plugin["nodeSelector"] == {"feature.node.kubernetes.io/amd-gpu": "true"}
    assert plugin["containers"][0]["image"] == "docker.io/rocm/k8s-device-plugin:1.31.0.9"
    assert not {"nvidia-device-plugin-daemonset", "nvidia-dcgm-exporter"} & set(daemonsets)
    deployments = {d["metadata"]["name"] for d in kubectl_json(healthy, "get deployments.apps -A")["items"]}
    assert {"amd-gpu-operator-controller-manager", "amd-gpu-nfd-master"} <= deployments
    assert "gpu-operator" not in deployments
    (config,) = kubectl_json(healthy, "get deviceconfigs.amd.com -A")["items"]
    assert (config["metadata"]["namespace"], config["metadata"]["name"]) == ("kube-amd-gpu", "default")
    assert config["spec"]["devicePlugin"]["devicePluginArguments"] == {"resource_naming_strategy": "single"}
    assert config["status"]["conditions"][0]["reason"] == "OperatorReady"
    proc = sh(healthy, "kubectl get clusterpolicies.nvidia.com -o json")
    assert proc.returncode == 1 and "doesn't have a resource type" in proc.stderr
    proc = sh(healthy, "kubectl get nodes -o jsonpath='{.items[*].status.allocatable.amd\\.com/gpu}'")
    assert proc.stdout == "8 8 8 8"


def test_the_failed_device_plugin_pod_shows_in_its_daemonset(flawed):
    plugin = next(d for d in kubectl_json(flawed, "get daemonsets.apps -n kube-amd-gpu")["items"]
                  if d["metadata"]["name"] == "default-device-plugin")
    assert (plugin["status"]["desiredNumberScheduled"], plugin["status"]["numberReady"]) == (4, 3)


def test_a_gpu_lost_at_run_time_leaves_allocatable_by_its_partitions(tmp_path):
    env = sim_cluster(tmp_path, "k8s-amd-faults", nodes=4)
    for node, lost in (("node1", [3]), ("node3", [0, 5])):
        runtime = tmp_path / "nodes" / node / "root" / "run" / "runtime.json"
        runtime.parent.mkdir(parents=True, exist_ok=True)
        runtime.write_text(json.dumps({"lost_gpus": lost}))
    nodes = {n["metadata"]["name"]: n["status"] for n in kubectl_json(env, "get nodes")["items"]}
    assert (nodes["node1"]["capacity"]["amd.com/gpu"], nodes["node1"]["allocatable"]["amd.com/gpu"]) == ("8", "7")
    assert nodes["node3"]["allocatable"]["amd.com/gpu"] == "48"  # two CPX GPUs: 16 devices unhealthy


def test_the_audit_passes_k8s_amd_and_fails_the_faults_naming_their_nodes(healthy, flawed):
    results = verdicts(healthy)
    not_passing = {c: r["status"] for c, r in results.items() if r["status"] != "pass"}
    assert not_passing == {"audit.k8s.multinode_nvlink": "skip"}, {c: results[c]["summary"] for c in not_passing}
    assert "32 amd.com/gpu allocatable on 4 nodes (spx_nps1)" in results["audit.k8s.gpu_operator"]["summary"]
    assert results["audit.k8s.monitoring_stack"]["summary"].startswith("device-metrics-exporter ready on all 4")
    results = verdicts(flawed)
    failing = {c: r["summary"] for c, r in results.items() if r["status"] == "fail"}
    assert set(failing) == {"audit.k8s.gpu_operator"}
    assert "advertise no allocatable amd.com/gpu: node2" in failing["audit.k8s.gpu_operator"]
    assert "node3 (cpx_nps4) in another partition mode" in failing["audit.k8s.gpu_operator"]


def test_the_drills_gpu_pod_follows_the_node_vendor():
    amd = json.loads(commands.pod_manifest("node1", "p", "default", commands.K8S_GPU_IMAGES["amd"], "amd"))
    container = amd["spec"]["containers"][0]
    assert container["command"] == ["amd-smi", "list"] and container["resources"] == {"limits": {"amd.com/gpu": 1}}
    assert container["image"] == "docker.io/rocm/dev-ubuntu-24.04:7.0.2"
    nvidia = json.loads(commands.pod_manifest("node1", "p", "default", "img"))["spec"]["containers"][0]
    assert nvidia["command"] == ["nvidia-smi", "-L"] and nvidia["resources"] == {"limits": {"nvidia.com/gpu": 1}}


def test_the_node_file_marks_the_amd_device_plugin_failing():
    prof = load_profile("k8s-amd-faults")
    tree = Tree()
    k8s.render(node_settings(prof, "node2"), render_node(prof, "node2"), tree)
    content, _mode = tree.files[f"{k8s.API_DIR}/node.json"]
    assert json.loads(content)["not_ready"] == ["default-device-plugin"]
