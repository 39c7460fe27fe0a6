"""Kubernetes audit checks: topology-aware, gang and bin-packing scheduling, batch schedulers and DRA, and the
kubelet's CPU manager on each node."""

from __future__ import annotations

import re
from typing import Any

from clustereval import baselines
from clustereval.checks import Context, HarnessError, Skip, Verdict, check
from clustereval.checks.audit_k8s import (
    component_workloads,
    describe,
    healthy,
    is_served,
    is_topology_label,
    k8s_check,
    list_dra,
    list_gpu_nodes,
    list_items,
    list_stream_items,
    list_workloads,
)
from clustereval.parsers import ParseError, parse


def _topology_labels(nodes: list[dict[str, Any]]) -> dict[str, int]:
    found: dict[str, int] = {}
    for node in nodes:
        for key in node["labels"]:
            if is_topology_label(key):
                found[key] = found.get(key, 0) + 1
    return found


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
    gpu_nodes = list_gpu_nodes(ctx)
    if len(gpu_nodes) < 2:
        raise Skip(f"{len(gpu_nodes)} GPU node(s): network topology matters from two nodes up")
    labels = _topology_labels(gpu_nodes)
    topologies = list_items(ctx, "k8s_kueue_topologies") or []
    flavors = list_items(ctx, "k8s_kueue_flavors") or []
    hypernodes = list_items(ctx, "k8s_volcano_hypernodes") or []
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
    if not list_gpu_nodes(ctx):
        raise Skip("no GPU nodes in the cluster")
    workloads = list_workloads(ctx)
    configmaps = list_stream_items(ctx, "k8s_configmaps") if "k8s_configmaps" in ctx.probes else []
    found, broken, notes = [], [], []
    for name, (resource, group) in GANG_CRDS.items():
        parts = component_workloads(workloads, name)
        served = is_served(ctx, resource, group)
        if not served and not parts:
            continue
        if name == "kueue":
            # Kueue gangs only with waitForPodsReady (all-or-nothing admission) enabled.
            config = _config_text(configmaps, "kueue-manager-config")
            if parts and not re.search(r"waitForPodsReady:\s*\n\s+enable:\s*true", config):
                notes.append("Kueue runs without waitForPodsReady (no all-or-nothing admission)")
                continue
        if not healthy(parts):
            broken.append(f"{name}: {'CRD ' + resource + '.' + group + ' served but ' if served else ''}"
                          f"{describe(parts) or 'no scheduler workload found'}")
        else:
            found.append(f"{name} ({describe(parts)})")
    evidence = {"ready": found, "not_ready": broken, "notes": notes}
    if broken:
        return Verdict("fail", f"gang scheduler installed but not ready: {'; '.join(broken)}", evidence=evidence)
    if found:
        return Verdict("pass", f"gang scheduling by {'; '.join(found)}", evidence=evidence)
    return Verdict("warn", "no gang scheduler: multi-pod jobs are placed pod by pod and can deadlock"
                   + (f" ({'; '.join(notes)})" if notes else ""), evidence=evidence)


@k8s_check("audit.k8s.bin_packing")
def bin_packing(ctx: Context) -> Verdict:
    if not list_gpu_nodes(ctx):
        raise Skip("no GPU nodes in the cluster")
    workloads = list_workloads(ctx)
    configmaps = list_stream_items(ctx, "k8s_configmaps") if "k8s_configmaps" in ctx.probes else []
    found, broken = [], []
    volcano = _config_text(configmaps, "volcano-scheduler-configmap")
    if re.search(r"name:\s*binpack\b", volcano):
        (found if healthy(component_workloads(workloads, "volcano")) else broken).append("Volcano binpack plugin")
    secondary = _config_text(configmaps, "scheduler-config")
    if re.search(r"\b(MostAllocated|RequestedToCapacityRatio)\b", secondary):
        (found if healthy(component_workloads(workloads, "scheduler-plugins")) else broken).append(
            "a scheduler profile scoring MostAllocated/RequestedToCapacityRatio")
    if component_workloads(workloads, "kai-scheduler"):
        # KAI's default placement strategy for GPUs is bin-pack.
        kai = component_workloads(workloads, "kai-scheduler")
        (found if healthy(kai) else broken).append("KAI scheduler (binpack)")
    evidence = {"bin_packing": found, "not_ready": broken}
    if broken:
        return Verdict("fail", f"bin-packing configured but its scheduler is not ready: {', '.join(broken)}",
                       evidence=evidence)
    if found:
        return Verdict("pass", f"GPU pods are bin-packed by {', '.join(found)}", evidence=evidence)
    return Verdict("warn", "no bin-packing scheduler configuration is visible: the default scheduler spreads "
                           "pods (LeastAllocated) and fragments whole GPU nodes (a managed control plane's "
                           "own scheduler profile cannot be read from the API)", evidence=evidence)


DRA_LIMITS = {"kueue": "audit.k8s.workload_schedulers.kueue_dra",
              "volcano": "audit.k8s.workload_schedulers.volcano_dra",
              "kai-scheduler": "audit.k8s.workload_schedulers.kai_dra"}


@k8s_check("audit.k8s.workload_schedulers")
def workload_schedulers(ctx: Context) -> Verdict:
    if not list_gpu_nodes(ctx):
        raise Skip("no GPU nodes in the cluster")
    workloads = list_workloads(ctx)
    dra = list_dra(ctx) or []
    claims = [d for d in dra if d["kind"] in ("ResourceClaim", "ResourceClaimTemplate")]
    ready, broken, dra_issues = {}, [], []
    for name in ("kueue", "volcano", "kai-scheduler", "yunikorn"):
        parts = component_workloads(workloads, name)
        if not parts:
            continue
        if not healthy(parts):
            broken.append(f"{name}: {describe(parts)}")
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
