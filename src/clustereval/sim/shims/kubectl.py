#!/usr/bin/python3
"""Simulated ``kubectl`` (client and server v1.31) for a simulated node (standalone: stdlib only, no
clustereval import).

The "API server" is a JSON file, ``$CLUSTEREVAL_SIM_K8S_API`` (default
``/etc/clustereval-sim-k8s/api.json``), rendered by ``clustereval.sim.overlays.k8s`` on nodes whose
profile turns the Kubernetes API on. It holds the served resources (``resources``: name, shortnames,
group, version, namespaced, kind), the objects per resource (``objects``: ``{"<name>.<group>": [...]}``),
the kubeconfig identity (``user``), what it may not do (``denied``: ``["create pods", ...]``), the
versions, and optionally ``nodes``. Node objects also come from every node of the simulated cluster:
``<cluster dir>/nodes/*/overlay/etc/clustereval-sim-k8s/node.json``, found from this script's own
location (``<cluster dir>/shims/kubectl``), so the API lists exactly the simulated nodes.

Answers what the audit asks, as kubectl prints it:

* ``get TYPE[,TYPE...] [-A|--all-namespaces] [-n NS] [--field-selector metadata.name=N] -o json``: a
  ``List`` (keys sorted, 4-space indent, as kubectl prints unstructured objects); an unknown type gives
  ``error: the server doesn't have a resource type "X"`` (exit 1, nothing on stdout); a type the user
  may not list gives ``Error from server (Forbidden): ...`` on stderr, exit 1, after the others' List;
* ``version -o json`` (2-space indent, struct field order), ``api-resources`` (tabwriter table),
  ``auth can-i VERB RESOURCE [--all-namespaces]``: ``yes`` (exit 0) or ``no`` (exit 1), with the
  warning kubectl prints on stderr for a cluster-scoped resource asked about in a namespace.

* ``get TYPE NAME -o json`` prints the object itself (not a List); ``-l SELECTOR`` filters by labels
  (``k=v``, ``k!=v``, ``k``, ``!k``, comma-joined); ``--field-selector`` takes ``metadata.name`` /
  ``metadata.namespace`` and, for events, ``involvedObject.*``, ``reason``, ``type``;
  ``-o jsonpath=TEMPLATE`` evaluates kubectl's JSONPath subset (``{.a.b}``, escaped dots, ``[*]``/``[N]``,
  ``{range ...}{end}``, ``{"\t"}`` literals; a missing field prints nothing, as kubectl's
  allowMissingKeys does);
* ``create -f -`` (JSON on stdin) of a PersistentVolumeClaim: ``persistentvolumeclaim/NAME created``, the
  API server's AlreadyExists / Forbidden / namespace NotFound errors (``error when creating "STDIN"``);
* ``delete pvc NAME... | -l SELECTOR [--ignore-not-found] [--wait[=BOOL]] [--timeout=D]``:
  ``persistentvolumeclaim "NAME" deleted``, ``Error from server (NotFound): persistentvolumeclaims "NAME" not
  found``, ``No resources found`` when a selector matches nothing.

The storage controllers (the PV controller, the provisioners the API file lists under ``provisioners``,
pvc-protection) are ``k8s_volumes.py`` next to this script: a created claim is admitted and provisioned at once or
after the profile's ``k8s.latency`` (the power daemon does the deferred part), a deleted claim a running pod mounts
stays Terminating, its volume is deleted (reclaimPolicy Delete) or Released (Retain); events stay. The objects
that change (``persistentvolumeclaims``, ``persistentvolumes``, ``events``) live in ``state.json`` next to the API
file (on a simulated node: in its overlay), written under a lock, so they persist from one kubectl call to the
next and replace the API file's lists.

DaemonSets are placed as the DaemonSet controller places them (``daemon_placement``): on the nodes their
nodeSelector matches whose NoSchedule/NoExecute taints their pod template's tolerations (plus the controller's own:
not-ready, unreachable, pressure, unschedulable) tolerate; their status counts those nodes (``numberMisscheduled``
where a pod stays on a node tainted later with NoSchedule only), drain lists their pods there only. A node's
taints from its creation (the profile's ``k8s.taints``) stay under cordons and ``kubectl taint``. With
``ExtendedResourceToleration`` in the API file's ``admission_plugins`` a created pod asking for an extended resource
(``nvidia.com/gpu``) gets the toleration of the NoSchedule taint of that name, as that admission plugin adds it.

Nodes and pods are live (``k8s_live.py`` next to this script, ``<cluster dir>/k8s/cluster.json``): Node objects show
the conditions the simulated kubelet and node lifecycle controller post, the node's boot id, its healthy GPUs,
cordon and taints; ``cordon``/``uncordon``/``taint``/``drain`` (kubectl 1.31's filters, warnings and messages),
``create -f`` of Pods (JSON or YAML) bound to a node with ``spec.nodeName``, run by the power daemon inside that
node, ``get pod``, ``logs``, ``delete pod`` (docs/sim.md, "Kubernetes drills").

Without the API file it behaves like kubectl with no kubeconfig (connection to localhost:8080 refused).
"""

import glob
import hashlib
import json
import os
import re
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
import k8s_volumes as volumes

try:  # the live nodes and pods of a simulated cluster (a module next to this one in <cluster>/shims)
    import k8s_live
except ImportError:  # a lone copy of this script: the API file only
    k8s_live = None

API_FILE = "/etc/clustereval-sim-k8s/api.json"
NODE_FILE = "overlay/etc/clustereval-sim-k8s/node.json"
CLIENT_VERSION = {"major": "1", "minor": "31", "gitVersion": "v1.31.4",
                  "gitCommit": "a78aa47129b8539636eb86a9d00e31b2720fe06b", "gitTreeState": "clean",
                  "buildDate": "2024-12-10T11:43:21Z", "goVersion": "go1.22.9", "compiler": "gc",
                  "platform": "linux/amd64"}
KUSTOMIZE_VERSION = "v5.4.2"
REFUSED = "The connection to the server localhost:8080 was refused - did you specify the right host or port?"
BUILTIN_NAMESPACES = ("default", "kube-node-lease", "kube-public", "kube-system")


class KubectlError(Exception):
    """An error kubectl prints on stderr before exiting with ``code``."""

    def __init__(self, message, code=1):
        super().__init__(message)
        self.code = code


# ----------------------------------------------------------------------------------------- the API state

def api_path():
    return os.environ.get("CLUSTEREVAL_SIM_K8S_API") or API_FILE


def load_api():
    """The API file with the changed objects of ``state.json`` over its lists; None without an API."""
    return volumes.load_api(api_path())


def save_state(api):
    volumes.save_state(api, api_path())


def state_lock():
    """One writer at a time: read, change and write the state under an exclusive lock."""
    return volumes.state_lock(api_path())


def cluster_dir():
    """The simulated cluster this shim was installed into (``<cluster dir>/shims/kubectl``)."""
    return os.path.dirname(os.path.dirname(os.path.realpath(__file__)))


def live_doc():
    return k8s_live.load(cluster_dir()) if k8s_live else {"nodes": {}, "pods": []}


def sim_node_records(api, live=None):
    """Node records (``{"object": Node, "not_ready": [workload names]}``) of the API file and of every
    node of the simulated cluster this shim was installed into, each Node as it is now (cordon, taints,
    conditions, boot id, healthy GPUs: ``k8s_live``)."""
    records = list(api.get("nodes") or [])
    for path in sorted(glob.glob(os.path.join(cluster_dir(), "nodes", "*", NODE_FILE))):
        try:
            with open(path) as fh:
                records.append(json.load(fh))
        except (OSError, ValueError):
            continue
    # the taints the node was created with (the profile's): a daemon pod they repel was never scheduled there
    records = [dict(r, static_taints=list(((r["object"].get("spec") or {}).get("taints")) or [])) for r in records]
    if k8s_live:
        live = live_doc() if live is None else live
        records = [dict(r, object=k8s_live.live_node(cluster_dir(), r["object"], live)) for r in records]
    return records


def _node_selector_matches(selector, node):
    labels = (node.get("metadata") or {}).get("labels") or {}
    return all(labels.get(k) == v for k, v in (selector or {}).items())


def _node_ready(node):
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (node.get("status") or {}).get("conditions") or [])


def tolerates(toleration, taint):
    """core/v1 Toleration.ToleratesTaint."""
    if toleration.get("effect") and toleration["effect"] != taint.get("effect"):
        return False
    if toleration.get("key") and toleration["key"] != taint.get("key"):
        return False
    if toleration.get("operator") == "Exists":
        return True
    return toleration.get("operator") in (None, "", "Equal") and str(toleration.get("value") or "") == str(
        taint.get("value") or "")


def untolerated(taints, tolerations, effects):
    return [t for t in taints or [] if t.get("effect") in effects and not any(tolerates(tol, t) for tol in tolerations)]


# what the DaemonSet controller adds to every daemon pod (util.AddOrUpdateDaemonPodTolerations): they ride out
# node problems and cordons (hostNetwork pods also tolerate network-unavailable, a taint the simulation never sets)
DAEMON_TOLERATIONS = [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"},
                      {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"},
                      *({"key": f"node.kubernetes.io/{k}", "operator": "Exists", "effect": "NoSchedule"}
                        for k in ("disk-pressure", "memory-pressure", "pid-pressure", "unschedulable"))]


def daemon_placement(ds, record):
    """(should run, has a pod) of a DaemonSet on a node, as the DaemonSet controller decides
    (NodeShouldRunDaemonPod): the nodeSelector must match, and the pod, with the controller's own tolerations,
    must tolerate the node's NoSchedule and NoExecute taints to be placed; a pod already there stays unless a
    NoExecute taint repels it. The node's taints from its creation repelled it from the start."""
    pod_spec = ((ds.get("spec") or {}).get("template") or {}).get("spec") or {}
    node = record["object"]
    if not _node_selector_matches(pod_spec.get("nodeSelector"), node):
        return False, False
    tolerations = [*(pod_spec.get("tolerations") or []), *DAEMON_TOLERATIONS]
    taints = (node.get("spec") or {}).get("taints") or []
    if not untolerated(taints, tolerations, ("NoSchedule", "NoExecute")):
        return True, True
    stays = not untolerated(taints, tolerations, ("NoExecute",)) and not untolerated(
        record.get("static_taints"), tolerations, ("NoSchedule", "NoExecute"))
    return False, stays


def daemonset_status(api, ds, records):
    """A DaemonSet's status as the controller keeps it (updateDaemonSetStatus): desired and current on the nodes it
    should run on (:func:`daemon_placement`), ready and available there where the node is Ready and the node does
    not mark that workload as failing, misscheduled where a pod stays although it should not run; fields that are
    0 and ``omitempty`` in apps/v1 are left out, as the API server prints them."""
    name = (ds.get("metadata") or {}).get("name")
    failing = set(api.get("not_ready") or [])
    desired = misscheduled = ready = 0
    for record in records:
        should_run, has_pod = daemon_placement(ds, record)
        if should_run:
            desired += 1
            ready += (_node_ready(record["object"]) and name not in failing
                      and name not in (record.get("not_ready") or []))
        elif has_pod:
            misscheduled += 1
    status = {"currentNumberScheduled": desired, "desiredNumberScheduled": desired, "numberAvailable": ready,
              "numberMisscheduled": misscheduled, "numberReady": ready, "numberUnavailable": desired - ready,
              "observedGeneration": 1, "updatedNumberScheduled": desired}
    omitempty = ("numberAvailable", "numberUnavailable", "updatedNumberScheduled")
    return {k: v for k, v in status.items() if v or k not in omitempty}


def objects_of(api, resource, records):
    key = resource["name"] + ("." + resource["group"] if resource["group"] else "")
    if key == "nodes":
        items = [r["object"] for r in records]
    elif key == "pods":
        items = list((api.get("objects") or {}).get(key) or []) + list(live_doc().get("pods") or [])
    elif key in ("jobs.batch", "events") and k8s_live:  # Jobs and pod events the simulated controllers keep
        doc = live_doc()
        extra = doc.get("events") or [] if key == "events" else [
            dict(j, status=k8s_live.job_status(j, doc.get("pods") or [])) for j in doc.get("jobs") or []]
        items = list((api.get("objects") or {}).get(key) or []) + list(extra)
    else:
        items = list((api.get("objects") or {}).get(key) or [])
    out = []
    for obj in items:
        obj = dict(obj)
        obj.setdefault("apiVersion", (resource["group"] + "/" if resource["group"] else "") + resource["version"])
        obj.setdefault("kind", resource["kind"])
        if resource["kind"] == "DaemonSet" and "status" not in obj:
            obj["status"] = daemonset_status(api, obj, records)
        out.append(obj)
    # etcd returns keys in order: /registry/<resource>/<namespace>/<name>
    return sorted(out, key=lambda o: ((o.get("metadata") or {}).get("namespace") or "",
                                      (o.get("metadata") or {}).get("name") or ""))


def resolve(api, arg):
    """The served resource an argument names (plural, singular, short name, kind, with or without
    ``.group``), or None."""
    arg = arg.lower()
    resources = api.get("resources") or []
    for res in resources:
        full = res["name"] + ("." + res["group"] if res["group"] else "")
        if arg == full:
            return res
    name, _, group = arg.partition(".")
    candidates = [r for r in resources if not group or r["group"] == group]
    for res in candidates:
        if name == res["name"] or name == res["kind"].lower() or name in (res.get("shortnames") or []):
            return res
    return None


def unknown_type(arg):
    # cli-runtime's builder drops the group from the message: mappingFor() quotes groupResource.Resource
    return KubectlError('error: the server doesn\'t have a resource type "{}"'.format(arg.split(".", 1)[0]))


def forbidden(api, verb, resource, namespace):
    group = resource["group"]
    full = resource["name"] + ("." + group if group else "")
    scope = "at the cluster scope" if not namespace else f'in the namespace "{namespace}"'
    return ('Error from server (Forbidden): {} is forbidden: User "{}" cannot {} resource "{}" in API group '
            '"{}" {}'.format(full, api.get("user") or "tenant", verb, resource["name"], group, scope))


def denied(api, verb, resource):
    names = {resource["name"], resource["name"] + "." + resource["group"]}
    return any(d.split(" ", 1)[0] == verb and d.split(" ", 1)[-1] in names for d in api.get("denied") or [])


# ----------------------------------------------------------------------------------------- printing

def go_json(obj, indent, sort_keys):
    """JSON as Go's encoding/json MarshalIndent writes it (HTML characters escaped, UTF-8 kept); maps
    (unstructured objects, as ``kubectl get`` prints them) have sorted keys, structs their field order."""
    text = json.dumps(obj, indent=indent, ensure_ascii=False, separators=(",", ": "), sort_keys=sort_keys)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def tabwriter(rows, padding=3, minwidth=6):
    """kubectl's printers.GetNewTabWriter: cells padded to the column's widest + 3, the last one bare."""
    widths = [max(minwidth, max(len(r[i]) for r in rows) + padding) for i in range(len(rows[0]) - 1)]
    return "".join("".join(c.ljust(w) for c, w in zip(r, widths, strict=False)) + r[-1] + "\n" for r in rows)


# ----------------------------------------------------------------------------------------- commands

VALUE_FLAGS = {"-o": "output", "--output": "output", "-n": "namespace", "--namespace": "namespace",
               "--field-selector": "field_selector", "-l": "selector", "--selector": "selector",
               "-f": "filename", "--filename": "filename", "--timeout": "timeout", "--grace-period": "grace_period",
               "-c": "container", "--container": "container", "--tail": "tail", "--pod-selector": "pod_selector",
               "--skip-wait-for-delete-timeout": "skip_wait", "--chunk-size": "chunk_size"}
BOOL_FLAGS = {"--ignore-not-found": "ignore_not_found", "--wait": "wait", "--ignore-daemonsets": "ignore_daemonsets",
              "--delete-emptydir-data": "delete_emptydir_data", "--delete-local-data": "delete_emptydir_data",
              "--force": "force", "--disable-eviction": "disable_eviction", "--now": "now", "--overwrite": "overwrite",
              "--timestamps": "timestamps"}


def _bool(value):
    if value.lower() in ("true", "1", "t"):
        return True
    if value.lower() in ("false", "0", "f"):
        return False
    raise KubectlError(f'error: invalid argument "{value}": strconv.ParseBool: parsing "{value}": invalid syntax')


def parse_flags(args):
    flags = {"all_namespaces": False, "namespace": None, "output": None, "field_selector": None, "selector": None,
             "filename": None, "timeout": None, "ignore_not_found": False, "wait": True, "grace_period": None,
             "container": None, "tail": None, "pod_selector": None, "skip_wait": None, "chunk_size": None,
             "ignore_daemonsets": False, "delete_emptydir_data": False, "force": False, "disable_eviction": False,
             "now": False, "overwrite": False, "timestamps": False}
    positional = []
    i = 0
    while i < len(args):
        a = args[i]
        nxt = args[i + 1] if i + 1 < len(args) else None
        name, eq, value = a.partition("=")
        if a in ("-A", "--all-namespaces", "--all-namespaces=true"):
            flags["all_namespaces"] = True
        elif name in BOOL_FLAGS:
            flags[BOOL_FLAGS[name]] = _bool(value) if eq else True
        elif a in VALUE_FLAGS:
            if nxt is None:
                raise KubectlError('error: flag needs an argument: %s' % (
                    f"'{a[1]}' in {a}" if len(a) == 2 else "--" + a.lstrip("-")))
            flags[VALUE_FLAGS[a]] = nxt
            i += 1
        elif eq and name in VALUE_FLAGS:
            flags[VALUE_FLAGS[name]] = value
        elif a.startswith(("-o", "-n", "-l", "-f", "-c")) and len(a) > 2 and not a.startswith("--"):
            flags[VALUE_FLAGS[a[:2]]] = a[2:].lstrip("=")
        elif a.startswith("-") and a != "-":
            raise KubectlError("error: unknown flag: {}\nSee 'kubectl {} --help' for usage.".format(
                a.split("=")[0], positional[0] if positional else "get"))
        else:
            positional.append(a)
        i += 1
    return positional, flags


# ----------------------------------------------------------------------------------------- selectors

def label_selector(text):
    """Equality-based label requirements (``k=v``, ``k==v``, ``k!=v``, ``k``, ``!k``) as predicates."""
    reqs = []
    for part in [p.strip() for p in (text or "").split(",") if p.strip()]:
        m = re.fullmatch(r"([A-Za-z0-9./_-]+)\s*(==|=|!=)\s*([A-Za-z0-9._-]*)", part)
        if m:
            key, op, value = m.groups()
            reqs.append((lambda labels, k=key, v=value, neg=(op == "!="): (labels.get(k) == v) != neg))
        elif re.fullmatch(r"!?[A-Za-z0-9./_-]+", part):
            key, neg = part.lstrip("!"), part.startswith("!")
            reqs.append((lambda labels, k=key, n=neg: (k in labels) != n))
        else:
            raise KubectlError(f'error: the simulated kubectl takes equality-based label selectors only: "{part}"')
    return lambda obj: all(r((obj.get("metadata") or {}).get("labels") or {}) for r in reqs)


FIELD_LABELS = {"metadata.name", "metadata.namespace"}
POD_FIELD_LABELS = {"spec.nodeName", "spec.restartPolicy", "spec.schedulerName", "spec.serviceAccountName",
                    "status.phase", "status.podIP", "status.nominatedNodeName"}
EVENT_FIELD_LABELS = {"involvedObject.kind", "involvedObject.namespace", "involvedObject.name",
                      "involvedObject.uid", "involvedObject.apiVersion", "involvedObject.resourceVersion",
                      "involvedObject.fieldPath", "reason", "reportingComponent", "source", "type"}


def _field(obj, path):
    value = obj
    for key in path.split("."):
        value = value.get(key) if isinstance(value, dict) else None
    if path == "source" and isinstance(value, dict):
        value = value.get("component")
    if isinstance(value, bool) or path == "spec.unschedulable":
        return "true" if value else "false"
    return "" if value is None else str(value)


def field_selector(text, resource):
    reqs = []
    allowed = FIELD_LABELS | (EVENT_FIELD_LABELS if resource["kind"] == "Event" else set()) | (
        POD_FIELD_LABELS if resource["kind"] == "Pod" else set()) | (
        {"spec.unschedulable"} if resource["kind"] == "Node" else set())
    for part in [p for p in (text or "").split(",") if p]:
        m = re.fullmatch(r"([A-Za-z.]+)(==|=|!=)(.*)", part)
        if not m or m.group(1) not in allowed:
            label = m.group(1) if m else part
            group = resource["group"] + "/" if resource["group"] else "/"
            raise KubectlError(f'Error from server (BadRequest): Unable to find "{group}{resource["version"]}, '
                               f'Resource={resource["name"]}" that match label selector "", field selector "{text}": '
                               f'field label not supported: {label}')
        reqs.append(m.groups())
    return lambda obj: all((_field(obj, f) == v) != (op == "!=") for f, op, v in reqs)


# ----------------------------------------------------------------------------------------- JSONPath

def _jsonpath_tokens(template):
    """kubectl's JSONPath template as ("text"|"field"|"range"|"end", value) tokens."""
    tokens, pos = [], 0
    for m in re.finditer(r"\{((?:[^{}\"\\]|\\.|\"(?:[^\"\\]|\\.)*\")*)\}", template):
        if m.start() > pos:
            tokens.append(("text", template[pos:m.start()]))
        body = m.group(1).strip()
        if body.startswith('"') and body.endswith('"'):
            tokens.append(("text", json.loads(body)))
        elif body.startswith("range "):
            tokens.append(("range", body[6:].strip()))
        elif body == "end":
            tokens.append(("end", None))
        else:
            tokens.append(("field", body))
        pos = m.end()
    if pos < len(template):
        tokens.append(("text", template[pos:]))
    return tokens


def _jsonpath_values(obj, path):
    path = path.lstrip("@$")
    segments = [s.replace("\\.", ".") for s in re.split(r"(?<!\\)\.", path) if s]
    values = [obj]
    for seg in segments:
        m = re.fullmatch(r"([^\[\]]*)(?:\[(\*|-?\d+)\])?", seg)
        if not m:
            raise KubectlError(f"error: error parsing jsonpath {path}, unrecognized character in action: {seg}")
        name, index = m.groups()
        nxt = []
        for value in values:
            if name:
                if not isinstance(value, dict) or name not in value:
                    continue
                value = value[name]
            if index == "*":
                nxt.extend(value if isinstance(value, list) else list(value.values()) if isinstance(value, dict)
                           else [])
            elif index is not None:
                if isinstance(value, list) and -len(value) <= int(index) < len(value):
                    nxt.append(value[int(index)])
            else:
                nxt.append(value)
        values = nxt
    return values


def _jsonpath_print(value):
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    if value is None:
        return "<nil>"
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


def jsonpath(template, obj):
    tokens = _jsonpath_tokens(template)

    def run(start, current):
        out, i = [], start
        while i < len(tokens):
            kind, value = tokens[i]
            if kind == "end":
                return "".join(out), i
            if kind == "text":
                out.append(value)
            elif kind == "field":
                out.append(" ".join(_jsonpath_print(v) for v in _jsonpath_values(current, value)))
            elif kind == "range":
                end = i
                items = _jsonpath_values(current, value)
                for item in items:
                    text, end = run(i + 1, item)
                    out.append(text)
                if not items:  # skip to the matching {end}
                    depth, end = 0, i + 1
                    while end < len(tokens) and not (tokens[end][0] == "end" and depth == 0):
                        depth += {"range": 1, "end": -1}.get(tokens[end][0], 0)
                        end += 1
                i = end
            i += 1
        return "".join(out), i

    return run(0, obj)[0]


# ----------------------------------------------------------------------------------------- commands

def _resource_name(res):
    return res["name"] + ("." + res["group"] if res["group"] else "")


def _print(out, obj, output):
    if output == "json":
        out.write(go_json(obj, 4, True) + "\n")
    else:
        out.write(jsonpath(output.split("=", 1)[1], obj))


def cmd_get(api, args, out, err):
    positional, flags = parse_flags(args)
    if not positional:
        raise KubectlError("You must specify the type of resource to get. Use \"kubectl api-resources\" for a "
                           "complete list of supported resources.\n\nerror: Required resource not specified.\n"
                           "Use \"kubectl explain <resource>\" for a detailed description of that resource "
                           "(e.g. kubectl explain pods).\nSee 'kubectl get -h' for help and examples")
    output = flags["output"] or ""
    if output != "json" and not output.startswith("jsonpath="):
        raise KubectlError("error: the simulated kubectl prints -o json and -o jsonpath only (asked: {})".format(
            flags["output"]))
    resources = []
    for arg in positional[0].split(","):
        res = resolve(api, arg)
        if res is None:
            raise unknown_type(arg)
        resources.append(res)
    names = positional[1:]
    labels = label_selector(flags["selector"])
    fields = {id(res): field_selector(flags["field_selector"], res) for res in resources}
    namespace = None if flags["all_namespaces"] else (flags["namespace"] or "default")
    records = sim_node_records(api)
    items, errors = [], []
    for res in resources:
        ns = namespace if res["namespaced"] else None
        if denied(api, "list", res):
            errors.append(forbidden(api, "list", res, ns))
            continue
        for obj in objects_of(api, res, records):
            meta = obj.get("metadata") or {}
            if ns and meta.get("namespace") != ns:
                continue
            if names and meta.get("name") not in names:
                continue
            if not labels(obj) or not fields[id(res)](obj):
                continue
            items.append(obj)
    if names and not items and not errors:
        raise KubectlError(f'Error from server (NotFound): {_resource_name(resources[0])} "{names[0]}" not found')
    if len(names) == 1 and len(resources) == 1 and items:
        _print(out, items[0], output)  # one named object: kubectl prints the object, not a List
    elif not errors or items:
        _print(out, {"apiVersion": "v1", "items": items, "kind": "List", "metadata": {"resourceVersion": ""}}, output)
    if errors:
        raise KubectlError("\n".join(errors))
    return 0


def _namespaces(api):
    """The namespaces that exist: the Namespace objects, Kubernetes' own and those objects live in."""
    objects = api.get("objects") or {}
    found = set(BUILTIN_NAMESPACES) | {(o.get("metadata") or {}).get("name") for o in objects.get("namespaces") or []}
    for items in objects.values():
        found.update((o.get("metadata") or {}).get("namespace") for o in items or [])
    return found - {None}


# ----------------------------------------------------------------------------------------- YAML manifests

def _strip_comment(text):
    quote = None
    for i, ch in enumerate(text):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "\"'":
            quote = ch
        elif ch == "#" and (i == 0 or text[i - 1] in " \t"):
            return text[:i].rstrip()
    return text.rstrip()


def _entry_colon(text):
    """Index of the ``:`` that ends a mapping key (followed by a space or the end), or -1."""
    quote, depth = None, 0
    for i, ch in enumerate(text):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "\"'" and (i == 0 or text[i - 1] in " [{,:"):
            quote = ch
        elif ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
        elif ch == ":" and depth == 0 and (i + 1 == len(text) or text[i + 1] in " \t"):
            return i
    return -1


def _flow(text, pos=0):
    """A flow collection or scalar at ``pos``: (value, next position)."""
    while pos < len(text) and text[pos] in " \t":
        pos += 1
    if pos < len(text) and text[pos] in "[{":
        closing, items, mapping = "]" if text[pos] == "[" else "}", [], {}
        pos += 1
        while True:
            while pos < len(text) and text[pos] in " \t,":
                pos += 1
            if pos >= len(text):
                raise ValueError("unterminated flow collection")
            if text[pos] == closing:
                return (items if closing == "]" else mapping), pos + 1
            value, pos = _flow(text, pos)
            while pos < len(text) and text[pos] in " \t":
                pos += 1
            if closing == "}" and pos < len(text) and text[pos] == ":":
                mapping[value], pos = _flow(text, pos + 1)
            elif closing == "]":
                items.append(value)
    if pos < len(text) and text[pos] in "\"'":
        quote, end = text[pos], pos + 1
        while end < len(text) and not (text[end] == quote and (quote == "'" or text[end - 1] != "\\")):
            end += 1
        raw = text[pos:end + 1]
        return (json.loads(raw) if quote == '"' else raw[1:-1].replace("''", "'")), end + 1
    end = pos
    while end < len(text) and text[end] not in ",]}" and not (text[end] == ":" and text[end + 1:end + 2] in (" ", "")):
        end += 1
    return _plain(text[pos:end].strip()), end


def _plain(text):
    if text in ("", "~", "null", "Null", "NULL"):
        return None
    if text in ("true", "True", "TRUE"):
        return True
    if text in ("false", "False", "FALSE"):
        return False
    if re.fullmatch(r"[-+]?\d+", text):
        return int(text)
    if re.fullmatch(r"[-+]?(\d+\.\d*|\.\d+|\d+)([eE][-+]?\d+)?", text):
        return float(text)
    return text


def _scalar(text):
    text = _strip_comment(text)
    if text[:1] in "[{\"'":
        return _flow(text)[0]
    return _plain(text)


class _Yaml:
    """The block YAML manifests are written in: mappings, sequences, plain/quoted scalars, flow collections,
    ``|``/``>`` block scalars, comments."""

    def __init__(self, lines):
        self.lines, self.i = lines, 0

    def skip(self):
        while self.i < len(self.lines) and (not self.lines[self.i].strip()
                                            or self.lines[self.i].lstrip().startswith("#")):
            self.i += 1

    def here(self):
        line = self.lines[self.i]
        return len(line) - len(line.lstrip(" ")), line.strip()

    def node(self):
        self.skip()
        if self.i >= len(self.lines):
            return None
        indent, text = self.here()
        return self.seq(indent) if text == "-" or text.startswith("- ") else self.mapping(indent)

    def seq(self, indent):
        items = []
        while True:
            self.skip()
            if self.i >= len(self.lines):
                return items
            ind, text = self.here()
            if ind != indent or not (text == "-" or text.startswith("- ")):
                return items
            rest = text[1:].lstrip()
            if not rest:
                self.i += 1
                self.skip()
                items.append(self.node() if self.i < len(self.lines) and self.here()[0] > indent else None)
            elif (rest[0] not in "[{\"'" and _entry_colon(rest) > 0) or (rest[0] in "\"'" and _entry_colon(rest) > 0):
                offset = ind + len(text) - len(rest)
                self.lines[self.i] = " " * offset + rest
                items.append(self.mapping(offset))
            else:
                self.i += 1
                items.append(self.value(rest, indent))

    def mapping(self, indent):
        out = {}
        while True:
            self.skip()
            if self.i >= len(self.lines):
                return out
            ind, text = self.here()
            if ind < indent or (ind == indent and (text == "-" or text.startswith("- "))):
                return out
            colon = _entry_colon(text)
            if ind > indent or colon < 0:
                raise ValueError(f"line {self.i + 1}: could not find expected ':'")
            key, value = _scalar(text[:colon]), text[colon + 1:].strip()
            self.i += 1
            if _strip_comment(value):
                out[key] = self.value(value, indent)
                continue
            self.skip()
            if self.i < len(self.lines):
                nind, ntext = self.here()
                if nind > indent or (nind == indent and (ntext == "-" or ntext.startswith("- "))):
                    out[key] = self.node()
                    continue
            out[key] = None

    def value(self, text, indent):
        if text[:1] not in "|>":
            return _scalar(text)
        chomp = "-" if "-" in text else "+" if "+" in text else ""
        block, width = [], None
        while self.i < len(self.lines):
            line = self.lines[self.i]
            if line.strip():
                ind = len(line) - len(line.lstrip(" "))
                if ind <= indent:
                    break
                width = ind if width is None else width
            block.append(line[width:] if width is not None and line.strip() else "")
            self.i += 1
        body = re.sub(r"(?<=[^\n])\n(?=[^\n])", " ", "\n".join(block)) if text[0] == ">" else "\n".join(block)
        stripped = body.rstrip("\n")
        return {"-": stripped, "+": body + "\n"}.get(chomp, stripped + "\n" if stripped else "")


def yaml_documents(text):
    """The documents of a YAML stream (``---`` between them)."""
    docs, lines = [], []
    for line in [*text.replace("\t", "    ").splitlines(), "---"]:
        if line.rstrip() == "---" or line.startswith("--- "):
            value = _Yaml(lines).node()
            if value is not None:
                docs.append(value)
            lines = []
        elif line.rstrip() != "...":
            lines.append(line)
    return docs


def _read_manifest(flags, stdin):
    name = flags["filename"]
    if name == "-":
        text, source = stdin.read(), "STDIN"
    else:
        try:
            with open(name) as fh:
                text, source = fh.read(), name
        except OSError:
            raise KubectlError(f'error: the path "{name}" does not exist') from None
    try:
        doc = json.loads(text)
        docs = [doc]
    except ValueError:
        try:
            docs = yaml_documents(text)
        except ValueError as exc:
            raise KubectlError(f"error: error parsing {source}: error converting YAML to JSON: yaml: {exc}") from None
    out = []
    for doc in docs:
        if not isinstance(doc, dict):
            raise KubectlError(f"error: error validating \"{source}\": error validating data: invalid object to "
                               "validate; if you choose to ignore these errors, turn validation off with "
                               "--validate=false")
        out.extend(doc.get("items") or [] if doc.get("kind") == "List" else [doc])
    return out


def cmd_create(api, args, out, err, stdin=None, verb="create"):
    positional, flags = parse_flags(args)
    if positional or not flags["filename"]:
        raise KubectlError(f"error: the simulated kubectl creates from a manifest only (kubectl {verb} -f -)")
    docs = _read_manifest(flags, stdin or sys.stdin)
    if docs and all(d.get("kind") == "Pod" for d in docs):
        return create_pods(api, docs, flags, out, verb)
    if docs and all(d.get("kind") == "Job" for d in docs):
        return create_jobs(api, docs, flags, out, verb)
    known = _namespaces(api)
    errors = []
    for doc in docs:
        kind = doc.get("kind")
        res = resolve(api, str(kind or ""))
        if kind != "PersistentVolumeClaim" or doc.get("apiVersion") != "v1":
            raise KubectlError(f"error: the simulated kubectl creates v1 PersistentVolumeClaims only (got {kind})")
        meta = dict(doc.get("metadata") or {})
        name = meta.get("name")
        if not name:
            raise KubectlError('The PersistentVolumeClaim "" is invalid: metadata.name: Required value: name or '
                               'generateName is required')
        namespace = meta.get("namespace") or flags["namespace"] or "default"
        if flags["namespace"] and meta.get("namespace") and meta["namespace"] != flags["namespace"]:
            theirs = meta["namespace"]
            raise KubectlError(f'error: the namespace from the provided object "{theirs}" does not match the '
                               f'namespace "{flags["namespace"]}". You must pass \'--namespace={theirs}\' to perform '
                               'this operation.')
        where = 'Error from server ({}): error when creating "STDIN": '
        if denied(api, "create", res):
            errors.append(where.format("Forbidden") + forbidden(api, "create", res, namespace).split(": ", 1)[1])
            continue
        if namespace not in known:
            errors.append(where.format("NotFound") + f'namespaces "{namespace}" not found')
            continue
        claims = api["objects"].setdefault("persistentvolumeclaims", [])
        if any((c.get("metadata") or {}).get("name") == name and c["metadata"].get("namespace") == namespace
               for c in claims):
            if verb == "apply":
                out.write(f"persistentvolumeclaim/{name} unchanged\n")
                continue
            errors.append(where.format("AlreadyExists") + f'persistentvolumeclaims "{name}" already exists')
            continue
        spec = dict(doc.get("spec") or {})
        if not spec.get("accessModes") or not ((spec.get("resources") or {}).get("requests") or {}).get("storage"):
            errors.append(f'The PersistentVolumeClaim "{name}" is invalid: \n'
                          + ("* spec.accessModes: Required value: at least 1 access mode is required\n"
                             if not spec.get("accessModes") else "")
                          + ("* spec.resources[storage]: Required value\n"
                             if not ((spec.get("resources") or {}).get("requests") or {}).get("storage") else ""))
            continue
        spec.setdefault("volumeMode", "Filesystem")
        meta.update(namespace=namespace, creationTimestamp=volumes.now_stamp(), uid=volumes.new_uid(namespace, name),
                    resourceVersion=volumes.next_version(api))
        claim = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": meta, "spec": spec}
        claims.append(claim)
        volumes.admit(api, claim, cluster_dir())
        out.write(f"persistentvolumeclaim/{name} created\n")
    save_state(api)
    if errors:
        raise KubectlError("\n".join(e.rstrip("\n") for e in errors))
    return 0


def cmd_apply(api, args, out, err, stdin=None):
    return cmd_create(api, args, out, err, stdin, verb="apply")


def cmd_delete(api, args, out, err, stdin=None, after=None):
    positional, flags = parse_flags(args)
    if not positional:
        raise KubectlError("error: You must provide one or more resources by argument or filename.\nExample resource "
                           "specifications include:\n   '-f rsrc.yaml'\n   '--filename=rsrc.json'\n   '<resource> "
                           "<name>'\n   '<resource>'")
    res = resolve(api, positional[0])
    if res is None:
        raise unknown_type(positional[0])
    if res["kind"] == "Job":
        return delete_jobs(api, positional[1:], flags, out)
    if res["kind"] not in ("PersistentVolumeClaim", "PersistentVolume"):
        raise KubectlError("error: the simulated kubectl deletes PersistentVolumeClaims and PersistentVolumes only")
    names = positional[1:]
    if not names and not flags["selector"]:
        raise KubectlError("error: resource(s) were provided, but no name was specified")
    if names and flags["selector"]:
        raise KubectlError("error: name cannot be provided when a selector is specified")
    namespace = (flags["namespace"] or "default") if res["namespaced"] else None
    key = res["name"]
    objects = api["objects"].setdefault(key, [])

    def here(o):
        return namespace is None or (o.get("metadata") or {}).get("namespace") == namespace

    if flags["selector"]:
        labels = label_selector(flags["selector"])
        targets = [o["metadata"]["name"] for o in objects if here(o) and labels(o)]
    else:
        targets = names
    if denied(api, "delete", res) and targets:
        message = forbidden(api, "delete", res, namespace)  # a delete names the object it was refused
        raise KubectlError(message.replace(" is forbidden:", f' "{targets[0]}" is forbidden:', 1))
    errors, found, terminating = [], 0, []
    # pvc-protection: a claim a pod that has not ended still mounts stays Terminating until that pod is gone
    pods = (live_doc().get("pods") or []) if res["kind"] == "PersistentVolumeClaim" else []
    for name in targets:
        match = [o for o in objects if here(o) and o["metadata"].get("name") == name]
        if not match:
            if not flags["ignore_not_found"]:
                errors.append(f'Error from server (NotFound): {_resource_name(res)} "{name}" not found')
            found += 1  # kubectl counts a named resource before the API answers NotFound
            continue
        found += 1
        if res["kind"] != "PersistentVolumeClaim":
            objects.remove(match[0])
        elif not volumes.delete_claim(api, match[0], pods, cluster_dir()):
            terminating.append(name)
        out.write('{} "{}" deleted\n'.format(res["kind"].lower(), name))
    if found == 0:
        out.write("No resources found\n")
    save_state(api)
    if terminating and flags["wait"] and after is not None:  # waited for once the state lock is released
        after.append(lambda: wait_claims_gone(namespace, terminating, _duration(flags["timeout"])))
    if errors:
        raise KubectlError("\n".join(errors))
    return 0


def wait_claims_gone(namespace, names, timeout):
    """``--wait``: poll the API until the claims are gone (their pods ended and pvc-protection let them go)."""
    deadline = time.monotonic() + (timeout if timeout > 0 else 7 * 24 * 3600)
    while True:
        api = load_api() or {}
        there = {c["metadata"].get("name") for c in (api.get("objects") or {}).get("persistentvolumeclaims") or []
                 if c["metadata"].get("namespace") == namespace}
        left = [n for n in names if n in there]
        if not left:
            return 0
        if time.monotonic() >= deadline:
            raise KubectlError("error: timed out waiting for the condition on persistentvolumeclaims/" + left[0])
        time.sleep(WAIT_POLL_S)


# ----------------------------------------------------------------------------------------- nodes and pods

DS_SUFFIX = "bcdfghjklmnpqrstvwxz2456789"  # apimachinery's rand.String alphabet
DEFAULT_TOLERATIONS = [  # the DefaultTolerationSeconds admission plugin
    {"effect": "NoExecute", "key": "node.kubernetes.io/not-ready", "operator": "Exists", "tolerationSeconds": 300},
    {"effect": "NoExecute", "key": "node.kubernetes.io/unreachable", "operator": "Exists", "tolerationSeconds": 300},
]
WAIT_POLL_S = 0.1


def _live():
    if k8s_live is None:
        raise KubectlError("error: the simulated kubectl keeps nodes and pods in its cluster's k8s/cluster.json "
                           "(k8s_live.py next to it is missing)")
    return k8s_live


def _duration(text):
    """A Go duration flag (``300s``, ``5m``, ``1h30m``, ``0``) in seconds."""
    if text in (None, "", "0"):
        return 0.0
    parts = re.findall(r"(\d+(?:\.\d+)?)(ms|s|m|h)", text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise KubectlError(f'error: invalid argument "{text}" for "--timeout" flag: time: invalid duration "{text}"')
    return sum(float(n) * {"ms": 0.001, "s": 1, "m": 60, "h": 3600}[u] for n, u in parts)


def go_duration(seconds):
    """time.Duration's String(): ``5s``, ``5m0s``, ``1h0m0s``."""
    seconds = int(seconds) if float(seconds).is_integer() else seconds
    if seconds < 60:
        return f"{seconds}s"
    h, rest = divmod(int(seconds), 3600)
    m, s = divmod(rest, 60)
    return (f"{h}h" if h else "") + f"{m}m{s}s"


def _node_names(api):
    return [r["object"]["metadata"]["name"] for r in sim_node_records(api)]


def live_entry(api, doc, name):
    """The node's entry in the live state, its taints starting as those it was created with (the profile's), so
    a cordon or a taint adds to them instead of hiding them."""
    entry = doc["nodes"].setdefault(name, {})
    if "taints" not in entry:
        static = next((r["static_taints"] for r in sim_node_records(api, doc)
                       if r["object"]["metadata"]["name"] == name), [])
        entry["taints"] = [dict(t) for t in static]
    return entry


def _node_args(api, positional, verb):
    if not positional:
        raise KubectlError(f"error: USAGE: {verb} NODE [flags]\nSee 'kubectl {verb} -h' for help and examples")
    names = [p.split("/", 1)[1] if p.startswith(("node/", "nodes/")) else p for p in positional]
    if positional[0] in ("node", "nodes", "no") and len(positional) > 1:
        names = positional[1:]
    known = _node_names(api)
    for name in names:
        if name not in known:
            raise KubectlError(f'Error from server (NotFound): nodes "{name}" not found')
    return names


def cmd_cordon(api, args, out, err, undo=False):
    positional, _ = parse_flags(args)
    live = _live()
    verb = "uncordon" if undo else "cordon"
    for name in _node_args(api, positional, verb):
        with live.lock(cluster_dir()):
            doc = live.load(cluster_dir())
            entry = live_entry(api, doc, name)
            changed = live.uncordon(entry) if undo else live.cordon(entry)
            if changed:
                live.next_version(doc)
                live.save(cluster_dir(), doc)
        if changed:
            live.record(cluster_dir(), name, "k8s_uncordoned" if undo else "k8s_cordoned", by="kubectl")
        out.write(f"node/{name} {'already ' if not changed else ''}{verb}ed\n")
    return 0


def cmd_uncordon(api, args, out, err):
    return cmd_cordon(api, args, out, err, undo=True)


def cmd_taint(api, args, out, err):
    positional, flags = parse_flags(args)
    if len(positional) < 3 or positional[0] not in ("node", "nodes", "no"):
        raise KubectlError("error: at least one taint update is required\nSee 'kubectl taint -h' for help and "
                           "examples")
    live = _live()
    name = _node_args(api, positional[1:2], "taint")[0]
    with live.lock(cluster_dir()):
        doc = live.load(cluster_dir())
        entry = live_entry(api, doc, name)
        removed = added = False
        for spec in positional[2:]:
            if spec.endswith("-"):
                key, _, effect = spec[:-1].partition(":")
                key = key.split("=", 1)[0]
                if not live.remove_taint(entry, key, effect or None):
                    raise KubectlError(f'error: taint "{spec[:-1]}" not found')
                removed = True
                continue
            taint = live.parse_taint(spec)
            if taint is None:
                raise KubectlError(f'error: invalid taint spec: {spec}, a valid taint spec is a string like '
                                   '"key=value:NoSchedule"')
            same = [t for t in entry.get("taints") or [] if t.get("key") == taint["key"]
                    and t.get("effect") == taint["effect"]]
            if same and not flags["overwrite"]:
                raise KubectlError(f"error: node {name} already has {taint['key']} taint(s) with same effect(s) "
                                   "and --overwrite is false")
            live.add_taint(entry, taint)
            added = True
        live.next_version(doc)
        live.save(cluster_dir(), doc)
    out.write(f"node/{name} {'modified' if added and removed else 'tainted' if added else 'untainted'}\n")
    return 0


# ----------------------------------------------------------------------------------------- pods

def _pod_key(namespace, name):
    return f"{namespace}/{name}"


def find_pod(doc, namespace, name):
    return next((p for p in doc.get("pods") or [] if p["metadata"]["name"] == name
                 and p["metadata"]["namespace"] == namespace), None)


def _qos(containers):
    resources = [c.get("resources") or {} for c in containers]
    cpu_mem = [{k: v for k, v in (r.get(kind) or {}).items() if k in ("cpu", "memory")}
               for r in resources for kind in ("requests", "limits")]
    if not any(cpu_mem):
        return "BestEffort"
    if all((r.get("limits") or {}).get(k) and (r.get("limits") or {}).get(k) == (r.get("requests") or {}).get(
            k, (r.get("limits") or {}).get(k)) for r in resources for k in ("cpu", "memory")):
        return "Guaranteed"
    return "Burstable"


def extended_resources(containers):
    """The extended resources (a domain-prefixed name outside kubernetes.io) the containers ask for, sorted."""
    # an extended resource's request equals its limit (the API server defaults one from the other)
    names = {name for c in containers for kind in ("requests", "limits")
             for name in ((c.get("resources") or {}).get(kind) or {})}
    return sorted(n for n in names if "/" in n and "kubernetes.io/" not in n and not n.startswith("requests."))


def pod_object(api, doc, manifest, namespace):
    """The Pod as the API server stores it: its defaults, the admission plugins' tolerations (DefaultTolerationSeconds
    and, when the API file enables it, ExtendedResourceToleration), Pending."""
    live = _live()
    meta = dict(manifest.get("metadata") or {})
    spec = json.loads(json.dumps(manifest.get("spec") or {}))
    containers = []
    for c in spec.get("containers") or []:
        c = dict(c)
        image = str(c.get("image") or "")
        tagged = ":" in image.rsplit("/", 1)[-1] or "@" in image
        c.setdefault("imagePullPolicy", "IfNotPresent" if tagged and not image.endswith(":latest") else "Always")
        resources = c.setdefault("resources", {})
        if resources.get("limits"):
            resources["requests"] = {**{k: v for k, v in resources["limits"].items()},
                                     **(resources.get("requests") or {})}
        c["resources"] = {k: {n: str(v) for n, v in q.items()} for k, q in resources.items() if q}
        c.setdefault("terminationMessagePath", "/dev/termination-log")
        c.setdefault("terminationMessagePolicy", "File")
        containers.append(c)
    spec["containers"] = containers
    for key, value in (("dnsPolicy", "ClusterFirst"), ("enableServiceLinks", True),
                       ("preemptionPolicy", "PreemptLowerPriority"), ("priority", 0), ("restartPolicy", "Always"),
                       ("schedulerName", "default-scheduler"), ("securityContext", {}),
                       ("serviceAccount", "default"), ("serviceAccountName", "default"),
                       ("terminationGracePeriodSeconds", 30)):
        spec.setdefault(key, value)
    tolerations = list(spec.get("tolerations") or [])
    for tol in DEFAULT_TOLERATIONS:
        if not any(t.get("key") == tol["key"] and t.get("effect") in (None, "", "NoExecute") for t in tolerations):
            tolerations.append(dict(tol))
    if "ExtendedResourceToleration" in (api.get("admission_plugins") or []):
        for name in extended_resources([*containers, *(spec.get("initContainers") or [])]):
            tol = {"effect": "NoSchedule", "key": name, "operator": "Exists"}
            if tol not in tolerations:
                tolerations.append(tol)
    spec["tolerations"] = tolerations
    # the profile's pod finalizers (k8s.pod_finalizers): nothing in the simulated cluster clears them
    finalizers = [*(meta.get("finalizers") or []),
                  *(f for f in api.get("pod_finalizers") or [] if f not in (meta.get("finalizers") or []))]
    if finalizers:
        meta["finalizers"] = finalizers
    meta.update(namespace=namespace, creationTimestamp=live.stamp(), uid=volumes.new_uid(namespace, meta["name"]),
                resourceVersion=live.next_version(doc))
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec,
            "status": {"phase": "Pending", "qosClass": _qos(containers)}}


def create_pods(api, docs, flags, out, verb):
    live = _live()
    known = _namespaces(api)
    res = resolve(api, "pods")
    errors = []
    with live.lock(cluster_dir()):
        doc = live.load(cluster_dir())
        for manifest in docs:
            if manifest.get("apiVersion") != "v1":
                pod_name = (manifest.get("metadata") or {}).get("name", "")
                raise KubectlError(f'error: resource mapping not found for name: "{pod_name}" '
                                   f'namespace: "" from "STDIN": no matches for kind "Pod" in version '
                                   f'"{manifest.get("apiVersion")}"\nensure CRDs are installed first')
            meta = manifest.get("metadata") or {}
            name = meta.get("name")
            if not name:
                raise KubectlError('The Pod "" is invalid: metadata.name: Required value: name or generateName is '
                                   'required')
            namespace = meta.get("namespace") or flags["namespace"] or "default"
            where = 'Error from server ({}): error when creating "STDIN": '
            if denied(api, "create", res):
                errors.append(where.format("Forbidden") + forbidden(api, "create", res, namespace).split(": ", 1)[1])
                continue
            if namespace not in known:
                errors.append(where.format("NotFound") + f'namespaces "{namespace}" not found')
                continue
            if find_pod(doc, namespace, name):
                if verb == "apply":
                    out.write(f"pod/{name} unchanged\n")
                    continue
                errors.append(where.format("AlreadyExists") + f'pods "{name}" already exists')
                continue
            containers = (manifest.get("spec") or {}).get("containers") or []
            if not containers:
                errors.append(f'The Pod "{name}" is invalid: spec.containers: Required value')
                continue
            doc["pods"].append(pod_object(api, doc, manifest, namespace))
            out.write(f"pod/{name} created\n")
        live.save(cluster_dir(), doc)
    if errors:
        raise KubectlError("\n".join(errors))
    return 0


def create_jobs(api, docs, flags, out, verb):
    """batch/v1 Jobs: stored with their defaults, and the Job controller's pods created at once (Pending, for
    the simulated default-scheduler to bind; docs/sim.md). A failed pod is not replaced."""
    live = _live()
    known = _namespaces(api)
    res = resolve(api, "jobs.batch")
    errors = []
    with live.lock(cluster_dir()):
        doc = live.load(cluster_dir())
        jobs = doc.setdefault("jobs", [])
        for manifest in docs:
            name = (manifest.get("metadata") or {}).get("name")
            if manifest.get("apiVersion") != "batch/v1":
                raise KubectlError(f'error: resource mapping not found for name: "{name or ""}" namespace: "" from '
                                   f'"STDIN": no matches for kind "Job" in version "{manifest.get("apiVersion")}"'
                                   "\nensure CRDs are installed first")
            if not name:
                raise KubectlError('The Job "" is invalid: metadata.name: Required value: name or generateName is '
                                   'required')
            namespace = manifest["metadata"].get("namespace") or flags["namespace"] or "default"
            where = 'Error from server ({}): error when creating "STDIN": '
            if res is not None and denied(api, "create", res):
                errors.append(where.format("Forbidden") + forbidden(api, "create", res, namespace).split(": ", 1)[1])
                continue
            if namespace not in known:
                errors.append(where.format("NotFound") + f'namespaces "{namespace}" not found')
                continue
            if any(j["metadata"]["name"] == name and j["metadata"]["namespace"] == namespace for j in jobs):
                if verb == "apply":
                    out.write(f"job.batch/{name} unchanged\n")
                    continue
                errors.append(where.format("AlreadyExists") + f'jobs.batch "{name}" already exists')
                continue
            template = ((manifest.get("spec") or {}).get("template") or {}).get("spec") or {}
            if not template.get("containers") or template.get("restartPolicy") not in ("Never", "OnFailure"):
                errors.append(f'The Job "{name}" is invalid: '
                              + ("spec.template.spec.containers: Required value" if not template.get("containers")
                                 else 'spec.template.spec.restartPolicy: Required value: valid values: "OnFailure", '
                                      '"Never"'))
                continue
            job, pods = live.job_object(doc, manifest, namespace)
            jobs.append(job)
            for pod in pods:
                doc["pods"].append(pod_object(api, doc, pod, namespace))
            out.write(f"job.batch/{name} created\n")
        live.save(cluster_dir(), doc)
    if errors:
        raise KubectlError("\n".join(errors))
    return 0


def delete_jobs(api, names, flags, out):
    """``delete job NAME...``: the Job goes at once, its pods after it (background cascade: the garbage
    collector deletes them, running ones terminate with their grace period)."""
    live = _live()
    namespace = flags["namespace"] or "default"
    if not names and not flags["selector"]:
        raise KubectlError("error: resource(s) were provided, but no name was specified")
    errors = []
    with live.lock(cluster_dir()):
        doc = live.load(cluster_dir())
        jobs = doc.setdefault("jobs", [])
        if flags["selector"]:
            labels = label_selector(flags["selector"])
            names = [j["metadata"]["name"] for j in jobs if j["metadata"]["namespace"] == namespace and labels(j)]
            if not names:
                out.write("No resources found\n")
        for name in names:
            job = next((j for j in jobs if j["metadata"]["name"] == name and j["metadata"]["namespace"] == namespace),
                       None)
            if job is None:
                if not flags["ignore_not_found"]:
                    errors.append(f'Error from server (NotFound): jobs.batch "{name}" not found')
                continue
            jobs.remove(job)
            uid = job["metadata"]["uid"]
            for pod in [p for p in doc["pods"] if (p["metadata"].get("labels") or {}).get("controller-uid") == uid]:
                request_deletion(doc, pod, None)
            out.write(f'job.batch "{name}" deleted\n')
        live.next_version(doc)
        live.save(cluster_dir(), doc)
    if errors:
        raise KubectlError("\n".join(errors))
    return 0


def _running(pod):
    return (pod.get("status") or {}).get("phase") == "Running"


def request_deletion(doc, pod, grace, force=False):
    """DELETE on a pod: gone at once when no container runs (Pending, finished) or forced with grace 0;
    otherwise terminating (deletionTimestamp) until the kubelet has stopped its containers."""
    live = _live()
    if grace is None or grace < 0:
        grace = int((pod.get("spec") or {}).get("terminationGracePeriodSeconds", 30))
    meta = pod["metadata"]
    # a pod with finalizers stays (Terminating) until they are cleared, forced or not, as the API server keeps it
    if (not _running(pod) or (force and grace == 0)) and not meta.get("finalizers"):
        doc["pods"].remove(pod)
        return True
    if "deletionTimestamp" not in meta:
        meta["deletionTimestamp"] = live.stamp(time.time() + grace)
        meta["deletionGracePeriodSeconds"] = grace
        meta["resourceVersion"] = live.next_version(doc)
    return False


def wait_gone(keys, timeout, on_gone=None):
    """Poll the live state until the pods (``namespace/name``) are gone; the ones still there at the end."""
    live = _live()
    deadline = time.monotonic() + (timeout if timeout > 0 else 7 * 24 * 3600)
    pending = list(keys)
    while pending:
        doc = live.load(cluster_dir())
        there = {_pod_key(p["metadata"]["namespace"], p["metadata"]["name"]) for p in doc.get("pods") or []}
        for key in [k for k in pending if k not in there]:
            pending.remove(key)
            if on_gone:
                on_gone(key)
        if not pending or time.monotonic() >= deadline:
            break
        time.sleep(WAIT_POLL_S)
    return pending


def _grace(flags):
    if flags["grace_period"] is None:
        return None
    try:
        return int(flags["grace_period"])
    except ValueError:
        raise KubectlError(f'error: invalid argument "{flags["grace_period"]}" for "--grace-period" flag: '
                           'strconv.ParseInt: parsing: invalid syntax') from None


def cmd_delete_pods(api, args, out, err):
    positional, flags = parse_flags(args)
    live = _live()
    names = []
    for p in positional:
        if p in ("pod", "pods", "po"):
            continue
        names.append(p.split("/", 1)[1] if "/" in p else p)
    namespace = flags["namespace"] or "default"
    grace = 1 if flags["now"] else _grace(flags)
    if flags["force"] and grace is None:
        grace = 0
    if flags["force"] and grace == 0:
        err.write("Warning: Immediate deletion does not wait for confirmation that the running resource has been "
                  "terminated. The resource may continue to run on the cluster indefinitely.\n")
    res = resolve(api, "pods")
    if denied(api, "delete", res) and names:
        message = forbidden(api, "delete", res, namespace)
        raise KubectlError(message.replace(" is forbidden:", f' "{names[0]}" is forbidden:', 1))
    errors, waiting = [], []
    with live.lock(cluster_dir()):
        doc = live.load(cluster_dir())
        if flags["selector"]:
            labels = label_selector(flags["selector"])
            names = [p["metadata"]["name"] for p in doc["pods"] if p["metadata"]["namespace"] == namespace
                     and labels(p)]
            if not names:
                out.write("No resources found\n")
        for name in names:
            pod = find_pod(doc, namespace, name)
            if pod is None:
                if not flags["ignore_not_found"]:
                    errors.append(f'Error from server (NotFound): pods "{name}" not found')
                continue
            if not request_deletion(doc, pod, grace, flags["force"]):
                waiting.append(_pod_key(namespace, name))
            out.write(f'pod "{name}" {"force " if flags["force"] and grace == 0 else ""}deleted\n')
        live.save(cluster_dir(), doc)
    out.flush()
    if waiting and flags["wait"]:
        left = wait_gone(waiting, _duration(flags["timeout"]))
        if left:
            errors.append("error: timed out waiting for the condition on pods/" + left[0].split("/", 1)[1])
    if errors:
        raise KubectlError("\n".join(errors))
    return 0


def cmd_logs(api, args, out, err):
    positional, flags = parse_flags(args)
    live = _live()
    if not positional:
        raise KubectlError("error: expected 'logs [-f] [-p] (POD | TYPE/NAME) [-c CONTAINER]'.\nPOD or TYPE/NAME is "
                           "a required argument for the logs command\nSee 'kubectl logs -h' for help and examples")
    name = positional[0].split("/", 1)[1] if positional[0].startswith(("pod/", "pods/", "po/")) else positional[0]
    namespace = flags["namespace"] or "default"
    doc = live.load(cluster_dir())
    pod = find_pod(doc, namespace, name)
    if pod is None:
        raise KubectlError(f'Error from server (NotFound): pods "{name}" not found')
    containers = [c["name"] for c in pod["spec"]["containers"]]
    container = flags["container"] or containers[0]
    if container not in containers:
        raise KubectlError(f'error: container {container} is not valid for pod {name}')
    run = (doc.get("runtime") or {}).get(_pod_key(namespace, name)) or {}
    if not pod["spec"].get("nodeName"):
        return 0  # no host assigned yet: the API server streams nothing
    if not run.get("log"):
        raise KubectlError(f'Error from server (BadRequest): container "{container}" in pod "{name}" is waiting to '
                           'start: ContainerCreating')
    try:
        with open(run["log"], errors="replace") as fh:
            text = fh.read()
    except OSError:
        text = ""
    if flags["tail"] not in (None, "-1"):
        lines = text.splitlines(keepends=True)
        text = "".join(lines[-int(flags["tail"]):]) if int(flags["tail"]) else ""
    out.write(text)
    return 0


# ----------------------------------------------------------------------------------------- drain

def daemonset_pods(api, record):
    """``namespace/name`` of the pods the DaemonSets of the API file run on this node (:func:`daemon_placement`)."""
    name = record["object"]["metadata"]["name"]
    pods = []
    for ds in (api.get("objects") or {}).get("daemonsets.apps") or []:
        if not daemon_placement(ds, record)[1]:
            continue
        digest = hashlib.sha256(f"{ds['metadata']['name']}/{name}".encode()).digest()
        suffix = "".join(DS_SUFFIX[b % len(DS_SUFFIX)] for b in digest[:5])
        pods.append(f"{ds['metadata'].get('namespace', 'default')}/{ds['metadata']['name']}-{suffix}")
    return pods


def drain_filters(pod, flags):
    """kubectl's pod filters (pkg/drain/filters.go) for one created pod: (delete, "Okay"|"Warning"|"Error",
    message), the last filter's verdict."""
    phase = (pod.get("status") or {}).get("phase")
    finished = phase in ("Succeeded", "Failed")
    owners = [o for o in (pod["metadata"].get("ownerReferences") or []) if o.get("controller")]
    status = (True, "Okay", "")
    if owners and owners[0].get("kind") == "DaemonSet" and not finished:
        return (False, "Warning", "ignoring DaemonSet-managed Pods") if flags["ignore_daemonsets"] else (
            False, "Error", "DaemonSet-managed Pods (use --ignore-daemonsets to ignore)")
    if any("emptyDir" in v for v in (pod["spec"].get("volumes") or [])) and not finished:
        if not flags["delete_emptydir_data"]:
            return False, "Error", "Pods with local storage (use --delete-emptydir-data to override)"
        status = (True, "Warning", "deleting Pods with local storage")
    if not finished and not owners:
        if not flags["force"]:
            return False, "Error", "cannot delete Pods that declare no controller (use --force to override)"
        status = (True, "Warning", "deleting Pods that declare no controller")
    return status


def cmd_drain(api, args, out, err):
    positional, flags = parse_flags(args)
    live = _live()
    timeout = _duration(flags["timeout"])
    grace = _grace(flags)
    records = {r["object"]["metadata"]["name"]: r for r in sim_node_records(api)}
    for name in _node_args(api, positional, "drain"):
        with live.lock(cluster_dir()):
            doc = live.load(cluster_dir())
            changed = live.cordon(live_entry(api, doc, name))
            if changed:
                live.next_version(doc)
                live.save(cluster_dir(), doc)
        if changed:
            live.record(cluster_dir(), name, "k8s_cordoned", by="kubectl")
        out.write(f"node/{name} {'' if changed else 'already '}cordoned\n")
        # every pod bound to the node, in the API's order (namespace, name), the DaemonSets' among them
        verdicts = [(key, (False, "Warning", "ignoring DaemonSet-managed Pods") if flags["ignore_daemonsets"] else
                     (False, "Error", "DaemonSet-managed Pods (use --ignore-daemonsets to ignore)"))
                    for key in daemonset_pods(api, records[name])]
        doc = live.load(cluster_dir())
        verdicts += [(_pod_key(p["metadata"]["namespace"], p["metadata"]["name"]), drain_filters(p, flags))
                     for p in doc.get("pods") or [] if p["spec"].get("nodeName") == name]
        verdicts.sort(key=lambda kv: kv[0])
        grouped = {}
        for key, (_, reason, message) in verdicts:
            if reason in ("Warning", "Error"):
                grouped.setdefault((reason, message), []).append(key)
        errors = [f"cannot delete {m}: {', '.join(keys)}" for (r, m), keys in grouped.items() if r == "Error"]
        if errors:
            agg = errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]"
            out.flush()
            err.write(f'error: unable to drain node "{name}" due to error: {agg}, continuing command...\n'
                      f"There are pending nodes to be drained:\n {name}\n")
            raise KubectlError("\n".join(errors))
        warnings = [f"{m}: {', '.join(keys)}" for (r, m), keys in grouped.items() if r == "Warning"]
        if warnings:
            out.flush()
            err.write("Warning: " + "; ".join(warnings) + "\n")
            err.flush()
        evict = [key for key, (delete, _, _) in verdicts if delete]
        waiting = []
        with live.lock(cluster_dir()):
            doc = live.load(cluster_dir())
            for key in evict:
                out.write(f"evicting pod {key}\n")
                pod = find_pod(doc, *key.split("/", 1))
                if pod is not None:
                    live.record(cluster_dir(), name, "pod_evicted", pod=key, by="kubectl")
                    if not request_deletion(doc, pod, grace):
                        waiting.append(key)
            live.save(cluster_dir(), doc)
        out.flush()
        for key in evict:
            if key not in waiting:
                out.write(f"pod/{key.split('/', 1)[1]} evicted\n")

        def gone(key):
            out.write(f"pod/{key.split('/', 1)[1]} evicted\n")
            out.flush()

        if wait_gone(waiting, timeout, gone):
            out.flush()
            err.write(f'error: unable to drain node "{name}" due to error: drain did not complete within '
                      f'{go_duration(timeout)}, continuing command...\nThere are pending nodes to be drained:\n'
                      f" {name}\n")
            raise KubectlError(f"error: drain did not complete within {go_duration(timeout)}")
        out.write(f"node/{name} drained\n")
    return 0


def cmd_version(api, args, out, err):
    _, flags = parse_flags(args)
    doc = {"clientVersion": CLIENT_VERSION, "kustomizeVersion": KUSTOMIZE_VERSION}
    if api is not None:
        doc["serverVersion"] = dict(CLIENT_VERSION, **(api.get("server_version") or {}))
    if flags["output"] == "json":
        out.write(go_json(doc, 2, False) + "\n")
    else:
        out.write("Client Version: {}\nKustomize Version: {}\n".format(CLIENT_VERSION["gitVersion"], KUSTOMIZE_VERSION))
        if api is not None:
            out.write("Server Version: {}\n".format(doc["serverVersion"]["gitVersion"]))
    if api is None:
        raise KubectlError(REFUSED)
    return 0


def cmd_api_resources(api, args, out, err):
    rows = [["NAME", "SHORTNAMES", "APIVERSION", "NAMESPACED", "KIND"]]
    for res in api.get("resources") or []:
        rows.append([res["name"], ",".join(res.get("shortnames") or []),
                     (res["group"] + "/" if res["group"] else "") + res["version"],
                     "true" if res["namespaced"] else "false", res["kind"]])
    out.write(tabwriter(rows))
    return 0


def cmd_auth(api, args, out, err):
    if not args or args[0] != "can-i":
        raise KubectlError('error: unknown command "%s" for "kubectl auth"' % (args[0] if args else ""))
    positional, flags = parse_flags(args[1:])
    if len(positional) < 2:
        raise KubectlError("error: you must specify two arguments: verb resource or a non-resource URL.\n"
                           "See 'kubectl auth can-i -h' for help and examples.")
    verb, arg = positional[0], positional[1]
    res = resolve(api, arg.split("/", 1)[0])
    if res is None:
        err.write("Warning: the server doesn't have a resource type '{}'\n\n".format(arg.split(".", 1)[0]))
        allowed = False
    else:
        if not res["namespaced"] and not flags["all_namespaces"]:
            group = " in group '{}'".format(res["group"]) if res["group"] else ""
            err.write("Warning: resource '{}' is not namespace scoped{}\n\n".format(res["name"], group))
        allowed = not denied(api, verb, res)
    out.write("yes\n" if allowed else "no\n")
    return 0 if allowed else 1


COMMANDS = {"get": cmd_get, "version": cmd_version, "api-resources": cmd_api_resources, "auth": cmd_auth,
            "create": cmd_create, "apply": cmd_apply, "delete": cmd_delete, "cordon": cmd_cordon,
            "uncordon": cmd_uncordon, "drain": cmd_drain, "taint": cmd_taint, "logs": cmd_logs}
MUTATING = ("create", "apply", "delete")


def main(argv, out=sys.stdout, err=sys.stderr, stdin=None):
    # client-side settings kubectl takes anywhere on the line; the simulated API answers at once
    args = [a for a in argv if not a.startswith(("--request-timeout=", "--kubeconfig=", "--context="))]
    if not args:
        out.write("kubectl controls the Kubernetes cluster manager.\n")
        return 0
    command = COMMANDS.get(args[0])
    try:
        if command is None:
            raise KubectlError(f'error: unknown command "{args[0]}" for "kubectl"')
        if args[0] == "delete" and len(args) > 1 and args[1].split("/", 1)[0] in ("pod", "pods", "po"):
            api = load_api()
            if api is None:
                raise KubectlError(REFUSED)
            return cmd_delete_pods(api, args[1:], out, err)
        if args[0] in MUTATING:
            if load_api() is None:
                raise KubectlError(REFUSED)
            after = [] if args[0] == "delete" else None
            with state_lock():  # read, change and write the claims as one step
                rc = command(load_api(), args[1:], out, err, stdin=stdin or sys.stdin,
                             **({"after": after} if after is not None else {}))
            out.flush()
            for step in after or []:  # waits for the controllers, which need the lock
                rc = step() or rc
            return rc
        api = load_api()
        if api is None and args[0] != "version":
            raise KubectlError(REFUSED)
        return command(api, args[1:], out, err)
    except KubectlError as exc:
        out.flush()
        err.write(str(exc) + "\n")
        return exc.code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
