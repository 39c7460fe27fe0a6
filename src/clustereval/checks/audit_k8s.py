"""Kubernetes audit: reading what the API says, shared by the ``audit_k8s_*`` check modules.

The cluster-scope checks read the ``k8s_*`` probes (``kubectl ... -o json``, kubectl 1.2x-1.3x,
collected once on the API host); a run without them is not a Kubernetes cluster and every check
skips. A kind whose CRD is absent ("the server doesn't have a resource type") counts as not
installed; a kind the evaluation account may not read ("forbidden") is a warn, because the tenant
cannot see it either (:func:`k8s_check`); an API server that cannot be reached is a harness error.

The checks live by concern: :mod:`.audit_k8s_access` (RBAC, Helm, vCluster), :mod:`.audit_k8s_scheduling`
(topology, gang and bin-packing schedulers, batch schedulers, the kubelet's CPU manager),
:mod:`.audit_k8s_storage` (default class, shared-file-system provisioning), :mod:`.audit_k8s_network`
(ingress, load balancers, RDMA to pods, multi-node NVLink), :mod:`.audit_k8s_operators` (GPU,
network and MPI operators, the monitoring stack) and :mod:`.audit_k8s_isolation` (tenant namespaces'
NetworkPolicies).
"""

from __future__ import annotations

import re
from functools import cache
from importlib import resources
from typing import Any

from clustereval import baselines, yamldata
from clustereval.checks import Context, HarnessError, ProbeFailed, Skip, Verdict, check
from clustereval.parsers import ParseError, parse

NOT_K8S = ("no Kubernetes API facts were collected: not a Kubernetes cluster (run with "
           "clustereval_harness=k8s and a kubeconfig on clustereval_k8s_api_host)")
ABSENT_KIND = ("doesn't have a resource type", "the server could not find the requested resource")
UNREACHABLE = ("connection to the server", "unable to connect to the server", "no configuration has been provided",
               "couldn't get current server api group list", "you must be logged in", "unauthorized",
               "i/o timeout", "no such host", "connection refused", "tls: ")
GPU_RESOURCE = "nvidia.com/gpu"
DEFAULT_CLASS = ("storageclass.kubernetes.io/is-default-class", "storageclass.beta.kubernetes.io/is-default-class")
DEFAULT_INGRESS = "ingressclass.kubernetes.io/is-default-class"
NAD_RESOURCE = "k8s.v1.cni.cncf.io/resourceName"


class Forbidden(Exception):
    """The evaluation account may not read a kind (RBAC)."""


@cache
def k8s_baseline() -> dict[str, Any]:
    text = resources.files("clustereval.baselines").joinpath("k8s.yml").read_text(encoding="utf-8")
    return yamldata.load(text)


# ---------------------------------------------------------------- reading the probes

def require_k8s(ctx: Context) -> None:
    if not any(name.startswith("k8s_") for name in ctx.probes):
        raise Skip(NOT_K8S)


def failure_text(exc: ProbeFailed) -> str:
    return f"{exc.probe.get('stderr') or ''}\n{exc.probe.get('stdout') or ''}".lower()


def parsed_kind(ctx: Context, name: str) -> dict[str, Any] | None:
    """The parsed probe ``name``; None when its kind is not served (CRD absent)."""
    require_k8s(ctx)
    try:
        data = ctx.parsed(name)
    except ProbeFailed as exc:
        text = failure_text(exc)
        if any(marker in text for marker in ABSENT_KIND):
            return None
        if "forbidden" in text:
            raise Forbidden(f"`{exc.probe.get('cmd')}`: {str(exc).split(': ', 1)[-1]}") from None
        if any(marker in text for marker in UNREACHABLE):
            raise HarnessError(f"the Kubernetes API could not be reached from the API host: {exc}") from None
        raise
    if not data.get("complete", True):
        raise HarnessError(f"`{ctx.probes[name].get('cmd')}` output ended early (truncated JSON)")
    return data


def list_items(ctx: Context, name: str, kind: str | None = None) -> list[dict[str, Any]] | None:
    data = parsed_kind(ctx, name)
    if data is None:
        return None
    return [i for i in data.get("items") or [] if kind is None or i.get("kind") == kind]


def list_stream_items(ctx: Context, name: str) -> list[dict[str, Any]]:
    """Items of a probe that loops over several ``kubectl get`` calls (errors per call in stderr)."""
    require_k8s(ctx)
    probe = ctx.probe(name)
    stderr = str(probe.get("stderr") or "").lower()
    if "forbidden" in stderr:
        raise Forbidden(f"`{probe.get('cmd')}`: {stderr.strip().splitlines()[-1][:300]}")
    if not str(probe.get("stdout") or "").strip():
        if any(marker in stderr for marker in UNREACHABLE):
            raise HarnessError(f"the Kubernetes API could not be reached: {stderr.strip()[:300]}")
        return []
    return parsed_kind(ctx, name)["items"]


def list_nodes(ctx: Context) -> list[dict[str, Any]]:
    nodes = list_items(ctx, "k8s_nodes", "Node")
    if nodes is None:
        raise HarnessError("`kubectl get nodes` says the API serves no nodes resource")
    return nodes


def quantity(value: Any) -> int:
    match = re.fullmatch(r"\s*(\d+)\s*", str(value or ""))
    return int(match.group(1)) if match else 0


def is_gpu_node(node: dict[str, Any]) -> bool:
    status, labels = node.get("status") or {}, node.get("labels") or {}
    if any(quantity((status.get(key) or {}).get(GPU_RESOURCE)) for key in ("capacity", "allocatable")):
        return True
    return (labels.get("nvidia.com/gpu.present") == "true"
            or labels.get("feature.node.kubernetes.io/pci-10de.present") == "true"
            or "nvidia.com/gpu.product" in labels or "cloud.google.com/gke-accelerator" in labels
            or is_amd_gpu_node(node))


def amd_spec() -> dict[str, Any]:
    """How AMD GPU nodes are advertised, labelled and served (``amd_gpu`` in baselines/k8s.yml)."""
    return k8s_baseline()["amd_gpu"]


def amd_resources(resources: dict[str, Any] | None) -> int:
    """The AMD GPUs (logical devices) a capacity/allocatable map holds: ``amd.com/gpu`` plus, under the device
    plugin's mixed naming strategy, every ``amd.com/<compute>_<memory>`` resource."""
    spec, total = amd_spec(), 0
    for key, value in (resources or {}).items():
        if key == spec["resource"] or re.match(spec["mixed_resource"], str(key)):
            total += quantity(value)
    return total


def is_amd_gpu_node(node: dict[str, Any]) -> bool:
    """A node with AMD GPUs: it advertises an AMD GPU resource (even 0: the device plugin registered it), or the
    AMD GPU Operator's NFD rule or node labeller labelled it."""
    spec = amd_spec()
    status, labels = node.get("status") or {}, node.get("labels") or {}
    if any(k == spec["resource"] or re.match(spec["mixed_resource"], str(k))
           for key in ("capacity", "allocatable") for k in status.get(key) or {}):
        return True
    return (any(labels.get(k) == "true" for k in spec["node_labels"])
            or any(str(k).startswith(tuple(spec["label_prefixes"])) for k in labels))


def gpu_vendor_of(node: dict[str, Any]) -> str:
    """``amd`` for an AMD GPU node, else ``nvidia`` (the resource and labels every other GPU node is found by)."""
    return "amd" if is_amd_gpu_node(node) else "nvidia"


def list_gpu_nodes(ctx: Context) -> list[dict[str, Any]]:
    return [node for node in list_nodes(ctx) if is_gpu_node(node)]


def node_allocatable(node: dict[str, Any]) -> dict[str, Any]:
    return (node.get("status") or {}).get("allocatable") or {}


def list_api_resources(ctx: Context) -> list[dict[str, Any]]:
    """``kubectl api-resources`` rows; the table is kept when an aggregated API fails (exit 1)."""
    require_k8s(ctx)
    try:
        return ctx.parsed("k8s_api_resources").get("resources") or []
    except ProbeFailed as exc:
        stdout = str(exc.probe.get("stdout") or "")
        if "NAMESPACED" in stdout:
            try:
                return parse("kubectl-api-resources", stdout).get("resources") or []
            except ParseError:
                pass
        if any(marker in failure_text(exc) for marker in UNREACHABLE):
            raise HarnessError(f"the Kubernetes API could not be reached from the API host: {exc}") from None
        raise


def is_served(ctx: Context, name: str, group: str) -> bool:
    return any(r["name"] == name and r["group"] == group for r in list_api_resources(ctx))


def image_version(image: str) -> str | None:
    tail = image.rsplit("/", 1)[-1]
    if "@" in tail or ":" not in tail:
        return None
    tag = tail.split(":", 1)[1]
    return tag if baselines.version_key(tag) else None


def list_workloads(ctx: Context) -> list[dict[str, Any]]:
    """Deployments, DaemonSets and StatefulSets with their containers, readiness and component names."""
    out = []
    patterns = k8s_baseline()["components"]
    for item in list_items(ctx, "k8s_workloads") or []:
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
                      if (any(p in h for p in pat.get("names", []) for h in haystack if h)
                          or any(p in img.rsplit(":", 1)[0] for p in pat.get("images", []) for img in images))
                      and not any(p in h for p in pat.get("exclude", []) for h in haystack + images if h)]
        out.append({"kind": item["kind"], "namespace": item["namespace"], "name": item["name"],
                    "images": images, "desired": int(desired), "ready": int(ready), "env": env, "args": args,
                    "host_paths": mounts, "components": components, "pod_spec": pod,
                    "version": next((v for v in map(image_version, images) if v), None)
                    or item["labels"].get("app.kubernetes.io/version")})
    return out


def component_workloads(workloads: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [w for w in workloads if name in w["components"]]


def healthy(parts: list[dict[str, Any]]) -> bool:
    return bool(parts) and all(w["desired"] > 0 and w["ready"] >= w["desired"] for w in parts)


def describe(parts: list[dict[str, Any]]) -> str:
    return ", ".join(f"{w['kind'].lower()} {w['namespace']}/{w['name']} {w['ready']}/{w['desired']} ready"
                     for w in parts)


# ---------------------------------------------------------------- selectors, taints and tolerations

# Taints the node controllers set for a node's passing state (not ready, unreachable, cordoned, under pressure);
# DaemonSet pods tolerate them by default, so they say nothing about a DaemonSet's configuration.
NODE_STATE_TAINTS = "node.kubernetes.io/"


def expressions_match(expressions: list[dict[str, Any]] | None, labels: dict[str, str]) -> bool:
    """Label selector requirements (In, NotIn, Exists, DoesNotExist; Gt/Lt for node selectors), all of them."""
    for expr in expressions or []:
        key, op = expr.get("key"), expr.get("operator")
        values, have = [str(v) for v in expr.get("values") or []], labels.get(str(key))
        if op in ("Gt", "Lt"):
            try:
                if not (int(str(have)) > int(values[0]) if op == "Gt" else int(str(have)) < int(values[0])):
                    return False
            except (ValueError, IndexError):
                return False
        elif not {"In": have in values, "NotIn": have not in values, "Exists": key in labels,
                  "DoesNotExist": key not in labels}.get(str(op), False):
            return False
    return True


def selector_matches(selector: dict[str, Any] | None, labels: dict[str, str]) -> bool:
    """A metav1.LabelSelector: ``{}`` matches everything (None is no selector: nothing)."""
    if selector is None:
        return False
    if any(labels.get(str(k)) != str(v) for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    return expressions_match(selector.get("matchExpressions"), labels)


def taint_text(taint: dict[str, Any]) -> str:
    value = f"={taint['value']}" if taint.get("value") else ""
    return f"{taint.get('key')}{value}:{taint.get('effect')}"


def tolerates(toleration: dict[str, Any], taint: dict[str, Any]) -> bool:
    """core/v1 Toleration.ToleratesTaint."""
    if toleration.get("effect") and toleration["effect"] != taint.get("effect"):
        return False
    if toleration.get("key") and toleration["key"] != taint.get("key"):
        return False
    if toleration.get("operator") == "Exists":
        return True
    return toleration.get("operator") in (None, "", "Equal") and str(toleration.get("value") or "") == str(
        taint.get("value") or "")


def daemonset_misses(pod_spec: dict[str, Any], node: dict[str, Any]) -> str | None:
    """Why a DaemonSet's pod template never places a pod on ``node`` (its nodeSelector or required node affinity
    does not match, or it does not tolerate a NoSchedule/NoExecute taint the node was given); None when it does."""
    labels = node.get("labels") or {}
    selector = pod_spec.get("nodeSelector") or {}
    if any(labels.get(str(k)) != str(v) for k, v in selector.items()):
        return "has a nodeSelector (" + ", ".join(f"{k}={v}" for k, v in selector.items()) + ") the node does not match"
    terms = ((((pod_spec.get("affinity") or {}).get("nodeAffinity") or {})
              .get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms"))
    fields = {"metadata.name": str(node.get("name"))}
    if terms and not any(expressions_match(t.get("matchExpressions"), labels)
                         and expressions_match(t.get("matchFields"), fields) for t in terms):
        return "has a required node affinity the node does not match"
    tolerations = [t for t in pod_spec.get("tolerations") or [] if isinstance(t, dict)]
    repelling = [t for t in (node.get("spec") or {}).get("taints") or [] if isinstance(t, dict)
                 and t.get("effect") in ("NoSchedule", "NoExecute") and not str(t.get("key")).startswith(
                     NODE_STATE_TAINTS) and not any(tolerates(tol, t) for tol in tolerations)]
    if repelling:
        return (f"does not tolerate taint{'s' if len(repelling) > 1 else ''} "
                + ", ".join(taint_text(t) for t in repelling))
    return None


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


# ---------------------------------------------------------------- shared by the topology readers

def is_topology_label(key: str) -> bool:
    return any(key.startswith(p) for p in k8s_baseline()["topology_labels"])


def switch_groups(ctx: Context) -> dict[str, dict[str, str]]:
    """Per GPU node, the topology labels that name a group of nodes behind shared switches.

    These are the ``topology_labels`` (rack, leaf, block, spine, network layer) less those naming one
    host or an NVLink domain (``topology_labels_not_switch``): two nodes whose values differ for one of
    them talk through a switch tier above that group. Raises as the other readers do: Skip without
    Kubernetes facts, HarnessError when the API could not be reached, Forbidden when nodes may not be read.
    """
    excluded = tuple(k8s_baseline().get("topology_labels_not_switch") or ())
    return {node["name"]: {k: str(v) for k, v in node["labels"].items()
                           if is_topology_label(k) and not k.startswith(excluded)}
            for node in list_gpu_nodes(ctx)}


def list_dra(ctx: Context) -> list[dict[str, Any]] | None:
    """DRA DeviceClasses, ResourceClaims and claim templates; None when their probe was not collected."""
    if "k8s_dra" not in ctx.probes:
        return None
    return list_items(ctx, "k8s_dra")
