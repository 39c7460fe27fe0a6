"""Claims and volumes of the simulated Kubernetes API over time (standalone: stdlib only, no clustereval import;
next to ``kubectl.py`` in ``<cluster dir>/shims``, which imports it, and loaded by the power daemon's controllers).

The API document (``api``) is the API file with the objects kubectl and the controllers changed (``state.json``
next to it, :func:`load_api` / :func:`save_state`, written under :func:`state_lock`). What Kubernetes' storage
controllers do with it:

* **admission and the PV controller** (:func:`admit`, at ``kubectl create``): no ``storageClassName``: the newest
  default class; a class that does not exist: ProvisioningFailed; ``WaitForFirstConsumer``: Pending until the
  scheduler binds a pod using the claim (:func:`select_node`); ``Immediate``: provisioning starts at once.
* **the external provisioner** of the class, when the API file lists it under ``provisioners``: Provisioning at
  once, then after ``k8s.latency.pvc_provision_s`` (0: at once) either a new volume ``pvc-<uid>`` bound to the claim
  (ProvisioningSucceeded) or ProvisioningFailed (its ``error``, or access modes it does not serve). Each volume has a
  backing directory ``<cluster dir>/k8s/volumes/<pv>`` the simulated kubelet bind-mounts at the pod's mountPath.
* **pvc-protection** (:func:`delete_claim`): a claim a pod that has not ended mounts stays Terminating until no such
  pod is left; then it goes, and its volume is Released (reclaimPolicy Retain) or deleted (Delete) by the
  provisioner ``k8s.latency.pv_delete_s`` later (Released meanwhile), with its backing directory.
* **the scheduler's VolumeBinding plugin** (:class:`VolumeBinding`): a pod whose claim does not exist, is being
  deleted or is an unbound Immediate claim cannot be placed; a bound local volume pins the pod to its node.

The deferred work is due at times kept under ``controllers`` in ``state.json``; :func:`settle` does what is due
(the power daemon calls it every tick).
"""

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import time

STATE_FILE = "state.json"
MUTABLE = ("persistentvolumeclaims", "persistentvolumes", "events")
DEFAULT_CLASS = ("storageclass.kubernetes.io/is-default-class", "storageclass.beta.kubernetes.io/is-default-class")
PV_CONTROLLER = "persistentvolume-controller"
PVC_PROTECTION = "kubernetes.io/pvc-protection"
SELECTED_NODE = "volume.kubernetes.io/selected-node"
HOSTNAME_LABEL = "kubernetes.io/hostname"
LOCAL_PATH = "rancher.io/local-path"
LATENCY_KEYS = ("pod_schedule_s", "pod_start_s", "pvc_provision_s", "pv_delete_s")
ENDED = ("Succeeded", "Failed")


# ----------------------------------------------------------------------------------------- the API document

def state_path(api_file):
    """The objects kubectl changed (claims, volumes, events): a JSON file next to the API file."""
    return os.path.join(os.path.dirname(api_file), STATE_FILE)


def load_api(api_file):
    """The API file with the changed objects of ``state.json`` over its lists; None without an API."""
    try:
        with open(api_file) as fh:
            api = json.load(fh)
            stat = os.fstat(fh.fileno())
    except (OSError, ValueError):
        return None
    if not (isinstance(api, dict) and api.get("enabled", True)):
        return None
    try:
        with open(state_path(api_file)) as fh:
            state = json.load(fh)
    except (OSError, ValueError):
        state = {}
    # the changes belong to this API file: one rendered anew (`sim up` again) starts from its own lists
    api["api_stamp"] = f"{stat.st_ino}:{stat.st_mtime_ns}"
    if state.get("api_stamp") != api["api_stamp"]:
        state = {}
    objects = api.setdefault("objects", {})
    for key in MUTABLE:
        if key in (state.get("objects") or {}):
            objects[key] = state["objects"][key]
    api["resource_version"] = int(state.get("resource_version") or 48300)
    api["controllers"] = state.get("controllers") or {}
    return api


def save_state(api, api_file):
    """Write the changed objects atomically (a reader never sees half a file)."""
    path = state_path(api_file)
    doc = {"api_stamp": api["api_stamp"], "resource_version": api["resource_version"],
           "objects": {key: (api.get("objects") or {}).get(key) or [] for key in MUTABLE},
           "controllers": api.get("controllers") or {}}
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as fh:
        json.dump(doc, fh, indent=1)
    os.replace(tmp, path)


@contextlib.contextmanager
def state_lock(api_file):
    """One writer at a time: read, change and write the state under an exclusive lock."""
    with open(state_path(api_file) + ".lock", "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def now_stamp(t=None):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() if t is None else t))


def new_uid(*parts):
    h = hashlib.sha256("/".join([*parts, repr(time.time_ns()), str(os.getpid())]).encode()).hexdigest()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def next_version(api):
    api["resource_version"] += 1
    return str(api["resource_version"])


def latency(api, key):
    """A profile latency (``k8s.latency.<key>``, seconds; 0 when unset)."""
    return float((api.get("latency") or {}).get(key) or 0)


def volume_dir(cluster_dir, volume):
    return os.path.join(cluster_dir, "k8s", "volumes", volume)


def storage_classes(api):
    return {(c.get("metadata") or {}).get("name"): c for c in (api.get("objects") or {}).get(
        "storageclasses.storage.k8s.io") or []}


def _is_default(cls):
    annotations = (cls.get("metadata") or {}).get("annotations") or {}
    return any(annotations.get(k) == "true" for k in DEFAULT_CLASS)


def _claims(api):
    return api["objects"].setdefault("persistentvolumeclaims", [])


def _volumes(api):
    return api["objects"].setdefault("persistentvolumes", [])


def _due(api, kind):
    return api.setdefault("controllers", {}).setdefault(kind, {})


def event(api, claim, kind, reason, message, component, now=None):
    meta = claim["metadata"]
    stamp = now_stamp(now)
    api["objects"].setdefault("events", []).append({
        "apiVersion": "v1", "count": 1, "eventTime": None, "firstTimestamp": stamp,
        "involvedObject": {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "name": meta["name"],
                           "namespace": meta["namespace"], "resourceVersion": meta["resourceVersion"],
                           "uid": meta["uid"]},
        "kind": "Event", "lastTimestamp": stamp, "message": message,
        "metadata": {"creationTimestamp": stamp, "name": "{}.{:x}".format(meta["name"], time.time_ns()),
                     "namespace": meta["namespace"], "resourceVersion": next_version(api),
                     "uid": new_uid("event", meta["name"], reason)},
        "reason": reason, "reportingComponent": component, "reportingInstance": "",
        "source": {"component": component}, "type": kind})


# ----------------------------------------------------------------------------------------- provisioning

def admit(api, claim, cluster_dir, now=None):
    """A claim just created: the DefaultStorageClass admission plugin, then the PV controller."""
    now = time.time() if now is None else now
    spec, meta = claim["spec"], claim["metadata"]
    classes = storage_classes(api)
    claim["status"] = {"phase": "Pending"}
    if "storageClassName" not in spec:  # DefaultStorageClass admission: the newest default class
        defaults = sorted((c for c in classes.values() if _is_default(c)),
                          key=lambda c: (c.get("metadata") or {}).get("creationTimestamp") or "")
        if defaults:
            spec["storageClassName"] = defaults[-1]["metadata"]["name"]
    meta.setdefault("finalizers", [PVC_PROTECTION])
    meta["resourceVersion"] = next_version(api)
    name = spec.get("storageClassName")
    cls = classes.get(name)
    if not name:
        event(api, claim, "Normal", "FailedBinding",
              "no persistent volumes available for this claim and no storage class is set", PV_CONTROLLER, now)
    elif cls is None:
        event(api, claim, "Warning", "ProvisioningFailed", f'storageclass.storage.k8s.io "{name}" not found',
              PV_CONTROLLER, now)
    elif cls.get("volumeBindingMode") == "WaitForFirstConsumer":
        event(api, claim, "Normal", "WaitForFirstConsumer",
              "waiting for first consumer to be created before binding", PV_CONTROLLER, now)
    else:
        start_provisioning(api, claim, cls, cluster_dir, now)


def _provisioner_identity(api, provisioner, caps):
    """The external provisioner's event source: ``<driver>_<pod>_<uuid>``, one identity per API."""
    h = hashlib.sha256(f"{provisioner}/{api.get('api_stamp')}".encode()).hexdigest()
    return "{}_{}_{}-{}-{}-{}-{}".format(provisioner, caps.get("pod") or "csi-controller-0", h[:8], h[8:12],
                                          h[12:16], h[16:20], h[20:32])


def start_provisioning(api, claim, cls, cluster_dir, now):
    """The PV controller hands the claim to the class's provisioner; a provisioner that runs starts at once and
    finishes ``pvc_provision_s`` later."""
    meta = claim["metadata"]
    provisioner = str(cls.get("provisioner") or "")
    annotations = meta.setdefault("annotations", {})
    annotations["volume.beta.kubernetes.io/storage-provisioner"] = provisioner
    annotations["volume.kubernetes.io/storage-provisioner"] = provisioner
    event(api, claim, "Normal", "ExternalProvisioning",
          f"Waiting for a volume to be created either by the external provisioner '{provisioner}' or manually by "
          "the system administrator. If volume creation is delayed, please verify that the provisioner is running "
          "and correctly registered.", PV_CONTROLLER, now)
    caps = (api.get("provisioners") or {}).get(provisioner)
    if caps is None:  # nobody runs it: the claim waits for ever
        return
    event(api, claim, "Normal", "Provisioning",
          f'External provisioner is provisioning volume for claim "{meta["namespace"]}/{meta["name"]}"',
          _provisioner_identity(api, provisioner, caps), now)
    delay = latency(api, "pvc_provision_s")
    if delay > 0:
        _due(api, "provision")[meta["uid"]] = now + delay
    else:
        finish_provisioning(api, claim, cluster_dir, now)


def finish_provisioning(api, claim, cluster_dir, now):
    """The provisioner's answer: a new volume bound to the claim, or ProvisioningFailed."""
    spec, meta = claim["spec"], claim["metadata"]
    cls = storage_classes(api).get(spec.get("storageClassName")) or {}
    provisioner = str(cls.get("provisioner") or "")
    caps = (api.get("provisioners") or {}).get(provisioner) or {}
    component = _provisioner_identity(api, provisioner, caps)
    modes = spec.get("accessModes") or []
    error = caps.get("error")
    if not error and not set(modes) <= set(caps.get("access_modes") or []):
        error = caps.get("unsupported") or "rpc error: code = InvalidArgument desc = volume capabilities not supported"
    if error:
        event(api, claim, "Warning", "ProvisioningFailed",
              f'failed to provision volume with StorageClass "{spec.get("storageClassName")}": {error}', component,
              now)
        return
    volume = "pvc-" + meta["uid"]
    storage = ((spec.get("resources") or {}).get("requests") or {}).get("storage", "1Gi")
    node = (meta.get("annotations") or {}).get(SELECTED_NODE)
    _volumes(api).append(persistent_volume(api, claim, cls, volume, storage, node, now))
    os.makedirs(volume_dir(cluster_dir, volume), exist_ok=True)
    spec["volumeName"] = volume
    annotations = meta.setdefault("annotations", {})
    annotations["pv.kubernetes.io/bind-completed"] = "yes"
    annotations["pv.kubernetes.io/bound-by-controller"] = "yes"
    claim["status"] = {"accessModes": list(modes), "capacity": {"storage": storage}, "phase": "Bound"}
    meta["resourceVersion"] = next_version(api)
    event(api, claim, "Normal", "ProvisioningSucceeded", f"Successfully provisioned volume {volume}", component, now)


def persistent_volume(api, claim, cls, volume, storage, node=None, now=None):
    """The volume as its provisioner creates it: a CSI volume (the NFS driver's handle), or for local-path a
    hostPath on the node the scheduler chose, pinned there by node affinity."""
    provisioner = str(cls.get("provisioner") or "")
    params = cls.get("parameters") or {}
    claim_meta, claim_spec = claim["metadata"], claim["spec"]
    meta = {"annotations": {"pv.kubernetes.io/provisioned-by": provisioner},
            "creationTimestamp": now_stamp(now), "finalizers": ["kubernetes.io/pv-protection"],
            "name": volume, "resourceVersion": next_version(api), "uid": new_uid("pv", volume)}
    spec = {"accessModes": list(claim_spec.get("accessModes") or []), "capacity": {"storage": storage},
            "claimRef": {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "name": claim_meta["name"],
                         "namespace": claim_meta["namespace"], "resourceVersion": claim_meta.get("resourceVersion", ""),
                         "uid": claim_meta["uid"]},
            "persistentVolumeReclaimPolicy": cls.get("reclaimPolicy") or "Delete",
            "storageClassName": claim_spec["storageClassName"],
            "volumeMode": claim_spec.get("volumeMode") or "Filesystem"}
    if provisioner == LOCAL_PATH:
        meta["annotations"]["local.path.provisioner/selected-node"] = node or ""
        spec["hostPath"] = {"path": "/opt/local-path-provisioner/{}_{}_{}".format(
            volume, claim_meta["namespace"], claim_meta["name"]), "type": "DirectoryOrCreate"}
        if node:
            spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": HOSTNAME_LABEL, "operator": "In", "values": [node]}]}]}}
    else:
        meta["annotations"].update({"volume.kubernetes.io/provisioner-deletion-secret-name": "",
                                    "volume.kubernetes.io/provisioner-deletion-secret-namespace": ""})
        meta["finalizers"] = ["external-provisioner.volume.kubernetes.io/finalizer", "kubernetes.io/pv-protection"]
        spec["csi"] = {"driver": provisioner,
                       "volumeAttributes": {**{str(k): str(v) for k, v in params.items()}, "subdir": volume},
                       "volumeHandle": "{}#{}#{}##".format(params.get("server", ""),
                                                          str(params.get("share", "")).lstrip("/"), volume)}
    if cls.get("mountOptions"):
        spec["mountOptions"] = list(cls["mountOptions"])
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": meta, "spec": spec,
            "status": {"lastPhaseTransitionTime": now_stamp(now), "phase": "Bound"}}


def select_node(api, claim, node, cluster_dir, now):
    """The scheduler bound a pod using this WaitForFirstConsumer claim to ``node``: provisioning starts there."""
    annotations = claim["metadata"].setdefault("annotations", {})
    if annotations.get(SELECTED_NODE):
        return
    annotations[SELECTED_NODE] = node
    cls = storage_classes(api).get(claim["spec"].get("storageClassName")) or {}
    start_provisioning(api, claim, cls, cluster_dir, now)


# ----------------------------------------------------------------------------------------- deletion

def claim_names(pod):
    """The claims a pod mounts (``spec.volumes[].persistentVolumeClaim.claimName``)."""
    return [str(v["persistentVolumeClaim"].get("claimName")) for v in (pod.get("spec") or {}).get("volumes") or []
            if isinstance(v, dict) and isinstance(v.get("persistentVolumeClaim"), dict)]


def in_use(claim, pods):
    """Whether a pod that has not ended (pvc-protection's rule) mounts the claim."""
    meta = claim["metadata"]
    return any(p["metadata"].get("namespace") == meta.get("namespace") and meta.get("name") in claim_names(p)
               and (p.get("status") or {}).get("phase") not in ENDED for p in pods)


def delete_claim(api, claim, pods, cluster_dir, now=None):
    """DELETE on a claim: gone at once unless a pod still uses it (then Terminating); True when gone."""
    now = time.time() if now is None else now
    if in_use(claim, pods):
        if "deletionTimestamp" not in claim["metadata"]:
            claim["metadata"]["deletionTimestamp"] = now_stamp(now)
            claim["metadata"]["deletionGracePeriodSeconds"] = 0
            claim["metadata"]["resourceVersion"] = next_version(api)
        return False
    _claims(api).remove(claim)
    _due(api, "provision").pop(claim["metadata"].get("uid"), None)
    release_volume(api, claim, cluster_dir, now)
    return True


def release_volume(api, claim, cluster_dir, now):
    """The claim's volume after the claim is gone: Released (reclaimPolicy Retain) or deleted by its provisioner
    ``pv_delete_s`` later (Released until then)."""
    name = (claim.get("spec") or {}).get("volumeName")
    for pv in [v for v in _volumes(api) if (v.get("metadata") or {}).get("name") == name]:
        delay = latency(api, "pv_delete_s")
        if (pv.get("spec") or {}).get("persistentVolumeReclaimPolicy") != "Retain" and delay <= 0:
            remove_volume(api, pv, cluster_dir)
            continue
        pv["status"] = {"lastPhaseTransitionTime": now_stamp(now), "phase": "Released"}
        pv["metadata"]["resourceVersion"] = next_version(api)
        if (pv.get("spec") or {}).get("persistentVolumeReclaimPolicy") != "Retain":
            _due(api, "pv_delete")[name] = now + delay


def remove_volume(api, pv, cluster_dir):
    _volumes(api).remove(pv)
    shutil.rmtree(volume_dir(cluster_dir, pv["metadata"]["name"]), ignore_errors=True)


def settle(api, pods, cluster_dir, now=None):
    """The controllers' deferred work that is due at ``now``; True when the API document changed."""
    now = time.time() if now is None else now
    changed = False
    claims = {c["metadata"].get("uid"): c for c in _claims(api)}
    for uid, due in list(_due(api, "provision").items()):
        if due <= now:
            del api["controllers"]["provision"][uid]
            if uid in claims and (claims[uid].get("status") or {}).get("phase") == "Pending":
                finish_provisioning(api, claims[uid], cluster_dir, now)
            changed = True
    for claim in [c for c in _claims(api) if "deletionTimestamp" in c["metadata"] and not in_use(c, pods)]:
        delete_claim(api, claim, pods, cluster_dir, now)
        changed = True
    for name, due in list(_due(api, "pv_delete").items()):
        if due <= now:
            del api["controllers"]["pv_delete"][name]
            for pv in [v for v in _volumes(api) if v["metadata"].get("name") == name]:
                remove_volume(api, pv, cluster_dir)
            changed = True
    return changed


# ----------------------------------------------------------------------------------------- the scheduler and kubelet

class VolumeBinding:
    """kube-scheduler's VolumeBinding plugin over one API document: PreFilter (the pod's claims exist, are not
    being deleted, and are bound unless WaitForFirstConsumer), Filter (a bound volume's node affinity) and the
    WaitForFirstConsumer claims' node selection once the pod is bound (``selected``: claims to hand to
    :func:`select_node`)."""

    def __init__(self, api):
        self.claims = {(c["metadata"].get("namespace"), c["metadata"].get("name")): c for c in _claims(api)}
        self.volumes = {v["metadata"].get("name"): v for v in _volumes(api)}
        self.classes = storage_classes(api)
        self.selected = []

    def _pod_claims(self, pod):
        return [(name, self.claims.get((pod["metadata"].get("namespace"), name))) for name in claim_names(pod)]

    def prefilter(self, pod):
        """The reason no node can take the pod (scheduler's wording), or None."""
        for name, claim in self._pod_claims(pod):
            if claim is None:
                return f'persistentvolumeclaim "{name}" not found'
            if "deletionTimestamp" in claim["metadata"]:
                return f'persistentvolumeclaim "{name}" is being deleted'
            cls = self.classes.get(claim["spec"].get("storageClassName")) or {}
            if (claim.get("status") or {}).get("phase") != "Bound" \
                    and cls.get("volumeBindingMode") != "WaitForFirstConsumer":
                return "pod has unbound immediate PersistentVolumeClaims"
        return None

    def filter(self, pod, node):
        """Whether the pod's bound volumes may be used on ``node`` (their required node affinity)."""
        labels = (node.get("metadata") or {}).get("labels") or {}
        for _, claim in self._pod_claims(pod):
            pv = self.volumes.get((claim or {}).get("spec", {}).get("volumeName"))
            terms = (((pv or {}).get("spec") or {}).get("nodeAffinity") or {}).get("required", {}).get(
                "nodeSelectorTerms") or []
            if terms and not any(all(labels.get(e.get("key")) in (e.get("values") or [])
                                     for e in t.get("matchExpressions") or []) for t in terms):
                return False
        return True

    def bind(self, pod, node_name):
        for _, claim in self._pod_claims(pod):
            if claim is not None and (claim.get("status") or {}).get("phase") != "Bound":
                self.selected.append((claim, node_name))


def pod_mounts(api, pod, cluster_dir):
    """What the kubelet mounts for the pod's claims: ``[(backing directory, mountPath)]``, or None while a claim
    is not bound to a volume yet (the kubelet waits, the container stays ContainerCreating)."""
    volumes = {v["metadata"].get("name"): v for v in _volumes(api)}
    by_volume = {}
    for v in (pod.get("spec") or {}).get("volumes") or []:
        if isinstance(v, dict) and isinstance(v.get("persistentVolumeClaim"), dict):
            by_volume[v.get("name")] = str(v["persistentVolumeClaim"].get("claimName"))
    if not by_volume:
        return []
    claims = {c["metadata"].get("name"): c for c in _claims(api)
              if c["metadata"].get("namespace") == pod["metadata"].get("namespace")}
    mounts = []
    for c in (pod.get("spec") or {}).get("containers") or []:
        for m in c.get("volumeMounts") or []:
            if m.get("name") not in by_volume:
                continue
            claim = claims.get(by_volume[m.get("name")])
            volume = ((claim or {}).get("spec") or {}).get("volumeName")
            if claim is None or (claim.get("status") or {}).get("phase") != "Bound" or volume not in volumes:
                return None
            mounts.append((volume_dir(cluster_dir, volume), str(m.get("mountPath"))))
    return mounts
