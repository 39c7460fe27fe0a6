"""Inference checks (role inference): a vLLM server on each node and vLLM's own serving benchmark at several
concurrencies (``vllm_bench_sweep``; vLLM's result block read by ``parsers/vllm_bench.py``). Per concurrency
(params ``concurrency``): failed requests and the p99 of time to first token and time per output token against
interactive-serving limits; across concurrencies: output throughput growing with load. Without vLLM, a model or
a GPU every check is a skip with the probe's own reason.
"""

from __future__ import annotations

from typing import Any

from clustereval import baselines
from clustereval.checks import Context, HarnessError, Skip, Verdict, check

PROBE = "vllm_bench_sweep"


def _sweep(ctx: Context) -> dict[str, Any]:
    data = ctx.parsed(PROBE)
    if data.get("skip"):
        raise Skip(data["skip"])
    if data.get("server_error"):
        raise HarnessError(f"the vLLM server did not come up: {data['server_error']}")
    return data


@check("inference.vllm.requests")
def failed_requests(ctx: Context) -> list[Verdict]:
    verdicts = []
    for run in _sweep(ctx)["runs"]:
        params = {"concurrency": run["concurrency"]}
        if "error" in run:
            verdicts.append(Verdict("error", f"vLLM's benchmark at concurrency {run['concurrency']} printed no "
                                    f"readable result: {run['error']}", params=params))
            continue
        res = run["result"]
        if not res.get("complete"):
            verdicts.append(Verdict("error", f"vLLM's benchmark at concurrency {run['concurrency']} stopped before "
                                    f"its result block ended (cut short, or the benchmark died)", params=params))
            continue
        failed, done = int(res.get("failed_requests") or 0), int(res.get("successful_requests") or 0)
        evidence = {"successful": done, "failed": failed, "duration_s": res.get("duration_s")}
        if failed or not done:
            verdicts.append(Verdict("fail", f"{failed} of {failed + done} requests failed at concurrency "
                                    f"{run['concurrency']}", failed, "requests", evidence=evidence, params=params))
        else:
            verdicts.append(Verdict("pass", f"all {done} requests served at concurrency {run['concurrency']}",
                                    0, "requests", evidence=evidence, params=params))
    return verdicts


def _latency(ctx: Context, check_id: str, key: str, what: str) -> list[Verdict]:
    lim = ctx.limit("inference", check_id)
    verdicts = []
    for run in _sweep(ctx)["runs"]:
        params = {"concurrency": run["concurrency"]}
        value = (run.get("result") or {}).get(f"{key}_p99_ms")
        if value is None:
            verdicts.append(Verdict("skip", f"no {what} p99 at concurrency {run['concurrency']} (an older vLLM "
                                    f"prints no percentiles; pass --percentile-metrics)", params=params))
            continue
        status = baselines.grade(value, lim)
        text = f"{what} p99 {value:,.1f} ms at concurrency {run['concurrency']}"
        text += {"pass": "", "warn": f", over the {lim.warn:,} ms an interactive user waits",
                 "fail": f", over the failure level {lim.fail:,} ms"}[status]
        verdicts.append(Verdict(status, text, value, "ms", lim.expected(),
                                {"median_ms": run["result"].get(f"{key}_median_ms")}, params=params))
    return verdicts


@check("inference.vllm.ttft")
def time_to_first_token(ctx: Context) -> list[Verdict]:
    return _latency(ctx, "inference.vllm.ttft", "ttft", "time to first token")


@check("inference.vllm.tpot")
def time_per_output_token(ctx: Context) -> list[Verdict]:
    return _latency(ctx, "inference.vllm.tpot", "tpot", "time per output token")


@check("inference.vllm.scaling")
def throughput_scaling(ctx: Context) -> Verdict:
    """Output tokens/s at the highest concurrency against the best of the sweep: a server that serves less as
    load grows (KV-cache thrashing, preemption, a CPU-bound front end) saturates early."""
    points = [(r["concurrency"], float(r["result"].get("output_throughput_tok_per_s") or 0.0))
              for r in _sweep(ctx)["runs"] if "result" in r]
    points.sort()
    if len(points) < 2:
        raise Skip(f"{len(points)} concurrency level(s) measured: no curve")
    best = max(points, key=lambda p: p[1])
    if best[1] <= 0:
        return Verdict("fail", "vLLM generated no tokens at any concurrency", 0.0, "ratio")
    ratio = round(points[-1][1] / best[1], 3)
    lim = ctx.limit("inference", "inference.vllm.scaling")
    status = baselines.grade(ratio, lim)
    shape = " → ".join(f"{c}: {t:,.0f}" for c, t in points)
    text = f"output tok/s by concurrency {shape}; {ratio:.0%} of the best at the highest"
    if status != "pass":
        text = f"throughput falls as load grows: {text}"
    series = [{"path": f"series/{ctx.subject}/vllm-bench.csv", "kind": "curve", "x": "concurrency",
               "columns": ["concurrency", "output_tok_per_s"],
               "data": [{"concurrency": c, "output_tok_per_s": t} for c, t in points]}]
    return Verdict(status, text, ratio, "ratio", lim.expected(), {"points": points}, series=series)
