#!/usr/bin/env python3
"""clustereval's datagen benchmark: many writers on one node producing video-sized blobs and Parquet sensor files
at once, the way a synthetic-data or robotics pipeline fills a shared filesystem.

Settings come from the environment only (``CLUSTEREVAL_<NAME>``, as every clustereval probe gets its parameters);
the output is one JSON document on stdout (``parsers/probe_datagen.py`` is its specification and reads it).

For each tier (the directories in ``dirs``; when empty every writable mount of a shared filesystem type and the
home directory when it is on one, and with ``all_tiers`` also home, scratch and /dev/shm; one per filesystem,
shared ones first), at its slot of the schedule every node got (``start_at`` + slot x (``duration_s`` +
``slack_s``), so the nodes' loads on a shared tier overlap), ``writers`` forked processes each write, in a
subdirectory of their own, a blob of ``blob_mib`` and a Parquet file of ``parquet_rows`` rows (a timestamp and
``parquet_columns`` float sensor columns, ``parquet_compression``) in turn, each file written, flushed, fsynced
and closed, until ``duration_s`` has passed or ``files`` files are written (0: no count) or the writer's share
of the space budget (``max_gib`` per node, at most half the free space, shared by ``node_count`` nodes on a
shared tier) is used. Blob bytes are a random pool drawn once per writer with every 4 KiB block stamped with its
file and position (incompressible and never a duplicate block, at memory speed). Parquet files are encoded in
memory first, so a file's time is the storage's (open, write, flush, fsync, close) and its encoding is counted
apart. I/O errors are counted by errno name; a writer whose files keep failing gives up after a few. Every file
is removed after its tier (and by the probe's clean-up command when the run is cut short).

Python 3.6 or later; pyarrow is needed for the Parquet files only: without it the blobs are written alone and the
document says why.
"""

import errno
import json
import multiprocessing
import multiprocessing.connection
import os
import shutil
import signal
import socket
import struct
import sys
import time
import traceback

try:  # not on every Unix; the CPU seconds are evidence only
    import resource
except ImportError:  # pragma: no cover
    resource = None

VERSION = 1
TOOL = "clustereval-datagen"
PREFIX = "CLUSTEREVAL_"
WORKDIR = "clustereval-datagen."
CHUNK = 1 << 20  # bytes per write() call
BLOCK = 4096  # every block of a blob carries its own stamp: no two blocks alike
POOL = 8 << 20  # random bytes drawn once per writer
STAMP = struct.Struct("<QQ")
MAX_SAMPLES = 5
GIVE_UP_AFTER = 5  # consecutive failed files before a writer stops
MAX_DURATIONS = 20000  # per-file times a writer reports (the rest are counted, not listed)
COMPRESSIONS = ("snappy", "zstd", "gzip", "lz4", "brotli", "none")
SAFE = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")


class ConfigError(Exception):
    pass


# ------------------------------------------------------------------------------------------------ settings


def _env(name, default=None):
    value = os.environ.get(PREFIX + name)
    return default if value is None or value.strip() == "" else value.strip()


def _number(name, default, kind=float, low=None):
    text = _env(name)
    try:
        value = kind(float(text)) if text is not None else default
    except ValueError:
        raise ConfigError(f"{PREFIX}{name}={text!r} is not a number") from None
    if low is not None and value < low:
        raise ConfigError(f"{PREFIX}{name} must be at least {low} (got {value})")
    return value


def _flag(name, default):
    text = _env(name)
    return default if text is None else text.lower() in ("1", "true", "yes", "on")


def _list(name):
    return [item.strip() for item in (_env(name, "") or "").split(",") if item.strip()]


def settings():
    compression = (_env("PARQUET_COMPRESSION", "snappy") or "snappy").lower()
    if compression not in COMPRESSIONS:
        raise ConfigError(f"{PREFIX}PARQUET_COMPRESSION must be one of {', '.join(COMPRESSIONS)} (got {compression!r})")
    dirs = _list("DIRS")
    relative = [d for d in dirs if not d.startswith("/")]
    if relative:
        raise ConfigError(f"{PREFIX}DIRS must hold absolute paths (got {', '.join(relative)})")
    blob_mib = _number("BLOB_MIB", 64.0, float, 0.0)
    out = {"dirs": dirs, "shared_fstypes": _list("SHARED_FSTYPES"), "all_tiers": _flag("ALL_TIERS", False),
           "scratch_dir": _env("SCRATCH_DIR", "/var/tmp"), "writers": _number("WRITERS", 8, int, 1),
           "blob_bytes": max(BLOCK, int(blob_mib * (1 << 20)) // BLOCK * BLOCK),
           "parquet_rows": _number("PARQUET_ROWS", 100000, int, 0),
           "parquet_columns": _number("PARQUET_COLUMNS", 16, int, 1), "parquet_compression": compression,
           "duration_s": _number("DURATION_S", 30.0, float, 0.1), "files": _number("FILES", 0, int, 0),
           "max_bytes": int(_number("MAX_GIB", 64.0, float, 0.0) * (1 << 30)),
           "node_count": _number("NODE_COUNT", 1, int, 1), "slack_s": _number("SLACK_S", 5.0, float, 0.0),
           "node": _env("NODE", socket.gethostname()),
           "install_pyarrow": _flag("INSTALL_PYARROW", False), "pyarrow_version": _env("PYARROW_VERSION", "")}
    # as the probe's clean-up spells it: tr -c 'A-Za-z0-9._-' '_'
    out["run_tag"] = "".join(c if c in SAFE else "_" for c in _env("RUN_TAG", str(os.getpid())))
    start_at = _env("START_AT")
    try:
        out["start_at"] = float(start_at) if start_at is not None else time.time()
    except ValueError:
        raise ConfigError(f"{PREFIX}START_AT={start_at!r} is not an epoch time") from None
    # a writer still busy this long after its duration is called hung (a stuck fsync, a dead server)
    out["grace_s"] = _number("GRACE_S", max(60.0, 2 * out["duration_s"]), float, 1.0)
    return out


# ------------------------------------------------------------------------------------------------ tiers


def _unescape(field):
    return field.replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n").replace("\\134", "\\")


def mounts():
    """Every mount of /proc/self/mountinfo: target, fstype, source and device number."""
    found = []
    try:
        with open("/proc/self/mountinfo") as fh:
            for line in fh:
                left, _, right = line.partition(" - ")
                fields, tail = left.split(), right.split()
                if len(fields) >= 5 and len(tail) >= 2:
                    found.append({"target": _unescape(fields[4]), "fstype": tail[0], "source": _unescape(tail[1]),
                                  "device": fields[2]})
    except OSError:
        pass
    return found


def mount_of(path, table):
    """The mount holding path: the longest mount point containing its real path (the last of equals wins, as
    a later mount hides an earlier one)."""
    real, best = os.path.realpath(path), None
    for entry in table:
        target = entry["target"]
        inside = real == target or real.startswith(target.rstrip("/") + "/")
        if inside and (best is None or len(target) >= len(best["target"])):
            best = entry
    return best


def _read(path):
    try:
        with open(path) as fh:
            return fh.read().strip()
    except OSError:
        return None


def disk_of(device):
    """``(disk, transport, rotational)`` of a block device number (``259:1``) from sysfs; Nones when not one."""
    where = f"/sys/dev/block/{device}"
    if not os.path.exists(where):
        return None, None, None
    real = os.path.realpath(where)
    if os.path.exists(os.path.join(real, "partition")):
        real = os.path.dirname(real)
    disk = os.path.basename(real)
    rota = _read(os.path.join(real, "queue", "rotational"))
    transport = "nvme" if disk.startswith("nvme") else None
    return disk, transport, None if rota not in ("0", "1") else rota == "1"


def candidates(s, table):
    """``(name, path)`` of every tier to try, in the order every node lists them."""
    home = os.path.expanduser("~")
    shared = set(s["shared_fstypes"])
    if s["dirs"]:
        out = []
        for path in s["dirs"]:
            mount = mount_of(path, table) if os.path.isdir(path) else None
            kind = "shared" if mount and mount["fstype"] in shared else ""
            out.append((kind + path.rstrip("/").replace("/", "_") if kind else os.path.basename(path.rstrip("/"))
                        or "root", path))
        return out
    out = []
    if s["all_tiers"]:
        out += [("home", home), ("scratch", s["scratch_dir"]), ("shm", "/dev/shm")]
    else:
        mount = mount_of(home, table)
        if mount and mount["fstype"] in shared:
            out.append(("home", home))
    for entry in sorted(table, key=lambda e: e["target"]):
        if entry["fstype"] in shared and os.access(entry["target"], os.W_OK):
            out.append(("shared" + entry["target"].replace("/", "_"), entry["target"]))
    return out


def tiers(s):
    """Every tier with its mount and state (``ready``, ``missing``, ``same_filesystem``); the shared ones first."""
    table = mounts()
    shared = set(s["shared_fstypes"])
    seen, out = {}, []
    for name, path in candidates(s, table):
        tier = {"name": name, "path": path, "state": "ready"}
        out.append(tier)
        if not path or not os.path.isdir(path):
            tier.update(state="missing", reason="no such directory")
            continue
        mount = mount_of(path, table)
        if mount is None:
            tier.update(state="missing", reason="no mount holds it in /proc/self/mountinfo")
            continue
        if mount["target"] in seen:
            tier.update(state="same_filesystem",
                        reason=f"the filesystem of tier {seen[mount['target']]} ({mount['target']})")
            continue
        seen[mount["target"]] = name
        disk, transport, rotational = disk_of(mount["device"])
        tier.update(mount=mount["target"], source=mount["source"], fstype=mount["fstype"],
                    shared=mount["fstype"] in shared, disk=disk, transport=transport, rotational=rotational)
        try:
            stat = os.statvfs(path)
            tier.update(size_bytes=stat.f_blocks * stat.f_frsize, avail_bytes=stat.f_bavail * stat.f_frsize)
        except OSError as exc:
            tier.update(size_bytes=None, avail_bytes=None, statvfs_error=ename(exc))
    # shared tiers first: every node writes them at the same slots of the schedule
    return sorted(out, key=lambda t: 0 if t.get("shared") else 1)


# ------------------------------------------------------------------------------------------------ writers


def ename(exc):
    code = getattr(exc, "errno", None)
    return errno.errorcode.get(code, f"errno {code}") if code else type(exc).__name__


def parquet_estimate(s):
    """Bytes of one Parquet file, roughly (timestamps and float32 columns, incompressible values)."""
    return int(s["parquet_rows"] * (8 + 4 * s["parquet_columns"]) * 1.5) + 4096


class Blobs:
    """Incompressible blob bytes at memory speed: one random pool, every block stamped with (file, position)."""

    def __init__(self):
        self.pool = memoryview(os.urandom(POOL))
        self.salt = struct.unpack("<Q", os.urandom(8))[0]
        self.buf = bytearray(CHUNK)

    def chunk(self, number, index, size):
        offset = ((number * 1000003 + index * 7919) * BLOCK) % (POOL - CHUNK)
        buf = self.buf
        buf[:] = self.pool[offset:offset + CHUNK]
        stamp = self.salt ^ number
        for block in range(0, size, BLOCK):
            STAMP.pack_into(buf, block, stamp, index * CHUNK + block)
        return memoryview(buf)[:size]


class Parquet:
    """Sensor tables encoded to Parquet in memory: a microsecond timestamp and float32 sensor columns."""

    def __init__(self, s):
        import pyarrow
        import pyarrow.compute
        import pyarrow.parquet

        self.pa, self.pc, self.pq = pyarrow, pyarrow.compute, pyarrow.parquet
        self.version = pyarrow.__version__
        self.rows, self.columns = s["parquet_rows"], s["parquet_columns"]
        self.compression = None if s["parquet_compression"] == "none" else s["parquet_compression"]
        self.steps = pyarrow.array(range(0, self.rows * 1000, 1000), pyarrow.int64())  # 1 kHz samples
        self.encode(0)  # fail here, before the clock starts, when pyarrow cannot write

    def encode(self, number):
        pa, pc = self.pa, self.pc
        base = int(time.time() * 1e6) + number
        columns = {"timestamp": pc.add(self.steps, pa.scalar(base, pa.int64())).cast(pa.timestamp("us"))}
        for index in range(self.columns):
            values = pc.add(pc.multiply(pc.random(self.rows), 20.0), float(index * 10 - 10))
            columns[f"sensor_{index:02d}"] = values.cast(pa.float32())
        sink = pa.BufferOutputStream()
        self.pq.write_table(pa.table(columns), sink, compression=self.compression)
        return sink.getvalue()


def write_file(path, parts):
    """Create ``path`` (it must not exist), write every part, flush, fsync, close. Returns the bytes written;
    an OSError carries ``op``: the call that failed."""
    step = "open"
    fd = None
    written = 0
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        step = "write"
        for part in parts:
            view = memoryview(part)
            while view:
                done = os.write(fd, view)
                if done <= 0:
                    raise OSError(errno.EIO, "write() wrote nothing")
                written += done
                view = view[done:]
        step = "fsync"  # os.write is unbuffered: the flush is the kernel's, which fsync forces to storage
        os.fsync(fd)
        step = "close"
        closing, fd = fd, None
        os.close(closing)
        return written
    except OSError as exc:
        exc.op = step
        raise
    finally:
        if fd is not None:
            try:
                os.close(fd)
            except OSError:
                pass


def _cpu():
    if resource is None:
        return None
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _new_kind():
    return {"files": 0, "bytes": 0, "file_s": [], "more_files": 0}


def writer(index, folder, s, scheduled_at, budget, conn):
    """One writer process: blobs and Parquet files in turn into ``folder`` from ``scheduled_at``; sends its
    figures through ``conn``."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGHUP, signal.SIG_DFL)
    out = {"writer": index, "pid": os.getpid(), "state": "ok", "bytes": 0, "files": 0, "errors": {},
           "samples": [], "harness_errors": [], "stopped_by": None, "encode_s": 0.0,
           "kinds": {"blob": _new_kind(), "parquet": _new_kind()}, "parquet": None}
    try:
        parquet = None
        if s["parquet_rows"] > 0:
            try:
                parquet = Parquet(s)
                out["parquet"] = {"available": True, "version": parquet.version}
            except Exception as exc:  # ImportError, or a pyarrow that cannot encode: blobs alone
                out["parquet"] = {"available": False, "reason": f"{type(exc).__name__}: {exc}"}
        blobs = Blobs()
        while time.time() < scheduled_at:
            time.sleep(min(0.05, max(0.0, scheduled_at - time.time())))
        out["late_s"] = round(max(0.0, time.time() - scheduled_at), 4)
        cpu0, started, t0 = _cpu(), time.time(), time.monotonic()
        deadline = t0 + s["duration_s"]
        number, failing = 0, 0
        estimate = {"blob": s["blob_bytes"], "parquet": parquet_estimate(s)}
        try:  # its own directory, made in its window as a pipeline makes its output directory
            os.mkdir(folder, 0o755)
        except OSError as exc:
            code = ename(exc)
            out["errors"][code] = 1
            out["samples"].append({"kind": "directory", "file": os.path.basename(folder), "op": "mkdir",
                                   "errno": code, "message": str(exc)[:200], "at_s": 0.0})
            out["stopped_by"] = "errors"
        while out["stopped_by"] is None:
            if s["files"] and out["files"] >= s["files"]:
                out["stopped_by"] = "count"
                break
            if time.monotonic() >= deadline:
                out["stopped_by"] = "duration"
                break
            # writers start on different kinds, so both are in flight at every moment
            kind = "parquet" if parquet is not None and (number + index) % 2 else "blob"
            if out["bytes"] + estimate[kind] > budget:
                out["stopped_by"] = "space"
                break
            stem, suffix = ("episode", "parquet") if kind == "parquet" else ("video", "bin")
            name = os.path.join(folder, f"{stem}-{number:06d}.{suffix}")
            if kind == "parquet":
                e0 = time.monotonic()
                data = parquet.encode(number)
                out["encode_s"] += time.monotonic() - e0
                parts = [data]
            else:
                size = s["blob_bytes"]
                parts = (blobs.chunk(number, i, min(CHUNK, size - i * CHUNK))
                         for i in range((size + CHUNK - 1) // CHUNK))
            f0 = time.monotonic()
            try:
                written = write_file(name, parts)
            except OSError as exc:
                code = ename(exc)
                out["errors"][code] = out["errors"].get(code, 0) + 1
                if len(out["samples"]) < MAX_SAMPLES:
                    out["samples"].append({"kind": kind, "file": os.path.basename(name), "op": getattr(exc, "op", "?"),
                                           "errno": code, "message": str(exc)[:200],
                                           "at_s": round(time.monotonic() - t0, 3)})
                failing += 1
                number += 1
                if failing >= GIVE_UP_AFTER:
                    out["stopped_by"] = "errors"
                    break
                continue
            seconds = time.monotonic() - f0
            failing = 0
            number += 1
            stats = out["kinds"][kind]
            stats["files"] += 1
            stats["bytes"] += written
            if len(stats["file_s"]) < MAX_DURATIONS:
                stats["file_s"].append(round(seconds, 6))
            else:
                stats["more_files"] += 1
            out["files"] += 1
            out["bytes"] += written
            estimate[kind] = max(estimate[kind], written)
        ended, seconds = time.time(), time.monotonic() - t0
        cpu1 = _cpu()
        out.update(started=started, ended=ended, seconds=round(seconds, 6),
                   gbps=round(out["bytes"] / seconds / 1e9, 6) if seconds > 0 else 0.0,
                   files_per_s=round(out["files"] / seconds, 4) if seconds > 0 else 0.0,
                   cpu_s=None if cpu0 is None or cpu1 is None else round(cpu1 - cpu0, 4),
                   encode_s=round(out["encode_s"], 4))
    except Exception as exc:  # a bug or a resource of the node (memory): the harness's, never the storage's
        out["harness_errors"].append(f"{type(exc).__name__}: {str(exc)[:300]}")
        out["traceback"] = traceback.format_exc()[-1500:]
        out.update(state="error", stopped_by="harness_error", reason=out["harness_errors"][-1])
    conn.send(out)
    conn.close()


# ------------------------------------------------------------------------------------------------ one tier


def quantiles(values):
    if not values:
        return None
    ordered = sorted(values)

    def at(q):
        return ordered[min(len(ordered) - 1, max(0, int(q * len(ordered) + 0.999999) - 1))]

    return {"count": len(ordered), "mean": round(sum(ordered) / len(ordered), 6), "p50": at(0.5), "p90": at(0.9),
            "p99": at(0.99), "max": ordered[-1]}


def stop(procs):
    for proc in procs:
        if proc.is_alive():
            proc.terminate()
    for proc in procs:
        proc.join(3)
        if proc.is_alive():
            proc.kill() if hasattr(proc, "kill") else os.kill(proc.pid, signal.SIGKILL)
            proc.join(3)


def run_tier(tier, s, scheduled_at, live):
    """Every writer on one tier at once; the tier's figures, its files removed."""
    workdir = os.path.join(tier["path"], WORKDIR + s["run_tag"])
    tier.update(workdir=workdir, scheduled_at=scheduled_at, writers_planned=s["writers"])
    avail = tier.get("avail_bytes")
    nodes = s["node_count"] if tier.get("shared") else 1
    budget = s["max_bytes"] if avail is None else min(s["max_bytes"], int(avail * 0.5 / nodes))
    tier["budget_bytes"] = budget
    smallest = min([s["blob_bytes"]] + ([parquet_estimate(s)] if s["parquet_rows"] else []))
    if budget // s["writers"] < smallest:
        tier.update(state="no_space", reason=f"{(avail or 0) >> 20} MiB free: half of it over {nodes} node(s) gives "
                    f"each of {s['writers']} writers less than one {(smallest >> 20) or 1} MiB file")
        return
    try:
        os.mkdir(workdir, 0o755)
    except OSError as exc:
        tier.update(state="unwritable", reason=f"cannot create {workdir}: {ename(exc)}")
        return
    live.append(workdir)
    context = multiprocessing.get_context("fork")
    procs, conns = [], {}
    try:
        for index in range(s["writers"]):
            receive, send = context.Pipe(duplex=False)
            proc = context.Process(target=writer, args=(index, os.path.join(workdir, f"w{index:03d}"), s,
                                                        scheduled_at, budget // s["writers"], send))
            proc.daemon = True
            proc.start()
            send.close()
            procs.append(proc)
            conns[receive] = index
        answers = {}
        wait_until = max(time.time(), scheduled_at) + s["duration_s"] + s["grace_s"]
        while conns and time.time() < wait_until:
            for conn in multiprocessing.connection.wait(list(conns), timeout=max(0.0, wait_until - time.time())):
                index = conns.pop(conn)
                try:
                    answers[index] = conn.recv()
                except (EOFError, OSError):
                    answers[index] = None  # it died without answering (below: its exit status)
                conn.close()
        hung = sorted(conns.values())
        stop(procs)
    finally:
        stop(procs)
    writers = []
    for index, proc in enumerate(procs):
        answer = answers.get(index)
        if answer is not None:
            writers.append(answer)
        elif index in hung:
            writers.append({"writer": index, "pid": proc.pid, "state": "hung",
                            "reason": f"still writing {s['grace_s']:.0f} s after its {s['duration_s']:g} s "
                                      f"(a stuck write or fsync)"})
        else:
            code = proc.exitcode
            why = f"killed by signal {-code}" if code is not None and code < 0 else f"exited with status {code}"
            writers.append({"writer": index, "pid": proc.pid, "state": "died", "reason": why})
    summarise(tier, writers)
    tier["cleanup"] = remove(workdir)
    if not os.path.exists(workdir):
        live.remove(workdir)
    tier["state"] = "measured"


def summarise(tier, writers):
    done = [w for w in writers if w.get("state") == "ok" and w.get("started") is not None]
    tier["writers"] = writers
    errors, samples, harness = {}, [], []
    for w in writers:
        for code, count in (w.get("errors") or {}).items():
            errors[code] = errors.get(code, 0) + count
        samples += [dict(x, writer=w["writer"]) for x in w.get("samples") or []][:MAX_SAMPLES - len(samples)]
        harness += [f"writer {w['writer']}: {h}" for h in w.get("harness_errors") or []]
    tier.update(errors=errors, error_samples=samples, harness_errors=harness)
    tier["parquet"] = next((w["parquet"] for w in writers if w.get("parquet")), None)
    stopped = {}
    for w in writers:
        if w.get("stopped_by"):
            stopped[w["stopped_by"]] = stopped.get(w["stopped_by"], 0) + 1
    tier["stopped_by"] = stopped
    tier["late_s"] = max([w.get("late_s") or 0.0 for w in done] or [0.0])
    if not done:
        tier.update(started=None, ended=None, seconds=0.0, bytes=0, files=0, gbps=0.0, files_per_s=0.0, kinds={})
        return
    started, ended = min(w["started"] for w in done), max(w["ended"] for w in done)
    seconds = ended - started
    total, files = sum(w["bytes"] for w in done), sum(w["files"] for w in done)
    kinds = {}
    for kind in ("blob", "parquet"):
        times = [t for w in done for t in w["kinds"][kind]["file_s"]]
        count = sum(w["kinds"][kind]["files"] for w in done)
        size = sum(w["kinds"][kind]["bytes"] for w in done)
        kinds[kind] = {"files": count, "bytes": size, "gbps": round(size / seconds / 1e9, 6) if seconds > 0 else 0.0,
                       "files_per_s": round(count / seconds, 4) if seconds > 0 else 0.0, "file_s": quantiles(times)}
        for w in done:
            w["kinds"][kind] = {k: w["kinds"][kind][k] for k in ("files", "bytes")}
    tier.update(started=started, ended=ended, seconds=round(seconds, 6), bytes=total, files=files,
                gbps=round(total / seconds / 1e9, 6) if seconds > 0 else 0.0,
                files_per_s=round(files / seconds, 4) if seconds > 0 else 0.0, kinds=kinds,
                cpu_s=round(sum(w.get("cpu_s") or 0.0 for w in done), 3),
                encode_s=round(sum(w.get("encode_s") or 0.0 for w in done), 3))


def remove(workdir):
    problems = []
    try:
        shutil.rmtree(workdir)
    except OSError as exc:  # what stopped it, then whatever else can go
        problems.append(f"{getattr(exc, 'filename', None) or workdir}: {ename(exc)} {exc.strerror or exc}")
        shutil.rmtree(workdir, ignore_errors=True)
    return {"removed": not os.path.exists(workdir), "errors": problems}


# ------------------------------------------------------------------------------------------------ main


def pyarrow_summary(s, listed):
    if s["parquet_rows"] <= 0:
        return {"available": False, "reason": "disabled (parquet_rows is 0)"}
    seen = [t.get("parquet") for t in listed if t.get("parquet")]
    if seen:
        return dict(seen[0])
    return {"available": None, "reason": "no writer started"}


def main(argv):
    document = {"tool": TOOL, "version": VERSION, "host": socket.gethostname(),
                "python": {"version": ".".join(str(n) for n in sys.version_info[:3]), "executable": sys.executable},
                "started": time.time(), "tiers": [], "done": False}
    live = []
    try:
        try:
            s = settings()
        except ConfigError as exc:
            document["fatal"] = f"settings: {exc}"
            return 2
        public = {k: v for k, v in s.items() if k not in ("shared_fstypes",)}
        document.update(settings=public, node=s["node"], start_at=s["start_at"])
        listed = tiers(s)
        document["tiers"] = listed
        slot = 0
        for tier in listed:
            if tier["state"] != "ready":
                continue
            scheduled = s["start_at"] + slot * (s["duration_s"] + s["slack_s"])
            tier["slot"] = slot
            slot += 1
            run_tier(tier, s, scheduled, live)
        document["pyarrow"] = pyarrow_summary(s, listed)
        document["done"] = True
        return 0
    except BaseException as exc:  # a signal (SystemExit) or a bug: say so, remove the files, keep what was measured
        document["fatal"] = f"{type(exc).__name__}: {exc}"
        if not isinstance(exc, SystemExit):
            document["traceback"] = traceback.format_exc()[-2000:]
        return exc.code if isinstance(exc, SystemExit) and isinstance(exc.code, int) else 1
    finally:
        for workdir in list(live):
            shutil.rmtree(workdir, ignore_errors=True)
        document["ended"] = time.time()
        document["left_behind"] = [w for w in live if os.path.exists(w)]
        sys.stdout.write(json.dumps(document) + "\n")  # "tool" first: a cut-short line still names it
        sys.stdout.flush()


def _stop(signum, frame):
    raise SystemExit(128 + signum)


if __name__ == "__main__":
    for _signal in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(_signal, _stop)
    sys.exit(main(sys.argv[1:]))
