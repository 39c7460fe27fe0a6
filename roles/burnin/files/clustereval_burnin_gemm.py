#!/usr/bin/env python3
"""clustereval burn-in GEMM: large matrix multiplies on every GPU at once for a duration, reported per window.

One thread per GPU (CUDA kernels run without the GIL, so one process drives all of them): bf16 on tensor
cores on a GPU; float32 on the CPU (one device, every core) when CUDA sees none. Every ``--window-s`` each
device prints one JSON line (the contract is ``clustereval/parsers/burnin_gemm.py``)::

    {"event": "window", "timestamp": "2026-12-02T12:00:01.5+00:00", "device": 0, "tflops": 661.2,
     "iters": 240, "seconds": 1.5, "elapsed_s": 1.5, "dtype": "bfloat16", "backend": "cuda"}

A ``start`` line comes first, an ``error`` line for a device that fails (the others carry on) and a
``done`` line last, also after SIGTERM or SIGINT (the session stopping it early), so a clean stop is told
from a crash.
"""

from __future__ import annotations

import argparse
import datetime
import json
import signal
import sys
import threading
import time

_LOCK = threading.Lock()
STOP = threading.Event()


def emit(**fields) -> None:
    with _LOCK:  # one line per write: threads never interleave inside a line
        print(json.dumps(fields, default=str), flush=True)


def now() -> str:
    # timezone.utc, not datetime.UTC: the node's Python may be older than 3.11.
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="milliseconds")  # noqa: UP017


def worker(torch, device: str, index: int, size: int, dtype, window_s: float, deadline: float,
           failures: list[str]) -> None:
    try:
        a = torch.randn(size, size, device=device, dtype=dtype)
        b = torch.randn(size, size, device=device, dtype=dtype)
        out = torch.empty(size, size, device=device, dtype=dtype)
        sync = (lambda: torch.cuda.synchronize(device)) if device.startswith("cuda") else (lambda: None)
        flop = 2.0 * size ** 3
        started = time.perf_counter()
        while not STOP.is_set() and time.monotonic() < deadline:
            t0, iters = time.perf_counter(), 0
            # A window ends on time, on the deadline or on a stop: the last one may be short but is reported.
            while time.perf_counter() - t0 < window_s and not STOP.is_set() and time.monotonic() < deadline:
                torch.matmul(a, b, out=out)
                iters += 1
                if iters % 8 == 0:
                    sync()
            sync()
            seconds = time.perf_counter() - t0
            if iters and seconds > 0:
                tflops = float(f"{flop * iters / seconds / 1e12:.6g}")  # six digits: a CPU does 0.001 TFLOP/s
                emit(event="window", timestamp=now(), device=index, tflops=tflops, iters=iters,
                     seconds=round(seconds, 4), elapsed_s=round(time.perf_counter() - started, 3),
                     dtype=str(dtype).replace("torch.", ""), backend=device.split(":")[0])
    except Exception as exc:  # an Xid, an out-of-memory, a lost GPU: said, and the other GPUs carry on
        failures.append(str(index))
        emit(event="error", timestamp=now(), device=index, message=f"{type(exc).__name__}: {str(exc)[:300]}")


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--duration-s", type=float, required=True)
    p.add_argument("--size", type=int, default=8192, help="M=N=K of the GEMM")
    p.add_argument("--window-s", type=float, default=2.0)
    args = p.parse_args(argv)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: STOP.set())
    try:
        import torch
    except ImportError as exc:
        emit(event="error", timestamp=now(), message=f"PyTorch is not importable with {sys.executable}: {exc}")
        return 2
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    devices = [f"cuda:{i}" for i in range(gpus)] or ["cpu"]
    dtype = torch.bfloat16 if gpus else torch.float32
    emit(event="start", timestamp=now(), tool="clustereval-burnin-gemm", torch=torch.__version__,
         devices=len(devices), backend="cuda" if gpus else "cpu", dtype=str(dtype).replace("torch.", ""),
         names=[torch.cuda.get_device_name(i) for i in range(gpus)], settings=vars(args))
    deadline = time.monotonic() + args.duration_s
    failures: list[str] = []
    threads = [threading.Thread(target=worker, args=(torch, d, i, args.size, dtype, args.window_s, deadline, failures),
                                daemon=True) for i, d in enumerate(devices)]
    for t in threads:
        t.start()
    while any(t.is_alive() for t in threads):
        for t in threads:
            t.join(timeout=0.2)
    emit(event="done", timestamp=now(), stopped="signal" if STOP.is_set() else "duration", failed_devices=failures)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
