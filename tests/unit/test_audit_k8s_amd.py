"""Kubernetes audit checks on AMD Instinct GPU nodes, every status from kubectl JSON we wrote: nodes labelled as the
AMD GPU Operator's NFD rule and node labeller label them (ROCm/k8s-device-plugin cmd/k8s-node-labeller), advertising
``amd.com/gpu`` as the ROCm device plugin does, and the operator's workloads in ``kube-amd-gpu``
(audit.k8s.gpu_operator, monitoring_stack, gpu_job_attribution). NVIDIA clusters are judged as before
(tests/unit/test_audit_k8s_operators.py)."""

from __future__ import annotations

from clustereval import parsers
from clustereval.checks import Context
from clustereval.checks.audit_k8s import amd_resources, gpu_vendor_of, is_amd_gpu_node, is_gpu_node, list_workloads
from clustereval.results import CLUSTER_SUBJECT
from tests.helpers import judge_many
from tests.unit.k8s_objects import NODE_NAMES, healthy_objects, klist, node, workload
from tests.unit.k8s_probes import status, to_probes

PARTITION = "amd.com/gpu.compute-memory-partition"


def amd_labels(devices=8, mode="spx_nps1", vram="192G", cus=304):
    """What the node labeller (with the partition arguments) and the operator's NFD rule put on an MI300X node."""
    labels = {"feature.node.kubernetes.io/amd-gpu": "true", "feature.node.kubernetes.io/amd-gpu-mi300x": "true",
              "amd.com/gpu.driver-version": "6.14.14", "amd.com/gpu.compute-partitioning-supported": "true",
              "amd.com/gpu.memory-partitioning-supported": "true"}
    for kind, value in (("device-id", "74a1"), ("family", "AI"), ("product-name", "AMD_Instinct_MI300X"),
                        ("vram", vram), ("cu-count", str(cus)), ("simd-count", str(cus * 4))):
        labels.update({f"amd.com/gpu.{kind}": value, f"beta.amd.com/gpu.{kind}": value,
                       f"beta.amd.com/gpu.{kind}.{value}": str(devices)})
    if mode:
        labels[PARTITION] = mode
    return labels


def amd_node(name, gpus=8, devices=None, mode="spx_nps1", capacity=None, resource="amd.com/gpu", labels=None):
    """An AMD MI300X node: ``gpus`` allocatable (``capacity`` in capacity, default the same), ``devices`` counted by
    the labeller (default ``capacity``)."""
    capacity = gpus if capacity is None else capacity
    devices = capacity if devices is None else devices
    vram, cus = ("48G", 38) if mode and mode.startswith("cpx") else ("192G", 304)
    obj = node(name, gpus=None, labels={"network.topology.nvidia.com/block": name[4:5] or "a",
                                        **(labels if labels is not None else amd_labels(devices, mode, vram, cus)),
                                        "feature.node.kubernetes.io/pci-15b3.present": "true"},
               extra_alloc={"rdma/rdma_shared_device_a": "63"})
    if gpus is not None:
        obj["status"]["allocatable"][resource] = str(gpus)
        obj["status"]["capacity"][resource] = str(capacity)
    return obj


def amd_workloads(plugin_ready=4, exporter=True, pod_resources=True, exporter_ready=4):
    """The AMD GPU Operator with its default DeviceConfig's operands (images and names as the operator makes them)."""
    out = [workload("Deployment", "amd-gpu-operator-controller-manager", "kube-amd-gpu",
                    "docker.io/rocm/gpu-operator:v1.4.1"),
           workload("DaemonSet", "default-device-plugin", "kube-amd-gpu", "docker.io/rocm/k8s-device-plugin:1.31.0.9",
                    plugin_ready, 4),
           workload("DaemonSet", "default-node-labeller", "kube-amd-gpu",
                    "docker.io/rocm/k8s-device-plugin:labeller-1.31.0.9", 4, 4)]
    if exporter:
        out.append(workload("DaemonSet", "default-metrics-exporter", "kube-amd-gpu",
                            "docker.io/rocm/device-metrics-exporter:v1.4.0", exporter_ready, 4,
                            env={"METRICS_EXPORTER_PORT": "5000"},
                            host_paths=["/dev", "/sys",
                                        *(["/var/lib/kubelet/pod-resources"] if pod_resources else [])]))
    return out


def amd_objects(nodes=None, **kw):
    """healthy_objects() with AMD nodes and the AMD GPU Operator instead of NVIDIA's (no ClusterPolicy)."""
    objs = healthy_objects()
    objs["nodes"] = nodes or [amd_node(n) for n in NODE_NAMES]
    objs["workloads"] = amd_workloads(**kw) + objs["workloads"][3:]
    objs["clusterpolicies"] = []
    return objs


# ------------------------------------------------------------------ recognising AMD GPU nodes and workloads

def parsed(obj):
    """The node as the checks read it (the kubectl-json parser's item)."""
    return parsers.parse("kubectl-json", klist(obj))["items"][0]


def test_amd_nodes_are_gpu_nodes_by_resource_or_label():
    amd = parsed(amd_node("n1"))
    assert is_gpu_node(amd) and is_amd_gpu_node(amd) and gpu_vendor_of(amd) == "amd"
    # the NFD rule's label alone (the device plugin never registered, no labeller), or the labeller's alone
    assert is_amd_gpu_node(parsed(amd_node("n1", gpus=None, labels={"feature.node.kubernetes.io/amd-gpu": "true"})))
    labeller_only = {"amd.com/gpu.product-name": "AMD_Instinct_MI300X"}
    assert is_amd_gpu_node(parsed(amd_node("n1", gpus=None, labels=labeller_only)))
    # the resource alone, even at 0 (the plugin registered it), or a mixed-strategy partition resource
    assert is_amd_gpu_node(parsed(amd_node("n1", gpus=0, labels={})))
    assert is_amd_gpu_node(parsed(amd_node("n1", gpus=64, resource="amd.com/cpx_nps4", labels={})))
    nvidia = parsed(node("gpu-a01"))
    assert is_gpu_node(nvidia) and not is_amd_gpu_node(nvidia) and gpu_vendor_of(nvidia) == "nvidia"
    assert not is_gpu_node(parsed(node("cpu-1", gpus=None)))
    assert amd_resources({"amd.com/gpu": "8", "amd.com/cpx_nps4": "64", "cpu": "8", "nvidia.com/gpu": "8"}) == 72


def test_rocm_workloads_are_told_apart_from_nvidia_ones():
    ctx = Context(subject=CLUSTER_SUBJECT, probes=to_probes(amd_objects()))
    found = {w["name"]: w["components"] for w in list_workloads(ctx)}
    assert found["amd-gpu-operator-controller-manager"] == ["amd-gpu-operator"]
    assert found["default-device-plugin"] == ["amd-device-plugin"]
    assert found["default-node-labeller"] == ["amd-node-labeller"]
    assert found["default-metrics-exporter"] == ["amd-metrics-exporter"]


# ------------------------------------------------------------------ audit.k8s.gpu_operator

class TestGpuOperatorAmd:
    def test_pass_names_the_operator_the_gpus_and_the_partition_mode(self):
        result = status("audit.k8s.gpu_operator", amd_objects())
        assert result["status"] == "pass", result["summary"]
        assert result["summary"] == ("AMD GPU Operator v1.4.1 ready, its device plugin and node labeller on every "
                                     "node; 32 amd.com/gpu allocatable on 4 nodes (spx_nps1)")
        assert result["value"] == 4 and result["evidence"]["vendor"] == "amd"

    def test_pass_with_a_standalone_device_plugin(self):
        objs = amd_objects()
        objs["workloads"] = [workload("DaemonSet", "amdgpu-device-plugin-daemonset", "kube-system",
                                      "rocm/k8s-device-plugin:1.31.0.9", 4, 4), *objs["workloads"][3:]]
        result = status("audit.k8s.gpu_operator", objs)
        assert result["status"] == "pass" and "via ROCm device plugin daemonset kube-system/amdgpu-device-plugin" \
            in result["summary"] and "(no AMD GPU Operator)" in result["summary"]

    def test_fail_names_the_node_whose_device_plugin_advertises_nothing(self):
        nodes = [amd_node(n) for n in NODE_NAMES]
        nodes[1] = amd_node(NODE_NAMES[1], gpus=0, capacity=0, devices=8)
        result = status("audit.k8s.gpu_operator", amd_objects(nodes, plugin_ready=3))
        assert result["status"] == "fail"
        assert result["summary"] == "1 AMD GPU node(s) advertise no allocatable amd.com/gpu: gpu-a02"
        assert result["value"] == 3 and result["evidence"]["nodes"]["gpu-a02"]["node_labeller"] == 8

    def test_fail_names_the_node_advertising_fewer_gpus_than_it_has(self):
        nodes = [amd_node(n) for n in NODE_NAMES]
        nodes[2] = amd_node(NODE_NAMES[2], gpus=7, capacity=8)  # one device unhealthy for the device plugin
        result = status("audit.k8s.gpu_operator", amd_objects(nodes))
        assert result["status"] == "fail"
        assert "advertise fewer amd.com/gpu than they have devices: gpu-b01 (7 of 8)" in result["summary"]

    def test_the_hosts_facts_count_the_gpus_the_api_does_not_show(self):
        # the labeller and the device plugin both count 7: the host's amd-smi lists 8 physical GPUs
        nodes = [amd_node(n) for n in NODE_NAMES]
        nodes[0] = amd_node(NODE_NAMES[0], gpus=7)
        facts = {n: {"gpu_vendor": "amd", "gpu_count": 8} for n in NODE_NAMES}
        ctx = Context(subject=CLUSTER_SUBJECT, probes=to_probes(amd_objects(nodes)), options={"harness": "k8s"},
                      host_facts=facts)
        (result,) = judge_many("audit.k8s.gpu_operator", ctx)
        assert result["status"] == "fail" and "gpu-a01 (7 of 8)" in result["summary"]
        # in CPX mode a physical GPU is eight devices
        nodes = [amd_node(n, gpus=64, mode="cpx_nps4") for n in NODE_NAMES]
        ctx = Context(subject=CLUSTER_SUBJECT, probes=to_probes(amd_objects(nodes)), options={"harness": "k8s"},
                      host_facts=facts)
        (result,) = judge_many("audit.k8s.gpu_operator", ctx)
        assert result["status"] == "pass" and result["evidence"]["nodes"]["gpu-a01"]["host_facts"] == 64

    def test_fail_names_the_node_in_another_partition_mode(self):
        nodes = [amd_node(n) for n in NODE_NAMES]
        nodes[3] = amd_node(NODE_NAMES[3], gpus=64, mode="cpx_nps4")
        result = status("audit.k8s.gpu_operator", amd_objects(nodes))
        assert result["status"] == "fail"
        assert result["summary"].startswith("gpu-b02 (cpx_nps4) in another partition mode (amd.com/gpu.compute-"
                                            "memory-partition) than the spx_nps1 that 3 of 4 AMD GPU nodes run")
        assert result["evidence"]["partition_modes"]["gpu-b02"] == "cpx_nps4"

    def test_warn_when_partition_modes_split_evenly(self):
        nodes = [amd_node(n) for n in NODE_NAMES[:2]] + [amd_node(n, gpus=64, mode="cpx_nps4") for n in NODE_NAMES[2:]]
        result = status("audit.k8s.gpu_operator", amd_objects(nodes))
        assert result["status"] == "warn"
        assert "none most common: spx_nps1 (gpu-a01, gpu-a02), cpx_nps4 (gpu-b01, gpu-b02)" in result["summary"] or \
            "none most common: cpx_nps4 (gpu-b01, gpu-b02), spx_nps1 (gpu-a01, gpu-a02)" in result["summary"]

    def test_mixed_resource_naming_counts_the_partition_resources(self):
        nodes = [amd_node(n, gpus=64, mode="cpx_nps4", resource="amd.com/cpx_nps4") for n in NODE_NAMES]
        result = status("audit.k8s.gpu_operator", amd_objects(nodes))
        assert result["status"] == "pass" and "256 amd.com/gpu allocatable on 4 nodes (cpx_nps4)" in result["summary"]

    def test_warn_when_the_labeller_misses_a_node_while_gpus_are_advertised(self):
        objs = amd_objects()
        objs["workloads"][2] = workload("DaemonSet", "default-node-labeller", "kube-amd-gpu",
                                        "docker.io/rocm/k8s-device-plugin:labeller-1.31.0.9", 3, 4)
        result = status("audit.k8s.gpu_operator", objs)
        assert result["status"] == "warn" and "default-node-labeller 3/4 ready" in result["summary"]

    def test_skip_without_gpu_nodes(self):
        objs = amd_objects([node(n, gpus=None) for n in NODE_NAMES])
        objs["workloads"] = objs["workloads"][3:]
        assert status("audit.k8s.gpu_operator", objs)["status"] == "skip"

    def test_error_when_the_api_cannot_be_reached(self):
        probes = to_probes(amd_objects())
        probes["k8s_nodes"].update(rc=1, stdout="", stderr="The connection to the server 10.0.0.1:6443 was refused")
        assert judge_many("audit.k8s.gpu_operator", Context(subject=CLUSTER_SUBJECT, probes=probes,
                                                             options={"harness": "k8s"}))[0]["status"] == "error"

    def test_a_cluster_of_both_vendors_keeps_the_worse(self):
        objs = amd_objects([amd_node(n) for n in NODE_NAMES[:2]] + [node(n) for n in NODE_NAMES[2:]])
        nvidia = healthy_objects()["workloads"][:3]
        objs["workloads"] = nvidia + objs["workloads"]
        objs["clusterpolicies"] = healthy_objects()["clusterpolicies"]
        result = status("audit.k8s.gpu_operator", objs)
        assert result["status"] == "pass", result["summary"]
        assert "16 GPUs allocatable on 2 nodes" in result["summary"] and "16 amd.com/gpu allocatable" in \
            result["summary"]
        objs["nodes"][0]["status"]["allocatable"]["amd.com/gpu"] = "0"
        result = status("audit.k8s.gpu_operator", objs)
        assert result["status"] == "fail" and "gpu-a01" in result["summary"]
        assert set(result["evidence"]) == {"nvidia", "amd"}


# ------------------------------------------------------------------ monitoring_stack, gpu_job_attribution

class TestMonitoringAmd:
    def test_pass_with_the_device_metrics_exporter_on_every_node(self):
        result = status("audit.k8s.monitoring_stack", amd_objects())
        assert result["status"] == "pass", result["summary"]
        assert result["summary"].startswith("device-metrics-exporter ready on all 4 GPU nodes")
        assert result["evidence"]["amd_metrics_exporter_ready_nodes"] == 4

    def test_fail_without_the_exporter(self):
        result = status("audit.k8s.monitoring_stack", amd_objects(exporter=False))
        assert result["status"] == "fail" and result["summary"].startswith(
            "no AMD device metrics exporter workload") and "4 AMD GPU node(s)" in result["summary"]

    def test_warn_when_the_exporter_misses_a_node(self):
        result = status("audit.k8s.monitoring_stack", amd_objects(exporter_ready=3))
        assert result["status"] == "warn" and "device-metrics-exporter ready on 3 of 4 GPU nodes" in result["summary"]

    def test_skip_without_gpu_nodes(self):
        objs = amd_objects([node(n, gpus=None) for n in NODE_NAMES])
        assert status("audit.k8s.monitoring_stack", objs)["status"] == "skip"


class TestAttributionAmd:
    def test_pass_with_pod_resources_mounted(self):
        result = status("audit.k8s.gpu_job_attribution", amd_objects())
        assert result["status"] == "pass" and "pod-resources" in result["summary"]

    def test_warn_without_pod_resources(self):
        result = status("audit.k8s.gpu_job_attribution", amd_objects(pod_resources=False))
        assert result["status"] == "warn" and "no /var/lib/kubelet/pod-resources mount" in result["summary"]

    def test_warn_on_fewer_nodes(self):
        result = status("audit.k8s.gpu_job_attribution", amd_objects(exporter_ready=2))
        assert result["status"] == "warn" and "default-metrics-exporter 2/4" in result["summary"]

    def test_fail_without_the_exporter(self):
        result = status("audit.k8s.gpu_job_attribution", amd_objects(exporter=False))
        assert result["status"] == "fail" and "no AMD device metrics exporter" in result["summary"]

    def test_skip_without_gpu_nodes(self):
        objs = amd_objects([node(n, gpus=None) for n in NODE_NAMES])
        assert status("audit.k8s.gpu_job_attribution", objs)["status"] == "skip"
