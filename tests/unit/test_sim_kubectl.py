"""The simulated kubectl and helm: run as the nodes run them (a copy in ``<cluster>/shims/``, node files under
``<cluster>/nodes/<node>/overlay``), fed by the API state the k8s overlay renders from a profile.

Asserts real kubectl's shapes and errors, and that the audit-k8s probes, run through the shims, give the
k8s checks their healthy verdicts on k8s-reference and the expected findings on audit-k8s.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from clustereval import checks, parsers
from clustereval.checks import Context, probe_catalogue
from clustereval.parsers.probe_key_values import key_values
from clustereval.results import CLUSTER_SUBJECT
from clustereval.sim.overlays import Tree, k8s
from clustereval.sim.profile import load_profile, node_settings, render_node

SHIMS = Path(__file__).resolve().parents[2] / "src" / "clustereval" / "sim" / "shims"


def sim_cluster(root: Path, profile: str, nodes: int = 2) -> dict[str, str]:
    """A cluster directory laid out as ``clustereval sim up`` lays it out; returns the API host's env."""
    prof = load_profile(profile)
    bin_dir = root / "shims"
    bin_dir.mkdir()
    for tool, source in k8s.SHIMS.items():
        shutil.copy(SHIMS / source, bin_dir / tool)
        (bin_dir / tool).chmod(0o755)
    for module in ("k8s_live.py", "k8s_volumes.py"):  # live nodes and pods (D/k8s/cluster.json), the volumes
        shutil.copy(SHIMS / module, bin_dir / module)
    for index in range(1, nodes + 1):
        name = f"node{index}"
        tree = Tree()
        k8s.render(node_settings(prof, name), render_node(prof, name), tree)
        for path, (content, _mode) in tree.files.items():
            target = root / "nodes" / name / "overlay" / path.lstrip("/")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(content)
    api = root / "nodes" / "node1" / "overlay" / k8s.API_DIR.lstrip("/") / "api.json"
    # the provisioning test waits 2 s (not 30) for a claim that never binds; actions allowed, as the role's default
    return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "CLUSTEREVAL_SIM_K8S_API": str(api),
            "CLUSTEREVAL_K8S_PVC_WAIT": "2", "CLUSTEREVAL_ALLOW_ACTIONS": "1"}


def faulty_cluster(tmp_path: Path, name: str, faults: str) -> dict[str, str]:
    """A k8s-reference cluster whose node1 has ``faults`` (YAML lines under ``faults:``, indented 6)."""
    profile = tmp_path / f"{name}.yml"
    profile.write_text(f"extends: k8s-reference\nnodes:\n  node1:\n    faults:\n{faults}")
    (tmp_path / name).mkdir()
    return sim_cluster(tmp_path / name, str(profile))


def sh(env: dict[str, str], cmd: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["/bin/sh", "-c", cmd], capture_output=True, text=True, env=env, timeout=30)


@pytest.fixture(scope="module")
def healthy(tmp_path_factory):
    return sim_cluster(tmp_path_factory.mktemp("k8s-ref"), "k8s-reference")


@pytest.fixture(scope="module")
def flawed(tmp_path_factory):
    return sim_cluster(tmp_path_factory.mktemp("audit-k8s"), "audit-k8s")


# ------------------------------------------------------------------ kubectl's own shapes and errors

def test_get_nodes_lists_every_simulated_node_as_a_kubectl_list(healthy):
    proc = sh(healthy, "kubectl get nodes -o json")
    assert proc.returncode == 0 and proc.stderr == ""
    doc = json.loads(proc.stdout)
    assert list(doc) == ["apiVersion", "items", "kind", "metadata"]
    assert doc["kind"] == "List" and doc["metadata"] == {"resourceVersion": ""}
    assert proc.stdout.startswith('{\n    "apiVersion": "v1",\n    "items": [\n') and proc.stdout.endswith("}\n")
    data = parsers.parse("kubectl-json", proc.stdout)
    assert [n["name"] for n in data["items"]] == ["node1", "node2"]
    node = data["items"][0]
    assert node["status"]["allocatable"]["nvidia.com/gpu"] == "8"
    assert node["labels"]["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"
    assert node["labels"]["nvidia.com/gpu.count"] == "8"
    assert node["labels"]["feature.node.kubernetes.io/pci-15b3.present"] == "true"
    # the existing node parser reads the same output
    assert parsers.parse("kubectl-nodes", proc.stdout)["nodes"][1]["allocatable_gpus"] == 8


def test_unknown_resource_type_is_kubectls_error(healthy):
    proc = sh(healthy, "kubectl get computedomains.resource.nvidia.com -A -o json")
    assert (proc.returncode, proc.stdout) == (1, "")
    assert proc.stderr == 'error: the server doesn\'t have a resource type "computedomains"\n'
    # one unknown type among several fails the whole command before anything is listed
    proc = sh(healthy, "kubectl get services,gatewayclasses.gateway.networking.k8s.io -A -o json")
    assert (proc.returncode, proc.stdout) == (1, "")
    assert '"gatewayclasses"' in proc.stderr


def test_several_kinds_in_one_list_with_namespaces(healthy):
    proc = sh(healthy, "kubectl get storageclasses.storage.k8s.io,csidrivers.storage.k8s.io,persistentvolumeclaims "
                       "-A -o json")
    data = parsers.parse("kubectl-json", proc.stdout)
    assert data["kinds"] == {"StorageClass": 2, "CSIDriver": 1, "PersistentVolumeClaim": 1}
    pvc = next(i for i in data["items"] if i["kind"] == "PersistentVolumeClaim")
    assert pvc["namespace"] == "training" and pvc["status"]["phase"] == "Bound"
    # without -A only the default namespace: the PVC lives in "training"
    data = parsers.parse("kubectl-json", sh(healthy, "kubectl get pvc -o json").stdout)
    assert data["items"] == []


def test_field_selector_loop_prints_a_stream_of_lists(healthy):
    proc = sh(healthy, "for n in rdma-devices nothing-here; do kubectl get configmaps -A "
                       "--field-selector metadata.name=$n -o json; done")
    data = parsers.parse("kubectl-json", proc.stdout)
    assert data["format"] == "stream" and data["documents"] == 2
    assert [i["name"] for i in data["items"]] == ["rdma-devices"]


def test_daemonset_status_follows_the_nodes(healthy, flawed):
    def plugin(env):
        data = parsers.parse("kubectl-json", sh(env, "kubectl get daemonsets.apps -A -o json").stdout)
        return next(i["status"] for i in data["items"] if i["name"] == k8s.DEVICE_PLUGIN)

    assert (plugin(healthy)["desiredNumberScheduled"], plugin(healthy)["numberReady"]) == (2, 2)
    assert (plugin(flawed)["desiredNumberScheduled"], plugin(flawed)["numberReady"]) == (2, 1)


def test_kube_prometheus_stack_workloads(healthy):
    data = parsers.parse("kubectl-json", sh(healthy, "kubectl get deployments.apps,daemonsets.apps,statefulsets.apps "
                                                     "-A -o json").stdout)
    monitoring = {(i["kind"], i["name"]): i for i in data["items"] if i["namespace"] == "monitoring"}
    assert set(monitoring) == {
        ("DaemonSet", "kube-prometheus-stack-prometheus-node-exporter"),
        ("Deployment", "kube-prometheus-stack-operator"), ("Deployment", "kube-prometheus-stack-grafana"),
        ("Deployment", "kube-prometheus-stack-kube-state-metrics"),
        ("StatefulSet", "prometheus-kube-prometheus-stack-prometheus"),
        ("StatefulSet", "alertmanager-kube-prometheus-stack-alertmanager")}
    # node-exporter runs on every Linux node; the operator-made StatefulSet carries the operator's labels
    node_exporter = monitoring[("DaemonSet", "kube-prometheus-stack-prometheus-node-exporter")]
    assert (node_exporter["status"]["desiredNumberScheduled"], node_exporter["status"]["numberReady"]) == (2, 2)
    prometheus = monitoring[("StatefulSet", "prometheus-kube-prometheus-stack-prometheus")]
    assert prometheus["labels"]["app.kubernetes.io/managed-by"] == "prometheus-operator"
    assert prometheus["spec"]["serviceName"] == "prometheus-operated"
    assert prometheus["status"]["readyReplicas"] == 1
    assert prometheus["status"]["currentRevision"] == prometheus["status"]["updateRevision"]
    pod = prometheus["spec"]["template"]["spec"]
    assert [c["name"] for c in pod["containers"]] == ["prometheus", "config-reloader"]
    assert [c["name"] for c in pod["initContainers"]] == ["init-config-reloader"]
    grafana = monitoring[("Deployment", "kube-prometheus-stack-grafana")]["spec"]["template"]["spec"]
    assert grafana["containers"][-1]["image"] == "docker.io/grafana/grafana:11.3.1"
    # the prometheus-operator CRDs are served
    resources = parsers.parse("kubectl-api-resources", sh(healthy, "kubectl api-resources").stdout)["resources"]
    assert {r["name"] for r in resources if r["group"] == "monitoring.coreos.com"} >= {"prometheuses",
                                                                                      "servicemonitors"}


def test_auth_can_i_answers_and_exit_codes(healthy, flawed):
    proc = sh(healthy, "kubectl auth can-i create pods")
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "yes\n", "")
    proc = sh(flawed, "kubectl auth can-i create pods")
    assert (proc.returncode, proc.stdout) == (1, "no\n")
    proc = sh(healthy, "kubectl auth can-i list nodes")
    assert proc.stdout == "yes\n" and proc.stderr.startswith("Warning: resource 'nodes' is not namespace scoped\n")
    proc = sh(healthy, "kubectl auth can-i list storageclasses")
    assert "is not namespace scoped in group 'storage.k8s.io'" in proc.stderr
    assert sh(healthy, "kubectl auth can-i list pods --all-namespaces").stderr == ""


def test_forbidden_list_is_the_api_servers_error(tmp_path):
    api = {"user": "tenant-a", "denied": ["list storageclasses"],
           "resources": [{"name": "storageclasses", "shortnames": ["sc"], "group": "storage.k8s.io", "version": "v1",
                          "namespaced": False, "kind": "StorageClass"}], "objects": {}}
    (tmp_path / "api.json").write_text(json.dumps(api))
    env = {**os.environ, "CLUSTEREVAL_SIM_K8S_API": str(tmp_path / "api.json")}
    proc = subprocess.run(["/usr/bin/python3", str(SHIMS / "kubectl.py"), "get", "sc", "-o", "json"],
                          capture_output=True, text=True, env=env)
    assert (proc.returncode, proc.stdout) == (1, "")
    assert proc.stderr == ('Error from server (Forbidden): storageclasses.storage.k8s.io is forbidden: User '
                           '"tenant-a" cannot list resource "storageclasses" in API group "storage.k8s.io" at the '
                           'cluster scope\n')


def test_without_an_api_it_is_kubectl_without_a_kubeconfig(tmp_path):
    env = {**os.environ, "CLUSTEREVAL_SIM_K8S_API": str(tmp_path / "absent.json")}
    proc = subprocess.run(["/usr/bin/python3", str(SHIMS / "kubectl.py"), "get", "nodes", "-o", "json"],
                          capture_output=True, text=True, env=env)
    assert proc.returncode == 1 and "The connection to the server localhost:8080 was refused" in proc.stderr
    proc = subprocess.run(["/usr/bin/python3", str(SHIMS / "kubectl.py"), "version", "-o", "json"],
                          capture_output=True, text=True, env=env)
    assert proc.returncode == 1 and "serverVersion" not in json.loads(proc.stdout)


def test_version_and_api_resources_parse(healthy):
    data = parsers.parse("kubectl-json", sh(healthy, "kubectl version -o json").stdout)
    assert data["format"] == "version" and data["version"]["server"]["gitVersion"] == "v1.31.4"
    table = sh(healthy, "kubectl api-resources").stdout
    assert table.split("\n", 1)[0].split() == ["NAME", "SHORTNAMES", "APIVERSION", "NAMESPACED", "KIND"]
    resources = parsers.parse("kubectl-api-resources", table)["resources"]
    nad = next(r for r in resources if r["name"] == "network-attachment-definitions")
    assert nad == {"name": "network-attachment-definitions", "group": "k8s.cni.cncf.io", "version": "v1",
                   "namespaced": True, "kind": "NetworkAttachmentDefinition", "short_names": ["net-attach-def"]}


def test_helm(healthy):
    proc = sh(healthy, "helm version --short && helm list --all-namespaces --max 1 -o json")
    version, releases = proc.stdout.split("\n", 1)
    assert proc.returncode == 0 and version == "v3.16.3+gcfd0749"
    assert json.loads(releases)[0]["chart"] == "gpu-operator-v24.9.2"


# ------------------------------------------------------------------ claims: create, read back, delete (state persists)

CLAIM = {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
         "metadata": {"name": "scratch-rwx", "labels": {"app.kubernetes.io/managed-by": "clustereval",
                                                          "clustereval/test": "pvc-provisioning"}},
         "spec": {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "1Gi"}},
                  "storageClassName": "shared-fs"}}


def create(env, claim, *flags):
    return subprocess.run(["/bin/sh", "-c", "kubectl create -f - " + " ".join(flags)], input=json.dumps(claim),
                          capture_output=True, text=True, env=env, timeout=30)


@pytest.fixture
def fresh(tmp_path):
    return sim_cluster(tmp_path, "k8s-reference")


def test_a_claim_on_the_immediate_nfs_class_binds_and_its_deletion_removes_the_volume(fresh):
    proc = create(fresh, CLAIM)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "persistentvolumeclaim/scratch-rwx created\n", "")
    # each kubectl call is a new process: the claim persists in state.json next to the API file
    state = Path(fresh["CLUSTEREVAL_SIM_K8S_API"]).parent / "state.json"
    assert state.is_file()
    proc = sh(fresh, "kubectl get pvc scratch-rwx -o json --request-timeout=10s")
    assert proc.returncode == 0 and proc.stdout.startswith('{\n    "apiVersion": "v1",\n    "kind": '
                                                           '"PersistentVolumeClaim",\n')
    claim = json.loads(proc.stdout)  # one named object: the object itself, not a List
    assert list(claim) == ["apiVersion", "kind", "metadata", "spec", "status"]
    assert claim["metadata"]["namespace"] == "default" and claim["metadata"]["finalizers"] == [
        "kubernetes.io/pvc-protection"]
    assert claim["metadata"]["annotations"]["pv.kubernetes.io/bind-completed"] == "yes"
    assert claim["metadata"]["annotations"]["volume.kubernetes.io/storage-provisioner"] == "nfs.csi.k8s.io"
    assert claim["spec"]["volumeMode"] == "Filesystem"
    assert claim["spec"]["volumeName"] == "pvc-" + claim["metadata"]["uid"]
    assert claim["status"] == {"accessModes": ["ReadWriteMany"], "capacity": {"storage": "1Gi"}, "phase": "Bound"}
    item = parsers.parse("kubectl-json", proc.stdout)["items"][0]
    assert item["kind"] == "PersistentVolumeClaim" and item["labels"]["app.kubernetes.io/managed-by"] == "clustereval"
    pv = json.loads(sh(fresh, "kubectl get pv -o json").stdout)["items"]
    assert [v["metadata"]["name"] for v in pv] == [claim["spec"]["volumeName"]]
    assert pv[0]["spec"]["claimRef"]["name"] == "scratch-rwx" and pv[0]["spec"]["csi"]["driver"] == "nfs.csi.k8s.io"
    events = json.loads(sh(fresh, "kubectl get events --field-selector involvedObject.kind=PersistentVolumeClaim,"
                                  "involvedObject.name=scratch-rwx -o json").stdout)["items"]
    assert [(e["type"], e["reason"]) for e in events] == [
        ("Normal", "ExternalProvisioning"), ("Normal", "Provisioning"), ("Normal", "ProvisioningSucceeded")]
    assert events[-1]["message"] == f"Successfully provisioned volume {claim['spec']['volumeName']}"
    assert events[1]["source"]["component"].startswith("nfs.csi.k8s.io_csi-nfs-controller-")
    # the tenant's claims of every namespace, ours among them, as the audit's k8s_storage probe lists them
    data = parsers.parse("kubectl-json", sh(fresh, "kubectl get persistentvolumeclaims -A -o json").stdout)
    assert [(i["namespace"], i["name"]) for i in data["items"]] == [("default", "scratch-rwx"),
                                                                     ("training", "datasets")]
    proc = sh(fresh, "kubectl delete pvc scratch-rwx --ignore-not-found --wait=true --timeout=20s")
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, 'persistentvolumeclaim "scratch-rwx" deleted\n', "")
    assert json.loads(sh(fresh, "kubectl get pv -o json").stdout)["items"] == []  # reclaimPolicy Delete
    proc = sh(fresh, "kubectl get pvc scratch-rwx -o json")
    assert (proc.returncode, proc.stdout) == (1, "")
    assert proc.stderr == 'Error from server (NotFound): persistentvolumeclaims "scratch-rwx" not found\n'
    proc = sh(fresh, "kubectl delete pvc scratch-rwx")
    assert (proc.returncode, proc.stdout) == (1, "")
    assert proc.stderr == 'Error from server (NotFound): persistentvolumeclaims "scratch-rwx" not found\n'
    # --ignore-not-found: silent for a name; a selector matching nothing says so on stdout
    assert sh(fresh, "kubectl delete pvc scratch-rwx --ignore-not-found").stdout == ""
    proc = sh(fresh, "kubectl delete pvc -l app.kubernetes.io/managed-by=clustereval --ignore-not-found")
    assert (proc.returncode, proc.stdout) == (0, "No resources found\n")
    # the events outlive the claim, as the API server keeps them for an hour
    assert "ProvisioningSucceeded" in sh(fresh, "kubectl get events -o json").stdout


def test_claims_that_do_not_bind(fresh, tmp_path):
    default_class = dict(CLAIM, metadata={"name": "on-default"},
                         spec={k: v for k, v in CLAIM["spec"].items() if k != "storageClassName"})
    assert create(fresh, default_class).returncode == 0
    claim = json.loads(sh(fresh, "kubectl get pvc on-default -o json").stdout)
    # the DefaultStorageClass admission names the default class; local-path waits for a pod
    assert claim["spec"]["storageClassName"] == "local-path" and claim["status"] == {"phase": "Pending"}
    events = json.loads(sh(fresh, "kubectl get events --field-selector involvedObject.name=on-default "
                                  "-o json").stdout)["items"]
    assert [(e["reason"], e["message"]) for e in events] == [
        ("WaitForFirstConsumer", "waiting for first consumer to be created before binding")]
    # a class that does not exist
    assert create(fresh, dict(CLAIM, metadata={"name": "nowhere"}, spec={**CLAIM["spec"],
                                                                          "storageClassName": "gold"})).returncode == 0
    events = json.loads(sh(fresh, "kubectl get events --field-selector involvedObject.name=nowhere "
                                  "-o json").stdout)["items"]
    assert [(e["type"], e["reason"], e["message"]) for e in events] == [
        ("Warning", "ProvisioningFailed", 'storageclass.storage.k8s.io "gold" not found')]
    # the provisioning fault: the NFS provisioner fails every claim
    env = faulty_cluster(tmp_path, "fails", "      k8s_pvc_provisioning_fails: 'rpc error: code = DeadlineExceeded "
                                            "desc = context deadline exceeded'\n")
    assert create(env, CLAIM).returncode == 0
    claim = json.loads(sh(env, "kubectl get pvc scratch-rwx -o json").stdout)
    assert claim["status"] == {"phase": "Pending"} and "volumeName" not in claim["spec"]
    events = json.loads(sh(env, "kubectl get events -o json").stdout)["items"]
    assert (events[-1]["type"], events[-1]["reason"], events[-1]["message"]) == (
        "Warning", "ProvisioningFailed", 'failed to provision volume with StorageClass "shared-fs": rpc error: '
                                         "code = DeadlineExceeded desc = context deadline exceeded")
    assert sh(env, "kubectl delete pvc scratch-rwx").stdout == 'persistentvolumeclaim "scratch-rwx" deleted\n'


def test_claims_belong_to_the_api_file_they_were_made_on(fresh):
    assert create(fresh, CLAIM).returncode == 0
    api = Path(fresh["CLUSTEREVAL_SIM_K8S_API"])
    text = api.read_text()
    api.unlink()
    api.write_text(text)  # the overlay rendered anew (`clustereval sim up` again over the same directory)
    names = [i["metadata"]["name"] for i in json.loads(sh(fresh, "kubectl get pvc -A -o json").stdout)["items"]]
    assert names == ["datasets"]


def test_create_refusals_are_the_api_servers(fresh, tmp_path):
    assert create(fresh, CLAIM).returncode == 0
    proc = create(fresh, CLAIM)
    assert (proc.returncode, proc.stdout) == (1, "")
    assert proc.stderr == ('Error from server (AlreadyExists): error when creating "STDIN": persistentvolumeclaims '
                           '"scratch-rwx" already exists\n')
    proc = create(fresh, CLAIM, "-n", "gpu-eval")
    assert proc.stderr == 'Error from server (NotFound): error when creating "STDIN": namespaces "gpu-eval" not found\n'
    env = faulty_cluster(tmp_path, "denied",
                         "      k8s_rbac_denied: [create persistentvolumeclaims, delete persistentvolumeclaims]\n")
    proc = create(env, CLAIM, "-n", "training")
    assert (proc.returncode, proc.stdout) == (1, "")
    assert proc.stderr == ('Error from server (Forbidden): error when creating "STDIN": persistentvolumeclaims is '
                           'forbidden: User "tenant-a" cannot create resource "persistentvolumeclaims" in API group "" '
                           'in the namespace "training"\n')
    proc = sh(env, "kubectl delete pvc datasets -n training")
    assert proc.stderr == ('Error from server (Forbidden): persistentvolumeclaims "datasets" is forbidden: User '
                           '"tenant-a" cannot delete resource "persistentvolumeclaims" in API group "" in the '
                           'namespace "training"\n')


def test_jsonpath_and_label_selectors(healthy):
    template = ('{range .items[*]}{.metadata.name}{"\\t"}{.provisioner}{"\\t"}{.volumeBindingMode}{"\\t"}'
                '{.metadata.annotations.storageclass\\.kubernetes\\.io/is-default-class}{"\\n"}{end}')
    proc = subprocess.run(["kubectl", "get", "storageclasses.storage.k8s.io", "-o", f"jsonpath={template}"],
                          capture_output=True, text=True, env=healthy, timeout=30)
    assert proc.stdout == ("local-path\trancher.io/local-path\tWaitForFirstConsumer\ttrue\n"
                           "shared-fs\tnfs.csi.k8s.io\tImmediate\t\n")
    proc = sh(healthy, "kubectl get nodes -o "
                       "jsonpath='{.items[0].metadata.name} {.items[*].status.capacity.nvidia\\.com/gpu}'")
    assert proc.stdout == "node1 8 8"  # no newline: kubectl adds none to a JSONPath template
    listed = sh(healthy, "kubectl get deployments.apps -A -l app.kubernetes.io/name=kueue-controller-manager -o json")
    assert [i["name"] for i in parsers.parse("kubectl-json", listed.stdout)["items"]] == ["kueue-controller-manager"]
    proc = sh(healthy, "kubectl get events --field-selector reason=Nope,source=x -o json")
    assert proc.returncode == 0 and json.loads(proc.stdout)["items"] == []
    proc = sh(healthy, "kubectl get pvc -A --field-selector status.phase=Bound -o json")
    assert proc.returncode == 1 and "field label not supported: status.phase" in proc.stderr


# ------------------------------------------------------------------ the audit's probes through the shims

def collect(env: dict[str, str]) -> dict[str, dict]:
    """What clustereval.gpu.collect returns for the audit-k8s probes, run here through the shims."""
    def run(probe: dict) -> tuple[str, dict]:
        proc = sh(env, probe["cmd"])
        return probe["name"], {**probe, "rc": proc.returncode, "stdout": proc.stdout, "stderr": proc.stderr,
                               "missing": False, "timed_out": False}

    with ThreadPoolExecutor(max_workers=8) as pool:  # as the collect module runs them
        return dict(pool.map(run, probe_catalogue.for_phase("audit-k8s")))


def verdicts(env: dict[str, str]) -> dict[str, dict]:
    probes = collect(env)
    ids = [c for c in checks.registered() if c.startswith("audit.k8s.") and c != "audit.k8s.kubelet_cpu_manager"]
    return {c: checks.evaluate(c, Context(subject=CLUSTER_SUBJECT, probes=probes, options={"harness": "k8s"}),
                               "test") for c in ids}


def leftover_claims(env: dict[str, str]) -> list[str]:
    """Every claim of clustereval's provisioning test the simulated API still holds, in any namespace."""
    proc = sh(env, "kubectl get pvc -A -l app.kubernetes.io/managed-by=clustereval -o jsonpath="
                   "'{range .items[*]}{.metadata.namespace}/{.metadata.name}{\"\\n\"}{end}'")
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.split()


def test_k8s_reference_passes_every_cluster_check(healthy):
    results = verdicts(healthy)
    rwx = results["audit.k8s.csi_rwx"]
    assert re.fullmatch(r"test PVC default/clustereval-pvc-\d+-[0-9a-f]+ on shared-fs \(nfs\.csi\.k8s\.io\) "
                        r"\(ReadWriteMany, 1Gi\) bound in [0-2] s and deleted", rwx["summary"]), rwx["summary"]
    assert not leftover_claims(healthy)
    not_passing = {c: (r["status"], r["summary"]) for c, r in results.items() if r["status"] != "pass"}
    # no NVLink clique spans two nodes on an HGX H100: the multi-node NVLink check does not apply
    assert not_passing == {"audit.k8s.multinode_nvlink": ("skip", not_passing["audit.k8s.multinode_nvlink"][1])}


def test_audit_k8s_faults_are_found(flawed):
    results = verdicts(flawed)
    failing = {c for c, r in results.items() if r["status"] == "fail"}
    assert failing == {"audit.k8s.default_storage_class", "audit.k8s.rbac_access", "audit.k8s.rdma_exposure",
                       "audit.k8s.gpu_operator", "audit.k8s.monitoring_stack", "audit.k8s.csi_rwx"}
    assert "did not bind: ProvisioningFailed: failed to provision volume with StorageClass \"shared-fs\"" in \
        results["audit.k8s.csi_rwx"]["summary"]
    assert not leftover_claims(flawed)
    assert "ready on none of the 2 GPU node(s)" in results["audit.k8s.monitoring_stack"]["summary"]
    assert "gpu-operator/nvidia-dcgm-exporter 0/2" in results["audit.k8s.monitoring_stack"]["summary"]
    assert "create pods" in results["audit.k8s.rbac_access"]["summary"]
    assert "nvidia.com/mlnxics" in results["audit.k8s.rdma_exposure"]["summary"]
    assert "node2" in results["audit.k8s.gpu_operator"]["summary"]
    assert "none is the default" in results["audit.k8s.default_storage_class"]["summary"]


def test_kubelet_cpu_manager_checkpoint(tmp_path):
    prof = load_profile("audit-k8s")
    for node, status in (("node1", "pass"), ("node2", "warn")):
        tree = Tree()
        k8s.render(node_settings(prof, node), render_node(prof, node), tree)
        text, mode = tree.files["/var/lib/kubelet/cpu_manager_state"]
        probe = {"k8s_cpu_manager_state": {"name": "k8s_cpu_manager_state", "cmd": "cat", "rc": 0, "stdout": text,
                                           "stderr": ""}}
        result = checks.evaluate("audit.k8s.kubelet_cpu_manager",
                                 Context(subject=node, probes=probe, options={"harness": "k8s"}), "test")
        assert result["status"] == status and mode == 0o600


def test_plain_reference_renders_no_kubernetes():
    prof = load_profile("reference")
    tree = Tree()
    k8s.render(node_settings(prof, "node1"), render_node(prof, "node1"), tree)
    assert tree.files == {}


def test_components_down_fault(tmp_path):
    env = faulty_cluster(tmp_path, "cluster", "      k8s_components_down: [volcano-scheduler, nvidia-dcgm-exporter, "
                                              "prometheus-kube-prometheus-stack-prometheus]\n")
    data = parsers.parse("kubectl-json", sh(env, "kubectl get deployments.apps,daemonsets.apps,statefulsets.apps "
                                                 "-A -o json").stdout)
    state = {i["name"]: i["status"] for i in data["items"]}
    assert "readyReplicas" not in state["volcano-scheduler"] and state["volcano-scheduler"]["replicas"] == 1
    assert (state["nvidia-dcgm-exporter"]["desiredNumberScheduled"], state["nvidia-dcgm-exporter"]["numberReady"]) \
        == (2, 0)
    results = verdicts(env)
    assert results["audit.k8s.gang_scheduling"]["status"] == "fail"
    assert "volcano" in results["audit.k8s.gang_scheduling"]["summary"]
    assert state["prometheus-kube-prometheus-stack-prometheus"]["replicas"] == 1
    assert "readyReplicas" not in state["prometheus-kube-prometheus-stack-prometheus"]
    assert results["audit.k8s.monitoring_stack"]["status"] == "fail"


def test_provisioning_test_not_tried_when_actions_are_disabled(tmp_path):
    env = {**sim_cluster(tmp_path, "k8s-reference"), "CLUSTEREVAL_ALLOW_ACTIONS": "0"}
    probe = probe_catalogue.load()["k8s_pvc_test"]
    proc = sh(env, probe["cmd"])
    assert (proc.returncode, proc.stdout) == (0, "skipped=actions are switched off (clustereval_audit_allow_actions="
                                                 "false): no test PVC created\nend=ok\n")
    assert not (Path(env["CLUSTEREVAL_SIM_K8S_API"]).parent / "state.json").exists()  # nothing was written
    probes = {"k8s_storage": {**probe_catalogue.load()["k8s_storage"], "rc": 0, "stderr": "",
                              "stdout": sh(env, probe_catalogue.load()["k8s_storage"]["cmd"]).stdout},
              "k8s_pvc_test": {**probe, "rc": 0, "stdout": proc.stdout, "stderr": ""}}
    result = checks.evaluate("audit.k8s.csi_rwx", Context(subject=CLUSTER_SUBJECT, probes=probes,
                                                          options={"harness": "k8s"}), "test")
    assert result["status"] == "pass"
    assert result["summary"].endswith("provisioning not tried (actions disabled: "
                                      "clustereval_audit_allow_actions=false)")


def test_provisioning_test_sweeps_old_leftovers_and_keeps_a_running_one(tmp_path):
    env = sim_cluster(tmp_path, "k8s-reference")
    now = int(time.time())
    for name in (f"clustereval-pvc-{now - 3600}-0a1b2c", f"clustereval-pvc-{now - 60}-3d4e5f"):
        assert create(env, {**CLAIM, "metadata": {**CLAIM["metadata"], "name": name}}).returncode == 0
    proc = sh(env, probe_catalogue.load()["k8s_pvc_test"]["cmd"])
    lines = proc.stdout.splitlines()
    assert f"leftovers=clustereval-pvc-{now - 3600}-0a1b2c" in lines
    assert f'sweep=persistentvolumeclaim "clustereval-pvc-{now - 3600}-0a1b2c" deleted' in lines
    assert lines[-1] == "end=ok" and "phase=Bound" in lines and "delete_rc=0" in lines
    # a claim a minute old may belong to an audit running elsewhere: it stays
    assert leftover_claims(env) == [f"default/clustereval-pvc-{now - 60}-3d4e5f"]


def test_provisioning_test_in_a_named_namespace(tmp_path):
    env = {**sim_cluster(tmp_path, "k8s-reference"), "CLUSTEREVAL_K8S_NAMESPACE": "training"}
    proc = sh(env, probe_catalogue.load()["k8s_pvc_test"]["cmd"])
    facts = key_values(proc.stdout)
    assert facts["namespace"] == ["training"] and facts["phase"] == ["Bound"]
    assert json.loads(facts["pvc_json"][0])["metadata"]["namespace"] == "training"
    env["CLUSTEREVAL_K8S_NAMESPACE"] = "gpu-eval"
    facts = key_values(sh(env, probe_catalogue.load()["k8s_pvc_test"]["cmd"]).stdout)
    assert facts["create_rc"] == ["1"] and "namespaces \"gpu-eval\" not found" in facts["create"][0]
    assert facts["delete_rc"] == ["0"] and facts["end"] == ["ok"]  # the delete ran although create failed
    assert not leftover_claims(env)
