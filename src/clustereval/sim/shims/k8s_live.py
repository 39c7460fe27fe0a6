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

import calendar
import contextlib
import fcntl
import hashlib
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


AMD_PARTITIONS = {"spx": 1, "dpx": 2, "qpx": 4, "cpx": 8}  # logical devices per GPU in each compute partition mode


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
    if "taints" in entry:
        # The live taints replace the profile's, also when `kubectl taint … -` removed the last one
        # (an empty list is left out, as the API server's omitempty does).
        spec.pop("taints", None)
        if entry["taints"]:
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
    if lost:
        # the ROCm device plugin marks every logical device of a lost GPU unhealthy (in CPX mode, 8 of them: the
        # node labeller's amd.com/gpu.compute-memory-partition says how many per GPU)
        mode = str(((obj.get("metadata") or {}).get("labels") or {}).get("amd.com/gpu.compute-memory-partition", ""))
        per_gpu = AMD_PARTITIONS.get(mode.split("_")[0], 1)
        for key in [k for k in allocatable if k.startswith("amd.com/") and str(allocatable[k]) != "0"]:
            allocatable[key] = str(max(0, int(allocatable[key]) - len(lost) * per_gpu))
    return obj


# ----------------------------------------------------------------------------------------- Jobs, the scheduler

NAD_ANNOTATION = "k8s.v1.cni.cncf.io/networks"
NODE_FILE = os.path.join("overlay", "etc", "clustereval-sim-k8s", "node.json")
API_FILE = os.path.join("overlay", "etc", "clustereval-sim-k8s", "api.json")
NAD_KEY = "network-attachment-definitions.k8s.cni.cncf.io"
RAND_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # apimachinery's rand.String
INDEX_KEY = "batch.kubernetes.io/job-completion-index"
MAX_EVENTS = 2000


def rand_suffix(seed, n=5):
    digest = hashlib.sha256(f"{seed}/{time.time_ns()}/{os.getpid()}".encode()).digest()
    return "".join(RAND_ALPHABET[b % len(RAND_ALPHABET)] for b in digest[:n])


def new_uid(*parts):
    h = hashlib.sha256("/".join([*map(str, parts), repr(time.time_ns()), str(os.getpid())]).encode()).hexdigest()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def job_object(doc, manifest, namespace):
    """The Job as the API server stores it (the defaults of batch/v1 in 1.31) and the manifests of the pods the
    Job controller creates for it at once (parallelism of them; Indexed: one per completion index)."""
    meta = json.loads(json.dumps(manifest.get("metadata") or {}))
    spec = json.loads(json.dumps(manifest.get("spec") or {}))
    uid = new_uid("job", namespace, meta.get("name"))
    meta.update(namespace=namespace, creationTimestamp=stamp(), uid=uid, resourceVersion=next_version(doc),
                generation=1)
    mode = spec.setdefault("completionMode", "NonIndexed")
    completions = int(spec.setdefault("completions", 1))
    parallelism = int(spec.setdefault("parallelism", 1))
    spec.setdefault("backoffLimit", 6)
    spec.setdefault("manualSelector", False)
    spec.setdefault("podReplacementPolicy", "TerminatingOrFailed")
    spec.setdefault("suspend", False)
    labels = {"batch.kubernetes.io/controller-uid": uid, "batch.kubernetes.io/job-name": meta["name"],
              "controller-uid": uid, "job-name": meta["name"]}
    spec["selector"] = {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
    template = spec.setdefault("template", {})
    tmeta = template.setdefault("metadata", {})
    tmeta["labels"] = {**(tmeta.get("labels") or {}), **labels}
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": spec,
           "status": {"startTime": stamp()}}
    pods = []
    owner = {"apiVersion": "batch/v1", "blockOwnerDeletion": True, "controller": True, "kind": "Job",
             "name": meta["name"], "uid": uid}
    for index in range(min(parallelism, completions) if not spec.get("suspend") else 0):
        pod_meta = json.loads(json.dumps(tmeta))
        pod_spec = json.loads(json.dumps(template.get("spec") or {}))
        prefix = f"{meta['name']}-{index}-" if mode == "Indexed" else f"{meta['name']}-"
        pod_meta.update(name=prefix + rand_suffix(f"{uid}/{index}"), ownerReferences=[dict(owner)])
        if mode == "Indexed":
            pod_meta["labels"][INDEX_KEY] = str(index)
            pod_meta["annotations"] = {**(pod_meta.get("annotations") or {}), INDEX_KEY: str(index)}
            for c in pod_spec.get("containers") or []:
                c["env"] = [*(c.get("env") or []), {"name": "JOB_COMPLETION_INDEX", "valueFrom": {"fieldRef": {
                    "apiVersion": "v1", "fieldPath": f"metadata.annotations['{INDEX_KEY}']"}}}]
        pods.append({"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta, "spec": pod_spec})
    return job, pods


def job_status(job, pods):
    """What the Job controller keeps in status, from its pods now (no pod is replaced: a failed pod counts)."""
    uid = job["metadata"]["uid"]
    mine = [p for p in pods if (p["metadata"].get("labels") or {}).get("controller-uid") == uid]
    phases = [(p.get("status") or {}).get("phase") for p in mine]
    status = {k: v for k, v in (job.get("status") or {}).items() if k == "startTime"}
    active = sum(1 for ph in phases if ph in ("Pending", "Running"))
    succeeded, failed = phases.count("Succeeded"), phases.count("Failed")
    ready = sum(1 for p in mine if (p.get("status") or {}).get("phase") == "Running")
    status.update(active=active, ready=ready, terminating=0, uncountedTerminatedPods={})
    if succeeded:
        status["succeeded"] = succeeded
    if failed:
        status["failed"] = failed
    if job["spec"].get("completionMode") == "Indexed" and succeeded:
        done = sorted(int((p["metadata"].get("labels") or {}).get(INDEX_KEY, -1)) for p in mine
                      if (p.get("status") or {}).get("phase") == "Succeeded")
        status["completedIndexes"] = ",".join(str(i) for i in done)
    if not active:
        status.pop("active")
    now = stamp()
    if failed > int(job["spec"].get("backoffLimit") or 0):
        status["conditions"] = [{"lastProbeTime": now, "lastTransitionTime": now,
                                 "message": "Job has reached the specified backoff limit",
                                 "reason": "BackoffLimitExceeded", "status": "True", "type": "Failed"}]
    elif succeeded >= int(job["spec"].get("completions") or 1):
        status["conditions"] = [{"lastProbeTime": now, "lastTransitionTime": now, "message": "Reached expected "
                                 "number of succeeded pods", "reason": "CompletionsReached", "status": "True",
                                 "type": "Complete"}]
        status["completionTime"] = now
    return status


def event(doc, obj, kind, reason, message, component, host=None, now=None):
    """A core/v1 Event about ``obj`` (a Pod), counted up when the same reason and message repeat."""
    meta = obj["metadata"]
    events = doc.setdefault("events", [])
    t = stamp(now)
    for ev in events:
        inv = ev["involvedObject"]
        if inv.get("uid") == meta.get("uid") and ev["reason"] == reason and ev["message"] == message:
            ev["count"] = int(ev.get("count") or 1) + 1
            ev["lastTimestamp"] = t
            ev["metadata"]["resourceVersion"] = next_version(doc)
            return ev
    source = {"component": component, **({"host": host} if host else {})}
    ev = {"apiVersion": "v1", "count": 1, "eventTime": None, "firstTimestamp": t,
          "involvedObject": {"apiVersion": "v1", "kind": obj.get("kind", "Pod"), "name": meta["name"],
                             "namespace": meta["namespace"], "resourceVersion": meta.get("resourceVersion", ""),
                             "uid": meta.get("uid", "")},
          "kind": "Event", "lastTimestamp": t, "message": message,
          "metadata": {"creationTimestamp": t, "name": "{}.{:x}".format(meta["name"], time.time_ns()),
                       "namespace": meta["namespace"], "resourceVersion": next_version(doc),
                       "uid": new_uid("event", meta["name"], reason)},
          "reason": reason, "reportingComponent": component, "reportingInstance": host or "",
          "source": source, "type": kind}
    events.append(ev)
    del events[:-MAX_EVENTS]
    return ev


def quantity(text):
    """A resource quantity as a number (``8``, ``500m``, ``2Gi``, ``1k``)."""
    text = str(text if text is not None else "0").strip()
    match = re.fullmatch(r"([0-9.]+)(m|k|M|G|T|Ki|Mi|Gi|Ti)?", text)
    if not match:
        return 0.0
    scale = {None: 1, "m": 0.001, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "Ki": 1024, "Mi": 1024 ** 2,
             "Gi": 1024 ** 3, "Ti": 1024 ** 4}[match.group(2)]
    return float(match.group(1)) * scale


def pod_requests(pod):
    total = {}
    for c in (pod.get("spec") or {}).get("containers") or []:
        res = c.get("resources") or {}
        for key, value in {**(res.get("limits") or {}), **(res.get("requests") or {})}.items():
            total[key] = total.get(key, 0.0) + quantity(value)
    return total


def node_objects(cluster_dir, doc):
    """Every simulated node's Node object as it is now."""
    out = []
    for name in sorted(os.listdir(os.path.join(cluster_dir, "nodes")) if os.path.isdir(
            os.path.join(cluster_dir, "nodes")) else []):
        try:
            record = json.loads(_read(os.path.join(cluster_dir, "nodes", name, NODE_FILE), ""))
        except ValueError:
            continue
        out.append(live_node(cluster_dir, record["object"], doc))
    return out


def nads(cluster_dir, api_host="node1"):
    """``(namespace, name)`` of every NetworkAttachmentDefinition in the API file."""
    try:
        api = json.loads(_read(os.path.join(cluster_dir, "nodes", api_host, API_FILE), "{}"))
    except ValueError:
        return set()
    return {((o.get("metadata") or {}).get("namespace") or "default", (o.get("metadata") or {}).get("name"))
            for o in (api.get("objects") or {}).get(NAD_KEY) or []}


def pod_networks(pod):
    """``(namespace, name)`` of the NADs a pod's ``k8s.v1.cni.cncf.io/networks`` annotation names (Multus's
    comma list ``[ns/]name[@ifname]`` or its JSON list form)."""
    meta = pod["metadata"]
    text = str((meta.get("annotations") or {}).get(NAD_ANNOTATION) or "").strip()
    if not text:
        return []
    out = []
    if text.startswith("["):
        try:
            items = json.loads(text)
        except ValueError:
            items = []
        for item in items if isinstance(items, list) else []:
            if isinstance(item, dict) and item.get("name"):
                out.append((item.get("namespace") or meta["namespace"], item["name"]))
        return out
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        part = part.split("@", 1)[0]
        ns, _, name = part.rpartition("/")
        out.append((ns or meta["namespace"], name))
    return out


def _tolerated(taint, tolerations):
    for tol in tolerations or []:
        if tol.get("effect") and tol.get("effect") != taint.get("effect"):
            continue
        if tol.get("operator") == "Exists" and (not tol.get("key") or tol.get("key") == taint.get("key")):
            return True
        if tol.get("key") == taint.get("key") and str(tol.get("value") or "") == str(taint.get("value") or ""):
            return True
    return False


def _expressions_match(expressions, labels):
    for expr in expressions or []:
        key, op, values = expr.get("key"), expr.get("operator"), [str(v) for v in expr.get("values") or []]
        have = labels.get(key)
        if (op == "In" and have not in values) or (op == "NotIn" and have in values):
            return False
        if (op == "Exists" and key not in labels) or (op == "DoesNotExist" and key in labels):
            return False
        if op in ("Gt", "Lt"):
            try:
                if not (int(have) > int(values[0]) if op == "Gt" else int(have) < int(values[0])):
                    return False
            except (TypeError, ValueError, IndexError):
                return False
    return True


def _label_selector_match(selector, labels):
    if not selector:
        return False
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    return _expressions_match(selector.get("matchExpressions"), labels)


def _node_affinity(pod, labels):
    spec = pod["spec"]
    if any(labels.get(k) != str(v) for k, v in (spec.get("nodeSelector") or {}).items()):
        return False
    required = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms")
    if required:
        return any(_expressions_match(t.get("matchExpressions"), labels) for t in required)
    return True


def _anti_affinity(pod, node, nodes_by_name, bound):
    terms = (((pod["spec"].get("affinity") or {}).get("podAntiAffinity") or {})
             .get("requiredDuringSchedulingIgnoredDuringExecution") or [])
    labels = (node.get("metadata") or {}).get("labels") or {}
    for term in terms:
        key = term.get("topologyKey")
        if key not in labels:
            continue
        for other in bound:
            other_node = nodes_by_name.get(other["spec"].get("nodeName"))
            if other_node is None or other["metadata"]["namespace"] not in (term.get("namespaces")
                                                                              or [pod["metadata"]["namespace"]]):
                continue
            if (((other_node.get("metadata") or {}).get("labels") or {}).get(key) == labels[key]
                    and _label_selector_match(term.get("labelSelector"), other["metadata"].get("labels") or {})):
                return False
    return True


def _active(pod):
    return (pod.get("status") or {}).get("phase") in ("Pending", "Running") and pod["spec"].get("nodeName")


def filter_node(pod, node, nodes_by_name, bound):
    """Why the default scheduler's filters reject ``node`` for ``pod`` (kube-scheduler 1.31's reasons, the
    first failing plugin's, in its order), and whether preemption could help; ([], _) when it fits."""
    spec, status = node.get("spec") or {}, node.get("status") or {}
    labels = (node.get("metadata") or {}).get("labels") or {}
    if spec.get("unschedulable") and not _tolerated({"key": UNSCHEDULABLE, "effect": "NoSchedule"},
                                                   pod["spec"].get("tolerations")):
        return ["node(s) were unschedulable"], False
    for taint in spec.get("taints") or []:
        if taint.get("effect") in ("NoSchedule", "NoExecute") and not _tolerated(taint, pod["spec"].get("tolerations")):
            return ["node(s) had untolerated taint {{{}: {}}}".format(taint.get("key"), taint.get("value", ""))], False
    if not _node_affinity(pod, labels):
        return ["node(s) didn't match Pod's node affinity/selector"], False
    allocatable = status.get("allocatable") or {}
    used = {}
    for other in bound:
        if other["spec"].get("nodeName") == node["metadata"]["name"]:
            for key, value in pod_requests(other).items():
                used[key] = used.get(key, 0.0) + value
    short = [f"Insufficient {key}" for key, want in sorted(pod_requests(pod).items())
             if want > 0 and want > quantity(allocatable.get(key)) - used.get(key, 0.0)]
    if short:
        return short, True
    if not _anti_affinity(pod, node, nodes_by_name, bound):
        return ["node(s) didn't match pod anti-affinity rules"], True
    return [], False


def _summary(total, counts):
    return "0/{} nodes are available: {}.".format(total, ", ".join(
        f"{n} {reason}" for reason, n in sorted(counts.items())))


def unschedulable_message(total, per_node):
    """kube-scheduler's FitError text: the filter reasons with their node counts, then the preemption verdict."""
    reasons, preempt = {}, {}
    for found, helps in per_node:
        for reason in found:
            reasons[reason] = reasons.get(reason, 0) + 1
        verdict = "No preemption victims found for incoming pod" if helps else \
            "Preemption is not helpful for scheduling"
        preempt[verdict] = preempt.get(verdict, 0) + 1
    return _summary(total, reasons) + " preemption: " + _summary(total, preempt)


def _age(pod, now):
    try:
        return now - calendar.timegm(time.strptime(pod["metadata"].get("creationTimestamp") or "",
                                                   "%Y-%m-%dT%H:%M:%SZ"))
    except ValueError:
        return float("inf")


def _prefilter_message(total, reason):
    """kube-scheduler's FitError for a pod a PreFilter plugin rejected: every node is out, preemption cannot help."""
    return (f"0/{total} nodes are available: {reason}. preemption: 0/{total} nodes are available: {total} "
            "Preemption is not helpful for scheduling.")


def schedule(cluster_dir, doc, now=None, binding=None, delay=0.0):
    """Bind every Pending pod without a node (default-scheduler) to the first node by name whose filters pass,
    or mark it Unschedulable (PodScheduled False with the FitError message, a FailedScheduling event). A pod is
    considered ``delay`` seconds after its creation (the profile's k8s.latency.pod_schedule_s); ``binding``
    (k8s_volumes.VolumeBinding) adds the VolumeBinding plugin's PreFilter and Filter and learns the bound pods.
    Returns ``(changed, [(node, pod key)])`` of the pods bound."""
    now = time.time() if now is None else now
    waiting = [p for p in doc.get("pods") or [] if not p["spec"].get("nodeName")
               and (p.get("status") or {}).get("phase") == "Pending" and "deletionTimestamp" not in p["metadata"]
               and p["spec"].get("schedulerName", "default-scheduler") == "default-scheduler"]
    if not waiting:
        return False, []
    nodes = node_objects(cluster_dir, doc)
    by_name = {n["metadata"]["name"]: n for n in nodes}
    bound = [p for p in doc.get("pods") or [] if _active(p)]
    changed, placed = False, []
    for pod in sorted(waiting, key=lambda p: (p["metadata"].get("creationTimestamp") or "", p["metadata"]["name"])):
        if delay > 0 and _age(pod, now) < delay:
            continue
        rejected = binding.prefilter(pod) if binding is not None else None
        verdicts = [] if rejected else [(node, *filter_node(pod, node, by_name, bound)) for node in nodes]
        if binding is not None:
            verdicts = [(node, found, helps) if found or binding.filter(pod, node)
                        else (node, ["node(s) had volume node affinity conflict"], False)
                        for node, found, helps in verdicts]
        fits = [node for node, found, _ in verdicts if not found]
        meta = pod["metadata"]
        key = f"{meta['namespace']}/{meta['name']}"
        status = pod.setdefault("status", {"phase": "Pending"})
        if fits:
            target = fits[0]["metadata"]["name"]
            pod["spec"]["nodeName"] = target
            status["conditions"] = [{"lastProbeTime": None, "lastTransitionTime": stamp(now), "status": "True",
                                     "type": "PodScheduled"}]
            meta["resourceVersion"] = next_version(doc)
            event(doc, pod, "Normal", "Scheduled", f"Successfully assigned {key} to {target}", "default-scheduler",
                  now=now)
            bound.append(pod)
            placed.append((target, key))
            if binding is not None:
                binding.bind(pod, target)
            changed = True
            continue
        message = _prefilter_message(len(nodes), rejected) if rejected else \
            unschedulable_message(len(nodes), [(found, helps) for _, found, helps in verdicts])
        old = next((c for c in status.get("conditions") or [] if c.get("type") == "PodScheduled"), None)
        if old and old.get("message") == message:
            continue
        status["conditions"] = [{"lastProbeTime": None, "lastTransitionTime": stamp(now), "message": message,
                                 "reason": "Unschedulable", "status": "False", "type": "PodScheduled"}]
        meta["resourceVersion"] = next_version(doc)
        event(doc, pod, "Warning", "FailedScheduling", message, "default-scheduler", now=now)
        changed = True
    return changed, placed


def sandbox_error(pod, node, known):
    """The kubelet's FailedCreatePodSandBox message when the pod names a NAD Multus cannot find (containerd 1.7,
    Multus 4 thick plugin), and Multus's NoNetworkFound message; None when every NAD exists."""
    meta = pod["metadata"]
    for ns, name in pod_networks(pod):
        if (ns, name) in known:
            continue
        missing = (f"cannot find a network-attachment-definition ({name}) in namespace ({ns}): "
                   f'network-attachment-definitions.k8s.cni.cncf.io "{name}" not found')
        sandbox = hashlib.sha256(f"{meta.get('uid')}/sandbox".encode()).hexdigest()
        pod_ns, pod_name, uid = meta["namespace"], meta["name"], meta.get("uid", "")
        return (f"Failed to create pod sandbox: rpc error: code = Unknown desc = failed to setup network for sandbox "
                f'"{sandbox}": plugin type="multus-shim" name="multus-cni-network" failed (add): CmdAdd (shim): CNI '
                f"request failed with status 400: 'ContainerID:\"{sandbox}\" Netns:\"/var/run/netns/cni-"
                f"{uid}\" IfName:\"eth0\" Args:\"IgnoreUnknown=1;K8S_POD_NAMESPACE={pod_ns};K8S_POD_NAME="
                f"{pod_name};K8S_POD_INFRA_CONTAINER_ID={sandbox};K8S_POD_UID={uid}\" Path:\"\" ERRORED: error "
                f"configuring pod [{pod_ns}/{pod_name}] networking: Multus: [{pod_ns}/{pod_name}/{uid}]: error "
                "loading k8s delegates k8s args: TryLoadPodDelegates: error in getting k8s network for pod: "
                f"GetNetworkDelegates: failed getting the delegate: getKubernetesDelegate: {missing}\n'"), missing
    return None
