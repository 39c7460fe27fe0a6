"""Storage checks: node-local scratch bandwidth measured with fio."""

from __future__ import annotations

from typing import Any

from clustereval import baselines
from clustereval.checks import Context, HarnessError, Verdict, check


def _fio_bandwidth(ctx: Context, check_id: str, probe: str, direction: str) -> Verdict:
    data = ctx.parsed(probe)
    jobs = data.get("jobs") or []
    if not jobs:
        raise HarnessError("fio printed no job results")
    errors = {job.get("name"): job.get("error") for job in jobs if job.get("error")}
    totals = (data.get("totals") or {}).get(direction) or {}
    mibps = totals.get("bw_mibps")
    if mibps is None:
        mibps = sum((job.get(direction) or {}).get("bw_mibps") or 0 for job in jobs)
    mbps = round(float(mibps) * 1.048576, 1)
    lim = ctx.limit("storage", check_id)
    first = jobs[0].get(direction) or {}
    evidence: dict[str, Any] = {
        "fio_version": data.get("fio_version"),
        "bw_mibps": mibps,
        "iops": totals.get("iops", first.get("iops")),
        "clat_mean_us": first.get("clat_mean_us"),
        "clat_p99_us": (first.get("clat_percentiles_us") or {}).get("99.000000"),
        "directory": ctx.options.get("scratch_dir"),
    }
    if errors:
        return Verdict("fail", f"fio reported I/O errors: {errors}", mbps, "MB/s", lim.expected(), evidence)
    if mbps <= 0:
        return Verdict("fail", f"fio moved no data in {direction} on {ctx.options.get('scratch_dir')}",
                       mbps, "MB/s", lim.expected(), evidence)
    status = baselines.grade(mbps, lim)
    where = ctx.options.get("scratch_dir") or "scratch"
    summary = {
        "pass": f"{direction} {mbps:.0f} MB/s on {where}",
        "warn": f"{direction} {mbps:.0f} MB/s on {where}, below the expected {lim.warn} MB/s",
        "fail": f"{direction} {mbps:.0f} MB/s on {where}, below the failure level {lim.fail} MB/s",
    }[status]
    return Verdict(status, summary, mbps, "MB/s", lim.expected(), evidence)


@check("storage.fio.seq_write")
def fio_seq_write(ctx: Context) -> Verdict:
    return _fio_bandwidth(ctx, "storage.fio.seq_write", "fio_seq_write", "write")


@check("storage.fio.seq_read")
def fio_seq_read(ctx: Context) -> Verdict:
    return _fio_bandwidth(ctx, "storage.fio.seq_read", "fio_seq_read", "read")
