"""GPU telemetry sampled while a session runs (role ``telemetry``): per GPU temperature, power, clocks, clock
event reasons, ECC and Xids, judged from the session's series (``Context.session``).

Two streams: ``gpu`` — ``nvidia-smi --query-gpu=... --format=csv -lms N``, or on a node with amd-smi and no
nvidia-smi ``amd-smi monitor ... -w S`` (parser ``gpu-telemetry-loop``: the same field names for both), one row
per GPU per interval — and ``kernel`` — new kernel log lines (parser ``kernel-gpu-events``: Xids and amdgpu
RAS events). Xids are judged live: the result is recorded at the poll that brings the line, not when the session
ends.

AMD GPUs (rows with ``sampler: amd-smi``): ``temperature.gpu`` is the hotspot (junction) sensor, judged against
the MI300X/MI355X limits of ``baselines/telemetry.yml``; the clock throttle reasons come only from amd-smi's
``--violation`` columns, so without those the throttle check skips those GPUs and says why. Their driver's
errors are amdgpu RAS lines and GPU resets, not Xids: ``telemetry.kernel.xid`` judges those on AMD nodes
(uncorrectable errors and failed resets fail, correctable errors and resets warn). amd-smi monitor prints no
bus id, so an amdgpu line is judged under its PCI device (``pci:<bdf>``) and the GPUs it cannot be tied to
skip while the node has one.

What is normal under load (measured on an H200, ``../shared/research/h200-ground-truth.md``): the GPU sits at
its power cap, the SW power-cap reason is active and the SM clock falls from 1980 to about 1500 MHz. That is
not a finding; thermal and hardware slowdown are.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from typing import Any

from clustereval import baselines
from clustereval.checks import Context, HarnessError, Skip, Verdict, check
from clustereval.parsers import kernel_xid
from clustereval.results import component_subject, worst

GPU_STREAM, KERNEL_STREAM = "gpu", "kernel"
AREA = "telemetry"
# Clock event reasons that mean a fault (cooling, power delivery, a board signal), and those that are only
# worth saying; SW power capping and idle are normal.
FAULT_REASONS = ("hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown")
NOTE_REASONS = ("sw_thermal_slowdown",)
MASK_FIELDS = ("clocks_event_reasons.active", "clocks_throttle_reasons.active")
AMD_SAMPLER = "amd-smi"  # the ``sampler`` of rows parsed from amd-smi monitor (parsers/gpu_telemetry_loop.py)


def _session(ctx: Context):
    if ctx.session is None:
        raise HarnessError("no telemetry session was handed to this check")
    return ctx.session


def _bus(pci: Any) -> str | None:
    """A GPU's PCI domain and bus, the same whether nvidia-smi (``00000000:1B:00.0``) or the driver's Xid line
    (``0000:1b:00``) names it: ``0:1b``. Without a domain (``1b:00.0``) the domain is taken as 0."""
    parts = str(pci or "").split(":")
    if len(parts) == 2:
        parts = ["0", *parts]
    if len(parts) < 3:
        return None
    try:
        return f"{int(parts[0], 16):x}:{parts[1].lower()}"
    except ValueError:
        return None


def per_gpu(ctx: Context) -> dict[int, dict[str, Any]]:
    """Every GPU's samples summarised: counts, min/max/mean of the numeric fields, reasons seen, ECC counters
    at the first and last sample, and how many samples had no reading (a GPU gone from the bus)."""
    session = _session(ctx)
    gpus: dict[int, dict[str, Any]] = {}
    values: dict[int, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for row in session.rows(GPU_STREAM):
        index = row.get("index")
        if not isinstance(index, int):
            continue
        gpu = gpus.setdefault(index, {"index": index, "samples": 0, "unreadable": 0, "reasons": defaultdict(int),
                                      "pci": row.get("pci.bus_id"), "first": row.get("timestamp"),
                                      "ecc_first": {}, "ecc_last": {}, "sampler": row.get("sampler"),
                                      "reasons_read": False})
        gpu["samples"] += 1
        gpu["last"] = row.get("timestamp")
        if row.get("temperature.gpu") is None and row.get("power.draw") is None:
            gpu["unreadable"] += 1
        for field in ("temperature.gpu", "temperature.memory", "power.draw", "power.limit", "clocks.current.sm",
                      "clocks.current.memory", "utilization.gpu"):
            value = row.get(field)
            if isinstance(value, int | float) and not isinstance(value, bool):
                values[index][field].append(float(value))
        if row.get("throttle_reasons_source"):
            gpu["reasons_read"] = True
        for name in str(row.get("throttle_reasons_active") or "").split("|"):
            if name:
                gpu["reasons"][name] += 1
        for field in ("ecc.errors.corrected.volatile.total", "ecc.errors.uncorrected.volatile.total"):
            value = row.get(field)
            if isinstance(value, int | float):
                gpu["ecc_first"].setdefault(field, value)
                gpu["ecc_last"][field] = value
    for index, gpu in gpus.items():
        gpu["stats"] = {field: {"min": min(v), "max": max(v), "mean": round(statistics.fmean(v), 2),
                                "median": statistics.median(v)} for field, v in values[index].items() if v}
        gpu["reasons"] = dict(gpu["reasons"])
    return gpus


NO_GPU = ("No devices were found", "command not found", "couldn't communicate with the NVIDIA driver")


def _no_samples(ctx: Context) -> Exception:
    """Why the sampler has no sample: no GPU on the node (skip), or the sampler failed (error, its words)."""
    session = _session(ctx)
    said = session.output_tail(GPU_STREAM) + session.stderr_tail(GPU_STREAM)
    if any(marker in line for line in said for marker in NO_GPU):
        return Skip(f"no GPU samples: {said[-1]}")
    if said:
        return HarnessError(f"the GPU sampler produced no sample: {said[-1]}")
    return HarnessError("the GPU sampler printed nothing")


def _gpus_or_skip(ctx: Context) -> dict[int, dict[str, Any]]:
    gpus = per_gpu(ctx)
    if not gpus:
        raise _no_samples(ctx)
    return gpus


def _limit(ctx: Context, check_id: str) -> baselines.Limit:
    return ctx.reference(AREA, check_id)


def _subject(ctx: Context, index: int) -> str:
    return component_subject(ctx.subject, f"gpu{index}")


def _with_series(ctx: Context) -> list[dict[str, Any]]:
    return [ref for ref in _session(ctx).recorder.series_refs() if ref.get("stream") == GPU_STREAM]


def _verdict(ctx: Context, index: int, status: str, summary: str, value: Any, unit: str, expected: Any,
             evidence: dict[str, Any]) -> Verdict:
    session = _session(ctx)
    if session.interrupted:
        summary += f" (the session was cut short: {session.interrupted})"
    return Verdict(status, summary, value, unit, expected, evidence, series=_with_series(ctx),
                   measured=session.measured(), subject=_subject(ctx, index))


@check("telemetry.gpu.temperature")
def temperature(ctx: Context) -> list[Verdict]:
    gpus = _gpus_or_skip(ctx)
    core = _limit(ctx, "telemetry.gpu.temperature")
    memory = _limit(ctx, "telemetry.gpu.memory_temperature")
    verdicts = []
    for index, gpu in sorted(gpus.items()):
        stats = gpu["stats"]
        if "temperature.gpu" not in stats:
            verdicts.append(_verdict(ctx, index, "fail", f"GPU {index}: no temperature reading in "
                                     f"{gpu['samples']} samples (the GPU stopped answering)", None, "°C",
                                     core.expected(), {"samples": gpu["samples"], "unreadable": gpu["unreadable"]}))
            continue
        hottest = stats["temperature.gpu"]["max"]
        statuses = [baselines.grade(hottest, core)]
        findings = [f"GPU {index} reached {hottest:.0f} °C"]
        hbm = stats.get("temperature.memory", {}).get("max")
        if hbm is not None:
            statuses.append(baselines.grade(hbm, memory))
            findings.append(f"HBM {hbm:.0f} °C")
        status = worst(statuses)
        if status != "pass":
            findings.append(f"limits: GPU warn {core.warn}/fail {core.fail} °C, HBM warn {memory.warn}/fail "
                            f"{memory.fail} °C ({core.matched})")
        verdicts.append(_verdict(ctx, index, status, ", ".join(findings), hottest, "°C", core.expected(),
                                 {"temperature": stats["temperature.gpu"], "memory_temperature": stats.get(
                                     "temperature.memory"), "samples": gpu["samples"]}))
    return verdicts


@check("telemetry.gpu.throttle")
def throttle(ctx: Context) -> list[Verdict]:
    gpus = _gpus_or_skip(ctx)
    interval = float(ctx.params.get("interval_ms") or 1000) / 1000.0
    verdicts = []
    for index, gpu in sorted(gpus.items()):
        if gpu.get("sampler") == AMD_SAMPLER and not gpu.get("reasons_read"):
            verdicts.append(_verdict(ctx, index, "skip", f"GPU {index}: amd-smi monitor gave no throttle reasons "
                                     "(its --violation columns were not sampled), so throttling is not judged",
                                     None, "s", None, {"samples": gpu["samples"], "sampler": AMD_SAMPLER}))
            continue
        reasons = gpu["reasons"]
        faults = {r: reasons[r] for r in FAULT_REASONS if reasons.get(r)}
        notes = {r: reasons[r] for r in NOTE_REASONS if reasons.get(r)}
        seconds = round(sum(faults.values()) * interval, 1)
        evidence = {"reasons_samples": reasons, "samples": gpu["samples"], "interval_s": interval}
        if faults:
            text = ", ".join(f"{r} in {n} of {gpu['samples']} samples" for r, n in faults.items())
            verdicts.append(_verdict(ctx, index, "fail", f"GPU {index} was slowed by hardware: {text}", seconds,
                                     "s", {"max": 0, "unit": "s", "source": "any HW slowdown is a fault"},
                                     evidence))
        elif notes:
            text = ", ".join(f"{r} in {n} of {gpu['samples']} samples" for r, n in notes.items())
            verdicts.append(_verdict(ctx, index, "warn", f"GPU {index} throttled for heat by the driver: {text}",
                                     round(sum(notes.values()) * interval, 1), "s",
                                     {"max": 0, "unit": "s",
                                      "source": "SW thermal slowdown means the cooling margin is gone"}, evidence))
        else:
            capped = reasons.get("sw_power_cap", 0)
            extra = f"; at its power cap in {capped} samples (normal under load)" if capped else ""
            verdicts.append(_verdict(ctx, index, "pass", f"GPU {index}: no thermal or hardware slowdown in "
                                     f"{gpu['samples']} samples{extra}", 0.0, "s", None, evidence))
    return verdicts


@check("telemetry.gpu.clocks")
def clocks(ctx: Context) -> list[Verdict]:
    """A GPU whose median SM clock drifts below its node's other GPUs over the same interval."""
    gpus = _gpus_or_skip(ctx)
    medians = {i: g["stats"]["clocks.current.sm"]["median"] for i, g in gpus.items()
               if "clocks.current.sm" in g["stats"]}
    if len(medians) < 2:
        raise Skip(f"a clock comparison needs two or more GPUs with SM clock readings; {len(medians)} had them")
    limit = _limit(ctx, "telemetry.gpu.clocks")
    node_median = statistics.median(medians.values())
    verdicts = []
    for index, gpu in sorted(gpus.items()):
        if index not in medians:
            verdicts.append(_verdict(ctx, index, "fail", f"GPU {index}: no SM clock reading", None, "MHz", None, {}))
            continue
        ratio = medians[index] / node_median if node_median else 1.0
        status = baselines.grade(ratio, limit)
        text = (f"GPU {index}: median SM clock {medians[index]:.0f} MHz, {ratio:.0%} of the node's median "
                f"{node_median:.0f} MHz")
        verdicts.append(_verdict(ctx, index, status, text, medians[index], "MHz",
                                 {**limit.expected(), "basis": "ratio to the node's median GPU"},
                                 {"sm_clock": gpu["stats"]["clocks.current.sm"],
                                  "ratio_to_node_median": round(ratio, 3)}))
    return verdicts


@check("telemetry.gpu.power")
def power(ctx: Context) -> list[Verdict]:
    """Power readings present, never above the enforced limit, and the same limit on every GPU of the node."""
    gpus = _gpus_or_skip(ctx)
    limits = {i: g["stats"]["power.limit"]["max"] for i, g in gpus.items() if "power.limit" in g["stats"]}
    common = statistics.median(limits.values()) if limits else None
    verdicts = []
    for index, gpu in sorted(gpus.items()):
        stats = gpu["stats"]
        if "power.draw" not in stats:
            verdicts.append(_verdict(ctx, index, "fail", f"GPU {index}: no power reading in "
                                     f"{gpu['samples']} samples", None, "W", None, {"samples": gpu["samples"]}))
            continue
        peak, cap = stats["power.draw"]["max"], limits.get(index)
        evidence = {"power": stats["power.draw"], "limit_w": cap, "node_limit_w": common}
        if cap and peak > cap * 1.05:
            status, text = "warn", f"GPU {index} drew {peak:.0f} W, above its {cap:.0f} W limit"
        elif cap and common and cap < common * 0.95:
            status, text = "warn", f"GPU {index} is capped at {cap:.0f} W where its node's GPUs have {common:.0f} W"
        else:
            status, text = "pass", f"GPU {index}: {stats['power.draw']['mean']:.0f} W mean, {peak:.0f} W peak" + (
                f" of {cap:.0f} W" if cap else "")
        verdicts.append(_verdict(ctx, index, status, text, peak, "W", None, evidence))
    return verdicts


@check("telemetry.gpu.ecc")
def ecc(ctx: Context) -> list[Verdict]:
    gpus = _gpus_or_skip(ctx)
    verdicts = []
    for index, gpu in sorted(gpus.items()):
        growth = {f.split(".")[2]: gpu["ecc_last"][f] - gpu["ecc_first"].get(f, gpu["ecc_last"][f])
                  for f in gpu["ecc_last"]}
        if not growth:
            verdicts.append(_verdict(ctx, index, "skip", f"GPU {index}: ECC counters not readable (ECC off?)",
                                     None, "errors", None, {}))
            continue
        evidence = {"growth": growth, "first": gpu["ecc_first"], "last": gpu["ecc_last"]}
        if growth.get("uncorrected", 0) > 0:
            status = "fail"
            text = f"GPU {index}: {growth['uncorrected']:g} uncorrectable ECC errors during the session"
        elif growth.get("corrected", 0) > 0:
            status, text = "warn", f"GPU {index}: {growth['corrected']:g} corrected ECC errors during the session"
        else:
            status, text = "pass", f"GPU {index}: no new ECC errors"
        verdicts.append(_verdict(ctx, index, status, text, float(sum(growth.values())), "errors", None, evidence))
    return verdicts


# What an amdgpu kernel event makes of the GPU it names while the GPUs are watched (parsers/kernel_amd_ras.py).
AMDGPU_STATUS = {"ue": "fail", "reset_failed": "fail", "firmware_failure": "fail", "ce": "warn", "de": "warn",
                 "reset_begin": "warn", "reset_method": "warn", "reset_succeeded": "warn", "ras_notice": "warn"}


def _amdgpu_events(rows: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """amdgpu RAS events and resets by ``pci:<bdf>`` (``pci:unknown`` for a line naming no device), counted once
    however many kernel log sources carried them."""
    seen: set[tuple] = set()
    out: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        if row.get("kind") != "amdgpu":
            continue
        key = (row.get("pci"), row.get("ras"), str(row.get("message") or "")[:200], row.get("timestamp"))
        if key in seen:
            continue
        seen.add(key)
        out[f"pci:{row.get('pci') or 'unknown'}"].append(row)
    return out


def _amdgpu_verdict(ctx: Context, device: str, seen: list[dict[str, Any]], session: Any) -> Verdict:
    status = worst([AMDGPU_STATUS.get(str(r.get("ras")), "warn") for r in seen])
    kinds = sorted({str(r.get("ras")) for r in seen})
    ue = sum(int(r.get("count") or 0) for r in seen if r.get("ras") == "ue")
    ce = sum(int(r.get("count") or 0) for r in seen if r.get("ras") == "ce")
    said = f"{ue} uncorrectable, {ce} correctable RAS error(s)" if ue or ce else ", ".join(kinds)
    events_out = [{"at": r.get("timestamp"), "event": f"amdgpu {r.get('ras')}", "block": r.get("block"),
                   "message": str(r.get("message"))[:200]} for r in seen]
    return Verdict(status, f"{device[4:]}: amdgpu {said} while the GPUs were watched: "
                   f"{str(seen[0].get('message'))[:160]}", len(seen), "events",
                   {"max": 0, "unit": "events", "source": "uncorrectable errors and failed resets fail; "
                    "correctable errors and resets warn"}, {"kinds": kinds, "pci": device[4:]},
                   series=[r for r in session.recorder.series_refs() if r.get("stream") == KERNEL_STREAM],
                   measured={**session.measured(), "events": events_out},
                   subject=component_subject(ctx.subject, device))


def _xid_events(rows: list[dict[str, Any]]) -> dict[tuple, dict[str, Any]]:
    """Xid events by (bus, code, message), counted once however many kernel log sources carried them."""
    out: dict[tuple, dict[str, Any]] = {}
    for row in rows:
        if row.get("kind", "xid") != "xid" or row.get("code") is None:
            continue
        key = (_bus(row.get("pci")), row.get("code"), str(row.get("message") or "")[:200])
        out.setdefault(key, row)
    return out


# What an Xid's catalogue severity makes of it while the GPU is watched (parsers/data/xid_catalogue.yml).
XID_STATUS = {"critical": "fail", "major": "fail", "minor": "warn", "info": "pass"}


@check("telemetry.kernel.xid")
def xid(ctx: Context) -> list[Verdict] | None:
    """An Xid while the GPUs were watched: judged at the poll that brings it (live), and at the end per GPU.
    Its status follows the Xid catalogue's severity (critical and major fail, minor warns, info passes).
    An Xid that comes before the first GPU sample is left to the end: only the samples tell which GPU a PCI
    bus is, and a live result under the bus would never be superseded by the GPU's own at the end."""
    session = _session(ctx)
    rows = list(session.rows(KERNEL_STREAM)) if session.final else list(
        session.chunk(KERNEL_STREAM).get("events") or [])
    events = _xid_events(rows)
    amdgpu = _amdgpu_events(rows)
    if not session.final and not events and not amdgpu:
        return None  # nothing new this poll: nothing to record yet
    gpus = per_gpu(ctx)
    amdgpu_verdicts = [_amdgpu_verdict(ctx, device, seen, session) for device, seen in sorted(amdgpu.items())]
    if not session.final and not gpus:
        # no GPU sampled yet: Xids are judged at the end, under the GPU they happened on; an amdgpu line is
        # judged under its PCI device whenever it comes
        return amdgpu_verdicts or None
    by_bus = {_bus(g.get("pci")): i for i, g in gpus.items()}
    found: dict[Any, list[dict[str, Any]]] = defaultdict(list)
    for (bus, _code, _message), row in events.items():
        found[by_bus.get(bus, f"pci:{row.get('pci')}")].append(row)
    verdicts = list(amdgpu_verdicts)
    targets = sorted(set(gpus) | set(found), key=str) if session.final else sorted(found, key=str)
    for index in targets:
        seen = found.get(index, [])
        subject = _subject(ctx, index) if isinstance(index, int) else component_subject(ctx.subject, str(index))
        if not seen and gpus.get(index, {}).get("sampler") == AMD_SAMPLER:
            if amdgpu:
                devices = ", ".join(d[4:] for d in sorted(amdgpu))
                verdicts.append(Verdict("skip", f"GPU {index}: amdgpu RAS events on {devices} while the GPUs were "
                                        "watched (judged under those devices); amd-smi monitor names no bus id to "
                                        "tie them to this GPU", None, "events", None, {"sampler": AMD_SAMPLER},
                                        measured=session.measured(), subject=subject))
            else:
                verdicts.append(Verdict("pass", f"GPU {index}: no amdgpu RAS error or GPU reset while it was "
                                        "watched", 0, "events", None, {"sources": "kernel log",
                                                                       "sampler": AMD_SAMPLER},
                                        measured=session.measured(), subject=subject))
            continue
        if not seen:
            verdicts.append(Verdict("pass", f"GPU {index}: no Xid while it was watched", 0, "events", None,
                                    {"sources": "kernel log"}, measured=session.measured(), subject=subject))
            continue
        codes = sorted({int(r["code"]) for r in seen})
        infos = {c: kernel_xid.xid_info(c) or {} for c in codes}
        status = worst([XID_STATUS.get(str(infos[c].get("severity") or "critical"), "fail") for c in codes])
        names = ", ".join(f"Xid {c} ({(infos[c].get('name') or 'not in the catalogue')})" for c in codes)
        events_out = [{"at": r.get("timestamp"), "event": "xid", "code": int(r["code"]),
                       "message": str(r.get("message"))[:200]} for r in seen]
        verdicts.append(Verdict(status, f"GPU {index}: {names} while the GPU was watched: "
                                f"{str(seen[0].get('message'))[:160]}", len(seen), "events",
                                {"max": 0, "unit": "events", "source": "parsers/data/xid_catalogue.yml severity"},
                                {"codes": codes, "catalogue": infos},
                                series=[r for r in session.recorder.series_refs() if r.get("stream") == KERNEL_STREAM],
                                measured={**session.measured(), "events": events_out}, subject=subject))
    return verdicts


@check("telemetry.sampler.samples")
def samples(ctx: Context) -> Verdict:
    """The sampler itself: how many samples came, the gaps between them and how the session ended."""
    session = _session(ctx)
    gpus = per_gpu(ctx)
    stats = session.recorder.stats()
    expected_s = float(ctx.params.get("duration_s") or 0)
    count = sum(g["samples"] for g in gpus.values())
    evidence = {"streams": stats, "gpus": len(gpus), "end_reason": session.end_reason,
                "expected_duration_s": expected_s}
    measured = session.measured()
    if session.interrupted:
        return Verdict("error", f"the sampler was cut short ({session.interrupted}); {count} samples of "
                       f"{len(gpus)} GPUs are kept", count, "samples", None, evidence,
                       series=session.recorder.series_refs(), measured=measured)
    if not gpus:
        raise _no_samples(ctx)
    parse_errors = stats.get(GPU_STREAM, {}).get("parse_errors", 0)
    if parse_errors:
        return Verdict("error", f"{parse_errors} chunks of sampler output could not be parsed: "
                       f"{stats[GPU_STREAM]['last_parse_error']}", count, "samples", None, evidence,
                       series=session.recorder.series_refs(), measured=measured)
    per = {i: g["samples"] for i, g in gpus.items()}
    interval_s = float(ctx.params.get("interval_ms") or 0) / 1000.0
    wanted = int(expected_s / interval_s) if expected_s > 0 and interval_s > 0 else 0
    short = {i: n for i, n in per.items() if n < wanted / 2}
    if short:
        # The GPU stream died (or stalled) while the session ran on: what was kept is less evidence than asked for.
        evidence["expected_samples"] = wanted
        return Verdict("warn", f"{count} samples of {len(gpus)} GPUs; GPU(s) {', '.join(map(str, short))} gave "
                       f"{', '.join(map(str, short.values()))} of about {wanted} samples (the sampler stopped early)",
                       count, "samples", None, evidence, series=session.recorder.series_refs(), measured=measured)
    lost = {i: g["unreadable"] for i, g in gpus.items() if g["unreadable"]}
    if lost:
        evidence["unreadable_samples"] = lost
        return Verdict("warn", f"{count} samples of {len(gpus)} GPUs; GPU(s) {', '.join(map(str, lost))} stopped "
                       f"giving readings ({', '.join(f'{n} samples' for n in lost.values())} without values)",
                       count, "samples", None, evidence, series=session.recorder.series_refs(), measured=measured)
    return Verdict("pass", f"{count} samples of {len(gpus)} GPUs ({min(per.values())}–{max(per.values())} each) "
                   f"over the session ({session.end_reason or 'ended'})", count, "samples", None, evidence,
                   series=session.recorder.series_refs(), measured=measured)
