"""Storage checks: node-local scratch bandwidth measured with fio, judged against what backs the scratch
directory (NVMe, SSD, a virtual disk...) as the storage_scratch_device probe found it."""

from __future__ import annotations

from typing import Any

from clustereval import baselines
from clustereval.checks import Context, HarnessError, ProbeFailed, Skip, Verdict, check

DEVICE_PROBE = "storage_scratch_device"


def _scratch_facts(ctx: Context) -> dict[str, Any]:
    """The host's facts plus what backs its scratch directory (``scratch_kind``, ``scratch_transport``...)."""
    out = dict(ctx.facts)
    try:
        device = ctx.parsed(DEVICE_PROBE)
    except (Skip, HarnessError, ProbeFailed) as exc:
        out["scratch_problem"] = str(exc)
        return out
    out.update(scratch_kind=device["kind"], scratch_transport=device["transport"], scratch_fstype=device["fstype"],
               scratch_source=device["source"], scratch_rotational=device["rotational"])
    return out


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
    facts = _scratch_facts(ctx)
    where = ctx.options.get("scratch_dir") or "scratch"
    first = jobs[0].get(direction) or {}
    evidence: dict[str, Any] = {
        "fio_version": data.get("fio_version"),
        "bw_mibps": mibps,
        "iops": totals.get("iops", first.get("iops")),
        "clat_mean_us": first.get("clat_mean_us"),
        "clat_p99_us": (first.get("clat_percentiles_us") or {}).get("99.000000"),
        "directory": ctx.options.get("scratch_dir"),
        "scratch": {k: v for k, v in facts.items() if k.startswith("scratch_")},
    }
    lim = ctx.reference("storage", check_id, skip_prefix=f"{direction} {mbps:.0f} MB/s on {where}; ", facts=facts)
    if errors:
        return Verdict("fail", f"fio reported I/O errors: {errors}", mbps, "MB/s", lim.expected(), evidence)
    if mbps <= 0:
        return Verdict("fail", f"fio moved no data in {direction} on {where}", mbps, "MB/s", lim.expected(),
                       evidence)
    status = baselines.grade(mbps, lim)
    backing = facts.get("scratch_kind") or "unidentified device"
    summary = {
        "pass": f"{direction} {mbps:.0f} MB/s on {where} ({backing})",
        "warn": f"{direction} {mbps:.0f} MB/s on {where} ({backing}), below the expected {lim.warn} MB/s",
        "fail": f"{direction} {mbps:.0f} MB/s on {where} ({backing}), below the failure level {lim.fail} MB/s",
    }[status]
    return Verdict(status, summary, mbps, "MB/s", lim.expected(), evidence)


@check("storage.fio.seq_write")
def fio_seq_write(ctx: Context) -> Verdict:
    return _fio_bandwidth(ctx, "storage.fio.seq_write", "fio_seq_write", "write")


@check("storage.fio.seq_read")
def fio_seq_read(ctx: Context) -> Verdict:
    return _fio_bandwidth(ctx, "storage.fio.seq_read", "fio_seq_read", "read")
