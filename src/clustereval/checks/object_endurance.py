"""Object storage endurance (phase reliability): the S3 endpoint under a sustained mixed PUT/GET/LIST/DELETE load
from the nodes (``clustereval_s3bench.py --endurance``, parser ``clustereval-s3bench-endurance``), judged once per
cluster.

Each participating node kept one ``object_storage_endurance`` probe: one line per interval, all nodes on the same
schedule. The cluster's figure for an interval is the sum of the nodes' rates (the intervals of one index overlap);
latency histograms are added. Decay and first-byte drift compare the last quarter of the run with its first
interval; throttling (503 SlowDown, 429) and errors are counted over the whole run. The time series goes to
``series/_cluster/object-storage-endurance.csv``. With no endpoint configured every check is a skip saying so.
"""

from __future__ import annotations

from typing import Any

from clustereval import baselines
from clustereval.checks import Context, HarnessError, Skip, Verdict, check
from clustereval.checks.object_storage import NO_ENDPOINT, _subject, size_label
from clustereval.parsers import ParseError, parse
from clustereval.parsers.s3bench import merge, quantile

PROBE = "object_storage_endurance"
PARSER = "clustereval-s3bench-endurance"
AREA = "object_storage"
OPS = ("put", "get", "list", "delete")
COLUMNS = ["interval", "t_s", "mb_per_s", "ops_per_s", "get_ttfb_p99_ms", "requests", "failed", "throttled", "nodes"]
FAILURES = ("server", "client", "network", "short_reads")


class _Node:
    def __init__(self, host: str):
        self.host = host
        self.data: dict[str, Any] | None = None
        self.problem: str | None = None
        self.artifact: str | None = None


def _nodes(ctx: Context) -> list[_Node]:
    """Every participating node's parsed endurance output, or why there is none (kept per node)."""
    if not ctx.options.get("endpoint"):
        raise Skip(NO_ENDPOINT)
    hosts = list(ctx.options.get("hosts") or sorted(ctx.host_probes))
    if not hosts:
        raise HarnessError("no node was given to load the endpoint from")
    nodes = []
    for host in hosts:
        node, record = _Node(host), (ctx.host_probes.get(host) or {}).get(PROBE)
        nodes.append(node)
        if record is None:
            node.problem = "kept no endurance output (the node did not run it: unreachable, or its task failed)"
            continue
        node.artifact = record.get("artifact")
        try:
            # A run cut short (timeout, Ctrl-C, lost node) still parses: its intervals are kept.
            node.data = parse(PARSER, record.get("stdout") or "")
        except ParseError as exc:
            node.problem = f"unreadable endurance output: {exc}"
            continue
        if record.get("timed_out"):
            node.problem = f"the endurance run did not finish within its {record.get('timeout')} s"
        elif record.get("rc") not in (0, None):
            node.problem = f"the endurance run exited with status {record.get('rc')}"
        elif not node.data["complete"]:
            node.problem = f"the endurance run stopped early: {node.data.get('fatal')}"
    return nodes


def _refused(node: _Node) -> str | None:
    preflight = (node.data or {}).get("preflight") or {}
    if preflight.get("ok") is False:
        bits = [str(preflight.get(k)) for k in ("status", "code", "error") if preflight.get(k) not in (None, "")]
        return f"{preflight.get('kind')}: {' '.join(bits)[:200]}"
    return None


class Run:
    """The cluster's intervals (summed over the nodes), the totals, and what kept it from being complete."""

    def __init__(self, ctx: Context):
        self.nodes = _nodes(ctx)
        self.subject = _subject(ctx, self.nodes)  # type: ignore[arg-type]  # same host/data/problem shape
        ran = [n for n in self.nodes if n.data and n.data["intervals"]]
        if not ran:
            problems = "; ".join(f"{n.host}: {n.problem or _refused(n) or 'no interval measured'}" for n in self.nodes)
            if any(_refused(n) for n in self.nodes) and not all(n.problem for n in self.nodes):
                raise Skip(f"not measured: no node could use {self.subject} (see storage.object.endpoint): {problems}")
            raise HarnessError(f"no node measured {self.subject}: {problems}")
        self.problems = [f"{n.host}: {n.problem or _refused(n)}" for n in self.nodes if n.problem or _refused(n)]
        settings = ran[0].data["settings"]  # type: ignore[index]
        self.params = {"object_size": size_label(int(settings.get("endurance_bytes") or 0))}
        by_index: dict[int, list[tuple[str, dict[str, Any]]]] = {}
        self.totals = {kind: 0 for kind in ("requests", "failed", "throttled", *FAILURES)}
        self.samples: list[dict[str, Any]] = []
        t0 = min(i["start"] for n in ran for i in n.data["intervals"])  # type: ignore[index]
        for node in ran:
            for interval in node.data["intervals"]:  # type: ignore[index]
                for op, stats in interval["ops"].items():
                    for kind in self.totals:
                        self.totals[kind] += stats["errors"].get(kind, 0)
                    self.samples += [{**s, "node": node.host, "op": op} for s in stats["errors"]["samples"]]
                if not interval["tail"]:  # the tail is a fraction of a second: no rate of its own
                    by_index.setdefault(interval["index"], []).append((node.host, interval))
        self.rows = []
        for index in sorted(by_index):
            parts = by_index[index]
            gets = [i["ops"]["get"]["ttfb"] for _, i in parts if "get" in i["ops"]]
            p99 = quantile(merge(gets), 0.99) if gets else None
            errors = [s["errors"] for _, i in parts for s in i["ops"].values()]
            self.rows.append({
                "interval": index, "t_s": round(min(i["start"] for _, i in parts) - t0, 3),
                "mb_per_s": round(sum(i["mb_per_s"] for _, i in parts), 3),
                "ops_per_s": round(sum(i["ops_per_s"] for _, i in parts), 3),
                "get_ttfb_p99_ms": None if p99 is None else round(p99 * 1000, 3),
                "requests": sum(e["requests"] for e in errors), "failed": sum(e["failed"] for e in errors),
                "throttled": sum(e["throttled"] for e in errors), "nodes": "|".join(h for h, _ in parts)})
        self.samples = self.samples[:5]
        self.artifacts = [n.artifact for n in self.nodes if n.artifact]

    def series(self, first: bool) -> list[dict[str, Any]]:
        entry: dict[str, Any] = {"path": "series/_cluster/object-storage-endurance.csv", "kind": "timeseries",
                                 "x": "t_s", "columns": COLUMNS}
        if first:
            entry["data"] = self.rows
        return [entry]

    def first_and_last(self, column: str) -> tuple[float | None, float | None, int]:
        """The first interval's value and the mean of the last quarter's (at least one interval)."""
        values = [r[column] for r in self.rows if r[column] is not None]
        if len(values) < 2:
            return None, None, len(values)
        tail = values[-max(1, len(values) // 4):]
        return values[0], sum(tail) / len(tail), len(values)

    def evidence(self, **extra: Any) -> dict[str, Any]:
        return {**extra, "totals": self.totals, "intervals": len(self.rows), "problems": self.problems,
                "samples": self.samples, "_artifacts": self.artifacts}


def _limit(ctx: Context, check_id: str, params: dict[str, Any]) -> baselines.Limit:
    try:
        return baselines.reference(AREA, check_id, ctx.facts, params, ctx.options.get("baseline_overrides"))
    except baselines.NoReference as exc:
        raise Skip(str(exc)) from None


def _finish(run: Run, status: str, summary: str) -> tuple[str, str]:
    """A run that lost a node or stopped early cannot pass: its figure is not the whole load."""
    if run.problems and status == "pass":
        return "error", f"{summary}; but not every node ran the whole load: {run.problems[0]}"
    if run.problems:
        return status, f"{summary}; not every node ran the whole load: {run.problems[0]}"
    return status, summary


def _drift(ctx: Context, check_id: str, column: str, unit: str, what: str, first_series: bool) -> Verdict:
    run = Run(ctx)
    base = {"subject": run.subject, "params": run.params, "series": run.series(first_series)}
    first, last, count = run.first_and_last(column)
    if first is None or last is None:
        return Verdict("error" if run.problems else "skip",
                       f"{what} on {run.subject}: {count} interval(s) measured, at least 2 are needed"
                       + (f" ({run.problems[0]})" if run.problems else " (a run shorter than two intervals)"),
                       evidence=run.evidence(), **base)
    lim = _limit(ctx, check_id, run.params)
    if column == "mb_per_s":
        if first <= 0:
            return Verdict("fail", f"{what} on {run.subject}: nothing moved in the first interval",
                           0.0, unit, lim.expected(), run.evidence(first=first, last_quarter=last), **base)
        value = round(max(0.0, 100.0 * (first - last) / first), 2)
        summary = (f"{what} on {run.subject}: {last:.1f} MB/s over the last quarter against {first:.1f} MB/s in the "
                   f"first interval ({value:g}% lower, {count} intervals)")
    else:
        value = round(last / first, 3) if first > 0 else 0.0
        summary = (f"{what} on {run.subject}: GET p99 first byte {last:.1f} ms over the last quarter against "
                   f"{first:.1f} ms in the first interval ({value:g}x, {count} intervals)")
    status = baselines.grade(value, lim)
    if status != "pass":
        summary += f", {baselines.shortfall(value, lim, unit)}"
    status, summary = _finish(run, status, summary)
    return Verdict(status, summary, value, unit, lim.expected(), run.evidence(first=first, last_quarter=last), **base)


def _count(ctx: Context, check_id: str, kinds: tuple[str, ...], noun: str) -> Verdict:
    run = Run(ctx)
    base = {"subject": run.subject, "params": run.params}
    requests = run.totals["requests"]
    counted = {k: run.totals[k] for k in kinds if run.totals[k]}
    if not requests:
        return Verdict("error", f"no request was sent to {run.subject}", evidence=run.evidence(), **base)
    failed = sum(counted.values())
    value = round(100.0 * failed / requests, 4)
    lim = _limit(ctx, check_id, run.params)
    status = baselines.grade(value, lim)
    if failed:
        # "failed" in a row counts every failure, the throttled ones too.
        def per_row(row: dict[str, Any]) -> int:
            return row["throttled"] if noun == "throttled" else row["failed"] - row["throttled"]

        worst = max(run.rows, key=per_row, default=None)
        summary = f"{run.subject}: {failed} of {requests} requests {noun} ({value:g}%) {counted}"
        if worst is not None and per_row(worst):
            summary += f", most at t={worst['t_s']:g} s"
        shown = [s for s in run.samples if (s.get("status") in (429, 503)) == (noun == "throttled")]
        if shown:
            summary += "; first: " + " ".join(str(shown[0].get(k)) for k in ("node", "op", "status", "code", "error")
                                              if shown[0].get(k))[:160]
    else:
        summary = f"{run.subject}: none of {requests} requests {noun} over {len(run.rows)} intervals"
    status, summary = _finish(run, status, summary)
    return Verdict(status, summary, value, "%", lim.expected(), run.evidence(counted=counted), **base)


@check("storage.object.endurance.decay")
def decay(ctx: Context) -> Verdict:
    """The cluster's PUT+GET MB/s of the last quarter of the sustained load below its first interval."""
    return _drift(ctx, "storage.object.endurance.decay", "mb_per_s", "%", "Sustained mixed load", True)


@check("storage.object.endurance.ttfb_drift")
def ttfb_drift(ctx: Context) -> Verdict:
    """The GET p99 time to first byte of the last quarter over the first interval's."""
    return _drift(ctx, "storage.object.endurance.ttfb_drift", "get_ttfb_p99_ms", "ratio", "First-byte drift",
                  False)


@check("storage.object.endurance.throttled")
def throttled(ctx: Context) -> Verdict:
    """Requests answered 503 SlowDown (or 429) over the whole sustained load, in %."""
    return _count(ctx, "storage.object.endurance.throttled", ("throttled",), "throttled")


@check("storage.object.endurance.errors")
def errors(ctx: Context) -> Verdict:
    """Requests that failed otherwise (5xx, 4xx, connection errors, short reads) over the load, in %."""
    return _count(ctx, "storage.object.endurance.errors", FAILURES, "failed")
