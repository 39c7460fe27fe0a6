#!/usr/bin/env python3
"""clustereval's metadata benchmark: many small files on one directory, mdtest's way, with nothing but the
node's Python 3 (3.6 or later, standard library only: mdtest is rarely installed, and needs MPI when it is).

``clustereval_mdbench.py DIR``: ``clients`` processes, each in a directory of its own under DIR (mdtest's
``-u``), run the same phases together; the parent starts every phase in all of them at once and waits for
all before the next, so a phase's rate is every client's operations over the time from the first start to
the last end (as mdtest reports it):

  mkdir   a two-level tree of ``dirs`` directories per client
  create  ``files`` files per client: open(O_CREAT|O_EXCL), write ``file_bytes``, close
  stat    stat() of each file
  read    open, read the whole file, close (a short read counts as an error: SHORT_READ)
  rename  rename() of each file to a new name in the same directory (a checkpoint's atomic replace)
  remove  unlink() of each file
  rmdir   the tree removed, deepest first

Each phase stops starting operations after ``phase_limit_s`` (a metadata-starved filesystem must not hold
the run for hours: the rate is what was done in that time, and the phase says it was cut short). Every
operation is timed on its own: the phase's latency percentiles are over all clients' operations. An
operation that fails is counted by its errno name (ENOENT, EIO, ESTALE, ...), a few kept as samples; the
next phases work on what exists.

Settings come from the environment, as every clustereval probe gets its parameters: ``CLUSTEREVAL_CLIENTS``,
``_FILES``, ``_DIRS``, ``_FILE_BYTES``, ``_PHASE_LIMIT_S``. The output is one JSON document on stdout
(``parsers/probe_storage_metadata.py`` reads it). Everything the run made under DIR is removed before it
exits, also when it is stopped by SIGTERM or SIGHUP; the probe's clean-up removes DIR itself.
"""

import errno
import json
import os
import select
import shutil
import signal
import sys
import time

FORMAT = "clustereval-mdbench/1"
PHASES = ("mkdir", "create", "stat", "read", "rename", "remove", "rmdir")
MAX_ERROR_SAMPLES = 3
# A child that answers nothing this long after a phase's limit has hung (a dead mount): the run stops.
HANG_GRACE_S = 120


def setting(name, default, kind=int):
    raw = os.environ.get("CLUSTEREVAL_" + name)
    if raw in (None, ""):
        return default
    try:
        value = kind(raw)
    except ValueError:
        raise SystemExit(f"clustereval_mdbench: CLUSTEREVAL_{name} must be a number, not {raw!r}") from None
    least = 0 if name == "DIRS" else 1
    if value < least:
        raise SystemExit(f"clustereval_mdbench: CLUSTEREVAL_{name} must be at least {least}, not {raw!r}")
    return value


def errno_name(exc):
    code = getattr(exc, "errno", None)
    return errno.errorcode.get(code, f"errno {code}") if code else type(exc).__name__


class ShortRead(OSError):
    pass


def tree(dirs):
    """A two-level tree of ``dirs`` directories (about sqrt(dirs) top-level ones, the rest spread below
    them), parents before children: mkdir walks it in order, rmdir in reverse."""
    fanout = 1
    while fanout * fanout < dirs:
        fanout += 1
    top = [f"d{i:03d}" for i in range(min(fanout, dirs))]
    out = list(top)
    k = 0
    while len(out) < dirs:
        out.append(f"{top[k % len(top)]}/d{k // len(top):03d}")
        k += 1
    return out


class Client:
    """One client's state across the phases: its directory, the files that exist and their names."""

    def __init__(self, base, settings):
        self.base, self.s = base, settings
        self.dirs = [os.path.join(base, "tree", d) for d in tree(settings["dirs"])]
        self.made_dirs = []
        self.files = []  # current paths of the files that exist
        self.payload = os.urandom(settings["file_bytes"])

    def operations(self, phase):
        """(callable, argument) for each operation of ``phase``, on what the earlier phases left."""
        if phase == "mkdir":
            return [(self.mkdir, d) for d in self.dirs]
        if phase == "create":
            files = os.path.join(self.base, "files")
            return [(self.create, os.path.join(files, f"f{i:07d}")) for i in range(self.s["files"])]
        if phase == "stat":
            return [(os.stat, f) for f in self.files]
        if phase == "read":
            return [(self.read, f) for f in self.files]
        if phase == "rename":
            return [(self.rename, f) for f in list(self.files)]
        if phase == "remove":
            return [(self.remove, f) for f in list(self.files)]
        return [(self.rmdir, d) for d in reversed(self.made_dirs)]

    def mkdir(self, path):
        os.mkdir(path, 0o755)
        self.made_dirs.append(path)

    def create(self, path):
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        self.files.append(path)
        try:
            view = memoryview(self.payload)
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)

    def read(self, path):
        fd = os.open(path, os.O_RDONLY)
        try:
            got = len(os.read(fd, self.s["file_bytes"] + 1))
        finally:
            os.close(fd)
        if got != self.s["file_bytes"]:
            raise ShortRead(f"read {got} of {self.s['file_bytes']} bytes")

    def rename(self, path):
        head, name = os.path.split(path)
        target = os.path.join(head, "r" + name[1:])
        os.rename(path, target)
        self.files[self.files.index(path)] = target

    def remove(self, path):
        os.unlink(path)
        self.files.remove(path)

    def rmdir(self, path):
        os.rmdir(path)
        self.made_dirs.remove(path)

    def run(self, phase):
        """Every operation of the phase, each timed, until the phase's time limit."""
        ops = self.operations(phase)
        latencies, errors, samples = [], {}, []
        start = time.monotonic()
        deadline = start + self.s["phase_limit_s"]
        done = 0
        for fn, arg in ops:
            if time.monotonic() >= deadline:
                break
            t0 = time.monotonic()
            try:
                fn(arg)
            except ShortRead as exc:
                errors["SHORT_READ"] = errors.get("SHORT_READ", 0) + 1
                if len(samples) < MAX_ERROR_SAMPLES:
                    samples.append({"path": arg, "error": "SHORT_READ", "message": str(exc)})
            except OSError as exc:
                name = errno_name(exc)
                errors[name] = errors.get(name, 0) + 1
                if len(samples) < MAX_ERROR_SAMPLES:
                    samples.append({"path": arg, "error": name, "message": exc.strerror or str(exc)})
            else:
                latencies.append(round((time.monotonic() - t0) * 1e6, 1))
            done += 1
        end = time.monotonic()
        return {"planned": len(ops), "attempted": done, "ops": len(latencies), "start": start, "end": end,
                "latency_us": latencies, "errors": errors, "samples": samples, "cut_short": done < len(ops)}


def child(index, settings, commands, answers):
    base = os.path.join(settings["dir"], f"client.{index}")
    client = None
    try:
        os.mkdir(base, 0o755)
        for sub in ("tree", "files"):
            os.mkdir(os.path.join(base, sub), 0o755)
        client = Client(base, settings)
        answers.write(json.dumps({"ready": index}) + "\n")
        answers.flush()
    except OSError as exc:
        answers.write(json.dumps({"ready": index, "failed": f"{errno_name(exc)}: {base}"}) + "\n")
        answers.flush()
        return
    for line in iter(commands.readline, ""):
        phase = line.strip()
        try:
            answer = client.run(phase)
        except Exception as exc:  # reported as the harness's fault, never the filesystem's
            answer = {"crashed": f"{type(exc).__name__}: {exc}"}
        answer["client"] = index
        answers.write(json.dumps(answer) + "\n")
        answers.flush()
    # the end of the run (the parent closed the pipe): every client removes what it left, all at once (one
    # process removing everything after a metadata-starved run would take as long again)
    shutil.rmtree(base, ignore_errors=True)


def spawn(index, settings):
    """A forked client speaking JSON lines over two pipes: (pid, to_child, from_child)."""
    down_r, down_w = os.pipe()
    up_r, up_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(down_w)
        os.close(up_r)
        code = 0
        try:
            child(index, settings, os.fdopen(down_r, "r"), os.fdopen(up_w, "w"))
        except BaseException:  # a child never returns into the parent's code
            code = 1
        os._exit(code)
    os.close(down_r)
    os.close(up_w)
    return pid, os.fdopen(down_w, "w"), os.fdopen(up_r, "r")


def percentile(ordered, q):
    if not ordered:
        return None
    return ordered[min(len(ordered) - 1, round(q / 100.0 * (len(ordered) - 1)))]


def summarize(phase, answers, settings):
    latencies = sorted(x for a in answers for x in a["latency_us"])
    errors, samples = {}, []
    for a in answers:
        for name, count in a["errors"].items():
            errors[name] = errors.get(name, 0) + count
        samples.extend(a["samples"][:MAX_ERROR_SAMPLES - len(samples)])
    seconds = max(a["end"] for a in answers) - min(a["start"] for a in answers)
    ops = sum(a["ops"] for a in answers)
    return {"phase": phase, "planned": sum(a["planned"] for a in answers),
            "attempted": sum(a["attempted"] for a in answers), "ops": ops, "seconds": round(seconds, 6),
            "ops_per_s": round(ops / seconds, 1) if seconds > 0 else None,
            "latency_us": {"p50": percentile(latencies, 50), "p90": percentile(latencies, 90),
                           "p99": percentile(latencies, 99), "max": latencies[-1] if latencies else None,
                           "mean": round(sum(latencies) / len(latencies), 1) if latencies else None},
            "errors": errors, "error_samples": samples,
            "cut_short": any(a["cut_short"] for a in answers),
            "clients": len(answers)}


def read_answer(stream, wait_s):
    """One JSON line from a client; None when it sent none within ``wait_s`` (a hang), a crash when it exited."""
    ready, _, _ = select.select([stream], [], [], wait_s)
    if not ready:
        return None
    line = stream.readline()
    return json.loads(line) if line else {"crashed": "the client exited without answering"}


def reap(pid, wait_s=5.0):
    """Kill and reap a client; one stuck in a hung filesystem (uninterruptible) is left after ``wait_s``."""
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        return
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        try:
            if os.waitpid(pid, os.WNOHANG)[0]:
                return
        except OSError:
            return
        time.sleep(0.05)


def stop(signum, frame):
    raise SystemExit(128 + signum)


def main(argv):
    if len(argv) != 2:
        raise SystemExit("usage: clustereval_mdbench.py DIR")
    settings = {"dir": argv[1], "clients": setting("CLIENTS", 4), "files": setting("FILES", 1000),
                "dirs": setting("DIRS", 100), "file_bytes": setting("FILE_BYTES", 4096),
                "phase_limit_s": setting("PHASE_LIMIT_S", 60.0, float)}
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGHUP, stop)
    out = {"format": FORMAT, "directory": settings["dir"], "python": "{}.{}".format(*sys.version_info[:2]),
           "settings": {k: v for k, v in settings.items() if k != "dir"}, "phases": [], "problems": []}
    started = time.monotonic()
    clients = []
    finished = False
    try:
        sys.stdout.flush()
        clients = [spawn(i, settings) for i in range(settings["clients"])]
        alive = []
        for index, (_pid, to_child, from_child) in enumerate(clients):
            hello = read_answer(from_child, 60)
            if hello is None or "ready" not in hello or hello.get("failed"):
                detail = (hello or {}).get("failed") or (hello or {}).get("crashed") or "no answer within 60 s"
                out["problems"].append({"kind": "start_failed", "client": index, "phase": None, "detail": detail})
            else:
                alive.append((index, to_child, from_child))
        for phase in PHASES if alive else ():
            for _, to_child, _ in alive:  # every client starts the phase at once
                to_child.write(phase + "\n")
                to_child.flush()
            answers = [(index, read_answer(from_child, settings["phase_limit_s"] + HANG_GRACE_S))
                       for index, _, from_child in alive]
            # a crash is this program's fault; a client silent long past the phase's limit is stuck in the
            # filesystem (a hung mount)
            lost = [{"kind": "crashed", "client": i, "phase": phase, "detail": a["crashed"]} if a else
                    {"kind": "hung", "client": i, "phase": phase,
                     "detail": f"no answer {HANG_GRACE_S} s after the phase's time limit"}
                    for i, a in answers if a is None or a.get("crashed")]
            if lost:
                out["problems"].extend(lost)
                break
            out["phases"].append(summarize(phase, [a for _, a in answers], settings))
        finished = not any(p["kind"] == "hung" for p in out["problems"])
    finally:
        for _, to_child, from_child in clients:
            for stream in (to_child, from_child):
                try:
                    stream.close()
                except OSError:
                    pass
        for pid, _, _ in clients:
            if finished:  # each client removes its directory on the closed pipe, then exits
                os.waitpid(pid, 0)
            else:  # stopped (a signal), or a client stuck in the filesystem
                reap(pid)
        left = []
        for index in range(settings["clients"]):
            base = os.path.join(settings["dir"], f"client.{index}")
            shutil.rmtree(base, ignore_errors=True)
            if os.path.lexists(base):
                left.append(base)
        out["left_behind"] = left
    out["duration_s"] = round(time.monotonic() - started, 3)
    sys.stdout.write(json.dumps(out, indent=1, sort_keys=True) + "\n")
    return 0 if out["phases"] and not out["problems"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
