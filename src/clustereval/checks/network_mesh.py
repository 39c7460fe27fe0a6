"""Front-end network mesh: TCP bandwidth, loss and round-trip time for every ordered pair of nodes.

Judged once per cluster, after every node measured its pairs (role ``network``): each node's probes are
read back from the run directory (``Context.host_probes``) — ``network_iperf3@<peer>`` (iperf3 JSON),
``network_ping@<peer>`` (ping summary) and ``network_route`` (the device and link speed toward each peer).
A pair is judged against the link rate where the kernel knows it (baselines/network.yml, matched on the
pair's facts) and always against its peers (the median of every pair measured), so a slow or asymmetric
pair is named whatever the hardware.
"""

from __future__ import annotations

import statistics
from typing import Any

from clustereval import baselines, parsers
from clustereval import facts as facts_mod
from clustereval.checks import Context, Skip, Verdict, check
from clustereval.results import pair_subject, set_subject, worst

IPERF, PING, ROUTE = "network_iperf3", "network_ping", "network_route"
AREA = "network"
SERIES = "series/_cluster/network-mesh-tcp.csv"


def _instances(ctx: Context, template: str) -> dict[tuple[str, str], dict[str, Any]]:
    """``{(source, destination): probe}`` for every instance ``<template>@<destination>`` a source kept."""
    return {(host, peer): probe for host, _, peer, probe in ctx.instances(template)}


def _parse(ctx: Context, probe: dict[str, Any], tool: str) -> tuple[dict[str, Any] | None, str | None]:
    """(parsed output, None) or (None, why the pair has no measurement), parsed once per judgement: the
    mesh's summary judges again what the per-pair checks judged."""
    key = f"mesh:{tool}:{id(probe)}"  # the records live in ctx.host_probes for the whole judgement
    if key not in ctx.parse_cache:
        ctx.parse_cache[key] = _parse_once(probe, tool)
    return ctx.parse_cache[key]


def _parse_once(probe: dict[str, Any], tool: str) -> tuple[dict[str, Any] | None, str | None]:
    if probe.get("timed_out"):
        return None, f"`{probe.get('cmd')}` did not finish within {probe.get('timeout')} s"
    try:
        data = parsers.parse(tool, probe.get("stdout") or "")
    except parsers.ParseError as exc:
        detail = (probe.get("stderr") or "").strip().splitlines()
        return None, f"exit status {probe.get('rc')}: {detail[-1][:200] if detail else exc}"
    return data, None


def _no_measurement(probe: dict[str, Any]) -> str:
    """The status of a pair whose probe gave no measurement: a timeout is the cluster's fault only where the probe
    catalogue says so (``on_timeout: fail``, iperf3: a hang on the path); otherwise the harness's (an error)."""
    return "error" if probe.get("timed_out") and probe.get("on_timeout") != "fail" else "fail"


def _address(probe: dict[str, Any]) -> str | None:
    return (probe.get("params") or {}).get("destination")


def _link_gbps(ctx: Context, source: str, destination: str, pings: dict) -> float | None:
    """The pair's link rate: the slower of the two ends' devices toward each other, when both are known."""
    speeds = []
    for here, there in ((source, destination), (destination, source)):
        probe = (ctx.host_probes.get(here) or {}).get(ROUTE)
        toward = pings.get((here, there))
        if not probe or not toward:
            return None
        data, _ = _parse(ctx, probe, "probe-network-route")
        if data is None:
            return None
        speed = (data["routes"].get(_address(toward) or "") or {}).get("speed_mbps")
        if not speed:
            return None
        speeds.append(speed / 1000.0)
    return min(speeds)


def _pair_facts(ctx: Context, source: str, destination: str, link: float | None) -> dict[str, Any]:
    return {**facts_mod.for_subject(ctx.host_facts, pair_subject(source, destination)), "link_gbps": link}


_graded = baselines.graded


def _describe(value: float, limit: baselines.Limit, unit: str) -> str:
    return baselines.shortfall(value, limit, unit, digits=3, basis=True)


def _artifacts(*probes: dict[str, Any] | None) -> list[str]:
    return [p["artifact"] for p in probes if p and p.get("artifact")]


@check("network.mesh.tcp_bandwidth")
def tcp_bandwidth(ctx: Context) -> list[Verdict]:
    measured = _instances(ctx, IPERF)
    if not measured:
        raise Skip("no node measured TCP bandwidth (the mesh needs two or more reachable nodes)")
    pings = _instances(ctx, PING)
    rates, parsed, failures = {}, {}, {}
    for pair, probe in measured.items():
        data, why = _parse(ctx, probe, "iperf3")
        if data is not None and data.get("error"):
            data, why = None, f"iperf3: {data['error']}"
        if data is None or data.get("received_gbitps") is None:
            failures[pair] = why or "iperf3 reported no received bandwidth"
            continue
        parsed[pair], rates[pair] = data, float(data["received_gbitps"])
    overrides = ctx.options.get("baseline_overrides")
    try:
        peers = baselines.reference(AREA, "network.mesh.tcp_bandwidth.peers", {}, ctx.params, overrides,
                                    peers=list(rates.values()))
    except baselines.NoReference:
        peers = None
    verdicts = []
    series_rows = [{"source": s, "destination": d, "start_s": i.get("start"), "end_s": i.get("end"),
                    "gbitps": i.get("gbitps"), "retransmits": i.get("retransmits"), "omitted": i.get("omitted")}
                   for (s, d), data in parsed.items() for i in data.get("intervals") or []]
    for (source, destination), probe in sorted(measured.items()):
        subject = pair_subject(source, destination)
        evidence: dict[str, Any] = {"_artifacts": _artifacts(probe, (ctx.host_probes.get(source) or {}).get(ROUTE))}
        if (source, destination) in failures:
            verdicts.append(Verdict(_no_measurement(probe), f"no TCP bandwidth from {source} to {destination}: "
                                    f"{failures[(source, destination)]}", subject=subject,
                                    evidence={**evidence, "rc": probe.get("rc")}))
            continue
        data, value = parsed[(source, destination)], rates[(source, destination)]
        link = _link_gbps(ctx, source, destination, pings)
        statuses, findings, expected = [], [], None
        try:
            absolute = baselines.reference(AREA, "network.mesh.tcp_bandwidth",
                                           _pair_facts(ctx, source, destination, link), ctx.params, overrides)
            statuses.append(_graded(value, absolute))
            expected = absolute.expected()
            if statuses[-1] != "pass":
                findings.append(_describe(value, absolute, "Gbit/s"))
        except baselines.NoReference as exc:
            evidence["no_absolute_reference"] = str(exc)
        if peers is not None:
            statuses.append(_graded(value, peers))
            if statuses[-1] != "pass":
                findings.append(_describe(value, peers, "Gbit/s"))
            expected = expected or peers.expected()
            evidence["peers"] = peers.expected()
        evidence.update(sent_gbitps=data.get("sent_gbitps"), retransmits=data.get("retransmits"),
                        streams=data.get("num_streams"), link_gbps=link, iperf3=data.get("version"))
        status = worst(statuses) if statuses else "skip"
        series = [{"path": SERIES, "kind": "timeseries", "x": "start_s", "filter": {"source": source,
                   "destination": destination}, "data": [r for r in series_rows
                                                          if (r["source"], r["destination"]) == (source, destination)]}]
        if status == "skip":
            summary = (f"{source} -> {destination}: {value:.3g} Gbit/s; no reference for this link "
                       f"({evidence.get('no_absolute_reference')}) and too few peers to compare with")
        elif findings:
            summary = f"{source} -> {destination}: " + "; ".join(findings)
        else:
            summary = f"{source} -> {destination}: {value:.3g} Gbit/s"
        verdicts.append(Verdict(status, summary, round(value, 4), "Gbit/s", expected, evidence, series=series,
                                subject=subject))
    return verdicts


@check("network.mesh.tcp_asymmetry")
def tcp_asymmetry(ctx: Context) -> list[Verdict]:
    rates = {}
    for pair, probe in _instances(ctx, IPERF).items():
        data, _ = _parse(ctx, probe, "iperf3")
        if data is not None and not data.get("error") and data.get("received_gbitps") is not None:
            rates[pair] = float(data["received_gbitps"])
    limit = baselines.reference(AREA, "network.mesh.tcp_asymmetry", {}, ctx.params,
                                ctx.options.get("baseline_overrides"))
    verdicts = []
    for (a, b) in sorted(rates):
        if a > b or (b, a) not in rates:
            continue
        forward, back = rates[(a, b)], rates[(b, a)]
        ratio = min(forward, back) / max(forward, back) if max(forward, back) > 0 else 0.0
        status = _graded(ratio, limit)
        slow = f"{a} -> {b}" if forward < back else f"{b} -> {a}"
        summary = (f"{a} <-> {b}: {forward:.3g} / {back:.3g} Gbit/s (ratio {ratio:.2f})" if status == "pass" else
                   f"{a} <-> {b} is asymmetric: {slow} gets {ratio:.0%} of the other direction "
                   f"({forward:.3g} vs {back:.3g} Gbit/s)")
        verdicts.append(Verdict(status, summary, round(ratio, 4), "ratio", limit.expected(),
                                {"forward_gbitps": forward, "back_gbitps": back, "slower": slow},
                                subject=set_subject([a, b])))
    if not verdicts:
        raise Skip("no pair was measured in both directions")
    return verdicts


def _ping_verdicts(ctx: Context, check_id: str, measure: str) -> list[Verdict]:
    pings = _instances(ctx, PING)
    if not pings:
        raise Skip("no node measured its peers with ping")
    limit = baselines.reference(AREA, check_id, {}, ctx.params, ctx.options.get("baseline_overrides"))
    verdicts = []
    for (source, destination), probe in sorted(pings.items()):
        subject = pair_subject(source, destination)
        data, why = _parse(ctx, probe, "ping")
        if data is None:
            verdicts.append(Verdict(_no_measurement(probe), f"{source} could not ping {destination}: {why}",
                                    subject=subject,
                                    evidence={"_artifacts": _artifacts(probe)}))
            continue
        evidence = {key: data.get(key) for key in ("transmitted", "received", "errors", "duplicates", "loss_pct")}
        evidence.update(rtt_ms=data.get("rtt_ms"), _artifacts=_artifacts(probe))
        if measure == "loss":
            value, unit = float(data["loss_pct"]), "%"
        elif data.get("rtt_ms") is None:
            verdicts.append(Verdict("fail", f"{source} -> {destination}: no reply to {data.get('transmitted')} pings",
                                    subject=subject, evidence=evidence))
            continue
        else:
            value, unit = float(data["rtt_ms"]["avg"]), "ms"
        status = _graded(value, limit)
        label = "loss" if measure == "loss" else "round-trip"
        summary = (f"{source} -> {destination}: {label} {value:.3g} {unit}" if status == "pass"
                   else f"{source} -> {destination}: {label} " + _describe(value, limit, unit))
        verdicts.append(Verdict(status, summary, round(value, 4), unit, limit.expected(), evidence, subject=subject))
    return verdicts


@check("network.mesh.loss")
def ping_loss(ctx: Context) -> list[Verdict]:
    return _ping_verdicts(ctx, "network.mesh.loss", "loss")


@check("network.mesh.rtt")
def ping_rtt(ctx: Context) -> list[Verdict]:
    return _ping_verdicts(ctx, "network.mesh.rtt", "rtt")


@check("network.mesh.pairs")
def mesh_pairs(ctx: Context) -> Verdict:
    """The mesh as a whole: every ordered pair measured, and the pairs the per-pair checks flag, named."""
    hosts = sorted(ctx.host_probes)
    if len(hosts) < 2:
        raise Skip(f"a mesh needs two or more nodes; {len(hosts)} measured")
    expected_pairs = {(a, b) for a in hosts for b in hosts if a != b}
    flagged: dict[str, list[str]] = {}
    per_check = {"bandwidth": tcp_bandwidth, "asymmetry": tcp_asymmetry, "loss": ping_loss, "rtt": ping_rtt}
    statuses, measured = [], set(_instances(ctx, IPERF))
    rates = []
    for label, fn in per_check.items():
        try:
            verdicts = fn(ctx)
        except Skip:
            continue
        for verdict in verdicts:
            statuses.append(verdict.status)
            if verdict.status != "pass":  # a pair that moved the mesh's status is named, errors and skips too
                flagged.setdefault(label, []).append(f"{verdict.subject} ({verdict.status})")
            if label == "bandwidth" and isinstance(verdict.value, int | float):
                rates.append(verdict.value)
    missing = sorted(f"{a}->{b}" for a, b in expected_pairs - measured)
    evidence: dict[str, Any] = {"nodes": len(hosts), "pairs_expected": len(expected_pairs),
                                "pairs_measured": len(measured), "not_measured": missing, "flagged": flagged}
    if rates:
        evidence["median_gbitps"] = round(statistics.median(rates), 4)
    status = worst(statuses) if statuses else "skip"
    if missing:
        status = worst(status, "warn")
    parts = [f"{label}: {', '.join(items[:6])}{' …' if len(items) > 6 else ''}" for label, items in flagged.items()]
    if missing:
        parts.append(f"not measured: {', '.join(missing[:6])}")
    if status == "pass":
        summary = (f"{len(measured)} of {len(expected_pairs)} ordered pairs measured, none slow, lossy or "
                   f"asymmetric (median {evidence.get('median_gbitps', 0):.3g} Gbit/s)")
    else:
        summary = f"{len(measured)} of {len(expected_pairs)} ordered pairs measured; " + "; ".join(parts)
    return Verdict(status, summary, len(measured), "pairs", None, evidence)
