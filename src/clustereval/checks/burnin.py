"""Burn-in and sustained collectives (role ``burnin``), judged over a session (``Context.session``).

The burn-in is one session per node with the streams ``gemm`` (GEMMs on every GPU, parser ``burnin-gemm``),
``gpu`` and ``kernel`` (the telemetry role's sampler and kernel log, so the telemetry checks judge them as
they are: ``burnin.gpu.*`` and ``burnin.kernel.xid``), ``counters`` (NVLink and InfiniBand error counters,
parser ``burnin-counters``) and, on the first node only, ``collective`` (the collective loop over every
node through mpirun, parser ``collective-loop``). The sustained run is a session on the first node with the
``collective`` stream alone.

``params.load`` says which part ran (both, gpu, network): a burn-in that did not stress both at once is not
the burn-in the issue asks for, and every result of it says so and warns at best.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from typing import Any

from clustereval import baselines
from clustereval.checks import Context, HarnessError, Skip, Verdict, check, telemetry
from clustereval.results import component_subject

AREA = "burnin"
GEMM, COLLECTIVE, COUNTERS = "gemm", "collective", "counters"
LOADS = ("both", "gpu", "network")
# The first minute of a burn-in is the decay check's reference; a shorter run takes its first quarter.
FIRST_S = 60.0


def _session(ctx: Context):
    if ctx.session is None:
        raise HarnessError("no burn-in session was handed to this check")
    return ctx.session


def _load(ctx: Context) -> str:
    return str(ctx.params.get("load") or "both")


def _partial(ctx: Context, status: str, summary: str) -> tuple[str, str]:
    """A burn-in that ran one part only warns at best and says so."""
    if ctx.params.get("session") == "burnin" and _load(ctx) != "both":
        return ("warn" if status == "pass" else status), f"{summary} (only the {_load(ctx)} part of the burn-in ran)"
    return status, summary


def _verdict(ctx: Context, status: str, summary: str, value: Any, unit: str, expected: Any,
             evidence: dict[str, Any], stream: str, subject: str | None = None,
             params: dict[str, Any] | None = None) -> Verdict:
    session = _session(ctx)
    status, summary = _partial(ctx, status, summary)
    if session.interrupted:
        summary += f" (the session was cut short: {session.interrupted})"
        status = "warn" if status == "pass" else status
    series = [r for r in session.recorder.series_refs() if r.get("stream") in (stream, "gpu")]
    return Verdict(status, summary, value, unit, expected, evidence, series=series, measured=session.measured(),
                   subject=subject, params=params)


def _no_rows(ctx: Context, stream: str, what: str) -> Exception:
    """Why a stream has no row: its own last words (a harness fault, never the cluster's)."""
    session = _session(ctx)
    said = session.output_tail(stream) + session.stderr_tail(stream)
    return HarnessError(f"the {what} produced no result" + (f": {said[-1]}" if said else " and printed nothing"))


def _skip_part(ctx: Context, part: str) -> None:
    if ctx.params.get("session") == "burnin" and _load(ctx) not in ("both", part):
        raise Skip(f"the burn-in ran with load={_load(ctx)}: no {part} load")


# ------------------------------------------------------------------ GEMM
def gemm_windows(ctx: Context) -> tuple[dict[int, list[dict[str, Any]]], list[dict[str, Any]]]:
    """(windows per device in order, error rows)."""
    windows: dict[int, list[dict[str, Any]]] = defaultdict(list)
    errors = []
    for row in _session(ctx).rows(GEMM):
        if row.get("kind") == "error":
            errors.append(row)
        elif isinstance(row.get("device"), int) and isinstance(row.get("tflops"), int | float):
            windows[row["device"]].append(row)
    return dict(windows), errors


def _gemm(ctx: Context) -> tuple[dict[int, list[dict[str, Any]]], list[dict[str, Any]]]:
    _skip_part(ctx, "gpu")
    windows, errors = gemm_windows(ctx)
    if not windows and not errors:
        raise _no_rows(ctx, GEMM, "burn-in GEMM")
    return windows, errors


def _gpu(ctx: Context, device: int) -> str:
    return component_subject(ctx.subject, f"gpu{device}")


def _errors_of(errors: list[dict[str, Any]], device: int) -> list[dict[str, Any]]:
    return [e for e in errors if e.get("device") in (device, None, "")]


def _failed_devices(ctx: Context, windows: dict, errors: list[dict[str, Any]]) -> list[Verdict]:
    """A device that reported an error and no window: it failed under load."""
    out = []
    for device in sorted({e.get("device") for e in errors if isinstance(e.get("device"), int)} - set(windows)):
        out.append(_verdict(ctx, "fail", f"GPU {device} failed under load: {_errors_of(errors, device)[0]['message']}",
                            None, "TFLOP/s", None, {"errors": _errors_of(errors, device)}, GEMM, _gpu(ctx, device)))
    return out


@check("burnin.gemm.sustained")
def sustained(ctx: Context) -> list[Verdict]:
    windows, errors = _gemm(ctx)
    backend = next((w.get("backend") for ws in windows.values() for w in ws), None)
    if backend == "cpu" and not (ctx.options.get("baseline_overrides") or {}).get("burnin.gemm.sustained"):
        raise Skip("no sustained reference for CPU (the GEMM ran on the CPU: PyTorch saw no GPU)")
    model = ctx.facts.get("gpu_model")
    try:
        limit = ctx.reference(AREA, "burnin.gemm.sustained")
    except Skip as exc:
        raise Skip(f"no sustained reference for {model or 'this GPU'} ({exc})") from None
    verdicts = _failed_devices(ctx, windows, errors)
    for device, rows in sorted(windows.items()):
        values = [float(r["tflops"]) for r in rows]
        mean = statistics.fmean(values)
        status = baselines.grade(mean, limit)
        failed = _errors_of(errors, device)
        text = (f"GPU {device}: {mean:.4g} TFLOP/s mean over {len(rows)} windows (min {min(values):.4g}, "
                f"max {max(values):.4g}), reference {limit.expected().get('reference', '?')} ({limit.matched})")
        if failed:
            status, text = "fail", f"{text}; then failed: {failed[0]['message']}"
        verdicts.append(_verdict(ctx, status, text, round(mean, 3), "TFLOP/s", limit.expected(),
                                 {"windows": len(rows), "min": min(values), "max": max(values),
                                  "dtype": rows[0].get("dtype"), "errors": failed}, GEMM, _gpu(ctx, device)))
    return verdicts


def _decay_ratio(rows: list[dict[str, Any]]) -> tuple[float, float, float]:
    """(first minute's mean, last minute's mean, ratio): spans of the same length at both ends (a quarter of the
    run when it is shorter than four minutes), so one slow window at the end decides nothing. A short last window
    (cut by the deadline) is left out."""
    total = float(rows[-1].get("elapsed_s") or len(rows))
    span_s = min(FIRST_S, max(total / 4.0, 0.0))
    first = [float(r["tflops"]) for r in rows if float(r.get("elapsed_s") or 0) <= span_s]
    first = first or [float(rows[0]["tflops"])]
    lengths = [float(r.get("seconds") or 0) for r in rows]
    typical = statistics.median(lengths) if lengths else 0
    full = [r for r in rows if float(r.get("seconds") or 0) >= 0.5 * typical] or rows
    end = float(full[-1].get("elapsed_s") or total)
    last = [float(r["tflops"]) for r in full if float(r.get("elapsed_s") or 0) > end - span_s]
    last = last or [float(full[-1]["tflops"])]
    base, tail = statistics.fmean(first), statistics.fmean(last)
    return base, tail, (tail / base if base else 0.0)


@check("burnin.gemm.decay")
def decay(ctx: Context) -> list[Verdict]:
    windows, errors = _gemm(ctx)
    limit = ctx.reference(AREA, "burnin.gemm.decay")
    verdicts = _failed_devices(ctx, windows, errors)
    for device, rows in sorted(windows.items()):
        if len(rows) < 3:
            verdicts.append(_verdict(ctx, "skip", f"GPU {device}: {len(rows)} windows, too few to compare the end "
                                     "with the start", None, "ratio", None, {}, GEMM, _gpu(ctx, device)))
            continue
        base, last, ratio = _decay_ratio(rows)
        status = baselines.grade(ratio, limit)
        text = (f"GPU {device}: {last:.4g} TFLOP/s at the end, {ratio:.0%} of the {base:.4g} TFLOP/s at the start "
                f"(mean of the first and of the last minute, or quarter of a shorter run)")
        verdicts.append(_verdict(ctx, status, text, round(ratio, 4), "ratio", limit.expected(),
                                 {"first_tflops": round(base, 6), "last_tflops": round(last, 6), "windows": len(rows)},
                                 GEMM, _gpu(ctx, device)))
    return verdicts


@check("burnin.gemm.drift")
def drift(ctx: Context) -> list[Verdict]:
    windows, errors = _gemm(ctx)
    means = {d: statistics.fmean(float(r["tflops"]) for r in rows) for d, rows in windows.items()}
    if len(means) < 2:
        raise Skip(f"a comparison between a node's GPUs needs two or more; {len(means)} ran the GEMM")
    limit = ctx.reference(AREA, "burnin.gemm.drift")
    median = statistics.median(means.values())
    verdicts = _failed_devices(ctx, windows, errors)
    for device, mean in sorted(means.items()):
        ratio = mean / median if median else 0.0
        status = baselines.grade(ratio, limit)
        text = f"GPU {device}: {mean:.4g} TFLOP/s mean, {ratio:.0%} of its node's median {median:.4g} TFLOP/s"
        verdicts.append(_verdict(ctx, status, text, round(ratio, 4), "ratio",
                                 {**limit.expected(), "basis": "ratio to the node's median GPU"},
                                 {"mean_tflops": round(mean, 3), "node_median_tflops": round(median, 3)}, GEMM,
                                 _gpu(ctx, device)))
    return verdicts


# ------------------------------------------------------------------ collectives
def collective_rows(ctx: Context) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(window rows, error rows) of the collective stream (a per-operation line is a window of one)."""
    windows, errors = [], []
    for row in _session(ctx).rows(COLLECTIVE):
        (errors if row.get("kind") == "error" else windows).append(row)
    return windows, errors


def _collectives(ctx: Context) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    _skip_part(ctx, "network")
    windows, errors = collective_rows(ctx)
    if not windows and not errors:
        raise _no_rows(ctx, COLLECTIVE, "collective loop")
    return windows, errors


def _ops(rows: list[dict[str, Any]]) -> int:
    return sum(int(r.get("ops") or 0) for r in rows)


def _judged_windows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The windows the stability is judged on: all but a last one the end of the run cut short (fewer operations
    than the others' median), which says nothing about the fabric."""
    if len(rows) > 1 and int(rows[-1].get("ops") or 0) < statistics.median(int(r.get("ops") or 0)
                                                                           for r in rows[:-1]):
        return rows[:-1]
    return rows


@check("burnin.collective.bandwidth")
def bandwidth(ctx: Context) -> list[Verdict]:
    windows, _ = _collectives(ctx)
    if not windows:
        raise Skip("no collective completed (burnin.collective.errors says why)")
    limit = ctx.reference(AREA, "burnin.collective.bandwidth")
    by: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in windows:
        if isinstance(row.get("busbw_gbps"), int | float) and row.get("ops"):
            by[str(row["collective"])].append(row)
    verdicts = []
    for collective, rows in sorted(by.items()):
        seconds = sum(float(r.get("seconds") or 0) for r in rows)
        # the run's mean: every window's bandwidth weighted by its time (total bytes x bus factor / total time)
        mean = (sum(float(r["busbw_gbps"]) * float(r.get("seconds") or 0) for r in rows) / seconds if seconds > 0
                else statistics.fmean(float(r["busbw_gbps"]) for r in rows))
        low = min(float(r.get("busbw_min_gbps", r["busbw_gbps"]) or 0) for r in rows)
        high = max(float(r.get("busbw_max_gbps", r["busbw_gbps"]) or 0) for r in rows)
        ordered = sorted(float(r["busbw_gbps"]) for r in _judged_windows(rows))
        median = statistics.median(ordered)
        p10 = ordered[int(len(ordered) * 0.1)]
        ratio = p10 / median if median else 0.0
        status = baselines.grade(ratio, limit)
        text = (f"{collective}: busbw mean {mean:.3f} GB/s, min {low:.3f}, max {high:.3f} over {_ops(rows)} runs "
                f"in {len(rows)} windows; slowest tenth of the windows at {ratio:.0%} of the median")
        verdicts.append(_verdict(ctx, status, text, round(mean, 4), "GB/s", limit.expected(),
                                 {"mean_gbps": round(mean, 4), "min_gbps": low, "max_gbps": high,
                                  "median_window_gbps": median, "p10_window_gbps": p10, "runs": _ops(rows),
                                  "windows": len(rows), "stability_ratio": round(ratio, 4),
                                  "bytes": rows[0].get("bytes"), "world_size": rows[0].get("world_size"),
                                  "backend": rows[0].get("backend")},
                                 COLLECTIVE, params={**ctx.params, "collective": collective}))
    return verdicts


@check("burnin.collective.errors")
def collective_errors(ctx: Context) -> Verdict:
    windows, errors = _collectives(ctx)
    done_ops = _ops(windows)
    wrong = sum(int(r.get("wrong") or 0) for r in windows)
    evidence = {"ops": done_ops, "windows": len(windows), "errors": errors[:10], "wrong": wrong}
    if errors:
        first = errors[0]
        kind = "timed out (a hang)" if first.get("timeout") else "failed"
        return _verdict(ctx, "fail", f"{first.get('collective')} {kind} at iteration {first.get('iteration')} after "
                        f"{done_ops} good operations: {first.get('message')}", float(len(errors) + wrong),
                        "errors", {"max": 0}, evidence, COLLECTIVE)
    if wrong:
        return _verdict(ctx, "fail", f"{wrong} of {done_ops} collective results were wrong", float(wrong),
                        "errors", {"max": 0}, evidence, COLLECTIVE)
    done = done_ops > 0 and not _session(ctx).interrupted
    return _verdict(ctx, "pass" if done else "warn", f"{done_ops} collective operations, no error, timeout or "
                    "wrong result", 0.0, "errors", {"max": 0}, evidence, COLLECTIVE)


# ------------------------------------------------------------------ link error counters
@check("burnin.counters")
def counters(ctx: Context) -> Verdict:
    session = _session(ctx)
    first: dict[tuple, float] = {}
    last: dict[tuple, float] = {}
    for row in session.rows(COUNTERS):
        if isinstance(row.get("value"), int | float):
            key = (row.get("source"), row.get("device"), row.get("counter"))
            first.setdefault(key, float(row["value"]))
            last[key] = float(row["value"])
    if not last:
        said = session.output_tail(COUNTERS) + session.stderr_tail(COUNTERS)
        absent = [line for line in said if line.startswith("=== absent")]
        if absent:
            raise Skip(f"no link error counters on this node: {absent[-1][len('=== absent'):].strip()}")
        raise _no_rows(ctx, COUNTERS, "link error counter sampler")
    limit = ctx.reference(AREA, "burnin.counters")
    grown = {"/".join(map(str, k)): last[k] - first[k] for k in last if last[k] > first[k]}
    total = float(sum(grown.values()))
    status = baselines.grade(total, limit)
    if grown:
        top = ", ".join(f"{k} +{v:g}" for k, v in sorted(grown.items(), key=lambda kv: -kv[1])[:5])
        text = f"{len(grown)} link error counters grew during the burn-in: {top}"
    else:
        text = f"no growth in {len(last)} NVLink/InfiniBand error counters"
    return _verdict(ctx, status, text, total, "errors", limit.expected(),
                    {"grown": grown, "counters": len(last)}, COUNTERS)


# ------------------------------------------------------------------ the telemetry checks, under load
def _telemetry(fn):
    def judged(ctx: Context):
        _skip_part(ctx, "gpu")
        verdicts = fn(ctx)
        if ctx.params.get("session") == "burnin" and _load(ctx) != "both":
            for v in verdicts or []:
                v.status, v.summary = _partial(ctx, v.status, v.summary)
        return verdicts
    return judged


for _name, _fn in (("burnin.gpu.temperature", telemetry.temperature), ("burnin.gpu.throttle", telemetry.throttle),
                   ("burnin.gpu.clocks", telemetry.clocks), ("burnin.gpu.power", telemetry.power),
                   ("burnin.gpu.ecc", telemetry.ecc), ("burnin.kernel.xid", telemetry.xid)):
    check(_name)(_telemetry(_fn))
