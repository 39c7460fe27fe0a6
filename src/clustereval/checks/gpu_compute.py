"""GPU compute and memory: GEMM per dtype, MAMF, GEMV, grouped MoE GEMM and copies on every GPU of a node.

The role runs ``clustereval_gpu_bench.py`` (probe ``gpu_bench``, JSON lines; parser ``clustereval-gpu-bench``)
on each node. Every measurement becomes one result per GPU (subject ``node/gpuN``) and variant (dtype,
direction, model): judged against the expected value for the GPU model PyTorch names
(``baselines/gpu_compute.yml``, matched on ``gpu_model`` and the params) and against the node's other GPUs
(a GPU more than 5% below its node's median for the same variant is a straggler, even above the floor).
One parameterised check serves every measurement (:data:`METRICS`). What ran on the CPU (no GPU visible to
PyTorch) is judged on sanity and its peers only, and says so: no GPU reference applies to a CPU.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from clustereval import baselines, parsers
from clustereval.checks import Context, HarnessError, Skip, Verdict, check
from clustereval.results import component_subject, worst

BENCH, TORCH_ENV = "gpu_bench", "gpu_torch_env"
EVIDENCE_KEYS = ("iters", "median_s", "max_tflops", "median_tflops", "best_shape", "shapes", "cut_short", "statistic",
                 "impl", "rows_per_expert", "bytes", "counted")
AREA = "gpu_compute"
STRAGGLER = "gpu.compute.straggler"
# An error line naming the GPU runtime is a device fault (an illegal address, an ECC error, a lost GPU);
# anything else a benchmark raised is the harness's.
_DEVICE_FAULT = re.compile(r"CUDA error|CUDA-capable device|HIP error|cudaError|hipError|CUBLAS_STATUS|"
                           r"device-side assert|uncorrectable ECC|unspecified launch failure", re.I)


@dataclass(frozen=True)
class Metric:
    bench: str
    value: str
    unit: str
    variant: tuple[str, ...]
    what: str


METRICS = {
    "gpu.compute.gemm": Metric("gemm", "tflops", "TFLOP/s", ("dtype",), "GEMM"),
    "gpu.compute.mamf": Metric("mamf", "max_tflops", "TFLOP/s", ("dtype",), "MAMF"),
    "gpu.compute.gemv": Metric("gemv", "gbps", "GB/s", (), "GEMV"),
    "gpu.compute.grouped_gemm": Metric("grouped_gemm", "tflops", "TFLOP/s", ("model", "proj", "tokens", "impl"),
                                       "grouped GEMM"),
    "gpu.compute.copy": Metric("copy", "gbps", "GB/s", ("direction",), "copy"),
}


def bench_output(ctx: Context) -> dict[str, Any]:
    """The benchmark's parsed output; a run that printed nothing usable is the harness's fault."""
    probe = ctx.raw(BENCH)
    if probe.get("missing"):
        raise Skip(f"the benchmark's Python is not on {ctx.subject} (gpu.compute.torch_env says why)")
    data = ctx.parse_cache.get(BENCH)
    if data is None:
        try:
            data = parsers.parse("clustereval-gpu-bench", probe.get("stdout") or "")
        except parsers.ParseError as exc:
            tail = (probe.get("stderr") or "").strip().splitlines()[-1:] or ["no error output"]
            raise HarnessError(f"the GPU benchmark printed no usable output (exit {probe.get('rc')}): {exc}; "
                               f"{tail[0][:300]}") from None
        ctx.parse_cache[BENCH] = data
    setup = [e for e in data["errors"] if e.get("bench") == "setup"]
    if setup:
        raise HarnessError(f"the GPU benchmark could not start: {setup[0].get('message')}")
    return data


def _device(data: dict[str, Any], gpu: int) -> dict[str, Any]:
    return next((d for d in data["devices"] if d.get("index") == gpu), {"index": gpu, "name": None})


def _variant(metric: Metric, record: dict[str, Any], ctx_params: dict[str, Any]) -> dict[str, Any]:
    params = {**ctx_params, **{key: record.get(key) for key in metric.variant}}
    if metric.bench in ("gemm", "mamf") and record.get("m"):
        params["shape"] = f"{record['m']}x{record['n']}x{record['k']}"
    if metric.bench == "gemv" and record.get("rows"):
        params["shape"] = f"{record['rows']}x{record['cols']}"
    return params


def _key(metric: Metric, record: dict[str, Any]) -> tuple:
    return tuple(record.get(key) for key in metric.variant)


def _label(params: dict[str, Any]) -> str:
    return " ".join(str(v) for k, v in params.items() if k not in ("shape", "mode") and v is not None)


def _absolute(ctx: Context, check_id: str, device: dict[str, Any], params: dict[str, Any]) -> baselines.Limit | None:
    facts = {**ctx.facts, "gpu_model": device.get("name")}
    try:
        return baselines.reference(AREA, check_id, facts, params, ctx.options.get("baseline_overrides"))
    except baselines.NoReference:
        return None


def judge_metric(ctx: Context, check_id: str) -> list[Verdict]:
    metric = METRICS[check_id]
    data = bench_output(ctx)
    on_cpu = data.get("backend") == "cpu"
    records = [r for r in data["results"] if r["bench"] == metric.bench]
    by_variant: dict[tuple, list[float]] = {}
    for record in records:
        by_variant.setdefault(_key(metric, record), []).append(float(record.get(metric.value) or 0.0))
    verdicts = []
    for record in records:
        verdicts.append(_one(ctx, check_id, metric, data, record, by_variant[_key(metric, record)], on_cpu))
    for skipped in (s for s in data["skips"] if s.get("bench") == metric.bench):
        params = {**ctx.params, **{key: skipped.get(key) for key in metric.variant if skipped.get(key) is not None}}
        verdicts.append(Verdict("skip", str(skipped.get("reason")), params=params,
                                subject=component_subject(ctx.subject, f"gpu{skipped.get('gpu', 0)}"),
                                evidence={"device": _device(data, skipped.get("gpu", 0)).get("name"),
                                          "backend": data.get("backend")}))
    for error in (e for e in data["errors"] if e.get("bench") == metric.bench):
        fault = bool(_DEVICE_FAULT.search(str(error.get("message"))))
        status = "fail" if fault else "error"
        what = "the GPU failed during" if fault else "the harness failed in"
        verdicts.append(Verdict(status, f"{what} the {metric.what} benchmark: {error.get('message')}",
                                subject=component_subject(ctx.subject, f"gpu{error.get('gpu', 0)}"),
                                params={**ctx.params, **{key: error.get(key) for key in metric.variant
                                                         if error.get(key) is not None}},
                                evidence={"device": _device(data, error.get("gpu", 0)).get("name")}))
    if not verdicts:
        asked = metric.bench in str((data.get("settings") or {}).get("benches", ""))
        if not asked:
            raise Skip(f"the {metric.what} benchmark was not asked for (clustereval_gpu_compute_benches)")
        raise HarnessError(f"the GPU benchmark {'was cut short and ' if not data['complete'] else ''}"
                           f"reported no {metric.what} measurement")
    return verdicts


def _one(ctx: Context, check_id: str, metric: Metric, data: dict[str, Any], record: dict[str, Any],
         peers: list[float], on_cpu: bool) -> Verdict:
    gpu = record["gpu"]
    device = _device(data, gpu)
    params = _variant(metric, record, ctx.params)
    value = float(record.get(metric.value) or 0.0)
    where = "on the CPU (no GPU visible to PyTorch)" if on_cpu else f"on {device.get('name') or 'the GPU'}"
    evidence: dict[str, Any] = {"device": device.get("name"), "backend": data.get("backend"),
                                "torch": data.get("torch"), "mode": data.get("mode"),
                                **{k: record[k] for k in EVIDENCE_KEYS if k in record}}
    subject = component_subject(ctx.subject, f"gpu{gpu}")
    notes: list[str] = []
    if value <= 0:
        return Verdict("fail", f"{metric.what} {_label(params)} {where} measured no throughput (0 {metric.unit})",
                       value, metric.unit, None, evidence, params=params, subject=subject)
    absolute = None if on_cpu else _absolute(ctx, check_id, device, params)
    if absolute is None:
        notes.append("no reference for the CPU: judged on sanity and peers only" if on_cpu else
                     f"no reference for {device.get('name')} in baselines/{AREA}.yml: judged against its peers only")
    status, graded_notes, expected = graded_figure(ctx, value, metric.unit, params, absolute, peers, evidence)
    notes += graded_notes
    summary = f"{metric.what} {_label(params)} {value:g} {metric.unit} {where}".replace("  ", " ")
    if notes:
        summary += "; " + "; ".join(notes)
    series = []
    if metric.bench == "mamf" and record.get("points"):
        series = [{"path": f"series/{ctx.subject}/gpu-mamf.csv", "kind": "table", "x": "tflops",
                   "filter": {"gpu": gpu, "dtype": record.get("dtype")},
                   "data": [{"gpu": gpu, "dtype": record.get("dtype"), "m": p[0], "n": p[1], "k": p[2], "tflops": p[3]}
                            for p in record["points"]]}]
    return Verdict(status, summary, round(value, 4), metric.unit, expected, evidence, series=series, params=params,
                   subject=subject)


def graded_figure(ctx: Context, value: float, unit: str, params: dict[str, Any], absolute: baselines.Limit | None,
                  peers: list[float], evidence: dict[str, Any]) -> tuple[str, list[str], dict[str, Any] | None]:
    """One GPU's figure against its model's reference (when one matched) and against its node's other GPUs for
    the same variant (the straggler rule, with two or more measured): (status, notes naming what it missed,
    the expected block). The node median and the ratio to it go into ``evidence``."""
    statuses, notes, expected = [], [], None
    if absolute is not None:
        statuses.append(baselines.grade(value, absolute))
        expected = absolute.expected()
        if statuses[-1] != "pass":
            failed = statuses[-1] == "fail"
            notes.append(f"below the {'fail' if failed else 'warn'} level "
                         f"{absolute.fail if failed else absolute.warn:g} {unit} "
                         f"({value / absolute.reference:.0%} of the reference {absolute.reference:g})")
    if len(peers) >= 2:
        straggler = baselines.reference(AREA, STRAGGLER, {}, params, ctx.options.get("baseline_overrides"), peers=peers)
        ratio = value / straggler.reference if straggler.reference else 1.0
        statuses.append(baselines.grade(value, straggler))
        evidence.update(node_median=round(straggler.reference, 4), ratio_to_node_median=round(ratio, 4))
        if statuses[-1] != "pass":
            notes.append(f"a straggler: {1 - ratio:.1%} below the node's median {straggler.reference:g} {unit}")
        expected = expected or straggler.expected()
    return (worst(*statuses) if statuses else "pass"), notes, expected


for _check_id in METRICS:
    check(_check_id)(lambda ctx, _id=_check_id: judge_metric(ctx, _id))


@check("gpu.compute.device")
def device_visible(ctx: Context) -> Verdict:
    data = bench_output(ctx)
    shown = ctx.facts.get("gpu_count")
    devices = [d for d in data["devices"] if d.get("device") != "cpu"]
    evidence = {"backend": data.get("backend"), "torch": data.get("torch"), "cuda": data.get("cuda"),
                "hip": data.get("hip"), "driver_gpus": shown, "torch_devices": [d.get("name") for d in data["devices"]]}
    if data.get("backend") == "cpu":
        gpu_build = bool(data.get("cuda") or data.get("hip"))
        if gpu_build:
            return Verdict("fail", f"PyTorch {data.get('torch')} is a GPU build but sees no GPU"
                           f"{f' of the {shown} the driver shows' if shown else ''}: the CUDA/ROCm runtime cannot "
                           "open the devices", 0, "GPUs", {"min": shown}, evidence)
        if not shown:
            return Verdict("pass", f"no GPU on {ctx.subject} (the driver shows none) and PyTorch "
                           f"{data.get('torch')} measured the CPU", 0, "GPUs", None, evidence)
        return Verdict("warn", f"PyTorch {data.get('torch')} is a CPU build: the {shown} GPUs the driver shows were "
                       "not measured and every gpu.compute figure is the CPU's; install torch from a CUDA or ROCm "
                       "index (clustereval_gpu_compute_pip_index_url)", 0, "GPUs", {"min": shown}, evidence)
    if shown is not None and len(devices) < int(shown):
        return Verdict("fail", f"PyTorch sees {len(devices)} of the {shown} GPUs the driver shows", len(devices),
                       "GPUs", {"min": shown}, evidence)
    return Verdict("pass", f"PyTorch {data.get('torch')} ({data.get('backend')}) sees all {len(devices)} GPUs",
                   len(devices), "GPUs", {"min": shown} if shown is not None else None, evidence)


@check("gpu.compute.torch_env")
def torch_env(ctx: Context) -> Verdict:
    probe = ctx.raw(TORCH_ENV)
    lines = [ln.strip() for ln in (probe.get("stdout") or "").splitlines() if ln.strip()]
    last = lines[-1] if lines else (probe.get("stderr") or "no output").strip()[:300]
    venv = (probe.get("params") or {}).get("venv")
    if probe.get("rc") == 0 and re.match(r"(present|installed): torch \S+", last):
        return Verdict("pass", f"{last}", last.split()[2], None, None, {"venv": venv})
    raise HarnessError(f"PyTorch for the benchmarks is not available in {venv}: {last}"
                       + (f" (pip said: {' | '.join(lines[-4:-1])[:400]})" if len(lines) > 1 else ""))

