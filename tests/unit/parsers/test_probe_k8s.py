"""The Kubernetes probes that are not one ``kubectl get -o json``: can-i answers, helm, the kubelet's CPU manager."""

from __future__ import annotations

import pytest

from clustereval.parsers import ParseError, parse

# k8s_can_i against a simulated cluster (kubectl 1.31): a warning line arrives before the answer.
CAN_I = """list nodes: Warning: resource 'nodes' is not namespace scoped
list nodes:\x20
list nodes: yes
list pods --all-namespaces: yes
create pods: no - RBAC: clusterrole.rbac.authorization.k8s.io "view" not found
create jobs.batch: no
create services: error: You must be logged in to the server (Unauthorized)
"""
HELM = ('v3.16.3+gcfd0749\n[{"name":"gpu-operator","namespace":"gpu-operator","revision":"1","updated":'
        '"2026-05-04 08:12:31.402817293 +0000 UTC","status":"deployed","chart":"gpu-operator-v24.9.2",'
        '"app_version":"v24.9.2"}]\n')
CPU_STATE = ('{"policyName":"static","defaultCpuSet":"0-3,96-99","entries":{"a1b2":{"main":"4-47"}},'
             '"checksum":1353318690}')


def test_can_i_answers():
    answers = parse("probe-k8s-can-i", CAN_I)["answers"]
    assert answers["list nodes"] == {"allowed": True, "reason": None,
                                     "messages": ["Warning: resource 'nodes' is not namespace scoped"]}
    assert answers["create pods"] == {"allowed": False, "messages": [],
                                      "reason": 'RBAC: clusterrole.rbac.authorization.k8s.io "view" not found'}
    assert answers["create jobs.batch"]["allowed"] is False and answers["create jobs.batch"]["reason"] is None
    assert answers["create services"]["allowed"] is None
    assert "Unauthorized" in answers["create services"]["messages"][0]


def test_helm_version_and_releases():
    data = parse("probe-k8s-helm", HELM)
    assert data["version"] == "v3.16.3+gcfd0749" and data["releases"][0]["chart"] == "gpu-operator-v24.9.2"


def test_helm_output_that_is_not_helms():
    with pytest.raises(ParseError, match="printed no JSON"):
        parse("probe-k8s-helm", "v3.16.3+gcfd0749\nError: Kubernetes cluster unreachable\n")
    with pytest.raises(ParseError, match="unexpected helm output"):
        parse("probe-k8s-helm", "v3.16.3+gcfd0749\n")
    with pytest.raises(ParseError, match="unexpected helm output"):
        parse("probe-k8s-helm", "helm: command not found\n[]\n")


def test_cpu_manager_state():
    data = parse("probe-k8s-cpu-manager-state", CPU_STATE + "\n")
    assert data["absent"] is None and data["state"]["policyName"] == "static"
    absent = parse("probe-k8s-cpu-manager-state", "absent: /var/lib/kubelet/cpu_manager_state\n")
    assert absent["absent"] == "/var/lib/kubelet/cpu_manager_state" and absent["state"] is None
    with pytest.raises(ParseError, match="not JSON"):
        parse("probe-k8s-cpu-manager-state", "cat: permission denied")
    with pytest.raises(ParseError, match="no policyName"):
        parse("probe-k8s-cpu-manager-state", '{"checksum": 1}')


# k8s_pvc_test on a simulated cluster whose NFS class bound the claim (kubectl's JSON is put on one line).
PVC_TEST = """classes_rc=0
class_seen=local-path rancher.io/local-path WaitForFirstConsumer Delete default
class_seen=shared-fs nfs.csi.k8s.io Immediate Delete
class=shared-fs
class_provisioner=nfs.csi.k8s.io
name=clustereval-pvc-1796142921-726ed0
namespace=
create_rc=0
create=persistentvolumeclaim/clustereval-pvc-1796142921-726ed0 created
phase=Bound
pvc_json={    "apiVersion": "v1",    "kind": "PersistentVolumeClaim",    "metadata": {        "name": \
"clustereval-pvc-1796142921-726ed0",        "namespace": "default"    },    "status": {        "phase": "Bound"    }}
events_json={    "apiVersion": "v1",    "items": [        {            "count": 1,            "kind": "Event",\
            "message": "Waiting for a volume to be created either by the external provisioner 'nfs.csi.k8s.io'",\
            "reason": "ExternalProvisioning",            "type": "Normal"        }    ],    "kind": "List"}
delete_rc=0
delete=persistentvolumeclaim "clustereval-pvc-1796142921-726ed0" deleted
leftovers=
end=ok
"""


def test_pvc_test_lines_claim_and_events():
    data = parse("probe-k8s-pvc-test", PVC_TEST)
    assert data["complete"] is True
    assert data["values"]["class_seen"] == ["local-path rancher.io/local-path WaitForFirstConsumer Delete default",
                                            "shared-fs nfs.csi.k8s.io Immediate Delete"]
    assert data["values"]["namespace"] == [""] and data["values"]["leftovers"] == [""]
    assert data["pvc"]["metadata"]["namespace"] == "default" and data["pvc"]["status"]["phase"] == "Bound"
    assert data["events"] == [{"type": "Normal", "reason": "ExternalProvisioning", "count": 1, "message":
                               "Waiting for a volume to be created either by the external provisioner "
                               "'nfs.csi.k8s.io'"}]


def test_pvc_test_cut_short_or_refused():
    cut = parse("probe-k8s-pvc-test", PVC_TEST.split("delete_rc=")[0])
    assert cut["complete"] is False and cut["pvc"] is not None
    refused = parse("probe-k8s-pvc-test", "create_rc=1\ncreate=Error from server (Forbidden): persistentvolume"
                                          "claims is forbidden\nget_err=Error from server (NotFound)\nevents_json=[]\n"
                                          "end=ok\n")
    assert refused["pvc"] is None and refused["events"] == [] and refused["values"]["create_rc"] == ["1"]
    single = parse("probe-k8s-pvc-test", 'events_json={"kind": "Event", "reason": "ProvisioningFailed"}\n')
    assert single["events"][0]["reason"] == "ProvisioningFailed"
