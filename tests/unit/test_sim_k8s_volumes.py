"""The simulated storage controllers (sim/shims/k8s_volumes.py) as functions over an API document: provisioning at
once or after k8s.latency.pvc_provision_s, WaitForFirstConsumer claims provisioned on the node the scheduler chose,
pvc-protection keeping a claim in use Terminating, volumes deleted pv_delete_s after their claim, the scheduler's
VolumeBinding reasons, and what the kubelet mounts; and the profile's k8s.latency keys refused when malformed."""

from __future__ import annotations

import importlib.util
import os

import pytest

from clustereval.sim import cluster
from clustereval.sim.overlays._k8s_profile import pod_and_volume_latency
from clustereval.sim.profile import ProfileError

_spec = importlib.util.spec_from_file_location("k8s_volumes", cluster.SHIM_SOURCES / "k8s_volumes.py")
volumes = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(volumes)

NOW = 1_800_000_000.0


def api_doc(latency=None, nfs_error=None):
    classes = [
        {"metadata": {"name": "local-path", "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
         "provisioner": "rancher.io/local-path", "reclaimPolicy": "Delete",
         "volumeBindingMode": "WaitForFirstConsumer"},
        {"metadata": {"name": "shared-fs"}, "provisioner": "nfs.csi.k8s.io", "reclaimPolicy": "Delete",
         "volumeBindingMode": "Immediate", "parameters": {"server": "nfs.storage.internal", "share": "/export"}},
        {"metadata": {"name": "keep"}, "provisioner": "nfs.csi.k8s.io", "reclaimPolicy": "Retain",
         "volumeBindingMode": "Immediate"},
    ]
    return {"api_stamp": "1:2", "resource_version": 100, "latency": latency or {}, "controllers": {},
            "provisioners": {"nfs.csi.k8s.io": {"access_modes": ["ReadWriteOnce", "ReadWriteMany"], "error": nfs_error},
                             "rancher.io/local-path": {"access_modes": ["ReadWriteOnce"]}},
            "objects": {"storageclasses.storage.k8s.io": classes}}


def new_claim(api, name, cls=None, cluster_dir="/nonexistent", now=NOW):
    spec = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
    if cls:
        spec["storageClassName"] = cls
    claim = {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
             "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"}, "spec": spec}
    api["objects"].setdefault("persistentvolumeclaims", []).append(claim)
    volumes.admit(api, claim, cluster_dir, now)
    return claim


def pod_using(claim_name, phase="Running", node=None):
    return {"metadata": {"name": "writer", "namespace": "default"},
            "spec": {"nodeName": node,
                     "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim_name}}],
                     "containers": [{"name": "w", "volumeMounts": [{"name": "data", "mountPath": "/mnt/v"}]}]},
            "status": {"phase": phase}}


def reasons(api, name):
    return [e["reason"] for e in api["objects"]["events"] if e["involvedObject"]["name"] == name]


def test_an_immediate_claim_binds_at_once_or_after_the_provisioning_latency(tmp_path):
    api = api_doc()
    claim = new_claim(api, "fast", "shared-fs", str(tmp_path))
    assert claim["status"]["phase"] == "Bound"
    volume = claim["spec"]["volumeName"]
    assert os.path.isdir(volumes.volume_dir(str(tmp_path), volume))
    assert reasons(api, "fast") == ["ExternalProvisioning", "Provisioning", "ProvisioningSucceeded"]

    slow = api_doc({"pvc_provision_s": 5})
    claim = new_claim(slow, "slow", "shared-fs", str(tmp_path))
    assert claim["status"]["phase"] == "Pending" and reasons(slow, "slow") == ["ExternalProvisioning", "Provisioning"]
    assert not volumes.settle(slow, [], str(tmp_path), NOW + 4.9)
    assert claim["status"]["phase"] == "Pending"
    assert volumes.settle(slow, [], str(tmp_path), NOW + 5)
    assert claim["status"]["phase"] == "Bound" and reasons(slow, "slow")[-1] == "ProvisioningSucceeded"


def test_a_failing_provisioner_leaves_the_claim_pending_with_its_error():
    api = api_doc({"pvc_provision_s": 1}, nfs_error="rpc error: code = DeadlineExceeded desc = mount timed out")
    claim = new_claim(api, "broken", "shared-fs")
    volumes.settle(api, [], "/nonexistent", NOW + 2)
    assert claim["status"]["phase"] == "Pending"
    failed = api["objects"]["events"][-1]
    assert (failed["type"], failed["reason"]) == ("Warning", "ProvisioningFailed")
    assert failed["message"].endswith("mount timed out")


def test_wait_for_first_consumer_provisions_on_the_node_the_scheduler_chose(tmp_path):
    api = api_doc()
    claim = new_claim(api, "local", cluster_dir=str(tmp_path))  # no class: the default, local-path
    assert claim["spec"]["storageClassName"] == "local-path" and claim["status"]["phase"] == "Pending"
    binding = volumes.VolumeBinding(api)
    pod = pod_using("local", "Pending")
    assert binding.prefilter(pod) is None  # a WaitForFirstConsumer claim does not hold the pod back
    binding.bind(pod, "node2")
    for selected, node in binding.selected:
        volumes.select_node(api, selected, node, str(tmp_path), NOW)
    assert claim["status"]["phase"] == "Bound"
    assert claim["metadata"]["annotations"][volumes.SELECTED_NODE] == "node2"
    pv = api["objects"]["persistentvolumes"][0]
    assert pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"][0]["values"] == ["node2"]
    # once bound the volume pins its pods to node2
    binding = volumes.VolumeBinding(api)
    assert binding.filter(pod, {"metadata": {"labels": {"kubernetes.io/hostname": "node2"}}})
    assert not binding.filter(pod, {"metadata": {"labels": {"kubernetes.io/hostname": "node1"}}})


def test_the_scheduler_reasons_for_claims_that_hold_a_pod_back():
    api = api_doc({"pvc_provision_s": 60})
    new_claim(api, "unbound", "shared-fs")
    gone = new_claim(api, "going", "shared-fs")
    gone["metadata"]["deletionTimestamp"] = "2027-01-15T08:00:00Z"
    binding = volumes.VolumeBinding(api)
    assert binding.prefilter(pod_using("missing")) == 'persistentvolumeclaim "missing" not found'
    assert binding.prefilter(pod_using("going")) == 'persistentvolumeclaim "going" is being deleted'
    assert binding.prefilter(pod_using("unbound")) == "pod has unbound immediate PersistentVolumeClaims"


def test_a_claim_in_use_stays_terminating_until_its_pod_ends_then_its_volume_goes_later(tmp_path):
    api = api_doc({"pv_delete_s": 3})
    claim = new_claim(api, "used", "shared-fs", str(tmp_path))
    volume = claim["spec"]["volumeName"]
    running = [pod_using("used")]
    assert volumes.delete_claim(api, claim, running, str(tmp_path), NOW) is False
    assert "deletionTimestamp" in claim["metadata"] and claim in api["objects"]["persistentvolumeclaims"]
    assert not volumes.settle(api, running, str(tmp_path), NOW + 1)  # still mounted: still there
    assert volumes.settle(api, [pod_using("used", "Succeeded")], str(tmp_path), NOW + 2)
    assert api["objects"]["persistentvolumeclaims"] == []
    assert [v["status"]["phase"] for v in api["objects"]["persistentvolumes"]] == ["Released"]
    assert os.path.isdir(volumes.volume_dir(str(tmp_path), volume))
    volumes.settle(api, [], str(tmp_path), NOW + 5)
    assert api["objects"]["persistentvolumes"] == []
    assert not os.path.exists(volumes.volume_dir(str(tmp_path), volume))


def test_a_retained_volume_stays_released(tmp_path):
    api = api_doc()
    claim = new_claim(api, "kept", "keep", str(tmp_path))
    assert volumes.delete_claim(api, claim, [], str(tmp_path), NOW)
    volumes.settle(api, [], str(tmp_path), NOW + 3600)
    assert [v["status"]["phase"] for v in api["objects"]["persistentvolumes"]] == ["Released"]


def test_the_kubelet_mounts_a_claim_only_once_it_is_bound(tmp_path):
    api = api_doc({"pvc_provision_s": 2})
    claim = new_claim(api, "late", "shared-fs", str(tmp_path))
    pod = pod_using("late")
    assert volumes.pod_mounts(api, pod, str(tmp_path)) is None
    volumes.settle(api, [], str(tmp_path), NOW + 2)
    source = volumes.volume_dir(str(tmp_path), claim["spec"]["volumeName"])
    assert volumes.pod_mounts(api, pod, str(tmp_path)) == [(source, "/mnt/v")]
    assert volumes.pod_mounts(api, {"metadata": {"namespace": "default"}, "spec": {"containers": [{}]}},
                              str(tmp_path)) == []


def test_the_profile_latencies_are_seconds_of_known_keys():
    assert pod_and_volume_latency({"latency": {"pvc_provision_s": 3}}) == {
        "pod_schedule_s": 0.0, "pod_start_s": 0.0, "pvc_provision_s": 3.0, "pv_delete_s": 0.0}
    with pytest.raises(ProfileError, match=r"k8s.latency has unknown keys \['provision_s'\]"):
        pod_and_volume_latency({"latency": {"provision_s": 3}})
    with pytest.raises(ProfileError, match=r"k8s.latency.pv_delete_s must be a number of seconds >= 0"):
        pod_and_volume_latency({"latency": {"pv_delete_s": -1}})
    with pytest.raises(ProfileError, match=r"k8s\.latency must be a mapping"):
        pod_and_volume_latency({"latency": "fast"})
