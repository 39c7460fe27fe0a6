"""RDMA per rail (perftest) and the RDMA control path after the load, judged once per cluster.

Probes the role keeps (``collect_for``; read back with ``load_probes``, ``Context.host_probes``):

* ``perftest@<tool>.<rail>.<src>.<dst>`` on the client ``src``: the client's stdout of ``ib_write_bw``,
  ``ib_read_bw``, ``ib_write_lat`` or ``ib_read_lat`` (parser ``perftest``). Params (the record's
  ``params``; they win over the name, which cannot carry host names with dots): ``tool``, ``device`` (the
  client's HCA, ``mlx5_0``), ``src``, ``dst``, ``memory`` (``host`` | ``cuda``), optional ``rate_gbps``
  (else the rail's rate from the nodes' facts ``nics``: ``'mlx5_0/1 infiniband 400G'``, the slower end).
  A timeout is a hang on the path (fail) unless the record says ``on_timeout: error``.
* ``rdma_control@<node>`` on each node after perftest: per device a header line
  ``# device <name> rc=<exit status> seconds=<duration> timeout=<budget>`` followed by that device's
  ``ibv_devinfo -v -d <name>`` (or ``ibstat <name>``) output. A device whose port the facts list as active
  and whose command failed or timed out is a fail (the command interface hung under load).

Subjects: ``src->dst`` for a measurement (params tool, device, memory), ``node/device`` for a rail, the
node for the control path. Expected values: ``baselines/collectives.yml`` (matched on ``rail_class``,
``rail_gbps``).
"""

from __future__ import annotations

import re
from typing import Any

from clustereval import parsers
from clustereval.checks import Context, HarnessError, Skip, Verdict, check, isolation, tail_lines
from clustereval.checks.collectives import graded, limit_for
from clustereval.results import component_subject, pair_subject, worst

PERF, CONTROL, AREA = "perftest", "rdma_control", "collectives"
_HEADER = re.compile(r"^#\s*device\s+(\S+)(.*)$")


def _rail(ctx: Context, host: str, device: str) -> tuple[str | None, float | None]:
    """(class, rate Gbit/s) of ``device``'s active port on ``host`` from its facts' ``nics``."""
    for nic in (ctx.host_facts.get(host) or {}).get("nics") or []:
        parts = str(nic).split()
        if len(parts) == 3 and parts[0].split("/")[0] == device and parts[2].endswith("G"):
            return parts[1], float(parts[2][:-1])
    return None, None


def _measurements(ctx: Context) -> list[dict[str, Any]]:
    out = []
    for host, name, instance, probe in ctx.instances(PERF):
        given, bits = dict(probe.get("params") or {}), instance.split(".")
        tool = given.get("tool") or bits[0]
        device = given.get("device") or (bits[1] if len(bits) > 1 else None)
        src = given.get("src") or host
        dst = given.get("dst") or (bits[-1] if len(bits) > 3 else None)
        classes, rates = zip(*[_rail(ctx, h, device) for h in (src, dst) if h], strict=False)
        known = [r for r in rates if r]
        rate = float(given["rate_gbps"]) if given.get("rate_gbps") else (min(known) if known else None)
        item = {"probe": probe, "name": name, "src": src, "dst": dst, "device": device,
                "params": {"tool": tool, "device": device, "memory": given.get("memory") or "host"},
                "facts": {"rail_class": next((c for c in classes if c), None), "rail_gbps": rate},
                "subject": pair_subject(src, dst or "?"), "data": None, "status": None, "why": ""}
        _parse(item)
        out.append(item)
    return out


def _parse(item: dict[str, Any]) -> None:
    probe = item["probe"]
    if probe.get("missing"):
        item["status"], item["why"] = "skip", "perftest is not installed (apt/dnf install perftest)"
    elif probe.get("timed_out"):
        item["status"] = "error" if probe.get("on_timeout") == "error" else "fail"
        item["why"] = f"did not finish within {probe.get('timeout')} s (a hang on the path)"
    else:
        try:
            data = parsers.parse("perftest", probe.get("stdout") or "")
        except parsers.ParseError as exc:
            last = tail_lines(probe.get("stderr") or "", 1)
            failed = probe.get("rc") not in (0, None)
            item["status"] = "fail" if failed else "error"
            item["why"] = f"exit status {probe.get('rc')}: {last[0] if last else exc}" if failed else str(exc)
            return
        if not data["rows"]:
            item["status"], item["why"] = "fail", (data["failures"] or ["no result row"])[0]
        else:
            item["data"] = data


def _no_result(item: dict[str, Any]) -> Verdict:
    return Verdict(item["status"], f"{item['subject']} {item['device']}: {item['why']}", subject=item["subject"],
                   params=item["params"], evidence={"_artifacts": [item["probe"].get("artifact")]})


def _judged(ctx: Context, kind: str, check_id: str, value_of, unit: str, label: str) -> list[Verdict]:
    # A run without a result is told apart by its tool's name (ib_write_lat); one with a result by its banner.
    items = [i for i in _measurements(ctx) if (i["data"] or {}).get("kind", "lat" if "lat" in str(i["params"]["tool"])
                                                                   else "bw") == kind]
    if not items:
        raise Skip(f"no perftest {label} test was kept (perftest@<tool>.<rail>.<src>.<dst> probes)")
    verdicts = []
    for item in items:
        if item["data"] is None:
            verdicts.append(_no_result(item))
            continue
        value = value_of(item["data"])
        facts = {**item["facts"]}
        base = {"subject": item["subject"], "params": item["params"]}
        evidence = {**facts, "link_type": item["data"].get("link_type"), "_artifacts": [item["probe"].get("artifact")]}
        try:
            limit = limit_for(ctx, check_id, facts, item["params"])
        except Skip as exc:
            verdicts.append(Verdict("skip", f"{item['subject']} {item['device']}: {value:.4g} {unit}; {exc}",
                                    round(value, 4), unit, None, evidence, **base))
            continue
        status = graded(value, limit)
        side = "below" if limit.direction == "higher" else "above"
        level = limit.fail if status == "fail" else limit.warn
        summary = f"{item['subject']} {item['device']} {label}: {value:.4g} {unit}" + (
            "" if status == "pass" else f", {side} {level:.4g} {unit} ({limit.basis or limit.matched})")
        verdicts.append(Verdict(status, summary, round(value, 4), unit, limit.expected(), evidence, **base))
    return verdicts


@check("network.rdma.bandwidth")
def bandwidth(ctx: Context) -> list[Verdict]:
    return _judged(ctx, "bw", "network.rdma.bandwidth", lambda d: float(d["max_bw_avg_gbitps"] or 0.0),
                   "Gbit/s", "bandwidth")


def _latency(data: dict[str, Any]) -> float:
    row = min(data["rows"], key=lambda r: r["size_bytes"] or 0)  # the smallest message is the latency
    value = row.get("t_typical_us", row.get("t_avg_us"))
    if value is None:
        raise HarnessError("perftest latency table has no t_typical or t_avg column")
    return float(value)


@check("network.rdma.latency")
def latency(ctx: Context) -> list[Verdict]:
    return _judged(ctx, "lat", "network.rdma.latency", _latency, "µs", "latency")


@check("network.rdma.rail_isolation")
def rail_isolation(ctx: Context) -> list[Verdict]:
    items = [i for i in _measurements(ctx) if i["data"] is not None and i["data"].get("kind") == "bw" and i["dst"]]
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for item in items:
        key = (item["params"]["tool"], item["params"]["memory"], item["facts"]["rail_gbps"])
        groups.setdefault(key, []).append(item)
    verdicts = []
    for (tool, memory, _rate), group in sorted(groups.items(), key=str):
        rates = [float(i["data"]["max_bw_avg_gbitps"] or 0.0) for i in group]
        if len(group) < 3:
            continue  # with two measurements the slower cannot be told from a slow peer
        limit = limit_for(ctx, "network.rdma.rail_isolation", {}, {"tool": tool, "memory": memory}, peers=rates)
        grades = {(component_subject(i["src"], i["device"]), component_subject(i["dst"], i["device"])):
                  graded(r, limit) for i, r in zip(group, rates, strict=True)}
        found = isolation.culprits({pair: g == "pass" for pair, g in grades.items()})
        measured = {}
        for (a, b), g in grades.items():
            for rail in (a, b):
                measured.setdefault(rail, []).append(g)
        unresolved = {n for pair in found["unresolved"] for n in pair}
        for rail, statuses in sorted(measured.items()):
            rail_rates = [r for (pair, _), r in zip(grades.items(), rates, strict=True) if rail in pair]
            if rail in found["bad_nodes"]:
                status, why = worst(statuses), "below its peers in every pair it is in"
            elif rail in unresolved:
                status, why = "warn", "in a slow pair; re-pair it with a good rail to tell which end"
            else:
                status, why = "pass", "at its peers' level"
            verdicts.append(Verdict(status, f"{rail} ({tool}, {memory} memory): {max(rail_rates):.4g} Gbit/s, {why} "
                                    f"(median {limit.reference:.4g})", round(max(rail_rates), 4), "Gbit/s",
                                    limit.expected(), {"pairs": len(statuses), "bad_links": found["bad_links"]},
                                    subject=rail, params={"tool": tool, "memory": memory}))
    if not verdicts:
        raise Skip("rail isolation needs three or more bandwidth measurements of rails at the same rate")
    return verdicts


def _sections(text: str) -> list[tuple[str, dict[str, str], str]]:
    out, current = [], None
    for line in text.split("\n"):
        header = _HEADER.match(line.strip())
        if header:
            fields = dict(re.findall(r"(\w+)=(\S+)", header.group(2)))
            current = (header.group(1), fields, [])
            out.append(current)
        elif current is not None:
            current[2].append(line)
    return [(name, fields, "\n".join(lines)) for name, fields, lines in out]


def _seconds(text: str | None) -> float | None:
    try:
        return float(text) if text is not None else None
    except ValueError:
        return None


def _active(ctx: Context, host: str, device: str) -> bool | None:
    nics = (ctx.host_facts.get(host) or {}).get("nics")
    if nics is None:
        return None
    return any(str(n).split()[0].split("/")[0] == device and not str(n).endswith("down") for n in nics)


@check("network.rdma.control_path")
def control_path(ctx: Context) -> list[Verdict]:
    verdicts = []
    for host, _, _, probe in ctx.instances(CONTROL):
        base = {"subject": host, "evidence": {"_artifacts": [probe.get("artifact")]}}
        if probe.get("missing"):
            verdicts.append(Verdict("skip", f"{host}: ibv_devinfo is not installed (rdma-core)", **base))
            continue
        if probe.get("timed_out"):
            verdicts.append(Verdict("fail", f"{host}: the RDMA control probe hung past {probe.get('timeout')} s",
                                    **base))
            continue
        sections = _sections(probe.get("stdout") or "")
        if not sections:
            verdicts.append(Verdict("error", f"{host}: no '# device' section in the control probe's output",
                                    **base))
            continue
        dead, slow, quiet = [], [], []
        for device, fields, text in sections:
            answered = fields.get("rc") == "0"
            if answered:
                try:
                    tool = "ibstat" if text.lstrip().startswith("CA ") else "ibv_devinfo"
                    answered = bool(parsers.parse(tool, text).get("ports"))
                except parsers.ParseError:
                    answered = False
            seconds, budget = (_seconds(fields.get(k)) for k in ("seconds", "timeout"))
            if not answered:
                (dead if _active(ctx, host, device) is not False else quiet).append(device)
            elif seconds and budget and seconds > budget / 2:
                slow.append(f"{device} ({seconds:g} s of {budget:g})")
        status = "fail" if dead else ("warn" if slow or quiet else "pass")
        parts = ([f"active device(s) not answering: {', '.join(dead)}"] if dead else []) + (
            [f"slow to answer: {', '.join(slow)}"] if slow else []) + (
            [f"not answering, port not active: {', '.join(quiet)}"] if quiet else [])
        answering = len(sections) - len(dead) - len(quiet)
        summary = f"{host}: " + ("; ".join(parts) if parts else f"all {len(sections)} RDMA devices answer")
        base["evidence"].update(dead=dead, slow=slow, inactive_silent=quiet)
        verdicts.append(Verdict(status, summary, answering, "devices", None, **base))
    if not verdicts:
        raise Skip("no rdma_control@<node> probe was kept (it runs after perftest)")
    return verdicts
