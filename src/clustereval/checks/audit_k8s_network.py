"""Kubernetes audit checks: HTTP ingress and load balancers, RDMA exposed to pods (device plugins, NADs,
EFA, DRANET) and multi-node NVLink (ComputeDomains)."""

from __future__ import annotations

import json
import re
from typing import Any

from clustereval.checks import Context, HarnessError, Skip, Verdict
from clustereval.checks.audit_k8s import (
    DEFAULT_INGRESS,
    NAD_RESOURCE,
    component_workloads,
    describe,
    healthy,
    is_served,
    k8s_baseline,
    k8s_check,
    list_dra,
    list_gpu_nodes,
    list_items,
    list_nodes,
    list_stream_items,
    list_workloads,
    node_allocatable,
    quantity,
)

# ---------------------------------------------------------------- ingress and load balancers

@k8s_check("audit.k8s.ingress_controller")
def ingress_controller(ctx: Context) -> Verdict:
    items = list_items(ctx, "k8s_services") or []
    classes = [i for i in items if i["kind"] == "IngressClass"]
    gateways = (list_items(ctx, "k8s_gatewayclasses") or []) if "k8s_gatewayclasses" in ctx.probes else []
    workloads = list_workloads(ctx)
    mapping = k8s_baseline()["ingress_controllers"]
    ready, down = [], []
    for cls in classes:
        controller = str((cls.get("spec") or {}).get("controller") or "")
        parts = [w for comp in mapping.get(controller, []) for w in component_workloads(workloads, comp)]
        if not parts and controller not in mapping:
            ready.append(f"{cls['name']} ({controller}, controller not recognised)")
        elif healthy(parts):
            ready.append(f"{cls['name']} ({describe(parts)})")
        else:
            down.append(f"IngressClass {cls['name']} ({controller}): {describe(parts) or 'no controller workload'}")
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
    services = list_items(ctx, "k8s_services", "Service")
    if services is None:
        raise HarnessError("`kubectl get services` says the API serves no services resource")
    lbs = [s for s in services if (s.get("spec") or {}).get("type") == "LoadBalancer"]
    served = [s for s in lbs if ((s.get("status") or {}).get("loadBalancer") or {}).get("ingress")]
    pending = [f"{s['namespace']}/{s['name']}" for s in lbs if s not in served]
    workloads = list_workloads(ctx)
    pools = (list_items(ctx, "k8s_metallb_pools") or []) if "k8s_metallb_pools" in ctx.probes else []
    implementations = [c for c in ("metallb", "kube-vip") if component_workloads(workloads, c)]
    providers = sorted({str((n.get("spec") or {}).get("providerID") or "").split(":", 1)[0]
                        for n in list_nodes(ctx)} - {""})
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
    gpu_nodes = list_gpu_nodes(ctx)
    if not gpu_nodes:
        raise Skip("no GPU nodes in the cluster")
    nads = (list_items(ctx, "k8s_nads") or []) if "k8s_nads" in ctx.probes else []
    configmaps = list_stream_items(ctx, "k8s_configmaps") if "k8s_configmaps" in ctx.probes else []
    policies = (list_items(ctx, "k8s_nicclusterpolicies") or []) if "k8s_nicclusterpolicies" in ctx.probes else []
    configured = _rdma_plugin_resources(configmaps, policies)
    advertised: dict[str, list[str]] = {}
    for node in gpu_nodes:
        for key, value in node_allocatable(node).items():
            if quantity(value) and (key.startswith("rdma/") or key == "vpc.amazonaws.com/efa"
                                     or key.startswith("networking.gke.io.networks/") or key in configured):
                advertised.setdefault(key, []).append(node["name"])
    dra_classes = [d["name"] for d in (list_dra(ctx) or []) if d["kind"] == "DeviceClass"
                   and any(drv in d["name"] or drv in json.dumps(d.get("spec"))
                           for drv in k8s_baseline()["dra_network_drivers"])]
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
            everywhere = any(quantity(node_allocatable(n).get(resource)) for n in list_nodes(ctx))
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
    gpu_nodes = list_gpu_nodes(ctx)
    cliques: dict[str, list[str]] = {}
    for node in gpu_nodes:
        clique = node["labels"].get("nvidia.com/gpu.clique")
        if clique:
            cliques.setdefault(clique, []).append(node["name"])
    domains = (list_items(ctx, "k8s_computedomains") or []) if "k8s_computedomains" in ctx.probes else None
    multi = {c: n for c, n in cliques.items() if len(n) > 1}
    if not multi and not domains:
        raise Skip("no multi-node NVLink domain (no two GPU nodes share an nvidia.com/gpu.clique label)")
    served = domains is not None and is_served(ctx, "computedomains", "resource.nvidia.com")
    dra_driver = component_workloads(list_workloads(ctx), "nvidia-dra-driver")
    states = {f"{d['namespace']}/{d['name']}": str((d.get("status") or {}).get("status") or "unknown")
              for d in domains or []}
    evidence = {"cliques": {c: len(n) for c, n in cliques.items()}, "computedomain_crd": served,
                "compute_domains": states, "dra_driver": describe(dra_driver)}
    if multi and not served:
        return Verdict("fail", f"{sum(len(n) for n in multi.values())} nodes in {len(multi)} multi-node NVLink "
                               "clique(s) but no ComputeDomain API (NVIDIA DRA driver missing): pods cannot use "
                               "NVLink across nodes", len(multi), evidence=evidence)
    if not healthy(dra_driver):
        return Verdict("fail", f"NVIDIA DRA driver not ready ({describe(dra_driver) or 'no workload found'}): "
                               "ComputeDomains cannot get IMEX channels", len(multi), evidence=evidence)
    bad = {d: s for d, s in states.items() if s != "Ready"}
    if bad:
        return Verdict("warn", f"ComputeDomain(s) not Ready: {', '.join(f'{d}={s}' for d, s in bad.items())}",
                       len(multi), evidence=evidence)
    return Verdict("pass", f"{len(multi)} multi-node NVLink clique(s); NVIDIA DRA driver ready"
                   + (f", {len(states)} ComputeDomain(s) Ready" if states else ""), len(multi), evidence=evidence)
