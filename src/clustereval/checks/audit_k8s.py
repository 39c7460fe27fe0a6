"""Kubernetes audit checks: what the API says about access, schedulers, storage, GPUs and RDMA.

The cluster-scope checks read the ``k8s_*`` probes (``kubectl ... -o json``, kubectl 1.2x-1.3x,
collected once on the API host); a run without them is not a Kubernetes cluster and every check
skips. A kind whose CRD is absent ("the server doesn't have a resource type") counts as not
installed; a kind the evaluation account may not read ("forbidden") is a warn, because the tenant
cannot see it either; an API server that cannot be reached is a harness error.
"""

from __future__ import annotations

import json
import re
from functools import cache
from importlib import resources
from typing import Any

from clustereval import baselines, yamldata
from clustereval.checks import Context, HarnessError, ProbeFailed, Skip, Verdict, check
from clustereval.parsers import ParseError, parse
from clustereval.parsers.probe_k8s import can_i_answers, pvc_test

NOT_K8S = ("no Kubernetes API facts were collected: not a Kubernetes cluster (run with "
           "clustereval_harness=k8s and a kubeconfig on clustereval_k8s_api_host)")
_ABSENT_KIND = ("doesn't have a resource type", "the server could not find the requested resource")
_UNREACHABLE = ("connection to the server", "unable to connect to the server", "no configuration has been provided",
                "couldn't get current server api group list", "you must be logged in", "unauthorized",
                "i/o timeout", "no such host", "connection refused", "tls: ")
GPU_RESOURCE = "nvidia.com/gpu"
DEFAULT_CLASS = ("storageclass.kubernetes.io/is-default-class", "storageclass.beta.kubernetes.io/is-default-class")
DEFAULT_INGRESS = "ingressclass.kubernetes.io/is-default-class"
NAD_RESOURCE = "k8s.v1.cni.cncf.io/resourceName"


class Forbidden(Exception):
    """The evaluation account may not read a kind (RBAC)."""


@cache
def _data() -> dict[str, Any]:
    text = resources.files("clustereval.baselines").joinpath("k8s.yml").read_text(encoding="utf-8")
    return yamldata.load(text)


# ---------------------------------------------------------------- reading the probes

def _require_k8s(ctx: Context) -> None:
    if not any(name.startswith("k8s_") for name in ctx.probes):
        raise Skip(NOT_K8S)


def _failure_text(exc: ProbeFailed) -> str:
    return f"{exc.probe.get('stderr') or ''}\n{exc.probe.get('stdout') or ''}".lower()


def _parsed(ctx: Context, name: str) -> dict[str, Any] | None:
    """The parsed probe ``name``; None when its kind is not served (CRD absent)."""
    _require_k8s(ctx)
    try:
        data = ctx.parsed(name)
    except ProbeFailed as exc:
        text = _failure_text(exc)
        if any(marker in text for marker in _ABSENT_KIND):
            return None
        if "forbidden" in text:
            raise Forbidden(f"`{exc.probe.get('cmd')}`: {str(exc).split(': ', 1)[-1]}") from None
        if any(marker in text for marker in _UNREACHABLE):
            raise HarnessError(f"the Kubernetes API could not be reached from the API host: {exc}") from None
        raise
    if not data.get("complete", True):
        raise HarnessError(f"`{ctx.probes[name].get('cmd')}` output ended early (truncated JSON)")
    return data


def _items(ctx: Context, name: str, kind: str | None = None) -> list[dict[str, Any]] | None:
    data = _parsed(ctx, name)
    if data is None:
        return None
    return [i for i in data.get("items") or [] if kind is None or i.get("kind") == kind]


def _stream_items(ctx: Context, name: str) -> list[dict[str, Any]]:
    """Items of a probe that loops over several ``kubectl get`` calls (errors per call in stderr)."""
    _require_k8s(ctx)
    probe = ctx.probe(name)
    stderr = str(probe.get("stderr") or "").lower()
    if "forbidden" in stderr:
        raise Forbidden(f"`{probe.get('cmd')}`: {stderr.strip().splitlines()[-1][:300]}")
    if not str(probe.get("stdout") or "").strip():
        if any(marker in stderr for marker in _UNREACHABLE):
            raise HarnessError(f"the Kubernetes API could not be reached: {stderr.strip()[:300]}")
        return []
    return _parsed(ctx, name)["items"]


def _nodes(ctx: Context) -> list[dict[str, Any]]:
    nodes = _items(ctx, "k8s_nodes", "Node")
    if nodes is None:
        raise HarnessError("`kubectl get nodes` says the API serves no nodes resource")
    return nodes


def _quantity(value: Any) -> int:
    match = re.fullmatch(r"\s*(\d+)\s*", str(value or ""))
    return int(match.group(1)) if match else 0


def _is_gpu_node(node: dict[str, Any]) -> bool:
    status, labels = node.get("status") or {}, node.get("labels") or {}
    if any(_quantity((status.get(key) or {}).get(GPU_RESOURCE)) for key in ("capacity", "allocatable")):
        return True
    return (labels.get("nvidia.com/gpu.present") == "true"
            or labels.get("feature.node.kubernetes.io/pci-10de.present") == "true"
            or "nvidia.com/gpu.product" in labels or "cloud.google.com/gke-accelerator" in labels)


def _gpu_nodes(ctx: Context) -> list[dict[str, Any]]:
    return [node for node in _nodes(ctx) if _is_gpu_node(node)]


def _allocatable(node: dict[str, Any]) -> dict[str, Any]:
    return (node.get("status") or {}).get("allocatable") or {}


def _resources(ctx: Context) -> list[dict[str, Any]]:
    """``kubectl api-resources`` rows; the table is kept when an aggregated API fails (exit 1)."""
    _require_k8s(ctx)
    try:
        return ctx.parsed("k8s_api_resources").get("resources") or []
    except ProbeFailed as exc:
        stdout = str(exc.probe.get("stdout") or "")
        if "NAMESPACED" in stdout:
            try:
                return parse("kubectl-api-resources", stdout).get("resources") or []
            except ParseError:
                pass
        if any(marker in _failure_text(exc) for marker in _UNREACHABLE):
            raise HarnessError(f"the Kubernetes API could not be reached from the API host: {exc}") from None
        raise


def _served(ctx: Context, name: str, group: str) -> bool:
    return any(r["name"] == name and r["group"] == group for r in _resources(ctx))


def _image_version(image: str) -> str | None:
    tail = image.rsplit("/", 1)[-1]
    if "@" in tail or ":" not in tail:
        return None
    tag = tail.split(":", 1)[1]
    return tag if baselines.version_key(tag) else None


def _workloads(ctx: Context) -> list[dict[str, Any]]:
    """Deployments, DaemonSets and StatefulSets with their containers, readiness and component names."""
    out = []
    patterns = _data()["components"]
    for item in _items(ctx, "k8s_workloads") or []:
        spec, status = item.get("spec") or {}, item.get("status") or {}
        pod = (spec.get("template") or {}).get("spec") or {}
        containers = [c for c in (pod.get("containers") or []) + (pod.get("initContainers") or [])
                      if isinstance(c, dict)]
        images = [str(c.get("image") or "") for c in containers]
        if item["kind"] == "DaemonSet":
            desired, ready = status.get("desiredNumberScheduled") or 0, status.get("numberReady") or 0
        else:
            desired = spec.get("replicas", 1) if spec.get("replicas") is not None else 1
            ready = status.get("readyReplicas") or 0
        env = {str(e.get("name")): e.get("value") for c in containers for e in c.get("env") or []
               if isinstance(e, dict)}
        args = [str(a) for c in containers for a in (c.get("command") or []) + (c.get("args") or [])]
        mounts = [str((v.get("hostPath") or {}).get("path")) for v in pod.get("volumes") or []
                  if isinstance(v, dict) and v.get("hostPath")]
        haystack = [item["name"] or "", item["labels"].get("app.kubernetes.io/name", "")]
        components = [comp for comp, pat in patterns.items()
                      if any(p in h for p in pat.get("names", []) for h in haystack if h)
                      or any(p in img.rsplit(":", 1)[0] for p in pat.get("images", []) for img in images)]
        out.append({"kind": item["kind"], "namespace": item["namespace"], "name": item["name"],
                    "images": images, "desired": int(desired), "ready": int(ready), "env": env, "args": args,
                    "host_paths": mounts, "components": components,
                    "version": next((v for v in map(_image_version, images) if v), None)
                    or item["labels"].get("app.kubernetes.io/version")})
    return out


def _component(workloads: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [w for w in workloads if name in w["components"]]


def _healthy(parts: list[dict[str, Any]]) -> bool:
    return bool(parts) and all(w["desired"] > 0 and w["ready"] >= w["desired"] for w in parts)


def _describe(parts: list[dict[str, Any]]) -> str:
    return ", ".join(f"{w['kind'].lower()} {w['namespace']}/{w['name']} {w['ready']}/{w['desired']} ready"
                     for w in parts)


def k8s_check(check_id: str):
    """Register a Kubernetes check whose forbidden reads become a warn naming what could not be read."""

    def deco(fn):
        def wrapped(ctx: Context) -> Verdict:
            try:
                return fn(ctx)
            except Forbidden as exc:
                return Verdict("warn", f"the evaluation account may not read what this check needs, so the "
                                       f"tenant cannot see it either: {exc}"[:600], evidence={"forbidden": str(exc)})
        wrapped.__doc__ = fn.__doc__
        wrapped.__name__ = fn.__name__
        return check(check_id)(wrapped)

    return deco


# ---------------------------------------------------------------- access

CAN_I_REQUIRED = ("create pods", "create jobs.batch")
CAN_I_WANTED = ("list nodes", "list pods --all-namespaces", "create persistentvolumeclaims", "create services")


@k8s_check("audit.k8s.rbac_access")
def rbac_access(ctx: Context) -> Verdict:
    _require_k8s(ctx)
    answers = ctx.parsed("k8s_can_i")["answers"]
    unanswered = [q for q in CAN_I_REQUIRED + CAN_I_WANTED if (answers.get(q) or {}).get("allowed") is None]
    messages = [m for q in unanswered for m in (answers.get(q) or {}).get("messages", [])]
    if unanswered and any(marker in " ".join(messages).lower() for marker in _UNREACHABLE):
        raise HarnessError(f"`kubectl auth can-i` could not reach the API: {'; '.join(messages)[:300]}")
    if len(unanswered) == len(CAN_I_REQUIRED + CAN_I_WANTED):
        raise HarnessError(f"`kubectl auth can-i` gave no yes/no answer: {'; '.join(messages)[:300] or 'no output'}")
    evidence = {q: a for q, a in answers.items()}
    denied_required = [q for q in CAN_I_REQUIRED if (answers.get(q) or {}).get("allowed") is False]
    denied_wanted = [q for q in CAN_I_WANTED if (answers.get(q) or {}).get("allowed") is False]
    denied = denied_required + denied_wanted
    if denied_required:
        return Verdict("fail", f"the account may not {', '.join(denied_required)}: it cannot run workloads"
                       + (f" (also denied: {', '.join(denied_wanted)})" if denied_wanted else ""),
                       len(denied), evidence=evidence)
    if denied_wanted or unanswered:
        parts = [f"denied: {', '.join(denied_wanted)}"] if denied_wanted else []
        parts += [f"no answer for: {', '.join(unanswered)}"] if unanswered else []
        return Verdict("warn", f"the account may create pods and jobs but {'; '.join(parts)}", len(denied),
                       evidence=evidence)
    return Verdict("pass", "the account may list nodes and pods and create pods, jobs, PVCs and services",
                   0, evidence=evidence)


@k8s_check("audit.k8s.helm_access")
def helm_access(ctx: Context) -> Verdict:
    _require_k8s(ctx)
    # Whatever the can-i loop answered, even when it failed: Helm's needs are judged from what is known.
    answers = can_i_answers(str((ctx.probes.get("k8s_can_i") or {}).get("stdout") or ""))
    needs = ("create secrets", "list secrets", "create deployments.apps")
    denied = [q for q in needs if (answers.get(q) or {}).get("allowed") is False]
    evidence: dict[str, Any] = {"can_i": {q: answers.get(q) for q in needs}}
    try:
        probe = ctx.probe("k8s_helm")
    except Skip:
        if denied:
            return Verdict("fail", f"Helm cannot install charts: the account may not {', '.join(denied)} "
                                   f"(helm is not installed on the API host either)", evidence=evidence)
        raise Skip("`helm` is not installed on the API host; RBAC allows what Helm needs") from None
    except ProbeFailed as exc:
        text = _failure_text(exc)
        if "forbidden" in text:
            return Verdict("fail", f"`helm list` is forbidden: {str(exc)[:300]}", evidence=evidence)
        if any(marker in text for marker in _UNREACHABLE):
            raise HarnessError(f"helm could not reach the cluster: {exc}") from None
        raise
    try:
        helm = parse("probe-k8s-helm", str(probe.get("stdout") or ""))
    except ParseError as exc:
        raise HarnessError(str(exc)) from None
    version, releases = helm["version"], helm["releases"]
    evidence.update(helm_version=version, releases_seen=len(releases))
    if denied:
        return Verdict("fail", f"helm {version} lists releases, but the account may not {', '.join(denied)}, "
                               "which installing a chart needs", version, evidence=evidence)
    if not version.lstrip("v").startswith(("3", "4")):
        return Verdict("warn", f"helm {version} is not Helm 3 or later (Helm 2 needs Tiller)", version,
                       evidence=evidence)
    return Verdict("pass", f"helm {version} lists releases across namespaces and RBAC allows installing charts",
                   version, evidence=evidence)


@k8s_check("audit.k8s.vcluster_tenancy")
def vcluster_tenancy(ctx: Context) -> Verdict:
    nodes = _nodes(ctx)
    if not nodes:
        raise Skip("the API lists no nodes")
    tenants: dict[str, set[str]] = {}
    fake, marked = [], []
    for node in nodes:
        meta = {**node["labels"], **node["annotations"]}
        keys = [k for k in meta if k.startswith("vcluster.loft.sh/") or k.endswith("vcluster-tenant-name")]
        if not keys:
            continue
        marked.append(node["name"])
        if meta.get("vcluster.loft.sh/fake-node") == "true":
            fake.append(node["name"])
        for key in keys:
            if key.endswith("vcluster-tenant-name") or key == "vcluster.loft.sh/managed-by":
                tenants.setdefault(node["name"], set()).add(meta[key])
    names = sorted({t for values in tenants.values() for t in values})
    evidence = {"nodes": len(nodes), "vcluster_nodes": marked, "fake_nodes": fake, "tenants": names}
    if not marked:
        return Verdict("pass", f"no vCluster markers on the {len(nodes)} nodes: a dedicated cluster",
                       "dedicated", evidence=evidence)
    shared = sorted(n for n, values in tenants.items() if len(values) > 1)
    if shared or len(names) > 1:
        where = f" (nodes {', '.join(shared)})" if shared else ""
        return Verdict("fail", f"nodes are shared between vCluster tenants {', '.join(names)}{where}: "
                               "no hardware isolation between tenants", "vcluster-shared", evidence=evidence)
    if fake:
        return Verdict("warn", f"vCluster with {len(fake)} fake (synced) node(s): real node labels (GPU, NIC, "
                               "topology) are hidden from the tenant's schedulers", "vcluster", evidence=evidence)
    return Verdict("pass", f"vCluster tenant{' ' + names[0] if names else ''} on {len(marked)} real node(s)",
                   "vcluster", evidence=evidence)


# ---------------------------------------------------------------- topology and scheduling

def _is_topology_label(key: str) -> bool:
    return any(key.startswith(p) for p in _data()["topology_labels"])


def _topology_labels(nodes: list[dict[str, Any]]) -> dict[str, int]:
    found: dict[str, int] = {}
    for node in nodes:
        for key in node["labels"]:
            if _is_topology_label(key):
                found[key] = found.get(key, 0) + 1
    return found


def switch_groups(ctx: Context) -> dict[str, dict[str, str]]:
    """Per GPU node, the topology labels that name a group of nodes behind shared switches.

    These are the ``topology_labels`` (rack, leaf, block, spine, network layer) less those naming one
    host or an NVLink domain (``topology_labels_not_switch``): two nodes whose values differ for one of
    them talk through a switch tier above that group. Raises as the other readers do: Skip without
    Kubernetes facts, HarnessError when the API could not be reached, Forbidden when nodes may not be read.
    """
    excluded = tuple(_data().get("topology_labels_not_switch") or ())
    return {node["name"]: {k: str(v) for k, v in node["labels"].items()
                           if _is_topology_label(k) and not k.startswith(excluded)}
            for node in _gpu_nodes(ctx)}


def _hypernode_node_members(hypernode: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in (hypernode.get("spec") or {}).get("members") or []
            if isinstance(m, dict) and m.get("type") == "Node"]


def _selector_matches(selector: dict[str, Any], node: dict[str, Any]) -> bool:
    exact = (selector.get("exactMatch") or {}).get("name")
    if exact:
        return node["name"] == exact
    pattern = (selector.get("regexMatch") or {}).get("pattern")
    if pattern:
        try:
            return re.search(pattern, node["name"] or "") is not None
        except re.error:
            return False
    labels = (selector.get("labelMatch") or {}).get("matchLabels")
    if labels:
        return all(node["labels"].get(k) == v for k, v in labels.items())
    return False


@k8s_check("audit.k8s.topology")
def topology(ctx: Context) -> Verdict:
    gpu_nodes = _gpu_nodes(ctx)
    if len(gpu_nodes) < 2:
        raise Skip(f"{len(gpu_nodes)} GPU node(s): network topology matters from two nodes up")
    labels = _topology_labels(gpu_nodes)
    topologies = _items(ctx, "k8s_kueue_topologies") or []
    flavors = _items(ctx, "k8s_kueue_flavors") or []
    hypernodes = _items(ctx, "k8s_volcano_hypernodes") or []
    evidence: dict[str, Any] = {"gpu_nodes": len(gpu_nodes), "topology_labels": labels,
                                "kueue_topologies": [t["name"] for t in topologies],
                                "volcano_hypernodes": len(hypernodes)}
    problems, warnings, consumers = [], [], []
    used_topologies = {(f.get("spec") or {}).get("topologyName") for f in flavors}
    for topo in topologies:
        levels = [str(level.get("nodeLabel")) for level in (topo.get("spec") or {}).get("levels") or []
                  if isinstance(level, dict)]
        missing = [lab for lab in levels if not any(lab in n["labels"] for n in gpu_nodes)]
        if missing:
            problems.append(f"Kueue Topology {topo['name']} uses label(s) {', '.join(missing)} that no GPU node "
                            "carries, so topology-constrained workloads cannot be placed")
        elif topo["name"] not in used_topologies:
            warnings.append(f"Kueue Topology {topo['name']} is not referenced by any ResourceFlavor "
                            "(spec.topologyName), so Kueue never uses it")
        else:
            consumers.append(f"Kueue Topology {topo['name']} ({' > '.join(levels)})")
    if hypernodes:
        matched = {n["name"] for h in hypernodes for m in _hypernode_node_members(h) for n in gpu_nodes
                   if _selector_matches(m.get("selector") or {}, n)}
        uncovered = sorted(n["name"] for n in gpu_nodes if n["name"] not in matched)
        leafless = [h["name"] for h in hypernodes if _hypernode_node_members(h)
                    and not any(_selector_matches(m.get("selector") or {}, n)
                                for m in _hypernode_node_members(h) for n in gpu_nodes)]
        evidence.update(hypernode_uncovered_gpu_nodes=uncovered, hypernodes_matching_no_node=leafless)
        if not matched:
            problems.append(f"{len(hypernodes)} Volcano HyperNode(s) but their Node members match no GPU node")
        else:
            consumers.append(f"{len(hypernodes)} Volcano HyperNodes covering {len(matched)}/{len(gpu_nodes)} "
                             "GPU nodes")
            if uncovered:
                warnings.append(f"GPU nodes outside every HyperNode: {', '.join(uncovered[:10])}")
            if leafless:
                warnings.append(f"HyperNodes whose members match no node: {', '.join(leafless[:10])}")
    if problems:
        return Verdict("fail", "; ".join(problems), evidence=evidence)
    if not consumers:
        if labels:
            return Verdict("warn", f"nodes carry topology labels ({', '.join(sorted(labels)[:4])}) but no Kueue "
                                   "Topology or Volcano HyperNode uses them: the scheduler places multi-node "
                                   "jobs blind to the fabric", evidence=evidence)
        return Verdict("warn", "no topology is described to the scheduler (no rack/block labels, no Kueue "
                               "Topology, no Volcano HyperNode)", evidence=evidence)
    if warnings:
        return Verdict("warn", f"{'; '.join(consumers)}, but {'; '.join(warnings)}", evidence=evidence)
    return Verdict("pass", f"topology-aware placement: {'; '.join(consumers)}", evidence=evidence)


SCHEDULERS = ("kueue", "volcano", "kai-scheduler", "yunikorn", "scheduler-plugins")
GANG_CRDS = {"volcano": ("podgroups", "scheduling.volcano.sh"), "kai-scheduler": ("podgroups", "scheduling.run.ai"),
             "scheduler-plugins": ("podgroups", "scheduling.x-k8s.io"),
             "kueue": ("workloads", "kueue.x-k8s.io")}


def _config_text(configmaps: list[dict[str, Any]], name: str) -> str:
    return "\n".join(str(v) for cm in configmaps if cm.get("name") == name for v in (cm.get("data") or {}).values())


@k8s_check("audit.k8s.gang_scheduling")
def gang_scheduling(ctx: Context) -> Verdict:
    if not _gpu_nodes(ctx):
        raise Skip("no GPU nodes in the cluster")
    workloads = _workloads(ctx)
    configmaps = _stream_items(ctx, "k8s_configmaps") if "k8s_configmaps" in ctx.probes else []
    found, broken, notes = [], [], []
    for name, (resource, group) in GANG_CRDS.items():
        parts = _component(workloads, name)
        served = _served(ctx, resource, group)
        if not served and not parts:
            continue
        if name == "kueue":
            # Kueue gangs only with waitForPodsReady (all-or-nothing admission) enabled.
            config = _config_text(configmaps, "kueue-manager-config")
            if parts and not re.search(r"waitForPodsReady:\s*\n\s+enable:\s*true", config):
                notes.append("Kueue runs without waitForPodsReady (no all-or-nothing admission)")
                continue
        if not _healthy(parts):
            broken.append(f"{name}: {'CRD ' + resource + '.' + group + ' served but ' if served else ''}"
                          f"{_describe(parts) or 'no scheduler workload found'}")
        else:
            found.append(f"{name} ({_describe(parts)})")
    evidence = {"ready": found, "not_ready": broken, "notes": notes}
    if broken:
        return Verdict("fail", f"gang scheduler installed but not ready: {'; '.join(broken)}", evidence=evidence)
    if found:
        return Verdict("pass", f"gang scheduling by {'; '.join(found)}", evidence=evidence)
    return Verdict("warn", "no gang scheduler: multi-pod jobs are placed pod by pod and can deadlock"
                   + (f" ({'; '.join(notes)})" if notes else ""), evidence=evidence)


@k8s_check("audit.k8s.bin_packing")
def bin_packing(ctx: Context) -> Verdict:
    if not _gpu_nodes(ctx):
        raise Skip("no GPU nodes in the cluster")
    workloads = _workloads(ctx)
    configmaps = _stream_items(ctx, "k8s_configmaps") if "k8s_configmaps" in ctx.probes else []
    found, broken = [], []
    volcano = _config_text(configmaps, "volcano-scheduler-configmap")
    if re.search(r"name:\s*binpack\b", volcano):
        (found if _healthy(_component(workloads, "volcano")) else broken).append("Volcano binpack plugin")
    secondary = _config_text(configmaps, "scheduler-config")
    if re.search(r"\b(MostAllocated|RequestedToCapacityRatio)\b", secondary):
        (found if _healthy(_component(workloads, "scheduler-plugins")) else broken).append(
            "a scheduler profile scoring MostAllocated/RequestedToCapacityRatio")
    if _component(workloads, "kai-scheduler"):
        # KAI's default placement strategy for GPUs is bin-pack.
        (found if _healthy(_component(workloads, "kai-scheduler")) else broken).append("KAI scheduler (binpack)")
    evidence = {"bin_packing": found, "not_ready": broken}
    if broken:
        return Verdict("fail", f"bin-packing configured but its scheduler is not ready: {', '.join(broken)}",
                       evidence=evidence)
    if found:
        return Verdict("pass", f"GPU pods are bin-packed by {', '.join(found)}", evidence=evidence)
    return Verdict("warn", "no bin-packing scheduler configuration is visible: the default scheduler spreads "
                           "pods (LeastAllocated) and fragments whole GPU nodes (a managed control plane's "
                           "own scheduler profile cannot be read from the API)", evidence=evidence)


# ---------------------------------------------------------------- services and storage

@k8s_check("audit.k8s.ingress_controller")
def ingress_controller(ctx: Context) -> Verdict:
    items = _items(ctx, "k8s_services") or []
    classes = [i for i in items if i["kind"] == "IngressClass"]
    gateways = (_items(ctx, "k8s_gatewayclasses") or []) if "k8s_gatewayclasses" in ctx.probes else []
    workloads = _workloads(ctx)
    mapping = _data()["ingress_controllers"]
    ready, down = [], []
    for cls in classes:
        controller = str((cls.get("spec") or {}).get("controller") or "")
        parts = [w for comp in mapping.get(controller, []) for w in _component(workloads, comp)]
        if not parts and controller not in mapping:
            ready.append(f"{cls['name']} ({controller}, controller not recognised)")
        elif _healthy(parts):
            ready.append(f"{cls['name']} ({_describe(parts)})")
        else:
            down.append(f"IngressClass {cls['name']} ({controller}): {_describe(parts) or 'no controller workload'}")
    accepted = [g["name"] for g in gateways
                if any(c.get("type") == "Accepted" and c.get("status") == "True"
                       for c in (g.get("status") or {}).get("conditions") or [])]
    defaults = [c["name"] for c in classes if c["annotations"].get(DEFAULT_INGRESS) == "true"]
    evidence = {"ingress_classes": [c["name"] for c in classes], "default_classes": defaults,
                "ready": ready, "not_ready": down, "gateway_classes_accepted": accepted}
    if down and not ready and not accepted:
        return Verdict("fail", f"ingress controller not ready: {'; '.join(down)}", evidence=evidence)
    if not classes and not accepted:
        return Verdict("warn", "no IngressClass and no accepted Gateway API GatewayClass: HTTP endpoints need "
                               "hand-made exposure", evidence=evidence)
    if down:
        return Verdict("warn", f"some ingress controllers are not ready: {'; '.join(down)}", evidence=evidence)
    if classes and not defaults:
        return Verdict("warn", f"IngressClass(es) {', '.join(c['name'] for c in classes)} but none is the default: "
                               "Ingresses without ingressClassName are ignored", evidence=evidence)
    what = [f"IngressClass {', '.join(ready)}"] if ready else []
    what += [f"GatewayClass {', '.join(accepted)}"] if accepted else []
    return Verdict("pass", f"ingress served by {'; '.join(what)}", evidence=evidence)


@k8s_check("audit.k8s.load_balancer")
def load_balancer(ctx: Context) -> Verdict:
    services = _items(ctx, "k8s_services", "Service")
    if services is None:
        raise HarnessError("`kubectl get services` says the API serves no services resource")
    lbs = [s for s in services if (s.get("spec") or {}).get("type") == "LoadBalancer"]
    served = [s for s in lbs if ((s.get("status") or {}).get("loadBalancer") or {}).get("ingress")]
    pending = [f"{s['namespace']}/{s['name']}" for s in lbs if s not in served]
    workloads = _workloads(ctx)
    pools = (_items(ctx, "k8s_metallb_pools") or []) if "k8s_metallb_pools" in ctx.probes else []
    implementations = [c for c in ("metallb", "kube-vip") if _component(workloads, c)]
    providers = sorted({str((n.get("spec") or {}).get("providerID") or "").split(":", 1)[0]
                        for n in _nodes(ctx)} - {""})
    evidence = {"loadbalancer_services": len(lbs), "with_address": len(served), "pending": pending,
                "implementations": implementations, "metallb_pools": [p["name"] for p in pools],
                "node_providers": providers}
    if pending and not served:
        return Verdict("fail", f"{len(pending)} LoadBalancer service(s) never got an address: "
                               f"{', '.join(pending[:8])}", len(served), evidence=evidence)
    if pending:
        return Verdict("warn", f"{len(served)} LoadBalancer service(s) have addresses but {len(pending)} are "
                               f"pending: {', '.join(pending[:8])}", len(served), evidence=evidence)
    if served:
        return Verdict("pass", f"{len(served)} LoadBalancer service(s) have external addresses", len(served),
                       evidence=evidence)
    if "metallb" in implementations and pools:
        return Verdict("pass", f"MetalLB with address pool(s) {', '.join(p['name'] for p in pools)}", 0,
                       evidence=evidence)
    if implementations:
        return Verdict("warn", f"{', '.join(implementations)} installed but no LoadBalancer service shows it "
                               "hands out addresses" + (" (MetalLB has no IPAddressPool)" if "metallb" in
                                                        implementations else ""), 0, evidence=evidence)
    return Verdict("warn", "no LoadBalancer service and no load-balancer implementation visible"
                   + (f" (nodes run on {', '.join(providers)}, whose cloud LB cannot be proven without a "
                      "service)" if providers else ": LoadBalancer services would stay Pending"), 0, evidence=evidence)


@k8s_check("audit.k8s.default_storage_class")
def default_storage_class(ctx: Context) -> Verdict:
    items = _items(ctx, "k8s_storage")
    if items is None:
        raise HarnessError("`kubectl get storageclasses` says the API serves no storage classes")
    classes = [i for i in items if i["kind"] == "StorageClass"]
    defaults = [c for c in classes if any(c["annotations"].get(k) == "true" for k in DEFAULT_CLASS)]
    evidence = {"storage_classes": {c["name"]: _raw_field(c, "provisioner") for c in classes},
                "defaults": [c["name"] for c in defaults]}
    pending = [f"{p['namespace']}/{p['name']}" for p in items if p["kind"] == "PersistentVolumeClaim"
               and not _is_test_pvc(p)
               and not (p.get("spec") or {}).get("storageClassName") and (p.get("status") or {}).get("phase")
               == "Pending"]
    evidence["pending_pvcs_without_class"] = pending
    if not classes:
        return Verdict("fail", "no StorageClass at all: PVCs cannot be provisioned", 0, evidence=evidence)
    if not defaults:
        return Verdict("fail", f"{len(classes)} StorageClass(es) ({', '.join(c['name'] for c in classes)}) but none "
                               "is the default: PVCs without storageClassName stay Pending"
                       + (f" ({len(pending)} are)" if pending else ""), 0, evidence=evidence)
    if len(defaults) > 1:
        return Verdict("warn", f"{len(defaults)} default StorageClasses ({', '.join(c['name'] for c in defaults)}): "
                               "which one a PVC gets depends on the API server version", len(defaults),
                       evidence=evidence)
    cls = defaults[0]
    provisioner = _raw_field(cls, "provisioner")
    if provisioner == "kubernetes.io/no-provisioner":
        return Verdict("warn", f"default StorageClass {cls['name']} has no provisioner: every PV must be "
                               "created by hand", 1, evidence=evidence)
    return Verdict("pass", f"default StorageClass {cls['name']} ({provisioner})", 1, evidence=evidence)


def _raw_field(item: dict[str, Any], field: str) -> Any:
    """A top-level field of an object without spec (StorageClass ``provisioner``)."""
    return (item.get("fields") or {}).get(field)


# ---------------------------------------------------------------- the storage provisioning test (acts)

PVC_PROBE = "k8s_pvc_test"
TEST_PVC_LABELS = {"app.kubernetes.io/managed-by": "clustereval", "clustereval/test": "pvc-provisioning"}
TEST_PVC_SWEEP = ("kubectl delete pvc -l app.kubernetes.io/managed-by=clustereval,clustereval/test=pvc-provisioning"
                  " (in the audit's namespace)")
_PVC_FAILED = ("ProvisioningFailed", "FailedBinding", "ClaimLost")
_RANK = {"pass": 0, "warn": 1, "fail": 2}


def _is_test_pvc(item: dict[str, Any]) -> bool:
    """A claim of clustereval's own provisioning test (this run's, listed while it ran, or a leftover)."""
    labels = item.get("labels") or {}
    return all(labels.get(k) == v for k, v in TEST_PVC_LABELS.items())


def _one(facts: dict[str, list[str]], key: str) -> str:
    return (facts.get(key) or [""])[0]


def _pvc_events(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The claim's last eight events as evidence (messages on one line, cut to 400 characters)."""
    return [{**e, "message": " ".join(str(e.get("message") or "").split())[:400]} for e in events][-8:]


def provisioning_test(ctx: Context, known: list[str]) -> dict[str, Any]:
    """What the storage provisioning test (probe ``k8s_pvc_test``) found, as ``outcome`` plus evidence.

    ``outcome``: ``not_tried`` (actions disabled, no class to try, probe not collected), ``bound``,
    ``wait_for_consumer`` (a WaitForFirstConsumer class: never binds without a pod), ``failed``
    (ProvisioningFailed / FailedBinding event, or Lost), ``pending`` (not bound within the wait, no failure
    reported), ``refused`` (the API rejected the claim: RBAC, quota, admission). HarnessError when the test
    could not run or report (API unreachable, namespace missing, killed at its timeout, output cut short).
    """
    probe = ctx.probes.get(PVC_PROBE)
    if probe is None:
        return {"outcome": "not_tried", "why": "the provisioning test was not collected", "tried": False}
    # Read before the exit status is looked at: a test killed at its timeout still names its claim.
    read = pvc_test(str(probe.get("stdout") or ""))
    facts = read["values"]
    name = _one(facts, "name")
    leftover = (f": its test PVC {name} may remain until the next audit's sweep (10 minutes on) or "
                f"`{TEST_PVC_SWEEP}` removes it" if name and "delete_rc" not in facts else "")
    if probe.get("timed_out"):
        if PVC_PROBE not in ctx.used:
            ctx.used.append(PVC_PROBE)
        raise HarnessError(f"the storage provisioning test ran past its {probe.get('timeout')} s timeout and was "
                           f"killed{leftover}")
    try:
        ctx.probe(PVC_PROBE)
    except ProbeFailed as exc:
        raise HarnessError(f"the storage provisioning test script failed: {exc}") from None
    if "end" not in facts:
        raise HarnessError(f"the storage provisioning test's output is cut short (no final end=ok line){leftover}")
    if "skipped" in facts:
        why = _one(facts, "skipped")
        if "actions are switched off" in why:
            why = "actions disabled: clustereval_audit_allow_actions=false"
        return {"outcome": "not_tried", "why": why, "tried": False, "leftovers_deleted": _one(facts, "leftovers")}
    pvc = read["pvc"]
    meta, spec = (pvc or {}).get("metadata") or {}, (pvc or {}).get("spec") or {}
    annotations = meta.get("annotations") or {}
    provisioner = (_one(facts, "class_provisioner") or annotations.get("volume.kubernetes.io/storage-provisioner")
                   or annotations.get("volume.beta.kubernetes.io/storage-provisioner") or "")
    test: dict[str, Any] = {
        "tried": True, "name": name, "namespace": meta.get("namespace") or _one(facts, "namespace") or None,
        "class": spec.get("storageClassName") or _one(facts, "class") or None, "provisioner": provisioner or None,
        "class_chosen_as": _one(facts, "class_reason"), "binding_mode": _one(facts, "class_binding") or None,
        "reclaim_policy": _one(facts, "class_reclaim") or None,
        "shared_fs_provisioner": bool(provisioner) and any(provisioner.startswith(p) or p in provisioner
                                                             for p in known),
        "phase": _one(facts, "phase") or None, "waited_s": _int(_one(facts, "waited_s")),
        "wait_limit_s": _int(_one(facts, "wait_limit_s")),
        "access_modes": ((pvc or {}).get("status") or {}).get("accessModes") or spec.get("accessModes"),
        "capacity": (((pvc or {}).get("status") or {}).get("capacity") or {}).get("storage"),
        "volume": spec.get("volumeName"), "events": _pvc_events(read["events"]),
        "create_rc": _int(_one(facts, "create_rc")), "create": "; ".join(facts.get("create") or [])[:400],
        "delete_rc": _int(_one(facts, "delete_rc")), "delete": "; ".join(facts.get("delete") or [])[:400],
        "leftovers_deleted": _one(facts, "leftovers"),
    }
    if test["create_rc"] != 0:
        text = test["create"].lower()
        if any(marker in text for marker in _UNREACHABLE):
            raise HarnessError(f"the provisioning test could not reach the Kubernetes API: {test['create'][:300]}")
        if "namespaces" in text and "not found" in text:
            raise HarnessError(f"the provisioning test's namespace does not exist (clustereval_audit_k8s_namespace): "
                               f"{test['create'][:300]}")
        return {**test, "outcome": "refused", "forbidden": "forbidden" in text,
                "why": test["create"] or f"kubectl create exited with status {test['create_rc']}"}
    if pvc is None:
        error = "; ".join(facts.get("get_err") or [])[:300] or "no PVC JSON in the output"
        if any(marker in error.lower() for marker in _UNREACHABLE):
            raise HarnessError(f"the provisioning test lost the Kubernetes API: {error}")
        raise HarnessError(f"the provisioning test could not read its PVC {name} back: {error}")
    phase = ((pvc.get("status") or {}).get("phase")) or test["phase"]
    failures = [e for e in test["events"] if e["reason"] in _PVC_FAILED]
    if phase == "Bound":
        outcome = "bound"
    elif phase == "Lost" or failures:
        outcome = "failed"
    elif test["binding_mode"] == "WaitForFirstConsumer" or any(e["reason"] == "WaitForFirstConsumer"
                                                                for e in test["events"]):
        outcome = "wait_for_consumer"
    else:
        outcome = "pending"
    return {**test, "phase": phase, "outcome": outcome, "failure": failures[-1] if failures else None}


def _int(text: str) -> int | None:
    return int(text) if re.fullmatch(r"-?\d+", text or "") else None


def _worst(*statuses: str) -> str:
    return max(statuses, key=lambda s: _RANK[s])


def _test_words(test: dict[str, Any]) -> str:
    where = f"{test['class']} ({test['provisioner']})" if test.get("class") else (
        f"the default class ({test['provisioner']})" if test.get("provisioner") else "the default class")
    return f"test PVC {test['namespace'] + '/' if test.get('namespace') else ''}{test['name']} on {where}"


def _cleanup_words(test: dict[str, Any]) -> tuple[str, bool]:
    """How the test's own claim was cleaned up (a clause), and whether that went wrong."""
    if test.get("delete_rc") == 0:
        return "the test PVC was deleted", False
    ns = f"-n {test['namespace']} " if test.get("namespace") else ""
    return (f"the test PVC could NOT be deleted ({test.get('delete') or 'no answer'}): remove it with "
            f"`kubectl delete pvc {ns}{test['name']}`"), True


def _rwx_from_api(items: list[dict[str, Any]], known: list[str]) -> Verdict:
    """The verdict the API objects alone give (classes, CSI drivers, other tenants' RWX claims)."""
    classes = [i for i in items if i["kind"] == "StorageClass"]
    drivers = {i["name"] for i in items if i["kind"] == "CSIDriver"}
    rwx_classes = {c["name"]: _raw_field(c, "provisioner") for c in classes
                   if any(str(_raw_field(c, "provisioner") or "").startswith(p) or
                          p in str(_raw_field(c, "provisioner") or "") for p in known)}
    rwx_pvcs = [p for p in items if p["kind"] == "PersistentVolumeClaim" and not _is_test_pvc(p)
                and "ReadWriteMany" in ((p.get("spec") or {}).get("accessModes") or [])]
    bound = [f"{p['namespace']}/{p['name']}" for p in rwx_pvcs if (p.get("status") or {}).get("phase") == "Bound"]
    pending = [f"{p['namespace']}/{p['name']}" for p in rwx_pvcs if (p.get("status") or {}).get("phase") == "Pending"]
    missing_driver = {n: prov for n, prov in rwx_classes.items()
                      if drivers and "/" not in str(prov) and prov not in drivers}
    evidence = {"rwx_storage_classes": rwx_classes, "csi_drivers": sorted(drivers), "rwx_pvcs_bound": bound,
                "rwx_pvcs_pending": pending, "classes_without_csi_driver": missing_driver}
    if pending and not bound:
        return Verdict("fail", f"ReadWriteMany PVC(s) stuck Pending ({', '.join(pending[:5])}) and none bound: "
                               "no working RWX provisioner", evidence=evidence)
    if rwx_classes and len(missing_driver) == len(rwx_classes) and not bound:
        return Verdict("fail", f"RWX StorageClass(es) {', '.join(rwx_classes)} name CSI driver(s) "
                               f"{', '.join(sorted(set(map(str, missing_driver.values()))))} that are not installed",
                       evidence=evidence)
    if bound:
        return Verdict("pass", f"{len(bound)} ReadWriteMany PVC(s) bound (e.g. {bound[0]})"
                       + (f"; RWX classes: {', '.join(rwx_classes)}" if rwx_classes else ""),
                       evidence=evidence)
    if rwx_classes:
        return Verdict("pass", f"shared-file-system StorageClass(es): "
                               f"{', '.join(f'{n} ({p})' for n, p in rwx_classes.items())}",
                       evidence=evidence)
    return Verdict("warn", "no StorageClass with a shared-file-system provisioner and no bound ReadWriteMany PVC: "
                           "multi-node jobs cannot share a dataset or checkpoint volume",
                   evidence=evidence)


@k8s_check("audit.k8s.csi_rwx")
def csi_rwx(ctx: Context) -> Verdict:
    """API objects (shared-file-system class, CSI driver, bound RWX claims) AND the provisioning test (cmax 66).

    The test (probe ``k8s_pvc_test``, acting: it only runs while actions are allowed) creates a small
    ReadWriteMany claim and deletes it. Bound: pass. ProvisioningFailed on a shared-file-system class: fail;
    still Pending without a failure: warn; refused by the API: warn; WaitForFirstConsumer: pass on a
    shared-file-system class with the note that binding waits for a pod (provisioning not proven).
    Not tried (actions disabled): the API objects decide and the summary says provisioning was not tried.
    """
    items = _items(ctx, "k8s_storage")
    if items is None:
        raise HarnessError("`kubectl get storageclasses` says the API serves no storage classes")
    known = _data()["rwx_provisioners"]
    base = _rwx_from_api(items, known)
    test = provisioning_test(ctx, known)
    evidence = {**base.evidence, "provisioning_test": test}
    outcome = test["outcome"]
    if outcome == "not_tried":
        return Verdict(base.status, f"{base.summary}; provisioning not tried ({test['why']})", evidence=evidence)
    shared = test["shared_fs_provisioner"]
    if outcome == "refused":
        what = ("the evaluation account may not create PersistentVolumeClaims, so provisioning could not be tried"
                if test.get("forbidden") else "the API refused the test PVC, so provisioning could not be tried")
        return Verdict(_worst(base.status, "warn"), f"{what}: {test['why'][:300]}; {base.summary}",
                       evidence=evidence)
    cleanup, cleanup_failed = _cleanup_words(test)
    subject = _test_words(test)
    if outcome == "bound":
        notes = []
        if not shared:
            notes.append("its provisioner is not on the known shared-file-system list, but it served ReadWriteMany")
        if test.get("reclaim_policy") == "Retain" and test.get("volume"):
            notes.append(f"the class keeps volumes (reclaimPolicy Retain): PersistentVolume {test['volume']} stays "
                         "Released until an administrator deletes it")
        pending = base.evidence.get("rwx_pvcs_pending") or []
        if pending:
            notes.append(f"{len(pending)} other ReadWriteMany PVC(s) are Pending: {', '.join(pending[:5])}")
        status = "warn" if (pending or cleanup_failed) else "pass"
        done = "and deleted" if not cleanup_failed else f"but {cleanup.removeprefix('the test PVC ')}"
        return Verdict(status, f"{subject} (ReadWriteMany, {test.get('capacity') or 'requested size'}) bound in "
                               f"{test['waited_s']} s {done}" + "".join(f"; {n}" for n in notes),
                       evidence=evidence)
    if outcome == "wait_for_consumer":
        note = ("binds only when a pod uses it (WaitForFirstConsumer): the claim was accepted and stayed Pending, "
                "so provisioning itself was not proven")
        if shared:
            return Verdict(_worst(base.status, "warn" if cleanup_failed else "pass"),
                           f"{subject} {note}; {cleanup}; {base.summary}", evidence=evidence)
        return Verdict(_worst(base.status, "warn"), f"{base.summary}; {subject} {note}, nor that this class serves "
                                                    f"ReadWriteMany; {cleanup}", evidence=evidence)
    if outcome == "failed":
        failure = test.get("failure") or {}
        why = (f"{failure.get('reason')}: {failure.get('message')}" if failure
               else f"the claim went {test['phase']}")
        if shared:
            return Verdict("fail", f"{subject} did not bind: {why[:400]}; {cleanup}", evidence=evidence)
        return Verdict(_worst(base.status, "warn"), f"{base.summary}; the default class could not provision a "
                                                    f"ReadWriteMany volume either: {subject}: {why[:400]}; "
                                                    f"{cleanup}", evidence=evidence)
    last = test["events"][-1] if test["events"] else None
    waited = f"{test['waited_s']} s" if test.get("waited_s") is not None else "the wait"
    return Verdict(_worst(base.status, "warn"),
                   f"{subject} was still Pending after {waited}"
                   + (f" (last event {last['reason']}: {last['message'][:300]})" if last else " (no event recorded)")
                   + f"; {cleanup}; {base.summary}", evidence=evidence)


# ---------------------------------------------------------------- GPU, network and MPI operators

def _cr_state(items: list[dict[str, Any]]) -> dict[str, str]:
    return {i["name"]: str((i.get("status") or {}).get("state") or "unknown") for i in items}


@k8s_check("audit.k8s.gpu_operator")
def gpu_operator(ctx: Context) -> Verdict:
    gpu_nodes = _gpu_nodes(ctx)
    workloads = _workloads(ctx)
    operator = _component(workloads, "gpu-operator")
    if not gpu_nodes and not operator:
        raise Skip("no NVIDIA GPU node in the cluster (no nvidia.com/gpu resource, GFD or NFD label)")
    policies = (_items(ctx, "k8s_clusterpolicies") or []) if "k8s_clusterpolicies" in ctx.probes else []
    states = _cr_state(policies)
    plugin = _component(workloads, "nvidia-device-plugin")
    dra = _component(workloads, "nvidia-dra-driver")
    dra_classes = [d["name"] for d in (_dra(ctx) or []) if d["kind"] == "DeviceClass"
                   and any(drv in d["name"] for drv in _data()["dra_gpu_drivers"])]
    without = sorted(n["name"] for n in gpu_nodes if not _quantity(_allocatable(n).get(GPU_RESOURCE)))
    if dra_classes and _healthy(dra):
        without = []  # GPUs handed out through DRA are not an extended resource
    total = sum(_quantity(_allocatable(n).get(GPU_RESOURCE)) for n in gpu_nodes)
    evidence = {"gpu_nodes": len(gpu_nodes), "allocatable_gpus": total, "nodes_without_gpus": without,
                "cluster_policies": states, "operator": _describe(operator), "device_plugin": _describe(plugin),
                "dra_driver": _describe(dra), "dra_device_classes": dra_classes,
                "operator_version": next((w["version"] for w in operator if w["version"]), None)}
    bad_policy = {n: s for n, s in states.items() if s != "ready"}
    if without:
        return Verdict("fail", f"{len(without)} GPU node(s) advertise no allocatable nvidia.com/gpu: "
                               f"{', '.join(without[:10])}" + (f" (ClusterPolicy {bad_policy})" if bad_policy else ""),
                       len(gpu_nodes) - len(without), evidence=evidence)
    if bad_policy:
        return Verdict("fail", f"GPU Operator ClusterPolicy not ready: "
                               f"{', '.join(f'{n}={s}' for n, s in bad_policy.items())}", len(gpu_nodes),
                       evidence=evidence)
    unhealthy = [w for w in operator + plugin + dra if not _healthy([w])]
    if unhealthy:
        return Verdict("warn", f"GPUs are advertised but some GPU stack workloads are not fully ready: "
                               f"{_describe(unhealthy)}", len(gpu_nodes), evidence=evidence)
    if operator:
        return Verdict("pass", f"GPU Operator {evidence['operator_version'] or ''} ready"
                       f"{' (ClusterPolicy ready)' if states else ''}; {total} GPUs allocatable on "
                       f"{len(gpu_nodes)} nodes".replace("  ", " "), len(gpu_nodes), evidence=evidence)
    how = "DRA driver" if dra_classes else ("device plugin " + _describe(plugin) if plugin else
                                            "a device plugin managed outside the cluster's workloads")
    return Verdict("pass", f"{total} GPUs allocatable on {len(gpu_nodes)} nodes via {how} (no GPU Operator)",
                   len(gpu_nodes), evidence=evidence)


def _dra(ctx: Context) -> list[dict[str, Any]] | None:
    if "k8s_dra" not in ctx.probes:
        return None
    return _items(ctx, "k8s_dra")


def _nvidia_nics(nodes: list[dict[str, Any]]) -> list[str]:
    return [n["name"] for n in nodes if n["labels"].get("feature.node.kubernetes.io/pci-15b3.present") == "true"]


@k8s_check("audit.k8s.network_operator")
def network_operator(ctx: Context) -> Verdict:
    nodes = _nodes(ctx)
    workloads = _workloads(ctx)
    operator = _component(workloads, "network-operator")
    policies = (_items(ctx, "k8s_nicclusterpolicies") or []) if "k8s_nicclusterpolicies" in ctx.probes else []
    nic_nodes = _nvidia_nics(nodes)
    if not operator and not policies and not nic_nodes:
        raise Skip("no NVIDIA (Mellanox 15b3) NIC labelled by NFD and no Network Operator: not applicable")
    states = _cr_state(policies)
    plumbing = [c for c in ("rdma-shared-device-plugin", "sriov-device-plugin", "sriov-network-operator")
                if _healthy(_component(workloads, c))]
    evidence = {"operator": _describe(operator), "nic_cluster_policies": states,
                "nodes_with_nvidia_nics": len(nic_nodes), "rdma_plumbing_ready": plumbing}
    bad = {n: s for n, s in states.items() if s != "ready"}
    if bad:
        return Verdict("fail", f"NicClusterPolicy not ready: {', '.join(f'{n}={s}' for n, s in bad.items())}",
                       evidence=evidence)
    if operator and not _healthy(operator):
        return Verdict("fail", f"Network Operator not ready: {_describe(operator)}", evidence=evidence)
    if operator and not policies:
        return Verdict("warn", "Network Operator runs but no NicClusterPolicy exists: it deploys nothing",
                       evidence=evidence)
    if operator:
        return Verdict("pass", f"Network Operator ready; NicClusterPolicy {', '.join(states)} ready", evidence=evidence)
    if plumbing:
        return Verdict("pass", f"no Network Operator, but RDMA plumbing is ready: {', '.join(plumbing)}",
                       evidence=evidence)
    return Verdict("warn", f"{len(nic_nodes)} node(s) have NVIDIA NICs but neither the Network Operator nor an "
                           "RDMA/SR-IOV device plugin runs: pods get no RDMA devices", evidence=evidence)


MPI_KINDS = (("mpijobs", "kubeflow.org", ("mpi-operator", "training-operator")),
             ("trainjobs", "trainer.kubeflow.org", ("kubeflow-trainer",)))


@k8s_check("audit.k8s.mpi_operator")
def mpi_operator(ctx: Context) -> Verdict:
    if not _gpu_nodes(ctx):
        raise Skip("no GPU nodes in the cluster")
    workloads = _workloads(ctx)
    found, broken = [], []
    for resource, group, components in MPI_KINDS:
        parts = [w for comp in components for w in _component(workloads, comp)]
        served = _served(ctx, resource, group)
        if not served and not parts:
            continue
        label = f"{resource}.{group}"
        if not served:
            broken.append(f"{_describe(parts)} runs but {label} is not served")
        elif not _healthy(parts):
            broken.append(f"{label} is served but its controller is {_describe(parts) or 'not running'}")
        else:
            found.append(f"{label} ({_describe(parts)})")
    evidence = {"ready": found, "broken": broken}
    if broken and not found:
        return Verdict("fail", f"MPI operator broken: {'; '.join(broken)}", evidence=evidence)
    if broken:
        return Verdict("warn", f"{'; '.join(found)} ready, but {'; '.join(broken)}", evidence=evidence)
    if found:
        return Verdict("pass", f"MPI jobs supported: {'; '.join(found)}", evidence=evidence)
    return Verdict("warn", "no MPIJob or TrainJob API: MPI launchers must be built by hand", evidence=evidence)


DRA_LIMITS = {"kueue": "audit.k8s.workload_schedulers.kueue_dra",
              "volcano": "audit.k8s.workload_schedulers.volcano_dra",
              "kai-scheduler": "audit.k8s.workload_schedulers.kai_dra"}


@k8s_check("audit.k8s.workload_schedulers")
def workload_schedulers(ctx: Context) -> Verdict:
    if not _gpu_nodes(ctx):
        raise Skip("no GPU nodes in the cluster")
    workloads = _workloads(ctx)
    dra = _dra(ctx) or []
    claims = [d for d in dra if d["kind"] in ("ResourceClaim", "ResourceClaimTemplate")]
    ready, broken, dra_issues = {}, [], []
    for name in ("kueue", "volcano", "kai-scheduler", "yunikorn"):
        parts = _component(workloads, name)
        if not parts:
            continue
        if not _healthy(parts):
            broken.append(f"{name}: {_describe(parts)}")
            continue
        version = next((w["version"] for w in parts if w["version"]), None)
        ready[name] = version
        if claims and name in DRA_LIMITS:
            lim = ctx.limit("k8s", DRA_LIMITS[name])
            if not version:
                dra_issues.append(f"{name} version unknown (image pinned by digest?): cannot tell whether it "
                                  f"handles the {len(claims)} DRA claim(s)/template(s) in use")
            elif baselines.grade(version, lim) != "pass":
                dra_issues.append(f"{name} {version} predates DRA claim support ({lim.warn}) while "
                                  f"{len(claims)} DRA claim(s)/template(s) are in use")
    evidence = {"ready": ready, "not_ready": broken, "dra_claims_in_use": len(claims), "dra_issues": dra_issues}
    if broken:
        return Verdict("fail", f"batch scheduler not ready: {'; '.join(broken)}", evidence=evidence)
    if not ready:
        return Verdict("warn", "only the default kube-scheduler: no queueing, quotas or fair share for GPU jobs",
                       evidence=evidence)
    names = ", ".join(f"{n} {v or '(version unknown)'}" for n, v in ready.items())
    if dra_issues:
        return Verdict("warn", f"{names} ready, but {'; '.join(dra_issues)}", evidence=evidence)
    return Verdict("pass", f"{names} ready" + (f"; handles the {len(claims)} DRA claim(s) in use" if claims else ""),
                   evidence=evidence)


# ---------------------------------------------------------------- monitoring

def _monitoring_view(parts: list[dict[str, Any]], component: str) -> list[dict[str, Any]]:
    """Workloads as evidence, each with the version of the image that made it the component (Grafana's
    pod starts with its k8s-sidecar containers, Prometheus carries the config reloader)."""
    images = _data()["components"][component].get("images") or []
    out = []
    for w in parts:
        own = [v for img in w["images"] if any(p in img.rsplit(":", 1)[0] for p in images)
               for v in [_image_version(img)] if v]
        out.append({"workload": f"{w['namespace']}/{w['name']}", "kind": w["kind"], "desired": w["desired"],
                    "ready": w["ready"], "version": own[0] if own else w["version"]})
    return out


def _monitoring_crds(ctx: Context) -> list[str] | None:
    """Served metrics-stack custom resources (``servicemonitors.monitoring.coreos.com``); None if unknown."""
    groups = set(_data().get("monitoring_crd_groups") or ())
    try:
        return sorted(f"{r['name']}.{r['group']}" for r in _resources(ctx) if r.get("group") in groups)
    except (ProbeFailed, HarnessError, Skip):
        return None


def _dcgm_service_monitor(ctx: Context) -> bool | None:
    """The GPU Operator's ``spec.dcgmExporter.serviceMonitor.enabled`` (None without a ClusterPolicy)."""
    if "k8s_clusterpolicies" not in ctx.probes:
        return None
    try:
        policies = _items(ctx, "k8s_clusterpolicies") or []
    except (ProbeFailed, HarnessError, Forbidden, Skip):
        return None
    flags = [((p.get("spec") or {}).get("dcgmExporter") or {}).get("serviceMonitor") for p in policies]
    flags = [f.get("enabled") for f in flags if isinstance(f, dict)]
    return any(f is True for f in flags) if flags else (False if policies else None)


@k8s_check("audit.k8s.monitoring_stack")
def monitoring_stack(ctx: Context) -> Verdict:
    """GPU and node exporters on every GPU node and a Prometheus-compatible server scraping them.

    Graded: dcgm-exporter (standalone chart or the GPU Operator's ``nvidia-dcgm-exporter``) absent or
    ready on no GPU node -> fail (cmax grades a missing dcgm-exporter F); ready on fewer pods than there
    are GPU nodes -> warn with the numbers (a DaemonSet mid-rollout dips for a minute, a node selector
    or an untolerated taint leaves nodes out for good); node-exporter absent or short -> warn; no
    Prometheus (server, agent, operator-managed or a managed collector) or one not ready -> warn.
    Grafana, Alertmanager and kube-state-metrics are reported, never graded: many labs bring their own
    dashboards and alerting, or use a hosted Grafana.
    """
    gpu_nodes = _gpu_nodes(ctx)
    if not gpu_nodes:
        raise Skip("no GPU nodes in the cluster: there is nothing for dcgm-exporter to export")
    workloads = _workloads(ctx)
    names = ("dcgm-exporter", "node-exporter", "prometheus", "prometheus-operator", "grafana", "alertmanager",
             "kube-state-metrics")
    found = {name: _component(workloads, name) for name in names}
    crds = _monitoring_crds(ctx)
    total = len(gpu_nodes)
    dcgm = found["dcgm-exporter"]
    covered = min(sum(w["ready"] for w in dcgm), total)
    evidence: dict[str, Any] = {"gpu_nodes": total, "dcgm_exporter_ready_nodes": covered,
                                **{name.replace("-", "_"): _monitoring_view(parts, name)
                                   for name, parts in found.items()},
                                "monitoring_crds": crds, "dcgm_service_monitor": _dcgm_service_monitor(ctx)}
    if not dcgm:
        return Verdict("fail", f"no dcgm-exporter workload (DaemonSet or the GPU Operator's nvidia-dcgm-exporter) "
                               f"on a cluster with {total} GPU node(s): GPU throttling, ECC and NVLink errors go "
                               "unseen until a job fails", 0, evidence=evidence)
    if not covered:
        return Verdict("fail", f"dcgm-exporter is deployed but ready on none of the {total} GPU node(s): "
                               f"{_describe(dcgm)}", 0, evidence=evidence)
    warnings = []
    if covered < total:
        desired = sum(w["desired"] for w in dcgm)
        why = (f"{desired} scheduled, {covered} ready" if desired > covered else
               f"its node selector or tolerations leave {total - desired} GPU node(s) out")
        warnings.append(f"dcgm-exporter ready on {covered} of {total} GPU nodes ({why}: {_describe(dcgm)})")
    nodex = found["node-exporter"]
    if not nodex:
        warnings.append("no node-exporter: host memory, disk, network and PCIe/NIC counters are not exported")
    elif not _healthy(nodex) or sum(w["ready"] for w in nodex) < total:
        warnings.append(f"node-exporter not ready on every node ({_describe(nodex)}; {total} GPU nodes)")
    prom, operator = found["prometheus"], found["prometheus-operator"]
    if not prom:
        if operator:
            where = (f"the Prometheus Operator runs ({_describe(operator)}) but no Prometheus server does "
                     "(no Prometheus resource, or its StatefulSet was never created)")
        elif crds and "prometheuses.monitoring.coreos.com" in crds:
            where = "the Prometheus Operator's CRDs are installed but neither the operator nor a Prometheus runs"
        else:
            where = ("no Prometheus (server, agent or operator-managed) or other scraper runs in the cluster "
                     "(one outside it, e.g. a managed service's agentless scraper, is invisible to the API)")
        warnings.append(f"{where}: the exporters' metrics are not collected")
    elif not _healthy(prom):
        warnings.append(f"Prometheus not ready: {_describe(prom)}")
    if operator and not _healthy(operator):
        warnings.append(f"Prometheus Operator not ready (ServiceMonitor changes are not applied): "
                        f"{_describe(operator)}")
    if warnings:
        return Verdict("warn", "; ".join(warnings), covered, evidence=evidence)
    grafana = found["grafana"]
    dashboards = (f"Grafana {_describe(grafana)}" if grafana else
                  "no Grafana in the cluster (not graded: dashboards may live elsewhere)")
    return Verdict("pass", f"dcgm-exporter ready on all {total} GPU nodes, node-exporter and Prometheus ready "
                           f"({_describe(prom)}); {dashboards}", covered, evidence=evidence)


@k8s_check("audit.k8s.gpu_job_attribution")
def gpu_job_attribution(ctx: Context) -> Verdict:
    gpu_nodes = _gpu_nodes(ctx)
    if not gpu_nodes:
        raise Skip("no GPU nodes in the cluster")
    exporters = _component(_workloads(ctx), "dcgm-exporter")
    evidence: dict[str, Any] = {"dcgm_exporter": _describe(exporters)}
    if not exporters:
        return Verdict("fail", "no dcgm-exporter workload: GPU metrics cannot be attributed to pods or jobs",
                       evidence=evidence)
    flags = []
    for w in exporters:
        env = str(w["env"].get("DCGM_EXPORTER_KUBERNETES", "")).lower()
        arg = any(a in ("-k", "--kubernetes", "--kubernetes=true") for a in w["args"])
        flags.append({"workload": f"{w['namespace']}/{w['name']}", "env": w["env"].get("DCGM_EXPORTER_KUBERNETES"),
                      "arg": arg, "pod_resources": any("pod-resources" in p for p in w["host_paths"]),
                      "ready": f"{w['ready']}/{w['desired']}"})
        flags[-1]["kubernetes"] = env == "true" or arg
    evidence["exporters"] = flags
    if not any(f["kubernetes"] for f in flags):
        return Verdict("fail", "dcgm-exporter runs without DCGM_EXPORTER_KUBERNETES=true (or --kubernetes): "
                               "metrics name GPUs, not pods", evidence=evidence)
    if not any(f["kubernetes"] and f["pod_resources"] for f in flags):
        return Verdict("warn", "dcgm-exporter has Kubernetes mapping on but no /var/lib/kubelet/pod-resources "
                               "mount, so it cannot learn which pod holds a GPU", evidence=evidence)
    short = [f"{w['namespace']}/{w['name']} {w['ready']}/{len(gpu_nodes)}" for w in exporters
             if w["kind"] == "DaemonSet" and w["ready"] < len(gpu_nodes)]
    if short:
        return Verdict("warn", f"dcgm-exporter attributes metrics to pods but runs on fewer nodes than the "
                               f"{len(gpu_nodes)} GPU nodes: {', '.join(short)}", evidence=evidence)
    return Verdict("pass", "dcgm-exporter maps GPU metrics to pods (DCGM_EXPORTER_KUBERNETES=true, pod-resources "
                           "mounted)", evidence=evidence)


# ---------------------------------------------------------------- RDMA and multi-node NVLink

def _rdma_plugin_resources(configmaps: list[dict[str, Any]], policies: list[dict[str, Any]]) -> dict[str, str]:
    """Resource names the RDMA shared-device and SR-IOV device plugins are configured to advertise.

    k8s-rdma-shared-dev-plugin: ``config.json`` ``{"configList": [{"resourceName": ..}], "resourcePrefix"?}``
    (default prefix ``rdma``); sriov-network-device-plugin: ``{"resourceList": [{"resourceName",
    "resourcePrefix"?}]}`` (default prefix ``intel.com``, NVIDIA deployments set ``nvidia.com``). The
    Network Operator's NicClusterPolicy carries the same JSON in ``spec.rdmaSharedDevicePlugin.config``
    and ``spec.sriovDevicePlugin.config``.
    """
    found: dict[str, str] = {}

    def read(text: Any, plugin: str) -> None:
        try:
            conf = json.loads(str(text))
        except (json.JSONDecodeError, TypeError):
            return
        if not isinstance(conf, dict):
            return
        for key, default in (("configList", "rdma"), ("resourceList", "intel.com")):
            for entry in conf.get(key) or []:
                if isinstance(entry, dict) and entry.get("resourceName"):
                    prefix = entry.get("resourcePrefix") or conf.get("resourcePrefix") or default
                    found[f"{prefix}/{entry['resourceName']}"] = plugin

    for cm in configmaps:
        plugin = {"rdma-devices": "rdma_shared_device", "sriovdp-config": "sriov"}.get(cm.get("name"))
        if plugin:
            for value in (cm.get("data") or {}).values():
                read(value, plugin)
    for policy in policies:
        spec = policy.get("spec") or {}
        read((spec.get("rdmaSharedDevicePlugin") or {}).get("config"), "rdma_shared_device")
        read((spec.get("sriovDevicePlugin") or {}).get("config"), "sriov")
    return found


def _nad_config(nad: dict[str, Any]) -> dict[str, Any]:
    try:
        conf = json.loads(str((nad.get("spec") or {}).get("config") or "{}"))
    except json.JSONDecodeError:
        return {"type": "unparseable"}
    return conf if isinstance(conf, dict) else {"type": "unparseable"}


def _nad_types(conf: dict[str, Any]) -> list[str]:
    plugins = conf.get("plugins") if isinstance(conf.get("plugins"), list) else [conf]
    return [str(p.get("type")) for p in plugins if isinstance(p, dict) and p.get("type")]


NAD_MECHANISMS = {"sriov": "sriov_legacy", "ib-sriov": "sriov_ib", "host-device": "sriov_host_device",
                  "ovs": "ovs_offload", "ipoib": "ipoib", "macvlan": "macvlan", "rdma": "rdma_cni"}


def _classify_nad(nad: dict[str, Any]) -> str:
    types = _nad_types(_nad_config(nad))
    for kind in ("ib-sriov", "sriov", "host-device", "ovs", "ipoib", "macvlan"):
        if kind in types:
            return NAD_MECHANISMS[kind]
    return types[0] if types else "unknown"


@k8s_check("audit.k8s.rdma_exposure")
def rdma_exposure(ctx: Context) -> Verdict:
    gpu_nodes = _gpu_nodes(ctx)
    if not gpu_nodes:
        raise Skip("no GPU nodes in the cluster")
    nads = (_items(ctx, "k8s_nads") or []) if "k8s_nads" in ctx.probes else []
    configmaps = _stream_items(ctx, "k8s_configmaps") if "k8s_configmaps" in ctx.probes else []
    policies = (_items(ctx, "k8s_nicclusterpolicies") or []) if "k8s_nicclusterpolicies" in ctx.probes else []
    configured = _rdma_plugin_resources(configmaps, policies)
    advertised: dict[str, list[str]] = {}
    for node in gpu_nodes:
        for key, value in _allocatable(node).items():
            if _quantity(value) and (key.startswith("rdma/") or key == "vpc.amazonaws.com/efa"
                                     or key.startswith("networking.gke.io.networks/") or key in configured):
                advertised.setdefault(key, []).append(node["name"])
    dra_classes = [d["name"] for d in (_dra(ctx) or []) if d["kind"] == "DeviceClass"
                   and any(drv in d["name"] or drv in json.dumps(d.get("spec"))
                           for drv in _data()["dra_network_drivers"])]
    mechanisms: dict[str, list[str]] = {}
    for key in advertised:
        if key == "vpc.amazonaws.com/efa":
            mech = "efa"
        elif key.startswith("networking.gke.io.networks/"):
            mech = "gke_multinetwork"
        elif re.fullmatch(r"rdma/fabric\d+", key):
            mech = "doks_fabric"
        elif key.startswith("rdma/"):
            mech = "rdma_shared_device"
        else:
            mech = configured.get(key, "device_plugin")
        mechanisms.setdefault(mech, []).append(key)
    if dra_classes:
        mechanisms["dranet"] = dra_classes
    problems, warnings = [], []
    nad_view = {}
    for nad in nads:
        mech = _classify_nad(nad)
        resource = nad["annotations"].get(NAD_RESOURCE)
        nad_id = f"{nad['namespace']}/{nad['name']}"
        nad_view[nad_id] = {"mechanism": mech, "resource": resource}
        if mech in ("sriov_legacy", "sriov_ib", "sriov_host_device", "ovs_offload") and not resource:
            warnings.append(f"NAD {nad_id} ({mech}) names no {NAD_RESOURCE}: pods get no device allocated for it")
        if resource and resource not in advertised:
            everywhere = any(_quantity(_allocatable(n).get(resource)) for n in _nodes(ctx))
            problems.append(f"NAD {nad_id} ({mech}) asks for {resource}, which "
                            + ("no GPU node advertises" if everywhere else "no node advertises"))
        if mech != "unknown" and resource:
            mechanisms.setdefault(mech, []).append(resource)
    for key, plugin in configured.items():
        if key not in advertised:
            problems.append(f"the {plugin} device plugin is configured for {key} but no GPU node advertises it")
    for key, holders in advertised.items():
        missing = sorted({n["name"] for n in gpu_nodes} - set(holders))
        if missing:
            warnings.append(f"{key} is missing on GPU node(s) {', '.join(missing[:10])}")
    evidence = {"gpu_nodes": len(gpu_nodes), "mechanisms": mechanisms, "advertised": {k: len(v) for k, v in
                                                                                      advertised.items()},
                "configured_resources": configured, "nads": nad_view, "dra_network_classes": dra_classes}
    if problems:
        return Verdict("fail", "; ".join(problems), evidence=evidence)
    if not mechanisms:
        if len(gpu_nodes) < 2:
            raise Skip("one GPU node and no RDMA resource: inter-node RDMA does not apply")
        return Verdict("warn", f"{len(gpu_nodes)} GPU nodes but no RDMA resource, RDMA NAD, EFA or DRANET device "
                               "class: pods talk over TCP between nodes", evidence=evidence)
    summary = ", ".join(f"{m} ({', '.join(sorted(set(v))[:3])})" for m, v in sorted(mechanisms.items()))
    if warnings:
        return Verdict("warn", f"RDMA via {summary}, but {'; '.join(warnings)}", evidence=evidence)
    return Verdict("pass", f"RDMA exposed to pods via {summary} on all {len(gpu_nodes)} GPU nodes", evidence=evidence)


@k8s_check("audit.k8s.multinode_nvlink")
def multinode_nvlink(ctx: Context) -> Verdict:
    gpu_nodes = _gpu_nodes(ctx)
    cliques: dict[str, list[str]] = {}
    for node in gpu_nodes:
        clique = node["labels"].get("nvidia.com/gpu.clique")
        if clique:
            cliques.setdefault(clique, []).append(node["name"])
    domains = (_items(ctx, "k8s_computedomains") or []) if "k8s_computedomains" in ctx.probes else None
    multi = {c: n for c, n in cliques.items() if len(n) > 1}
    if not multi and not domains:
        raise Skip("no multi-node NVLink domain (no two GPU nodes share an nvidia.com/gpu.clique label)")
    served = domains is not None and _served(ctx, "computedomains", "resource.nvidia.com")
    dra_driver = _component(_workloads(ctx), "nvidia-dra-driver")
    states = {f"{d['namespace']}/{d['name']}": str((d.get("status") or {}).get("status") or "unknown")
              for d in domains or []}
    evidence = {"cliques": {c: len(n) for c, n in cliques.items()}, "computedomain_crd": served,
                "compute_domains": states, "dra_driver": _describe(dra_driver)}
    if multi and not served:
        return Verdict("fail", f"{sum(len(n) for n in multi.values())} nodes in {len(multi)} multi-node NVLink "
                               "clique(s) but no ComputeDomain API (NVIDIA DRA driver missing): pods cannot use "
                               "NVLink across nodes", len(multi), evidence=evidence)
    if not _healthy(dra_driver):
        return Verdict("fail", f"NVIDIA DRA driver not ready ({_describe(dra_driver) or 'no workload found'}): "
                               "ComputeDomains cannot get IMEX channels", len(multi), evidence=evidence)
    bad = {d: s for d, s in states.items() if s != "Ready"}
    if bad:
        return Verdict("warn", f"ComputeDomain(s) not Ready: {', '.join(f'{d}={s}' for d, s in bad.items())}",
                       len(multi), evidence=evidence)
    return Verdict("pass", f"{len(multi)} multi-node NVLink clique(s); NVIDIA DRA driver ready"
                   + (f", {len(states)} ComputeDomain(s) Ready" if states else ""), len(multi), evidence=evidence)


# ---------------------------------------------------------------- node: kubelet CPU manager

@check("audit.k8s.kubelet_cpu_manager")
def kubelet_cpu_manager(ctx: Context) -> Verdict:
    try:
        read = parse("probe-k8s-cpu-manager-state", str(ctx.probe("k8s_cpu_manager_state").get("stdout") or ""))
    except ParseError as exc:
        raise HarnessError(str(exc)) from None
    if read["absent"] is not None:
        raise Skip(f"no kubelet CPU manager state on {ctx.subject} ({read['absent']}): no kubelet here")
    state = read["state"]
    policy = str(state["policyName"])
    evidence = {"policyName": policy, "defaultCpuSet": state.get("defaultCpuSet"),
                "pinned_containers": sum(len(v) for v in (state.get("entries") or {}).values()
                                         if isinstance(v, dict))}
    if policy == "static":
        return Verdict("pass", "kubelet CPU manager policy is static: Guaranteed pods get exclusive cores", policy,
                       evidence=evidence)
    if policy == "none":
        return Verdict("warn", "kubelet CPU manager policy is none: GPU pods' feeder threads share cores with "
                               "everything else", policy, evidence=evidence)
    return Verdict("fail", f"unknown kubelet CPU manager policy {policy!r}", policy, evidence=evidence)
