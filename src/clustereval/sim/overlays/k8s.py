"""A Kubernetes API for the simulated cluster, answered by the ``kubectl`` and ``helm`` shims.

Off unless the profile says ``k8s: {enabled: true}`` (``k8s-reference`` does); the packaged ``reference``
is a Slurm cluster, and a node without the API answers like a kubectl with no kubeconfig. When on, every
node shows:

* ``/etc/clustereval-sim-k8s/node.json``: its own Node object as the API lists it (GPU Feature Discovery
  and NFD labels, ``nvidia.com/gpu`` and ``rdma/rdma_shared_device_a`` capacity from its GPUs and NICs),
  plus the workloads whose pod fails on it; the kubectl shim on the API host lists every node's file;
* ``/etc/clustereval-sim-k8s/api.json``: the rest of the API as the kubeconfig on this node sees it
  (served resources, Deployments/DaemonSets, storage, services, operators' custom resources, RBAC);
  the API host's file is the one the audit reads;
* ``/var/lib/kubelet/cpu_manager_state``: the kubelet's CPU manager checkpoint.

Healthy defaults (a well-run HGX H100 cluster): GPU Operator with ClusterPolicy ready, device plugin and
dcgm-exporter (Kubernetes mapping, pod-resources mounted, ServiceMonitor on), kube-prometheus-stack in
``monitoring`` (node-exporter DaemonSet, Prometheus Operator, operator-made Prometheus and Alertmanager
StatefulSets, kube-state-metrics, Grafana) with the monitoring.coreos.com CRDs, Network Operator with a
ready NicClusterPolicy running the RDMA shared device plugin for the node's NICs and an IPoIB
NetworkAttachmentDefinition for that resource, Kueue (waitForPodsReady, a Topology used by a
ResourceFlavor), Volcano with binpack, MPI Operator, ingress-nginx as the default IngressClass behind a
MetalLB address, a default StorageClass (local-path, WaitForFirstConsumer) and an NFS CSI class
(``shared-fs``, Immediate, reclaimPolicy Delete) with a bound ReadWriteMany PVC and a running provisioner
that binds new claims at once (the kubectl shim plays the PV controller and the provisioners listed under
``provisioners``: the access modes each serves, the error it fails with), static CPU manager, full RBAC
for the tenant.

AMD Instinct nodes (``gpus: {vendor: amd}``, profile ``k8s-amd``): the node carries the AMD GPU Operator's labels
instead of GFD's (:func:`amd_labels`: its NFD rule's ``feature.node.kubernetes.io/amd-gpu``, the node labeller's
``amd.com/gpu.*`` and ``beta.amd.com/gpu.*``, ``amd.com/gpu.compute-memory-partition``) and the ROCm device plugin's
``amd.com/gpu`` (one per logical device: CPX gives 8 per GPU; ``amd.com/<compute>_<memory>`` with
``k8s.amd_resource_naming: mixed``); an API host with AMD GPUs serves the AMD GPU Operator in ``kube-amd-gpu``
(controller manager, NFD, the default DeviceConfig's ``default-device-plugin``, ``default-node-labeller`` and
``default-metrics-exporter``, the ``deviceconfigs.amd.com`` CRD) instead of the NVIDIA GPU Operator, ClusterPolicy and
dcgm-exporter; no GPU taint (the operator sets none). ``k8s_gpus_unadvertised`` fails the AMD device plugin's pod.

Faults (per node; the API-wide ones take effect on the node where kubectl runs, the audit's
``clustereval_k8s_api_host``, as a kubeconfig does): ``k8s_no_default_storage_class`` (bool),
``k8s_rbac_denied`` (list of ``"verb resource"`` the tenant may not do, e.g. ``create pods``; applies to
``auth can-i`` and to ``get``), ``k8s_nad_resource`` (a NetworkAttachmentDefinition ``sriov-ib`` asks
for this resource), ``k8s_components_down`` (workloads with no ready pod, by name: ``volcano-scheduler``,
``nvidia-dcgm-exporter``, ``prometheus-kube-prometheus-stack-prometheus``), ``k8s_pvc_provisioning_fails``
(true, or the error text: the NFS CSI provisioner fails every new claim, which stays Pending with a
``ProvisioningFailed`` event, as when its NFS server cannot be mounted);
on the node itself: ``k8s_gpus_unadvertised`` (bool: its device plugin pod fails, the node advertises 0
GPUs), ``k8s_cpu_manager_policy`` (``none`` | ``static``).

Profile keys under ``k8s:`` (:data:`SETTINGS`; unknown ones are refused naming the key): ``taints`` (the node's
``spec.taints``, ``key[=value]:Effect`` strings, per node under ``nodes:``), and, read on the API host as the
rest of the API: ``daemonset_tolerations`` (DaemonSet name -> its pod template's tolerations, replacing the
chart's defaults), ``namespaces`` (extra namespaces -> their labels), ``network_policies`` (namespace -> list of
``{name, spec}`` NetworkPolicies, stored with the API server's defaults), ``admission_plugins``
(``[ExtendedResourceToleration]``: pods asking for an extended resource tolerate the NoSchedule taint of that
name).
"""

from __future__ import annotations

import json
from typing import Any

from clustereval.sim.overlays._k8s_profile import check_settings, node_taints, pod_and_volume_latency
from clustereval.sim.profile import ProfileError

SHIMS = {"kubectl": "kubectl.py", "helm": "helm.py"}
FAULTS = {"k8s_no_default_storage_class", "k8s_rbac_denied", "k8s_nad_resource", "k8s_components_down",
          "k8s_gpus_unadvertised", "k8s_cpu_manager_policy", "k8s_pvc_provisioning_fails"}
API_DIR = "/etc/clustereval-sim-k8s"
CREATED = "2026-05-04T08:12:31Z"
DEVICE_PLUGIN = "nvidia-device-plugin-daemonset"
# The AMD GPU Operator (ROCm/gpu-operator) names its operands after the DeviceConfig ("default" from its chart):
# <name>-device-plugin, <name>-node-labeller, <name>-metrics-exporter, in the chart's namespace kube-amd-gpu.
AMD_NAMESPACE = "kube-amd-gpu"
AMD_DEVICE_CONFIG = "default"
AMD_DEVICE_PLUGIN = f"{AMD_DEVICE_CONFIG}-device-plugin"
AMD_NODE_LABELLER = f"{AMD_DEVICE_CONFIG}-node-labeller"
AMD_METRICS_EXPORTER = f"{AMD_DEVICE_CONFIG}-metrics-exporter"
AMD_OPERATOR_VERSION = "v1.4.1"
AMD_DEVICE_PLUGIN_IMAGE = "docker.io/rocm/k8s-device-plugin:1.31.0.9"
AMD_NODE_LABELLER_IMAGE = "docker.io/rocm/k8s-device-plugin:labeller-1.31.0.9"
AMD_METRICS_EXPORTER_IMAGE = "docker.io/rocm/device-metrics-exporter:v1.4.0"
# The operator's NodeFeatureRule (amd-gpu-label-nfd-rule) marks AMD GPU nodes with this label, which the default
# DeviceConfig's selector (and so every operand's nodeSelector) matches.
AMD_NFD_LABEL = "feature.node.kubernetes.io/amd-gpu"
# The rule's model labels (PCI device ids it lists under amd-gpu-mi210 / amd-gpu-mi300x).
AMD_NFD_MODEL_LABELS = {"740f": "feature.node.kubernetes.io/amd-gpu-mi210",
                        "74a1": "feature.node.kubernetes.io/amd-gpu-mi300x"}
# The node labeller's arguments: the operator's defaults plus the three partition labels (DeviceConfig
# spec.devicePlugin.nodeLabellerArguments).
AMD_LABELLER_ARGUMENTS = ["vram", "cu-count", "simd-count", "device-id", "family", "product-name", "driver-version",
                          "compute-memory-partition", "compute-partitioning-supported",
                          "memory-partitioning-supported"]
# what csi-driver-nfs reports when its controller cannot mount the NFS export to create a volume's directory
NFS_MOUNT_FAILED = ("rpc error: code = Internal desc = failed to mount nfs server: rpc error: code = Internal desc = "
                    "mount failed: exit status 32\nMounting command: mount\nMounting arguments: -t nfs -o nfsvers=4.1 "
                    "nfs.storage.internal:/export/shared /tmp/pvc-mount\nOutput: mount.nfs: Connection timed out\n")
RDMA_RESOURCE = "rdma_shared_device_a"
GPU_TAINT_TOLERATION = {"effect": "NoSchedule", "key": "nvidia.com/gpu", "operator": "Exists"}
# the tolerations the charts give their DaemonSets: the GPU and Network Operators' operands tolerate the GPU
# nodes' nvidia.com/gpu taint (ClusterPolicy daemonsets.tolerations), upstream Multus and the
# prometheus-node-exporter chart tolerate every NoSchedule taint (Multus every NoExecute one too)
DEFAULT_TOLERATIONS = {
    DEVICE_PLUGIN: [GPU_TAINT_TOLERATION],
    "nvidia-dcgm-exporter": [GPU_TAINT_TOLERATION],
    "rdma-shared-dp-ds": [GPU_TAINT_TOLERATION],
    "kube-multus-ds": [{"effect": "NoSchedule", "operator": "Exists"}, {"effect": "NoExecute", "operator": "Exists"}],
    "kube-prometheus-stack-prometheus-node-exporter": [{"effect": "NoSchedule", "operator": "Exists"}],
}
# The AMD GPU Operator gives its operands no tolerations unless the DeviceConfig lists some
# (devicePluginTolerations, nodeLabellerTolerations, metricsExporter.tolerations): k8s.daemonset_tolerations may.
AMD_DAEMONSETS = (AMD_DEVICE_PLUGIN, AMD_NODE_LABELLER, AMD_METRICS_EXPORTER, "amd-gpu-nfd-worker")
TOLERABLE_DAEMONSETS = (*DEFAULT_TOLERATIONS, *AMD_DAEMONSETS)

# name, shortnames, group, version, namespaced, kind: what a v1.31 API server with these operators serves
CORE_RESOURCES = [
    ("configmaps", "cm", "", "v1", True, "ConfigMap"),
    ("events", "ev", "", "v1", True, "Event"),
    ("namespaces", "ns", "", "v1", False, "Namespace"),
    ("nodes", "no", "", "v1", False, "Node"),
    ("persistentvolumeclaims", "pvc", "", "v1", True, "PersistentVolumeClaim"),
    ("persistentvolumes", "pv", "", "v1", False, "PersistentVolume"),
    ("pods", "po", "", "v1", True, "Pod"),
    ("secrets", "", "", "v1", True, "Secret"),
    ("serviceaccounts", "sa", "", "v1", True, "ServiceAccount"),
    ("services", "svc", "", "v1", True, "Service"),
    ("daemonsets", "ds", "apps", "v1", True, "DaemonSet"),
    ("deployments", "deploy", "apps", "v1", True, "Deployment"),
    ("replicasets", "rs", "apps", "v1", True, "ReplicaSet"),
    ("statefulsets", "sts", "apps", "v1", True, "StatefulSet"),
    ("cronjobs", "cj", "batch", "v1", True, "CronJob"),
    ("jobs", "", "batch", "v1", True, "Job"),
    ("ingressclasses", "", "networking.k8s.io", "v1", False, "IngressClass"),
    ("ingresses", "ing", "networking.k8s.io", "v1", True, "Ingress"),
    ("networkpolicies", "netpol", "networking.k8s.io", "v1", True, "NetworkPolicy"),
    ("clusterrolebindings", "", "rbac.authorization.k8s.io", "v1", False, "ClusterRoleBinding"),
    ("clusterroles", "", "rbac.authorization.k8s.io", "v1", False, "ClusterRole"),
    ("rolebindings", "", "rbac.authorization.k8s.io", "v1", True, "RoleBinding"),
    ("roles", "", "rbac.authorization.k8s.io", "v1", True, "Role"),
    ("csidrivers", "", "storage.k8s.io", "v1", False, "CSIDriver"),
    ("csinodes", "", "storage.k8s.io", "v1", False, "CSINode"),
    ("storageclasses", "sc", "storage.k8s.io", "v1", False, "StorageClass"),
    ("volumeattachments", "", "storage.k8s.io", "v1", False, "VolumeAttachment"),
]
CRD_RESOURCES = [
    ("network-attachment-definitions", "net-attach-def", "k8s.cni.cncf.io", "v1", True,
     "NetworkAttachmentDefinition"),
    ("mpijobs", "", "kubeflow.org", "v2beta1", True, "MPIJob"),
    ("clusterqueues", "cq", "kueue.x-k8s.io", "v1beta1", False, "ClusterQueue"),
    ("localqueues", "queue,queues,lq", "kueue.x-k8s.io", "v1beta1", True, "LocalQueue"),
    ("resourceflavors", "flavor,flavors,rf", "kueue.x-k8s.io", "v1beta1", False, "ResourceFlavor"),
    ("topologies", "", "kueue.x-k8s.io", "v1alpha1", False, "Topology"),
    ("workloads", "wl", "kueue.x-k8s.io", "v1beta1", True, "Workload"),
    ("nicclusterpolicies", "", "mellanox.com", "v1alpha1", False, "NicClusterPolicy"),
    ("ipaddresspools", "", "metallb.io", "v1beta1", True, "IPAddressPool"),
    ("l2advertisements", "", "metallb.io", "v1beta1", True, "L2Advertisement"),
    ("alertmanagerconfigs", "amcfg", "monitoring.coreos.com", "v1alpha1", True, "AlertmanagerConfig"),
    ("alertmanagers", "am", "monitoring.coreos.com", "v1", True, "Alertmanager"),
    ("podmonitors", "pmon", "monitoring.coreos.com", "v1", True, "PodMonitor"),
    ("probes", "prb", "monitoring.coreos.com", "v1", True, "Probe"),
    ("prometheusagents", "promagent", "monitoring.coreos.com", "v1alpha1", True, "PrometheusAgent"),
    ("prometheuses", "prom", "monitoring.coreos.com", "v1", True, "Prometheus"),
    ("prometheusrules", "promrule", "monitoring.coreos.com", "v1", True, "PrometheusRule"),
    ("scrapeconfigs", "scfg", "monitoring.coreos.com", "v1alpha1", True, "ScrapeConfig"),
    ("servicemonitors", "smon", "monitoring.coreos.com", "v1", True, "ServiceMonitor"),
    ("thanosrulers", "ruler", "monitoring.coreos.com", "v1", True, "ThanosRuler"),
    ("clusterpolicies", "", "nvidia.com", "v1", False, "ClusterPolicy"),
    ("podgroups", "pg,podgroup-v1beta1", "scheduling.volcano.sh", "v1beta1", True, "PodGroup"),
    ("queues", "q,queue-v1beta1", "scheduling.volcano.sh", "v1beta1", False, "Queue"),
    ("hypernodes", "hn", "topology.volcano.sh", "v1alpha1", False, "HyperNode"),
]



def validate_settings(settings: dict[str, Any]) -> None:
    """Refuse unknown or malformed ``k8s:`` keys when the profile loads, before anything starts."""
    check_settings(settings.get("k8s") or {}, TOLERABLE_DAEMONSETS)


def _fault(settings: dict[str, Any], key: str, default: Any) -> Any:
    return (settings.get("faults") or {}).get(key, default)


def _meta(name: str, namespace: str | None = None, labels: dict[str, str] | None = None,
          annotations: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"creationTimestamp": CREATED, "name": name, "resourceVersion": "48211",
                            "uid": _uid(namespace or "", name)}
    if namespace:
        meta["namespace"] = namespace
    if labels:
        meta["labels"] = labels
    if annotations:
        meta["annotations"] = annotations
    return meta


def _uid(*parts: str) -> str:
    import hashlib

    h = hashlib.sha256("/".join(parts).encode()).hexdigest()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


# ----------------------------------------------------------------------------------------- this node

def gfd_labels(state: dict[str, Any]) -> dict[str, str]:
    """GPU Feature Discovery and NFD labels for the node's GPUs (as the GPU Operator sets them)."""
    gpus = state.get("gpus") or []
    if not gpus:
        return {}
    gpu = gpus[0]
    major, _, minor = str(gpu.get("compute_cap", "9.0")).partition(".")
    drv = [*str(state.get("driver_version", "550.90.07")).split("."), "", "", ""]
    cuda = [*str(state.get("cuda_version", "12.4")).split("."), ""]
    return {
        "feature.node.kubernetes.io/pci-10de.present": "true",
        "nvidia.com/cuda.driver-version.full": str(state.get("driver_version")),
        "nvidia.com/cuda.driver-version.major": drv[0], "nvidia.com/cuda.driver-version.minor": drv[1],
        "nvidia.com/cuda.driver-version.revision": drv[2],
        "nvidia.com/cuda.runtime-version.full": str(state.get("cuda_version")),
        "nvidia.com/cuda.runtime-version.major": cuda[0], "nvidia.com/cuda.runtime-version.minor": cuda[1],
        "nvidia.com/gfd.timestamp": "1746346351",
        "nvidia.com/gpu.compute.major": major, "nvidia.com/gpu.compute.minor": minor or "0",
        "nvidia.com/gpu.count": str(len(gpus)),
        "nvidia.com/gpu.deploy.container-toolkit": "true", "nvidia.com/gpu.deploy.dcgm": "true",
        "nvidia.com/gpu.deploy.dcgm-exporter": "true", "nvidia.com/gpu.deploy.device-plugin": "true",
        "nvidia.com/gpu.deploy.driver": "pre-installed", "nvidia.com/gpu.deploy.gpu-feature-discovery": "true",
        "nvidia.com/gpu.deploy.node-status-exporter": "true", "nvidia.com/gpu.deploy.operator-validator": "true",
        "nvidia.com/gpu.family": str(gpu.get("architecture", "Hopper")).lower(),
        "nvidia.com/gpu.machine": "SYS-821GE-TNHR",
        "nvidia.com/gpu.memory": str(gpu.get("memory_total_mib", 81559)),
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.product": str(gpu.get("name", "NVIDIA H100 80GB HBM3")).replace(" ", "-"),
        "nvidia.com/gpu.replicas": "1", "nvidia.com/gpu.sharing-strategy": "none",
        "nvidia.com/mig.capable": "true", "nvidia.com/mig.strategy": "single", "nvidia.com/mps.capable": "false",
    }


def _labeller_labels(kind: str, values: list[str]) -> dict[str, str]:
    """The AMD node labeller's labels of one kind (its createLabels): per value seen ``beta.amd.com/gpu.<kind>.<value>``
    with how many devices show it; when all show the same value also ``beta.amd.com/gpu.<kind>`` and
    ``amd.com/gpu.<kind>`` = that value, else ``amd.com/gpu.<kind>.<value>`` = count."""
    counts: dict[str, int] = {}
    for value in values:
        counts[value] = counts.get(value, 0) + 1
    out = {f"beta.amd.com/gpu.{kind}.{value}": str(n) for value, n in counts.items()}
    if len(counts) == 1:
        (value,) = counts
        out[f"beta.amd.com/gpu.{kind}"] = value
        out[f"amd.com/gpu.{kind}"] = value
    else:
        out.update({f"amd.com/gpu.{kind}.{value}": str(n) for value, n in counts.items()})
    return out


def amd_labels(state: dict[str, Any]) -> dict[str, str]:
    """The labels of an AMD GPU node: the AMD GPU Operator's NFD rule (``feature.node.kubernetes.io/amd-gpu``, the
    model label for MI210/MI300X) and its node labeller (ROCm/k8s-device-plugin cmd/k8s-node-labeller) run with
    :data:`AMD_LABELLER_ARGUMENTS`. The labeller counts every device amdgpu exposes: in CPX each partition of a GPU
    is one (its VRAM, CUs and SIMDs the partition's share), and ``amd.com/gpu.compute-memory-partition`` is
    ``<compute>_<memory>`` in lower case (``spx_nps1``), set only when every GPU of the node is in the same mode."""
    devices = (state.get("amd") or {}).get("gpus") or []
    if not devices:
        return {}
    device_id = str(devices[0].get("device_id", "0x74a1")).lower().removeprefix("0x")
    labels = {AMD_NFD_LABEL: "true"}
    if device_id in AMD_NFD_MODEL_LABELS:
        labels[AMD_NFD_MODEL_LABELS[device_id]] = "true"
    product = [str(d.get("market_name", "")).strip().replace(" ", "_").replace("(", "").replace(")", "")
               for d in devices]
    for kind, values in (
            ("vram", [f"{round(int(d.get('vram_total_mb') or 0) / 1024)}G" for d in devices]),
            ("cu-count", [str(d.get("compute_units")) for d in devices]),
            ("simd-count", [str(int(d.get("compute_units") or 0) * 4) for d in devices]),  # 4 SIMDs per CDNA CU
            ("device-id", [str(d.get("device_id", "")).lower().removeprefix("0x") for d in devices]),
            ("family", ["AI" for _ in devices]),  # AMDGPU_FAMILY_AI: every gfx9 part (CDNA 1-4)
            ("product-name", product)):
        labels.update(_labeller_labels(kind, values))
    labels["amd.com/gpu.driver-version"] = str((state.get("amd") or {}).get("amdgpu_version", ""))
    modes = {f"{str(d.get('compute_partition', '')).lower()}_{str(d.get('memory_partition', '')).lower()}"
             for d in devices}
    if len(modes) == 1:
        labels["amd.com/gpu.compute-memory-partition"] = modes.pop()
    labels["amd.com/gpu.compute-partitioning-supported"] = "true"
    labels["amd.com/gpu.memory-partitioning-supported"] = "true"
    return labels


def amd_gpu_resources(settings: dict[str, Any], state: dict[str, Any]) -> dict[str, str]:
    """What the ROCm device plugin advertises: every logical device (CPX: 8 per GPU) as ``amd.com/gpu`` with the
    default ``single`` resource naming strategy, as ``amd.com/<compute>_<memory>`` (``amd.com/cpx_nps4``) with
    ``k8s.amd_resource_naming: mixed``; 0 while its pod fails on the node (``k8s_gpus_unadvertised``)."""
    devices = (state.get("amd") or {}).get("gpus") or []
    if not devices:
        return {}
    down = _fault(settings, "k8s_gpus_unadvertised", False)
    if str((settings.get("k8s") or {}).get("amd_resource_naming", "single")) != "mixed":
        return {"amd.com/gpu": "0" if down else str(len(devices))}
    out: dict[str, str] = {}
    for d in devices:
        key = f"amd.com/{str(d.get('compute_partition')).lower()}_{str(d.get('memory_partition')).lower()}"
        out[key] = "0" if down else str(int(out.get(key, "0")) + 1)
    return out


def node_object(settings: dict[str, Any], state: dict[str, Any]) -> dict[str, Any]:
    """The Node as ``kubectl get nodes -o json`` shows it for this simulated node (an AMD node: the AMD GPU
    Operator's NFD and node labeller labels and the ROCm device plugin's resource instead of NVIDIA's)."""
    k8s = settings.get("k8s") or {}
    name = state["node"]
    gpus = len(state.get("gpus") or [])
    amd = bool(state.get("amd"))
    labels = {"beta.kubernetes.io/arch": "amd64", "beta.kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
              "kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
              "network.topology.nvidia.com/block": str(k8s.get("block", "block-1")),
              **(amd_labels(state) if amd else gfd_labels(state))}
    if state.get("nics"):
        labels["feature.node.kubernetes.io/pci-15b3.present"] = "true"
    capacity = {"cpu": str(k8s.get("cpus", 224)), "ephemeral-storage": "3750157048Ki", "hugepages-1Gi": "0",
                "hugepages-2Mi": "0", "memory": "2113404580Ki", "pods": "110"}
    if amd:
        capacity.update(amd_gpu_resources(settings, state))
    elif gpus:
        capacity["nvidia.com/gpu"] = "0" if _fault(settings, "k8s_gpus_unadvertised", False) else str(gpus)
    if state.get("nics"):
        capacity[f"rdma/{RDMA_RESOURCE}"] = "63"
    allocatable = dict(capacity, cpu=str(int(capacity["cpu"]) - 2), memory="2102918820Ki")
    ready = not state.get("unreachable")
    taints = node_taints(k8s)
    condition = ({"type": "Ready", "status": "True", "reason": "KubeletReady",
                  "message": "kubelet is posting ready status"} if ready else
                 {"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown",
                  "message": "Kubelet stopped posting node status."})
    condition.update(lastHeartbeatTime=CREATED, lastTransitionTime=CREATED)
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": _meta(name, labels=labels, annotations={
            "node.alpha.kubernetes.io/ttl": "0", "volumes.kubernetes.io/controller-managed-attach-detach": "true",
            "kubeadm.alpha.kubernetes.io/cri-socket": "unix:///run/containerd/containerd.sock"}),
        "spec": {"podCIDR": f"10.244.{int(name[4:]) if name[4:].isdigit() else 0}.0/24",
                 **({"taints": taints} if taints else {})},
        "status": {"allocatable": allocatable, "capacity": capacity, "conditions": [condition],
                   "nodeInfo": {"architecture": "amd64", "containerRuntimeVersion": "containerd://1.7.24",
                                "kernelVersion": "6.8.0-51-generic", "kubeProxyVersion": "v1.31.4",
                                "kubeletVersion": "v1.31.4", "operatingSystem": "linux",
                                "osImage": "Ubuntu 24.04.1 LTS"}},
    }


# ----------------------------------------------------------------------------------------- the API

def _workload(kind: str, name: str, namespace: str, image: str, replicas: int = 1, ready: int | None = None,
              env: dict[str, str] | None = None, args: list[str] | None = None, host_paths: tuple[str, ...] = (),
              node_selector: dict[str, str] | None = None, container: str | None = None,
              labels: dict[str, str] | None = None, sidecars: tuple[tuple[str, str], ...] = (),
              init: tuple[tuple[str, str], ...] = (), service_name: str | None = None,
              sidecars_first: bool = False) -> dict[str, Any]:
    """A Deployment, DaemonSet or StatefulSet; ``labels`` replace the default ``app``/``app.kubernetes.io/name``
    pair (a Helm chart's own labels), ``sidecars``/``init`` add (name, image) containers after the main one
    (before it with ``sidecars_first``, as the Grafana chart orders them)."""
    main: dict[str, Any] = {"image": image, "imagePullPolicy": "IfNotPresent", "name": container or name.split("-")[0]}
    if env:
        main["env"] = [{"name": k, "value": v} for k, v in env.items()]
    if args:
        main["args"] = args
    extra = [{"image": i, "imagePullPolicy": "IfNotPresent", "name": n} for n, i in sidecars]
    pod: dict[str, Any] = {"containers": [*extra, main] if sidecars_first else [main, *extra],
                           "restartPolicy": "Always"}
    if init:
        pod["initContainers"] = [{"image": i, "imagePullPolicy": "IfNotPresent", "name": n} for n, i in init]
    if host_paths:
        pod["volumes"] = [{"hostPath": {"path": p, "type": ""}, "name": f"host-{i}"} for i, p in enumerate(host_paths)]
    if node_selector:
        pod["nodeSelector"] = node_selector
    keys = ("app", "app.kubernetes.io/name", "app.kubernetes.io/instance")
    selector = {k: v for k, v in labels.items() if k in keys} if labels else {"app": name}
    labels = labels or {"app": name, "app.kubernetes.io/name": name}
    obj: dict[str, Any] = {"apiVersion": "apps/v1", "kind": kind, "metadata": _meta(name, namespace, labels=labels),
                           "spec": {"selector": {"matchLabels": selector},
                                    "template": {"metadata": {"labels": selector}, "spec": pod}}}
    if kind in ("Deployment", "StatefulSet"):
        ready = replicas if ready is None else ready
        obj["spec"]["replicas"] = replicas
        obj["status"] = {"availableReplicas": ready, "observedGeneration": 1, "replicas": replicas,
                         "updatedReplicas": replicas}
        if kind == "StatefulSet":
            revision = f"{name}-{_uid(namespace, name)[:10].replace('-', '')}"
            obj["spec"].update(podManagementPolicy="Parallel", serviceName=service_name or name)
            obj["status"].update(collisionCount=0, currentReplicas=replicas, currentRevision=revision,
                                 updateRevision=revision)
        if ready:
            obj["status"]["readyReplicas"] = ready
    return obj  # a DaemonSet's status is computed by the shim from the nodes its selector matches


def _chart_labels(name: str, chart: str, version: str, release: str = "kube-prometheus-stack",
                  **extra: str) -> dict[str, str]:
    """The labels a Helm chart of the prometheus-community family puts on its workloads."""
    return {"app.kubernetes.io/instance": release, "app.kubernetes.io/managed-by": "Helm",
            "app.kubernetes.io/name": name, "app.kubernetes.io/part-of": name, "app.kubernetes.io/version": version,
            "helm.sh/chart": chart, "release": release, **extra}


def monitoring_workloads(down: set[str]) -> list[dict[str, Any]]:
    """kube-prometheus-stack 66.2.1 in ``monitoring``, as Helm and the Prometheus Operator create it."""
    ns, release = "monitoring", "kube-prometheus-stack"
    reloader = "quay.io/prometheus-operator/prometheus-config-reloader:v0.78.2"
    stack = _chart_labels(release, "kube-prometheus-stack-66.2.1", "66.2.1", heritage="Helm")

    def ready(name: str) -> int | None:
        return 0 if name in down else None

    node_exporter = f"{release}-prometheus-node-exporter"
    prometheus = f"prometheus-{release}-prometheus"
    alertmanager = f"alertmanager-{release}-alertmanager"
    return [
        _workload("DaemonSet", node_exporter, ns, "quay.io/prometheus/node-exporter:v1.8.2", container="node-exporter",
                  labels=_chart_labels("prometheus-node-exporter", "prometheus-node-exporter-4.42.0", "1.8.2",
                                       **{"app.kubernetes.io/component": "metrics", "jobLabel": "node-exporter"}),
                  args=["--path.procfs=/host/proc", "--path.sysfs=/host/sys", "--path.rootfs=/host/root",
                        "--path.udev.data=/host/root/run/udev/data", "--web.listen-address=[$(HOST_IP)]:9100"],
                  host_paths=("/proc", "/sys", "/"), node_selector={"kubernetes.io/os": "linux"}),
        _workload("Deployment", f"{release}-operator", ns, "quay.io/prometheus-operator/prometheus-operator:v0.78.2",
                  ready=ready(f"{release}-operator"), container=release,
                  labels={**stack, "app": f"{release}-operator", "app.kubernetes.io/component": "prometheus-operator",
                          "app.kubernetes.io/name": f"{release}-prometheus-operator"},
                  args=[f"--kubelet-service=kube-system/{release}-kubelet", "--localhost=127.0.0.1",
                        f"--prometheus-config-reloader={reloader}", "--config-reloader-cpu-request=0",
                        "--config-reloader-cpu-limit=0", "--web.enable-tls=true", "--web.listen-address=:10250"]),
        _workload("StatefulSet", prometheus, ns, "quay.io/prometheus/prometheus:v2.55.1", ready=ready(prometheus),
                  container="prometheus", service_name="prometheus-operated",
                  labels={"app": f"{release}-prometheus", "app.kubernetes.io/instance": f"{release}-prometheus",
                          "app.kubernetes.io/managed-by": "prometheus-operator", "app.kubernetes.io/name": "prometheus",
                          "app.kubernetes.io/part-of": release, "app.kubernetes.io/version": "66.2.1",
                          "chart": "kube-prometheus-stack-66.2.1", "heritage": "Helm",
                          "operator.prometheus.io/mode": "server",
                          "operator.prometheus.io/name": f"{release}-prometheus", "operator.prometheus.io/shard": "0",
                          "release": release},
                  args=["--web.console.templates=/etc/prometheus/consoles",
                        "--web.console.libraries=/etc/prometheus/console_libraries",
                        "--config.file=/etc/prometheus/config_out/prometheus.env.yaml",
                        "--web.enable-lifecycle", "--storage.tsdb.retention.time=10d",
                        "--storage.tsdb.path=/prometheus", "--web.route-prefix=/"],
                  sidecars=(("config-reloader", reloader),), init=(("init-config-reloader", reloader),)),
        _workload("StatefulSet", alertmanager, ns, "quay.io/prometheus/alertmanager:v0.27.0",
                  ready=ready(alertmanager), container="alertmanager", service_name="alertmanager-operated",
                  labels={"app.kubernetes.io/instance": f"{release}-alertmanager",
                          "app.kubernetes.io/managed-by": "prometheus-operator",
                          "app.kubernetes.io/name": "alertmanager", "app.kubernetes.io/version": "0.27.0",
                          "alertmanager": f"{release}-alertmanager"},
                  sidecars=(("config-reloader", reloader),), init=(("init-config-reloader", reloader),)),
        _workload("Deployment", f"{release}-kube-state-metrics", ns,
                  "registry.k8s.io/kube-state-metrics/kube-state-metrics:v2.14.0",
                  ready=ready(f"{release}-kube-state-metrics"), container="kube-state-metrics",
                  labels=_chart_labels("kube-state-metrics", "kube-state-metrics-5.27.0", "2.14.0",
                                       **{"app.kubernetes.io/component": "metrics"})),
        _workload("Deployment", f"{release}-grafana", ns, "docker.io/grafana/grafana:11.3.1",
                  ready=ready(f"{release}-grafana"), container="grafana",
                  labels=_chart_labels("grafana", "grafana-8.6.3", "11.3.1"),
                  sidecars=(("grafana-sc-dashboard", "quay.io/kiwigrid/k8s-sidecar:1.28.0"),
                            ("grafana-sc-datasources", "quay.io/kiwigrid/k8s-sidecar:1.28.0")), sidecars_first=True),
    ]


AMD_CRD_RESOURCES = [
    ("deviceconfigs", "gpue", "amd.com", "v1alpha1", True, "DeviceConfig"),
    ("nodefeaturerules", "nfr", "nfd.k8s-sigs.io", "v1alpha1", False, "NodeFeatureRule"),
]


def _operand(name: str, image: str, container: str, labels: dict[str, str], host_paths: tuple[str, ...] = (),
             args: list[str] | None = None, env: dict[str, str] | None = None) -> dict[str, Any]:
    """An AMD GPU Operator operand DaemonSet as the operator writes it: selector and pod labels
    ``daemonset-name: <DeviceConfig>`` (plus the metrics exporter's app label), the DeviceConfig's selector as
    nodeSelector, priority class system-node-critical."""
    ds = _workload("DaemonSet", name, AMD_NAMESPACE, image, node_selector={AMD_NFD_LABEL: "true"},
                   container=container, args=args, env=env, host_paths=host_paths)
    ds["metadata"]["labels"] = {"app.kubernetes.io/managed-by": "amd-gpu-operator", **labels}
    ds["spec"]["selector"] = {"matchLabels": dict(labels)}
    ds["spec"]["template"]["metadata"]["labels"] = dict(labels)
    ds["spec"]["template"]["spec"]["priorityClassName"] = "system-node-critical"
    return ds


def amd_gpu_operator(down: set[str]) -> list[dict[str, Any]]:
    """The AMD GPU Operator (helm chart gpu-operator-charts in kube-amd-gpu) with its default DeviceConfig: the
    controller manager, its NFD (master and worker), and the operands it makes for the DeviceConfig: the ROCm device
    plugin, the node labeller and the device metrics exporter (which maps GPUs to pods through the kubelet's
    pod-resources socket). Inbox amdgpu driver (``spec.driver.enable: false``): no KMM module, no driver pods."""
    sel = {"daemonset-name": AMD_DEVICE_CONFIG}
    return [
        _workload("Deployment", "amd-gpu-operator-controller-manager", AMD_NAMESPACE,
                  f"docker.io/rocm/gpu-operator:{AMD_OPERATOR_VERSION}", 1,
                  0 if "amd-gpu-operator-controller-manager" in down else None, container="manager",
                  labels={"app.kubernetes.io/name": "gpu-operator-charts", "app.kubernetes.io/instance": "amd-gpu",
                          "app.kubernetes.io/component": "amd-gpu", "app.kubernetes.io/version": AMD_OPERATOR_VERSION}),
        _workload("Deployment", "amd-gpu-nfd-master", AMD_NAMESPACE,
                  "registry.k8s.io/nfd/node-feature-discovery:v0.16.1", 1, 0 if "amd-gpu-nfd-master" in down else None,
                  container="master", labels={"app.kubernetes.io/name": "node-feature-discovery",
                                              "app.kubernetes.io/instance": "amd-gpu", "role": "master"}),
        _workload("DaemonSet", "amd-gpu-nfd-worker", AMD_NAMESPACE,
                  "registry.k8s.io/nfd/node-feature-discovery:v0.16.1", container="worker",
                  labels={"app.kubernetes.io/name": "node-feature-discovery", "app.kubernetes.io/instance": "amd-gpu",
                          "role": "worker"}),
        _operand(AMD_DEVICE_PLUGIN, AMD_DEVICE_PLUGIN_IMAGE, "device-plugin", sel,
                 host_paths=("/var/lib/kubelet/device-plugins", "/sys"), args=["-pulse", "30"]),
        _operand(AMD_NODE_LABELLER, AMD_NODE_LABELLER_IMAGE, "node-labeller-container", sel,
                 host_paths=("/sys", "/dev"),
                 args=["-c", "./k8s-node-labeller " + " ".join(f"-{a}" for a in AMD_LABELLER_ARGUMENTS)]),
        _operand(AMD_METRICS_EXPORTER, AMD_METRICS_EXPORTER_IMAGE, "metrics-exporter-container",
                 {**sel, "app.kubernetes.io/name": "metrics-exporter"},
                 host_paths=("/dev", "/sys", "/var/lib/kubelet/pod-resources", "/var/lib/amd-metrics-exporter"),
                 env={"METRICS_EXPORTER_PORT": "5000", "AMD_EXPORTER_RELAXED_FLAGS_PARSING": "true"}),
    ]


def amd_device_config(settings: dict[str, Any]) -> dict[str, Any]:
    """The default DeviceConfig (amd.com/v1alpha1) the chart installs, as the operator reports it once its operands
    run: the Ready condition (reason OperatorReady)."""
    naming = str((settings.get("k8s") or {}).get("amd_resource_naming", "single"))
    cfg = _cr("amd.com/v1alpha1", "DeviceConfig", AMD_DEVICE_CONFIG, AMD_NAMESPACE, spec={
        "selector": {AMD_NFD_LABEL: "true"},
        "driver": {"enable": False},
        "devicePlugin": {"enableDevicePlugin": True, "devicePluginImage": AMD_DEVICE_PLUGIN_IMAGE,
                         "devicePluginArguments": {"resource_naming_strategy": naming},
                         "enableNodeLabeller": True, "nodeLabellerImage": AMD_NODE_LABELLER_IMAGE,
                         "nodeLabellerArguments": list(AMD_LABELLER_ARGUMENTS)},
        "metricsExporter": {"enable": True, "image": AMD_METRICS_EXPORTER_IMAGE, "port": 5000,
                            "serviceType": "ClusterIP", "prometheus": {"serviceMonitor": {"enable": True}}},
    }, status={"conditions": [{"lastTransitionTime": CREATED, "message": "", "observedGeneration": 1,
                               "reason": "OperatorReady", "status": "True", "type": "Ready"}],
               "observedGeneration": 1})
    cfg["metadata"]["generation"] = 1
    return cfg


def _cr(api_version: str, kind: str, name: str, namespace: str | None = None, spec: dict[str, Any] | None = None,
        status: dict[str, Any] | None = None, **top: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {"apiVersion": api_version, "kind": kind, "metadata": _meta(name, namespace)}
    if spec is not None:
        obj["spec"] = spec
    if status is not None:
        obj["status"] = status
    obj.update(top)
    return obj


def api_state(settings: dict[str, Any], state: dict[str, Any]) -> dict[str, Any]:
    """Everything but the nodes, as the kubeconfig on this node sees the cluster."""
    k8s = settings.get("k8s") or {}
    netdevs = [str(n.get("netdev")) for n in state.get("nics") or [] if n.get("netdev")] or ["ibp26s0"]
    rdma_config = json.dumps({"configList": [{"rdmaHcaMax": 63, "resourceName": RDMA_RESOURCE,
                                              "selectors": {"ifNames": netdevs}}], "periodicUpdateInterval": 300})
    down = set(_fault(settings, "k8s_components_down", []) or [])
    gpu_node = {"nvidia.com/gpu.present": "true"}

    def deploy(name: str, namespace: str, image: str, replicas: int = 1, **kw: Any) -> dict[str, Any]:
        return _workload("Deployment", name, namespace, image, replicas, 0 if name in down else None, **kw)

    amd = bool(state.get("amd"))
    gpu_stack = amd_gpu_operator(down) if amd else [
        deploy("gpu-operator", "gpu-operator", "nvcr.io/nvidia/gpu-operator:v24.9.2"),
        _workload("DaemonSet", DEVICE_PLUGIN, "gpu-operator", "nvcr.io/nvidia/k8s-device-plugin:v0.17.0",
                  node_selector=gpu_node),
        _workload("DaemonSet", "nvidia-dcgm-exporter", "gpu-operator",
                  "nvcr.io/nvidia/k8s/dcgm-exporter:3.3.9-3.6.1-ubuntu22.04", node_selector=gpu_node,
                  env={"DCGM_EXPORTER_LISTEN": ":9400", "DCGM_EXPORTER_KUBERNETES": "true",
                       "DCGM_EXPORTER_COLLECTORS": "/etc/dcgm-exporter/dcp-metrics-included.csv"},
                  host_paths=("/var/lib/kubelet/pod-resources",))]
    workloads = [
        *gpu_stack,
        deploy("nvidia-network-operator", "nvidia-network-operator",
               "nvcr.io/nvidia/cloud-native/network-operator:v24.10.0"),
        _workload("DaemonSet", "rdma-shared-dp-ds", "nvidia-network-operator",
                  "ghcr.io/mellanox/k8s-rdma-shared-dev-plugin:v1.5.2",
                  node_selector={"feature.node.kubernetes.io/pci-15b3.present": "true"}),
        _workload("DaemonSet", "kube-multus-ds", "nvidia-network-operator",
                  "ghcr.io/k8snetworkplumbingwg/multus-cni:v4.1.0"),
        deploy("kueue-controller-manager", "kueue-system", "registry.k8s.io/kueue/kueue:v0.14.2"),
        deploy("volcano-scheduler", "volcano-system", "docker.io/volcanosh/vc-scheduler:v1.12.1"),
        deploy("mpi-operator", "mpi-operator", "docker.io/mpioperator/mpi-operator:0.6.0"),
        deploy("ingress-nginx-controller", "ingress-nginx", "registry.k8s.io/ingress-nginx/controller:v1.12.0", 2),
        deploy("controller", "metallb-system", "quay.io/metallb/controller:v0.14.9"),
        *monitoring_workloads(down),
    ]
    default_sc = {} if _fault(settings, "k8s_no_default_storage_class", False) else {
        "storageclass.kubernetes.io/is-default-class": "true"}
    storage_classes = [
        _cr("storage.k8s.io/v1", "StorageClass", "local-path", provisioner="rancher.io/local-path",
            reclaimPolicy="Delete", volumeBindingMode="WaitForFirstConsumer"),
        _cr("storage.k8s.io/v1", "StorageClass", "shared-fs", provisioner="nfs.csi.k8s.io",
            parameters={"server": "nfs.storage.internal", "share": "/export/shared"}, reclaimPolicy="Delete",
            volumeBindingMode="Immediate", mountOptions=["nfsvers=4.1"]),
    ]
    nfs_error = _fault(settings, "k8s_pvc_provisioning_fails", False)
    if nfs_error is True:
        nfs_error = NFS_MOUNT_FAILED
    # the provisioners that run (the kubectl shim acts for them): access modes served, the error they fail with
    provisioners = {
        "nfs.csi.k8s.io": {"access_modes": ["ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod"],
                           "error": str(nfs_error) if nfs_error else None,
                           "pod": "csi-nfs-controller-6d8f9b7c5d-q4x7m"},
        "rancher.io/local-path": {"access_modes": ["ReadWriteOnce", "ReadWriteOncePod"],
                                  "unsupported": "NodePath only supports ReadWriteOnce and ReadWriteOncePod (1.22+) "
                                                 "access modes",
                                  "pod": "local-path-provisioner-7599fd788b-8hk2v"},
    }
    if default_sc:
        storage_classes[0]["metadata"]["annotations"] = default_sc
    nads = [_cr("k8s.cni.cncf.io/v1", "NetworkAttachmentDefinition", "rdma-ipoib", "default",
                spec={"config": json.dumps({"cniVersion": "0.3.1", "name": "rdma-ipoib", "type": "ipoib",
                                            "master": netdevs[0],
                                            "ipam": {"type": "whereabouts", "range": "192.168.6.0/24"}})})]
    nads[0]["metadata"]["annotations"] = {"k8s.v1.cni.cncf.io/resourceName": f"rdma/{RDMA_RESOURCE}"}
    extra_nad = _fault(settings, "k8s_nad_resource", None)
    if extra_nad:
        nads.append(_cr("k8s.cni.cncf.io/v1", "NetworkAttachmentDefinition", "sriov-ib", "default",
                        spec={"config": json.dumps({"cniVersion": "0.3.1", "name": "sriov-ib", "type": "ib-sriov",
                                                    "ipam": {"type": "whereabouts", "range": "10.10.0.0/16"}})}))
        nads[-1]["metadata"]["annotations"] = {"k8s.v1.cni.cncf.io/resourceName": str(extra_nad)}
    ingress_class = _cr("networking.k8s.io/v1", "IngressClass", "nginx", spec={"controller": "k8s.io/ingress-nginx"})
    ingress_class["metadata"]["annotations"] = {"ingressclass.kubernetes.io/is-default-class": "true"}
    kueue_config = ("apiVersion: config.kueue.x-k8s.io/v1beta1\nkind: Configuration\nwaitForPodsReady:\n"
                    "  enable: true\n  timeout: 10m\nintegrations:\n  frameworks:\n  - batch/job\n"
                    "  - kubeflow.org/mpijob\n")
    volcano_config = ('actions: "enqueue, allocate, backfill"\ntiers:\n- plugins:\n  - name: priority\n'
                      '  - name: gang\n    enablePreemptable: false\n  - name: conformance\n- plugins:\n'
                      '  - name: drf\n  - name: predicates\n  - name: proportion\n  - name: nodeorder\n'
                      '  - name: binpack\n')
    objects: dict[str, list[dict[str, Any]]] = {
        "deployments.apps": [w for w in workloads if w["kind"] == "Deployment"],
        "daemonsets.apps": [w for w in workloads if w["kind"] == "DaemonSet"],
        "statefulsets.apps": [w for w in workloads if w["kind"] == "StatefulSet"],
        "storageclasses.storage.k8s.io": storage_classes,
        "csidrivers.storage.k8s.io": [_cr("storage.k8s.io/v1", "CSIDriver", "nfs.csi.k8s.io", spec={
            "attachRequired": False, "fsGroupPolicy": "File", "podInfoOnMount": False,
            "requiresRepublish": False, "seLinuxMount": False, "storageCapacity": False,
            "volumeLifecycleModes": ["Persistent"]})],
        "persistentvolumeclaims": [_cr("v1", "PersistentVolumeClaim", "datasets", "training", spec={
            "accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "10Ti"}},
            "storageClassName": "shared-fs", "volumeMode": "Filesystem", "volumeName": "pvc-" + _uid("datasets")},
            status={"accessModes": ["ReadWriteMany"], "capacity": {"storage": "10Ti"}, "phase": "Bound"})],
        "ingressclasses.networking.k8s.io": [ingress_class],
        "services": [
            _cr("v1", "Service", "kubernetes", "default", spec={
                "clusterIP": "10.96.0.1", "ports": [{"name": "https", "port": 443, "protocol": "TCP",
                                                     "targetPort": 6443}], "type": "ClusterIP"},
                status={"loadBalancer": {}}),
            _cr("v1", "Service", "ingress-nginx-controller", "ingress-nginx", spec={
                "clusterIP": "10.96.12.40", "externalTrafficPolicy": "Cluster",
                "ports": [{"name": "https", "nodePort": 31443, "port": 443, "protocol": "TCP", "targetPort": "https"}],
                "type": "LoadBalancer"}, status={"loadBalancer": {"ingress": [{"ip": str(k8s.get(
                    "lb_address", "192.0.2.10")), "ipMode": "VIP"}]}}),
        ],
        "ipaddresspools.metallb.io": [_cr("metallb.io/v1beta1", "IPAddressPool", "default-pool", "metallb-system",
                                          spec={"addresses": ["192.0.2.10-192.0.2.50"], "autoAssign": True})],
        "configmaps": [
            _cr("v1", "ConfigMap", "kueue-manager-config", "kueue-system", data={"controller_manager_config.yaml":
                                                                                 kueue_config}),
            _cr("v1", "ConfigMap", "rdma-devices", "nvidia-network-operator", data={"config.json": rdma_config}),
            _cr("v1", "ConfigMap", "volcano-scheduler-configmap", "volcano-system",
                data={"volcano-scheduler.conf": volcano_config}),
        ],
        "topologies.kueue.x-k8s.io": [_cr("kueue.x-k8s.io/v1alpha1", "Topology", "default", spec={"levels": [
            {"nodeLabel": "network.topology.nvidia.com/block"}, {"nodeLabel": "kubernetes.io/hostname"}]})],
        "resourceflavors.kueue.x-k8s.io": [
            _cr("kueue.x-k8s.io/v1beta1", "ResourceFlavor", "mi300x", spec={
                "nodeLabels": {"amd.com/gpu.product-name": "AMD_Instinct_MI300X"}, "topologyName": "default"})
            if amd else
            _cr("kueue.x-k8s.io/v1beta1", "ResourceFlavor", "h100", spec={
                "nodeLabels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}, "topologyName": "default"})],
        "hypernodes.topology.volcano.sh": [],
        "network-attachment-definitions.k8s.cni.cncf.io": nads,
        "nicclusterpolicies.mellanox.com": [_cr("mellanox.com/v1alpha1", "NicClusterPolicy", "nic-cluster-policy",
                                                spec={"rdmaSharedDevicePlugin": {
                                                    "config": rdma_config, "image": "k8s-rdma-shared-dev-plugin",
                                                    "repository": "ghcr.io/mellanox", "version": "v1.5.2"}},
                                                status={"state": "ready"})],
    }
    if amd:
        objects["deviceconfigs.amd.com"] = [amd_device_config(settings)]
    else:
        objects["clusterpolicies.nvidia.com"] = [_cr("nvidia.com/v1", "ClusterPolicy", "cluster-policy",
                                                     spec={"dcgmExporter": {"enabled": True,
                                                                            "serviceMonitor": {"enabled": True}},
                                                           "driver": {"enabled": False}, "toolkit": {"enabled": True}},
                                                     status={"namespace": "gpu-operator", "state": "ready"})]
    tolerations = {**DEFAULT_TOLERATIONS, **(k8s.get("daemonset_tolerations") or {})}
    for ds in objects["daemonsets.apps"]:
        pod = ds["spec"]["template"]["spec"]
        if tolerations.get(ds["metadata"]["name"]):
            pod["tolerations"] = [dict(t) for t in tolerations[ds["metadata"]["name"]]]
    objects["namespaces"], objects["networkpolicies.networking.k8s.io"] = namespaces_and_policies(k8s, objects)
    crds = [r for r in CRD_RESOURCES if r[0] != "clusterpolicies"] + AMD_CRD_RESOURCES if amd else CRD_RESOURCES
    resources = [dict(zip(("name", "shortnames", "group", "version", "namespaced", "kind"), r, strict=True))
                 for r in CORE_RESOURCES + crds]
    for r in resources:
        r["shortnames"] = [s for s in r["shortnames"].split(",") if s]
    return {"enabled": True, "user": str(k8s.get("user", "tenant-a")),
            "server_version": {"gitVersion": "v1.31.4"},
            "denied": [str(d) for d in _fault(settings, "k8s_rbac_denied", []) or []],
            "admission_plugins": list(k8s.get("admission_plugins") or []),
            # finalizers the API server's (simulated) admission adds to every created pod; one nobody clears
            # leaves a deleted pod Terminating for ever (the stuck delete of orchestration.k8s.delete_hang)
            "pod_finalizers": [str(f) for f in k8s.get("pod_finalizers") or []],
            # how long the provisioner takes to create and to delete a volume (shims/k8s_volumes.py)
            "latency": pod_and_volume_latency(k8s),
            # DaemonSets whose pods fail on every node (the shim computes DaemonSet status from the nodes)
            "not_ready": sorted(down),
            "resources": resources, "objects": objects, "provisioners": provisioners,
            "helm_releases": [{"name": "amd-gpu-operator", "namespace": AMD_NAMESPACE, "revision": "1",
                               "updated": "2026-05-04 08:12:31.402817293 +0000 UTC", "status": "deployed",
                               "chart": f"gpu-operator-charts-{AMD_OPERATOR_VERSION}",
                               "app_version": AMD_OPERATOR_VERSION}] if amd else
                             [{"name": "gpu-operator", "namespace": "gpu-operator", "revision": "1",
                               "updated": "2026-05-04 08:12:31.402817293 +0000 UTC", "status": "deployed",
                               "chart": "gpu-operator-v24.9.2", "app_version": "v24.9.2"}]}


BUILTIN_NAMESPACES = ("default", "kube-node-lease", "kube-public", "kube-system")


def namespaces_and_policies(k8s: dict[str, Any], objects: dict[str, list[dict[str, Any]]]
                            ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The Namespaces (Kubernetes' own, those the objects live in, the profile's ``k8s.namespaces`` with their
    labels) and the profile's NetworkPolicies (``k8s.network_policies``) as the API server stores them."""
    extra = k8s.get("namespaces") or {}
    names = set(BUILTIN_NAMESPACES) | set(extra) | {
        (o.get("metadata") or {}).get("namespace") for items in objects.values() for o in items}
    names.discard(None)
    namespaces = []
    for name in sorted(names):
        ns = _cr("v1", "Namespace", name, spec={"finalizers": ["kubernetes"]}, status={"phase": "Active"})
        ns["metadata"]["labels"] = {**(extra.get(name) or {}), "kubernetes.io/metadata.name": name}
        namespaces.append(ns)
    policies = []
    for namespace, listed in (k8s.get("network_policies") or {}).items():
        if namespace not in names:
            raise ProfileError(f"k8s.network_policies.{namespace}: no such namespace (add it under k8s.namespaces)")
        policies += [network_policy(namespace, p) for p in listed or []]
    return namespaces, policies


def network_policy(namespace: str, policy: dict[str, Any]) -> dict[str, Any]:
    """A NetworkPolicy with networking/v1's defaults: policyTypes Ingress (and Egress with egress rules), port
    protocol TCP, empty rule lists omitted."""
    spec = json.loads(json.dumps(policy.get("spec") or {}))
    spec.setdefault("podSelector", {})
    for direction in ("ingress", "egress"):
        for rule in spec.get(direction) or []:
            for port in rule.get("ports") or []:
                port.setdefault("protocol", "TCP")
        if not spec.get(direction):
            spec.pop(direction, None)
    if not spec.get("policyTypes"):
        spec["policyTypes"] = ["Ingress", *(["Egress"] if spec.get("egress") else [])]
    obj = _cr("networking.k8s.io/v1", "NetworkPolicy", policy["name"], namespace, spec=spec)
    obj["metadata"]["generation"] = 1
    return obj


def render(settings: dict[str, Any], state: dict[str, Any], tree) -> None:
    check_settings(settings.get("k8s") or {}, TOLERABLE_DAEMONSETS)
    if not (settings.get("k8s") or {}).get("enabled"):
        return
    plugin = AMD_DEVICE_PLUGIN if state.get("amd") else DEVICE_PLUGIN
    not_ready = [plugin] if _fault(settings, "k8s_gpus_unadvertised", False) else []
    tree.file(f"{API_DIR}/node.json", json.dumps({"object": node_object(settings, state), "not_ready": not_ready},
                                                 indent=1))
    tree.file(f"{API_DIR}/api.json", json.dumps(api_state(settings, state), indent=1))
    policy = str(_fault(settings, "k8s_cpu_manager_policy", (settings.get("k8s") or {}).get("cpu_manager_policy",
                                                                                            "static")))
    # the kubelet's checkpoint: field order of its Go struct, empty entries omitted
    checkpoint = {"policyName": policy, "defaultCpuSet": "0-223" if policy == "static" else "",
                  "checksum": 1353318690 if policy == "none" else 2873474036}
    tree.file("/var/lib/kubelet/cpu_manager_state", json.dumps(checkpoint, separators=(",", ":")), 0o600)
