"""Object storage checks: one S3-compatible endpoint measured from the nodes with clustereval's own benchmark
(``roles/object_storage/files/clustereval_s3bench.py``, parser ``clustereval-s3bench``), judged once per cluster.

Each participating node kept one ``object_storage_bench`` probe: its share of a concurrency sweep (levels 1, 2,
4, ... requests in flight over the whole cluster, the workers of a level spread over the nodes, then over each
node's processes and threads), run on one schedule so the nodes' loads overlap. A level's figure is the sum of
the nodes' rates, each over its own window; latency histograms are added. The subject is the endpoint and bucket
(``s3:<host[:port]>/<bucket>``), the variants ``operation``, ``object_size`` and ``concurrency``; the curves go
to ``series/_cluster/object-storage-<check>.csv``. With no endpoint configured every check is a skip saying so.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from clustereval import baselines
from clustereval.checks import Context, HarnessError, Skip, Verdict, check
from clustereval.parsers import ParseError, parse
from clustereval.parsers.s3bench import PHASES, merge, quantile

PROBE = "object_storage_bench"
PARSER = "clustereval-s3bench"
AREA = "object_storage"
NO_ENDPOINT = ("no S3 endpoint configured: set clustereval_object_storage_endpoint, the bucket and the credentials "
               "(Vault or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY) to measure object storage")
# Preflight answers that are the cluster's (the endpoint or the path to it), not the harness settings'.
CLUSTER_KINDS = ("connect", "tls", "server", "throttled")
MIN_OVERLAP = 0.5
VERBS = {"put": "PUT", "get": "GET", "list": "LIST", "delete": "DELETE"}
ROW_COLUMNS = ["operation", "object_size", "concurrency", "workers", "nodes", "mb_per_s", "ops_per_s",
               "ttfb_p50_ms", "ttfb_p90_ms", "ttfb_p99_ms", "latency_p50_ms", "latency_p99_ms", "requests", "failed",
               "throttled"]


# ------------------------------------------------------------------------------------------------ reading


@dataclass
class Node:
    host: str
    data: dict[str, Any] | None = None
    problem: str | None = None
    artifact: str | None = None


def size_label(size: int) -> str:
    """``67108864`` -> ``64MiB``, ``4096`` -> ``4KiB``."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale:
            return f"{size / scale:g}{unit}"
    return f"{size}B"


def _nodes(ctx: Context) -> list[Node]:
    """The participating nodes' benchmark documents (or why there is none); no endpoint is a skip."""
    if not ctx.options.get("endpoint"):
        raise Skip(NO_ENDPOINT)
    hosts = list(ctx.options.get("hosts") or sorted(ctx.host_probes))
    if not hosts:
        raise HarnessError("no node was given to measure the endpoint from")
    nodes = []
    for host in hosts:
        record = (ctx.host_probes.get(host) or {}).get(PROBE)
        node = Node(host)
        nodes.append(node)
        if record is None:
            node.problem = "kept no benchmark output (the node did not run it: unreachable, or its task failed)"
            continue
        node.artifact = record.get("artifact")
        if record.get("timed_out"):
            node.problem = f"the benchmark did not finish within its {record.get('timeout')} s"
        elif record.get("rc") not in (0, None):
            tail = (record.get("stderr") or record.get("stdout") or "").strip().splitlines()
            node.problem = f"the benchmark exited with status {record.get('rc')}: {(tail[-1] if tail else '')[:300]}"
        else:
            try:
                node.data = parse(PARSER, record.get("stdout") or "")
            except ParseError as exc:
                node.problem = f"unreadable benchmark output: {exc}"
            else:
                if node.data["format"] != "json":
                    node.problem, node.data = "kept only a clean-up run's output", None
    return nodes


def _artifacts(nodes: list[Node]) -> list[str]:
    return [n.artifact for n in nodes if n.artifact]


def _subject(ctx: Context, nodes: list[Node]) -> str:
    settings = next((n.data["settings"] for n in nodes if n.data), None) or {}
    endpoint = settings.get("endpoint") or str(ctx.options.get("endpoint"))
    parts = urlsplit(endpoint if "://" in endpoint else f"https://{endpoint}")
    netloc = parts.netloc.rsplit("@", 1)[-1] or endpoint
    return f"s3:{netloc}/{settings.get('bucket') or ctx.options.get('bucket') or '?'}"


def _refused(node: Node) -> str | None:
    preflight = (node.data or {}).get("preflight") or {}
    if preflight.get("ok") is False:
        bits = [str(preflight.get(k)) for k in ("status", "code", "error") if preflight.get(k) not in (None, "")]
        return f"{preflight.get('kind')}: {' '.join(bits)[:200]}"
    return None


def _measured(ctx: Context) -> tuple[list[Node], str]:
    """The nodes whose sweep ran (at least one); a skip when no node could use the endpoint."""
    nodes = _nodes(ctx)
    subject = _subject(ctx, nodes)
    ran = [n for n in nodes if n.data and not _refused(n)]
    if not ran:
        problems = "; ".join(f"{n.host}: {n.problem or _refused(n)}" for n in nodes)
        if all(n.problem for n in nodes):
            raise HarnessError(f"no node measured {subject}: {problems}")
        raise Skip(f"not measured: no node could use {subject} (see storage.object.endpoint): {problems}")
    return nodes, subject


# ------------------------------------------------------------------------------------------------ the sweep


@dataclass
class Point:
    """One operation at one concurrency level, over every node."""

    phase: str
    operation: str
    size: int
    concurrency: int
    workers: int = 0
    nodes: list[dict[str, Any]] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    ops: int = 0
    bytes: int = 0
    items: int = 0
    mb_per_s: float = 0.0
    ops_per_s: float = 0.0
    items_per_s: float = 0.0
    errors: dict[str, int] = field(default_factory=dict)
    samples: list[dict[str, Any]] = field(default_factory=list)
    latency: dict[str, Any] = field(default_factory=dict)
    ttfb: dict[str, Any] = field(default_factory=dict)
    overlap: float | None = None
    late_s: float = 0.0

    @property
    def label(self) -> str:
        return size_label(self.size)

    @property
    def params(self) -> dict[str, Any]:
        return {"operation": self.operation, "object_size": self.label, "concurrency": self.concurrency}

    def what(self) -> str:
        noun = {"list": f"LIST of {self.label} objects", "delete": f"DELETE of {self.label} objects"}
        return noun.get(self.operation, f"{VERBS[self.operation]} {self.label}")

    def ms(self, hist: dict[str, Any], q: float) -> float | None:
        value = quantile(hist, q) if hist else None
        return None if value is None else round(value * 1000, 3)

    def row(self) -> dict[str, Any]:
        return {"operation": self.operation, "object_size": self.label, "concurrency": self.concurrency,
                "workers": self.workers, "nodes": len(self.nodes), "mb_per_s": round(self.mb_per_s, 3),
                "ops_per_s": round(self.ops_per_s, 3), "ttfb_p50_ms": self.ms(self.ttfb, 0.5),
                "ttfb_p90_ms": self.ms(self.ttfb, 0.9), "ttfb_p99_ms": self.ms(self.ttfb, 0.99),
                "latency_p50_ms": self.ms(self.latency, 0.5), "latency_p99_ms": self.ms(self.latency, 0.99),
                "requests": self.errors.get("requests", 0), "failed": self.errors.get("failed", 0),
                "throttled": self.errors.get("throttled", 0)}

    def evidence(self) -> dict[str, Any]:
        return {"nodes": self.nodes, "workers": self.workers, "ops": self.ops, "bytes": self.bytes,
                "requests": self.errors.get("requests", 0), "failed": self.errors.get("failed", 0),
                "overlap": self.overlap, "late_s": round(self.late_s, 3),
                "latency_p50_ms": self.ms(self.latency, 0.5), "latency_p99_ms": self.ms(self.latency, 0.99)}


def share(level: int, index: int, count: int) -> int:
    """The workers of ``level`` the ``index``-th of ``count`` nodes runs (as the node program spreads them)."""
    return level // count + (1 if index < level % count else 0)


def _sizes(settings: dict[str, Any]) -> dict[str, int]:
    return {"large": int(settings["large_bytes"]), "small": int(settings["small_bytes"])}


def sweep(nodes: list[Node]) -> list[Point]:
    """Every (phase, level) the settings planned, added up over the nodes that ran it, in sweep order."""
    ran = [n for n in nodes if n.data and not _refused(n)]
    settings = ran[0].data["settings"]
    sizes = _sizes(settings)
    points = []
    for index, level in enumerate(settings["levels"]):
        for phase, (operation, kind) in PHASES.items():
            point = Point(phase, operation, sizes[kind], int(level))
            windows, hists, ttfbs = [], [], []
            for position, node in enumerate(nodes):
                if node.data is None or _refused(node):
                    if share(int(level), position, len(nodes)):  # its share of this level did not run
                        point.missing.append(f"{node.host} ({node.problem or _refused(node)})")
                    continue
                levels = node.data["levels"]
                shares = node.data["settings"]["workers"]
                planned = shares[index] if index < len(shares) else 0
                entry = levels[index] if index < len(levels) else None
                stats = (entry or {}).get("phases", {}).get(phase)
                if planned and (entry is None or stats is None):
                    why = node.data.get("fatal") or "; ".join((entry or {}).get("fatal") or []) or "not reached"
                    point.missing.append(f"{node.host} ({str(why)[:200]})")
                    continue
                if not planned:
                    continue
                point.workers += entry["workers"]
                point.ops += stats["ops"]
                point.bytes += stats["bytes"]
                point.items += stats["items"]
                point.mb_per_s += stats["mb_per_s"]
                point.ops_per_s += stats["ops_per_s"]
                if stats["window_s"]:
                    point.items_per_s += stats["items"] / stats["window_s"]
                for key, value in stats["errors"].items():
                    if key == "samples":
                        point.samples += [{**s, "node": node.host} for s in value][:5 - len(point.samples)]
                    else:
                        point.errors[key] = point.errors.get(key, 0) + value
                hists.append(stats["latency"])
                ttfbs.append(stats["ttfb"])
                point.late_s = max(point.late_s, stats["late_s"])
                if stats["started"] is not None and stats["ended"] is not None:
                    windows.append((stats["started"], stats["ended"]))
                point.nodes.append({"host": node.host, "workers": entry["workers"], "processes": entry["processes"],
                                    "ops": stats["ops"], "mb_per_s": round(stats["mb_per_s"], 3),
                                    "ops_per_s": round(stats["ops_per_s"], 3), "window_s": stats["window_s"],
                                    "late_s": stats["late_s"]})
            point.latency, point.ttfb = merge(hists), merge(ttfbs)
            if len(windows) > 1:  # the part of the shortest window during which every node was loading
                shortest = min(end - start for start, end in windows)
                shared = min(end for _, end in windows) - max(start for start, _ in windows)
                point.overlap = round(max(0.0, min(1.0, shared / shortest)), 3) if shortest > 0 else 1.0
            elif windows:
                point.overlap = 1.0
            points.append(point)
    return points


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"


def _limit(ctx: Context, check_id: str, params: dict[str, Any]) -> baselines.Limit:
    try:
        return baselines.reference(AREA, check_id, ctx.facts, params, ctx.options.get("baseline_overrides"))
    except baselines.NoReference as exc:
        raise Skip(str(exc)) from None


def _not_judgeable(point: Point) -> str | None:
    """Why a point's figure is not the concurrent load its params name (a harness problem), or None."""
    if point.missing:
        return (f"{point.what()} at concurrency {point.concurrency}: only {point.workers} of {point.concurrency} "
                f"workers ran; not run on {', '.join(point.missing)}")
    if point.overlap is not None and point.overlap < MIN_OVERLAP:
        return (f"{point.what()} at concurrency {point.concurrency}: the nodes' loads overlapped only "
                f"{point.overlap:.0%} of the shortest window (a late start or clocks apart), so their sum is not "
                f"a concurrent load")
    return None


def _first_error(point: Point) -> str:
    if not point.samples:
        return ""
    sample = point.samples[0]
    text = " ".join(str(sample.get(k)) for k in ("status", "code", "message", "error") if sample.get(k))
    return f" (first: {sample.get('node')}: {text[:160]})"


def _series(check_short: str, point: Point, rows: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    entry: dict[str, Any] = {"path": f"series/_cluster/object-storage-{check_short}.csv", "kind": "curve",
                             "x": "concurrency", "columns": ROW_COLUMNS,
                             "filter": {"operation": point.operation, "object_size": point.label}}
    if rows is not None:
        entry["data"] = rows
    return [entry]


def _per_level(ctx: Context, check_id: str, phases: tuple[str, ...], measure: str, unit: str) -> list[Verdict]:
    """One verdict per (phase, level): the summed rate against the baseline (``measure``: mb_per_s, ops_per_s)."""
    nodes, subject = _measured(ctx)
    short = check_id.rsplit(".", 1)[-1]
    points = [p for p in sweep(nodes) if p.phase in phases]
    rows = [p.row() for p in points]
    verdicts = []
    for point in points:
        series = _series(short, point, rows if not verdicts else None)
        base = {"subject": subject, "params": point.params, "series": series}
        evidence = {**point.evidence(), "_artifacts": _artifacts(nodes)}
        wrong = _not_judgeable(point)
        if wrong:
            verdicts.append(Verdict("error", wrong, evidence=evidence, **base))
            continue
        value = round(getattr(point, measure), 2)
        try:
            lim = _limit(ctx, check_id, point.params)
        except Skip as exc:
            verdicts.append(Verdict("skip", f"{point.what()} at concurrency {point.concurrency}: {value:g} {unit}; "
                                    f"{exc}", value, unit, evidence=evidence, **base))
            continue
        where = f"{point.what()} at concurrency {point.concurrency} on {subject}"
        if point.ops == 0:
            verdicts.append(Verdict("fail", f"{where}: no request succeeded, {point.errors.get('failed', 0)} failed"
                                    f"{_first_error(point)}", 0.0, unit, lim.expected(), evidence, **base))
            continue
        status = baselines.grade(value, lim)
        summary = f"{where}: {value:g} {unit} ({_count(point.workers, 'worker')} on {_count(len(point.nodes), 'node')})"
        if status != "pass":
            summary += f", {baselines.shortfall(value, lim, unit)}"
        verdicts.append(Verdict(status, summary, value, unit, lim.expected(), evidence, **base))
    return verdicts


# ------------------------------------------------------------------------------------------------ checks


@check("storage.object.endpoint")
def endpoint(ctx: Context) -> Verdict:
    """Every node reached the endpoint, its credentials were accepted, and no object was left behind."""
    nodes = _nodes(ctx)
    subject = _subject(ctx, nodes)
    answers = {}
    for node in nodes:
        preflight = (node.data or {}).get("preflight") or {}
        answers[node.host] = {"problem": node.problem, "refused": _refused(node),
                              "latency_ms": None if preflight.get("latency_s") is None
                              else round(preflight["latency_s"] * 1000, 2),
                              "cleanup": (node.data or {}).get("cleanup")}
    evidence: dict[str, Any] = {"nodes": answers, "_artifacts": _artifacts(nodes)}
    kinds = {n.host: ((n.data or {}).get("preflight") or {}).get("kind") for n in nodes if _refused(n)}
    latencies = [a["latency_ms"] for h, a in answers.items() if a["latency_ms"] is not None and h not in kinds]
    value = max(latencies) if latencies else None
    lim = _limit(ctx, "storage.object.endpoint", {})
    cluster = {h: answers[h]["refused"] for h, k in kinds.items() if k in CLUSTER_KINDS}
    harness = {h: answers[h]["refused"] for h, k in kinds.items() if k not in CLUSTER_KINDS}
    unmeasured = {n.host: n.problem for n in nodes if n.problem}
    base = {"subject": subject, "evidence": evidence}
    if cluster:
        shown = "; ".join(f"{h}: {why}" for h, why in cluster.items())
        return Verdict("fail", f"{len(cluster)} of {len(nodes)} node(s) cannot use {subject}: {shown}", value, "ms",
                       lim.expected(), **base)
    if harness:
        shown = "; ".join(f"{h}: {why}" for h, why in harness.items())
        return Verdict("error", f"{subject} refused the benchmark's settings (credentials, bucket or policy), so "
                       f"nothing was measured: {shown}", value, "ms", **base)
    if unmeasured:
        shown = "; ".join(f"{h}: {why}" for h, why in unmeasured.items())
        return Verdict("error", f"the endpoint could not be tried from {len(unmeasured)} of {len(nodes)} node(s): "
                       f"{shown}", value, "ms", **base)
    left = {n.host: (n.data.get("cleanup") or {}) for n in nodes if n.data}
    leftovers = {h: c for h, c in left.items() if (c.get("left") or 0) > 0 or c.get("errors") or c.get("left") is None}
    status = baselines.grade(value, lim)
    summary = f"{subject} answered {_count(len(nodes), 'node')}, slowest first request {value:g} ms"
    if status != "pass":
        summary += f": {baselines.shortfall(value, lim, 'ms')}"
    if leftovers:
        prefix = next(n.data["settings"]["prefix"] for n in nodes if n.data)
        shown = "; ".join(f"{h}: {c.get('left')} left, {c.get('errors')} errors {c.get('samples')[:1]}"
                          for h, c in leftovers.items())
        summary += f"; test objects may remain under {prefix.rsplit('/', 2)[0]}/ ({shown})"
        status = "fail" if status == "fail" else "warn"
    else:
        summary += ", every test object deleted" if status == "pass" else ""
    return Verdict(status, summary, value, "ms", lim.expected(), **base)


@check("storage.object.throughput")
def throughput(ctx: Context) -> list[Verdict]:
    return _per_level(ctx, "storage.object.throughput", ("put_large", "get_large"), "mb_per_s", "MB/s")


@check("storage.object.small_rate")
def small_rate(ctx: Context) -> list[Verdict]:
    return _per_level(ctx, "storage.object.small_rate", ("put_small", "get_small"), "ops_per_s", "obj/s")


@check("storage.object.list_rate")
def list_rate(ctx: Context) -> list[Verdict]:
    return _per_level(ctx, "storage.object.list_rate", ("list",), "ops_per_s", "req/s")


@check("storage.object.delete_rate")
def delete_rate(ctx: Context) -> list[Verdict]:
    return _per_level(ctx, "storage.object.delete_rate", ("delete",), "ops_per_s", "obj/s")


@check("storage.object.first_byte_latency")
def first_byte_latency(ctx: Context) -> list[Verdict]:
    """p99 time to the first response byte of GETs, per object size and level (p50 and p90 in the evidence)."""
    nodes, subject = _measured(ctx)
    points = [p for p in sweep(nodes) if p.phase in ("get_large", "get_small")]
    rows = [p.row() for p in points]
    verdicts = []
    for point in points:
        base = {"subject": subject, "params": point.params,
                "series": _series("first_byte_latency", point, rows if not verdicts else None)}
        row = point.row()
        evidence = {**point.evidence(), "ttfb_p50_ms": row["ttfb_p50_ms"], "ttfb_p90_ms": row["ttfb_p90_ms"],
                    "ttfb_p99_ms": row["ttfb_p99_ms"], "samples": point.ttfb.get("count", 0),
                    "_artifacts": _artifacts(nodes)}
        wrong = _not_judgeable(point)
        if wrong:
            verdicts.append(Verdict("error", wrong, evidence=evidence, **base))
            continue
        where = f"{point.what()} at concurrency {point.concurrency} on {subject}"
        value = row["ttfb_p99_ms"]
        try:
            lim = _limit(ctx, "storage.object.first_byte_latency", point.params)
        except Skip as exc:
            verdicts.append(Verdict("skip", f"{where}: first byte p99 {value} ms; {exc}", value, "ms",
                                    evidence=evidence, **base))
            continue
        if value is None:
            verdicts.append(Verdict("fail", f"{where}: no GET succeeded, {point.errors.get('failed', 0)} failed"
                                    f"{_first_error(point)}", None, "ms", lim.expected(), evidence, **base))
            continue
        status = baselines.grade(value, lim)
        summary = (f"{where}: first byte p50 {row['ttfb_p50_ms']:g} ms, p90 {row['ttfb_p90_ms']:g} ms, "
                   f"p99 {value:g} ms")
        if status != "pass":
            summary += f"; {baselines.shortfall(value, lim, 'ms')}"
        verdicts.append(Verdict(status, summary, value, "ms", lim.expected(), evidence, **base))
    return verdicts


def _measure_of(point: Point) -> tuple[float, str]:
    if point.phase in ("put_large", "get_large"):
        return point.mb_per_s, "MB/s"
    return point.ops_per_s, "req/s" if point.phase == "list" else "obj/s"


def _curves(points: list[Point]) -> Iterator[tuple[Point, list[Point], dict[str, Any]]]:
    """Per phase that was measured, in the sweep's order: (its first point, its points by concurrency, the
    verdict's params)."""
    for phase in PHASES:
        curve = [p for p in points if p.phase == phase]
        if curve:
            yield curve[0], curve, {"operation": curve[0].operation, "object_size": curve[0].label}


@check("storage.object.scaling")
def scaling(ctx: Context) -> list[Verdict]:
    """Per operation: the rate at the highest concurrency against the best point of its curve."""
    nodes, subject = _measured(ctx)
    points = sweep(nodes)
    rows = [p.row() for p in points]
    verdicts = []
    lim = _limit(ctx, "storage.object.scaling", {})
    for head, curve, params in _curves(points):
        base = {"subject": subject, "params": params,
                "series": _series("scaling", head, rows if not verdicts else None)}
        usable = [p for p in curve if _not_judgeable(p) is None]
        what = head.what()
        if len(usable) < 2:
            wrong = [w for p in curve if (w := _not_judgeable(p))]
            if wrong:
                verdicts.append(Verdict("error", f"{what}: fewer than two levels were measured completely: "
                                        f"{wrong[0]}", **base))
            else:
                verdicts.append(Verdict("skip", f"{what} was measured at one concurrency level only "
                                        f"(clustereval_object_storage_max_concurrency is 1)", **base))
            continue
        best = max(usable, key=lambda p: _measure_of(p)[0])
        last = usable[-1]
        rate, unit = _measure_of(last)
        shape = " → ".join(f"{p.concurrency}: {_measure_of(p)[0]:.4g}" for p in usable)
        evidence = {"best": {"concurrency": best.concurrency, "rate": round(_measure_of(best)[0], 3)},
                    "at_most": {"concurrency": last.concurrency, "rate": round(rate, 3)}, "unit": unit,
                    "_artifacts": _artifacts(nodes)}
        if _measure_of(best)[0] <= 0:
            verdicts.append(Verdict("fail", f"{what} on {subject}: no request succeeded at any concurrency", 0.0,
                                    "ratio", lim.expected(), evidence, **base))
            continue
        ratio = round(rate / _measure_of(best)[0], 3)
        status = baselines.grade(ratio, lim)
        text = (f"{what} on {subject}: {rate:.4g} {unit} at concurrency {last.concurrency}, {ratio:.0%} of the best "
                f"({_measure_of(best)[0]:.4g} at {best.concurrency}); {unit} by concurrency {shape}")
        if status != "pass":
            text = f"throughput falls as concurrency grows: {text}"
        verdicts.append(Verdict(status, text, ratio, "ratio", lim.expected(), evidence, **base))
    return verdicts


def _error_verdicts(ctx: Context, check_id: str, kinds: tuple[str, ...], noun: str) -> list[Verdict]:
    """Per operation: the requests that failed with ``kinds`` in % of all sent, over every level."""
    nodes, subject = _measured(ctx)
    points = sweep(nodes)
    lim = _limit(ctx, check_id, {})
    verdicts = []
    for head, curve, params in _curves(points):
        requests = sum(p.errors.get("requests", 0) for p in curve)
        counted = {p.concurrency: {k: p.errors.get(k, 0) for k in kinds if p.errors.get(k)} for p in curve}
        failed = sum(sum(c.values()) for c in counted.values())
        samples = [{**s, "concurrency": p.concurrency} for p in curve for s in p.samples
                   if (noun == "throttled") == _is_throttle(s)][:5]
        evidence = {"requests": requests, "by_concurrency": {str(c): v for c, v in counted.items() if v},
                    "samples": samples, "_artifacts": _artifacts(nodes)}
        base = {"subject": subject, "params": params}
        missing = [w for p in curve if (w := _not_judgeable(p))]
        what = head.what()
        if not requests:
            status = "error" if missing else "skip"
            verdicts.append(Verdict(status, f"{what}: no request was sent" + (f": {missing[0]}" if missing else ""),
                                    evidence=evidence, **base))
            continue
        value = round(100.0 * failed / requests, 4)
        status = baselines.grade(value, lim)
        where = f"{what} on {subject}"
        if failed:
            worst = max(counted, key=lambda c: sum(counted[c].values()))
            summary = (f"{where}: {failed} of {requests} requests {noun} ({value:g}%), most at concurrency {worst}: "
                       f"{counted[worst]}")
            if samples:
                first = " ".join(str(samples[0].get(k)) for k in ("status", "code", "error") if samples[0].get(k))
                summary += f"; first: {first[:160]}"
        else:
            summary = f"{where}: none of {requests} requests {noun}"
        if status == "pass" and missing:
            status, summary = "error", f"{summary}, but not every level ran completely: {missing[0]}"
        verdicts.append(Verdict(status, summary, value, "%", lim.expected(), evidence, **base))
    return verdicts


def _is_throttle(sample: dict[str, Any]) -> bool:
    return sample.get("status") == 429 or (sample.get("status") == 503 and sample.get("code") in (
        "SlowDown", "RequestLimitExceeded", "HTTP503", "TooManyRequests", "Throttling"))


@check("storage.object.errors")
def errors(ctx: Context) -> list[Verdict]:
    return _error_verdicts(ctx, "storage.object.errors", ("server", "client", "network", "short_reads"), "failed")


@check("storage.object.throttling")
def throttling(ctx: Context) -> list[Verdict]:
    return _error_verdicts(ctx, "storage.object.throttling", ("throttled",), "throttled")
