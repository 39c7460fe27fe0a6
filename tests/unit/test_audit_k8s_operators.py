"""Kubernetes audit checks: the GPU, network and MPI operators and the monitoring stack, every status from
kubectl JSON we wrote."""

from __future__ import annotations

import json

from tests.conftest import read_corpus
from tests.unit.k8s_objects import (
    NODE_NAMES,
    apps_object,
    healthy_objects,
    helm_labels,
    node,
    node_exporter,
    prometheus_operator,
    prometheus_statefulset,
    workload,
)
from tests.unit.k8s_probes import (
    API_RESOURCES,
    run,
    status,
    to_probes,
)


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
