"""Kubernetes audit checks: the GPU, network and MPI operators, and the monitoring stack on the GPU nodes
(dcgm-exporter with pod attribution, node-exporter, Prometheus)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from clustereval.checks import Context, HarnessError, ProbeFailed, Skip, Verdict
from clustereval.checks.audit_k8s import (
    GPU_RESOURCE,
    Forbidden,
    amd_resources,
    amd_spec,
    component_workloads,
    daemonset_misses,
    describe,
    healthy,
    image_version,
    is_amd_gpu_node,
    is_served,
    k8s_baseline,
    k8s_check,
    list_api_resources,
    list_dra,
    list_gpu_nodes,
    list_items,
    list_nodes,
    list_workloads,
    node_allocatable,
    quantity,
)
from clustereval.results import worst


def _cr_state(items: list[dict[str, Any]]) -> dict[str, str]:
    return {i["name"]: str((i.get("status") or {}).get("state") or "unknown") for i in items}


def _merge(verdicts: list[Verdict]) -> Verdict:
    """One verdict for a cluster of NVIDIA and AMD GPU nodes: the worse status, both summaries, both evidences."""
    status = worst([v.status for v in verdicts])
    value = sum(v.value for v in verdicts if isinstance(v.value, int)) if all(
        isinstance(v.value, int) for v in verdicts) else next(v.value for v in verdicts if v.status == status)
    return Verdict(status, "; ".join(v.summary for v in verdicts), value,
                   evidence={"nvidia": verdicts[0].evidence, "amd": verdicts[1].evidence})


@k8s_check("audit.k8s.gpu_operator")
def gpu_operator(ctx: Context) -> Verdict:
    """GPUs advertised to the scheduler. NVIDIA GPU nodes: the GPU Operator's ClusterPolicy, the device plugin or
    the DRA driver, and nvidia.com/gpu allocatable on each. AMD GPU nodes (:func:`_amd_gpu_operator`): the AMD GPU
    Operator, the ROCm device plugin and node labeller, amd.com/gpu allocatable on each up to the
    devices the node has, and one partition mode across them. A cluster of both judges each and keeps the worse."""
    gpu_nodes = list_gpu_nodes(ctx)
    amd_nodes = [n for n in gpu_nodes if is_amd_gpu_node(n)]
    if not amd_nodes:
        return _nvidia_gpu_operator(ctx, gpu_nodes)
    others = [n for n in gpu_nodes if not is_amd_gpu_node(n)]
    amd = _amd_gpu_operator(ctx, amd_nodes)
    return _merge([_nvidia_gpu_operator(ctx, others), amd]) if others else amd


def _nvidia_gpu_operator(ctx: Context, gpu_nodes: list[dict[str, Any]]) -> Verdict:
    workloads = list_workloads(ctx)
    operator = component_workloads(workloads, "gpu-operator")
    if not gpu_nodes and not operator:
        raise Skip("no NVIDIA GPU node in the cluster (no nvidia.com/gpu resource, GFD or NFD label)")
    policies = (list_items(ctx, "k8s_clusterpolicies") or []) if "k8s_clusterpolicies" in ctx.probes else []
    states = _cr_state(policies)
    plugin = component_workloads(workloads, "nvidia-device-plugin")
    dra = component_workloads(workloads, "nvidia-dra-driver")
    dra_classes = [d["name"] for d in (list_dra(ctx) or []) if d["kind"] == "DeviceClass"
                   and any(drv in d["name"] for drv in k8s_baseline()["dra_gpu_drivers"])]
    without = sorted(n["name"] for n in gpu_nodes if not quantity(node_allocatable(n).get(GPU_RESOURCE)))
    if dra_classes and healthy(dra):
        without = []  # GPUs handed out through DRA are not an extended resource
    total = sum(quantity(node_allocatable(n).get(GPU_RESOURCE)) for n in gpu_nodes)
    evidence = {"gpu_nodes": len(gpu_nodes), "allocatable_gpus": total, "nodes_without_gpus": without,
                "cluster_policies": states, "operator": describe(operator), "device_plugin": describe(plugin),
                "dra_driver": describe(dra), "dra_device_classes": dra_classes,
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
    unhealthy = [w for w in operator + plugin + dra if not healthy([w])]
    if unhealthy:
        return Verdict("warn", f"GPUs are advertised but some GPU stack workloads are not fully ready: "
                               f"{describe(unhealthy)}", len(gpu_nodes), evidence=evidence)
    if operator:
        return Verdict("pass", f"GPU Operator {evidence['operator_version'] or ''} ready"
                       f"{' (ClusterPolicy ready)' if states else ''}; {total} GPUs allocatable on "
                       f"{len(gpu_nodes)} nodes".replace("  ", " "), len(gpu_nodes), evidence=evidence)
    how = "DRA driver" if dra_classes else ("device plugin " + describe(plugin) if plugin else
                                            "a device plugin managed outside the cluster's workloads")
    return Verdict("pass", f"{total} GPUs allocatable on {len(gpu_nodes)} nodes via {how} (no GPU Operator)",
                   len(gpu_nodes), evidence=evidence)


def _labelled_devices(node: dict[str, Any]) -> int:
    """The devices the AMD node labeller counted on the node (``beta.amd.com/gpu.device-id.<id>`` = N; 0: none)."""
    prefix = amd_spec()["device_count_label"]
    return sum(quantity(v) for k, v in (node.get("labels") or {}).items() if str(k).startswith(prefix))


def _amd_expected(ctx: Context, node: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """How many AMD devices the node has, as the most any source says: the device plugin's capacity, the node
    labeller's count, and the host's facts (physical GPUs amd-smi lists, times the partitions per GPU of the mode
    the labeller reports) when the audit also ran on that host."""
    spec = amd_spec()
    labels = node.get("labels") or {}
    mode = str(labels.get(spec["partition_label"]) or "")
    per_gpu = (spec.get("partitions_per_gpu") or {}).get(mode.split("_")[0], 1 if not mode else None)
    facts = ctx.host_facts.get(node["name"]) or ctx.host_facts.get(str(labels.get("kubernetes.io/hostname"))) or {}
    physical = facts.get("gpu_count") if facts.get("gpu_vendor") == "amd" else None
    sources = {"capacity": amd_resources((node.get("status") or {}).get("capacity")),
               "node_labeller": _labelled_devices(node),
               "host_facts": int(physical) * per_gpu if isinstance(physical, int) and per_gpu else 0}
    return max(sources.values()), sources


def _partition_findings(modes: dict[str, str]) -> tuple[str | None, str | None]:
    """(fail, warn) text for AMD GPU nodes whose labelled partition modes differ, judged as
    audit.amd.gpu.partition judges hosts: a node in another mode than the one most nodes run fails; with no mode
    more common than every other, the nodes disagree (warn)."""
    counts = Counter(modes.values()).most_common()
    if len(counts) < 2:
        return None, None
    (majority, n), (_, second) = counts[0], counts[1]
    if n == second:
        listed = ", ".join(f"{mode} ({', '.join(sorted(h for h, m in modes.items() if m == mode))})"
                           for mode, _ in counts)
        return None, (f"AMD GPU nodes are labelled in different partition modes with none most common: {listed}; "
                      "a pod asking for amd.com/gpu gets a whole GPU on some and a partition on others")
    odd = sorted(h for h, m in modes.items() if m != majority)
    return (f"{', '.join(f'{h} ({modes[h]})' for h in odd)} in another partition mode (amd.com/gpu.compute-memory-"
            f"partition) than the {majority} that {n} of {len(modes)} AMD GPU nodes run: there amd.com/gpu hands out "
            "partitions, not whole GPUs"), None


def _amd_gpu_operator(ctx: Context, gpu_nodes: list[dict[str, Any]]) -> Verdict:
    """AMD GPU nodes: fail when a node advertises no amd.com/gpu, or fewer than the devices it has (the ROCm device
    plugin not running, or devices it found unhealthy), or a node's partition mode differs from the one most nodes
    run; warn when the AMD GPU Operator's workloads (controller, device plugin, node labeller) are not all ready
    while GPUs are advertised, or the partition modes differ with no majority; pass otherwise."""
    spec = amd_spec()
    workloads = list_workloads(ctx)
    operator = component_workloads(workloads, spec["operator"])
    plugin = component_workloads(workloads, spec["device_plugin"])
    labeller = component_workloads(workloads, spec["node_labeller"])
    without, short, per_node = [], [], {}
    for node in gpu_nodes:
        allocatable = amd_resources(node_allocatable(node))
        expected, sources = _amd_expected(ctx, node)
        per_node[node["name"]] = {"allocatable": allocatable, "expected": expected, **sources}
        if not allocatable:
            without.append(node["name"])
        elif allocatable < expected:
            short.append(f"{node['name']} ({allocatable} of {expected})")
    modes = {n["name"]: str(n["labels"][spec["partition_label"]]) for n in gpu_nodes
             if (n.get("labels") or {}).get(spec["partition_label"])}
    total = sum(v["allocatable"] for v in per_node.values())
    evidence = {"vendor": "amd", "gpu_nodes": len(gpu_nodes), "allocatable_gpus": total,
                "nodes_without_gpus": sorted(without), "nodes_short_of_gpus": short, "nodes": per_node,
                "partition_modes": modes, "operator": describe(operator),
                "device_plugin": describe(plugin), "node_labeller": describe(labeller),
                "operator_version": next((w["version"] for w in operator if w["version"]), None)}
    partition_fail, partition_warn = _partition_findings(modes)
    failures = []
    if without:
        failures.append(f"{len(without)} AMD GPU node(s) advertise no allocatable amd.com/gpu: "
                        f"{', '.join(sorted(without)[:10])}")
    if short:
        failures.append(f"{len(short)} AMD GPU node(s) advertise fewer amd.com/gpu than they have devices: "
                        f"{', '.join(short[:10])}")
    if partition_fail:
        failures.append(partition_fail)
    if failures:
        return Verdict("fail", "; ".join(failures), len(gpu_nodes) - len(without), evidence=evidence)
    warnings = [partition_warn] if partition_warn else []
    unhealthy = [w for w in operator + plugin + labeller if not healthy([w])]
    if unhealthy:
        warnings.append(f"GPUs are advertised but some AMD GPU stack workloads are not fully ready: "
                        f"{describe(unhealthy)}")
    if warnings:
        return Verdict("warn", "; ".join(warnings), len(gpu_nodes), evidence=evidence)
    shape = f" ({', '.join(sorted(set(modes.values())))})" if modes else ""
    if operator:
        return Verdict("pass", f"AMD GPU Operator {evidence['operator_version'] or ''} ready, its device plugin "
                       f"and node labeller on every node; {total} amd.com/gpu allocatable on {len(gpu_nodes)} "
                       f"nodes{shape}".replace("  ", " "), len(gpu_nodes), evidence=evidence)
    how = (("ROCm device plugin " + describe(plugin)) if plugin
           else "a device plugin managed outside the cluster's workloads")
    return Verdict("pass", f"{total} amd.com/gpu allocatable on {len(gpu_nodes)} nodes{shape} via {how} "
                           "(no AMD GPU Operator)", len(gpu_nodes), evidence=evidence)


def _nvidia_nics(nodes: list[dict[str, Any]]) -> list[str]:
    return [n["name"] for n in nodes if n["labels"].get("feature.node.kubernetes.io/pci-15b3.present") == "true"]


@k8s_check("audit.k8s.network_operator")
def network_operator(ctx: Context) -> Verdict:
    nodes = list_nodes(ctx)
    workloads = list_workloads(ctx)
    operator = component_workloads(workloads, "network-operator")
    policies = (list_items(ctx, "k8s_nicclusterpolicies") or []) if "k8s_nicclusterpolicies" in ctx.probes else []
    nic_nodes = _nvidia_nics(nodes)
    if not operator and not policies and not nic_nodes:
        raise Skip("no NVIDIA (Mellanox 15b3) NIC labelled by NFD and no Network Operator: not applicable")
    states = _cr_state(policies)
    plumbing = [c for c in ("rdma-shared-device-plugin", "sriov-device-plugin", "sriov-network-operator")
                if healthy(component_workloads(workloads, c))]
    evidence = {"operator": describe(operator), "nic_cluster_policies": states,
                "nodes_with_nvidia_nics": len(nic_nodes), "rdma_plumbing_ready": plumbing}
    bad = {n: s for n, s in states.items() if s != "ready"}
    if bad:
        return Verdict("fail", f"NicClusterPolicy not ready: {', '.join(f'{n}={s}' for n, s in bad.items())}",
                       evidence=evidence)
    if operator and not healthy(operator):
        return Verdict("fail", f"Network Operator not ready: {describe(operator)}", evidence=evidence)
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
    if not list_gpu_nodes(ctx):
        raise Skip("no GPU nodes in the cluster")
    workloads = list_workloads(ctx)
    found, broken = [], []
    for resource, group, components in MPI_KINDS:
        parts = [w for comp in components for w in component_workloads(workloads, comp)]
        served = is_served(ctx, resource, group)
        if not served and not parts:
            continue
        label = f"{resource}.{group}"
        if not served:
            broken.append(f"{describe(parts)} runs but {label} is not served")
        elif not healthy(parts):
            broken.append(f"{label} is served but its controller is {describe(parts) or 'not running'}")
        else:
            found.append(f"{label} ({describe(parts)})")
    evidence = {"ready": found, "broken": broken}
    if broken and not found:
        return Verdict("fail", f"MPI operator broken: {'; '.join(broken)}", evidence=evidence)
    if broken:
        return Verdict("warn", f"{'; '.join(found)} ready, but {'; '.join(broken)}", evidence=evidence)
    if found:
        return Verdict("pass", f"MPI jobs supported: {'; '.join(found)}", evidence=evidence)
    return Verdict("warn", "no MPIJob or TrainJob API: MPI launchers must be built by hand", evidence=evidence)


# ---------------------------------------------------------------- monitoring

def _monitoring_view(parts: list[dict[str, Any]], component: str) -> list[dict[str, Any]]:
    """Workloads as evidence, each with the version of the image that made it the component (Grafana's
    pod starts with its k8s-sidecar containers, Prometheus carries the config reloader)."""
    images = k8s_baseline()["components"][component].get("images") or []
    out = []
    for w in parts:
        own = [v for img in w["images"] if any(p in img.rsplit(":", 1)[0] for p in images)
               for v in [image_version(img)] if v]
        out.append({"workload": f"{w['namespace']}/{w['name']}", "kind": w["kind"], "desired": w["desired"],
                    "ready": w["ready"], "version": own[0] if own else w["version"]})
    return out


def _monitoring_crds(ctx: Context) -> list[str] | None:
    """Served metrics-stack custom resources (``servicemonitors.monitoring.coreos.com``); None if unknown."""
    groups = set(k8s_baseline().get("monitoring_crd_groups") or ())
    try:
        return sorted(f"{r['name']}.{r['group']}" for r in list_api_resources(ctx) if r.get("group") in groups)
    except (ProbeFailed, HarnessError, Skip):
        return None


def _dcgm_service_monitor(ctx: Context) -> bool | None:
    """The GPU Operator's ``spec.dcgmExporter.serviceMonitor.enabled`` (None without a ClusterPolicy)."""
    if "k8s_clusterpolicies" not in ctx.probes:
        return None
    try:
        policies = list_items(ctx, "k8s_clusterpolicies") or []
    except (ProbeFailed, HarnessError, Forbidden, Skip):
        return None
    flags = [((p.get("spec") or {}).get("dcgmExporter") or {}).get("serviceMonitor") for p in policies]
    flags = [f.get("enabled") for f in flags if isinstance(f, dict)]
    return any(f is True for f in flags) if flags else (False if policies else None)


def _unplaced(parts: list[dict[str, Any]], gpu_nodes: list[dict[str, Any]]) -> dict[str, list[str]]:
    """GPU node -> why each DaemonSet of a component never places a pod there, for the GPU nodes none of its
    DaemonSets reaches by its spec (nodeSelector, node affinity, tolerations of the node's taints)."""
    daemonsets = [w for w in parts if w["kind"] == "DaemonSet"]
    out = {}
    for node in gpu_nodes:
        reasons = [daemonset_misses(w["pod_spec"], node) for w in daemonsets]
        if daemonsets and all(reasons):
            out[node["name"]] = [f"DaemonSet {w['namespace']}/{w['name']} {r}" for w, r in zip(daemonsets, reasons,
                                                                                                  strict=True)]
    return out


def _unplaced_text(component: str, unplaced: dict[str, list[str]], total: int) -> str:
    groups: dict[str, list[str]] = {}
    for node, reasons in unplaced.items():
        groups.setdefault(" and ".join(reasons), []).append(node)
    return (f"{component} never runs on {len(unplaced)} of {total} GPU node(s): "
            + "; ".join(f"{why} ({', '.join(nodes)})" for why, nodes in groups.items()))


@k8s_check("audit.k8s.monitoring_stack")
def monitoring_stack(ctx: Context) -> Verdict:
    """GPU and node exporters on every GPU node and a Prometheus-compatible server scraping them.

    Graded: dcgm-exporter (standalone chart or the GPU Operator's ``nvidia-dcgm-exporter``) absent or
    ready on no GPU node -> fail (cmax grades a missing dcgm-exporter F); a dcgm-exporter or node-exporter
    DaemonSet whose spec keeps it off GPU nodes (a taint of theirs it does not tolerate, such as
    ``nvidia.com/gpu=present:NoSchedule``, or a nodeSelector/affinity they do not match) -> fail naming the
    DaemonSet, the taint and the nodes: those GPU nodes are unmonitored for good, and the DaemonSet controller
    does not even count them as desired. Ready on fewer pods than there are GPU nodes for another reason -> warn
    with the numbers (a DaemonSet mid-rollout dips for a minute); node-exporter absent or not ready -> warn
    (a managed agent may replace it); no
    Prometheus (server, agent, operator-managed or a managed collector) or one not ready -> warn.
    Grafana, Alertmanager and kube-state-metrics are reported, never graded: many labs bring their own
    dashboards and alerting, or use a hosted Grafana.
    """
    gpu_nodes = list_gpu_nodes(ctx)
    if not gpu_nodes:
        raise Skip("no GPU nodes in the cluster: there is nothing for dcgm-exporter to export")
    amd_nodes = [n for n in gpu_nodes if is_amd_gpu_node(n)]
    if not amd_nodes:
        return _monitoring(ctx, gpu_nodes, NVIDIA_EXPORTER)
    others = [n for n in gpu_nodes if not is_amd_gpu_node(n)]
    amd = _monitoring(ctx, amd_nodes, AMD_EXPORTER)
    return _merge([_monitoring(ctx, others, NVIDIA_EXPORTER), amd]) if others else amd


# The GPU metrics exporter each vendor's GPU nodes need: its component (baselines/k8s.yml), how summaries name it,
# what is lost without it.
NVIDIA_EXPORTER = {"component": "dcgm-exporter", "label": "dcgm-exporter",
                   "absent": "no dcgm-exporter workload (DaemonSet or the GPU Operator's nvidia-dcgm-exporter) on a "
                             "cluster with {total} GPU node(s): GPU throttling, ECC and NVLink errors go unseen until "
                             "a job fails"}
AMD_EXPORTER = {"component": "amd-metrics-exporter", "label": "device-metrics-exporter",
                "absent": "no AMD device metrics exporter workload (device-metrics-exporter DaemonSet or the AMD GPU "
                          "Operator's metrics exporter) on a cluster with {total} AMD GPU node(s): GPU throttling, "
                          "RAS (ECC) and XGMI errors go unseen until a job fails"}


def _monitoring(ctx: Context, gpu_nodes: list[dict[str, Any]], exporter: dict[str, str]) -> Verdict:
    component, label = exporter["component"], exporter["label"]
    workloads = list_workloads(ctx)
    names = (component, "node-exporter", "prometheus", "prometheus-operator", "grafana", "alertmanager",
             "kube-state-metrics")
    found = {name: component_workloads(workloads, name) for name in names}
    crds = _monitoring_crds(ctx)
    total = len(gpu_nodes)
    dcgm = found[component]
    covered = min(sum(w["ready"] for w in dcgm), total)
    evidence: dict[str, Any] = {"gpu_nodes": total, f"{component.replace('-', '_')}_ready_nodes": covered,
                                **{name.replace("-", "_"): _monitoring_view(parts, name)
                                   for name, parts in found.items()},
                                "monitoring_crds": crds}
    if component == NVIDIA_EXPORTER["component"]:
        evidence["dcgm_service_monitor"] = _dcgm_service_monitor(ctx)
    if not dcgm:
        return Verdict("fail", exporter["absent"].format(total=total), 0, evidence=evidence)
    unplaced = {name: _unplaced(found[name], gpu_nodes) for name in (component, "node-exporter")}
    evidence["unmonitored_gpu_nodes"] = {name.replace("-", "_"): nodes for name, nodes in unplaced.items()}
    failures = [_unplaced_text(label if name == component else name, nodes, total)
                for name, nodes in unplaced.items() if nodes]
    if not covered:
        failures.insert(0, f"{label} is deployed but ready on none of the {total} GPU node(s): {describe(dcgm)}")
    if failures:
        return Verdict("fail", ("GPU nodes unmonitored: " if any(unplaced.values()) else "") + "; ".join(failures),
                       covered, evidence=evidence)
    warnings = []
    if covered < total:
        desired = sum(w["desired"] for w in dcgm)
        why = (f"{desired} scheduled, {covered} ready" if desired > covered else
               f"its node selector or tolerations leave {total - desired} GPU node(s) out")
        warnings.append(f"{label} ready on {covered} of {total} GPU nodes ({why}: {describe(dcgm)})")
    nodex = found["node-exporter"]
    if not nodex:
        warnings.append("no node-exporter: host memory, disk, network and PCIe/NIC counters are not exported")
    elif not healthy(nodex) or sum(w["ready"] for w in nodex) < total:
        warnings.append(f"node-exporter not ready on every node ({describe(nodex)}; {total} GPU nodes)")
    prom, operator = found["prometheus"], found["prometheus-operator"]
    if not prom:
        if operator:
            where = (f"the Prometheus Operator runs ({describe(operator)}) but no Prometheus server does "
                     "(no Prometheus resource, or its StatefulSet was never created)")
        elif crds and "prometheuses.monitoring.coreos.com" in crds:
            where = "the Prometheus Operator's CRDs are installed but neither the operator nor a Prometheus runs"
        else:
            where = ("no Prometheus (server, agent or operator-managed) or other scraper runs in the cluster "
                     "(one outside it, e.g. a managed service's agentless scraper, is invisible to the API)")
        warnings.append(f"{where}: the exporters' metrics are not collected")
    elif not healthy(prom):
        warnings.append(f"Prometheus not ready: {describe(prom)}")
    if operator and not healthy(operator):
        warnings.append(f"Prometheus Operator not ready (ServiceMonitor changes are not applied): "
                        f"{describe(operator)}")
    if warnings:
        return Verdict("warn", "; ".join(warnings), covered, evidence=evidence)
    grafana = found["grafana"]
    dashboards = (f"Grafana {describe(grafana)}" if grafana else
                  "no Grafana in the cluster (not graded: dashboards may live elsewhere)")
    return Verdict("pass", f"{label} ready on all {total} GPU nodes, node-exporter and Prometheus ready "
                           f"({describe(prom)}); {dashboards}", covered, evidence=evidence)


@k8s_check("audit.k8s.gpu_job_attribution")
def gpu_job_attribution(ctx: Context) -> Verdict:
    """GPU metrics attributed to pods: dcgm-exporter with its Kubernetes mapping on NVIDIA GPU nodes, the AMD device
    metrics exporter (which maps devices to pods whenever it can read the kubelet's pod-resources socket) on AMD
    ones; a cluster of both judges each and keeps the worse."""
    gpu_nodes = list_gpu_nodes(ctx)
    if not gpu_nodes:
        raise Skip("no GPU nodes in the cluster")
    amd_nodes = [n for n in gpu_nodes if is_amd_gpu_node(n)]
    if not amd_nodes:
        return _nvidia_attribution(ctx, gpu_nodes)
    others = [n for n in gpu_nodes if not is_amd_gpu_node(n)]
    amd = _amd_attribution(ctx, amd_nodes)
    return _merge([_nvidia_attribution(ctx, others), amd]) if others else amd


def _amd_attribution(ctx: Context, gpu_nodes: list[dict[str, Any]]) -> Verdict:
    exporters = component_workloads(list_workloads(ctx), amd_spec()["exporter"])
    flags = [{"workload": f"{w['namespace']}/{w['name']}", "ready": f"{w['ready']}/{w['desired']}",
              "pod_resources": any("pod-resources" in p for p in w["host_paths"])} for w in exporters]
    evidence: dict[str, Any] = {"vendor": "amd", "metrics_exporter": describe(exporters), "exporters": flags}
    if not exporters:
        return Verdict("fail", "no AMD device metrics exporter workload: GPU metrics cannot be attributed to pods or "
                               "jobs", evidence=evidence)
    if not any(f["pod_resources"] for f in flags):
        return Verdict("warn", "the AMD device metrics exporter has no /var/lib/kubelet/pod-resources mount, so it "
                               "cannot learn which pod holds a GPU", evidence=evidence)
    short = [f"{w['namespace']}/{w['name']} {w['ready']}/{len(gpu_nodes)}" for w in exporters
             if w["kind"] == "DaemonSet" and w["ready"] < len(gpu_nodes)]
    if short:
        return Verdict("warn", f"the AMD device metrics exporter attributes metrics to pods but runs on fewer nodes "
                               f"than the {len(gpu_nodes)} AMD GPU nodes: {', '.join(short)}", evidence=evidence)
    return Verdict("pass", "the AMD device metrics exporter maps GPU metrics to pods (kubelet pod-resources mounted) "
                           f"on all {len(gpu_nodes)} AMD GPU nodes", evidence=evidence)


def _nvidia_attribution(ctx: Context, gpu_nodes: list[dict[str, Any]]) -> Verdict:
    exporters = component_workloads(list_workloads(ctx), "dcgm-exporter")
    evidence: dict[str, Any] = {"dcgm_exporter": describe(exporters)}
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
