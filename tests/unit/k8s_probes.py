"""The audit-k8s probes as the collect module returns them, built from :mod:`tests.unit.k8s_objects`, and the
call that judges a Kubernetes check on them; the storage provisioning test's output (``k8s_pvc_test``) in the
layout its script prints.
"""

from __future__ import annotations

import json

from clustereval.results import CLUSTER_SUBJECT
from tests.helpers import judge, probe
from tests.unit.k8s_objects import (
    cr,
    healthy_objects,
    klist,
    meta,
)

# ------------------------------------------------------------------ the storage provisioning test's output

TEST_PVC = "clustereval-pvc-1746346351-3f9a1c"
TEST_PVC_LABELS = {"app.kubernetes.io/managed-by": "clustereval", "clustereval/test": "pvc-provisioning"}
TEST_VOLUME = "pvc-6c1e2f4a-93b7-4d2e-8f0a-5b7c9d1e3f21"
NFS_COMPONENT = "nfs.csi.k8s.io_csi-nfs-controller-6d8f9b7c5d-q4x7m_0f6b8c1e-2d4a-4e5f-9a7b-3c2d1e0f9a8b"
EXTERNAL_PROVISIONING = ("Waiting for a volume to be created either by the external provisioner 'nfs.csi.k8s.io' or "
                         "manually by the system administrator. If volume creation is delayed, please verify that "
                         "the provisioner is running and correctly registered.")
NFS_MOUNT_FAILED = ('failed to provision volume with StorageClass "shared-fs": rpc error: code = Internal desc = '
                    "failed to mount nfs server: rpc error: code = Internal desc = mount failed: exit status 32\n"
                    "Mounting command: mount\nMounting arguments: -t nfs -o nfsvers=4.1 "
                    "nfs.storage.internal:/export/shared /tmp/pvc-mount\nOutput: mount.nfs: Connection timed out\n")


def own_claim(phase, sc="shared-fs", provisioner="nfs.csi.k8s.io", namespace="default"):
    """The test claim as `kubectl get pvc NAME -o json` prints it (kubectl 1.31: sorted keys, 4-space indent,
    managedFields hidden); ``provisioner`` None for a class that binds on first consumer (not yet annotated)."""
    annotations = {"clustereval/purpose": "storage provisioning test of the clustereval audit, deleted when the "
                                          "test ends"}
    if provisioner:
        annotations.update({"volume.beta.kubernetes.io/storage-provisioner": provisioner,
                            "volume.kubernetes.io/storage-provisioner": provisioner})
    spec = {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "1Gi"}}, "volumeMode": "Filesystem"}
    if sc:
        spec["storageClassName"] = sc
    status = {"phase": phase}
    if phase == "Bound":
        annotations.update({"pv.kubernetes.io/bind-completed": "yes", "pv.kubernetes.io/bound-by-controller": "yes"})
        spec["volumeName"] = TEST_VOLUME
        status = {"accessModes": ["ReadWriteMany"], "capacity": {"storage": "1Gi"}, "phase": "Bound"}
    metadata = {**meta(TEST_PVC, namespace, labels=TEST_PVC_LABELS, annotations=annotations),
                "finalizers": ["kubernetes.io/pvc-protection"]}
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": metadata, "spec": spec, "status": status}


def claim_event(reason, message, kind="Normal", component="persistentvolume-controller", count=1, seq=0):
    """A core/v1 Event about the test claim, as `kubectl get events -o json` lists it."""
    return {"apiVersion": "v1", "count": count, "eventTime": None, "firstTimestamp": "2026-05-04T08:12:31Z",
            "involvedObject": {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "name": TEST_PVC,
                               "namespace": "default", "resourceVersion": "4711", "uid": f"uid-{TEST_PVC}"},
            "kind": "Event", "lastTimestamp": "2026-05-04T08:12:31Z", "message": message,
            "metadata": {"creationTimestamp": "2026-05-04T08:12:31Z", "name": f"{TEST_PVC}.183c2f1a9b{seq:06x}",
                         "namespace": "default", "resourceVersion": str(4712 + seq), "uid": f"uid-ev-{seq}"},
            "reason": reason, "reportingComponent": component, "reportingInstance": "",
            "source": {"component": component}, "type": kind}


BOUND_EVENTS = [claim_event("ExternalProvisioning", EXTERNAL_PROVISIONING),
                claim_event("Provisioning",
                            f'External provisioner is provisioning volume for claim "default/{TEST_PVC}"',
                            component=NFS_COMPONENT, seq=1),
                claim_event("ProvisioningSucceeded", f"Successfully provisioned volume {TEST_VOLUME}",
                            component=NFS_COMPONENT, seq=2)]
FAILED_EVENTS = [*BOUND_EVENTS[:2], claim_event("ProvisioningFailed", NFS_MOUNT_FAILED, "Warning", NFS_COMPONENT,
                                                count=4, seq=3)]
WFFC_EVENTS = [claim_event("WaitForFirstConsumer", "waiting for first consumer to be created before binding")]


def one_line(doc):
    return json.dumps(doc, indent=4, sort_keys=True).replace("\n", "")


def pvc_test_out(phase="Bound", events=BOUND_EVENTS, sc="shared-fs", provisioner="nfs.csi.k8s.io", default=0,
                 binding="Immediate", reclaim="Delete", reason="rwx", create_rc=0, create=None, delete_rc=0,
                 delete=None, waited=0, limit=30, end=True, claim=None):
    """What the k8s_pvc_test probe prints (key=value lines, the claim and its events as one-line JSON)."""
    lines = ["classes_rc=0", "class_seen=local-path rancher.io/local-path WaitForFirstConsumer Delete default",
             f"class_seen=shared-fs nfs.csi.k8s.io {binding} {reclaim}",
             f"class={sc or ''}", f"class_provisioner={provisioner or ''}", f"class_binding={binding}",
             f"class_reclaim={reclaim}", f"class_default={default}", f"class_reason={reason}",
             f"name={TEST_PVC}", "namespace=", f"wait_limit_s={limit}",
             f"create_rc={create_rc}", f"create={create or f'persistentvolumeclaim/{TEST_PVC} created'}"]
    if create_rc == 0:
        claim = claim or own_claim(phase, sc, provisioner if binding == "Immediate" else None)
        lines += [f"waited_s={waited}", "get_rc=0", f"phase={phase}", "pvc_json=" + one_line(claim),
                  "events_rc=0",
                  "events_json=" + one_line({"apiVersion": "v1", "items": list(events), "kind": "List",
                                             "metadata": {"resourceVersion": ""}})]
    lines += [f"delete_rc={delete_rc}"]
    if delete_rc == 0 and create_rc == 0:
        lines.append(f'delete={delete or f"persistentvolumeclaim {chr(34)}{TEST_PVC}{chr(34)} deleted"}')
    elif delete:
        lines.append(f"delete={delete}")
    lines.append("leftovers=")
    if end:
        lines.append("end=ok")
    return "\n".join(lines) + "\n"


NOT_TRIED = ("skipped=actions are switched off (clustereval_audit_allow_actions=false): no test PVC created\n"
             "end=ok\n")


API_RESOURCES = """NAME                              SHORTNAMES   APIVERSION                        NAMESPACED   KIND
nodes                             no           v1                                false        Node
pods                              po           v1                                true         Pod
services                          svc          v1                                true         Service
deployments                       deploy       apps/v1                           true         Deployment
jobs                                           batch/v1                          true         Job
storageclasses                    sc           storage.k8s.io/v1                 false        StorageClass
podgroups                         pg,podgroup  scheduling.volcano.sh/v1beta1     true         PodGroup
hypernodes                        hn           topology.volcano.sh/v1alpha1      false        HyperNode
mpijobs                                        kubeflow.org/v2beta1              true         MPIJob
topologies                                     kueue.x-k8s.io/v1alpha1           false        Topology
workloads                         wl           kueue.x-k8s.io/v1beta1            true         Workload
computedomains                                 resource.nvidia.com/v1beta1       true         ComputeDomain
deviceclasses                                  resource.k8s.io/v1beta1           false        DeviceClass
prometheuses                      prom         monitoring.coreos.com/v1          true         Prometheus
servicemonitors                   smon         monitoring.coreos.com/v1          true         ServiceMonitor
podmonitors                       pmon         monitoring.coreos.com/v1          true         PodMonitor
"""


CAN_I_ALL_YES = "\n".join(f"{q}: yes" for q in (
    "list nodes", "list pods --all-namespaces", "create pods", "create jobs.batch", "create persistentvolumeclaims",
    "create services", "create deployments.apps", "create secrets", "list secrets")) + "\n"


def to_probes(objs, can_i=CAN_I_ALL_YES, api=API_RESOURCES, absent=(), overrides=None, pvc_test=None):
    """The audit-k8s probes as the collect module returns them; ``pvc_test``: the provisioning test's output
    (default: its claim bound), ``False`` when the probe was not collected."""
    def p(name, stdout):  # the probe's parser is the catalogue's
        return probe(name, stdout, cmd=f"kubectl ({name})", tool="kubectl", artifact=f"raw/_cluster/{name}.json")[name]

    probes = {
        "k8s_version": p("k8s_version", json.dumps({"clientVersion": {"gitVersion": "v1.31.4"},
                                                   "serverVersion": {"major": "1", "minor": "31",
                                                                     "gitVersion": "v1.31.4"}})),
        "k8s_api_resources": p("k8s_api_resources", api),
        "k8s_nodes": p("k8s_nodes", klist(*objs["nodes"])),
        "k8s_workloads": p("k8s_workloads", klist(*objs["workloads"])),
        "k8s_storage": p("k8s_storage", klist(*objs["storage"])),
        "k8s_services": p("k8s_services", klist(*objs["services"])),
        "k8s_gatewayclasses": p("k8s_gatewayclasses", klist()),
        "k8s_metallb_pools": p("k8s_metallb_pools", klist(cr("metallb.io/v1beta1", "IPAddressPool", "pool",
                                                             "metallb-system",
                                                             spec={"addresses": ["192.0.2.10-192.0.2.50"]}))),
        "k8s_can_i": p("k8s_can_i", can_i),
        "k8s_helm": {**p("k8s_helm", 'v3.16.3+gcfd0749\n[{"name":"gpu-operator","namespace":"gpu-operator",'
                                     '"revision":"1","status":"deployed","chart":"gpu-operator-v24.9.2"}]\n'),
                     "tool": "helm"},
        "k8s_configmaps": p("k8s_configmaps", "".join(klist(c) for c in objs["configmaps"]) or klist()),
        "k8s_kueue_topologies": p("k8s_kueue_topologies", klist(*objs["topologies"])),
        "k8s_kueue_flavors": p("k8s_kueue_flavors", klist(*objs["flavors"])),
        "k8s_volcano_hypernodes": p("k8s_volcano_hypernodes", klist(*objs.get("hypernodes", []))),
        "k8s_dra": p("k8s_dra", klist(*objs.get("dra", []))),
        "k8s_computedomains": p("k8s_computedomains", klist(*objs.get("computedomains", []))),
        "k8s_nads": p("k8s_nads", klist(*objs["nads"])),
        "k8s_nicclusterpolicies": p("k8s_nicclusterpolicies", klist(*objs["nicpolicies"])),
        "k8s_clusterpolicies": p("k8s_clusterpolicies", klist(*objs["clusterpolicies"])),
        "k8s_pvc_test": {**p("k8s_pvc_test", pvc_test_out() if pvc_test is None else pvc_test or ""),
                         "artifact": "raw/_cluster/kubectl-pvc-provisioning-test.txt", "timeout": 150},
    }
    if pvc_test is False:
        del probes["k8s_pvc_test"]
    for name in absent:  # the kind's CRD is not installed
        resource = probes[name]["cmd"]
        probes[name].update(rc=1, stdout="",
                            stderr=f'error: the server doesn\'t have a resource type "{resource}"\n')
    for name, fields in (overrides or {}).items():
        probes[name].update(fields)
    return probes


def run(check_id, probes=None, **options):
    options.setdefault("harness", "k8s")
    return judge(check_id, probes, subject=CLUSTER_SUBJECT, **options)


def status(check_id, objs=None, **kw):
    return run(check_id, to_probes(objs or healthy_objects(), **kw))


CLUSTER_CHECKS = ["audit.k8s.rbac_access", "audit.k8s.helm_access", "audit.k8s.vcluster_tenancy",
                  "audit.k8s.topology", "audit.k8s.gang_scheduling", "audit.k8s.bin_packing",
                  "audit.k8s.ingress_controller", "audit.k8s.load_balancer", "audit.k8s.default_storage_class",
                  "audit.k8s.csi_rwx", "audit.k8s.gpu_operator", "audit.k8s.network_operator",
                  "audit.k8s.mpi_operator", "audit.k8s.workload_schedulers", "audit.k8s.gpu_job_attribution",
                  "audit.k8s.rdma_exposure", "audit.k8s.monitoring_stack"]
