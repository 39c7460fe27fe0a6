"""Kubernetes audit checks as a whole: every check passes on a healthy cluster, skips without Kubernetes facts
or on other harnesses, errors when the API cannot be reached; the kubectl parsers on our objects; the API probes
are read-only."""

from __future__ import annotations

import json

import pytest

from clustereval import parsers
from tests.unit.k8s_objects import (
    configmap,
    healthy_objects,
    klist,
    node,
    pvc,
    storage_class,
)
from tests.unit.k8s_probes import (
    API_RESOURCES,
    CLUSTER_CHECKS,
    run,
    status,
    to_probes,
)

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
    # k8s_network_policies is built by test_audit_k8s_isolation (the shared to_probes does not make it)
    assert names == set(to_probes(healthy_objects())) | {"k8s_network_policies"}
    for definition in api:
        assert definition["name"].startswith("k8s_") and definition["tool"] in ("kubectl", "helm")
        if definition["name"] == "k8s_pvc_test":
            continue
        assert not any(verb in definition["cmd"] for verb in ("kubectl create", "kubectl apply", "kubectl delete",
                                                         "kubectl patch", "helm install", " create -f", " delete "))
    # the one that acts: only when allowed, its delete always runs (an EXIT trap), and its check says it acts
    acting = probe_catalogue.load()["k8s_pvc_test"]["cmd"]
    assert acting.startswith("case ${CLUSTEREVAL_ALLOW_ACTIONS-unset} in\n  1) ;;")
    assert "trap cleanup EXIT" in acting and acting.index("trap cleanup EXIT") < acting.index("k create -f -")
    assert catalogue.entry("audit.k8s.csi_rwx")["acts"] is True
    node = [p for p in probe_catalogue.for_phase("audit") if p["name"].startswith("k8s_")]
    assert [p["name"] for p in node] == ["k8s_cpu_manager_state"]
