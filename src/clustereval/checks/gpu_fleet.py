"""Cluster-wide GPU compute comparison: each node's GPUs against the fleet's, so a whole slow node is named.

Judged once per cluster from the ``gpu_bench`` output every node kept (``Context.host_probes``): per
measurement and variant (GEMM bf16, MAMF bf16, copy h2d, ...) a node's figure is the median over its GPUs,
and it is compared with the median over the nodes (``baselines/gpu_compute.yml``, ``gpu.compute.fleet``:
ratio levels). A node passes every per-GPU floor and still fails here when all its GPUs are slow together
(power capped, a BIOS setting, a hot rack). The spread of the fleet (median absolute deviation of the node
figures) is reported, so a person can tell a real outlier from noise.
"""

from __future__ import annotations

import statistics

from clustereval import baselines, parsers
from clustereval.checks import Context, Skip, Verdict, check
from clustereval.checks.gpu_compute import AREA, BENCH, METRICS

FLEET = "gpu.compute.fleet"
MIN_NODES = 3
# A node is named only when it is also an outlier against the fleet's own spread (3 robust standard
# deviations: 1.4826 x the median absolute deviation), so a noisy benchmark does not name healthy nodes.
OUTLIER_SIGMAS = 3.0
# GPUs of one model vary by about 1-2% between healthy nodes: the spread is never taken as less than 1% of the
# median, so identical figures (a small fleet) do not make every fraction of a percent an outlier.
MIN_NOISE = 0.01
GPU_BACKENDS = ("cuda", "rocm")


def node_figures(ctx: Context) -> tuple[dict[tuple, dict[str, float]], list[str], list[str]]:
    """``{(bench, variant...): {host: median over the host's GPUs}}``, the hosts whose output was unusable and
    those whose PyTorch measured the CPU (a CPU figure says nothing about a node's GPUs)."""
    figures: dict[tuple, dict[str, float]] = {}
    unusable, cpu_only = [], []
    for host, probes in sorted(ctx.host_probes.items()):
        probe = probes.get(BENCH)
        if not probe or probe.get("timed_out"):
            unusable.append(host)
            continue
        try:
            data = parsers.parse("clustereval-gpu-bench", probe.get("stdout") or "")
        except parsers.ParseError:
            unusable.append(host)
            continue
        if data.get("backend") not in GPU_BACKENDS:
            cpu_only.append(host)
            continue
        values: dict[tuple, list[float]] = {}
        for metric in METRICS.values():
            for record in (r for r in data["results"] if r["bench"] == metric.bench):
                key = (metric.bench, *(record.get(k) for k in metric.variant))
                values.setdefault(key, []).append(float(record.get(metric.value) or 0.0))
        for key, numbers in values.items():
            figures.setdefault(key, {})[host] = statistics.median(numbers)
    return figures, unusable, cpu_only


@check(FLEET)
def fleet(ctx: Context) -> list[Verdict]:
    figures, unusable, cpu_only = node_figures(ctx)
    if cpu_only and not figures:
        raise Skip(f"PyTorch measured the CPU, not GPUs, on {', '.join(cpu_only)}: no GPU figures to compare "
                   "(gpu.compute.device says why)")
    # Two nodes cannot say which of them is the slow one: a fleet comparison needs a majority.
    compared = {key: hosts for key, hosts in figures.items() if len(hosts) >= MIN_NODES}
    if not compared:
        raise Skip(f"fewer than {MIN_NODES} nodes measured the same GPU benchmark, too few to name a slow one "
                   f"(usable: {len({h for hosts in figures.values() for h in hosts})}, unusable: {len(unusable)})")
    limit = baselines.reference(AREA, FLEET, {}, {}, ctx.options.get("baseline_overrides"))
    verdicts = []
    for key, hosts in sorted(compared.items(), key=lambda item: str(item[0])):
        fleet_median = statistics.median(hosts.values())
        deviation = statistics.median(abs(v - fleet_median) for v in hosts.values())
        spread = deviation / fleet_median if fleet_median else 0.0
        bench, variant = key[0], " ".join(str(v) for v in key[1:] if v is not None)
        for host, value in sorted(hosts.items()):
            ratio = value / fleet_median if fleet_median else 1.0
            status = baselines.grade(ratio, limit)
            noise = max(1.4826 * deviation, MIN_NOISE * fleet_median)
            within_noise = fleet_median - value <= OUTLIER_SIGMAS * noise
            if status != "pass" and within_noise:
                status = "pass"
                summary_note = f"; below the level but within the fleet's own spread ({spread:.1%})"
            else:
                summary_note = ""
            summary = (f"{bench} {variant} on {host}: {value:g}, {ratio:.1%} of the fleet median {fleet_median:g} "
                       f"over {len(hosts)} nodes").replace("  ", " ")
            if status != "pass":
                summary += f"; the node is slower than its peers (fleet spread {spread:.1%})"
            summary += summary_note
            verdicts.append(Verdict(status, summary, round(ratio, 4), "ratio", limit.expected(),
                                    {"node_median": round(value, 4), "fleet_median": round(fleet_median, 4),
                                     "fleet_spread": round(spread, 4), "nodes": len(hosts)},
                                    params={**ctx.params, "bench": bench, "variant": variant}, subject=host))
    if unusable:
        verdicts.append(Verdict("error", f"the GPU benchmark output of {', '.join(unusable)} could not be read, so "
                                "those nodes were not compared", None, None, None, {"hosts": unusable},
                                params={**ctx.params, "bench": "all", "variant": ""}))
    return verdicts
