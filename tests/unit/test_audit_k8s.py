"""Kubernetes audit checks: every check gives pass, warn, fail, skip and error from kubectl JSON we wrote.

The API objects below follow the real shapes `kubectl get ... -o json` prints (a ``List`` with
``apiVersion``/``kind`` filled in per item); node objects carry GPU Feature Discovery labels as in the
corpus (kubectl-nodes).
"""

from __future__ import annotations

import json

import pytest

from clustereval import parsers
from clustereval.parsers.probe_key_values import key_values
from clustereval.results import CLUSTER_SUBJECT
from tests.conftest import read_corpus
from tests.helpers import judge, probe

# ------------------------------------------------------------------ faithful API objects

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


# ------------------------------------------------------------------ the storage provisioning test's output

TEST_PVC = "clustereval-pvc-1746346351-3f9a1c"
TEST_PVC_LABELS = {"app.kubernetes.io/managed-by": "clustereval", "clustereval/test": "pvc-provisioning"}
TEST_VOLUME = "pvc-6c1e2f4a-93b7-4d2e-8f0a-5b7c9d1e3f21"
NFS_COMPONENT = "nfs.csi.k8s.io_csi-nfs-controller-6d8f9b7c5d-q4x7m_0f6b8c1e-2d4a-4e5f-9a7b-3c2d1e0f9a8b"
EXTERNAL_PROVISIONING = ("Waiting for a volume to be created either by the external provisioner 'nfs.csi.k8s.io' or "
                         "manually by the system administrator. If volume creation is delayed, please verify that "
                         "the provisioner is running and correctly registered.")
NFS_MOUNT_FAILED = ('failed to provision volume with StorageClass "shared-fs": rpc error: code = Internal desc = '
                    "failed to mount nfs server: rpc error: code = Internal desc = mount failed: exit status 32\n"
                    "Mounting command: mount\nMounting arguments: -t nfs -o nfsvers=4.1 "
                    "nfs.storage.internal:/export/shared /tmp/pvc-mount\nOutput: mount.nfs: Connection timed out\n")


def own_claim(phase, sc="shared-fs", provisioner="nfs.csi.k8s.io", namespace="default"):
    """The test claim as `kubectl get pvc NAME -o json` prints it (kubectl 1.31: sorted keys, 4-space indent,
    managedFields hidden); ``provisioner`` None for a class that binds on first consumer (not yet annotated)."""
    annotations = {"clustereval/purpose": "storage provisioning test of the clustereval audit, deleted when the "
                                          "test ends"}
    if provisioner:
        annotations.update({"volume.beta.kubernetes.io/storage-provisioner": provisioner,
                            "volume.kubernetes.io/storage-provisioner": provisioner})
    spec = {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "1Gi"}}, "volumeMode": "Filesystem"}
    if sc:
        spec["storageClassName"] = sc
    status = {"phase": phase}
    if phase == "Bound":
        annotations.update({"pv.kubernetes.io/bind-completed": "yes", "pv.kubernetes.io/bound-by-controller": "yes"})
        spec["volumeName"] = TEST_VOLUME
        status = {"accessModes": ["ReadWriteMany"], "capacity": {"storage": "1Gi"}, "phase": "Bound"}
    metadata = {**meta(TEST_PVC, namespace, labels=TEST_PVC_LABELS, annotations=annotations),
                "finalizers": ["kubernetes.io/pvc-protection"]}
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": metadata, "spec": spec, "status": status}


def claim_event(reason, message, kind="Normal", component="persistentvolume-controller", count=1, seq=0):
    """A core/v1 Event about the test claim, as `kubectl get events -o json` lists it."""
    return {"apiVersion": "v1", "count": count, "eventTime": None, "firstTimestamp": "2026-05-04T08:12:31Z",
            "involvedObject": {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "name": TEST_PVC,
                               "namespace": "default", "resourceVersion": "4711", "uid": f"uid-{TEST_PVC}"},
            "kind": "Event", "lastTimestamp": "2026-05-04T08:12:31Z", "message": message,
            "metadata": {"creationTimestamp": "2026-05-04T08:12:31Z", "name": f"{TEST_PVC}.183c2f1a9b{seq:06x}",
                         "namespace": "default", "resourceVersion": str(4712 + seq), "uid": f"uid-ev-{seq}"},
            "reason": reason, "reportingComponent": component, "reportingInstance": "",
            "source": {"component": component}, "type": kind}


BOUND_EVENTS = [claim_event("ExternalProvisioning", EXTERNAL_PROVISIONING),
                claim_event("Provisioning",
                            f'External provisioner is provisioning volume for claim "default/{TEST_PVC}"',
                            component=NFS_COMPONENT, seq=1),
                claim_event("ProvisioningSucceeded", f"Successfully provisioned volume {TEST_VOLUME}",
                            component=NFS_COMPONENT, seq=2)]
FAILED_EVENTS = [*BOUND_EVENTS[:2], claim_event("ProvisioningFailed", NFS_MOUNT_FAILED, "Warning", NFS_COMPONENT,
                                                count=4, seq=3)]
WFFC_EVENTS = [claim_event("WaitForFirstConsumer", "waiting for first consumer to be created before binding")]


def one_line(doc):
    return json.dumps(doc, indent=4, sort_keys=True).replace("\n", "")


def pvc_test_out(phase="Bound", events=BOUND_EVENTS, sc="shared-fs", provisioner="nfs.csi.k8s.io", default=0,
                 binding="Immediate", reclaim="Delete", reason="rwx", create_rc=0, create=None, delete_rc=0,
                 delete=None, waited=0, limit=30, end=True, claim=None):
    """What the k8s_pvc_test probe prints (key=value lines, the claim and its events as one-line JSON)."""
    lines = ["classes_rc=0", "class_seen=local-path rancher.io/local-path WaitForFirstConsumer Delete default",
             f"class_seen=shared-fs nfs.csi.k8s.io {binding} {reclaim}",
             f"class={sc or ''}", f"class_provisioner={provisioner or ''}", f"class_binding={binding}",
             f"class_reclaim={reclaim}", f"class_default={default}", f"class_reason={reason}",
             f"name={TEST_PVC}", "namespace=", f"wait_limit_s={limit}",
             f"create_rc={create_rc}", f"create={create or f'persistentvolumeclaim/{TEST_PVC} created'}"]
    if create_rc == 0:
        claim = claim or own_claim(phase, sc, provisioner if binding == "Immediate" else None)
        lines += [f"waited_s={waited}", "get_rc=0", f"phase={phase}", "pvc_json=" + one_line(claim),
                  "events_rc=0",
                  "events_json=" + one_line({"apiVersion": "v1", "items": list(events), "kind": "List",
                                             "metadata": {"resourceVersion": ""}})]
    lines += [f"delete_rc={delete_rc}"]
    if delete_rc == 0 and create_rc == 0:
        lines.append(f'delete={delete or f"persistentvolumeclaim {chr(34)}{TEST_PVC}{chr(34)} deleted"}')
    elif delete:
        lines.append(f"delete={delete}")
    lines.append("leftovers=")
    if end:
        lines.append("end=ok")
    return "\n".join(lines) + "\n"


NOT_TRIED = ("skipped=actions are switched off (clustereval_audit_allow_actions=false): no test PVC created\n"
             "end=ok\n")


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


API_RESOURCES = """NAME                              SHORTNAMES   APIVERSION                        NAMESPACED   KIND
nodes                             no           v1                                false        Node
pods                              po           v1                                true         Pod
services                          svc          v1                                true         Service
deployments                       deploy       apps/v1                           true         Deployment
jobs                                           batch/v1                          true         Job
storageclasses                    sc           storage.k8s.io/v1                 false        StorageClass
podgroups                         pg,podgroup  scheduling.volcano.sh/v1beta1     true         PodGroup
hypernodes                        hn           topology.volcano.sh/v1alpha1      false        HyperNode
mpijobs                                        kubeflow.org/v2beta1              true         MPIJob
topologies                                     kueue.x-k8s.io/v1alpha1           false        Topology
workloads                         wl           kueue.x-k8s.io/v1beta1            true         Workload
computedomains                                 resource.nvidia.com/v1beta1       true         ComputeDomain
deviceclasses                                  resource.k8s.io/v1beta1           false        DeviceClass
prometheuses                      prom         monitoring.coreos.com/v1          true         Prometheus
servicemonitors                   smon         monitoring.coreos.com/v1          true         ServiceMonitor
podmonitors                       pmon         monitoring.coreos.com/v1          true         PodMonitor
"""

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


CAN_I_ALL_YES = "\n".join(f"{q}: yes" for q in (
    "list nodes", "list pods --all-namespaces", "create pods", "create jobs.batch", "create persistentvolumeclaims",
    "create services", "create deployments.apps", "create secrets", "list secrets")) + "\n"

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


def to_probes(objs, can_i=CAN_I_ALL_YES, api=API_RESOURCES, absent=(), overrides=None, pvc_test=None):
    """The audit-k8s probes as the collect module returns them; ``pvc_test``: the provisioning test's output
    (default: its claim bound), ``False`` when the probe was not collected."""
    def p(name, stdout, parser="kubectl-json", rc=0, stderr=""):
        return {"name": name, "cmd": f"kubectl ({name})", "tool": "kubectl", "rc": rc, "stdout": stdout,
                "stderr": stderr, "parser": parser, "artifact": f"raw/_cluster/{name}.json"}

    probes = {
        "k8s_version": p("k8s_version", json.dumps({"clientVersion": {"gitVersion": "v1.31.4"},
                                                   "serverVersion": {"major": "1", "minor": "31",
                                                                     "gitVersion": "v1.31.4"}})),
        "k8s_api_resources": p("k8s_api_resources", api, "kubectl-api-resources"),
        "k8s_nodes": p("k8s_nodes", klist(*objs["nodes"])),
        "k8s_workloads": p("k8s_workloads", klist(*objs["workloads"])),
        "k8s_storage": p("k8s_storage", klist(*objs["storage"])),
        "k8s_services": p("k8s_services", klist(*objs["services"])),
        "k8s_gatewayclasses": p("k8s_gatewayclasses", klist()),
        "k8s_metallb_pools": p("k8s_metallb_pools", klist(cr("metallb.io/v1beta1", "IPAddressPool", "pool",
                                                             "metallb-system",
                                                             spec={"addresses": ["192.0.2.10-192.0.2.50"]}))),
        "k8s_can_i": p("k8s_can_i", can_i, "probe-k8s-can-i"),
        "k8s_helm": {**p("k8s_helm", 'v3.16.3+gcfd0749\n[{"name":"gpu-operator","namespace":"gpu-operator",'
                                     '"revision":"1","status":"deployed","chart":"gpu-operator-v24.9.2"}]\n',
                         "probe-k8s-helm"),
                     "tool": "helm"},
        "k8s_configmaps": p("k8s_configmaps", "".join(klist(c) for c in objs["configmaps"]) or klist()),
        "k8s_kueue_topologies": p("k8s_kueue_topologies", klist(*objs["topologies"])),
        "k8s_kueue_flavors": p("k8s_kueue_flavors", klist(*objs["flavors"])),
        "k8s_volcano_hypernodes": p("k8s_volcano_hypernodes", klist(*objs.get("hypernodes", []))),
        "k8s_dra": p("k8s_dra", klist(*objs.get("dra", []))),
        "k8s_computedomains": p("k8s_computedomains", klist(*objs.get("computedomains", []))),
        "k8s_nads": p("k8s_nads", klist(*objs["nads"])),
        "k8s_nicclusterpolicies": p("k8s_nicclusterpolicies", klist(*objs["nicpolicies"])),
        "k8s_clusterpolicies": p("k8s_clusterpolicies", klist(*objs["clusterpolicies"])),
        "k8s_pvc_test": {**p("k8s_pvc_test", pvc_test_out() if pvc_test is None else pvc_test or "",
                             "probe-k8s-pvc-test"),
                         "artifact": "raw/_cluster/kubectl-pvc-provisioning-test.txt", "timeout": 150},
    }
    if pvc_test is False:
        del probes["k8s_pvc_test"]
    for name in absent:  # the kind's CRD is not installed
        resource = probes[name]["cmd"]
        probes[name].update(rc=1, stdout="",
                            stderr=f'error: the server doesn\'t have a resource type "{resource}"\n')
    for name, fields in (overrides or {}).items():
        probes[name].update(fields)
    return probes


def run(check_id, probes=None, **options):
    options.setdefault("harness", "k8s")
    return judge(check_id, probes, subject=CLUSTER_SUBJECT, **options)


def status(check_id, objs=None, **kw):
    return run(check_id, to_probes(objs or healthy_objects(), **kw))


CLUSTER_CHECKS = ["audit.k8s.rbac_access", "audit.k8s.helm_access", "audit.k8s.vcluster_tenancy",
                  "audit.k8s.topology", "audit.k8s.gang_scheduling", "audit.k8s.bin_packing",
                  "audit.k8s.ingress_controller", "audit.k8s.load_balancer", "audit.k8s.default_storage_class",
                  "audit.k8s.csi_rwx", "audit.k8s.gpu_operator", "audit.k8s.network_operator",
                  "audit.k8s.mpi_operator", "audit.k8s.workload_schedulers", "audit.k8s.gpu_job_attribution",
                  "audit.k8s.rdma_exposure", "audit.k8s.monitoring_stack"]


# ------------------------------------------------------------------ every check, every status

@pytest.mark.parametrize("check_id", CLUSTER_CHECKS)
def test_healthy_cluster_passes(check_id):
    result = status(check_id)
    assert result["status"] == "pass", result["summary"]


@pytest.mark.parametrize("check_id", [*CLUSTER_CHECKS, "audit.k8s.multinode_nvlink"])
def test_skip_when_no_kubernetes_facts_were_collected(check_id):
    result = run(check_id, {})
    assert result["status"] == "skip" and "not a Kubernetes cluster" in result["summary"]


@pytest.mark.parametrize("check_id", CLUSTER_CHECKS)
def test_skip_on_other_harnesses(check_id):
    assert run(check_id, to_probes(healthy_objects()), harness="slurm")["status"] == "skip"


@pytest.mark.parametrize("check_id", [c for c in CLUSTER_CHECKS if c not in (
    "audit.k8s.rbac_access", "audit.k8s.helm_access")])
def test_error_when_the_api_server_is_unreachable(check_id):
    refused = {"rc": 1, "stdout": "", "stderr": "The connection to the server 10.0.0.1:6443 was refused - did you "
                                                "specify the right host or port?\n"}
    probes = to_probes(healthy_objects(), overrides={n: refused for n in ("k8s_nodes", "k8s_storage",
                                                                         "k8s_services", "k8s_workloads")})
    assert run(check_id, probes)["status"] == "error"


def test_error_on_truncated_kubectl_json():
    probes = to_probes(healthy_objects())
    probes["k8s_nodes"]["stdout"] = probes["k8s_nodes"]["stdout"][:900]
    result = run("audit.k8s.gpu_operator", probes)
    assert result["status"] == "error" and "truncated" in result["summary"]


def test_forbidden_read_is_a_warn_naming_it():
    forbidden = {"rc": 1, "stdout": "", "stderr": 'Error from server (Forbidden): storageclasses.storage.k8s.io is '
                                                  'forbidden: User "tenant-a" cannot list resource "storageclasses" '
                                                  'in API group "storage.k8s.io" at the cluster scope\n'}
    result = run("audit.k8s.default_storage_class", to_probes(healthy_objects(), overrides={"k8s_storage": forbidden}))
    assert result["status"] == "warn" and "tenant-a" in result["summary"]


def test_forbidden_configmaps_make_the_rdma_check_warn():
    probes = to_probes(healthy_objects(), overrides={"k8s_configmaps": {
        "stdout": "", "stderr": 'Error from server (Forbidden): configmaps is forbidden: User "tenant-a" cannot list '
                                'resource "configmaps" in API group "" at the cluster scope\n'}})
    result = run("audit.k8s.rdma_exposure", probes)
    assert result["status"] == "warn" and "configmaps" in result["summary"]


class TestRbac:
    def test_fail_when_pods_cannot_be_created(self):
        result = status("audit.k8s.rbac_access", can_i=CAN_I_ALL_YES.replace("create pods: yes", "create pods: no"))
        assert result["status"] == "fail" and "create pods" in result["summary"]

    def test_warn_when_nodes_cannot_be_listed(self):
        result = status("audit.k8s.rbac_access", can_i=CAN_I_ALL_YES.replace("list nodes: yes", "list nodes: no"))
        assert result["status"] == "warn" and "list nodes" in result["summary"]

    def test_error_when_can_i_cannot_reach_the_api(self):
        text = "".join(f"{q}: error: You must be logged in to the server (Unauthorized)\n"
                       for q in ("list nodes", "create pods", "create jobs.batch"))
        assert status("audit.k8s.rbac_access", can_i=text)["status"] == "error"

    def test_skip_without_kubectl(self):
        probes = to_probes(healthy_objects(), overrides={"k8s_can_i": {"missing": True, "rc": 127, "stdout": ""}})
        assert run("audit.k8s.rbac_access", probes)["status"] == "skip"


class TestHelm:
    def test_fail_when_secrets_cannot_be_created(self):
        result = status("audit.k8s.helm_access",
                        can_i=CAN_I_ALL_YES.replace("create secrets: yes", "create secrets: no"))
        assert result["status"] == "fail" and "create secrets" in result["summary"]

    def test_warn_on_helm_2(self):
        result = status("audit.k8s.helm_access", overrides={"k8s_helm": {"stdout": "v2.17.0+ga690bad\n[]\n"}})
        assert result["status"] == "warn"

    def test_skip_when_helm_is_not_installed_and_rbac_allows_it(self):
        result = status("audit.k8s.helm_access", overrides={"k8s_helm": {"missing": True, "rc": 127, "stdout": ""}})
        assert result["status"] == "skip" and "helm" in result["summary"]

    def test_error_on_garbage(self):
        result = status("audit.k8s.helm_access", overrides={"k8s_helm": {"stdout": "v3.16.3\n{not json"}})
        assert result["status"] == "error"


class TestVcluster:
    def objs(self, *tenants, fake=False):
        objs = healthy_objects()
        for i, n in enumerate(objs["nodes"]):
            labels = n["metadata"]["labels"]
            labels["vcluster.loft.sh/managed-by"] = tenants[i % len(tenants)]
            if fake:
                labels["vcluster.loft.sh/fake-node"] = "true"
        return objs

    def test_pass_for_one_tenant_on_real_nodes(self):
        result = status("audit.k8s.vcluster_tenancy", self.objs("team-a"))
        assert result["status"] == "pass" and result["value"] == "vcluster"

    def test_warn_on_fake_nodes(self):
        assert status("audit.k8s.vcluster_tenancy", self.objs("team-a", fake=True))["status"] == "warn"

    def test_fail_when_nodes_serve_several_tenants(self):
        result = status("audit.k8s.vcluster_tenancy", self.objs("team-a", "team-b"))
        assert result["status"] == "fail" and "team-b" in result["summary"]

    def test_skip_without_nodes(self):
        objs = healthy_objects()
        objs["nodes"] = []
        assert status("audit.k8s.vcluster_tenancy", objs)["status"] == "skip"


class TestTopology:
    def test_fail_when_a_level_label_is_on_no_gpu_node(self):
        objs = healthy_objects()
        objs["topologies"][0]["spec"]["levels"][0]["nodeLabel"] = "example.com/rack"
        result = status("audit.k8s.topology", objs)
        assert result["status"] == "fail" and "example.com/rack" in result["summary"]

    def test_warn_when_no_flavor_uses_the_topology(self):
        objs = healthy_objects()
        del objs["flavors"][0]["spec"]["topologyName"]
        assert status("audit.k8s.topology", objs)["status"] == "warn"

    def test_warn_when_labels_exist_but_nothing_consumes_them(self):
        result = status("audit.k8s.topology",
                        absent=("k8s_kueue_topologies", "k8s_kueue_flavors", "k8s_volcano_hypernodes"))
        assert result["status"] == "warn" and "network.topology.nvidia.com/block" in result["summary"]

    def test_pass_with_volcano_hypernodes(self):
        objs = healthy_objects()
        objs["topologies"] = []
        objs["hypernodes"] = [cr("topology.volcano.sh/v1alpha1", "HyperNode", "s0", spec={
            "tier": 1, "members": [{"type": "Node", "selector": {"regexMatch": {"pattern": "^gpu-"}}}]})]
        assert status("audit.k8s.topology", objs)["status"] == "pass"

    def test_skip_with_one_gpu_node(self):
        objs = healthy_objects()
        objs["nodes"] = objs["nodes"][:1]
        assert status("audit.k8s.topology", objs)["status"] == "skip"


class TestSchedulers:
    def test_gang_fail_when_volcano_is_down(self):
        objs = healthy_objects()
        objs["workloads"][6] = workload("Deployment", "volcano-scheduler", "volcano-system",
                                        "docker.io/volcanosh/vc-scheduler:v1.12.1", ready=0)
        assert status("audit.k8s.gang_scheduling", objs)["status"] == "fail"
        assert status("audit.k8s.bin_packing", objs)["status"] == "fail"
        assert status("audit.k8s.workload_schedulers", objs)["status"] == "fail"

    def test_gang_warn_without_any_gang_scheduler(self):
        objs = healthy_objects()
        objs["workloads"] = objs["workloads"][:5]
        objs["configmaps"] = objs["configmaps"][:1]  # the Volcano configuration went with Volcano
        api = "\n".join(ln for ln in API_RESOURCES.splitlines() if "scheduling.volcano" not in ln and "kueue" not in ln)
        assert status("audit.k8s.gang_scheduling", objs, api=api)["status"] == "warn"
        assert status("audit.k8s.bin_packing", objs, api=api)["status"] == "warn"
        assert status("audit.k8s.workload_schedulers", objs, api=api)["status"] == "warn"

    @pytest.mark.parametrize("check_id", ["audit.k8s.gang_scheduling", "audit.k8s.bin_packing",
                                          "audit.k8s.workload_schedulers", "audit.k8s.mpi_operator",
                                          "audit.k8s.gpu_job_attribution", "audit.k8s.rdma_exposure"])
    def test_skip_without_gpu_nodes(self, check_id):
        objs = healthy_objects()
        objs["nodes"] = [node(n, gpus=None) for n in NODE_NAMES]
        assert status(check_id, objs)["status"] == "skip"

    def test_warn_when_dra_claims_meet_an_old_kueue(self):
        objs = healthy_objects()
        objs["workloads"][5] = workload("Deployment", "kueue-controller-manager", "kueue-system",
                                        "registry.k8s.io/kueue/kueue:v0.10.1")
        objs["dra"] = [dra_object("ResourceClaimTemplate", "imex-channel", "training",
                                  {"spec": {"devices": {"requests": [{"name": "channel",
                                                                      "deviceClassName": "compute-domain-default-"
                                                                                         "channel.nvidia.com"}]}}})]
        result = status("audit.k8s.workload_schedulers", objs)
        assert result["status"] == "warn" and "v0.10.1" in result["summary"]

    def test_mpi_fail_when_crd_served_but_operator_down(self):
        objs = healthy_objects()
        objs["workloads"][7] = workload("Deployment", "mpi-operator", "mpi-operator",
                                        "docker.io/mpioperator/mpi-operator:0.6.0", ready=0)
        assert status("audit.k8s.mpi_operator", objs)["status"] == "fail"

    def test_mpi_warn_without_mpijob_api(self):
        objs = healthy_objects()
        del objs["workloads"][7]
        api = "\n".join(ln for ln in API_RESOURCES.splitlines() if "mpijobs" not in ln)
        assert status("audit.k8s.mpi_operator", objs, api=api)["status"] == "warn"

    def test_api_resources_table_kept_when_an_aggregated_api_fails(self):
        result = status("audit.k8s.mpi_operator", overrides={"k8s_api_resources": {
            "rc": 1, "stderr": "error: unable to retrieve the complete list of server APIs: metrics.k8s.io/v1beta1: "
                               "the server is currently unable to handle the request\n"}})
        assert result["status"] == "pass"


class TestServices:
    def test_ingress_fail_when_controller_down(self):
        objs = healthy_objects()
        objs["workloads"][8] = workload("Deployment", "ingress-nginx-controller", "ingress-nginx",
                                        "registry.k8s.io/ingress-nginx/controller:v1.12.0", 0, 2)
        assert status("audit.k8s.ingress_controller", objs)["status"] == "fail"

    def test_ingress_warn_without_default_class(self):
        objs = healthy_objects()
        objs["services"][0] = ingress_class("nginx", "k8s.io/ingress-nginx")
        assert status("audit.k8s.ingress_controller", objs)["status"] == "warn"

    def test_load_balancer_fail_when_every_service_is_pending(self):
        objs = healthy_objects()
        objs["services"][2] = service("ingress-nginx-controller", "ingress-nginx", "LoadBalancer")
        result = status("audit.k8s.load_balancer", objs)
        assert result["status"] == "fail" and "ingress-nginx/ingress-nginx-controller" in result["summary"]

    def test_load_balancer_warn_without_any_implementation(self):
        objs = healthy_objects()
        objs["services"] = objs["services"][:2]
        objs["workloads"] = objs["workloads"][:9]
        assert status("audit.k8s.load_balancer", objs, absent=("k8s_metallb_pools",))["status"] == "warn"

    def test_load_balancer_pass_with_metallb_pool_and_no_service(self):
        objs = healthy_objects()
        objs["services"] = objs["services"][:2]
        assert status("audit.k8s.load_balancer", objs)["status"] == "pass"


class TestStorage:
    def test_fail_without_default_class(self):
        objs = healthy_objects()
        objs["storage"][0] = storage_class("local-path", "rancher.io/local-path")
        objs["storage"].append(pvc("scratch", ["ReadWriteOnce"], "Pending", sc=None))
        result = status("audit.k8s.default_storage_class", objs)
        assert result["status"] == "fail" and "1 are" in result["summary"]

    def test_warn_with_two_defaults(self):
        objs = healthy_objects()
        objs["storage"][1] = storage_class("shared-fs", "nfs.csi.k8s.io", default=True)
        assert status("audit.k8s.default_storage_class", objs)["status"] == "warn"

    def test_skip_is_impossible_without_api_so_skip_only_when_not_k8s(self):
        assert run("audit.k8s.default_storage_class", {})["status"] == "skip"

    # the API objects alone (the provisioning test not tried: actions disabled)

    def test_rwx_fail_when_rwx_pvcs_are_all_pending(self):
        objs = healthy_objects()
        objs["storage"][3] = pvc("datasets", ["ReadWriteMany"], "Pending")
        result = status("audit.k8s.csi_rwx", objs, pvc_test=NOT_TRIED)
        assert result["status"] == "fail" and "provisioning not tried (actions disabled" in result["summary"]

    def test_rwx_warn_without_shared_provisioner(self):
        objs = healthy_objects()
        objs["storage"] = objs["storage"][:1]
        assert status("audit.k8s.csi_rwx", objs, pvc_test=NOT_TRIED)["status"] == "warn"

    def test_rwx_fail_when_the_class_names_an_uninstalled_driver(self):
        objs = healthy_objects()
        objs["storage"] = [objs["storage"][0], storage_class("lustre", "fsx.csi.aws.com"),
                           csidriver("ebs.csi.aws.com")]
        assert status("audit.k8s.csi_rwx", objs, pvc_test=NOT_TRIED)["status"] == "fail"


class TestProvisioningTest:
    """audit.k8s.csi_rwx with the storage provisioning test (probe k8s_pvc_test), cmax criterion 66."""

    def test_pass_when_the_test_claim_binds_and_is_deleted(self):
        result = status("audit.k8s.csi_rwx")
        assert result["status"] == "pass"
        assert result["summary"].startswith(f"test PVC default/{TEST_PVC} on shared-fs (nfs.csi.k8s.io) "
                                            "(ReadWriteMany, 1Gi) bound in 0 s and deleted")
        test = result["evidence"]["provisioning_test"]
        assert test["outcome"] == "bound" and test["volume"] == TEST_VOLUME and test["delete_rc"] == 0
        assert test["shared_fs_provisioner"] and [e["reason"] for e in test["events"]][-1] == "ProvisioningSucceeded"
        assert "raw/_cluster/kubectl-pvc-provisioning-test.txt" in result["artifacts"]

    def test_not_tried_when_actions_are_disabled_never_claims_it_worked(self):
        result = status("audit.k8s.csi_rwx", pvc_test=NOT_TRIED)
        assert result["status"] == "pass"  # graded from the API objects: a bound RWX claim of a tenant
        assert result["summary"].endswith("; provisioning not tried (actions disabled: "
                                          "clustereval_audit_allow_actions=false)")
        assert "test PVC" not in result["summary"] and "bound in" not in result["summary"]
        assert result["evidence"]["provisioning_test"] == {
            "outcome": "not_tried", "tried": False, "leftovers_deleted": "",
            "why": "actions disabled: clustereval_audit_allow_actions=false"}

    def test_not_tried_when_the_probe_was_not_collected(self):
        result = status("audit.k8s.csi_rwx", pvc_test=False)
        assert result["status"] == "pass" and "provisioning not tried (the provisioning test was not collected)" \
            in result["summary"]

    def test_not_tried_without_any_class_to_try(self):
        objs = healthy_objects()
        objs["storage"] = [storage_class("local-path", "rancher.io/local-path")]
        out = ("classes_rc=0\nclass_seen=local-path rancher.io/local-path WaitForFirstConsumer Delete\n"
               "skipped=no StorageClass is the default and none has a shared-file-system provisioner: nothing to "
               "provision from\nleftovers=\nend=ok\n")
        result = status("audit.k8s.csi_rwx", objs, pvc_test=out)
        assert result["status"] == "warn" and "provisioning not tried (no StorageClass is the default" in \
            result["summary"]

    def test_fail_when_provisioning_fails_on_the_shared_class(self):
        out = pvc_test_out("Pending", FAILED_EVENTS, waited=30)
        result = status("audit.k8s.csi_rwx", pvc_test=out)
        assert result["status"] == "fail", result["summary"]
        assert f"test PVC default/{TEST_PVC} on shared-fs (nfs.csi.k8s.io) did not bind: ProvisioningFailed: " \
               'failed to provision volume with StorageClass "shared-fs"' in result["summary"]
        assert "mount.nfs: Connection timed out" in result["summary"]
        assert result["summary"].endswith("; the test PVC was deleted")
        assert result["evidence"]["provisioning_test"]["failure"]["count"] == 4

    def test_warn_when_still_pending_without_a_failure(self):
        out = pvc_test_out("Pending", BOUND_EVENTS[:1], waited=30)
        result = status("audit.k8s.csi_rwx", pvc_test=out)
        assert result["status"] == "warn"
        assert "was still Pending after 30 s (last event ExternalProvisioning: Waiting for a volume" in \
            result["summary"]

    def test_warn_when_the_account_may_not_create_pvcs(self):
        refused = ('Error from server (Forbidden): error when creating "STDIN": persistentvolumeclaims is forbidden: '
                   'User "tenant-a" cannot create resource "persistentvolumeclaims" in API group "" in the namespace '
                   '"default"')
        result = status("audit.k8s.csi_rwx", pvc_test=pvc_test_out(create_rc=1, create=refused))
        assert result["status"] == "warn"
        assert result["summary"].startswith("the evaluation account may not create PersistentVolumeClaims, so "
                                            "provisioning could not be tried: Error from server (Forbidden)")

    def test_warn_when_a_quota_refuses_the_claim(self):
        refused = ('Error from server (Forbidden): error when creating "STDIN": persistentvolumeclaims "'
                   f'{TEST_PVC}" is forbidden: exceeded quota: storage, requested: requests.storage=1Gi, used: '
                   'requests.storage=100Gi, limited: requests.storage=100Gi')
        result = status("audit.k8s.csi_rwx", pvc_test=pvc_test_out(create_rc=1, create=refused))
        assert result["status"] == "warn" and "exceeded quota" in result["summary"]

    def test_warn_when_the_test_claim_could_not_be_deleted(self):
        denied = (f'Error from server (Forbidden): persistentvolumeclaims "{TEST_PVC}" is forbidden: User "tenant-a" '
                  'cannot delete resource "persistentvolumeclaims" in API group "" in the namespace "default"')
        result = status("audit.k8s.csi_rwx", pvc_test=pvc_test_out(delete_rc=1, delete=denied))
        assert result["status"] == "warn"
        assert "bound in 0 s but could NOT be deleted (Error from server (Forbidden)" in result["summary"]
        assert f"`kubectl delete pvc -n default {TEST_PVC}`" in result["summary"]

    def test_retain_class_names_the_volume_left_released(self):
        objs = healthy_objects()
        objs["storage"][1] = storage_class("shared-fs", "nfs.csi.k8s.io", binding="Immediate", reclaim="Retain")
        result = status("audit.k8s.csi_rwx", objs, pvc_test=pvc_test_out(reclaim="Retain"))
        assert result["status"] == "pass"
        assert f"reclaimPolicy Retain): PersistentVolume {TEST_VOLUME} stays Released" in result["summary"]

    def test_wait_for_first_consumer_on_a_shared_class_passes_with_the_note(self):
        objs = healthy_objects()
        objs["storage"][1] = storage_class("shared-fs", "nfs.csi.k8s.io")  # WaitForFirstConsumer
        out = pvc_test_out("Pending", WFFC_EVENTS, binding="WaitForFirstConsumer", waited=4)
        result = status("audit.k8s.csi_rwx", objs, pvc_test=out)
        assert result["status"] == "pass"
        assert "binds only when a pod uses it (WaitForFirstConsumer)" in result["summary"]
        assert "provisioning itself was not proven" in result["summary"]
        assert result["evidence"]["provisioning_test"]["outcome"] == "wait_for_consumer"

    def test_wait_for_first_consumer_on_the_default_block_class_warns(self):
        objs = healthy_objects()
        objs["storage"] = [objs["storage"][0]]
        out = pvc_test_out("Pending", WFFC_EVENTS, sc="local-path", provisioner="rancher.io/local-path", default=1,
                           binding="WaitForFirstConsumer", reason="default", waited=4)
        result = status("audit.k8s.csi_rwx", objs, pvc_test=out)
        assert result["status"] == "warn"
        assert "nor that this class serves ReadWriteMany" in result["summary"]

    def test_default_class_that_cannot_serve_rwx_warns_with_its_error(self):
        objs = healthy_objects()
        objs["storage"] = [storage_class("gp3", "ebs.csi.aws.com", default=True, binding="Immediate")]
        events = [claim_event("ProvisioningFailed", 'failed to provision volume with StorageClass "gp3": rpc error: '
                              'code = InvalidArgument desc = Volume capabilities MULTI_NODE_MULTI_WRITER not supported '
                              'for non-block volumes', "Warning", "ebs.csi.aws.com_ebs-csi-controller-0_1", seq=2)]
        out = pvc_test_out("Pending", events, sc="gp3", provisioner="ebs.csi.aws.com", default=1, reason="default",
                           waited=30)
        result = status("audit.k8s.csi_rwx", objs, pvc_test=out)
        assert result["status"] == "warn"
        assert "the default class could not provision a ReadWriteMany volume either" in result["summary"]
        assert "MULTI_NODE_MULTI_WRITER not supported" in result["summary"]

    def test_bound_on_an_unlisted_provisioner_passes_and_says_so(self):
        objs = healthy_objects()
        objs["storage"] = [storage_class("portworx-shared", "pxd.portworx.com", default=True, binding="Immediate")]
        out = pvc_test_out(sc="portworx-shared", provisioner="pxd.portworx.com", default=1, reason="default")
        result = status("audit.k8s.csi_rwx", objs, pvc_test=out)
        assert result["status"] == "pass"
        assert "not on the known shared-file-system list, but it served ReadWriteMany" in result["summary"]

    def test_bound_test_claim_while_other_rwx_claims_are_pending_warns(self):
        objs = healthy_objects()
        objs["storage"][3] = pvc("datasets", ["ReadWriteMany"], "Pending")
        result = status("audit.k8s.csi_rwx", objs)
        assert result["status"] == "warn" and "1 other ReadWriteMany PVC(s) are Pending: training/datasets" in \
            result["summary"]

    def test_the_test_claim_listed_by_k8s_storage_is_not_a_tenant_claim(self):
        # k8s_storage runs alongside the test and may list its claim (Pending): it must not count
        objs = healthy_objects()
        objs["storage"][3] = own_claim("Pending", sc=None, provisioner=None)
        objs["storage"].append(pvc("datasets", ["ReadWriteMany"], "Bound"))
        assert status("audit.k8s.csi_rwx", objs)["status"] == "pass"
        result = status("audit.k8s.default_storage_class", objs)
        assert result["status"] == "pass" and result["evidence"]["pending_pvcs_without_class"] == []

    def test_error_when_the_test_was_killed_at_its_timeout(self):
        out = pvc_test_out(end=False).split("waited_s=")[0]
        result = status("audit.k8s.csi_rwx", overrides={"k8s_pvc_test": {"stdout": out, "rc": -9, "timed_out": True}})
        assert result["status"] == "error"
        assert result["summary"].startswith("the storage provisioning test ran past its 150 s timeout and was killed: "
                                            f"its test PVC {TEST_PVC} may remain until the next audit's sweep")

    def test_error_when_the_output_is_cut_short(self):
        result = status("audit.k8s.csi_rwx", pvc_test=pvc_test_out(end=False))
        assert result["status"] == "error" and "cut short" in result["summary"]

    def test_error_when_the_api_cannot_be_reached_for_the_test(self):
        refused = "The connection to the server 10.0.0.1:6443 was refused - did you specify the right host or port?"
        result = status("audit.k8s.csi_rwx", pvc_test=pvc_test_out(create_rc=1, create=refused, delete_rc=1,
                                                                   delete=refused))
        assert result["status"] == "error" and "could not reach the Kubernetes API" in result["summary"]

    def test_error_when_the_audit_namespace_does_not_exist(self):
        missing = 'Error from server (NotFound): error when creating "STDIN": namespaces "gpu-eval" not found'
        result = status("audit.k8s.csi_rwx", pvc_test=pvc_test_out(create_rc=1, create=missing))
        assert result["status"] == "error" and "clustereval_audit_k8s_namespace" in result["summary"]

    def test_skip_without_kubectl_and_on_other_harnesses(self):
        missing = {n: {"rc": 127, "stdout": "", "stderr": "kubectl: command not found", "missing": True}
                   for n in ("k8s_storage", "k8s_pvc_test")}
        assert status("audit.k8s.csi_rwx", overrides=missing)["status"] == "skip"
        assert run("audit.k8s.csi_rwx", to_probes(healthy_objects()), harness="slurm")["status"] == "skip"

    def test_the_probes_lines_keep_repeated_keys_in_order(self):
        facts = key_values(pvc_test_out(), "=")
        assert facts["class_seen"] == ["local-path rancher.io/local-path WaitForFirstConsumer Delete default",
                                       "shared-fs nfs.csi.k8s.io Immediate Delete"]
        assert facts["phase"] == ["Bound"] and facts["end"] == ["ok"]
        assert json.loads(facts["pvc_json"][0])["metadata"]["name"] == TEST_PVC

    def test_probe_knows_the_baselines_shared_file_system_provisioners(self):
        import re

        from clustereval import yamldata
        from clustereval.checks import probe_catalogue
        from tests.conftest import REPO

        cmd = probe_catalogue.load()["k8s_pvc_test"]["cmd"]
        listed = re.search(r"^rwx='([^']*)'", cmd, re.M).group(1).split()
        baseline = yamldata.load((REPO / "src" / "clustereval" / "baselines" / "k8s.yml").read_text())
        assert listed == baseline["rwx_provisioners"]


class TestGpuOperator:
    def test_fail_names_gpu_nodes_without_allocatable_gpus(self):
        objs = healthy_objects()
        objs["nodes"][2]["status"]["allocatable"]["nvidia.com/gpu"] = "0"
        result = status("audit.k8s.gpu_operator", objs)
        assert result["status"] == "fail" and "gpu-b01" in result["summary"]

    def test_fail_when_cluster_policy_not_ready(self):
        objs = healthy_objects()
        objs["clusterpolicies"][0]["status"]["state"] = "notReady"
        assert status("audit.k8s.gpu_operator", objs)["status"] == "fail"

    def test_warn_when_device_plugin_misses_a_node(self):
        objs = healthy_objects()
        objs["workloads"][1] = workload("DaemonSet", "nvidia-device-plugin-daemonset", "gpu-operator",
                                        "nvcr.io/nvidia/k8s-device-plugin:v0.17.0", 3, 4)
        assert status("audit.k8s.gpu_operator", objs)["status"] == "warn"

    def test_skip_without_gpus(self):
        objs = healthy_objects()
        objs["nodes"] = [node(n, gpus=None) for n in NODE_NAMES]
        del objs["workloads"][0]
        assert status("audit.k8s.gpu_operator", objs)["status"] == "skip"

    def test_corpus_gfd_labels_mark_a_gpu_node(self):
        labels = json.loads(read_corpus("kubectl-nodes", "node-labels-h100-mig-single-1g.10gb-gfd.json"))
        assert labels["nvidia.com/gpu.present"] == "true"
        objs = healthy_objects()
        objs["nodes"] = [node("mig-node", gpus=None, labels=labels)]
        # GFD says a GPU is present, yet the node advertises no nvidia.com/gpu
        result = status("audit.k8s.gpu_operator", objs)
        assert result["status"] == "fail" and "mig-node" in result["summary"]


class TestNetworkOperator:
    def test_fail_when_nic_cluster_policy_not_ready(self):
        objs = healthy_objects()
        objs["nicpolicies"][0]["status"]["state"] = "notReady"
        assert status("audit.k8s.network_operator", objs)["status"] == "fail"

    def test_warn_when_nvidia_nics_have_no_rdma_plumbing(self):
        objs = healthy_objects()
        objs["workloads"] = [w for w in objs["workloads"] if "rdma" not in w["metadata"]["name"]
                             and "network-operator" not in w["metadata"]["name"]]
        assert status("audit.k8s.network_operator", objs, absent=("k8s_nicclusterpolicies",))["status"] == "warn"

    def test_skip_without_nvidia_nics(self):
        objs = healthy_objects()
        for n in objs["nodes"]:
            del n["metadata"]["labels"]["feature.node.kubernetes.io/pci-15b3.present"]
        objs["workloads"] = [w for w in objs["workloads"] if "network-operator" not in w["metadata"]["name"]]
        assert status("audit.k8s.network_operator", objs, absent=("k8s_nicclusterpolicies",))["status"] == "skip"


class TestAttribution:
    def test_fail_without_kubernetes_mapping(self):
        objs = healthy_objects()
        objs["workloads"][2] = workload("DaemonSet", "nvidia-dcgm-exporter", "gpu-operator",
                                        "nvcr.io/nvidia/k8s/dcgm-exporter:3.3.9-3.6.1-ubuntu22.04", 4, 4,
                                        env={"DCGM_EXPORTER_KUBERNETES": "false"})
        assert status("audit.k8s.gpu_job_attribution", objs)["status"] == "fail"

    def test_warn_without_pod_resources_mount(self):
        objs = healthy_objects()
        objs["workloads"][2] = workload("DaemonSet", "dcgm-exporter", "monitoring",
                                        "nvcr.io/nvidia/k8s/dcgm-exporter:3.3.9-3.6.1-ubuntu22.04", 4, 4,
                                        args=["-f", "/etc/dcgm-exporter/dcp-metrics-included.csv", "--kubernetes"])
        assert status("audit.k8s.gpu_job_attribution", objs)["status"] == "warn"


class TestMonitoringStack:
    CHECK = "audit.k8s.monitoring_stack"

    @staticmethod
    def without(objs, *names):
        objs["workloads"] = [w for w in objs["workloads"] if w["metadata"]["name"] not in names]
        return objs

    @staticmethod
    def replace(objs, obj):
        objs["workloads"] = [obj if (w["kind"], w["metadata"]["name"]) == (obj["kind"], obj["metadata"]["name"])
                             else w for w in objs["workloads"]]
        return objs

    def test_pass_names_the_workloads_found(self):
        result = status(self.CHECK)
        assert result["status"] == "pass" and result["value"] == 4
        assert "dcgm-exporter ready on all 4 GPU nodes" in result["summary"]
        assert "Grafana deployment monitoring/kube-prometheus-stack-grafana 1/1 ready" in result["summary"]
        ev = result["evidence"]
        assert ev["dcgm_exporter"] == [{"workload": "gpu-operator/nvidia-dcgm-exporter", "kind": "DaemonSet",
                                        "desired": 4, "ready": 4, "version": "3.3.9-3.6.1-ubuntu22.04"}]
        assert [w["workload"] for w in ev["node_exporter"]] == [
            "monitoring/kube-prometheus-stack-prometheus-node-exporter"]
        assert ev["prometheus"][0]["kind"] == "StatefulSet" and ev["prometheus"][0]["version"] == "v2.55.1"
        assert ev["prometheus_operator"][0]["version"] == "v0.78.2"
        # Grafana's pod starts with its k8s-sidecar containers: the version is Grafana's own image tag
        assert ev["grafana"][0]["version"] == "11.3.1"
        assert ev["alertmanager"] and ev["kube_state_metrics"]
        assert "servicemonitors.monitoring.coreos.com" in ev["monitoring_crds"]
        assert ev["dcgm_service_monitor"] is True

    def test_pass_with_the_standalone_dcgm_exporter_chart(self):
        objs = healthy_objects()
        objs["workloads"][2] = apps_object(
            "DaemonSet", "dcgm-exporter", "monitoring",
            helm_labels("dcgm-exporter", "dcgm-exporter-4.1.1", "4.1.1", release="dcgm-exporter",
                        **{"app.kubernetes.io/component": "dcgm-exporter"}),
            [("exporter", "nvcr.io/nvidia/k8s/dcgm-exporter:4.1.1-4.0.4-ubuntu22.04")], 4, 4,
            tolerations=[{"effect": "NoSchedule", "key": "nvidia.com/gpu", "operator": "Exists"}])
        result = status(self.CHECK, objs)
        assert result["status"] == "pass"
        assert result["evidence"]["dcgm_exporter"][0]["workload"] == "monitoring/dcgm-exporter"

    def test_pass_without_grafana_says_it_is_not_graded(self):
        result = status(self.CHECK, self.without(healthy_objects(), "kube-prometheus-stack-grafana"))
        assert result["status"] == "pass" and "no Grafana in the cluster (not graded" in result["summary"]
        assert result["evidence"]["grafana"] == []

    def test_pass_with_gke_managed_prometheus_collectors(self):
        objs = self.without(healthy_objects(), "prometheus-kube-prometheus-stack-prometheus",
                            "kube-prometheus-stack-operator")
        objs["workloads"].append(apps_object(
            "DaemonSet", "collector", "gmp-system", {"app.kubernetes.io/name": "collector",
                                                    "app.kubernetes.io/part-of": "gmp"},
            [("prometheus", "gke.gcr.io/prometheus-engine/prometheus:v2.45.3-gmp.9-gke.0"),
             ("config-reloader", "gke.gcr.io/prometheus-engine/config-reloader:v0.13.1-gke.0")], 4, 4))
        result = status(self.CHECK, objs)
        assert result["status"] == "pass" and "gmp-system/collector" in result["summary"]

    def test_fail_without_dcgm_exporter(self):
        result = status(self.CHECK, self.without(healthy_objects(), "nvidia-dcgm-exporter"))
        assert result["status"] == "fail" and result["value"] == 0
        assert "no dcgm-exporter workload" in result["summary"] and "4 GPU node(s)" in result["summary"]

    def test_fail_when_dcgm_exporter_is_ready_nowhere(self):
        # every GPU node labelled nvidia.com/gpu.deploy.dcgm-exporter=false: the GPU Operator's DaemonSet
        # schedules no pod at all
        objs = healthy_objects()
        objs["workloads"][2] = apps_object("DaemonSet", "nvidia-dcgm-exporter", "gpu-operator",
                                           {"app": "nvidia-dcgm-exporter",
                                            "app.kubernetes.io/managed-by": "gpu-operator",
                                            "helm.sh/chart": "gpu-operator-v24.9.2"},
                                           [("nvidia-dcgm-exporter",
                                             "nvcr.io/nvidia/k8s/dcgm-exporter:3.3.9-3.6.1-ubuntu22.04")], 0, 0,
                                           selector={"app": "nvidia-dcgm-exporter"},
                                           nodeSelector={"nvidia.com/gpu.deploy.dcgm-exporter": "true"})
        result = status(self.CHECK, objs)
        assert result["status"] == "fail" and "ready on none of the 4 GPU node(s)" in result["summary"]
        assert "gpu-operator/nvidia-dcgm-exporter 0/0 ready" in result["summary"]

    def test_warn_with_the_numbers_when_dcgm_exporter_misses_gpu_nodes(self):
        objs = healthy_objects()
        objs["workloads"][2] = workload("DaemonSet", "nvidia-dcgm-exporter", "gpu-operator",
                                        "nvcr.io/nvidia/k8s/dcgm-exporter:3.3.9-3.6.1-ubuntu22.04", 3, 4,
                                        env={"DCGM_EXPORTER_KUBERNETES": "true"})
        result = status(self.CHECK, objs)
        assert result["status"] == "warn" and result["value"] == 3
        assert "dcgm-exporter ready on 3 of 4 GPU nodes (4 scheduled, 3 ready" in result["summary"]

    def test_warn_when_the_node_selector_leaves_gpu_nodes_out(self):
        objs = healthy_objects()
        objs["workloads"][2] = workload("DaemonSet", "nvidia-dcgm-exporter", "gpu-operator",
                                        "nvcr.io/nvidia/k8s/dcgm-exporter:3.3.9-3.6.1-ubuntu22.04", 2, 2)
        result = status(self.CHECK, objs)
        assert result["status"] == "warn" and "leave 2 GPU node(s) out" in result["summary"]

    def test_warn_without_node_exporter(self):
        result = status(self.CHECK, self.without(healthy_objects(), "kube-prometheus-stack-prometheus-node-exporter"))
        assert result["status"] == "warn" and "no node-exporter" in result["summary"]

    def test_warn_when_node_exporter_is_not_ready_everywhere(self):
        result = status(self.CHECK, self.replace(healthy_objects(), node_exporter(ready=3)))
        assert result["status"] == "warn" and "node-exporter not ready on every node" in result["summary"]
        assert "3/4 ready" in result["summary"]

    def test_warn_when_the_operator_runs_without_a_prometheus(self):
        result = status(self.CHECK, self.without(healthy_objects(), "prometheus-kube-prometheus-stack-prometheus"))
        assert result["status"] == "warn" and "Prometheus Operator runs" in result["summary"]
        assert "no Prometheus server" in result["summary"]

    def test_warn_when_only_the_prometheus_crds_are_left(self):
        objs = self.without(healthy_objects(), "prometheus-kube-prometheus-stack-prometheus",
                            "kube-prometheus-stack-operator")
        result = status(self.CHECK, objs)
        assert result["status"] == "warn" and "CRDs are installed but neither" in result["summary"]

    def test_warn_without_any_prometheus(self):
        objs = self.without(healthy_objects(), "prometheus-kube-prometheus-stack-prometheus",
                            "kube-prometheus-stack-operator")
        api = "\n".join(ln for ln in API_RESOURCES.splitlines() if "monitoring.coreos.com" not in ln)
        result = status(self.CHECK, objs, api=api)
        assert result["status"] == "warn" and "no Prometheus (server, agent or operator-managed)" in result["summary"]
        assert result["evidence"]["monitoring_crds"] == []

    def test_warn_when_prometheus_is_not_ready(self):
        result = status(self.CHECK, self.replace(healthy_objects(), prometheus_statefulset(ready=0)))
        assert result["status"] == "warn"
        assert "Prometheus not ready: statefulset monitoring/prometheus-kube-prometheus-stack-prometheus 0/1 ready" \
            in result["summary"]

    def test_warns_add_up(self):
        objs = self.without(healthy_objects(), "kube-prometheus-stack-prometheus-node-exporter")
        result = status(self.CHECK, self.replace(objs, prometheus_operator(ready=0)))
        assert result["status"] == "warn"
        assert "no node-exporter" in result["summary"] and "Prometheus Operator not ready" in result["summary"]

    def test_skip_without_gpu_nodes(self):
        objs = healthy_objects()
        objs["nodes"] = [node(n, gpus=None) for n in NODE_NAMES]
        result = status(self.CHECK, objs)
        assert result["status"] == "skip" and "no GPU nodes" in result["summary"]

    def test_error_on_truncated_workloads(self):
        probes = to_probes(healthy_objects())
        probes["k8s_workloads"]["stdout"] = probes["k8s_workloads"]["stdout"][:2000]
        result = run(self.CHECK, probes)
        assert result["status"] == "error" and "truncated" in result["summary"]

    def test_warn_when_workloads_may_not_be_listed(self):
        forbidden = {"rc": 1, "stdout": "", "stderr": 'Error from server (Forbidden): deployments.apps is forbidden: '
                                                      'User "tenant-a" cannot list resource "deployments" in API '
                                                      'group "apps" at the cluster scope\n'}
        result = status(self.CHECK, overrides={"k8s_workloads": forbidden})
        assert result["status"] == "warn" and "tenant-a" in result["summary"]


class TestRdma:
    def test_fail_when_nad_names_an_unadvertised_resource(self):
        objs = healthy_objects()
        objs["nads"].append(nad("sriov-ib", {"cniVersion": "0.3.1", "type": "ib-sriov", "name": "sriov-ib",
                                             "ipam": {"type": "whereabouts", "range": "10.10.0.0/16"}},
                                resource="nvidia.com/mlnxics"))
        result = status("audit.k8s.rdma_exposure", objs)
        assert result["status"] == "fail" and "nvidia.com/mlnxics" in result["summary"]
        assert result["evidence"]["nads"]["default/sriov-ib"]["mechanism"] == "sriov_ib"

    def test_fail_when_the_shared_device_plugin_advertises_nothing(self):
        objs = healthy_objects()
        for n in objs["nodes"]:
            del n["status"]["allocatable"]["rdma/rdma_shared_device_a"]
        assert status("audit.k8s.rdma_exposure", objs)["status"] == "fail"

    def test_warn_when_a_gpu_node_lacks_the_rdma_resource(self):
        objs = healthy_objects()
        del objs["nodes"][3]["status"]["allocatable"]["rdma/rdma_shared_device_a"]
        result = status("audit.k8s.rdma_exposure", objs)
        assert result["status"] == "warn" and "gpu-b02" in result["summary"]

    def test_warn_without_any_rdma(self):
        objs = healthy_objects()
        objs["configmaps"], objs["nicpolicies"], objs["nads"] = [], [], []
        for n in objs["nodes"]:
            del n["status"]["allocatable"]["rdma/rdma_shared_device_a"]
        assert status("audit.k8s.rdma_exposure", objs)["status"] == "warn"

    @pytest.mark.parametrize("resource, mechanism", [("vpc.amazonaws.com/efa", "efa"),
                                                     ("rdma/fabric0", "doks_fabric"),
                                                     ("networking.gke.io.networks/rdma-0", "gke_multinetwork")])
    def test_recognises_cloud_fabrics(self, resource, mechanism):
        objs = healthy_objects()
        objs["configmaps"], objs["nicpolicies"], objs["nads"] = [], [], []
        for n in objs["nodes"]:
            del n["status"]["allocatable"]["rdma/rdma_shared_device_a"]
            n["status"]["allocatable"][resource] = "1"
        result = status("audit.k8s.rdma_exposure", objs)
        assert result["status"] == "pass" and mechanism in result["evidence"]["mechanisms"]

    def test_recognises_dranet_device_classes(self):
        objs = healthy_objects()
        objs["dra"] = [dra_object("DeviceClass", "mrdma.google.com",
                                  spec={"selectors": [{"cel": {"expression": 'device.driver == "dra.net"'}}]})]
        result = status("audit.k8s.rdma_exposure", objs)
        assert result["status"] == "pass" and "dranet" in result["evidence"]["mechanisms"]

    def test_sriov_legacy_pairing_with_sriovdp_config(self):
        objs = healthy_objects()
        objs["configmaps"] = [configmap("sriovdp-config", "kube-system", {"config.json": json.dumps(
            {"resourceList": [{"resourcePrefix": "nvidia.com", "resourceName": "sriov_rdma",
                               "selectors": {"vendors": ["15b3"], "isRdma": True}}]})})]
        objs["nicpolicies"] = []
        objs["nads"] = [nad("sriov-net", {"cniVersion": "0.3.1", "type": "sriov", "name": "sriov-net"},
                            resource="nvidia.com/sriov_rdma")]
        for n in objs["nodes"]:
            n["status"]["allocatable"]["nvidia.com/sriov_rdma"] = "8"
        result = status("audit.k8s.rdma_exposure", objs)
        assert result["status"] == "pass" and "sriov_legacy" in result["evidence"]["mechanisms"]


class TestMultinodeNvlink:
    def objs(self, clique=True, domains=True, driver_ready=1):
        objs = healthy_objects()
        if clique:
            for n in objs["nodes"]:
                n["metadata"]["labels"]["nvidia.com/gpu.clique"] = "9a3b2c1d-0000-4000-8000-000000000001.32766"
        objs["workloads"].append(workload("Deployment", "nvidia-dra-driver-gpu-controller", "nvidia-dra-driver-gpu",
                                          "nvcr.io/nvidia/k8s-dra-driver-gpu:v25.3.0", driver_ready, 1))
        if domains:
            objs["computedomains"] = [cr("resource.nvidia.com/v1beta1", "ComputeDomain", "training-cd", "training",
                                         spec={"numNodes": 4, "channel": {"resourceClaimTemplate":
                                                                          {"name": "training-cd-channel"}}},
                                         status={"status": "Ready"})]
        return objs

    def test_pass(self):
        assert status("audit.k8s.multinode_nvlink", self.objs())["status"] == "pass"

    def test_fail_without_computedomain_api(self):
        api = "\n".join(ln for ln in API_RESOURCES.splitlines() if "computedomains" not in ln)
        result = status("audit.k8s.multinode_nvlink", self.objs(domains=False), api=api,
                        absent=("k8s_computedomains",))
        assert result["status"] == "fail"

    def test_warn_when_a_compute_domain_is_not_ready(self):
        objs = self.objs()
        objs["computedomains"][0]["status"]["status"] = "NotReady"
        assert status("audit.k8s.multinode_nvlink", objs)["status"] == "warn"

    def test_skip_without_cliques(self):
        assert status("audit.k8s.multinode_nvlink", self.objs(clique=False, domains=False))["status"] == "skip"

    def test_error_when_unreachable(self):
        refused = {"rc": 1, "stdout": "", "stderr": "Unable to connect to the server: dial tcp 10.0.0.1:6443: "
                                                    "i/o timeout\n"}
        assert status("audit.k8s.multinode_nvlink", self.objs(),
                      overrides={"k8s_nodes": refused})["status"] == "error"


class TestKubeletCpuManager:
    def probe(self, stdout, **extra):
        return probe("k8s_cpu_manager_state", stdout, cmd="cat", artifact="raw/n1/cpu.json", **extra)

    def node_run(self, probes):
        return judge("audit.k8s.kubelet_cpu_manager", probes, harness="k8s")

    def test_pass_static(self):
        text = ('{"policyName":"static","defaultCpuSet":"0-3,96-99","entries":{"a1b2":{"main":"4-47"}},'
                '"checksum":1353318690}')
        assert self.node_run(self.probe(text))["status"] == "pass"

    def test_warn_none(self):
        assert self.node_run(self.probe('{"policyName":"none","defaultCpuSet":"","checksum":1353318690}'))[
            "status"] == "warn"

    def test_fail_unknown_policy(self):
        assert self.node_run(self.probe('{"policyName":"bogus","checksum":1}'))["status"] == "fail"

    def test_skip_without_kubelet(self):
        assert self.node_run(self.probe("absent: /var/lib/kubelet/cpu_manager_state"))["status"] == "skip"

    def test_error_on_garbage(self):
        assert self.node_run(self.probe("cat: permission denied"))["status"] == "error"


# ------------------------------------------------------------------ parsers

class TestParsers:
    def test_list_items_keep_kind_namespace_and_top_level_fields(self):
        data = parsers.parse("kubectl-json", klist(storage_class("fast", "ebs.csi.aws.com", default=True),
                                                   pvc("a", ["ReadWriteOnce"], "Bound")))
        assert data["format"] == "list" and data["kinds"] == {"StorageClass": 1, "PersistentVolumeClaim": 1}
        sc = data["items"][0]
        assert sc["fields"]["provisioner"] == "ebs.csi.aws.com" and sc["namespace"] is None
        assert data["items"][1]["namespace"] == "training"

    def test_stream_of_documents(self):
        data = parsers.parse("kubectl-json", klist(configmap("a", "x", {})) + klist())
        assert data["format"] == "stream" and data["documents"] == 2 and len(data["items"]) == 1

    def test_version(self):
        data = parsers.parse("kubectl-json", json.dumps({"clientVersion": {"gitVersion": "v1.31.4"},
                                                         "kustomizeVersion": "v5.4.2",
                                                         "serverVersion": {"gitVersion": "v1.30.6-eks-7f9249a"}}))
        assert data["format"] == "version" and data["version"]["server"]["gitVersion"] == "v1.30.6-eks-7f9249a"

    @pytest.mark.parametrize("text", ["", "   \n", "error: you must be logged in", '{"items": [', "[1, 2]"])
    def test_garbage_is_a_parse_error(self, text):
        with pytest.raises(parsers.ParseError):
            parsers.parse("kubectl-json", text)

    def test_api_resources_old_and_new_layouts(self):
        data = parsers.parse("kubectl-api-resources", API_RESOURCES)
        pg = next(r for r in data["resources"] if r["name"] == "podgroups")
        assert pg == {"name": "podgroups", "group": "scheduling.volcano.sh", "version": "v1beta1",
                      "namespaced": True, "kind": "PodGroup", "short_names": ["pg", "podgroup"]}
        jobs = next(r for r in data["resources"] if r["name"] == "jobs")
        assert jobs["short_names"] == [] and jobs["group"] == "batch"
        old = ("NAME          SHORTNAMES   APIGROUP   NAMESPACED   KIND\n"
               "deployments   deploy       apps       true         Deployment\n")
        assert parsers.parse("kubectl-api-resources", old)["resources"][0]["group"] == "apps"

    def test_existing_node_parser_reads_our_node_objects(self):
        data = parsers.parse("kubectl-nodes", klist(node("gpu-a01")))
        assert data["nodes"][0]["allocatable_gpus"] == 8 and data["nodes"][0]["gpu_count"] == 8


def test_api_probes_are_read_only_kubectl_calls_of_their_own_phase():
    from clustereval.checks import catalogue, probe_catalogue

    api = probe_catalogue.for_phase("audit-k8s")
    names = {p["name"] for p in api}
    assert names == set(to_probes(healthy_objects()))
    for definition in api:
        assert definition["name"].startswith("k8s_") and definition["tool"] in ("kubectl", "helm")
        if definition["name"] == "k8s_pvc_test":
            continue
        assert not any(verb in definition["cmd"] for verb in ("kubectl create", "kubectl apply", "kubectl delete",
                                                         "kubectl patch", "helm install", " create -f", " delete "))
    # the one that acts: only when allowed, its delete always runs (an EXIT trap), and its check says it acts
    acting = probe_catalogue.load()["k8s_pvc_test"]["cmd"]
    assert acting.startswith('if [ "${CLUSTEREVAL_ALLOW_ACTIONS:-1}" != 1 ]; then')
    assert "trap cleanup EXIT" in acting and acting.index("trap cleanup EXIT") < acting.index("k create -f -")
    assert catalogue.entry("audit.k8s.csi_rwx")["acts"] is True
    node = [p for p in probe_catalogue.for_phase("audit") if p["name"].startswith("k8s_")]
    assert [p["name"] for p in node] == ["k8s_cpu_manager_state"]
