#!/usr/bin/env python3
"""clustereval GPU compute and memory benchmark: GEMM per dtype, MAMF sweep, GEMV, grouped MoE GEMM, copies.

Runs on a node with the PyTorch the gpu_compute role installed, on every GPU the driver shows (CUDA through
cuBLASLt, ROCm through hipBLASLt) and, where there is none, on the CPU through the same code (the device
is recorded, so nothing is mistaken for a GPU figure). Prints JSON lines on stdout, one per measurement,
flushed as each is made, so a run cut short keeps what it measured:

  {"event": "start", "tool": "clustereval-gpu-bench", "version": 1, "torch": ..., "backend": cuda|rocm|cpu,
   "mode": one_at_a_time|all_at_once, "devices": [{"index", "name", "bus_id", "uuid", "memory_gib",
   "capability", "arch"}], "settings": {...}}
  {"event": "result", "gpu": 0, "bench": "gemm", "dtype": "bf16", "m", "n", "k", "tflops", "max_tflops", ...}
  {"event": "result", "gpu": 0, "bench": "mamf", "dtype": "bf16", "max_tflops", "median_tflops",
   "best_shape": [m, n, k], "shapes": N, "points": [[m, n, k, tflops], ...]}
  {"event": "result", "gpu": 0, "bench": "gemv", "dtype": "bf16", "rows", "cols", "gbps"}
  {"event": "result", "gpu": 0, "bench": "grouped_gemm", "model", "proj", "tokens", "experts", "tflops", "impl"}
  {"event": "result", "gpu": 0, "bench": "copy", "direction": h2d|d2h|d2d, "bytes", "gbps"}
  {"event": "skip", "gpu": 0, "bench": ..., "dtype"/"direction": ..., "reason": "..."}
  {"event": "error", "gpu": 0, "bench": ..., "message": "..."}
  {"event": "done", "duration_s": ...}

Timing follows mamf-finder: warm-up iterations, then each timed iteration alone (CUDA events on a GPU),
with the L2 (the last-level cache on a CPU) flushed before each by zeroing a buffer larger than it. The
reported ``tflops`` is from the median iteration, ``max_tflops`` from the fastest one.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time

# Device indices as nvidia-smi numbers them (PCI bus order), so a result names the GPU a person can find.
os.environ.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")

VERSION = 1
DTYPES = ("bf16", "fp16", "tf32", "fp32", "fp8_e4m3", "mxfp8", "nvfp4")
BENCHES = ("gemm", "mamf", "gemv", "grouped_gemm", "copy")


def emit(event: str, **fields) -> None:
    print(json.dumps({"event": event, **fields}, default=str), flush=True)


def shape(text: str) -> tuple[int, int, int]:
    parts = [int(p) for p in text.lower().split("x")]
    if len(parts) != 3 or min(parts) < 1:
        raise argparse.ArgumentTypeError(f"a shape is MxNxK, got {text!r}")
    return parts[0], parts[1], parts[2]


def int_list(text: str) -> list[int]:
    return [int(p) for p in text.split(",") if p.strip()]


def arguments(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--benches", default=",".join(BENCHES))
    p.add_argument("--dtypes", default=",".join(DTYPES))
    p.add_argument("--gpus", default="all", help="all, or indices such as 0,3")
    p.add_argument("--mode", choices=("one_at_a_time", "all_at_once"), default="one_at_a_time")
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--iters", type=int, default=50)
    p.add_argument("--gemm-shape", type=shape, default=(8192, 8192, 8192))
    p.add_argument("--mamf-m", type=int_list, default=[4096, 6144, 8192, 12288, 16384])
    p.add_argument("--mamf-n", type=int_list, default=[4096, 6144, 8192, 12288, 16384])
    p.add_argument("--mamf-k", type=int_list, default=[4096, 8192, 12288])
    p.add_argument("--mamf-dtypes", default="bf16")
    p.add_argument("--mamf-max-seconds", type=float, default=600.0,
                   help="stop the sweep after this long (the shapes done so far are reported)")
    p.add_argument("--gemv-shape", default="65536x8192", help="ROWSxCOLS of the weight matrix")
    p.add_argument("--moe-models", default="deepseek-v3:7168:2048:256:8,kimi-k2:7168:2048:384:8",
                   help="name:hidden:expert_intermediate:experts:top_k, comma separated")
    p.add_argument("--moe-tokens", type=int_list, default=[128, 512, 2048, 8192])
    p.add_argument("--copy-mib", type=int, default=1024)
    p.add_argument("--flush-mib", type=int, default=256)
    p.add_argument("--rocm-tunableop", choices=("on", "off"), default="on",
                   help="on ROCm, PyTorch TunableOp picks the fastest hipBLASLt/rocBLAS GEMM (AMD's reference setup)")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    return p.parse_args(argv)


class Device:
    """One GPU (or the CPU) with the timing primitives of its backend."""

    def __init__(self, torch, index: int | None):
        self.torch, self.index = torch, index
        self.kind = "cpu" if index is None else "cuda"
        self.device = torch.device("cpu" if index is None else f"cuda:{index}")
        if index is not None:
            torch.cuda.set_device(index)
        self._flush = None

    def sync(self) -> None:
        if self.kind == "cuda":
            self.torch.cuda.synchronize(self.device)

    def flush_cache(self, mib: int) -> None:
        if self._flush is None:
            self._flush = self.torch.empty(mib * 2**20, dtype=self.torch.int8, device=self.device)
        self._flush.zero_()

    def times(self, fn, warmup: int, iters: int, flush_mib: int = 0) -> list[float]:
        """Seconds per timed iteration of ``fn`` after ``warmup`` untimed ones."""
        for _ in range(warmup):
            fn()
        self.sync()
        out = []
        for _ in range(iters):
            if flush_mib:
                self.flush_cache(flush_mib)
            if self.kind == "cuda":
                start = self.torch.cuda.Event(enable_timing=True)
                end = self.torch.cuda.Event(enable_timing=True)
                start.record()
                fn()
                end.record()
                end.synchronize()
                out.append(start.elapsed_time(end) / 1000.0)
            else:
                t0 = time.perf_counter()
                fn()
                out.append(time.perf_counter() - t0)
        return out


def describe(torch, index: int | None) -> dict:
    if index is None:
        name = "cpu"
        try:
            with open("/proc/cpuinfo", encoding="utf-8") as info:
                name = next((ln.split(":", 1)[1].strip() for ln in info if ln.startswith("model name")), name)
        except OSError:
            pass
        return {"index": 0, "name": name, "device": "cpu", "threads": torch.get_num_threads()}
    props = torch.cuda.get_device_properties(index)
    bus = None
    if getattr(props, "pci_bus_id", None) is not None:
        domain, device = getattr(props, "pci_domain_id", 0), getattr(props, "pci_device_id", 0)
        bus = f"{domain:08X}:{props.pci_bus_id:02X}:{device:02X}.0"
    return {"index": index, "name": props.name, "device": f"cuda:{index}", "bus_id": bus,
            "uuid": str(getattr(props, "uuid", "") or "") or None, "memory_gib": round(props.total_memory / 2**30, 1),
            "capability": f"{props.major}.{props.minor}", "arch": getattr(props, "gcnArchName", None),
            "sms": props.multi_processor_count}


def chip_lacks(torch, dev: Device, dtype: str) -> str | None:
    """Why this chip cannot run ``dtype`` on its matrix units (None: it can, or it may: then try)."""
    if dev.kind == "cpu":
        if dtype == "tf32":
            return ("TF32 is a tensor-core mode of NVIDIA (Ampere and later) and AMD CDNA3 GPUs; "
                    "the benchmark ran on the CPU")
        if dtype in ("mxfp8", "nvfp4"):
            return (f"{dtype.upper()} block-scaled matmul needs Blackwell-class GPU tensor cores; "
                    "the benchmark ran on the CPU")
        return None
    props = torch.cuda.get_device_properties(dev.index)
    if torch.version.hip:
        arch = str(getattr(props, "gcnArchName", "") or "")
        if dtype == "fp8_e4m3" and not arch.startswith(("gfx942", "gfx950")):
            return f"FP8 matmul needs CDNA3 or later (gfx942/gfx950); this GPU is {arch or 'unknown'}"
        if dtype in ("mxfp8", "nvfp4") and not arch.startswith("gfx950"):
            return f"{dtype.upper()} needs CDNA4 (gfx950, MI350/MI355X); this GPU is {arch or 'unknown'}"
        if dtype == "nvfp4":
            return "NVFP4 is NVIDIA's format; AMD CDNA4 runs MXFP4 instead"
        return None
    cc = (props.major, props.minor)
    if dtype in ("bf16", "tf32") and cc < (8, 0):
        return f"{dtype.upper()} tensor cores need compute capability 8.0 (Ampere); this GPU is {cc[0]}.{cc[1]}"
    if dtype == "fp8_e4m3" and cc < (8, 9):
        return f"FP8 tensor cores need compute capability 8.9 (Ada/Hopper); this GPU is {cc[0]}.{cc[1]}"
    if dtype in ("mxfp8", "nvfp4") and cc < (10, 0):
        return (f"{dtype.upper()} block-scaled tensor cores need compute capability 10.0 (Blackwell); "
                f"this GPU is {cc[0]}.{cc[1]}")
    return None


def matmul_fn(torch, dev: Device, dtype: str, m: int, n: int, k: int):
    """A zero-argument callable doing one (m x k) @ (k x n) matmul in ``dtype``; raises when the software
    cannot (the caller reports that as a skip naming the software)."""
    on = dev.device
    if dtype in ("bf16", "fp16", "fp32", "tf32"):
        torch_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(dtype, torch.float32)
        if dev.kind == "cuda":
            torch.backends.cuda.matmul.allow_tf32 = dtype == "tf32"
        a = torch.randn(m, k, device=on, dtype=torch_dtype)
        b = torch.randn(k, n, device=on, dtype=torch_dtype)
        return lambda: torch.matmul(a, b)
    if dtype == "fp8_e4m3":
        fp8 = torch.float8_e4m3fnuz if (dev.kind == "cuda" and torch.version.hip and
                                        "gfx942" in str(getattr(torch.cuda.get_device_properties(dev.index),
                                                                "gcnArchName", ""))) else torch.float8_e4m3fn
        a = torch.randn(m, k, device=on).to(fp8)
        b = torch.randn(n, k, device=on).to(fp8).t()  # column-major, as cuBLASLt's FP8 path wants
        one = torch.tensor(1.0, device=on)
        return lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
    if dtype in ("mxfp8", "nvfp4"):
        block = 32 if dtype == "mxfp8" else 16
        if dtype == "mxfp8":
            a = torch.randn(m, k, device=on).to(torch.float8_e4m3fn)
            b = torch.randn(n, k, device=on).to(torch.float8_e4m3fn).t()
            scale_dtype = torch.float8_e8m0fnu
        else:
            a = torch.randint(0, 255, (m, k // 2), device=on, dtype=torch.uint8).view(torch.float4_e2m1fn_x2)
            b = torch.randint(0, 255, (n, k // 2), device=on, dtype=torch.uint8).view(torch.float4_e2m1fn_x2).t()
            scale_dtype = torch.float8_e4m3fn
        sa = torch.ones(m * (k // block), device=on).to(scale_dtype)
        sb = torch.ones(n * (k // block), device=on).to(scale_dtype)
        def fn():
            return torch._scaled_mm(a, b, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)

        fn()  # raises here when this torch or cuBLASLt has no block-scaled path
        return fn
    raise ValueError(f"unknown dtype {dtype}")


def software_lacks(torch, dtype: str, exc: Exception) -> str:
    return f"torch {torch.__version__} cannot run {dtype} matmul here: {type(exc).__name__}: {str(exc)[:200]}"


def words(text: str) -> list[str]:
    return [w.strip() for w in text.split(",") if w.strip()]


def significant(value: float, digits: int = 6) -> float:
    """``value`` to ``digits`` significant digits (a CPU's 0.0002 TFLOP/s keeps its precision)."""
    return float(f"{value:.{digits}g}")


def tflops(m: int, n: int, k: int, seconds: float, count: int = 1) -> float:
    return significant(2.0 * m * n * k * count / seconds / 1e12)


def bench_gemm(torch, dev: Device, gpu: int, args, dtypes: list[str]) -> None:
    m, n, k = args.gemm_shape
    for dtype in dtypes:
        lacks = chip_lacks(torch, dev, dtype)
        if lacks:
            emit("skip", gpu=gpu, bench="gemm", dtype=dtype, reason=lacks)
            continue
        try:
            fn = matmul_fn(torch, dev, dtype, m, n, k)
        except Exception as exc:  # the software, not the chip
            emit("skip", gpu=gpu, bench="gemm", dtype=dtype, reason=software_lacks(torch, dtype, exc))
            continue
        times = dev.times(fn, args.warmup, args.iters, args.flush_mib)
        emit("result", gpu=gpu, bench="gemm", dtype=dtype, m=m, n=n, k=k, iters=len(times),
             median_s=statistics.median(times), tflops=tflops(m, n, k, statistics.median(times)),
             max_tflops=tflops(m, n, k, min(times)))


def bench_mamf(torch, dev: Device, gpu: int, args, dtypes: list[str]) -> None:
    for dtype in dtypes:
        lacks = chip_lacks(torch, dev, dtype)
        if lacks:
            emit("skip", gpu=gpu, bench="mamf", dtype=dtype, reason=lacks)
            continue
        points, started, cut = [], time.monotonic(), False
        try:
            for m in args.mamf_m:
                for n in args.mamf_n:
                    for k in args.mamf_k:
                        if time.monotonic() - started > args.mamf_max_seconds:
                            cut = True
                            break
                        fn = matmul_fn(torch, dev, dtype, m, n, k)
                        times = dev.times(fn, args.warmup, args.iters, args.flush_mib)
                        points.append([m, n, k, tflops(m, n, k, statistics.median(times))])
                        del fn
        except Exception as exc:
            if not points:
                emit("skip", gpu=gpu, bench="mamf", dtype=dtype, reason=software_lacks(torch, dtype, exc))
                continue
            emit("error", gpu=gpu, bench="mamf", dtype=dtype,
                 message=f"sweep stopped: {type(exc).__name__}: {str(exc)[:200]}")
        best = max(points, key=lambda p: p[3])
        emit("result", gpu=gpu, bench="mamf", dtype=dtype, shapes=len(points), cut_short=cut,
             max_tflops=best[3], median_tflops=significant(statistics.median(p[3] for p in points)),
             best_shape=best[:3], statistic="median time per shape; max over shapes", points=points)


def bench_gemv(torch, dev: Device, gpu: int, args) -> None:
    rows, cols = (int(v) for v in args.gemv_shape.lower().split("x"))
    weights = torch.randn(rows, cols, device=dev.device, dtype=torch.bfloat16)
    vector = torch.randn(cols, device=dev.device, dtype=torch.bfloat16)
    times = dev.times(lambda: torch.mv(weights, vector), args.warmup, args.iters, args.flush_mib)
    moved = rows * cols * 2
    emit("result", gpu=gpu, bench="gemv", dtype="bf16", rows=rows, cols=cols, iters=len(times),
         gbps=significant(moved / statistics.median(times) / 1e9))


def moe_models(text: str) -> list[dict]:
    out = []
    for item in filter(None, (p.strip() for p in text.split(","))):
        name, hidden, inter, experts, top_k = item.split(":")
        out.append({"model": name, "hidden": int(hidden), "intermediate": int(inter),
                    "experts": int(experts), "top_k": int(top_k)})
    return out


def bench_grouped(torch, dev: Device, gpu: int, args) -> None:
    """Expert projections of a routed MoE layer with tokens spread evenly over the experts (every expert
    gets tokens x top_k / experts rows): batched matmul over the experts, the shape grouped GEMM kernels
    (DeepGEMM, torch._grouped_mm) are built for."""
    for model in moe_models(args.moe_models):
        e, h, i = model["experts"], model["hidden"], model["intermediate"]
        for proj, (k, n) in (("gate_up", (h, 2 * i)), ("down", (i, h))):
            try:
                weights = torch.randn(e, k, n, device=dev.device, dtype=torch.bfloat16)
            except Exception as exc:  # a GPU too small for the model's experts
                emit("skip", gpu=gpu, bench="grouped_gemm", model=model["model"], proj=proj,
                     reason=f"the {e} experts' {proj} weights do not fit: {type(exc).__name__}: {str(exc)[:150]}")
                continue
            for tokens in args.moe_tokens:
                rows = max(1, tokens * model["top_k"] // e)
                acts = torch.randn(e, rows, k, device=dev.device, dtype=torch.bfloat16)
                times = dev.times(lambda a=acts, w=weights: torch.bmm(a, w), args.warmup, args.iters, args.flush_mib)
                emit("result", gpu=gpu, bench="grouped_gemm", impl="torch.bmm", model=model["model"], proj=proj,
                     tokens=tokens, experts=e, rows_per_expert=rows, k=k, n=n,
                     tflops=tflops(rows, n, k, statistics.median(times), e))
                del acts
            del weights
    bench_deepgemm(torch, dev, gpu, args)


def deepgemm_kernel(deep_gemm):
    """DeepGEMM's FP8 grouped GEMM over contiguous expert segments (the name changed between versions)."""
    for name in ("m_grouped_fp8_gemm_nt_contiguous", "m_grouped_gemm_fp8_fp8_bf16_nt_contiguous"):
        if hasattr(deep_gemm, name):
            return getattr(deep_gemm, name)
    raise AttributeError(f"deep_gemm {getattr(deep_gemm, '__version__', '?')} has no m_grouped FP8 contiguous GEMM")


def bench_deepgemm(torch, dev: Device, gpu: int, args) -> None:
    """The same expert projections through DeepGEMM's FP8 grouped kernel, where it is installed (Hopper and
    later): each expert's rows padded to the kernel's alignment, per-128 block scales of one."""
    if dev.kind == "cpu" or torch.version.hip:
        return
    try:
        import deep_gemm
        kernel = deepgemm_kernel(deep_gemm)
    except Exception as exc:
        emit("skip", gpu=gpu, bench="grouped_gemm", impl="deepgemm",
             reason=f"DeepGEMM is not usable here ({type(exc).__name__}: {str(exc)[:150]}); "
                    "torch.bmm measured the shapes")
        return
    align = int(getattr(deep_gemm, "get_m_alignment_for_contiguous_layout", lambda: 128)())
    fp8, on = torch.float8_e4m3fn, dev.device
    for model in moe_models(args.moe_models):
        e, h, i = model["experts"], model["hidden"], model["intermediate"]
        for proj, (k, n) in (("gate_up", (h, 2 * i)), ("down", (i, h))):
            for tokens in args.moe_tokens:
                rows = -(-max(1, tokens * model["top_k"] // e) // align) * align
                try:
                    lhs = (torch.randn(e * rows, k, device=on).to(fp8),
                           torch.ones(e * rows, k // 128, device=on, dtype=torch.float32))
                    rhs = (torch.randn(e, n, k, device=on).to(fp8),
                           torch.ones(e, n // 128, k // 128, device=on, dtype=torch.float32))
                    out = torch.empty(e * rows, n, device=on, dtype=torch.bfloat16)
                    index = torch.arange(e, device=on, dtype=torch.int32).repeat_interleave(rows)
                    times = dev.times(lambda a=lhs, b=rhs, o=out, m=index: kernel(a, b, o, m), args.warmup, args.iters,
                                      args.flush_mib)
                except Exception as exc:
                    emit("error", gpu=gpu, bench="grouped_gemm", impl="deepgemm", model=model["model"], proj=proj,
                         tokens=tokens, message=f"DeepGEMM: {type(exc).__name__}: {str(exc)[:250]}")
                    continue
                emit("result", gpu=gpu, bench="grouped_gemm", impl="deepgemm", model=model["model"], proj=proj,
                     tokens=tokens, experts=e, rows_per_expert=rows, padded_to=align, k=k, n=n, dtype="fp8_e4m3",
                     tflops=tflops(rows, n, k, statistics.median(times), e))
                del lhs, rhs, out, index


def bench_copy(torch, dev: Device, gpu: int, args) -> None:
    size = args.copy_mib * 2**20
    if dev.kind == "cpu":
        for direction in ("h2d", "d2h"):
            emit("skip", gpu=gpu, bench="copy", direction=direction,
                 reason="no device memory: the benchmark ran on the CPU, host and device are the same memory")
    else:
        host = torch.empty(size, dtype=torch.uint8, pin_memory=True)
        on_device = torch.empty(size, dtype=torch.uint8, device=dev.device)
        for direction, fn in (("h2d", lambda: on_device.copy_(host, non_blocking=True)),
                              ("d2h", lambda: host.copy_(on_device, non_blocking=True))):
            times = dev.times(fn, 3, max(5, args.iters // 5))
            emit("result", gpu=gpu, bench="copy", direction=direction, bytes=size, pinned=True,
                 gbps=significant(size / statistics.median(times) / 1e9))
        del host, on_device
    src = torch.empty(size, dtype=torch.uint8, device=dev.device)
    dst = torch.empty(size, dtype=torch.uint8, device=dev.device)
    times = dev.times(lambda: dst.copy_(src), 3, max(5, args.iters // 5))
    # Bytes read plus bytes written, the way HBM bandwidth is quoted.
    emit("result", gpu=gpu, bench="copy", direction="d2d", bytes=size, counted="read+write",
         gbps=significant(2 * size / statistics.median(times) / 1e9))


def run_one(torch, index: int | None, gpu: int, args) -> None:
    benches = words(args.benches)
    dev = Device(torch, index)
    steps = {"gemm": lambda: bench_gemm(torch, dev, gpu, args, words(args.dtypes)),
             "mamf": lambda: bench_mamf(torch, dev, gpu, args, words(args.mamf_dtypes)),
             "gemv": lambda: bench_gemv(torch, dev, gpu, args),
             "grouped_gemm": lambda: bench_grouped(torch, dev, gpu, args),
             "copy": lambda: bench_copy(torch, dev, gpu, args)}
    for bench in benches:
        if bench not in steps:
            emit("error", gpu=gpu, bench=bench, message=f"unknown benchmark {bench!r}; known: {', '.join(BENCHES)}")
            continue
        try:
            steps[bench]()
        except Exception as exc:  # one benchmark's failure (out of memory, a driver error) must not hide the rest
            emit("error", gpu=gpu, bench=bench, message=f"{type(exc).__name__}: {str(exc)[:300]}")
        finally:
            if dev.kind == "cuda":
                torch.cuda.empty_cache()


def all_at_once(indices: list[int], argv: list[str]) -> int:
    """One child process per GPU, all running together (a node under full load); their lines are relayed."""
    children = [subprocess.Popen([sys.executable, os.path.abspath(__file__), *argv, "--gpus", str(i), "--child",
                                  "--mode", "one_at_a_time"], stdout=subprocess.PIPE, text=True) for i in indices]
    lock = threading.Lock()

    def relay(child):
        for line in child.stdout:
            with lock:
                sys.stdout.write(line)
                sys.stdout.flush()

    threads = [threading.Thread(target=relay, args=(c,)) for c in children]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return max(c.wait() for c in children)


def tunable_op(torch) -> None:
    """PYTORCH_TUNABLEOP_ENABLED=1, as AMD's MI300X reference setup runs GEMMs: each GEMM shape is tuned once
    (in the warm-up) and then runs the fastest kernel. An operator's own setting of the variable wins."""
    os.environ.setdefault("PYTORCH_TUNABLEOP_ENABLED", "1")
    tunable = getattr(getattr(torch, "cuda", None), "tunable", None)
    if tunable is not None and os.environ["PYTORCH_TUNABLEOP_ENABLED"] == "1":
        tunable.enable(True)


def main(argv: list[str]) -> int:
    args = arguments(argv)
    started = time.monotonic()
    try:
        import torch
    except ImportError as exc:
        emit("error", bench="setup", message=f"PyTorch is not importable with {sys.executable}: {exc}")
        return 2
    backend = "cpu"
    indices: list[int | None] = [None]
    if torch.cuda.is_available() and torch.cuda.device_count() > 0:
        backend = "rocm" if torch.version.hip else "cuda"
        count = torch.cuda.device_count()
        indices = list(range(count)) if args.gpus == "all" else [i for i in int_list(args.gpus) if 0 <= i < count]
    if backend == "rocm" and args.rocm_tunableop == "on":
        tunable_op(torch)
    if args.child:
        run_one(torch, indices[0], indices[0] if indices[0] is not None else 0, args)
        return 0
    emit("start", tool="clustereval-gpu-bench", version=VERSION, torch=torch.__version__,
         cuda=torch.version.cuda, hip=torch.version.hip, backend=backend,
         mode=args.mode if backend != "cpu" else "one_at_a_time", host=os.uname().nodename,
         devices=[describe(torch, i) for i in indices],
         settings={k: v for k, v in vars(args).items() if k != "child"})
    if args.mode == "all_at_once" and backend != "cpu" and len(indices) > 1:
        all_at_once(indices, _strip_values(argv))
    else:
        for i in indices:
            run_one(torch, i, i if i is not None else 0, args)
    emit("done", duration_s=round(time.monotonic() - started, 3))
    return 0


def _strip_values(argv: list[str]) -> list[str]:
    """``argv`` without --gpus and --mode (the parent sets them for each child)."""
    out, skip = [], False
    for word in argv:
        if skip:
            skip = False
        elif word in ("--gpus", "--mode"):
            skip = True
        elif not word.startswith(("--gpus=", "--mode=")):
            out.append(word)
    return out


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
