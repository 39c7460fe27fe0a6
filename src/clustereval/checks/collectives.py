"""Collectives: nccl-tests / rccl-tests runs judged once per cluster (busbw, correctness, curve, completion).

The role launches each run from one node (mpirun, srun or torchrun) and keeps its stdout there as a probe
(``collect_for``); the checks read every node's kept probes back (``load_probes``, ``Context.host_probes``),
as the mesh does. The contract with the role:

* **name**: ``nccl@<collective>.<label>`` — ``<collective>`` as nccl-tests names it (``all_reduce``,
  ``all_gather``, ``reduce_scatter``, ``alltoall``...), ``<label>`` free text telling the role's variants
  apart (``n2-nvls``, ``n1-nonvlink``, ``pair-node1-node2``);
* **params** (the probe record's ``params``; strings as the environment passes them are accepted):
  ``collective`` (else the name's), ``nodes`` (list of host names, or a comma-separated string; else the
  hosts in the rank lines), ``world_size`` (ranks; else the rank lines'), ``gpus_per_node``, ``launcher``
  (mpirun | srun | torchrun), ``nvlink`` (true, or false for the run with NCCL_P2P_DISABLE=1
  NCCL_SHM_DISABLE=1; default true), ``nvls`` (true/false; unknown when absent: the ring figure applies);
* **record**: the probe runner's ``{cmd, rc, stdout, stderr, duration_s, timed_out, timeout, on_timeout,
  missing, params, artifact}`` and ``parser`` (``nccl-tests`` or ``rccl-tests``; default ``nccl-tests``).
  A timeout is a hang, the cluster's fault (fail), unless the record says ``on_timeout: error``.

Every result's subject is the run's node set (``node1+node2``; one node's name for a single-node run;
``_cluster`` when the nodes are unknown) and its params the variant (collective, world_size, nodes as a
count, launcher, nvlink, nvls; busbw adds ``size``). Expected values: ``baselines/collectives.yml``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from clustereval import baselines, parsers
from clustereval import facts as facts_mod
from clustereval.checks import CLUSTER_SUBJECT, Context, Skip, Verdict, check, tail_lines
from clustereval.results import set_subject

PROBE, AREA = "nccl", "collectives"
LATENCY_BYTES = 64 << 10
SIZES = {"64MiB": 64 << 20, "1GiB": 1 << 30, "8GiB": 8 << 30}
# Below 1 MiB the curve is latency-bound and protocol switches make it rough by design: not judged for shape.
CURVE_FROM = 1 << 20
HINTS = {"roce": "on RoCE set NCCL_IB_GID_INDEX to the RoCE v2 GID (show_gids)",
         "efa": "on EFA check the aws-ofi-nccl plugin is found (NCCL_DEBUG=INFO prints NET/OFI)"}
GENERIC_HINTS = ("name the rails in NCCL_IB_HCA", "pin the bootstrap with NCCL_SOCKET_IFNAME to a routed interface",
                 "check the network plugin ({plugins}) is loaded")
# The network plugins each library loads (NCCL_NET_PLUGIN), and what carries its intra-node traffic (what the
# NCCL_P2P_DISABLE run turns off): RCCL reads the same NCCL_* variables; AMD's ANP serves its Pollara NICs.
NET_PLUGINS = {"nvidia": "aws-ofi-nccl, nccl-rdma-sharp-plugins", "amd": "aws-ofi-rccl, AMD ANP librccl-anp"}
GPU_LINK = {"nvidia": "NVLink", "amd": "XGMI"}


def plugins(vendor: str | None) -> str:
    return NET_PLUGINS.get(vendor or "nvidia", NET_PLUGINS["nvidia"])


def generic_hints(vendor: str | None) -> list[str]:
    return [hint.format(plugins=plugins(vendor)) for hint in GENERIC_HINTS]


def flag(value: Any, default: bool | None = None) -> bool | None:
    """A boolean param as a role passes it (true, "false", "0", 1...); ``default`` when absent or unclear."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower() if value is not None else ""
    return {"true": True, "yes": True, "1": True, "on": True,
            "false": False, "no": False, "0": False, "off": False}.get(text, default)


@dataclass
class Run:
    """One collective run as kept by its launching node: its variant, and either parsed data or why not."""

    host: str
    name: str
    probe: dict[str, Any]
    nodes: list[str]
    params: dict[str, Any]
    data: dict[str, Any] | None = None
    status: str | None = None  # set when there is no measurement: skip, fail or error
    why: str = ""
    evidence: dict[str, Any] = field(default_factory=dict)
    vendor: str | None = None  # the nodes' GPU vendor fact (nvidia, amd): names the GPU link and the plugins

    @property
    def subject(self) -> str:
        return set_subject(self.nodes) if self.nodes else CLUSTER_SUBJECT

    def verdict(self, prefix: str, **extra: Any) -> Verdict:
        """The verdict of a run without a measurement (its status and why), for any check."""
        return Verdict(self.status or "error", f"{self.label}: {prefix}{self.why}", subject=self.subject,
                       params={**self.params, **extra}, evidence={**self.evidence, "_artifacts": self.artifacts})

    @property
    def label(self) -> str:
        where = self.subject if self.subject != CLUSTER_SUBJECT else "the cluster"
        link = GPU_LINK.get(self.vendor or "nvidia", "NVLink")
        return f"{self.params['collective']} on {where}" + ("" if self.params.get("nvlink") is not False
                                                            else f" ({link} off)")

    @property
    def artifacts(self) -> list[str]:
        return [self.probe["artifact"]] if self.probe.get("artifact") else []


def _nodes(value: Any) -> list[str]:
    if isinstance(value, str):
        return [n.strip() for n in value.split(",") if n.strip()]
    return [str(n) for n in value] if isinstance(value, list | tuple) else []


def _measure(run: Run) -> None:
    probe = run.probe
    tool = probe.get("parser") or "nccl-tests"
    binary = str(probe.get("tool") or probe.get("cmd") or "all_reduce_perf").split()[0]
    if probe.get("missing"):
        how = ("install PyTorch with its CUDA or ROCm build" if tool == "torch-distributed" else
               "build nccl-tests (github.com/NVIDIA/nccl-tests, `make MPI=1`; rccl-tests for ROCm)")
        run.status, run.why = "skip", f"`{binary}` is not installed on {run.host}: {how}"
        return
    if probe.get("timed_out"):
        run.status = "error" if probe.get("on_timeout") == "error" else "fail"
        run.why = f"did not finish within {probe.get('timeout')} s (a hang)"
        run.evidence["last_lines"] = (tail_lines(probe.get("stdout") or "", 10)
                                      + tail_lines(probe.get("stderr") or "", 5))
        return
    try:
        run.data = parsers.parse(tool, probe.get("stdout") or "")
    except parsers.ParseError as exc:
        last = tail_lines(probe.get("stderr") or "", 1) or tail_lines(probe.get("stdout") or "", 1)
        if probe.get("rc") not in (0, None):
            run.status, run.why = "fail", f"did not start (exit status {probe.get('rc')}): {last[0] if last else exc}"
        else:
            run.status, run.why = "error", f"could not parse the output: {exc}"
        return
    if not run.data["rows"]:
        run.status, run.why = "fail", f"failed before its results: {(run.data['failures'] or ['no row'])[0]}"
        run.evidence["failures"], run.data = run.data["failures"][:5], None


def runs(ctx: Context, template: str = PROBE) -> list[Run]:
    """Every ``<template>@...`` probe any node kept, with its variant normalised and its output parsed."""
    out = []
    for host, name, instance, probe in ctx.instances(template):
        given = dict(probe.get("params") or {})
        run = Run(host, name, probe, _nodes(given.get("nodes")), {})
        key = f"collectives:{id(probe)}"
        if key not in ctx.parse_cache:
            _measure(run)
            ctx.parse_cache[key] = (run.data, run.status, run.why, run.evidence)
        run.data, run.status, run.why, run.evidence = ctx.parse_cache[key]
        data = run.data or {}
        run.nodes = run.nodes or list(data.get("hosts") or [])
        world = given.get("world_size") or data.get("nranks") or data.get("world_size")
        run.params = {"collective": given.get("collective") or instance.split(".")[0],
                      "world_size": int(world) if world else None, "nodes": len(run.nodes) or None,
                      "launcher": given.get("launcher"), "nvlink": flag(given.get("nvlink"), True),
                      "nvls": flag(given.get("nvls"))}
        run.vendor = facts_mod.for_subject(ctx.host_facts, run.subject).get("gpu_vendor") if run.nodes else None
        if str(given.get("round") or "").isdigit():
            # an isolation pair repeats a node set the sweep also ran: its round keeps the results apart
            run.params["round"] = int(given["round"])
        out.append(run)
    return out


def best_rows(data: dict[str, Any]) -> dict[int, dict[str, float | None]]:
    """Per message size: the better busbw of out-of-place and in-place and the shorter time (both measure the
    same collective; a repeated size keeps its best)."""
    out: dict[int, dict[str, float | None]] = {}
    for row in data["rows"]:
        bws = [v for v in (row.get("busbw_gbps"), row.get("in_place_busbw_gbps")) if v is not None]
        times = [v for v in (row.get("time_us"), row.get("in_place_time_us")) if v is not None]
        seen = out.setdefault(row["size_bytes"], {"busbw": None, "time_us": None})
        if bws:
            seen["busbw"] = max(bws + ([seen["busbw"]] if seen["busbw"] is not None else []))
        if times:
            seen["time_us"] = min(times + ([seen["time_us"]] if seen["time_us"] is not None else []))
    return dict(sorted(out.items()))


def subject_facts(ctx: Context, run: Run) -> dict[str, Any]:
    """The run's hardware facts (shared by its nodes) and the node's network bandwidth in GB/s."""
    facts = facts_mod.for_subject(ctx.host_facts, run.subject)
    rate, ports = facts.get("fabric_rate_gbps"), facts.get("fabric_ports_active")
    facts["fabric_node_gbytes"] = rate * ports / 8 if rate and ports else None
    return facts


def limit_for(ctx: Context, check_id: str, facts: dict[str, Any], params: dict[str, Any],
              peers: list[float] | None = None) -> baselines.Limit:
    """The expected value, or Skip naming the facts and params looked for."""
    try:
        return baselines.reference(AREA, check_id, facts, params, ctx.options.get("baseline_overrides"), peers=peers)
    except baselines.NoReference as exc:
        shown = ", ".join(f"{k}={v}" for k, v in params.items() if k != "nodes_list")
        raise Skip(f"{exc}; variant {shown}") from None


graded = baselines.graded


def describe(value: float, limit: baselines.Limit, unit: str) -> str:
    return baselines.shortfall(value, limit, unit)


def human(size: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if size >= 1 << shift and size % (1 << shift) == 0:
            return f"{size >> shift} {unit}"
    return f"{size} B"


def _point(ctx: Context, run: Run, rows: dict, size: str, facts: dict) -> Verdict:
    params = {**run.params, "size": size}
    base = {"subject": run.subject, "params": params}
    sizes = [s for s, r in rows.items() if r["busbw"] is not None]
    if size == "64KiB":
        check_id, unit, row = "network.nccl.latency", "µs", rows.get(LATENCY_BYTES) or {}
        value, at = row.get("time_us"), LATENCY_BYTES
    elif size == "peak":
        check_id, unit = "network.nccl.busbw", "GB/s"
        at = max(sizes, key=lambda s: rows[s]["busbw"]) if sizes else None
        value = rows[at]["busbw"] if at is not None else None
    else:
        check_id, unit, at = "network.nccl.busbw", "GB/s", SIZES[size]
        value = (rows.get(at) or {}).get("busbw")
    if value is None:
        span = f"{human(min(rows))}..{human(max(rows))}" if rows else "nothing"
        return Verdict("skip", f"{run.label}: {size} was not measured (the sweep covered {span})", **base)
    try:
        limit = limit_for(ctx, check_id, facts, params)
    except Skip as exc:
        return Verdict("skip", f"{run.label} {size}: {value:.4g} {unit}; {exc}", round(value, 4), unit, **base)
    limit = limit.at(size) if check_id == "network.nccl.busbw" else limit
    status = graded(value, limit)
    what = f"{run.label} at {human(at)}" if size != "peak" else f"{run.label} peak at {human(at)}"
    summary = f"{what}: {value:.4g} {unit}" if status == "pass" else f"{what}: {describe(value, limit, unit)}"
    return Verdict(status, summary, round(value, 4), unit, limit.expected(),
                   {"size_bytes": at, "facts_matched": {k: facts.get(k) for k in
                                                       ("gpu_model", "gpu_count", "fabric_class", "fabric_rate_gbps",
                                                        "fabric_node_gbytes")}}, **base)


@check("network.nccl.busbw")
def busbw(ctx: Context) -> list[Verdict]:
    measured = runs(ctx)
    if not measured:
        raise Skip("no collective run was kept (nccl@<collective>.<label> probes): none was launched")
    verdicts = []
    for run in measured:
        if run.data is None:
            verdicts.append(run.verdict("no bus bandwidth: ", size="peak"))
            continue
        rows, facts = best_rows(run.data), subject_facts(ctx, run)
        points = [_point(ctx, run, rows, size, facts) for size in ("64KiB", *SIZES, "peak")]
        path = f"series/_cluster/nccl-{run.params['collective']}.csv"
        data = [{"probe": run.name, "subject": run.subject, "size_bytes": s, "busbw_gbps": r["busbw"],
                 "time_us": r["time_us"]} for s, r in rows.items()]
        for verdict in points:
            verdict.series = [{"path": path, "kind": "curve", "x": "size_bytes", "filter": {"probe": run.name}}]
            verdict.evidence["_artifacts"] = run.artifacts
        points[-1].series[0]["data"] = data  # once per run: write_pending joins every result's rows
        verdicts.extend(points)
    return verdicts
