"""The simulated Kubernetes API's node taints, DaemonSet tolerations and NetworkPolicies (profile keys under
``k8s:``), through the kubectl shim as ``clustereval sim up`` lays it out (no power daemon: the live state is what
kubectl writes), and the checks that find the audit-k8s-isolation faults on it."""

from __future__ import annotations

import importlib.util
import json
import time

import pytest

from clustereval import parsers
from clustereval.sim.overlays import Tree, k8s
from clustereval.sim.profile import load_profile, node_settings, render_node
from tests.unit.test_sim_kubectl import SHIMS, sh, sim_cluster, verdicts

GPU_TAINT = {"effect": "NoSchedule", "key": "nvidia.com/gpu", "value": "present"}
DCGM, NODE_EXPORTER = "nvidia-dcgm-exporter", "kube-prometheus-stack-prometheus-node-exporter"


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    root = tmp_path_factory.mktemp("k8s-ref")
    return root, sim_cluster(root, "k8s-reference")


@pytest.fixture(scope="module")
def isolation(tmp_path_factory):
    root = tmp_path_factory.mktemp("k8s-isolation")
    return root, sim_cluster(root, "audit-k8s-isolation")


def kubectl_json(env, cmd):
    proc = sh(env, f"kubectl {cmd} -o json")
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    return json.loads(proc.stdout)


def daemonsets(env):
    return {d["metadata"]["name"]: d for d in kubectl_json(env, "get daemonsets.apps -A")["items"]}


# ------------------------------------------------------------------ k8s-reference

def test_gpu_nodes_carry_the_profiles_taint(reference):
    _, env = reference
    assert [n["spec"]["taints"] for n in kubectl_json(env, "get nodes")["items"]] == [[GPU_TAINT], [GPU_TAINT]]


def test_every_daemonset_tolerates_the_taint_and_runs_everywhere(reference):
    _, env = reference
    for name, ds in daemonsets(env).items():
        assert ds["status"] == {"currentNumberScheduled": 2, "desiredNumberScheduled": 2, "numberAvailable": 2,
                                "numberMisscheduled": 0, "numberReady": 2, "observedGeneration": 1,
                                "updatedNumberScheduled": 2}, name
    assert daemonsets(env)[DCGM]["spec"]["template"]["spec"]["tolerations"] == [
        {"effect": "NoSchedule", "key": "nvidia.com/gpu", "operator": "Exists"}]


def test_network_policies_list_as_kubectl_prints_them(reference):
    _, env = reference
    proc = sh(env, "kubectl get networkpolicies -A -o json")
    doc = json.loads(proc.stdout)
    assert (doc["apiVersion"], doc["kind"], doc["metadata"]) == ("v1", "List", {"resourceVersion": ""})
    assert proc.stdout.startswith('{\n    "apiVersion": "v1",\n    "items": [\n        {\n            "apiVersion": '
                                  '"networking.k8s.io/v1",\n            "kind": "NetworkPolicy",\n')
    items = doc["items"]
    assert [(p["metadata"]["namespace"], p["metadata"]["name"]) for p in items][:3] == [
        ("default", "allow-monitoring-scrapes"), ("default", "allow-same-namespace"),
        ("default", "default-deny-ingress")]
    assert {p["metadata"]["namespace"] for p in items} == {"default", "training", "tenant-a", "tenant-b"}
    deny = items[2]
    assert deny["spec"] == {"podSelector": {}, "policyTypes": ["Ingress"]} and deny["metadata"]["generation"] == 1
    # the API server's default policyTypes for a policy that names none
    assert items[1]["spec"] == {"ingress": [{"from": [{"podSelector": {}}]}], "podSelector": {},
                                "policyTypes": ["Ingress"]}
    assert kubectl_json(env, "get netpol -n tenant-b")["items"][0]["metadata"]["namespace"] == "tenant-b"
    assert kubectl_json(env, "get netpol")["items"] == [p for p in items if p["metadata"]["namespace"] == "default"]


def test_namespaces_are_listed_with_their_labels(reference):
    _, env = reference
    namespaces = {n["metadata"]["name"]: n for n in kubectl_json(env, "get namespaces")["items"]}
    assert {"default", "kube-system", "gpu-operator", "monitoring", "training", "tenant-a", "tenant-b"} <= set(
        namespaces)
    assert namespaces["tenant-a"]["metadata"]["labels"] == {"kubernetes.io/metadata.name": "tenant-a",
                                                            "tenant": "team-a"}
    assert namespaces["tenant-a"]["status"] == {"phase": "Active"}
    # a pod may be created in a namespace of the profile
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "tenant-a"},
           "spec": {"nodeName": "node1", "containers": [{"name": "c", "image": "busybox:1.36", "command": ["true"]}]}}
    assert sh(env, f"echo '{json.dumps(pod)}' | kubectl create -f -").stdout == "pod/p created\n"


def test_live_taints_move_daemon_pods_as_the_controller_does(tmp_path):
    env = sim_cluster(tmp_path, "k8s-reference")
    assert sh(env, "kubectl taint nodes node2 dedicated=x:NoExecute").stdout == "node/node2 tainted\n"
    # a NoExecute taint the exporter does not tolerate: not desired there, its pod evicted
    status = daemonsets(env)[DCGM]["status"]
    assert (status["desiredNumberScheduled"], status["numberMisscheduled"]) == (1, 0)
    drain = sh(env, "kubectl drain node2 --ignore-daemonsets")
    assert "nvidia-dcgm-exporter" not in drain.stderr and "kube-multus-ds" in drain.stderr
    sh(env, "kubectl uncordon node2")
    assert sh(env, "kubectl taint nodes node2 dedicated:NoExecute- dedicated=y:NoSchedule").stdout == \
        "node/node2 modified\n"
    # NoSchedule only: no longer desired, but the pod it already had stays (misscheduled)
    status = daemonsets(env)[DCGM]["status"]
    assert (status["desiredNumberScheduled"], status["numberMisscheduled"], status["numberReady"]) == (1, 1, 1)
    # the profile's taint stayed through all of it
    node = kubectl_json(env, "get node node2")
    assert node["spec"]["taints"] == [GPU_TAINT, {"effect": "NoSchedule", "key": "dedicated", "value": "y"}]


def test_the_scheduler_keeps_pods_without_the_gpu_toleration_off_the_gpu_nodes(tmp_path):
    env = sim_cluster(tmp_path, "k8s-reference")
    spec = importlib.util.spec_from_file_location("k8s_live_copy", SHIMS / "k8s_live.py")
    live = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(live)
    for name, limits in (("gpu", {"nvidia.com/gpu": 1}), ("cpu", {"cpu": 1})):
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": {"containers": [
            {"name": "c", "image": "busybox:1.36", "command": ["true"], "resources": {"limits": limits}}]}}
        assert sh(env, f"echo '{json.dumps(pod)}' | kubectl create -f -").returncode == 0
    doc = live.load(str(tmp_path))
    live.schedule(str(tmp_path), doc, time.time())
    pods = {p["metadata"]["name"]: p for p in doc["pods"]}
    # ExtendedResourceToleration gave the GPU pod its toleration; the CPU-only pod fits nowhere
    assert pods["gpu"]["spec"]["nodeName"] == "node1"
    assert "nodeName" not in pods["cpu"]["spec"]
    assert "untolerated taint {nvidia.com/gpu: present}" in pods["cpu"]["status"]["conditions"][0]["message"]


# ------------------------------------------------------------------ audit-k8s-isolation

def test_isolation_profile_daemonsets_leave_the_gpu_nodes_out(isolation):
    _, env = isolation
    nodes = {n["metadata"]["name"]: n["spec"]["taints"] for n in kubectl_json(env, "get nodes")["items"]}
    assert nodes == {"node1": [GPU_TAINT], "node2": [{"effect": "NoSchedule", "key": "nvidia.com/gpu",
                                                      "value": "true"}]}
    sets = daemonsets(env)
    assert sets[DCGM]["status"] == {"currentNumberScheduled": 1, "desiredNumberScheduled": 1, "numberAvailable": 1,
                                    "numberMisscheduled": 0, "numberReady": 1, "observedGeneration": 1,
                                    "updatedNumberScheduled": 1}
    # scheduled nowhere: the zero fields that are omitempty in apps/v1 are not printed
    assert sets[NODE_EXPORTER]["status"] == {"currentNumberScheduled": 0, "desiredNumberScheduled": 0,
                                             "numberMisscheduled": 0, "numberReady": 0, "observedGeneration": 1}
    assert sets[k8s.DEVICE_PLUGIN]["status"]["desiredNumberScheduled"] == 2
    # drain sees the daemon pods that are there, and only those
    warning = sh(env, "kubectl drain node2 --ignore-daemonsets").stderr
    assert "nvidia-device-plugin-daemonset-" in warning and DCGM not in warning and NODE_EXPORTER not in warning
    assert kubectl_json(env, "get netpol -n tenant-b")["items"] == []


def test_isolation_faults_are_found_through_the_shims(isolation):
    _, env = isolation
    results = verdicts(env)
    monitoring, policy = results["audit.k8s.monitoring_stack"], results["audit.k8s.network_policy"]
    assert monitoring["status"] == "fail" and monitoring["value"] == 1
    assert monitoring["summary"] == (
        "GPU nodes unmonitored: dcgm-exporter never runs on 1 of 2 GPU node(s): DaemonSet "
        "gpu-operator/nvidia-dcgm-exporter does not tolerate taint nvidia.com/gpu=true:NoSchedule (node2); "
        "node-exporter never runs on 2 of 2 GPU node(s): DaemonSet monitoring/kube-prometheus-stack-prometheus-"
        "node-exporter does not tolerate taint nvidia.com/gpu=present:NoSchedule (node1); DaemonSet "
        "monitoring/kube-prometheus-stack-prometheus-node-exporter does not tolerate taint "
        "nvidia.com/gpu=true:NoSchedule (node2)")
    assert policy["status"] == "fail" and policy["value"] == 1
    assert policy["summary"] == "1 of 4 tenant namespace(s) are open to pods of other tenants: tenant-b (no " \
                                "NetworkPolicy)"
    assert set(policy["evidence"]["tenant_namespaces"]) == {"default", "training", "tenant-a", "tenant-b"}
    failing = {c for c, r in results.items() if r["status"] == "fail"}
    assert failing == {"audit.k8s.monitoring_stack", "audit.k8s.network_policy"}


# ------------------------------------------------------------------ profile keys refused, naming the key

@pytest.mark.parametrize(("k8s_yaml", "message"), [
    ("{taint: [a:NoSchedule]}", "k8s has unknown keys ['taint']"),
    ("{taints: ['gpu:Sometimes']}", "k8s.taints: 'gpu:Sometimes' is not key[=value]:Effect"),
    ("{daemonset_tolerations: {dcgm: []}}", "k8s.daemonset_tolerations.dcgm: no such DaemonSet"),
    ("{daemonset_tolerations: {nvidia-dcgm-exporter: [{key: a, operator: Maybe}]}}",
     "k8s.daemonset_tolerations.nvidia-dcgm-exporter[0].operator must be Equal or Exists"),
    ("{daemonset_tolerations: {nvidia-dcgm-exporter: [{key: a, effekt: NoSchedule}]}}",
     "k8s.daemonset_tolerations.nvidia-dcgm-exporter[0] must be a toleration with keys"),
    ("{network_policies: {nowhere: []}}", "k8s.network_policies.nowhere: no such namespace"),
    ("{network_policies: {default: [{name: x, spec: {podselector: {}}}]}}",
     "k8s.network_policies.default[0].spec may only have the keys"),
    ("{network_policies: {default: [{name: x}, {name: x}]}}", "two NetworkPolicies have the same name"),
    ("{admission_plugins: [AlwaysPullImages]}", "k8s.admission_plugins must be a list of"),
])
def test_malformed_k8s_keys_are_refused(tmp_path, k8s_yaml, message):
    path = tmp_path / "p.yml"
    path.write_text(f"extends: k8s-reference\ncluster:\n  k8s: {k8s_yaml}\n")
    try:
        prof = load_profile(path)  # refused when the profile loads, before `sim up` starts anything …
    except ValueError as exc:
        caught = str(exc)
    else:  # … or, where it takes the API's objects to judge (a namespace they create), when the node renders
        with pytest.raises(ValueError) as rendered:
            k8s.render(node_settings(prof, "node1"), render_node(prof, "node1"), Tree())
        caught = str(rendered.value)
    assert message in caught


def test_a_node_level_taint_override():
    prof = load_profile("audit-k8s-isolation")
    tree = Tree()
    k8s.render(node_settings(prof, "node2"), render_node(prof, "node2"), tree)
    node = json.loads(tree.files[f"{k8s.API_DIR}/node.json"][0])["object"]
    assert node["spec"]["taints"] == [{"effect": "NoSchedule", "key": "nvidia.com/gpu", "value": "true"}]
    assert parsers.parse("kubectl-json", json.dumps(node))["items"][0]["spec"]["taints"] == node["spec"]["taints"]
