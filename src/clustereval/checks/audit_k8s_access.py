"""Kubernetes audit checks: what the evaluation account may do (RBAC, Helm) and whether the cluster is the
tenant's own or a vCluster slice."""

from __future__ import annotations

from typing import Any

from clustereval.checks import Context, HarnessError, ProbeFailed, Skip, Verdict
from clustereval.checks.audit_k8s import (
    UNREACHABLE,
    failure_text,
    k8s_check,
    list_nodes,
    require_k8s,
)
from clustereval.parsers import ParseError, parse
from clustereval.parsers.probe_k8s import can_i_answers

CAN_I_REQUIRED = ("create pods", "create jobs.batch")
CAN_I_WANTED = ("list nodes", "list pods --all-namespaces", "create persistentvolumeclaims", "create services")


@k8s_check("audit.k8s.rbac_access")
def rbac_access(ctx: Context) -> Verdict:
    require_k8s(ctx)
    answers = ctx.parsed("k8s_can_i")["answers"]
    unanswered = [q for q in CAN_I_REQUIRED + CAN_I_WANTED if (answers.get(q) or {}).get("allowed") is None]
    messages = [m for q in unanswered for m in (answers.get(q) or {}).get("messages", [])]
    if unanswered and any(marker in " ".join(messages).lower() for marker in UNREACHABLE):
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
    require_k8s(ctx)
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
        text = failure_text(exc)
        if "forbidden" in text:
            return Verdict("fail", f"`helm list` is forbidden: {str(exc)[:300]}", evidence=evidence)
        if any(marker in text for marker in UNREACHABLE):
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
    nodes = list_nodes(ctx)
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

