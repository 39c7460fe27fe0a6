"""The live part of a simulated cluster's Kubernetes API (standalone: stdlib only, no clustereval import).

``<cluster dir>/k8s/cluster.json`` holds what changes while the cluster runs, for every node and pod of the
cluster (one file, whichever node or the host kubectl runs on), written under ``cluster.lock``:

* ``nodes.<name>``: ``unschedulable`` and ``taints`` (kubectl cordon/uncordon/drain/taint, the node lifecycle
  controller, the provider's health agent), ``conditions`` (the kubelet's four, as the kubelet posts them or the
  node lifecycle controller marks them Unknown), ``problems`` (conditions a node-problem-detector style agent
  sets), ``heartbeat`` (the kubelet's last status post);
* ``pods``: Pod objects ``kubectl create`` made, their status kept by the simulated kubelet (in the power
  daemon, ``clustereval.sim.k8s_provider``), which runs their command inside the node.

The kubectl shim reads it with the static Node objects the k8s overlay renders (``node.json`` per node) and
the node's boot id and lost GPUs; the power daemon writes the kubelet's and controllers' part.
"""

import contextlib
import fcntl
import json
import os
import re
import time

LIVE_DIR = "k8s"
LIVE_FILE = "cluster.json"
LOCK_FILE = "cluster.lock"
GROUND_TRUTH = "ground-truth.jsonl"
UNREACHABLE = "node.kubernetes.io/unreachable"
UNSCHEDULABLE = "node.kubernetes.io/unschedulable"
# the kubelet's own conditions: (type, reason while healthy, message while healthy, healthy status)
KUBELET_CONDITIONS = (
    ("MemoryPressure", "KubeletHasSufficientMemory", "kubelet has sufficient memory available", "False"),
    ("DiskPressure", "KubeletHasNoDiskPressure", "kubelet has no disk pressure", "False"),
    ("PIDPressure", "KubeletHasSufficientPID", "kubelet has sufficient PID available", "False"),
    ("Ready", "KubeletReady", "kubelet is posting ready status", "True"),
)
# what the node lifecycle controller writes into each of them once the kubelet stopped posting
NODE_STATUS_UNKNOWN = ("NodeStatusUnknown", "Kubelet stopped posting node status.")
TAINT = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_./]*)(?:=([-A-Za-z0-9_.]*))?:(NoSchedule|PreferNoSchedule|NoExecute)$")


def stamp(t=None):
    """RFC 3339 in UTC at second resolution, as metav1.Time marshals."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() if t is None else t))


def live_dir(cluster_dir):
    return os.path.join(cluster_dir, LIVE_DIR)


def empty():
    return {"nodes": {}, "pods": [], "resource_version": 52000}


def load(cluster_dir):
    try:
        with open(os.path.join(live_dir(cluster_dir), LIVE_FILE)) as fh:
            doc = json.load(fh)
    except (OSError, ValueError):
        return empty()
    base = empty()
    base.update(doc if isinstance(doc, dict) else {})
    return base


def save(cluster_dir, doc):
    folder = live_dir(cluster_dir)
    os.makedirs(folder, exist_ok=True)
    tmp = os.path.join(folder, f".{LIVE_FILE}.{os.getpid()}.tmp")
    with open(tmp, "w") as fh:
        json.dump(doc, fh, indent=1)
    os.replace(tmp, os.path.join(folder, LIVE_FILE))


@contextlib.contextmanager
def lock(cluster_dir):
    """One writer at a time: read, change and write under an exclusive lock."""
    folder = live_dir(cluster_dir)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, LOCK_FILE), "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def next_version(doc):
    doc["resource_version"] = int(doc.get("resource_version") or 52000) + 1
    return str(doc["resource_version"])


def record(cluster_dir, node, event, **fields):
    """One ground-truth event in the node's log (the format of ``clustereval.sim.cluster.record_event``)."""
    folder = os.path.join(cluster_dir, "nodes", node)
    if not os.path.isdir(folder):
        return
    line = json.dumps({"t": time.time(), "node": node, "event": event, **fields}) + "\n"
    fd = os.open(os.path.join(folder, GROUND_TRUTH), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


# ----------------------------------------------------------------------------------------- node conditions

def kubelet_conditions(since, heartbeat):
    """The four conditions a healthy kubelet posts, in the order the API shows them."""
    return [{"lastHeartbeatTime": stamp(heartbeat), "lastTransitionTime": stamp(since), "message": message,
             "reason": reason, "status": status, "type": kind}
            for kind, reason, message, status in KUBELET_CONDITIONS]


def unknown_conditions(conditions, now):
    """What the node lifecycle controller does to the kubelet's conditions after the grace period."""
    reason, message = NODE_STATUS_UNKNOWN
    out = []
    for cond in conditions:
        cond = dict(cond)
        if cond.get("status") != "Unknown":
            cond["lastTransitionTime"] = stamp(now)
        cond.update(status="Unknown", reason=reason, message=message)
        out.append(cond)
    return out


def parse_taint(text):
    """``key[=value]:Effect`` as a taint object (None when malformed)."""
    match = TAINT.match(text or "")
    if not match:
        return None
    key, value, effect = match.groups()
    taint = {"effect": effect, "key": key}
    if value:
        taint["value"] = value
    return taint


def add_taint(entry, taint, now=None):
    """Add (or replace, same key and effect) a taint; NoExecute taints get ``timeAdded`` as the API server
    sets it. Returns True when the node's taints changed."""
    taints = entry.setdefault("taints", [])
    for old in taints:
        if old.get("key") == taint["key"] and old.get("effect") == taint["effect"]:
            if old.get("value") == taint.get("value"):
                return False
            taints.remove(old)
            break
    taint = dict(taint)
    if taint["effect"] == "NoExecute" or taint.get("timeAdded") is True:
        taint["timeAdded"] = stamp(now)
    else:
        taint.pop("timeAdded", None)
    taints.append(taint)
    return True


def remove_taint(entry, key, effect=None):
    before = list(entry.get("taints") or [])
    entry["taints"] = [t for t in before if not (t.get("key") == key and (effect is None or t.get("effect") == effect))]
    return entry["taints"] != before


def cordon(entry, now=None):
    """``spec.unschedulable: true`` and the taint the node lifecycle controller adds for it. True when it
    changed."""
    if entry.get("unschedulable"):
        return False
    entry["unschedulable"] = True
    taint = {"effect": "NoSchedule", "key": UNSCHEDULABLE, "timeAdded": True}
    add_taint(entry, taint, now)
    return True


def uncordon(entry):
    if not entry.get("unschedulable"):
        return False
    entry["unschedulable"] = False
    remove_taint(entry, UNSCHEDULABLE)
    return True


# ----------------------------------------------------------------------------------------- the Node

def _read(path, default=None):
    try:
        with open(path) as fh:
            return fh.read()
    except OSError:
        return default


def lost_gpus(cluster_dir, name):
    try:
        return list(json.loads(_read(os.path.join(cluster_dir, "nodes", name, "root", "run", "runtime.json"),
                                     "{}")).get("lost_gpus") or [])
    except ValueError:
        return []


def live_node(cluster_dir, obj, doc):
    """A copy of the static Node object with what is true now: spec.unschedulable and taints, the
    conditions, status.nodeInfo.bootID, and the device plugin's GPUs (an unhealthy GPU stays in capacity
    and leaves allocatable)."""
    obj = json.loads(json.dumps(obj))
    name = obj["metadata"]["name"]
    entry = (doc.get("nodes") or {}).get(name) or {}
    spec, status = obj.setdefault("spec", {}), obj.setdefault("status", {})
    if entry.get("taints"):
        spec["taints"] = [dict(t) for t in entry["taints"]]
    if entry.get("unschedulable"):
        spec["unschedulable"] = True
    if entry.get("conditions"):
        status["conditions"] = [dict(c) for c in entry.get("problems") or []] + [dict(c) for c in entry["conditions"]]
    elif entry.get("problems"):
        status["conditions"] = [dict(c) for c in entry["problems"]] + list(status.get("conditions") or [])
    boot_id = (_read(os.path.join(cluster_dir, "nodes", name, "boot_id")) or "").strip()
    if boot_id:
        status.setdefault("nodeInfo", {})["bootID"] = boot_id
    lost = lost_gpus(cluster_dir, name)
    allocatable = status.get("allocatable") or {}
    if lost and str(allocatable.get("nvidia.com/gpu", "0")) != "0":
        allocatable["nvidia.com/gpu"] = str(max(0, int(allocatable["nvidia.com/gpu"]) - len(lost)))
    return obj
