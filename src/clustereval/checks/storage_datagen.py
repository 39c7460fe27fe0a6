"""Datagen checks: many writers per node producing video-sized blobs and Parquet sensor files at once
(``roles/storage/files/clustereval_datagen.py``, probe ``storage_datagen``, parser ``probe-datagen``), the load a
synthetic-data or robotics pipeline puts on a filesystem.

Every node runs its writers on the same schedule, so on a shared tier the nodes' loads overlap: per node and tier
the node's GB/s (``storage.datagen.throughput``), the seconds each Parquet file took from open to close
(``storage.datagen.parquet``) and the I/O errors by errno (``storage.datagen.errors``), params ``tier``; and once
per cluster, from what every node kept, the aggregate GB/s of each shared filesystem (``storage.datagen.aggregate``,
subject ``tier:<name>``, params ``tier`` and ``source``), judged only when the nodes' windows really overlapped.
"""

from __future__ import annotations

from typing import Any

from clustereval import baselines
from clustereval.checks import Context, HarnessError, Skip, Verdict, check
from clustereval.parsers import ParseError, parse

PROBE = "storage_datagen"
PARSER = "probe-datagen"
AREA = "storage"
# The share of the shortest node window during which every node was writing: below it their sum is no
# concurrent load (a late start, nodes run in batches of Ansible's forks, clocks apart).
MIN_OVERLAP = 0.5
NO_TIER = ("no tier was measured ({why}): the load goes to every writable shared filesystem; name directories "
           "with clustereval_storage_datagen_dirs, or set clustereval_storage_datagen_all_tiers to add home, "
           "scratch and /dev/shm")


# ------------------------------------------------------------------------------------------------ reading


def read(record: dict[str, Any]) -> dict[str, Any]:
    """One node's datagen document; HarnessError when the program did not run to its end (bad settings, a crash,
    a signal, unreadable output): none of that is the storage's doing."""
    if record.get("timed_out"):
        raise HarnessError(f"the datagen benchmark did not finish within its {record.get('timeout')} s")
    if record.get("missing"):
        raise Skip("python3 is not installed on the node: the datagen benchmark cannot run")
    try:
        data = parse(record.get("parser") or PARSER, record.get("stdout") or "")
    except ParseError as exc:
        tail = (record.get("stderr") or "").strip().splitlines()
        raise HarnessError(f"unreadable datagen output (exit status {record.get('rc')}): {exc}"
                           + (f"; stderr: {tail[-1][:200]}" if tail else "")) from None
    if data.get("fatal") or not data["complete"]:
        raise HarnessError(f"the datagen benchmark stopped early (exit status {record.get('rc')}): "
                           f"{data.get('fatal') or 'its document says it did not finish'}")
    return data


def _document(ctx: Context) -> dict[str, Any]:
    record = ctx.raw(PROBE)  # also counts the probe as read: its artifact is the evidence
    key = f"{PROBE}:document"
    if key not in ctx.parse_cache:
        ctx.parse_cache[key] = read(record)
    return ctx.parse_cache[key]


def _measured(ctx: Context) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    data = _document(ctx)
    measured = [t for t in data["tiers"] if t["state"] == "measured"]
    if not measured:
        why = "; ".join(f"{t['name']} ({t['path']}): {t.get('reason')}" for t in data["tiers"]) or "none found"
        raise Skip(NO_TIER.format(why=why))
    return data, measured


def where(tier: dict[str, Any]) -> str:
    return f"{tier['name']} ({tier['path']}, {tier.get('fstype')}, {'shared' if tier.get('shared') else 'local'})"


def _params(tier: dict[str, Any]) -> dict[str, Any]:
    return {"tier": tier["name"]}


def _compact(tier: dict[str, Any]) -> dict[str, Any]:
    """The tier's figures without the per-writer lists (those are in the raw output)."""
    keep = ("name", "path", "mount", "source", "fstype", "kind", "shared", "slot", "late_s", "seconds", "bytes",
            "files", "gbps", "files_per_s", "cpu_s", "encode_s", "kinds", "stopped_by", "budget_bytes", "parquet")
    return {k: tier.get(k) for k in keep if k in tier}


def _writers(tier: dict[str, Any]) -> list[dict[str, Any]]:
    keep = ("writer", "state", "reason", "bytes", "files", "gbps", "files_per_s", "late_s", "cpu_s", "stopped_by",
            "errors")
    return [{k: w.get(k) for k in keep if w.get(k) is not None} for w in tier["writers"]]


def _lost(tier: dict[str, Any]) -> list[str]:
    return [f"writer {w['writer']} {w['state']} ({w.get('reason')})" for w in tier["writers"] if w["state"] != "ok"]


def _errors_text(tier: dict[str, Any]) -> str:
    counts = ", ".join(f"{code} x{n}" for code, n in sorted(tier["errors"].items(), key=lambda i: -i[1]))
    sample = (tier.get("error_samples") or [{}])[0]
    first = (f" (first: writer {sample.get('writer')}, {sample.get('op')} of {sample.get('file')}: "
             f"{str(sample.get('message'))[:160]})" if sample else "")
    return counts + first


def _mb(size: float) -> str:
    return f"{size / (1 << 20):.3g} MiB"


def _limit(ctx: Context, check_id: str, facts: dict[str, Any]) -> baselines.Limit:
    return ctx.reference(AREA, check_id, facts={**ctx.facts, **facts})


# ------------------------------------------------------------------------------------------------ node checks


@check("storage.datagen.throughput")
def throughput(ctx: Context) -> list[Verdict]:
    """Per tier: GB/s of every writer of the node together (blobs and Parquet files), over the writers' window."""
    data, measured = _measured(ctx)
    settings = data["settings"]
    verdicts = []
    for tier in measured:
        evidence = {"tier": _compact(tier), "writers": _writers(tier)}
        base = {"evidence": evidence, "params": _params(tier)}
        lost = _lost(tier)
        done = [w for w in tier["writers"] if w["state"] == "ok" and w.get("started") is not None]
        if lost:
            verdicts.append(Verdict("error", f"{where(tier)}: only {len(done)} of {len(tier['writers'])} writers "
                                    f"reported, so the node's figure is not its load ({'; '.join(lost)}; see "
                                    f"storage.datagen.errors)", **base))
            continue
        if not tier["files"]:
            if tier["errors"]:
                lim = _limit(ctx, "storage.datagen.throughput", {"tier_kind": tier.get("kind")})
                verdicts.append(Verdict("fail", f"no file could be written on {where(tier)}: "
                                        f"{_errors_text(tier)}", 0.0, "GB/s", lim.expected(), **base))
            else:
                why = "; ".join(tier["harness_errors"][:2]) or f"writers stopped by {tier['stopped_by']}"
                verdicts.append(Verdict("error", f"no file was written on {where(tier)}: {why}", **base))
            continue
        value = round(tier["gbps"], 4)
        try:
            lim = _limit(ctx, "storage.datagen.throughput", {"tier_kind": tier.get("kind")})
        except Skip as exc:
            verdicts.append(Verdict("skip", f"{where(tier)}: {value:g} GB/s; {exc}", value, "GB/s", **base))
            continue
        blob, parquet = tier["kinds"].get("blob") or {}, tier["kinds"].get("parquet") or {}
        mix = f"{blob.get('files', 0)} {_mb(settings.get('blob_bytes') or 0)} blobs"
        if parquet.get("files"):
            mix += f" and {parquet['files']} Parquet files"
        else:
            mix += " only; the Parquet part is judged by storage.datagen.parquet"
        status = baselines.grade(value, lim)
        summary = (f"{len(tier['writers'])} writers on {where(tier)}: {value:.4g} GB/s, {tier['files_per_s']:.4g} "
                   f"files/s ({mix}, {tier['bytes'] / 1e9:.3g} GB in {tier['seconds']:.3g} s)")
        if tier["stopped_by"].get("space"):
            summary += f"; {tier['stopped_by']['space']} writer(s) stopped at the space budget"
        if status != "pass":
            summary += f": {baselines.shortfall(value, lim, 'GB/s')}"
        verdicts.append(Verdict(status, summary, value, "GB/s", lim.expected(), **base))
    return verdicts


def _parquet_off(data: dict[str, Any], tier: dict[str, Any]) -> str | None:
    """Why no Parquet file was written on the tier (None: they were)."""
    settings = data["settings"]
    if not settings.get("parquet_rows"):
        return "Parquet files are turned off (clustereval_storage_datagen_parquet_rows is 0)"
    found = tier.get("parquet") or data.get("pyarrow") or {}
    if found.get("available"):
        return None
    python = (data.get("python") or {}).get("executable") or "the node's python"
    text = f"pyarrow does not import in {python} ({found.get('reason') or 'no writer said why'})"
    if settings.get("install_pyarrow"):
        return (f"{text}, though the role tried to install pyarrow=={settings.get('pyarrow_version')} into the "
                f"benchmark environment (its answer: storage-datagen-pyarrow.txt beside this node's raw output)")
    return (f"{text}, and clustereval_storage_datagen_install_pyarrow is false: install pyarrow into the benchmark "
            f"environment (clustereval_gpu_compute_venv) or let the role do it")


@check("storage.datagen.parquet")
def parquet(ctx: Context) -> list[Verdict]:
    """Per tier: p99 seconds from open to close (write, flush, fsync, close) of the Parquet sensor files, written
    while the blobs stream beside them; their rate and p50 in the summary."""
    data, measured = _measured(ctx)
    settings = data["settings"]
    verdicts = []
    for tier in measured:
        stats = tier["kinds"].get("parquet") or {}
        evidence = {"parquet": stats, "pyarrow": tier.get("parquet") or data.get("pyarrow"),
                    "rows": settings.get("parquet_rows"), "columns": settings.get("parquet_columns"),
                    "compression": settings.get("parquet_compression"), "encode_s": tier.get("encode_s")}
        base = {"evidence": evidence, "params": _params(tier)}
        off = _parquet_off(data, tier)
        if off:
            verdicts.append(Verdict("skip", f"{where(tier)}: {off}; the blobs were written without them", **base))
            continue
        lost = _lost(tier)
        if lost:
            verdicts.append(Verdict("error", f"{where(tier)}: not every writer reported ({'; '.join(lost)})", **base))
            continue
        times = stats.get("file_s")
        if not stats.get("files") or not times:
            if tier["errors"]:
                verdicts.append(Verdict("fail", f"no Parquet file could be written on {where(tier)}: "
                                        f"{_errors_text(tier)}", None, "s", **base))
            else:
                verdicts.append(Verdict("error", f"no Parquet file was written on {where(tier)} (writers stopped "
                                        f"by {tier['stopped_by']})", **base))
            continue
        value = round(times["p99"], 4)
        try:
            lim = _limit(ctx, "storage.datagen.parquet", {"tier_kind": tier.get("kind")})
        except Skip as exc:
            verdicts.append(Verdict("skip", f"{where(tier)}: Parquet p99 {value:g} s; {exc}", value, "s", **base))
            continue
        status = baselines.grade(value, lim)
        size = stats["bytes"] / stats["files"]
        summary = (f"{stats['files']} Parquet sensor files ({settings.get('parquet_rows')} rows x "
                   f"{settings.get('parquet_columns')} float32 columns, {settings.get('parquet_compression')}, "
                   f"{_mb(size)} each) on {where(tier)}: {stats['files_per_s']:.4g} files/s; open to close "
                   f"p50 {times['p50']:.3g} s, p99 {value:.3g} s, max {times['max']:.3g} s")
        if status != "pass":
            summary += f": {baselines.shortfall(value, lim, 's')}"
        verdicts.append(Verdict(status, summary, value, "s", lim.expected(), **base))
    return verdicts


@check("storage.datagen.errors")
def errors(ctx: Context) -> list[Verdict]:
    """Per tier: every failed open/write/fsync/close by errno name, writers that hung, and files left behind."""
    data, measured = _measured(ctx)
    verdicts = []
    for tier in measured:
        count = sum(tier["errors"].values())
        hung = [w for w in tier["writers"] if w["state"] == "hung"]
        died = [w for w in tier["writers"] if w["state"] == "died"]
        cleanup = tier.get("cleanup") or {}
        evidence = {"errors": tier["errors"], "samples": tier.get("error_samples"), "writers": _writers(tier),
                    "harness_errors": tier["harness_errors"], "cleanup": cleanup,
                    "left_behind": data.get("left_behind")}
        base = {"evidence": evidence, "params": _params(tier)}
        if count:
            gave_up = tier["stopped_by"].get("errors")
            verdicts.append(Verdict("fail", f"I/O errors on {where(tier)}: {_errors_text(tier)}"
                                    + (f"; {gave_up} writer(s) gave up" if gave_up else ""), count, "errors", **base))
        elif hung:
            verdicts.append(Verdict("fail", f"writes hung on {where(tier)}: "
                                    + "; ".join(f"writer {w['writer']} {w.get('reason')}" for w in hung),
                                    len(hung), "errors", **base))
        elif died or tier["harness_errors"]:
            shown = [f"writer {w['writer']} {w.get('reason')}" for w in died] + tier["harness_errors"]
            verdicts.append(Verdict("error", f"the benchmark's writers failed on {where(tier)} (not an I/O error): "
                                    + "; ".join(shown[:3]), **base))
        elif cleanup.get("removed") is False:
            verdicts.append(Verdict("warn", f"no I/O error on {where(tier)}, but its files could not all be removed "
                                    f"from {tier.get('workdir')}: {'; '.join(cleanup.get('errors') or [])[:300]}",
                                    0, "errors", **base))
        else:
            verdicts.append(Verdict("pass", f"{where(tier)}: no I/O error in {tier['files']} files "
                                    f"({len(tier['writers'])} writers, {tier['bytes'] / 1e9:.3g} GB), every file "
                                    f"removed afterwards", 0, "errors", **base))
    return verdicts


# ------------------------------------------------------------------------------------------------ the cluster


def shared_tiers(ctx: Context) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """``{source: {"name", "hosts": {host: tier}}}`` of every shared filesystem the nodes measured, and why each
    node that kept no usable document has none."""
    found: dict[str, dict[str, Any]] = {}
    problems: dict[str, str] = {}
    for host, probes in sorted(ctx.host_probes.items()):
        record = probes.get(PROBE)
        if not record:
            problems[host] = "kept no datagen output (unreachable, or its task failed)"
            continue
        try:
            data = read(record)
        except (HarnessError, Skip) as exc:
            problems[host] = str(exc)
            continue
        for tier in data["tiers"]:
            if tier["state"] == "measured" and tier.get("shared"):
                entry = found.setdefault(str(tier.get("source")), {"name": tier["name"], "hosts": {}})
                entry["hosts"][host] = tier
    return found, problems


def overlap(windows: list[tuple[float, float]]) -> float:
    """The part of the shortest window during which every node was writing (1.0: all at once)."""
    shortest = min(end - start for start, end in windows)
    shared = min(end for _, end in windows) - max(start for start, _ in windows)
    return round(max(0.0, min(1.0, shared / shortest)), 3) if shortest > 0 else 1.0


@check("storage.datagen.aggregate")
def aggregate(ctx: Context) -> list[Verdict]:
    """Per shared filesystem: the bytes every node's writers wrote over the span from the first start to the last
    end, in GB/s, against a floor per node taking part; only when the nodes' windows overlapped."""
    found, problems = shared_tiers(ctx)
    if not found:
        if problems and len(problems) == len(ctx.host_probes or problems):
            raise HarnessError("no node kept a usable datagen document: "
                               + "; ".join(f"{h}: {why}" for h, why in sorted(problems.items())))
        raise Skip("no node measured a shared filesystem with the datagen load"
                   + (f" ({'; '.join(f'{h}: {why}' for h, why in sorted(problems.items()))})" if problems else ""))
    verdicts = []
    for source, entry in sorted(found.items()):
        hosts = entry["hosts"]
        subject, params = f"tier:{entry['name']}", {"tier": entry["name"], "source": source}
        nodes = [{"host": h, "gbps": t["gbps"], "bytes": t["bytes"], "files": t["files"], "started": t["started"],
                  "ended": t["ended"], "late_s": t.get("late_s"), "writers": len(t["writers"]),
                  "lost_writers": len(_lost(t)), "errors": sum(t["errors"].values())} for h, t in sorted(hosts.items())]
        elsewhere = sorted(set(ctx.host_probes) - set(hosts))
        evidence: dict[str, Any] = {"source": source, "nodes": nodes, "not_measured_on": elsewhere,
                                    "problems": problems}
        base = {"evidence": evidence, "subject": subject, "params": params}
        if len(hosts) < 2:
            verdicts.append(Verdict("skip", f"only {', '.join(hosts)} measured {source}: no aggregate over the "
                                    f"cluster", **base))
            continue
        writing = {h: t for h, t in hosts.items() if t["started"] is not None and t["ended"] is not None}
        if len(writing) < len(hosts):
            idle = sorted(set(hosts) - set(writing))
            if all(hosts[h]["errors"] for h in idle):
                status, why = "fail", "wrote no file (I/O errors, see storage.datagen.errors)"
            else:
                status, why = "error", "reported no writing window"
            verdicts.append(Verdict(status, f"{source} ({entry['name']}): {', '.join(idle)} {why}, so there is no "
                                    f"aggregate of every node at once", **base))
            continue
        lost = {h: _lost(t) for h, t in hosts.items() if _lost(t)}
        windows = [(t["started"], t["ended"]) for t in hosts.values()]
        share = overlap(windows)
        span = max(end for _, end in windows) - min(start for start, _ in windows)
        total = sum(t["bytes"] for t in hosts.values())
        files = sum(t["files"] for t in hosts.values())
        value = round(total / span / 1e9, 4) if span > 0 else 0.0
        evidence.update(overlap=share, span_s=round(span, 3), bytes=total, files=files,
                        sum_of_node_gbps=round(sum(t["gbps"] for t in hosts.values()), 4))
        if lost:
            verdicts.append(Verdict("error", f"{source} ({entry['name']}): not every writer reported, so the sum is "
                                    f"not the load asked for: " + "; ".join(f"{h}: {', '.join(w)}"
                                                                             for h, w in sorted(lost.items())),
                                    **base))
            continue
        if share < MIN_OVERLAP:
            verdicts.append(Verdict("error", f"{source} ({entry['name']}): the nodes' writers overlapped only "
                                    f"{share:.0%} of the shortest window (a late start — nodes beyond Ansible's "
                                    f"forks start in a later batch — or clocks apart), so their sum is not a "
                                    f"concurrent load", **base))
            continue
        try:
            lim = _limit(ctx, "storage.datagen.aggregate", {"datagen_nodes": len(hosts)})
        except Skip as exc:
            verdicts.append(Verdict("skip", f"{source}: {value:g} GB/s from {len(hosts)} nodes; {exc}", value,
                                    "GB/s", **base))
            continue
        status = baselines.grade(value, lim)
        slowest = min(nodes, key=lambda n: n["gbps"])
        writers = sum(n["writers"] for n in nodes)
        summary = (f"{source} ({entry['name']}) from {len(hosts)} nodes at once, {writers} writers: {value:.4g} GB/s "
                   f"aggregate ({files} files, {total / 1e9:.3g} GB in {span:.3g} s, the nodes' windows overlapping "
                   f"{share:.0%}); slowest node {slowest['host']} at {slowest['gbps']:.4g} GB/s")
        if status != "pass":
            summary += f": {baselines.shortfall(value, lim, 'GB/s', basis=True)}"
        verdicts.append(Verdict(status, summary, value, "GB/s", lim.expected(), **base))
    return verdicts
