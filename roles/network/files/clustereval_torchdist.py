#!/usr/bin/env python3
"""clustereval torch.distributed collective benchmark: all_reduce, all_gather, reduce_scatter, all_to_all, broadcast.

One process per node (or per GPU), started by a launcher (mpirun, srun or torchrun): the rank and world size
come from its environment. NCCL where CUDA sees a GPU, gloo otherwise. Every size is checked for correctness
(each rank fills its buffer with values it and every other rank can compute) and timed after warm-up. Rank 0
prints JSON lines (the contract is ``clustereval/parsers/torch_distributed.py``): a ``start`` line, one line
per (collective, size) with time, algbw, busbw (nccl-tests' bus factors) and ``correct``, then ``done``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import socket
import sys
import time

COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast")


def emit(**fields) -> None:
    print(json.dumps(fields, default=str), flush=True)


def env_int(*names: str, default: int | None = None) -> int | None:
    for name in names:
        if os.environ.get(name, "").strip().isdigit():
            return int(os.environ[name])
    return default


def bus_factor(collective: str, n: int) -> float:
    if collective == "all_reduce":
        return 2.0 * (n - 1) / n
    if collective in ("all_gather", "reduce_scatter", "all_to_all"):
        return (n - 1) / n
    return 1.0


def step(dist, torch, collective: str, elements: int, rank: int, world: int, device):
    """(a callable running the collective once, a callable telling whether the last run was right)."""
    f32 = torch.float32
    per = max(1, elements // world)
    if collective == "all_reduce":
        buf = torch.empty(elements, dtype=f32, device=device)

        def run():
            buf.fill_(rank + 1)
            dist.all_reduce(buf)
        return run, lambda: bool(torch.all(buf == world * (world + 1) / 2))
    if collective == "all_gather":
        mine = torch.full((per,), float(rank + 1), dtype=f32, device=device)
        out = torch.empty(per * world, dtype=f32, device=device)
        want = torch.arange(1, world + 1, dtype=f32, device=device).repeat_interleave(per)
        return (lambda: dist.all_gather_into_tensor(out, mine)), lambda: bool(torch.equal(out, want))
    if collective == "reduce_scatter":
        full = torch.empty(per * world, dtype=f32, device=device)
        out = torch.empty(per, dtype=f32, device=device)

        def run():
            full.fill_(rank + 1)
            dist.reduce_scatter_tensor(out, full)
        return run, lambda: bool(torch.all(out == world * (world + 1) / 2))
    if collective == "all_to_all":
        src = (rank * world + torch.arange(world, dtype=f32, device=device)).repeat_interleave(per)
        out = torch.empty(per * world, dtype=f32, device=device)
        want = (torch.arange(world, dtype=f32, device=device) * world + rank).repeat_interleave(per)
        return (lambda: dist.all_to_all_single(out, src)), lambda: bool(torch.equal(out, want))
    buf = torch.empty(elements, dtype=f32, device=device)

    def run():
        buf.fill_(7.0 if rank == 0 else 0.0)
        dist.broadcast(buf, src=0)
    return run, lambda: bool(torch.all(buf == 7.0))


def measure(dist, torch, collective: str, size: int, iters: int, warmup: int, rank: int, world: int, device,
            sync) -> dict:
    elements = max(world, size // 4)
    run, right = step(dist, torch, collective, elements, rank, world, device)
    run()
    sync()
    ok = torch.tensor([1 if right() else 0], dtype=torch.int32, device=device)
    dist.all_reduce(ok, op=dist.ReduceOp.MIN)  # any rank wrong makes the size wrong
    for _ in range(warmup):
        run()
    sync()
    dist.barrier()
    started = time.perf_counter()
    for _ in range(iters):
        run()
    sync()
    seconds = (time.perf_counter() - started) / iters
    took = torch.tensor([seconds], dtype=torch.float64, device=device)
    dist.all_reduce(took, op=dist.ReduceOp.MAX)  # the slowest rank's time is the collective's
    seconds = float(took.item())
    size_bytes = elements * 4
    algbw = size_bytes / seconds / 1e9
    return {"collective": collective, "size_bytes": size_bytes, "time_s": round(seconds, 9),
            "algbw_gbps": round(algbw, 4), "busbw_gbps": round(algbw * bus_factor(collective, world), 4),
            "correct": bool(ok.item()), "iters": iters, "warmup": warmup, "dtype": "float32"}


def gather_names(dist, torch, name: str, world: int, device) -> list[str]:
    """Every rank's host name (a fixed-size byte tensor each: all_gather_object needs numpy)."""
    raw = name.encode()[:255].ljust(256, b"\0")
    mine = torch.tensor(list(raw), dtype=torch.uint8, device=device)
    out = [torch.empty(256, dtype=torch.uint8, device=device) for _ in range(world)]
    dist.all_gather(out, mine)
    return [bytes(t.cpu().tolist()).rstrip(b"\0").decode(errors="replace") for t in out]


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--master-addr", required=True)
    p.add_argument("--master-port", type=int, required=True)
    p.add_argument("--collectives", default=",".join(COLLECTIVES))
    p.add_argument("--min-bytes", type=int, default=1024)
    p.add_argument("--max-bytes", type=int, default=64 << 20)
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--timeout-s", type=int, default=300)
    args = p.parse_args(argv)
    rank = env_int("RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID")
    world = env_int("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS")
    local = env_int("LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", default=0)
    if rank is None or world is None:
        emit(event="error", message="no rank in the environment: start this with mpirun, srun or torchrun")
        return 2
    try:
        import torch
        import torch.distributed as dist
    except ImportError as exc:
        if rank == 0:
            emit(event="error", message=f"PyTorch is not importable with {sys.executable}: {exc}")
        return 2
    gpu = torch.cuda.is_available() and torch.cuda.device_count() > 0
    backend = "nccl" if gpu else "gloo"
    device = torch.device(f"cuda:{local % torch.cuda.device_count()}" if gpu else "cpu")
    if gpu:
        torch.cuda.set_device(device)
    sync = (lambda: torch.cuda.synchronize(device)) if gpu else (lambda: None)
    dist.init_process_group(backend, init_method=f"tcp://{args.master_addr}:{args.master_port}", rank=rank,
                            world_size=world, timeout=datetime.timedelta(seconds=args.timeout_s))
    hosts = gather_names(dist, torch, socket.gethostname(), world, device)
    if rank == 0:
        emit(event="start", tool="clustereval-torchdist", torch=torch.__version__, backend=backend,
             device=str(device.type), world_size=world, hosts=hosts, settings=vars(args))
    sizes, size = [], args.min_bytes
    while size <= args.max_bytes:
        sizes.append(size)
        size *= 2
    status = 0
    for collective in (c.strip() for c in args.collectives.split(",") if c.strip()):
        for size in sizes:
            try:
                row = measure(dist, torch, collective, size, args.iters, args.warmup, rank, world, device, sync)
            except Exception as exc:  # an unsupported collective on this backend, a lost peer
                if rank == 0:
                    emit(event="error", message=f"{collective} at {size} B: {type(exc).__name__}: {str(exc)[:300]}")
                status = 1
                break
            if rank == 0:
                emit(**row, world_size=world, backend=backend, device=str(device.type), hosts=hosts)
    if rank == 0:
        emit(event="done")
    dist.destroy_process_group()
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
