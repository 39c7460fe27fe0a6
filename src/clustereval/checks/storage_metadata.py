"""Small-file metadata checks: every tier a user writes to on a node (the tiers the fio matrix finds), each
measured with clustereval's mdtest-like benchmark (``storage_tier_metadata``: ``clients`` processes in
directories of their own, mkdir of a tree, create, stat, open+read, rename and remove of small files, rmdir).
One verdict per tier (params ``tier``) for each phase's rate, for the worst latency tail and for errors.

What the buyers' complaints look like in this data: a shared home whose bulk bandwidth is fine while a create
or an open takes tens of milliseconds (an overloaded metadata server): ``pip install`` of a wheel of 15,000
files takes minutes, untarring a dataset hours, and ``import torch`` (about 16,500 stat() calls and 1,300
opens) 10-20 s instead of 1-2.
"""

from __future__ import annotations

from typing import Any

from clustereval import baselines
from clustereval.checks import Context, HarnessError, Skip, Verdict, check
from clustereval.parsers.probe_storage_metadata import problem_text

PROBE = "storage_tier_metadata"
# check id -> (benchmark phase, what one operation is, in a summary)
RATES = {
    "storage.metadata.mkdir": ("mkdir", "directory creates"),
    "storage.metadata.create": ("create", "file creates (4 KiB written, closed)"),
    "storage.metadata.stat": ("stat", "stats"),
    "storage.metadata.read": ("read", "small-file reads (open, read, close)"),
    "storage.metadata.rename": ("rename", "renames"),
    "storage.metadata.remove": ("remove", "file removes"),
    "storage.metadata.rmdir": ("rmdir", "directory removes"),
}
# stat() calls of `import torch` (torch 2.x from a virtual environment, counted with strace -c): how long one
# takes at a tier's stat latency says what a researcher feels.
IMPORT_TORCH_STATS = 16_500


def _where(tier: dict[str, Any]) -> str:
    shared = "shared" if tier.get("shared") else "local"
    return f"{tier['name']} ({tier['path']}, {tier.get('fstype')}, {shared})"


def _latency(us: float | None) -> str:
    if us is None:
        return "?"
    return f"{us:.0f} µs" if us < 1000 else f"{us / 1000:.2f} ms" if us < 10_000 else f"{us / 1000:.0f} ms"


def _duration(seconds: float) -> str:
    return f"~{seconds:.0f} s" if seconds < 120 else f"~{seconds / 60:.0f} min"


def _tiers(ctx: Context) -> list[dict[str, Any]]:
    """The tiers to judge (one measurement per filesystem: a tier on a filesystem measured under another name
    is left out); the probe's own skip or harness error, or no tier at all, raised as such."""
    parsed = ctx.parsed(PROBE)
    if parsed.get("harness_error"):
        raise HarnessError(parsed["harness_error"])
    if parsed.get("skip"):
        raise Skip(parsed["skip"])
    tiers = [t for t in parsed["tiers"] if t["state"] != "same_filesystem"]
    if not any(t["state"] not in ("missing", "unwritable") for t in tiers):
        raise Skip("no storage tier could be measured: " + "; ".join(
            f"{t['name']} ({t['path'] or 'not set'}): {t.get('reason')}" for t in parsed["tiers"]))
    return tiers


def _unmeasured(tier: dict[str, Any], params: dict[str, Any]) -> Verdict | None:
    """The verdict of a tier the benchmark did not measure: a skip for a tier that is not there or not
    writable (storage.tier.inventory judges that), an error for a run that failed or was cut short."""
    if tier["state"] == "measured":
        return None
    text = f"tier {tier['name']} ({tier['path'] or 'not set'}) {tier['state'].replace('_', ' ')}: {tier.get('reason')}"
    return Verdict("skip" if tier["state"] in ("missing", "unwritable") else "error", text, params=params)


def _facts(ctx: Context, tier: dict[str, Any]) -> dict[str, Any]:
    """What a tier's expected values are matched on: what backs it (``tier_kind``) and how many clients the
    benchmark ran on the node (``metadata_clients``: the rates' levels are per client)."""
    return {**ctx.facts, "tier_kind": tier.get("kind"), "metadata_clients": (tier.get("settings") or {}).get("clients")}


def _clients(tier: dict[str, Any]) -> str:
    settings = tier.get("settings") or {}
    return f"{settings.get('clients', '?')} clients"


def _rate(ctx: Context, check_id: str) -> list[Verdict]:
    phase_name, what = RATES[check_id]
    verdicts = []
    for tier in _tiers(ctx):
        params = {"tier": tier["name"]}
        unmeasured = _unmeasured(tier, params)
        if unmeasured:
            verdicts.append(unmeasured)
            continue
        phase = tier["phases"].get(phase_name)
        if phase is None:
            why = problem_text(tier.get("problems") or []) or "no reason given"
            verdicts.append(Verdict("error", f"the metadata benchmark stopped before its {phase_name} phase on "
                                    f"{_where(tier)}: {why}", params=params))
            continue
        if phase["planned"] == 0:
            verdicts.append(Verdict("skip", f"nothing to {phase_name} on {_where(tier)}: the earlier phases left "
                                    f"no file or directory", params=params))
            continue
        try:
            lim = ctx.reference("storage", check_id, facts=_facts(ctx, tier))
        except Skip as exc:
            verdicts.append(Verdict("skip", str(exc), phase["ops_per_s"], "ops/s", params=params))
            continue
        rate = float(phase["ops_per_s"] or 0.0)
        evidence = {"tier": {k: v for k, v in tier.items() if k != "phases"}, "phase": phase}
        if phase["ops"] == 0:
            failed = ", ".join(f"{name} x{count}" for name, count in sorted(phase["errors"].items()))
            verdicts.append(Verdict("fail", f"every one of {phase['attempted']} {what} failed on {_where(tier)}: "
                                    f"{failed or 'no error reported'}", 0.0, "ops/s", lim.expected(), evidence,
                                    params=params))
            continue
        status = baselines.grade(rate, lim)
        text = f"{rate:,.0f} {what} per second on {_where(tier)} from {_clients(tier)}"
        if status != "pass":
            level = lim.warn if status == "warn" else lim.fail
            text = (f"slow metadata: {text}, below the {'expected' if status == 'warn' else 'failure level'} "
                    f"{level:,.0f}/s")
        text += (f" ({phase['ops']:,} in {phase['seconds']:.3g} s; p50 {_latency(phase['p50_us'])}, p99 "
                 f"{_latency(phase['p99_us'])})")
        if phase["cut_short"]:
            text += (f"; the {tier['settings'].get('phase_limit_s')} s phase limit ended it after "
                     f"{phase['attempted']:,} of {phase['planned']:,}")
        if phase_name == "stat" and phase["p50_us"]:
            evidence["import_torch_stats_s"] = round(IMPORT_TORCH_STATS * phase["p50_us"] / 1e6, 1)
            if status != "pass":
                text += (f"; `import torch`'s ~{IMPORT_TORCH_STATS:,} stats alone take "
                         f"{_duration(evidence['import_torch_stats_s'])} at this latency")
        verdicts.append(Verdict(status, text, round(rate, 1), "ops/s", lim.expected(), evidence, params=params))
    return verdicts


@check("storage.metadata.mkdir")
def metadata_mkdir(ctx: Context) -> list[Verdict]:
    return _rate(ctx, "storage.metadata.mkdir")


@check("storage.metadata.create")
def metadata_create(ctx: Context) -> list[Verdict]:
    return _rate(ctx, "storage.metadata.create")


@check("storage.metadata.stat")
def metadata_stat(ctx: Context) -> list[Verdict]:
    return _rate(ctx, "storage.metadata.stat")


@check("storage.metadata.read")
def metadata_read(ctx: Context) -> list[Verdict]:
    return _rate(ctx, "storage.metadata.read")


@check("storage.metadata.rename")
def metadata_rename(ctx: Context) -> list[Verdict]:
    return _rate(ctx, "storage.metadata.rename")


@check("storage.metadata.remove")
def metadata_remove(ctx: Context) -> list[Verdict]:
    return _rate(ctx, "storage.metadata.remove")


@check("storage.metadata.rmdir")
def metadata_rmdir(ctx: Context) -> list[Verdict]:
    return _rate(ctx, "storage.metadata.rmdir")


@check("storage.metadata.tail")
def metadata_tail(ctx: Context) -> list[Verdict]:
    """Per tier: the worst p99 latency of any phase. A metadata server that stalls now and then (seconds for
    one create) hangs every rank of a job that waits for the slowest, whatever the rates say."""
    verdicts = []
    for tier in _tiers(ctx):
        params = {"tier": tier["name"]}
        unmeasured = _unmeasured(tier, params)
        if unmeasured:
            verdicts.append(unmeasured)
            continue
        timed = {name: p for name, p in tier["phases"].items() if p.get("p99_us") is not None}
        if not timed:
            verdicts.append(Verdict("skip", f"no operation succeeded on {_where(tier)}: no latency to judge",
                                    params=params))
            continue
        try:
            lim = ctx.reference("storage", "storage.metadata.tail", facts=_facts(ctx, tier))
        except Skip as exc:
            verdicts.append(Verdict("skip", str(exc), params=params))
            continue
        worst = max(timed, key=lambda name: timed[name]["p99_us"])
        value = round(timed[worst]["p99_us"] / 1000, 3)
        status = baselines.grade(value, lim)
        shape = ", ".join(f"{name} {_latency(p['p99_us'])}" for name, p in timed.items())
        text = f"worst p99 {value:,.1f} ms ({worst}) on {_where(tier)} from {_clients(tier)}; p99 by phase: {shape}"
        if status != "pass":
            text = f"metadata operations stall: {text}"
        verdicts.append(Verdict(status, text, value, "ms", lim.expected(),
                                {"p99_us": {name: p["p99_us"] for name, p in timed.items()}, "worst": worst},
                                params=params))
    return verdicts


@check("storage.metadata.errors")
def metadata_errors(ctx: Context) -> list[Verdict]:
    """Per tier: any operation that failed (every client works in its own directory: nothing should ever
    fail), a client stuck in the filesystem, or files the benchmark could not remove."""
    verdicts = []
    for tier in _tiers(ctx):
        params = {"tier": tier["name"]}
        unmeasured = _unmeasured(tier, params)
        if unmeasured:
            verdicts.append(unmeasured)
            continue
        failed = [(name, errno, count) for name, p in tier["phases"].items()
                  for errno, count in sorted(p["errors"].items())]
        problems = tier.get("problems") or []
        hung = [p for p in problems if p.get("kind") in ("hung", "start_failed")]
        crashed = [p for p in problems if p.get("kind") not in ("hung", "start_failed")]
        samples = [s for p in tier["phases"].values() for s in p.get("error_samples") or []][:5]
        evidence = {"errors": [{"phase": n, "error": e, "count": c} for n, e, c in failed], "problems": problems,
                    "samples": samples, "left_behind": tier.get("left_behind") or [],
                    "bench_exit": tier.get("bench_exit")}
        total = sum(c for _, _, c in failed)
        if failed or hung or tier.get("left_behind"):
            parts = [f"{errno} x{count} in {name}" for name, errno, count in failed[:6]]
            parts += [problem_text(hung)] if hung else []
            parts += [f"could not remove {', '.join(tier['left_behind'][:3])}"] if tier.get("left_behind") else []
            verdicts.append(Verdict("fail", f"metadata operations failed on {_where(tier)}: {'; '.join(parts)}",
                                    total, "errors", evidence=evidence, params=params))
        elif crashed or tier.get("bench_exit"):
            verdicts.append(Verdict("error", f"the metadata benchmark exited with status {tier.get('bench_exit')} on "
                                    f"{_where(tier)} without a filesystem error"
                                    + (f": {problem_text(crashed)}" if crashed else ""), evidence=evidence,
                                    params=params))
        else:
            ops = sum(p["ops"] for p in tier["phases"].values())
            verdicts.append(Verdict("pass", f"{_where(tier)}: no metadata operation failed ({ops:,} in "
                                    f"{len(tier['phases'])} phases from {_clients(tier)})", 0, "errors",
                                    evidence=evidence, params=params))
    return verdicts
