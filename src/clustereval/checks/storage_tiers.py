"""Storage tier checks: every tier a user writes to on a node (home, scratch, /dev/shm, extra and shared
mounts), each measured with one fio matrix (``storage_tier_matrix``: sequential 1 MiB and random 4 KiB
buffered / 64 KiB direct, read and write, at each client count). One verdict per tier (params ``tier``; the
scaling check per tier and job), the matrix kept as a curve per tier under ``series/<host>/``.

What the buyers' complaints look like in this data: reads far slower than writes, throughput that falls as
clients are added, a buffered p99 of seconds where direct I/O answers in a few hundred ms, and errors
(EAGAIN, ENOENT, EIO) that appear only at the higher client counts.
"""

from __future__ import annotations

import errno
from typing import Any

from clustereval import baselines
from clustereval.checks import Context, Skip, Verdict, check

PROBE = "storage_tier_matrix"
SEQ_JOBS = {"write": ("seq_write_1m_direct", "seq_write_1m_buffered"),
            "read": ("seq_read_1m_direct", "seq_read_1m_buffered")}
POINT_COLUMNS = ["tier", "job", "rw", "clients", "bw_mbps", "iops", "clat_mean_us", "clat_p50_us", "clat_p90_us",
                 "clat_p99_us", "clat_p999_us", "error"]


def _tiers(ctx: Context) -> list[dict[str, Any]]:
    return ctx.parsed(PROBE)["tiers"]


def _measured(ctx: Context) -> list[dict[str, Any]]:
    """The tiers with a matrix; none at all is a skip saying why each was not measured."""
    tiers = _tiers(ctx)
    measured = [t for t in tiers if t["state"] == "measured"]
    if not measured:
        raise Skip("no storage tier was measured: " + "; ".join(f"{t['name']} ({t['path']}): {t.get('reason')}"
                                                               for t in tiers))
    return measured


def _where(tier: dict[str, Any]) -> str:
    shared = "shared" if tier.get("shared") else "local"
    return f"{tier['name']} ({tier['path']}, {tier.get('fstype')}, {shared})"


def _series(ctx: Context, tier: dict[str, Any], job: str | None = None) -> list[dict[str, Any]]:
    path = f"series/{ctx.subject}/storage-tier-{tier['name']}.csv"
    rows = [{"tier": tier["name"], **{k: p.get(k) for k in POINT_COLUMNS if k != "tier"}} for p in tier["points"]]
    entry: dict[str, Any] = {"path": path, "kind": "curve", "x": "clients", "columns": POINT_COLUMNS, "data": rows}
    if job:
        entry["filter"] = {"job": job}
    return [entry]


def _points(tier: dict[str, Any], job: str) -> list[dict[str, Any]]:
    return sorted((p for p in tier["points"] if p["job"] == job), key=lambda p: p["clients"])


@check("storage.tier.inventory")
def tier_inventory(ctx: Context) -> Verdict:
    """Every tier the node offers a user, what backs it and whether it could be measured."""
    tiers = _tiers(ctx)
    configured = ctx.options.get("required_tiers")
    required = {"home"} if configured is None else set(configured)
    broken = [t for t in tiers if t["state"] in ("missing", "unwritable") and t["name"] in required]
    unmeasured = [t for t in tiers if t["state"] in ("fio_failed", "truncated")]
    listed = [_where(t) for t in tiers if t["state"] == "measured"]
    alias = [f"{t['name']} (same filesystem as {t.get('reason')})" for t in tiers if t["state"] == "same_filesystem"]
    evidence = {"tiers": [{k: v for k, v in t.items() if k != "points"} for t in tiers]}
    value = len(listed)
    if broken:
        return Verdict("fail", "; ".join(f"tier {t['name']} ({t['path'] or 'not set'}) {t['state']}: {t.get('reason')}"
                                         for t in broken), value, "tiers", evidence=evidence)
    if unmeasured:
        return Verdict("error", "fio could not measure " + "; ".join(f"{t['name']}: {t.get('reason')}"
                                                                      for t in unmeasured), value, "tiers",
                       evidence=evidence)
    if not listed:
        raise Skip("no writable storage tier found: " + "; ".join(f"{t['name']}: {t.get('reason')}" for t in tiers))
    return Verdict("pass", f"{value} tier(s) measured: {', '.join(listed)}"
                   + (f"; {', '.join(alias)}" if alias else ""), value, "tiers", evidence=evidence)


def _sequential(ctx: Context, check_id: str, direction: str) -> list[Verdict]:
    """One client, 1 MiB blocks, direct I/O (buffered on a tier that takes no O_DIRECT) against the reference
    for what backs the tier."""
    verdicts = []
    for tier in _measured(ctx):
        params = {"tier": tier["name"]}
        point = next((p for job in SEQ_JOBS[direction] for p in _points(tier, job) if p["clients"] == 1), None)
        if point is None:
            verdicts.append(Verdict("skip", f"no single-client sequential {direction} on {_where(tier)}",
                                    params=params))
            continue
        facts = {**ctx.facts, "tier_kind": tier.get("kind")}
        try:
            lim = ctx.reference("storage", check_id, facts=facts)
        except Skip as exc:
            verdicts.append(Verdict("skip", str(exc), point["bw_mbps"], "MB/s", params=params))
            continue
        evidence = {"job": point["job"], "tier": {k: v for k, v in tier.items() if k != "points"}, "point": point}
        if point["error"]:
            verdicts.append(Verdict("fail", f"{direction} on {_where(tier)} failed: {errno_name(point['error'])}",
                                    point["bw_mbps"], "MB/s", lim.expected(), evidence, params=params))
            continue
        status = baselines.grade(point["bw_mbps"], lim)
        text = f"{direction} {point['bw_mbps']:.0f} MB/s on {_where(tier)}, one client ({point['job']})"
        text += {"pass": "", "warn": f", below the expected {lim.warn} MB/s",
                 "fail": f", below the failure level {lim.fail} MB/s"}[status]
        verdicts.append(Verdict(status, text, point["bw_mbps"], "MB/s", lim.expected(), evidence,
                                series=_series(ctx, tier, point["job"]), params=params))
    return verdicts


@check("storage.tier.seq_write")
def tier_seq_write(ctx: Context) -> list[Verdict]:
    return _sequential(ctx, "storage.tier.seq_write", "write")


@check("storage.tier.seq_read")
def tier_seq_read(ctx: Context) -> list[Verdict]:
    return _sequential(ctx, "storage.tier.seq_read", "read")


@check("storage.tier.scaling")
def tier_scaling(ctx: Context) -> list[Verdict]:
    """Per tier and job: the throughput at the most clients against the best point of the curve."""
    lim = ctx.limit("storage", "storage.tier.scaling")
    verdicts = []
    for tier in _measured(ctx):
        for job in sorted({p["job"] for p in tier["points"]}):
            params = {"tier": tier["name"], "job": job}
            curve = [p for p in _points(tier, job) if not p["error"]]
            if len({p["clients"] for p in curve}) < 2:
                verdicts.append(Verdict("skip", f"{job} on {_where(tier)} was measured at fewer than two client "
                                        f"counts without errors", params=params))
                continue
            best, last = max(curve, key=lambda p: p["bw_mbps"]), curve[-1]
            if best["bw_mbps"] <= 0:
                verdicts.append(Verdict("fail", f"{job} on {_where(tier)} moved no data at any client count",
                                        0.0, "ratio", lim.expected(), params=params))
                continue
            ratio = round(last["bw_mbps"] / best["bw_mbps"], 3)
            status = baselines.grade(ratio, lim)
            shape = " → ".join(f"{p['clients']}: {p['bw_mbps']:.0f}" for p in curve)
            text = (f"{job} on {_where(tier)}: {last['bw_mbps']:.0f} MB/s at {last['clients']} clients, "
                    f"{ratio:.0%} of the best ({best['bw_mbps']:.0f} at {best['clients']}); MB/s by clients {shape}")
            if status != "pass":
                text = f"throughput falls as clients grow: {text}"
            verdicts.append(Verdict(status, text, ratio, "ratio", lim.expected(),
                                    {"best": best, "at_most_clients": last}, series=_series(ctx, tier, job),
                                    params=params))
    return verdicts


@check("storage.tier.read_vs_write")
def tier_read_vs_write(ctx: Context) -> list[Verdict]:
    """Per tier: the best sequential read against the best sequential write (direct where the tier takes it)."""
    lim = ctx.limit("storage", "storage.tier.read_vs_write")
    verdicts = []
    for tier in _measured(ctx):
        params = {"tier": tier["name"]}
        best = {}
        for direction, jobs in SEQ_JOBS.items():
            job = next((j for j in jobs if _points(tier, j)), None)
            points = [p for p in _points(tier, job) if not p["error"]] if job else []
            if points:
                best[direction] = max(points, key=lambda p: p["bw_mbps"])
        if len(best) < 2 or best["write"]["bw_mbps"] <= 0:
            verdicts.append(Verdict("skip", f"{_where(tier)} has no sequential read and write to compare",
                                    params=params))
            continue
        ratio = round(best["read"]["bw_mbps"] / best["write"]["bw_mbps"], 3)
        status = baselines.grade(ratio, lim)
        text = (f"sequential read {best['read']['bw_mbps']:.0f} MB/s against write {best['write']['bw_mbps']:.0f} "
                f"MB/s on {_where(tier)} ({ratio:.2f}x)")
        if status != "pass":
            text = f"reads far slower than writes: {text}"
        verdicts.append(Verdict(status, text, ratio, "ratio", lim.expected(), {"best": best}, params=params))
    return verdicts


@check("storage.tier.buffered_tail")
def tier_buffered_tail(ctx: Context) -> list[Verdict]:
    """Per tier: the worst buffered p99 completion latency against the worst direct one. Seconds of buffered
    tail against a few hundred ms direct is the page-cache writeback pathology that stalls data loaders."""
    lim = ctx.limit("storage", "storage.tier.buffered_tail")
    floor = ctx.limit("storage", "storage.tier.buffered_tail_floor_ms")
    verdicts = []
    for tier in _measured(ctx):
        params = {"tier": tier["name"]}
        worst = {}
        for mode in ("buffered", "direct"):
            points = [p for p in tier["points"] if p["job"].endswith(mode) and p.get("clat_p99_us") is not None]
            if points:
                worst[mode] = max(points, key=lambda p: p["clat_p99_us"])
        if len(worst) < 2:
            verdicts.append(Verdict("skip", f"{_where(tier)} was not measured both buffered and direct "
                                    f"(tmpfs takes no O_DIRECT)", params=params))
            continue
        buffered_ms, direct_ms = worst["buffered"]["clat_p99_us"] / 1000, worst["direct"]["clat_p99_us"] / 1000
        ratio = round(buffered_ms / max(direct_ms, 0.001), 2)
        status = baselines.grade(ratio, lim)
        # a long ratio of two short tails is no finding: the buffered tail must itself be long
        status = min(status, baselines.grade(buffered_ms, floor), key=["pass", "warn", "fail"].index)
        text = (f"worst buffered p99 {buffered_ms:.1f} ms ({worst['buffered']['job']}, {worst['buffered']['clients']} "
                f"clients) against direct {direct_ms:.1f} ms on {_where(tier)}")
        if status != "pass":
            text = f"buffered I/O stalls: {text}"
        verdicts.append(Verdict(status, text, ratio, "ratio", lim.expected(), {"worst": worst,
                                                                              "floor": floor.expected()},
                                params=params))
    return verdicts


def errno_name(code: int) -> str:
    """fio's error code as the errno name a person reads (``EIO (5)``)."""
    name = errno.errorcode.get(int(code))
    return f"{name} ({code})" if name else f"error {code}"


@check("storage.tier.errors")
def tier_errors(ctx: Context) -> list[Verdict]:
    """Per tier: I/O errors fio met anywhere in the matrix (they tend to appear only at the higher client
    counts), and a fio that exited non-zero."""
    verdicts = []
    for tier in _measured(ctx):
        params = {"tier": tier["name"]}
        failed = [p for p in tier["points"] if p["error"]]
        evidence = {"errors": failed, "fio_exit": tier.get("fio_exit"), "points": len(tier["points"])}
        if failed:
            shown = ", ".join(f"{errno_name(p['error'])} in {p['job']} at {p['clients']} clients" for p in failed[:6])
            verdicts.append(Verdict("fail", f"I/O errors on {_where(tier)}: {shown}"
                                    + (f" (+{len(failed) - 6} more)" if len(failed) > 6 else ""), len(failed),
                                    "points", evidence=evidence, params=params))
        elif tier.get("fio_exit"):
            verdicts.append(Verdict("error", f"fio exited with status {tier['fio_exit']} on {_where(tier)} without "
                                    f"naming an I/O error", evidence=evidence, params=params))
        else:
            clients = sorted({p["clients"] for p in tier["points"]})
            verdicts.append(Verdict("pass", f"{_where(tier)}: no I/O error in {len(tier['points'])} points "
                                    f"(1 MiB sequential, 4 KiB buffered and 64 KiB direct random, read and write; "
                                    f"clients {', '.join(map(str, clients))})", 0, "points", evidence=evidence,
                                    params=params))
    return verdicts
