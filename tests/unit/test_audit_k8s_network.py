"""Kubernetes audit checks: ingress, load balancers, RDMA exposed to pods and multi-node NVLink, every status
from kubectl JSON we wrote."""

from __future__ import annotations

import json

import pytest

from tests.unit.k8s_objects import (
    configmap,
    cr,
    dra_object,
    healthy_objects,
    ingress_class,
    nad,
    service,
    workload,
)
from tests.unit.k8s_probes import (
    API_RESOURCES,
    status,
)


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
