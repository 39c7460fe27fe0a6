"""Kubernetes API objects for the audit's unit tests, in the shapes ``kubectl get ... -o json`` prints them (a
``List`` with ``apiVersion``/``kind`` filled in per item); node objects carry GPU Feature Discovery labels as
in the corpus (kubectl-nodes). :func:`healthy_objects` is a cluster every Kubernetes check passes on.
"""

from __future__ import annotations

import json


def meta(name, namespace=None, labels=None, annotations=None):
    out = {"name": name, "uid": f"uid-{name}", "resourceVersion": "4711",
           "creationTimestamp": "2026-05-01T10:00:00Z"}
    if namespace:
        out["namespace"] = namespace
    if labels:
        out["labels"] = labels
    if annotations:
        out["annotations"] = annotations
    return out


def klist(*items):
    return json.dumps({"apiVersion": "v1", "items": list(items), "kind": "List",
                       "metadata": {"resourceVersion": ""}}, indent=4)


GFD_LABELS = {"nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
              "nvidia.com/gpu.count": "8", "feature.node.kubernetes.io/pci-10de.present": "true",
              "feature.node.kubernetes.io/pci-15b3.present": "true"}


def node(name, gpus=8, labels=None, extra_alloc=None, annotations=None):
    alloc = {"cpu": "190", "memory": "2113404580Ki", "pods": "110", "ephemeral-storage": "3377630900Ki"}
    labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", **(labels or {})}
    if gpus is not None:
        alloc["nvidia.com/gpu"] = str(gpus)
        labels.update(GFD_LABELS)
    alloc.update(extra_alloc or {})
    return {"apiVersion": "v1", "kind": "Node", "metadata": meta(name, labels=labels, annotations=annotations),
            "spec": {"podCIDR": "10.244.1.0/24", "providerID": ""},
            "status": {"allocatable": alloc, "capacity": dict(alloc),
                       "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
                       "nodeInfo": {"kubeletVersion": "v1.31.4", "containerRuntimeVersion": "containerd://1.7.24"}}}


def workload(kind, name, namespace, image, ready=1, desired=1, env=None, args=None, host_paths=()):
    container = {"name": name, "image": image, "imagePullPolicy": "IfNotPresent"}
    if env:
        container["env"] = [{"name": k, "value": v} for k, v in env.items()]
    if args:
        container["args"] = args
    pod = {"containers": [container],
           "volumes": [{"name": f"v{i}", "hostPath": {"path": p, "type": ""}} for i, p in enumerate(host_paths)]}
    obj = {"apiVersion": "apps/v1", "kind": kind,
           "metadata": meta(name, namespace, labels={"app.kubernetes.io/name": name}),
           "spec": {"selector": {"matchLabels": {"app": name}}, "template": {"metadata": {"labels": {"app": name}},
                                                                              "spec": pod}}}
    if kind == "DaemonSet":
        obj["status"] = {"currentNumberScheduled": desired, "desiredNumberScheduled": desired,
                         "numberAvailable": ready, "numberReady": ready, "numberMisscheduled": 0}
    else:
        obj["spec"]["replicas"] = desired
        obj["status"] = {"replicas": desired, "availableReplicas": ready, "observedGeneration": 1}
        if ready:
            obj["status"]["readyReplicas"] = ready
    return obj


def storage_class(name, provisioner, default=False, binding="WaitForFirstConsumer", reclaim="Delete"):
    ann = {"storageclass.kubernetes.io/is-default-class": "true"} if default else None
    return {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": meta(name, annotations=ann),
            "provisioner": provisioner, "reclaimPolicy": reclaim, "volumeBindingMode": binding}


def csidriver(name):
    return {"apiVersion": "storage.k8s.io/v1", "kind": "CSIDriver", "metadata": meta(name),
            "spec": {"attachRequired": False, "podInfoOnMount": False, "volumeLifecycleModes": ["Persistent"]}}


def pvc(name, modes, phase, sc="shared-fs"):
    spec = {"accessModes": modes, "resources": {"requests": {"storage": "10Ti"}}, "volumeMode": "Filesystem"}
    if sc:
        spec["storageClassName"] = sc
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": meta(name, "training"),
            "spec": spec, "status": {"phase": phase}}


def ingress_class(name, controller, default=False):
    ann = {"ingressclass.kubernetes.io/is-default-class": "true"} if default else None
    return {"apiVersion": "networking.k8s.io/v1", "kind": "IngressClass", "metadata": meta(name, annotations=ann),
            "spec": {"controller": controller}}


def service(name, namespace, kind="ClusterIP", address=None):
    status = {"loadBalancer": {"ingress": [{"ip": address, "ipMode": "VIP"}]} if address else {}}
    return {"apiVersion": "v1", "kind": "Service", "metadata": meta(name, namespace),
            "spec": {"type": kind, "clusterIP": "10.96.0.10", "ports": [{"port": 443, "protocol": "TCP"}]},
            "status": status}


def nad(name, config, resource=None):
    ann = {"k8s.v1.cni.cncf.io/resourceName": resource} if resource else None
    return {"apiVersion": "k8s.cni.cncf.io/v1", "kind": "NetworkAttachmentDefinition",
            "metadata": meta(name, "default", annotations=ann), "spec": {"config": json.dumps(config)}}


def configmap(name, namespace, data):
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta(name, namespace), "data": data}


RDMA_DEVICES = json.dumps({"periodicUpdateInterval": 300, "configList": [
    {"resourceName": "rdma_shared_device_a", "rdmaHcaMax": 63, "selectors": {"ifNames": ["ens1f0"]}}]})


def dra_object(kind, name, namespace=None, spec=None):
    return {"apiVersion": "resource.k8s.io/v1beta1", "kind": kind, "metadata": meta(name, namespace),
            "spec": spec or {}}


def cr(api, kind, name, namespace=None, spec=None, status=None):
    return {"apiVersion": api, "kind": kind, "metadata": meta(name, namespace), "spec": spec or {},
            "status": status or {}}


def apps_object(kind, name, namespace, labels, containers, ready, desired, init=(), selector=None, **pod):
    """A Deployment/DaemonSet/StatefulSet as ``kubectl get -o json`` prints it; ``containers`` are
    (name, image) pairs in the pod template's order."""
    def spec_of(cname, image):
        return {"name": cname, "image": image, "imagePullPolicy": "IfNotPresent", "resources": {},
                "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File"}

    selector = selector or {k: v for k, v in labels.items() if k in ("app.kubernetes.io/name",
                                                                    "app.kubernetes.io/instance")}
    template = {"containers": [spec_of(n, i) for n, i in containers], "dnsPolicy": "ClusterFirst",
                "restartPolicy": "Always", "schedulerName": "default-scheduler", "securityContext": {},
                "terminationGracePeriodSeconds": 30, **pod}
    if init:
        template["initContainers"] = [spec_of(n, i) for n, i in init]
    obj = {"apiVersion": "apps/v1", "kind": kind,
           "metadata": {**meta(name, namespace, labels=labels), "generation": 1},
           "spec": {"revisionHistoryLimit": 10, "selector": {"matchLabels": selector},
                    "template": {"metadata": {"labels": dict(selector)}, "spec": template}}}
    if kind == "DaemonSet":
        obj["spec"]["updateStrategy"] = {"rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1},
                                         "type": "RollingUpdate"}
        obj["status"] = {"currentNumberScheduled": desired, "desiredNumberScheduled": desired,
                         "numberAvailable": ready, "numberMisscheduled": 0, "numberReady": ready,
                         "observedGeneration": 1, "updatedNumberScheduled": desired}
        if desired > ready:
            obj["status"]["numberUnavailable"] = desired - ready
            if not ready:
                del obj["status"]["numberAvailable"]
        return obj
    obj["spec"]["replicas"] = desired
    obj["status"] = {"observedGeneration": 1, "replicas": desired, "updatedReplicas": desired}
    if kind == "StatefulSet":
        revision = f"{name}-7b9f6c8d4"
        obj["spec"].update(podManagementPolicy="Parallel", serviceName=pod.pop("serviceName", "prometheus-operated"))
        obj["status"].update(collisionCount=0, currentReplicas=desired, currentRevision=revision,
                             updateRevision=revision)
    if ready:
        obj["status"].update(availableReplicas=ready, readyReplicas=ready)
    return obj


def helm_labels(name, chart, version, release="kube-prometheus-stack", **extra):
    return {"app.kubernetes.io/instance": release, "app.kubernetes.io/managed-by": "Helm",
            "app.kubernetes.io/name": name, "app.kubernetes.io/part-of": name, "app.kubernetes.io/version": version,
            "helm.sh/chart": chart, "release": release, **extra}


RELOADER = "quay.io/prometheus-operator/prometheus-config-reloader:v0.78.2"


def node_exporter(ready=4, desired=4, namespace="monitoring"):
    return apps_object("DaemonSet", "kube-prometheus-stack-prometheus-node-exporter", namespace,
                       helm_labels("prometheus-node-exporter", "prometheus-node-exporter-4.42.0", "1.8.2",
                                   **{"app.kubernetes.io/component": "metrics", "jobLabel": "node-exporter"}),
                       [("node-exporter", "quay.io/prometheus/node-exporter:v1.8.2")], ready, desired,
                       hostNetwork=True, hostPID=True, nodeSelector={"kubernetes.io/os": "linux"},
                       tolerations=[{"effect": "NoSchedule", "operator": "Exists"}])


def prometheus_operator(ready=1):
    release = "kube-prometheus-stack"
    return apps_object("Deployment", f"{release}-operator", "monitoring",
                       helm_labels(f"{release}-prometheus-operator", f"{release}-66.2.1", "66.2.1",
                                   app=f"{release}-operator", heritage="Helm",
                                   **{"app.kubernetes.io/component": "prometheus-operator",
                                      "app.kubernetes.io/part-of": release}),
                       [(release, "quay.io/prometheus-operator/prometheus-operator:v0.78.2")], ready, 1,
                       selector={"app": f"{release}-operator", "release": release})


def prometheus_statefulset(ready=1):
    name = "kube-prometheus-stack-prometheus"
    labels = {"app": name, "app.kubernetes.io/instance": name, "app.kubernetes.io/managed-by": "prometheus-operator",
              "app.kubernetes.io/name": "prometheus", "app.kubernetes.io/part-of": "kube-prometheus-stack",
              "app.kubernetes.io/version": "66.2.1", "chart": "kube-prometheus-stack-66.2.1", "heritage": "Helm",
              "operator.prometheus.io/mode": "server", "operator.prometheus.io/name": name,
              "operator.prometheus.io/shard": "0", "release": "kube-prometheus-stack"}
    selector = {"app.kubernetes.io/instance": name, "app.kubernetes.io/managed-by": "prometheus-operator",
                "app.kubernetes.io/name": "prometheus", "operator.prometheus.io/name": name,
                "operator.prometheus.io/shard": "0", "prometheus": name}
    return apps_object("StatefulSet", f"prometheus-{name}", "monitoring", labels,
                       [("prometheus", "quay.io/prometheus/prometheus:v2.55.1"), ("config-reloader", RELOADER)],
                       ready, 1, init=[("init-config-reloader", RELOADER)], selector=selector,
                       serviceAccountName=name)


def grafana(ready=1):
    sidecar = "quay.io/kiwigrid/k8s-sidecar:1.28.0"
    return apps_object("Deployment", "kube-prometheus-stack-grafana", "monitoring",
                       helm_labels("grafana", "grafana-8.6.3", "11.3.1"),
                       [("grafana-sc-dashboard", sidecar), ("grafana-sc-datasources", sidecar),
                        ("grafana", "docker.io/grafana/grafana:11.3.1")], ready, 1)


def kube_prometheus_stack():
    """kube-prometheus-stack 66.2.1 in ``monitoring``: the workloads Helm and the Prometheus Operator create."""
    return [node_exporter(), prometheus_operator(), prometheus_statefulset(), grafana(),
            apps_object("StatefulSet", "alertmanager-kube-prometheus-stack-alertmanager", "monitoring",
                        {"alertmanager": "kube-prometheus-stack-alertmanager",
                         "app.kubernetes.io/managed-by": "prometheus-operator",
                         "app.kubernetes.io/name": "alertmanager",
                         "app.kubernetes.io/instance": "kube-prometheus-stack-alertmanager"},
                        [("alertmanager", "quay.io/prometheus/alertmanager:v0.27.0"), ("config-reloader", RELOADER)],
                        1, 1, init=[("init-config-reloader", RELOADER)], serviceName="alertmanager-operated"),
            apps_object("Deployment", "kube-prometheus-stack-kube-state-metrics", "monitoring",
                        helm_labels("kube-state-metrics", "kube-state-metrics-5.27.0", "2.14.0"),
                        [("kube-state-metrics", "registry.k8s.io/kube-state-metrics/kube-state-metrics:v2.14.0")],
                        1, 1)]


NODE_NAMES = ["gpu-a01", "gpu-a02", "gpu-b01", "gpu-b02"]


def healthy_objects():
    """A healthy 4-node H100 cluster as the API shows it."""
    topo = {"network.topology.nvidia.com/block": "b1", "cloud.google.com/gce-topology-block": "blk-1"}
    return {
        "nodes": [node(n, labels={**topo, "network.topology.nvidia.com/block": n[4]},
                       extra_alloc={"rdma/rdma_shared_device_a": "63"}) for n in NODE_NAMES],
        "workloads": [
            workload("Deployment", "gpu-operator", "gpu-operator", "nvcr.io/nvidia/gpu-operator:v24.9.2"),
            workload("DaemonSet", "nvidia-device-plugin-daemonset", "gpu-operator",
                     "nvcr.io/nvidia/k8s-device-plugin:v0.17.0", 4, 4),
            workload("DaemonSet", "nvidia-dcgm-exporter", "gpu-operator",
                     "nvcr.io/nvidia/k8s/dcgm-exporter:3.3.9-3.6.1-ubuntu22.04", 4, 4,
                     env={"DCGM_EXPORTER_LISTEN": ":9400", "DCGM_EXPORTER_KUBERNETES": "true"},
                     host_paths=["/var/lib/kubelet/pod-resources"]),
            workload("Deployment", "nvidia-network-operator", "nvidia-network-operator",
                     "nvcr.io/nvidia/cloud-native/network-operator:v24.10.0"),
            workload("DaemonSet", "rdma-shared-dp-ds", "nvidia-network-operator",
                     "ghcr.io/mellanox/k8s-rdma-shared-dev-plugin:v1.5.2", 4, 4),
            workload("Deployment", "kueue-controller-manager", "kueue-system", "registry.k8s.io/kueue/kueue:v0.14.2"),
            workload("Deployment", "volcano-scheduler", "volcano-system", "docker.io/volcanosh/vc-scheduler:v1.12.1"),
            workload("Deployment", "mpi-operator", "mpi-operator", "docker.io/mpioperator/mpi-operator:0.6.0"),
            workload("Deployment", "ingress-nginx-controller", "ingress-nginx",
                     "registry.k8s.io/ingress-nginx/controller:v1.12.0", 2, 2),
            workload("Deployment", "controller", "metallb-system", "quay.io/metallb/controller:v0.14.9"),
            *kube_prometheus_stack(),
        ],
        "storage": [storage_class("local-path", "rancher.io/local-path", default=True),
                    storage_class("shared-fs", "nfs.csi.k8s.io", binding="Immediate"), csidriver("nfs.csi.k8s.io"),
                    pvc("datasets", ["ReadWriteMany"], "Bound")],
        "services": [ingress_class("nginx", "k8s.io/ingress-nginx", default=True),
                     service("kubernetes", "default"),
                     service("ingress-nginx-controller", "ingress-nginx", "LoadBalancer", "192.0.2.10")],
        "configmaps": [configmap("rdma-devices", "nvidia-network-operator", {"config.json": RDMA_DEVICES}),
                       configmap("volcano-scheduler-configmap", "volcano-system", {"volcano-scheduler.conf": (
                           'actions: "enqueue, allocate, backfill"\ntiers:\n- plugins:\n  - name: priority\n'
                           '  - name: gang\n- plugins:\n  - name: predicates\n  - name: binpack\n')})],
        "topologies": [cr("kueue.x-k8s.io/v1alpha1", "Topology", "default",
                          spec={"levels": [{"nodeLabel": "network.topology.nvidia.com/block"},
                                           {"nodeLabel": "kubernetes.io/hostname"}]})],
        "flavors": [cr("kueue.x-k8s.io/v1beta1", "ResourceFlavor", "h100",
                       spec={"nodeLabels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
                             "topologyName": "default"})],
        "nads": [nad("rdma-net", {"cniVersion": "0.3.1", "name": "rdma-net", "type": "macvlan", "master": "ens1f0",
                                  "ipam": {"type": "whereabouts", "range": "192.168.2.0/24"}})],
        "nicpolicies": [cr("mellanox.com/v1alpha1", "NicClusterPolicy", "nic-cluster-policy",
                           spec={"rdmaSharedDevicePlugin": {"image": "k8s-rdma-shared-dev-plugin",
                                                            "config": RDMA_DEVICES}},
                           status={"state": "ready"})],
        "clusterpolicies": [cr("nvidia.com/v1", "ClusterPolicy", "cluster-policy",
                               spec={"dcgmExporter": {"enabled": True, "serviceMonitor": {"enabled": True}}},
                               status={"state": "ready"})],
    }
