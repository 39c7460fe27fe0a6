"""Kubernetes audit checks: topology-aware, gang and bin-packing scheduling, batch schedulers and the kubelet's
CPU manager, every status from kubectl JSON we wrote."""

from __future__ import annotations

import pytest

from tests.helpers import judge, probe
from tests.unit.k8s_objects import (
    NODE_NAMES,
    cr,
    dra_object,
    healthy_objects,
    node,
    workload,
)
from tests.unit.k8s_probes import (
    API_RESOURCES,
    status,
)


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
