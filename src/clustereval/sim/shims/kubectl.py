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

Without the API file it behaves like kubectl with no kubeconfig (connection to localhost:8080 refused).
"""

import glob
import json
import os
import sys

API_FILE = "/etc/clustereval-sim-k8s/api.json"
NODE_FILE = "overlay/etc/clustereval-sim-k8s/node.json"
CLIENT_VERSION = {"major": "1", "minor": "31", "gitVersion": "v1.31.4",
                  "gitCommit": "a78aa47129b8539636eb86a9d00e31b2720fe06b", "gitTreeState": "clean",
                  "buildDate": "2024-12-10T11:43:21Z", "goVersion": "go1.22.9", "compiler": "gc",
                  "platform": "linux/amd64"}
KUSTOMIZE_VERSION = "v5.4.2"
REFUSED = "The connection to the server localhost:8080 was refused - did you specify the right host or port?"


class KubectlError(Exception):
    """An error kubectl prints on stderr before exiting with ``code``."""

    def __init__(self, message, code=1):
        super().__init__(message)
        self.code = code


# ----------------------------------------------------------------------------------------- the API state

def load_api():
    path = os.environ.get("CLUSTEREVAL_SIM_K8S_API") or API_FILE
    try:
        with open(path) as fh:
            api = json.load(fh)
    except (OSError, ValueError):
        return None
    return api if isinstance(api, dict) and api.get("enabled", True) else None


def sim_node_records(api):
    """Node records (``{"object": Node, "not_ready": [workload names]}``) of the API file and of every
    node of the simulated cluster this shim was installed into."""
    records = list(api.get("nodes") or [])
    cluster_dir = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
    for path in sorted(glob.glob(os.path.join(cluster_dir, "nodes", "*", NODE_FILE))):
        try:
            with open(path) as fh:
                records.append(json.load(fh))
        except (OSError, ValueError):
            continue
    return records


def _node_selector_matches(selector, node):
    labels = (node.get("metadata") or {}).get("labels") or {}
    return all(labels.get(k) == v for k, v in (selector or {}).items())


def _node_ready(node):
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (node.get("status") or {}).get("conditions") or [])


def daemonset_status(api, ds, records):
    """A DaemonSet's status as the controller keeps it: one pod per node its nodeSelector matches,
    ready where the node is Ready and the node does not mark that workload as failing."""
    pod_spec = ((ds.get("spec") or {}).get("template") or {}).get("spec") or {}
    name = (ds.get("metadata") or {}).get("name")
    matched = [r for r in records if _node_selector_matches(pod_spec.get("nodeSelector"), r["object"])]
    failing = set(api.get("not_ready") or [])
    ready = [r for r in matched if _node_ready(r["object"]) and name not in failing
             and name not in (r.get("not_ready") or [])]
    desired = len(matched)
    return {"currentNumberScheduled": desired, "desiredNumberScheduled": desired,
            "numberAvailable": len(ready), "numberMisscheduled": 0, "numberReady": len(ready),
            "observedGeneration": 1, "updatedNumberScheduled": desired}


def objects_of(api, resource, records):
    key = resource["name"] + ("." + resource["group"] if resource["group"] else "")
    items = [r["object"] for r in records] if key == "nodes" else list((api.get("objects") or {}).get(key) or [])
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

def parse_flags(args):
    flags = {"all_namespaces": False, "namespace": None, "output": None, "field_selector": None}
    positional = []
    i = 0
    while i < len(args):
        a = args[i]
        nxt = args[i + 1] if i + 1 < len(args) else None
        if a in ("-A", "--all-namespaces", "--all-namespaces=true"):
            flags["all_namespaces"] = True
        elif a in ("-o", "--output", "-n", "--namespace", "--field-selector"):
            if nxt is None:
                raise KubectlError('error: flag needs an argument: %s' % (
                    f"'{a[1]}' in {a}" if len(a) == 2 else "--" + a.lstrip("-")))
            flags[{"-o": "output", "--output": "output", "-n": "namespace", "--namespace": "namespace",
                   "--field-selector": "field_selector"}[a]] = nxt
            i += 1
        elif a.startswith(("--output=", "--namespace=", "--field-selector=")):
            key, _, value = a[2:].partition("=")
            flags[key.replace("-", "_")] = value
        elif a.startswith("-o") and len(a) > 2:
            flags["output"] = a[2:].lstrip("=")
        elif a.startswith("-"):
            raise KubectlError("error: unknown flag: {}\nSee 'kubectl {} --help' for usage.".format(
                a.split("=")[0], positional[0] if positional else "get"))
        else:
            positional.append(a)
        i += 1
    return positional, flags


def cmd_get(api, args, out, err):
    positional, flags = parse_flags(args)
    if not positional:
        raise KubectlError("You must specify the type of resource to get. Use \"kubectl api-resources\" for a "
                           "complete list of supported resources.\n\nerror: Required resource not specified.\n"
                           "Use \"kubectl explain <resource>\" for a detailed description of that resource "
                           "(e.g. kubectl explain pods).\nSee 'kubectl get -h' for help and examples")
    if flags["output"] != "json":
        raise KubectlError("error: the simulated kubectl prints -o json only (asked: {})".format(flags["output"]))
    resources = []
    for arg in positional[0].split(","):
        res = resolve(api, arg)
        if res is None:
            raise unknown_type(arg)
        resources.append(res)
    names = positional[1:]
    selector = flags["field_selector"]
    if selector and not selector.startswith("metadata.name="):
        label = selector.split("=")[0]
        raise KubectlError(f'Error from server (BadRequest): Unable to find "/v1, Resource={resources[0]["name"]}" '
                           f'that match label selector "", field selector "{selector}": field label not supported: '
                           f'{label}')
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
            if selector and meta.get("name") != selector.split("=", 1)[1]:
                continue
            items.append(obj)
    if names and not items and not errors:
        raise KubectlError('Error from server (NotFound): {} "{}" not found'.format(
            resources[0]["name"] + ("." + resources[0]["group"] if resources[0]["group"] else ""), names[0]))
    if not errors or items:
        out.write(go_json({"apiVersion": "v1", "items": items, "kind": "List", "metadata": {"resourceVersion": ""}},
                          4, True) + "\n")
    if errors:
        raise KubectlError("\n".join(errors))
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


COMMANDS = {"get": cmd_get, "version": cmd_version, "api-resources": cmd_api_resources, "auth": cmd_auth}


def main(argv, out=sys.stdout, err=sys.stderr):
    args = [a for a in argv if a not in ("--request-timeout=10s",)]
    if not args:
        out.write("kubectl controls the Kubernetes cluster manager.\n")
        return 0
    command = COMMANDS.get(args[0])
    try:
        if command is None:
            raise KubectlError(f'error: unknown command "{args[0]}" for "kubectl"')
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
