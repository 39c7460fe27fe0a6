"""Inference checks (role inference): vLLM's own serving benchmark (``vllm bench serve``, its result block read by
``parsers/vllm_bench.py``) at several concurrencies against a vLLM server on each node (probe
``vllm_bench_sweep``) and against one vLLM instance over every node (``vllm_bench_nodes``: tensor parallel over
each node's GPUs, pipeline parallel over the nodes). Per concurrency (params ``concurrency``): failed requests and
the p99 of time to first token and time per output token against interactive-serving limits; across
concurrencies: output throughput growing with load.

Judged once for the cluster from what the nodes kept (``load_probes``, ``Context.host_probes``): a node's own
serve is that node's result, the serve over nodes the node set's (``node1+node2``); params carry ``nodes`` (the
count) beside ``concurrency``. ``options.across_nodes`` (the role planned a serve over nodes) lets a planned one
that left nothing say why (fewer than two nodes; the launching node ``options.launch_host`` kept nothing).

- ``skip``: the probe's own reason (no vLLM, no model, no GPU, no launcher: ``clustereval-skip:``), no p99 printed,
  a one-point sweep, a serve over nodes on a one-node evaluation.
- ``error`` (the harness): the server never answered (the last lines of its log), the launcher reached fewer nodes
  than asked (``clustereval-error:``), a block vLLM did not finish, the probe timed out or printed nothing readable.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from clustereval import baselines, parsers
from clustereval.checks import CLUSTER_SUBJECT, Context, Skip, Verdict, check, tail_lines
from clustereval.results import set_subject
from clustereval.workload_plan import node_names

PROBE, NODES_PROBE = "vllm_bench_sweep", "vllm_bench_nodes"


@dataclass
class Sweep:
    """One benchmark sweep as a node kept it: where it served, and either parsed output or why there is none."""

    nodes: list[str]
    record: dict[str, Any] | None = None
    data: dict[str, Any] | None = None
    status: str | None = None  # set when nothing was measured: skip or error
    why: str = ""
    evidence: dict[str, Any] = field(default_factory=dict)

    @property
    def subject(self) -> str:
        return set_subject(self.nodes) if self.nodes else CLUSTER_SUBJECT

    @property
    def label(self) -> str:
        return f"the serve over {self.subject}" if len(self.nodes) > 1 else f"the serve on {self.subject}"

    def params(self, **extra: Any) -> dict[str, Any]:
        return {**extra, "nodes": len(self.nodes)} if self.nodes else dict(extra)

    @property
    def artifacts(self) -> list[str]:
        return [self.record["artifact"]] if (self.record or {}).get("artifact") else []

    def verdict(self, status: str, summary: str, value: Any = None, unit: str | None = None,
                expected: dict[str, Any] | None = None, evidence: dict[str, Any] | None = None,
                series: list[dict[str, Any]] | None = None, **params: Any) -> Verdict:
        # A node's own serve keeps the summaries it always had; a serve over nodes names its node set.
        text = summary if len(self.nodes) <= 1 else f"{self.label}: {summary}"
        return Verdict(status, text, value, unit, expected, {**(evidence or {}), "_artifacts": self.artifacts},
                       series=list(series or []), params=self.params(**params), subject=self.subject)

    def unmeasured(self, **params: Any) -> Verdict:
        return self.verdict(self.status or "error", self.why, evidence=self.evidence, **params)


def _read(sweep: Sweep) -> None:
    record = sweep.record or {}
    if record.get("timed_out"):
        sweep.status = "error"
        sweep.why = (f"the benchmark did not finish within {record.get('timeout')} s "
                     f"(clustereval_inference_timeout_s)")
        sweep.evidence["last_lines"] = tail_lines(record.get("stdout") or "", 10)
        return
    try:
        data = parsers.parse(record.get("parser") or "probe-inference", record.get("stdout") or "")
    except parsers.ParseError as exc:
        sweep.status, sweep.why = "error", f"could not read the benchmark output: {exc}"
        return
    sweep.data = data
    if data.get("skip"):
        sweep.status, sweep.why = "skip", data["skip"]
    elif data.get("error"):
        sweep.status, sweep.why = "error", data["error"]
    elif data.get("server_error"):
        sweep.status, sweep.why = "error", f"the vLLM server did not come up: {data['server_error']}"


def sweeps(ctx: Context) -> list[Sweep]:
    """Every sweep a node kept (and a planned serve over nodes that kept nothing), parsed once."""
    key = "inference:sweeps"
    if key in ctx.parse_cache:
        return ctx.parse_cache[key]
    found: list[Sweep] = []
    for host, probes in sorted(ctx.host_probes.items()):
        for name in (PROBE, NODES_PROBE):
            record = (probes or {}).get(name)
            if record is None:
                continue
            nodes = (node_names((record.get("params") or {}).get("nodes")) or [host]) if name == NODES_PROBE else [host]
            sweep = Sweep(nodes, record)
            _read(sweep)
            found.append(sweep)
    hosts = sorted(ctx.host_probes)
    if ctx.options.get("across_nodes") and not any(len(s.nodes) > 1 for s in found):
        # With one node the serve over nodes has no node set: its skip is the cluster's (the node's own serve
        # keeps that node's subject to itself).
        sweep = Sweep(list(hosts) if len(hosts) > 1 else [])
        if len(hosts) < 2:
            sweep.status = "skip"
            sweep.why = (f"a serve over nodes needs two or more nodes; this evaluation has {len(hosts)} "
                         f"({', '.join(hosts) or 'none'})")
        else:
            launcher = ctx.options.get("launch_host") or hosts[0]
            sweep.status, sweep.why = "error", f"{launcher}, which launches the serve over nodes, kept no output of it"
        found.append(sweep)
    ctx.parse_cache[key] = found
    return found


def _all(ctx: Context) -> list[Sweep]:
    found = sweeps(ctx)
    if not found:
        raise Skip("no node kept a serving benchmark (none was reachable, or none ran)")
    return found


@check("inference.vllm.requests")
def failed_requests(ctx: Context) -> list[Verdict]:
    verdicts = []
    for sweep in _all(ctx):
        if sweep.status:
            verdicts.append(sweep.unmeasured())
            continue
        for run in sweep.data["runs"]:
            c = run["concurrency"]
            if "error" in run:
                verdicts.append(sweep.verdict("error", f"vLLM's benchmark at concurrency {c} printed no readable "
                                              f"result: {run['error']}", concurrency=c))
                continue
            res = run["result"]
            if not res.get("complete"):
                verdicts.append(sweep.verdict("error", f"vLLM's benchmark at concurrency {c} stopped before its "
                                              f"result block ended (cut short, or the benchmark died)", concurrency=c))
                continue
            failed, done = int(res.get("failed_requests") or 0), int(res.get("successful_requests") or 0)
            evidence = {"successful": done, "failed": failed, "duration_s": res.get("duration_s"),
                        "launch": sweep.data.get("launch") or None}
            if failed or not done:
                verdicts.append(sweep.verdict("fail", f"{failed} of {failed + done} requests failed at concurrency "
                                              f"{c}", failed, "requests", evidence=evidence, concurrency=c))
            else:
                verdicts.append(sweep.verdict("pass", f"all {done} requests served at concurrency {c}", 0,
                                              "requests", evidence=evidence, concurrency=c))
    return verdicts


def _latency(ctx: Context, check_id: str, key: str, what: str) -> list[Verdict]:
    lim = ctx.limit("inference", check_id)
    verdicts = []
    for sweep in _all(ctx):
        if sweep.status:
            verdicts.append(sweep.unmeasured())
            continue
        for run in sweep.data["runs"]:
            c = run["concurrency"]
            value = (run.get("result") or {}).get(f"{key}_p99_ms")
            if value is None:
                verdicts.append(sweep.verdict("skip", f"no {what} p99 at concurrency {c} (an older vLLM prints no "
                                              f"percentiles; pass --percentile-metrics)", concurrency=c))
                continue
            status = baselines.grade(value, lim)
            text = f"{what} p99 {value:,.1f} ms at concurrency {c}"
            text += {"pass": "", "warn": f", over the {lim.warn:,} ms an interactive user waits",
                     "fail": f", over the failure level {lim.fail:,} ms"}[status]
            verdicts.append(sweep.verdict(status, text, value, "ms", lim.expected(),
                                          {"median_ms": run["result"].get(f"{key}_median_ms")}, concurrency=c))
    return verdicts


@check("inference.vllm.ttft")
def time_to_first_token(ctx: Context) -> list[Verdict]:
    return _latency(ctx, "inference.vllm.ttft", "ttft", "time to first token")


@check("inference.vllm.tpot")
def time_per_output_token(ctx: Context) -> list[Verdict]:
    return _latency(ctx, "inference.vllm.tpot", "tpot", "time per output token")


@check("inference.vllm.scaling")
def throughput_scaling(ctx: Context) -> list[Verdict]:
    """Output tokens/s at the highest concurrency against the best of the sweep: a server that serves less as
    load grows (KV-cache thrashing, preemption, a CPU-bound front end) saturates early."""
    lim = ctx.limit("inference", "inference.vllm.scaling")
    verdicts = []
    for sweep in _all(ctx):
        if sweep.status:
            verdicts.append(sweep.unmeasured())
            continue
        points = sorted((r["concurrency"], float(r["result"].get("output_throughput_tok_per_s") or 0.0))
                        for r in sweep.data["runs"] if "result" in r)
        if len(points) < 2:
            verdicts.append(sweep.verdict("skip", f"{len(points)} concurrency level(s) measured: no curve"))
            continue
        best = max(points, key=lambda p: p[1])
        if best[1] <= 0:
            verdicts.append(sweep.verdict("fail", "vLLM generated no tokens at any concurrency", 0.0, "ratio"))
            continue
        ratio = round(points[-1][1] / best[1], 3)
        status = baselines.grade(ratio, lim)
        shape = " → ".join(f"{c}: {t:,.0f}" for c, t in points)
        text = f"output tok/s by concurrency {shape}; {ratio:.0%} of the best at the highest"
        if status != "pass":
            text = f"throughput falls as load grows: {text}"
        series = [{"path": f"series/{sweep.subject}/vllm-bench.csv", "kind": "curve", "x": "concurrency",
                   "columns": ["concurrency", "output_tok_per_s"],
                   "data": [{"concurrency": c, "output_tok_per_s": t} for c, t in points]}]
        verdicts.append(sweep.verdict(status, text, ratio, "ratio", lim.expected(),
                                      {"points": points, "launch": sweep.data.get("launch") or None},
                                      series=series))
    return verdicts
