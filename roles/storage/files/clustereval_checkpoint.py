#!/usr/bin/env python3
"""clustereval checkpoint benchmark: torch.save and torch.distributed.checkpoint (DCP) to a shared directory.

Several processes per node over several nodes, started by a launcher (mpirun, srun or torchrun): the rank and
world size come from its environment; the ranks speak over torch.distributed (gloo; NCCL when the tensors are
on GPUs), never through the filesystem under test. On one shared directory (the first of ``--dirs`` that
exists, else the account's home or /home where they are on a filesystem of ``--shared-fstypes``):

1. ``torch.save``: every rank writes its own shard (``--tensors`` tensors, ``--size-mib`` MiB in all) to a file
   of its own, flushed and fsynced, timed; a barrier.
2. ``torch.load`` of the shard a rank on ANOTHER node wrote (rank + ranks-per-node, so no page cache of the
   reader's node holds it), timed, every tensor's SHA-256 compared with the one its writer computed.
3. DCP save of a state dict sharded across the ranks (DTensors, ``Shard(0)`` over a 1-D DeviceMesh, built with
   ``DTensor.from_local`` as FSDP2 holds them), then a DCP load into a fresh state dict of the same layout over
   the same mesh with its ranks rotated by ranks-per-node: each rank reads the piece another node wrote.

Aggregate GB/s (10^9 bytes/s) = bytes moved by every rank / the slowest rank's time between the barriers
around the step; each rank's own bytes, seconds and GB/s are kept too. Rank 0 prints JSON lines (the contract
is ``clustereval/parsers/probe_checkpoint.py``): ``start`` (or ``skip`` with the reason), one line per method
and step, ``error`` lines, ``cleanup``, ``done``. Tracebacks go to stderr. The run's directory
(``<dir>/.clustereval-checkpoint-<run tag>``) is removed at the end, also when a step failed.
"""

from __future__ import annotations

import argparse
import ctypes
import datetime
import hashlib
import json
import os
import shutil
import socket
import sys
import time
import traceback

FORMAT = "clustereval-checkpoint/1"
METHODS = ("torch.save", "dcp")
COLUMNS = 1024  # elements per row: every tensor is (rows, 1024) float32, 4 KiB a row


def emit(**fields) -> None:
    print(json.dumps(fields, default=str), flush=True)


def env_int(*names: str, default: int | None = None) -> int | None:
    for name in names:
        if os.environ.get(name, "").strip().isdigit():
            return int(os.environ[name])
    return default


def unescape(field: str) -> str:
    return field.replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n").replace("\\134", "\\")


def mount_of(path: str) -> dict | None:
    """The mount holding path: the longest mount point of /proc/self/mountinfo containing its real path."""
    real, best = os.path.realpath(path), None
    try:
        with open("/proc/self/mountinfo") as fh:
            for line in fh:
                left, _, right = line.partition(" - ")
                fields, tail = left.split(), right.split()
                if len(fields) < 5 or len(tail) < 2:
                    continue
                target = unescape(fields[4])
                if (real == target or real.startswith(target.rstrip("/") + "/")) and (
                        best is None or len(target) >= len(best["target"])):
                    best = {"target": target, "fstype": tail[0], "source": unescape(tail[1])}
    except OSError:
        return None
    return best


def discover(requested: list[str], shared_types: set[str]) -> tuple[str | None, dict]:
    """The directory to write to: the first requested one that is a writable directory, else the account's home
    or /home where it is on a shared (network, FUSE or cluster) filesystem and writable."""
    home = os.path.expanduser("~")
    report: dict = {"home": home, "requested": requested, "candidates": []}
    for path in requested or [home, "/home"]:
        entry: dict = {"path": path, "exists": os.path.isdir(path)}
        report["candidates"].append(entry)
        if not entry["exists"]:
            continue
        entry["mount"] = mount_of(path) or {}
        entry["shared"] = entry["mount"].get("fstype") in shared_types
        entry["writable"] = os.access(path, os.W_OK | os.X_OK)
        if not (requested or entry["shared"]):
            continue
        if not entry["writable"]:
            entry["skipped"] = "not writable by this account"
            continue
        return path, report
    return None, report


def why_none(report: dict) -> str:
    seen = []
    for entry in report["candidates"]:
        mount = entry.get("mount") or {}
        if not entry["exists"]:
            seen.append(f"{entry['path']} does not exist")
        elif entry.get("skipped"):
            seen.append(f"{entry['path']} ({mount.get('fstype')}) is {entry['skipped']}")
        else:
            seen.append(f"{entry['path']} is on {mount.get('fstype') or '?'} ({mount.get('target') or '?'}), "
                        "not a shared filesystem")
    if report["requested"]:
        return "no directory given is usable: " + "; ".join(seen)
    return ("no shared directory to checkpoint to: " + "; ".join(seen)
            + " (set clustereval_storage_checkpoint_dir or clustereval_storage_shared_dirs)")


def digest(tensor) -> str:
    """SHA-256 of a contiguous CPU tensor's bytes, read in place (no numpy needed)."""
    size = tensor.numel() * tensor.element_size()
    return hashlib.sha256((ctypes.c_ubyte * size).from_address(tensor.data_ptr())).hexdigest()


def free_bytes(path: str) -> int | None:
    try:
        info = os.statvfs(path)
    except OSError:
        return None
    return info.f_bavail * info.f_frsize


def fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class Group:
    """The ranks' collective helpers over the default process group."""

    def __init__(self, dist, torch, rank: int, world: int, device):
        self.dist, self.torch, self.rank, self.world, self.device = dist, torch, rank, world, device

    def strings(self, text: str, size: int = 4096) -> list[str]:
        """Every rank's string (a fixed-size byte tensor each: all_gather_object needs numpy)."""
        raw = text.encode()[:size].ljust(size, b"\0")
        mine = self.torch.tensor(list(raw), dtype=self.torch.uint8, device=self.device)
        out = [self.torch.empty(size, dtype=self.torch.uint8, device=self.device) for _ in range(self.world)]
        self.dist.all_gather(out, mine)
        return [bytes(t.cpu().tolist()).rstrip(b"\0").decode(errors="replace") for t in out]

    def objects(self, value) -> list:
        return [json.loads(s) for s in self.strings(json.dumps(value, default=str), 8192)]

    def broadcast_text(self, text: str, size: int = 4096) -> str:
        raw = text.encode()[:size].ljust(size, b"\0")
        buf = self.torch.tensor(list(raw), dtype=self.torch.uint8, device=self.device)
        self.dist.broadcast(buf, src=0)
        return bytes(buf.cpu().tolist()).rstrip(b"\0").decode(errors="replace")

    def max(self, value: float) -> float:
        buf = self.torch.tensor([value], dtype=self.torch.float64, device=self.device)
        self.dist.all_reduce(buf, op=self.dist.ReduceOp.MAX)
        return float(buf.item())


def classify(exc: BaseException, local: bool) -> tuple[str, str]:
    """(kind, message). ``storage`` is the cluster's finding: any failure of a step that only reads or writes
    this rank's file (torch.save's zip writer reports a short write as ``unexpected pos``, torch.load a damaged
    file as an unpickling error), and a failure DCP gathered from a rank's own planning, writing or reading (its
    CheckpointException). ``harness``: anything else (a lost peer in a collective, a torch error)."""
    failures = getattr(exc, "failures", None)
    if isinstance(failures, dict) and failures:
        inner = [pair[0] if isinstance(pair, tuple) else pair for pair in failures.values()]
        shown = ([e for e in inner if isinstance(e, OSError)] or inner)[0]
        return "storage", f"ranks {sorted(failures)}: {type(shown).__name__}: {str(shown)[:300]}"
    return ("storage" if local or isinstance(exc, OSError) else "harness"), f"{type(exc).__name__}: {str(exc)[:400]}"


def timed(group: Group, action, local: bool = False) -> tuple[float, float, str | None, str | None]:
    """(this rank's seconds, the slowest rank's barrier-to-barrier seconds, error kind, message): the action
    between two barriers; an exception on one rank is reported, never left to hang the others."""
    group.dist.barrier()
    start = time.perf_counter()
    kind = message = None
    try:
        action()
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # CheckpointException is a BaseException
        failures = getattr(exc, "failures", None)
        if not isinstance(failures, dict) or group.rank in failures:
            kind, message = classify(exc, local)
            traceback.print_exc(file=sys.stderr)
    mine = time.perf_counter() - start
    group.dist.barrier()
    return mine, group.max(time.perf_counter() - start), kind, message


def report(group: Group, method: str, step: str, hosts: list[str], moved: int, mine: float, wall: float,
           kind: str | None, message: str | None, extra: dict, where: str) -> bool:
    """Rank 0 prints the step's line (and an error line per rank that failed); True when every rank did it."""
    if message:  # a full filesystem is the commonest reason: say how much room was left
        extra = {**extra, "free_bytes": free_bytes(where)}
    rows = group.objects({"bytes": moved, "seconds": round(mine, 6), "error_kind": kind, "error": message, **extra})
    if group.rank == 0:
        for rank, row in enumerate(rows):
            if row.get("error"):
                emit(event="error", method=method, step=step, rank=rank, host=hosts[rank], kind=row["error_kind"],
                     message=row["error"])
        total = sum(int(row["bytes"]) for row in rows)
        ranks = [{"rank": rank, "host": hosts[rank], "bytes": int(row["bytes"]), "seconds": row["seconds"],
                  "gbps": round(row["bytes"] / row["seconds"] / 1e9, 4)
                  if row["seconds"] > 0 and not row.get("error") else None,
                  **{k: v for k, v in row.items() if k not in ("bytes", "seconds", "error_kind", "error")}}
                 for rank, row in enumerate(rows)]
        failed = [r for r, row in enumerate(rows) if row.get("error")]
        line = {"method": method, "step": step, "world_size": group.world, "nodes": len(dict.fromkeys(hosts)),
                "bytes": total, "seconds": round(wall, 6),
                "gbps": round(total / wall / 1e9, 4) if wall > 0 and not failed else None,
                "failed_ranks": failed, "ranks": ranks}
        if step == "load":
            checked = [row for row in rows if row.get("verified") is not None]
            line["verified"] = bool(checked) and len(checked) == len(rows) and all(r["verified"] for r in checked)
            line["mismatches"] = [{"rank": rank, "source_rank": row.get("source_rank"), "tensors": row["mismatched"]}
                                  for rank, row in enumerate(rows) if row.get("mismatched")]
        emit(**line)
    return not any(row.get("error") for row in rows)


def make_tensors(torch, rank: int, count: int, rows: int, device):
    """The rank's shard: ``count`` float32 tensors of (rows, 1024), random, different on every rank."""
    gen = torch.Generator(device="cpu")
    gen.manual_seed(0x5EED + rank)
    return [torch.rand((rows, COLUMNS), generator=gen, dtype=torch.float32).to(device) for _ in range(count)]


def cpu_digest(tensor) -> str:
    return digest(tensor.detach().contiguous().cpu())


def run_torch_save(torch, group: Group, workdir: str, shard, digests, source: int, hosts, load: bool) -> None:
    rank = group.rank
    path = os.path.join(workdir, f"torch-save-rank{rank:05d}.pt")

    def save():
        with open(path, "wb") as fh:
            torch.save({f"tensor{i}": t for i, t in enumerate(shard)}, fh)
            fh.flush()
            os.fsync(fh.fileno())

    mine, wall, kind, message = timed(group, save, local=True)
    size = os.path.getsize(path) if os.path.exists(path) else 0
    saved = report(group, "torch.save", "save", hosts, size, mine, wall, kind, message,
                   {"file": os.path.basename(path)}, workdir)
    if rank == 0 and saved:
        fsync_dir(workdir)
    if not (load and saved):
        return
    theirs = os.path.join(workdir, f"torch-save-rank{source:05d}.pt")
    loaded = {}

    def read():
        loaded.update(torch.load(theirs, map_location=group.device, weights_only=True))

    mine, wall, kind, message = timed(group, read, local=True)
    size = os.path.getsize(theirs) if kind is None else 0
    wrong = [name for i, name in enumerate(f"tensor{j}" for j in range(len(shard)))
             if name not in loaded or cpu_digest(loaded[name]) != digests[source][i]] if kind is None else []
    loaded.clear()
    report(group, "torch.save", "load", hosts, size, mine, wall, kind, message,
           {"source_rank": source, "source_host": hosts[source], "same_node": hosts[source] == hosts[rank],
            "verified": None if kind else not wrong, "mismatched": wrong}, workdir)


def run_dcp(torch, group: Group, workdir: str, shard, digests, shift: int, hosts, load: bool, device_type: str) -> None:
    import torch.distributed.checkpoint as dcp
    from torch.distributed.device_mesh import DeviceMesh
    from torch.distributed.tensor import DTensor, Shard

    rank, world = group.rank, group.world
    path = os.path.join(workdir, "dcp")
    rows = shard[0].shape[0]
    shape, stride = torch.Size((rows * world, COLUMNS)), (COLUMNS, 1)
    mesh = DeviceMesh(device_type, list(range(world)))
    state = {f"layers.{i}.weight": DTensor.from_local(t, mesh, [Shard(0)], run_check=False, shape=shape,
                                                      stride=stride) for i, t in enumerate(shard)}

    def save():
        dcp.save(state, storage_writer=dcp.FileSystemWriter(path, sync_files=True))

    mine, wall, kind, message = timed(group, save)
    mine_file = os.path.join(path, f"__{rank}_0.distcp")
    size = os.path.getsize(mine_file) if os.path.exists(mine_file) else 0
    if rank == 0 and os.path.exists(os.path.join(path, ".metadata")):
        size += os.path.getsize(os.path.join(path, ".metadata"))
    saved = report(group, "dcp", "save", hosts, size, mine, wall, kind, message, {"file": f"dcp/__{rank}_0.distcp"},
                   workdir)
    state.clear()
    if not (load and saved):
        return
    # The same layout over the same ranks, rotated: coordinate c of the mesh is rank c - shift, so rank r holds
    # the piece rank r + shift (on another node) wrote, and reads it from that rank's file.
    rotated = DeviceMesh(device_type, [(c - shift) % world for c in range(world)])
    source = (rank + shift) % world
    fresh = {f"layers.{i}.weight": DTensor.from_local(torch.zeros((rows, COLUMNS), dtype=torch.float32,
                                                                  device=group.device), rotated, [Shard(0)],
                                                      run_check=False, shape=shape, stride=stride)
             for i in range(len(shard))}

    def read():
        dcp.load(fresh, storage_reader=dcp.FileSystemReader(path))

    mine, wall, kind, message = timed(group, read)
    their_file = os.path.join(path, f"__{source}_0.distcp")
    size = os.path.getsize(their_file) if kind is None and os.path.exists(their_file) else 0
    wrong = [name for i, (name, value) in enumerate(fresh.items())
             if cpu_digest(value.to_local()) != digests[source][i]] if kind is None else []
    fresh.clear()
    report(group, "dcp", "load", hosts, size, mine, wall, kind, message,
           {"source_rank": source, "source_host": hosts[source], "same_node": hosts[source] == hosts[rank],
            "verified": None if kind else not wrong, "mismatched": wrong}, workdir)


def numpy_missing(group: Group, hosts: list[str]) -> list[str]:
    try:
        import numpy  # noqa: F401
        mine = ""
    except ImportError:
        mine = hosts[group.rank]
    return sorted({h for h in group.strings(mine, 256) if h})


def prepare(group: Group, args, hosts: list[str]) -> tuple[str | None, str | None, dict]:
    """(the run's directory, why there is none, what was found): rank 0 picks the directory and makes the run's
    directory there with a token in it; every other rank must see that token (the same filesystem)."""
    workdir, why, found = "", None, {}
    if group.rank == 0:
        chosen, found = discover([d for d in args.dirs.split(",") if d.strip()],
                                 {t.strip() for t in args.shared_fstypes.split(",") if t.strip()})
        if chosen is None:
            why = why_none(found)
        else:
            tag = "".join(c if c.isalnum() or c in "._-" else "_" for c in args.run_tag) or "run"
            workdir = os.path.join(chosen, f".clustereval-checkpoint-{tag}")
            try:
                shutil.rmtree(workdir, ignore_errors=True)  # a cut-short run with this tag
                os.makedirs(workdir)
                with open(os.path.join(workdir, "token"), "w") as fh:
                    fh.write(workdir + "\n")
                    fh.flush()
                    os.fsync(fh.fileno())
            except OSError as exc:
                why, workdir = f"cannot create {workdir}: {exc}", ""
    # every rank takes rank 0's decision, so all of them skip or run together
    workdir, why = group.broadcast_text(workdir), group.broadcast_text(why or "") or None
    seen = {"saw_token": False}
    if workdir:
        deadline = time.monotonic() + args.visible_wait_s
        while True:
            try:
                with open(os.path.join(workdir, "token")) as fh:
                    seen["saw_token"] = fh.read().strip() == workdir
            except OSError as exc:
                seen["error"] = f"{type(exc).__name__}: {exc}"
            if seen["saw_token"] or time.monotonic() >= deadline:
                break
            time.sleep(0.1)
        seen["mount"] = mount_of(workdir)
    views = group.objects(seen)
    if workdir and not all(v["saw_token"] for v in views):
        blind = sorted({hosts[r] for r, v in enumerate(views) if not v["saw_token"]})
        why = (f"{', '.join(blind)} do not see the directory {hosts[0]} made ({workdir}; "
               f"{views[hosts.index(blind[0])].get('error') or 'another file there'}): it is not one shared "
               "filesystem on these nodes")
    found["mounts"] = {hosts[r]: v.get("mount") for r, v in enumerate(views)}
    return (workdir or None), why, found


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--master-addr", required=True)
    p.add_argument("--master-port", type=int, required=True)
    p.add_argument("--dirs", default="", help="comma-separated directories; empty: home or /home when shared")
    p.add_argument("--shared-fstypes", default="nfs,nfs4,lustre,gpfs,fuse.glusterfs,glusterfs")
    p.add_argument("--run-tag", default="run")
    p.add_argument("--size-mib", type=int, default=1024, help="MiB per rank")
    p.add_argument("--tensors", type=int, default=8, help="tensors per rank")
    p.add_argument("--ranks-per-node", type=int, default=0, help="0: the ranks on rank 0's node")
    p.add_argument("--methods", default=",".join(METHODS))
    p.add_argument("--steps", default="save,load")
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--visible-wait-s", type=float, default=10.0)
    p.add_argument("--timeout-s", type=int, default=600)
    args = p.parse_args(argv)
    rank = env_int("RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID")
    world = env_int("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS")
    local = env_int("LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", default=0)
    if rank is None or world is None:
        emit(event="error", kind="harness",
             message="no rank in the environment: start this with mpirun, srun or torchrun")
        return 2
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    unknown = sorted(set(methods) - set(METHODS))
    if unknown or args.size_mib < 1 or args.tensors < 1:
        if rank == 0:
            emit(event="error", kind="harness", message=f"bad settings: methods {methods}, size {args.size_mib} MiB, "
                 f"{args.tensors} tensors")
        return 2
    try:
        import torch
        import torch.distributed as dist
    except ImportError as exc:
        if rank == 0:
            emit(event="error", kind="harness", message=f"PyTorch is not importable with {sys.executable}: {exc}")
        return 2
    torch.set_num_threads(1)  # serialisation and checksums, not compute: the cores stay the storage client's
    gpu = args.device == "cuda"
    if gpu and not torch.cuda.is_available():
        if rank == 0:
            emit(event="error", kind="harness", message="--device cuda, but torch sees no GPU")
        return 2
    device = torch.device(f"cuda:{local % torch.cuda.device_count()}" if gpu else "cpu")
    if gpu:
        torch.cuda.set_device(device)
    dist.init_process_group("nccl" if gpu else "gloo", init_method=f"tcp://{args.master_addr}:{args.master_port}",
                            rank=rank, world_size=world, timeout=datetime.timedelta(seconds=args.timeout_s))
    group = Group(dist, torch, rank, world, device)
    hosts = group.strings(socket.gethostname(), 256)
    started = time.perf_counter()
    per_node = args.ranks_per_node or hosts.count(hosts[0])
    nodes = list(dict.fromkeys(hosts))
    workdir, why, found = prepare(group, args, hosts)
    if why is None and len(nodes) < 2:
        why = f"all {world} ranks run on {hosts[0]}: loading another node's shard needs two nodes or more"
    if why is None and world % per_node:
        why = f"{world} ranks are not a whole number of nodes of {per_node} ranks"
    status = 0
    try:
        if why is not None:
            if rank == 0:
                emit(event="skip", format=FORMAT, reason=why, world_size=world, hosts=hosts, discovery=found)
            return 0
        rows = max(1, (args.size_mib << 20) // (args.tensors * COLUMNS * 4))
        if rank == 0:
            emit(event="start", format=FORMAT, tool="clustereval-checkpoint", torch=torch.__version__,
                 backend=dist.get_backend(), device=device.type, world_size=world, nodes=len(nodes),
                 ranks_per_node=per_node, hosts=hosts, directory=os.path.dirname(workdir), workdir=workdir,
                 mount=mount_of(workdir), discovery=found, tensors=args.tensors, tensor_shape=[rows, COLUMNS],
                 bytes_per_rank=args.tensors * rows * COLUMNS * 4, methods=methods, settings=vars(args))
        shard = make_tensors(torch, rank, args.tensors, rows, device)
        digests = [json.loads(s) for s in group.strings(json.dumps([cpu_digest(t) for t in shard]), 72 * args.tensors)]
        load = "load" in args.steps.split(",")
        shift = per_node % world
        for method in methods:
            if method == "torch.save":
                run_torch_save(torch, group, workdir, shard, digests, (rank + shift) % world, hosts, load)
            elif lacking := numpy_missing(group, hosts):
                # DCP's collectives turn pickled plans back into objects with numpy: without it one rank raises
                # inside a collective while the others wait in the next one
                if rank == 0:
                    emit(event="skip", method="dcp", reason=f"numpy is not installed in the PyTorch environment "
                         f"({sys.prefix}) on {', '.join(lacking)}: torch.distributed.checkpoint needs it (add numpy to "
                         "clustereval_gpu_compute_extra_packages)")
            else:
                run_dcp(torch, group, workdir, shard, digests, shift, hosts, load, device.type)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # a step that broke the group: said, and the directory still removed below
        traceback.print_exc(file=sys.stderr)
        emit(event="error", kind="harness", rank=rank, message=f"{type(exc).__name__}: {str(exc)[:400]}")
        status = 1
    finally:
        if workdir:
            try:
                dist.barrier()
            except Exception:  # a peer is gone: remove what we can all the same
                status = 1
            if rank == 0:
                shutil.rmtree(workdir, ignore_errors=True)
                emit(event="cleanup", workdir=workdir, removed=not os.path.exists(workdir))
        if rank == 0:
            emit(event="done", seconds=round(time.perf_counter() - started, 3))
        dist.destroy_process_group()
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
