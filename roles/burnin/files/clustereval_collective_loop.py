#!/usr/bin/env python3
"""clustereval collective loop: large-message collectives over every node, again and again, for a duration.

One process per GPU on every node (mpirun from the first node; rank, local rank and world size from the
launcher's environment; the local rank picks the GPU). NCCL where CUDA sees a GPU, gloo otherwise. all_to_all is
``all_to_all_single`` (gloo has no list all_to_all); all_gather and reduce_scatter are the ``*_tensor`` forms.
Every operation is waited on with ``--op-timeout-s``: a hang becomes an ``error`` line with ``timeout: true`` and
the loop ends (a process group that timed out cannot be trusted again), rather than a job stuck for hours.

Rank 0 prints JSON lines (the contract is ``clustereval/parsers/collective_loop.py``): one ``window`` line per
collective every ``--window-s`` (an 8-hour run on NCCL does hundreds of operations a second: one line each would be
gigabytes), with the window's operation count, summed seconds, mean/min/max bus bandwidth and wrong results::

    {"event": "window", "timestamp": "...", "collective": "all_to_all", "bytes": 67108864, "ops": 412,
     "seconds": 1.98, "busbw_gbps": 28.1, "busbw_min_gbps": 25.3, "busbw_max_gbps": 29.0, "wrong": 0,
     "first_iteration": 1, "last_iteration": 412, "world_size": 16, "backend": "nccl"}

(``--window-s 0``: one ``op`` line per operation instead, with ``seconds``, ``busbw_gbps`` and ``correct``),

a ``start`` line first, ``error`` lines (``collective``, ``message``, ``timeout``) and a ``done`` line last,
also after SIGTERM or SIGINT.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import signal
import sys
import time

COLLECTIVES = ("all_to_all", "all_gather", "reduce_scatter")
STOP = {"signal": None}


def emit(**fields) -> None:
    print(json.dumps(fields, default=str), flush=True)


def now() -> str:
    # timezone.utc, not datetime.UTC: the node's Python may be older than 3.11.
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="milliseconds")  # noqa: UP017


class Window:
    """One collective's operations since the last report: count, time, bus bandwidth range, wrong results."""

    def __init__(self) -> None:
        self.ops, self.seconds, self.wrong = 0, 0.0, 0
        self.low = self.high = self.first = self.last = None

    def add(self, iteration: int, seconds: float, busbw: float | None, correct: bool) -> None:
        self.ops += 1
        self.seconds += seconds
        self.wrong += 0 if correct else 1
        self.first = iteration if self.first is None else self.first
        self.last = iteration
        if busbw is not None:
            self.low = busbw if self.low is None else min(self.low, busbw)
            self.high = busbw if self.high is None else max(self.high, busbw)

    def emit(self, collective: str, size: int, factor: float, world: int, backend: str) -> None:
        if not self.ops:
            return
        mean = size * self.ops / self.seconds / 1e9 * factor if self.seconds > 0 else None
        emit(event="window", timestamp=now(), collective=collective, bytes=size, ops=self.ops,
             seconds=round(self.seconds, 6), busbw_gbps=None if mean is None else round(mean, 4),
             busbw_min_gbps=None if self.low is None else round(self.low, 4),
             busbw_max_gbps=None if self.high is None else round(self.high, 4), wrong=self.wrong,
             first_iteration=self.first, last_iteration=self.last, world_size=world, backend=backend)
        self.__init__()


def env_int(*names: str, default: int | None = None) -> int | None:
    for name in names:
        if os.environ.get(name, "").strip().isdigit():
            return int(os.environ[name])
    return default


def make_op(dist, torch, collective: str, per: int, rank: int, world: int, device):
    """(start the collective asynchronously -> work, was the last result right)."""
    f32 = torch.float32
    if collective == "all_to_all":
        src = (rank * world + torch.arange(world, dtype=f32, device=device)).repeat_interleave(per)
        out = torch.empty(per * world, dtype=f32, device=device)
        want = (torch.arange(world, dtype=f32, device=device) * world + rank).repeat_interleave(per)
        return (lambda: dist.all_to_all_single(out, src, async_op=True)), lambda: bool(torch.equal(out, want))
    if collective == "all_gather":
        mine = torch.full((per,), float(rank + 1), dtype=f32, device=device)
        out = torch.empty(per * world, dtype=f32, device=device)
        want = torch.arange(1, world + 1, dtype=f32, device=device).repeat_interleave(per)
        return (lambda: dist.all_gather_into_tensor(out, mine, async_op=True)), lambda: bool(torch.equal(out, want))
    if collective == "reduce_scatter":
        full = torch.full((per * world,), float(rank + 1), dtype=f32, device=device)
        out = torch.empty(per, dtype=f32, device=device)
        return (lambda: dist.reduce_scatter_tensor(out, full, async_op=True)), (
            lambda: bool(torch.all(out == world * (world + 1) / 2)))
    raise ValueError(f"unknown collective {collective!r} (known: {', '.join(COLLECTIVES)})")


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--master-addr", required=True)
    p.add_argument("--master-port", type=int, required=True)
    p.add_argument("--duration-s", type=float, required=True)
    p.add_argument("--collectives", default=",".join(COLLECTIVES))
    p.add_argument("--bytes", type=int, default=256 << 20, help="bytes of each rank's output buffer")
    p.add_argument("--op-timeout-s", type=float, default=300)
    p.add_argument("--window-s", type=float, default=10, help="seconds per reported window (0: every operation)")
    args = p.parse_args(argv)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda num, _frame: STOP.update(signal=signal.Signals(num).name))
    rank = env_int("RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID")
    world = env_int("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS")
    local = env_int("LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", default=0)
    if rank is None or world is None:
        emit(event="error", timestamp=now(), message="no rank in the environment: start this with mpirun or srun")
        return 2
    try:
        import torch
        import torch.distributed as dist
    except ImportError as exc:
        if rank == 0:
            emit(event="error", timestamp=now(), message=f"PyTorch is not importable with {sys.executable}: {exc}")
        return 2
    collectives = [c.strip() for c in args.collectives.split(",") if c.strip()]
    gpu = torch.cuda.is_available() and torch.cuda.device_count() > 0
    backend = "nccl" if gpu else "gloo"
    device = torch.device(f"cuda:{local % torch.cuda.device_count()}" if gpu else "cpu")
    if gpu:
        torch.cuda.set_device(device)
    timeout = datetime.timedelta(seconds=args.op_timeout_s)
    dist.init_process_group(backend, init_method=f"tcp://{args.master_addr}:{args.master_port}", rank=rank,
                            world_size=world, timeout=timeout)
    per = max(1, args.bytes // 4 // world)
    ops = {c: make_op(dist, torch, c, per, rank, world, device) for c in collectives}
    if rank == 0:
        emit(event="start", timestamp=now(), tool="clustereval-collective-loop", torch=torch.__version__,
             backend=backend, world_size=world, collectives=collectives, settings=vars(args))
    factor = (world - 1) / world  # nccl-tests' bus factor of all three collectives
    size = per * world * 4
    windows = {c: Window() for c in collectives}
    status, iteration = 0, 0
    window_start = time.monotonic()
    deadline = window_start + args.duration_s
    # Every rank agrees when to stop (the deadline or a signal on any rank): one rank leaving the loop on
    # its own clock would leave its peers waiting in a collective it never joins.
    flag = torch.zeros(1, dtype=torch.int32, device=device)
    while status == 0:
        flag.fill_(1 if time.monotonic() >= deadline or STOP["signal"] is not None else 0)
        try:
            dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        except Exception as exc:  # a peer gone between iterations
            emit(event="error", timestamp=now(), iteration=iteration, collective="stop_vote", rank=rank,
                 timeout="timed out" in str(exc).lower(), message=f"{type(exc).__name__}: {str(exc)[:300]}")
            status = 1
            break
        if int(flag.item()):
            break
        iteration += 1
        for collective in collectives:
            start, right = ops[collective]
            t0 = time.perf_counter()
            try:
                work = start()
                work.wait(timeout)
                if gpu:
                    torch.cuda.synchronize(device)
            except Exception as exc:  # a timeout (hang), a lost peer, an op the backend lacks
                seconds = time.perf_counter() - t0
                text = f"{type(exc).__name__}: {str(exc)[:300]}"
                if rank == 0 or "timed out" in text.lower() or "timeout" in text.lower():
                    emit(event="error", timestamp=now(), iteration=iteration, collective=collective,
                         seconds=round(seconds, 6), timeout="timeout" in text.lower() or "timed out" in text.lower(),
                         rank=rank, message=text)
                status = 1
                break
            seconds = time.perf_counter() - t0
            if rank != 0:
                continue
            busbw = size / seconds / 1e9 * factor if seconds > 0 else None
            if args.window_s <= 0:
                emit(event="op", timestamp=now(), iteration=iteration, collective=collective, bytes=size,
                     seconds=round(seconds, 6), busbw_gbps=None if busbw is None else round(busbw, 4),
                     world_size=world, backend=backend, correct=right())
                continue
            windows[collective].add(iteration, seconds, busbw, right())
        # a window closes between iterations, so every collective's window covers the same iterations
        if rank == 0 and args.window_s > 0 and time.monotonic() - window_start >= args.window_s:
            for name, window in windows.items():
                window.emit(name, size, factor, world, backend)
            window_start = time.monotonic()
    if rank == 0:
        for name, window in windows.items():  # the last, partial window (also after an error or a signal)
            window.emit(name, size, factor, world, backend)
        emit(event="done", timestamp=now(), iterations=iteration, stopped=STOP["signal"] or (
            "error" if status else "duration"))
    if status == 0:
        dist.destroy_process_group()
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
