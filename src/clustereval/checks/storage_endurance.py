"""Storage endurance checks: every tier the fio matrix finds, held under mixed read/write load for minutes at
each client count (``storage_tier_endurance``: sequential 1 MiB then random 4 KiB, one fio JSON per interval).
One verdict per tier, client count and phase (params ``tier``, ``clients``, ``phase``); the intervals kept as a
time series per tier under ``series/<host>/``.

What bad providers show in this data: bandwidth that falls by about 40 % from the first minute once a cache or a
burst credit is spent, a p99 that climbs while the load holds, and errors that appear only minutes in.
"""

from __future__ import annotations

from statistics import fmean
from typing import Any

from clustereval import baselines
from clustereval.checks import Context, Skip, Verdict, check
from clustereval.checks.storage_tiers import errno_name

PROBE = "storage_tier_endurance"
# One file per tier and check (each check's verdicts share it; only the first carries the rows, so a file holds
# every interval once): bandwidth and IOPS for the decay, p99 for the tail latency.
COLUMNS = {"bandwidth": ["tier", "phase", "clients", "index", "t_s", "interval_s", "read_mbps", "write_mbps",
                         "bw_mbps", "iops", "error", "fio_exit"],
           "latency": ["tier", "phase", "clients", "index", "t_s", "interval_s", "read_p99_us", "write_p99_us",
                       "p99_us"]}
# The first minute is the reference (the "decay against the first minute"); the simulated cluster's
# seconds-long phases set it shorter through the option.
REFERENCE_S = 60.0
WORSE = ["pass", "warn", "fail"]


def _measured(ctx: Context) -> list[dict[str, Any]]:
    tiers = ctx.parsed(PROBE)["tiers"]
    measured = [t for t in tiers if t["state"] == "measured"]
    if not measured:
        raise Skip("no storage tier was measured: " + "; ".join(f"{t['name']} ({t['path']}): {t.get('reason')}"
                                                               for t in tiers))
    return measured


def _where(tier: dict[str, Any]) -> str:
    return f"{tier['name']} ({tier['path']}, {tier.get('fstype')}, {'shared' if tier.get('shared') else 'local'})"


def _series(ctx: Context, tier: dict[str, Any], clients: int, phase: str, kind: str,
            first: bool) -> list[dict[str, Any]]:
    columns = COLUMNS[kind]
    entry: dict[str, Any] = {"path": f"series/{ctx.subject}/storage-endurance-{tier['name']}-{kind}.csv",
                             "kind": "timeseries", "x": "t_s", "columns": columns,
                             "filter": {"clients": clients, "phase": phase}}
    if first:
        entry["data"] = [{"tier": tier["name"], **{k: i.get(k) for k in columns if k != "tier"}}
                         for i in tier["intervals"]]
    return [entry]


def _runs(tier: dict[str, Any]) -> list[tuple[int, str, list[dict[str, Any]]]]:
    """(clients, phase, the intervals fio measured without error, in order) for every run of the tier."""
    keys = sorted({(i["clients"], i["phase"]) for i in tier["intervals"]}, key=lambda k: (k[0], k[1] != "seq_mixed"))
    return [(c, p, [i for i in tier["intervals"] if (i["clients"], i["phase"]) == (c, p)
                    and "reason" not in i and not i["error"]]) for c, p in keys]


def _windows(ctx: Context, points: list[dict[str, Any]]) -> tuple[list[dict], list[dict]] | None:
    """The first-minute intervals and those of the last minute after them; None when the run is too short to
    have both."""
    reference_s = float(ctx.options.get("reference_s") or REFERENCE_S)
    first = [p for p in points if p["t_s"] < reference_s]
    later = [p for p in points if p["t_s"] >= reference_s]
    if not first or not later:
        return None
    end = max(p["t_s"] + p["interval_s"] for p in later)
    return first, [p for p in later if p["t_s"] + p["interval_s"] > end - reference_s]


def _window(ctx: Context) -> str:
    seconds = float(ctx.options.get("reference_s") or REFERENCE_S)
    return "minute" if seconds == 60 else f"{seconds:g} s"


def _cut(tier: dict[str, Any]) -> str:
    return "" if tier.get("complete", True) else f" (cut short: {tier.get('reason')})"


@check("storage.endurance.decay")
def endurance_decay(ctx: Context) -> list[Verdict]:
    """Per tier, client count and phase: the last minute's mean bandwidth against the first minute's."""
    lim = ctx.limit("storage", "storage.endurance.decay")
    verdicts = []
    for tier in _measured(ctx):
        for clients, phase, points in _runs(tier):
            params = {"tier": tier["name"], "clients": clients, "phase": phase}
            windows = _windows(ctx, points)
            if windows is None:
                verdicts.append(Verdict("skip", f"{phase} at {clients} clients on {_where(tier)} has no interval "
                                        f"after the first minute to compare with it{_cut(tier)}", params=params))
                continue
            first = fmean(p["bw_mbps"] for p in windows[0])
            last = fmean(p["bw_mbps"] for p in windows[1])
            if first <= 0:
                verdicts.append(Verdict("fail", f"{phase} at {clients} clients on {_where(tier)} moved no data in "
                                        f"the first minute", 1.0, "ratio", lim.expected(), params=params))
                continue
            decay = round(max(0.0, 1 - last / first), 3)
            status = baselines.grade(decay, lim)
            low = min(points, key=lambda p: p["bw_mbps"])
            text = (f"{phase} at {clients} clients on {_where(tier)}: {last:.0f} MB/s in the last {_window(ctx)} "
                    f"against {first:.0f} in the first ({decay:.0%} lower; slowest interval {low['bw_mbps']:.0f} at "
                    f"{low['t_s']} s){_cut(tier)}")
            if status != "pass":
                text = f"throughput decays under sustained load: {text}"
            verdicts.append(Verdict(status, text, decay, "ratio", lim.expected(),
                                    {"first_mbps": round(first, 3), "last_mbps": round(last, 3), "slowest": low,
                                     "intervals": len(points), "complete": tier.get("complete", True)},
                                    series=_series(ctx, tier, clients, phase, "bandwidth",
                                                   not any(v.series for v in verdicts
                                                           if (v.params or {}).get("tier") == tier["name"])),
                                    params=params))
    return verdicts


@check("storage.endurance.tail_latency")
def endurance_tail_latency(ctx: Context) -> list[Verdict]:
    """Per tier, client count and phase: the worst p99 of the last minute against the first minute's mean p99,
    judged only when that p99 is itself long (a drift from 0.1 to 0.5 ms is no finding)."""
    lim = ctx.limit("storage", "storage.endurance.tail_latency")
    floor = ctx.limit("storage", "storage.endurance.tail_latency_floor_ms")
    verdicts = []
    for tier in _measured(ctx):
        for clients, phase, points in _runs(tier):
            params = {"tier": tier["name"], "clients": clients, "phase": phase}
            timed = [p for p in points if p.get("p99_us") is not None]
            windows = _windows(ctx, timed)
            if windows is None:
                verdicts.append(Verdict("skip", f"{phase} at {clients} clients on {_where(tier)} has no p99 after "
                                        f"the first minute to compare with it{_cut(tier)}", params=params))
                continue
            first_ms = fmean(p["p99_us"] for p in windows[0]) / 1000
            worst = max(windows[1], key=lambda p: p["p99_us"])
            worst_ms = worst["p99_us"] / 1000
            drift = round(worst_ms / max(first_ms, 0.001), 2)
            status = min(baselines.grade(drift, lim), baselines.grade(worst_ms, floor), key=WORSE.index)
            text = (f"{phase} at {clients} clients on {_where(tier)}: p99 {worst_ms:.1f} ms at {worst['t_s']} s "
                    f"against {first_ms:.1f} ms in the first {_window(ctx)} ({drift:.1f}x){_cut(tier)}")
            if status != "pass":
                text = f"tail latency climbs under sustained load: {text}"
            verdicts.append(Verdict(status, text, drift, "ratio", lim.expected(),
                                    {"first_p99_ms": round(first_ms, 3), "worst": worst, "floor": floor.expected()},
                                    series=_series(ctx, tier, clients, phase, "latency",
                                                   not any(v.series for v in verdicts
                                                           if (v.params or {}).get("tier") == tier["name"])),
                                    params=params))
    return verdicts


@check("storage.endurance.errors")
def endurance_errors(ctx: Context) -> list[Verdict]:
    """Per tier: I/O errors fio met in any interval, a fio that exited non-zero or printed nothing readable, and
    a run cut short."""
    verdicts = []
    tiers = ctx.parsed(PROBE)["tiers"]
    for tier in [t for t in tiers if t["state"] == "fio_failed"]:
        # fio ran on the tier and printed nothing it measured: the harness's fault until fio says otherwise
        verdicts.append(Verdict("error", f"fio measured nothing on {_where(tier)}: {tier.get('reason')}",
                                params={"tier": tier["name"]}))
    for tier in (_measured(ctx) if not verdicts else [t for t in tiers if t["state"] == "measured"]):
        params = {"tier": tier["name"]}
        failed = [i for i in tier["intervals"] if i["error"]]
        broken = [i for i in tier["intervals"] if not i["error"] and (i.get("fio_exit") or "reason" in i)]
        evidence = {"errors": failed, "fio_failures": broken, "intervals": len(tier["intervals"]),
                    "complete": tier.get("complete", True)}
        if failed:
            shown = ", ".join(f"{errno_name(i['error'])} in {i['phase']} at {i['clients']} clients, {i['t_s']} s in"
                              for i in failed[:6])
            verdicts.append(Verdict("fail", f"I/O errors under sustained load on {_where(tier)}: {shown}"
                                    + (f" (+{len(failed) - 6} more)" if len(failed) > 6 else ""), len(failed),
                                    "intervals", evidence=evidence, params=params))
        elif broken:
            first = broken[0]
            verdicts.append(Verdict("error", f"fio failed on {_where(tier)} without naming an I/O error in "
                                    f"{len(broken)} interval(s), first {first['phase']} at {first['clients']} clients "
                                    f"(exit status {first.get('fio_exit')}"
                                    + (f"; {first['reason']}" if first.get("reason") else "") + ")",
                                    evidence=evidence, params=params))
        elif not tier.get("complete", True):
            verdicts.append(Verdict("error", f"the endurance run on {_where(tier)} was cut short after "
                                    f"{len(tier['intervals'])} interval(s): {tier.get('reason')}",
                                    evidence=evidence, params=params))
        else:
            runs = sorted({(i["clients"], i["phase"]) for i in tier["intervals"]})
            verdicts.append(Verdict("pass", f"{_where(tier)}: no I/O error in {len(tier['intervals'])} intervals "
                                    f"({', '.join(f'{p} at {c} clients' for c, p in runs)})", 0, "intervals",
                                    evidence=evidence, params=params))
    return verdicts
