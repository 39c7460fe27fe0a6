"""Kubernetes audit checks: the default StorageClass and the shared-file-system provisioning test, every status
from kubectl JSON we wrote."""

from __future__ import annotations

import json

from clustereval.parsers.probe_key_values import key_values
from tests.unit.k8s_objects import (
    csidriver,
    healthy_objects,
    pvc,
    storage_class,
)
from tests.unit.k8s_probes import (
    BOUND_EVENTS,
    FAILED_EVENTS,
    NOT_TRIED,
    TEST_PVC,
    TEST_VOLUME,
    WFFC_EVENTS,
    claim_event,
    own_claim,
    pvc_test_out,
    run,
    status,
    to_probes,
)


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
