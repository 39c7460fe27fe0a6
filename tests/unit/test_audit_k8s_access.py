"""Kubernetes audit checks: RBAC, Helm and vCluster tenancy, every status from kubectl JSON we wrote."""

from __future__ import annotations

from tests.unit.k8s_objects import (
    healthy_objects,
)
from tests.unit.k8s_probes import (
    CAN_I_ALL_YES,
    run,
    status,
    to_probes,
)


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
