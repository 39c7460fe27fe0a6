"""audit.k8s.network_policy (tenant namespaces isolated by NetworkPolicies) on API objects shaped as kubectl prints
them, and audit.k8s.monitoring_stack's reading of DaemonSet tolerations against the GPU nodes' taints; every
status of the new check."""

from __future__ import annotations

import pytest

from tests.helpers import probe
from tests.unit.k8s_objects import healthy_objects, klist, meta, node_exporter
from tests.unit.k8s_probes import run, to_probes

CHECK = "audit.k8s.network_policy"
MONITORING = "audit.k8s.monitoring_stack"
GPU_TAINT = {"effect": "NoSchedule", "key": "nvidia.com/gpu", "value": "present"}
GPU_TOLERATION = {"effect": "NoSchedule", "key": "nvidia.com/gpu", "operator": "Exists"}
# the healthy cluster's platform namespaces (its workloads are recognised components) and two tenants
PLATFORM = ["gpu-operator", "ingress-nginx", "kueue-system", "metallb-system", "monitoring", "mpi-operator",
            "nvidia-network-operator", "volcano-system"]
TENANTS = ["team-a", "team-b"]


def namespace(name, **labels):
    return {"apiVersion": "v1", "kind": "Namespace",
            "metadata": meta(name, labels={**labels, "kubernetes.io/metadata.name": name}),
            "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}}


def policy(name, ns, pod_selector=None, types=("Ingress",), ingress=None, egress=None):
    spec = {"podSelector": pod_selector or {}, "policyTypes": list(types)}
    if ingress is not None:
        spec["ingress"] = ingress
    if egress is not None:
        spec["egress"] = egress
    return {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": {**meta(name, ns), "generation": 1}, "spec": spec}


def isolated(ns):
    """default-deny, the namespace's own pods, the monitoring namespace's scrapers: what k8s-reference has."""
    return [policy("default-deny-ingress", ns),
            policy("allow-same-namespace", ns, ingress=[{"from": [{"podSelector": {}}]}]),
            policy("allow-monitoring", ns, ingress=[{"from": [{"namespaceSelector": {
                "matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}]}])]


def probes(policies=None, tenants=TENANTS, objs=None, **fields):
    """The audit-k8s probes of the healthy cluster plus k8s_network_policies (its namespaces and ``policies``)."""
    names = sorted({"default", "kube-system", "kube-public", "kube-node-lease", *PLATFORM, *tenants})
    if policies is None:
        policies = [p for ns in ["default", *tenants] for p in isolated(ns)]
    out = to_probes(objs or healthy_objects())
    out.update(probe("k8s_network_policies", klist(*[namespace(n, tenant=n) for n in names], *policies),
                     cmd="kubectl get namespaces,networkpolicies.networking.k8s.io -A -o json", tool="kubectl",
                     artifact="raw/_cluster/kubectl-get-network-policies.json"))
    out["k8s_network_policies"].update(fields)
    return out


def judge(**kw):
    return run(CHECK, probes(**kw))


class TestNetworkPolicy:
    def test_pass_when_every_tenant_namespace_denies_by_default(self):
        result = judge()
        assert result["status"] == "pass" and result["value"] == 0
        assert result["summary"] == ("all 3 tenant namespace(s) deny ingress from other namespaces by default "
                                     "(default, team-a, team-b)")
        ev = result["evidence"]
        assert ev["platform_namespaces"] == PLATFORM and set(ev["tenant_namespaces"]) == {"default", *TENANTS}
        assert ev["tenant_namespaces"]["team-a"]["policies"] == ["default-deny-ingress", "allow-same-namespace",
                                                                 "allow-monitoring"]
        assert ev["tenant_namespaces"]["team-a"]["egress_default_deny"] is False
        assert ev["platform_namespaces_without_policy"] == PLATFORM

    def test_fail_names_the_namespace_without_any_policy(self):
        result = judge(policies=[*isolated("default"), *isolated("team-a")])
        assert result["status"] == "fail" and result["value"] == 1
        assert result["summary"] == ("1 of 3 tenant namespace(s) are open to pods of other tenants: "
                                     "team-b (no NetworkPolicy)")

    def test_fail_without_a_default_deny(self):
        # only some pods are selected: the others accept traffic from everywhere
        some = [policy("protect-db", "team-b", pod_selector={"matchLabels": {"app": "db"}},
                       ingress=[{"from": [{"podSelector": {}}]}])]
        result = judge(policies=[*isolated("default"), *isolated("team-a"), *some])
        assert result["status"] == "fail" and "team-b (no Ingress policy selects every pod (no default deny)" \
            in result["summary"]

    @pytest.mark.parametrize("rule", [{}, {"from": [{"ipBlock": {"cidr": "0.0.0.0/0"}}]},
                                      {"from": [{"namespaceSelector": {}}]}])
    def test_fail_when_a_policy_admits_every_source_to_every_pod(self, rule):
        allow_all = policy("allow-all", "team-b", ingress=[rule])
        result = judge(policies=[*isolated("default"), *isolated("team-a"), *isolated("team-b"), allow_all])
        assert result["status"] == "fail"
        assert "team-b (policy allow-all admits every source to every pod)" in result["summary"]

    def test_fail_when_only_egress_is_restricted(self):
        egress_only = [policy("deny-egress", ns, types=("Egress",)) for ns in ("default", *TENANTS)]
        result = judge(policies=egress_only)
        assert result["status"] == "fail" and result["value"] == 3
        assert all(result["evidence"]["tenant_namespaces"][n]["egress_default_deny"] for n in TENANTS)

    def test_warn_when_a_policy_opens_some_pods_to_another_tenant(self):
        share = policy("from-team-a", "team-b", pod_selector={"matchLabels": {"app": "api"}},
                       ingress=[{"from": [{"namespaceSelector": {"matchLabels": {"tenant": "team-a"}}}]}])
        result = judge(policies=[*isolated("default"), *isolated("team-a"), *isolated("team-b"), share])
        assert result["status"] == "warn", result["summary"]
        assert "team-b (policy from-team-a admits tenant namespace(s) team-a to the pods it selects)" \
            in result["summary"]

    def test_a_policy_admitting_platform_namespaces_keeps_isolation(self):
        ingress = policy("from-ingress", "team-a", ingress=[{"from": [{"namespaceSelector": {"matchExpressions": [
            {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["ingress-nginx", "monitoring"]}]}}]}])
        assert judge(policies=[*isolated("default"), *isolated("team-a"), *isolated("team-b"), ingress])[
            "status"] == "pass"

    def test_skip_without_tenant_namespaces(self):
        result = judge(stdout=klist(*[namespace(n) for n in ("kube-system", "kube-public", *PLATFORM)]))
        assert result["status"] == "skip" and "no tenant namespace to isolate" in result["summary"]

    def test_error_when_the_api_is_unreachable(self):
        result = judge(rc=1, stdout="", stderr="The connection to the server 10.0.0.1:6443 was refused - did you "
                                               "specify the right host or port?\n")
        assert result["status"] == "error"

    def test_error_on_truncated_json(self):
        out = probes()
        out["k8s_network_policies"]["stdout"] = out["k8s_network_policies"]["stdout"][:2000]
        assert run(CHECK, out)["status"] == "error"

    def test_warn_when_namespaces_may_not_be_listed(self):
        result = judge(rc=1, stdout="", stderr='Error from server (Forbidden): namespaces is forbidden: User '
                                               '"tenant-a" cannot list resource "namespaces" in API group "" at the '
                                               'cluster scope\n')
        assert result["status"] == "warn" and "tenant-a" in result["summary"]

    def test_fail_when_the_api_serves_no_network_policies(self):
        result = judge(rc=1, stdout="", stderr='error: the server doesn\'t have a resource type "networkpolicies"\n')
        assert result["status"] == "fail" and "serves no NetworkPolicy" in result["summary"]

    def test_skip_without_kubernetes_facts(self):
        assert run(CHECK, {})["status"] == "skip"


# ------------------------------------------------------------------ monitoring DaemonSets and the GPU taint

def tainted(objs, taints_by_node):
    for n in objs["nodes"]:
        if n["metadata"]["name"] in taints_by_node:
            n["spec"]["taints"] = taints_by_node[n["metadata"]["name"]]
    return objs


def with_tolerations(objs, name, tolerations, desired):
    for w in objs["workloads"]:
        if w["metadata"]["name"] == name:
            w["spec"]["template"]["spec"]["tolerations"] = tolerations
            w["status"].update(desiredNumberScheduled=desired, currentNumberScheduled=desired, numberReady=desired,
                               numberAvailable=desired)
    return objs


NODES = ["gpu-a01", "gpu-a02", "gpu-b01", "gpu-b02"]


class TestMonitoringTolerations:
    def test_pass_when_the_exporters_tolerate_the_gpu_taint(self):
        objs = with_tolerations(tainted(healthy_objects(), {n: [GPU_TAINT] for n in NODES}), "nvidia-dcgm-exporter",
                                [GPU_TOLERATION], 4)
        result = run(MONITORING, to_probes(objs))
        assert result["status"] == "pass", result["summary"]
        assert result["evidence"]["unmonitored_gpu_nodes"] == {"dcgm_exporter": {}, "node_exporter": {}}

    def test_fail_names_daemonset_taint_and_nodes_a_dcgm_exporter_misses(self):
        other = {"effect": "NoSchedule", "key": "nvidia.com/gpu", "value": "true"}
        objs = tainted(healthy_objects(), {"gpu-a01": [GPU_TAINT], "gpu-a02": [GPU_TAINT], "gpu-b01": [other],
                                           "gpu-b02": [other]})
        objs = with_tolerations(objs, "nvidia-dcgm-exporter", [{**GPU_TOLERATION, "operator": "Equal",
                                                                "value": "present"}], 2)
        result = run(MONITORING, to_probes(objs))
        assert result["status"] == "fail" and result["value"] == 2
        assert result["summary"] == (
            "GPU nodes unmonitored: dcgm-exporter never runs on 2 of 4 GPU node(s): DaemonSet "
            "gpu-operator/nvidia-dcgm-exporter does not tolerate taint nvidia.com/gpu=true:NoSchedule "
            "(gpu-b01, gpu-b02)")
        assert set(result["evidence"]["unmonitored_gpu_nodes"]["dcgm_exporter"]) == {"gpu-b01", "gpu-b02"}

    def test_fail_when_node_exporter_tolerates_none_of_the_gpu_nodes(self):
        objs = with_tolerations(tainted(healthy_objects(), {n: [GPU_TAINT] for n in NODES}), "nvidia-dcgm-exporter",
                                [GPU_TOLERATION], 4)
        exporter = node_exporter(ready=0, desired=0)
        exporter["spec"]["template"]["spec"]["tolerations"] = [
            {"effect": "NoSchedule", "key": "node-role.kubernetes.io/control-plane", "operator": "Exists"}]
        objs["workloads"] = [exporter if w["metadata"]["name"] == exporter["metadata"]["name"] else w
                             for w in objs["workloads"]]
        result = run(MONITORING, to_probes(objs))
        assert result["status"] == "fail"
        assert ("node-exporter never runs on 4 of 4 GPU node(s): DaemonSet monitoring/kube-prometheus-stack-"
                "prometheus-node-exporter does not tolerate taint nvidia.com/gpu=present:NoSchedule (gpu-a01, "
                "gpu-a02, gpu-b01, gpu-b02)") in result["summary"]

    def test_node_state_taints_are_not_a_configuration_gap(self):
        # a cordoned or unreachable node is not "untolerated": the DaemonSet controller tolerates those itself
        down = [{"effect": "NoSchedule", "key": "node.kubernetes.io/unreachable"},
                {"effect": "NoSchedule", "key": "node.kubernetes.io/unschedulable"}]
        objs = with_tolerations(tainted(healthy_objects(), {"gpu-a01": down}), "nvidia-dcgm-exporter", [], 4)
        assert run(MONITORING, to_probes(objs))["evidence"]["unmonitored_gpu_nodes"]["dcgm_exporter"] == {}

    def test_fail_when_a_node_selector_keeps_dcgm_exporter_off_gpu_nodes(self):
        objs = healthy_objects()
        objs = with_tolerations(objs, "nvidia-dcgm-exporter", [], 0)
        dcgm = next(w for w in objs["workloads"] if w["metadata"]["name"] == "nvidia-dcgm-exporter")
        dcgm["spec"]["template"]["spec"]["affinity"] = {"nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["p5.48xlarge"]}]}]}}}
        result = run(MONITORING, to_probes(objs))
        assert result["status"] == "fail"
        assert "has a required node affinity the node does not match (gpu-a01, gpu-a02, gpu-b01, gpu-b02)" \
            in result["summary"]
