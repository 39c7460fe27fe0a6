"""A shared tier seen from the whole cluster: every node runs its tier matrix at the same time (the storage role
starts them together), so on a shared filesystem the points of one step add up to what the filesystem gave all
clients at once. Judged once per cluster from the ``storage_tier_matrix`` output every node kept
(``Context.host_probes``): per shared filesystem (named by its source, ``server:/export``), the aggregate
throughput at each total client count (nodes x clients per node) and whether it holds as clients are added.
Subject ``tier:<name>``; the aggregate curve under ``series/_cluster/storage-shared-<name>.csv``.
"""

from __future__ import annotations

from typing import Any

from clustereval import baselines, parsers
from clustereval.checks import Context, Skip, Verdict, check
from clustereval.checks.storage_tiers import PROBE

CHECK = "storage.tier.shared_aggregate"
COLUMNS = ["job", "clients_per_node", "total_clients", "nodes", "aggregate_mbps", "slowest_node", "slowest_mbps"]


def shared_tiers(ctx: Context) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """``{source: {"name", "hosts": {host: tier}}}`` of every shared tier the nodes measured, and the hosts whose
    output could not be read."""
    found: dict[str, dict[str, Any]] = {}
    unreadable = []
    for host, probes in sorted(ctx.host_probes.items()):
        probe = probes.get(PROBE)
        if not probe:
            continue
        try:
            tiers = parsers.parse("probe-storage-tiers", probe.get("stdout") or "")["tiers"]
        except parsers.ParseError:
            unreadable.append(host)
            continue
        for tier in tiers:
            if tier["state"] == "measured" and tier.get("shared"):
                entry = found.setdefault(str(tier.get("source")), {"name": tier["name"], "hosts": {}})
                entry["hosts"][host] = tier
    return found, unreadable


def aggregate(hosts: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Per job and clients per node: the sum over the nodes that measured that point, and the slowest node."""
    points: dict[tuple[str, int], dict[str, float]] = {}
    for host, tier in hosts.items():
        for point in tier["points"]:
            if not point["error"]:
                points.setdefault((point["job"], point["clients"]), {})[host] = point["bw_mbps"]
    rows = []
    for (job, clients), by_host in sorted(points.items()):
        slowest = min(by_host, key=by_host.get)
        rows.append({"job": job, "clients_per_node": clients, "total_clients": clients * len(by_host),
                     "nodes": len(by_host), "aggregate_mbps": round(sum(by_host.values()), 3),
                     "slowest_node": slowest, "slowest_mbps": by_host[slowest]})
    return rows


@check(CHECK)
def shared_aggregate(ctx: Context) -> list[Verdict]:
    found, unreadable = shared_tiers(ctx)
    if not found:
        raise Skip("no node measured a shared filesystem tier" + (f" (unreadable output from "
                                                                   f"{', '.join(unreadable)})" if unreadable else ""))
    lim = ctx.limit("storage", "storage.tier.scaling")
    verdicts = []
    for source, entry in sorted(found.items()):
        subject, params = f"tier:{entry['name']}", {"tier": entry["name"], "source": source}
        if len(entry["hosts"]) < 2:
            verdicts.append(Verdict("skip", f"only {', '.join(entry['hosts'])} measured {source}: no aggregate "
                                    f"over the cluster", subject=subject, params=params))
            continue
        rows = aggregate(entry["hosts"])
        series = [{"path": f"series/_cluster/storage-shared-{entry['name']}.csv", "kind": "curve",
                   "x": "total_clients", "columns": COLUMNS, "data": rows}]
        worst: tuple[float, str] | None = None
        shapes = []
        for job in sorted({r["job"] for r in rows}):
            curve = [r for r in rows if r["job"] == job]
            best = max(curve, key=lambda r: r["aggregate_mbps"])
            if len(curve) < 2 or best["aggregate_mbps"] <= 0:
                continue
            ratio = curve[-1]["aggregate_mbps"] / best["aggregate_mbps"]
            steps = " → ".join(f"{r['total_clients']}: {r['aggregate_mbps']:.0f}" for r in curve)
            shapes.append(f"{job} {steps}")
            if worst is None or ratio < worst[0]:
                worst = (ratio, job)
        evidence = {"source": source, "nodes": sorted(entry["hosts"]), "points": rows}
        if worst is None:
            verdicts.append(Verdict("skip", f"{source} was measured at fewer than two client counts per node: "
                                    f"no curve to judge", evidence=evidence, series=series, subject=subject,
                                    params=params))
            continue
        ratio, job = round(worst[0], 3), worst[1]
        status = baselines.grade(ratio, lim)
        text = (f"{source} ({entry['name']}) from {len(entry['hosts'])} nodes at once: the weakest job, {job}, holds "
                f"{ratio:.0%} of its best aggregate at the most clients; aggregate MB/s by total clients: "
                + "; ".join(shapes[:3]) + ("; ..." if len(shapes) > 3 else ""))
        if status != "pass":
            text = f"aggregate throughput falls as clients grow: {text}"
        verdicts.append(Verdict(status, text, ratio, "ratio", lim.expected(), evidence, series=series,
                                subject=subject, params=params))
    return verdicts
