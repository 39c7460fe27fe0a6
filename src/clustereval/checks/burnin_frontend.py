"""Front-end network under load: loss, round-trip time and TCP bandwidth of every ordered pair of nodes, measured
while the burn-in load runs (role ``burnin``, tasks/frontend.yml).

The role measures with the network role's probes, kept as ``burnin_frontend_route``, ``burnin_frontend_ping@<peer>``
and ``burnin_frontend_iperf3@<peer>`` so an idle mesh in the same run keeps its records. The judgement is the
network mesh's (checks/network_mesh.py), on a view of the context where those records carry the network names,
against the network role's limits (``network.mesh.*`` in baselines/network.yml): one definition of a healthy pair,
judged idle and under load. Every verdict says it was measured under load; with ``clustereval_burnin_load`` gpu or
network (option ``burnin_load``) only that part ran beside the mesh, which every summary says (a pass is a warn).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from clustereval.checks import Context, Skip, Verdict, check, network_mesh

# The names the role keeps the records under -> the network mesh's probe names.
RENAMED = {"burnin_frontend_route": network_mesh.ROUTE, "burnin_frontend_ping": network_mesh.PING,
           "burnin_frontend_iperf3": network_mesh.IPERF}
SERIES = "series/_cluster/burnin-frontend-tcp.csv"  # not the idle mesh's file
# what ran beside the mesh, by the role's clustereval_burnin_load (option burnin_load)
LOADS = {"both": "the burn-in load (GEMMs on every node, all-to-all over every node)",
         "gpu": "the burn-in's GEMMs on every node", "network": "the burn-in's all-to-all over every node"}


def _network_view(ctx: Context) -> Context:
    """The context with the records under the network mesh's names (and nothing else), for its checks."""
    hosts = {}
    for host, probes in ctx.host_probes.items():
        kept = {}
        for name, record in probes.items():
            base, at, instance = name.partition("@")
            if base in RENAMED:
                kept[RENAMED[base] + at + instance] = record
        hosts[host] = kept
    return dataclasses.replace(ctx, host_probes=hosts)


def _under_load(ctx: Context, judge: Callable[[Context], list[Verdict]]) -> list[Verdict]:
    try:
        verdicts = judge(_network_view(ctx))
    except Skip as exc:
        raise Skip(f"under load: {exc}") from None
    load = str(ctx.options.get("burnin_load") or "both")
    for verdict in verdicts:
        verdict.summary = f"under load: {verdict.summary}"
        if load != "both":  # a partial load is not the load the mesh is judged under: a pass says so as a warn
            verdict.summary += f" (only {LOADS.get(load, load)} ran: clustereval_burnin_load={load})"
            verdict.status = "warn" if verdict.status == "pass" else verdict.status
        verdict.evidence = {**verdict.evidence, "load": "burnin", "under": LOADS.get(load, load)}
        verdict.series = [{**ref, "path": SERIES} for ref in verdict.series]
    return verdicts


@check("burnin.frontend.loss")
def loss(ctx: Context) -> list[Verdict]:
    return _under_load(ctx, network_mesh.ping_loss)


@check("burnin.frontend.rtt")
def rtt(ctx: Context) -> list[Verdict]:
    return _under_load(ctx, network_mesh.ping_rtt)


@check("burnin.frontend.bandwidth")
def bandwidth(ctx: Context) -> list[Verdict]:
    return _under_load(ctx, network_mesh.tcp_bandwidth)
