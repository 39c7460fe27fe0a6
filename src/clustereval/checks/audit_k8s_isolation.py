"""Kubernetes audit: tenants isolated from each other on the pod network (NetworkPolicies).

Kubernetes lets every pod reach every other pod until a NetworkPolicy selects it; then only what some policy
admits gets in. A tenant namespace is isolated when a policy selecting all its pods (``podSelector: {}``) is
an Ingress policy (the default-deny, or one admitting its own pods and named namespaces) and no policy opens
its pods to every source or to other tenants' namespaces. Tenant namespaces are those that are neither
Kubernetes' own (``kube-*``) nor home to a recognised platform component (GPU and network operators,
monitoring, schedulers, ingress: the ``components`` of baselines/k8s.yml found in ``k8s_workloads``).
"""

from __future__ import annotations

from typing import Any

from clustereval.checks import Context, HarnessError, Skip, Verdict
from clustereval.checks.audit_k8s import k8s_check, list_items, list_workloads, selector_matches

EVERY_SOURCE = "every source"
OPEN_CIDRS = ("0.0.0.0/0", "::/0")


def policy_types(policy: dict[str, Any]) -> list[str]:
    """spec.policyTypes, or what the API server defaults it to (Ingress, and Egress with egress rules)."""
    spec = policy["spec"]
    return list(spec.get("policyTypes") or ["Ingress", *(["Egress"] if spec.get("egress") else [])])


def selects_all(policy: dict[str, Any]) -> bool:
    return policy["spec"].get("podSelector") in ({}, None)


def admitted(policy: dict[str, Any], namespace: str, labels: dict[str, dict[str, str]],
             tenants: list[str]) -> str | list[str]:
    """Who the policy's ingress rules admit from outside ``namespace``: EVERY_SOURCE (a rule with no ``from``,
    ``0.0.0.0/0``, a namespaceSelector matching every namespace) or the other tenant namespaces it names."""
    others: set[str] = set()
    for rule in policy["spec"].get("ingress") or []:
        peers = rule.get("from") if isinstance(rule, dict) else None
        if not peers:
            return EVERY_SOURCE
        for peer in peers:
            if str((peer.get("ipBlock") or {}).get("cidr")) in OPEN_CIDRS:
                return EVERY_SOURCE
            if "namespaceSelector" not in peer:
                continue  # a podSelector alone: pods of the policy's own namespace
            matched = {n for n, lab in labels.items() if selector_matches(peer["namespaceSelector"] or {}, lab)}
            if matched >= set(labels):
                return EVERY_SOURCE
            others |= matched & (set(tenants) - {namespace})
    return sorted(others)


def judge_namespace(namespace: str, policies: list[dict[str, Any]], labels: dict[str, dict[str, str]],
                    tenants: list[str]) -> tuple[str, str]:
    """(``open`` | ``partial`` | ``isolated``, why) for one tenant namespace."""
    if not policies:
        return "open", "no NetworkPolicy"
    ingress = [p for p in policies if "Ingress" in policy_types(p)]
    if not any(selects_all(p) for p in ingress):
        return "open", ("no Ingress policy selects every pod (no default deny): pods no policy selects accept "
                        "traffic from every namespace")
    openings = []
    for policy in ingress:
        sources = admitted(policy, namespace, labels, tenants)
        if sources == EVERY_SOURCE and selects_all(policy):
            return "open", f"policy {policy['name']} admits {EVERY_SOURCE} to every pod"
        if sources:
            whom = EVERY_SOURCE if sources == EVERY_SOURCE else "tenant namespace(s) " + ", ".join(sources)
            pods = "every pod" if selects_all(policy) else "the pods it selects"
            openings.append(f"policy {policy['name']} admits {whom} to {pods}")
    if openings:
        return "partial", "; ".join(openings)
    return "isolated", "default deny for ingress from other namespaces"


@k8s_check("audit.k8s.network_policy")
def network_policy(ctx: Context) -> Verdict:
    """Graded: a tenant namespace without NetworkPolicy, without a default-deny (an Ingress policy selecting every
    pod) or with a policy admitting every source to all its pods -> fail (any pod of any tenant reaches its pods);
    every tenant namespace denying by default but some policy admitting every source or other tenants' namespaces
    to some of its pods -> warn; all isolated -> pass; no tenant namespace -> skip. Egress policies are reported,
    not graded: isolation between tenants is each one's ingress."""
    items = list_items(ctx, "k8s_network_policies")
    if items is None:
        return Verdict("fail", "the API serves no NetworkPolicy resource (networking.k8s.io/v1): pods of every "
                               "namespace reach each other", None, evidence={})
    labels = {i["name"]: i["labels"] for i in items if i["kind"] == "Namespace"}
    if not labels:
        raise HarnessError("`kubectl get namespaces` listed no namespace (not even default)")
    platform = sorted({w["namespace"] for w in list_workloads(ctx) if w["components"]} & set(labels))
    tenants = sorted(n for n in labels if not n.startswith("kube-") and n not in platform)
    if not tenants:
        raise Skip(f"every namespace is Kubernetes' own or runs platform components ({', '.join(platform)}): "
                   "no tenant namespace to isolate")
    by_namespace: dict[str, list[dict[str, Any]]] = {}
    for policy in (i for i in items if i["kind"] == "NetworkPolicy"):
        by_namespace.setdefault(str(policy["namespace"]), []).append(policy)
    verdicts = {n: judge_namespace(n, by_namespace.get(n, []), labels, tenants) for n in tenants}
    evidence = {"tenant_namespaces": {n: {"state": state, "why": why,
                                          "policies": [p["name"] for p in by_namespace.get(n, [])],
                                          "egress_default_deny": any(selects_all(p) and "Egress" in policy_types(p)
                                                                     and not p["spec"].get("egress")
                                                                     for p in by_namespace.get(n, []))}
                                      for n, (state, why) in verdicts.items()},
                "platform_namespaces": platform,
                "platform_namespaces_without_policy": [n for n in platform if n not in by_namespace]}
    open_ones = [f"{n} ({why})" for n, (state, why) in verdicts.items() if state == "open"]
    partial = [f"{n} ({why})" for n, (state, why) in verdicts.items() if state == "partial"]
    if open_ones:
        return Verdict("fail", f"{len(open_ones)} of {len(tenants)} tenant namespace(s) are open to pods of other "
                               f"tenants: {'; '.join(open_ones)}", len(open_ones), evidence=evidence)
    if partial:
        return Verdict("warn", f"every tenant namespace denies ingress by default, but some policies open pods to "
                               f"other namespaces: {'; '.join(partial)}", 0, evidence=evidence)
    return Verdict("pass", f"all {len(tenants)} tenant namespace(s) deny ingress from other namespaces by default "
                           f"({', '.join(tenants)})", 0, evidence=evidence)
