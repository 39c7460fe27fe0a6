"""Long-running work on a node ("sessions"): start detached streams, serve polls by byte offset, stop them.

Sent to the node as ``python3 -c SOURCE`` with a JSON request on stdin and a JSON answer on stdout, like
the probe runner (standard library only, Python 3.6+: nodes run whatever Python their distribution has).

A session is a directory ``<base>/<run_id>/<name>/`` (mode 0700) holding ``session.json`` (what runs, the
supervisor's PID, when it started and must end), one ``<stream>.out`` / ``<stream>.err`` per stream, a
``heartbeat`` file every poll touches and, once it is over, ``ended.json`` (why, when, each stream's exit
status). A detached supervisor process (its own session, stdio on /dev/null) runs the streams in one
process group of their own and ends them — SIGTERM, then SIGKILL after a grace period — when the duration
is over, when it is told to stop, when every stream has exited, or when no poll came for
``orphan_after_s`` (the controller is gone: the node never keeps running work nobody watches).

Operations (``op``): ``start`` (returns once the supervisor runs), ``poll`` (``offsets`` in, new bytes out,
base64, at most ``max_bytes`` per stream; ``more`` says another poll would return more), ``stop`` (ends the
streams, waits for ``ended.json``, returns what was not read yet when ``offsets`` are given; ``remove``
deletes the directory afterwards), ``status``.
"""

import base64
import json
import os
import shutil
import signal
import subprocess
import sys
import time

DEFAULT_BASE = "/var/tmp/clustereval/sessions"
DEFAULT_MAX_BYTES = 4 * 1024 * 1024
GRACE_S = 3.0
TICK_S = 0.5  # how often the supervisor looks: stop latency vs its own CPU (0.7 ms of CPU per second at 0.2)
START_WAIT_S = 10.0
STOP_WAIT_S = 15.0
PARAM_PREFIX = "CLUSTEREVAL_"


def _now():
    return time.time()


def _write_json(path, data):
    tmp = path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump(data, fh, sort_keys=True)
    os.replace(tmp, path)


def _read_json(path):
    try:
        with open(path) as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return None


def _alive(pid):
    if not pid:
        return False
    try:
        os.kill(int(pid), 0)
    except OSError:
        return False
    try:
        with open(f"/proc/{int(pid)}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return True


def _env_for(stream):
    env = dict(os.environ)
    for key, value in (stream.get("params") or {}).items():
        if isinstance(value, bool):
            value = "1" if value else "0"
        elif value is None:
            value = ""
        elif isinstance(value, (list, tuple)):
            value = ",".join(str(v) for v in value)
        elif isinstance(value, dict):
            value = json.dumps(value, sort_keys=True)
        env[PARAM_PREFIX + str(key).upper()] = str(value)
    return env


def session_dir(request):
    base = request.get("base") or DEFAULT_BASE
    for key in ("run_id", "name"):
        value = str(request.get(key) or "")
        if not value or "/" in value or value in (".", ".."):
            raise ValueError(f"{key} must be a plain name, not {value!r}")
    return os.path.join(base, str(request["run_id"]), str(request["name"]))


# ------------------------------------------------------------------------------------------- supervisor


def _end_streams(procs, pgid):
    """SIGTERM the streams' process group, SIGKILL what is left after the grace period; exit statuses."""
    if pgid:
        try:
            os.killpg(pgid, signal.SIGTERM)
        except OSError:
            pass
    deadline = _now() + GRACE_S
    while _now() < deadline and any(p.poll() is None for p in procs.values()):
        time.sleep(0.05)
    if pgid:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except OSError:
            pass
    return {name: p.wait() for name, p in procs.items()}


def supervise(directory, spec):
    """Run the streams until the session is over; runs in the detached supervisor process."""
    stop = {"requested": False}

    def on_stop(signum, frame):
        stop["requested"] = True

    signal.signal(signal.SIGTERM, on_stop)
    signal.signal(signal.SIGINT, on_stop)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    procs, pgid = {}, None
    for stream in spec["streams"]:
        out = os.open(os.path.join(directory, stream["name"] + ".out"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        err = os.open(os.path.join(directory, stream["name"] + ".err"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        group = pgid

        def join_group(group=group):
            os.setpgid(0, group or 0)

        try:
            procs[stream["name"]] = subprocess.Popen(
                ["/bin/sh", "-c", stream["cmd"]], stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                cwd=directory, env=_env_for(stream), preexec_fn=join_group)
        except OSError as exc:  # never leave the streams already started running unsupervised
            codes = _end_streams(procs, pgid)
            _write_json(os.path.join(directory, "ended.json"),
                        {"reason": "start_failed", "at": _now(), "rc": codes,
                         "error": f"stream {stream['name']}: {exc}"})
            return
        finally:
            os.close(out)
            os.close(err)
        if pgid is None:
            pgid = procs[stream["name"]].pid
    spec.update(streams_pgid=pgid, stream_pids={n: p.pid for n, p in procs.items()})
    _write_json(os.path.join(directory, "session.json"), spec)
    reason = None
    while reason is None:
        time.sleep(TICK_S)
        if stop["requested"]:
            reason = "stopped"
        elif spec.get("deadline") and _now() >= spec["deadline"]:
            reason = "duration"
        elif all(p.poll() is not None for p in procs.values()):
            reason = "streams_exited"
        else:
            try:
                last = os.stat(os.path.join(directory, "heartbeat")).st_mtime
            except OSError:
                last = spec["started"]
            if _now() - last > spec["orphan_after_s"]:
                reason = "orphaned"
    codes = _end_streams(procs, pgid)
    _write_json(os.path.join(directory, "ended.json"), {"reason": reason, "at": _now(), "rc": codes})


def start(request):
    directory = session_dir(request)
    # Check the request before touching anything: a bad one must not wipe an earlier session's output.
    streams = request.get("streams") or []
    if not streams or any(not s.get("name") or not s.get("cmd") for s in streams):
        return {"failed": True, "msg": "a session needs streams, each with a name and a cmd"}
    names = [s["name"] for s in streams]
    if len(set(names)) != len(names) or any("/" in n or n.startswith(".") for n in names):
        return {"failed": True, "msg": f"stream names must be unique plain names: {names}"}
    old = _read_json(os.path.join(directory, "session.json"))
    if old and _alive(old.get("pid")) and not os.path.exists(os.path.join(directory, "ended.json")):
        return {"failed": True, "msg": f"session {directory} is already running (supervisor {old.get('pid')})"}
    if os.path.isdir(directory):
        shutil.rmtree(directory)
    os.makedirs(directory, mode=0o700)
    started = _now()
    duration = float(request.get("duration_s") or 0)
    spec = {"name": request["name"], "run_id": request["run_id"], "streams": streams, "started": started,
            "deadline": started + duration if duration > 0 else None,
            "orphan_after_s": float(request.get("orphan_after_s") or 120)}
    with open(os.path.join(directory, "heartbeat"), "w"):
        pass
    child = os.fork()
    if child == 0:  # the supervisor: its own session, no stdio the SSH channel waits for
        try:
            os.setsid()
            if os.fork() > 0:
                os._exit(0)
            os.chdir(directory)  # who is running here is then plain from the process table (/proc/PID/cwd)
            devnull = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(devnull, fd)
            spec["pid"] = os.getpid()
            supervise(directory, spec)
        finally:
            os._exit(0)
    os.waitpid(child, 0)
    deadline = _now() + START_WAIT_S
    while _now() < deadline:
        written = _read_json(os.path.join(directory, "session.json"))
        if written and written.get("pid"):
            return {"dir": directory, "pid": written["pid"], "started": started,
                    "stream_pids": written.get("stream_pids"), "deadline": spec["deadline"]}
        time.sleep(0.02)
    return {"failed": True, "msg": f"the session supervisor did not start within {START_WAIT_S:.0f} s"}


def _read_new(directory, name, offset, limit):
    path = os.path.join(directory, name)
    try:
        size = os.path.getsize(path)
    except OSError:
        return b"", offset, False
    if size <= offset:
        return b"", offset, False
    with open(path, "rb") as fh:
        fh.seek(offset)
        data = fh.read(limit)
    return data, offset + len(data), offset + len(data) < size


def poll(request, touch=True):
    directory = session_dir(request)
    spec = _read_json(os.path.join(directory, "session.json"))
    if spec is None:
        return {"failed": True, "gone": True, "msg": f"no session at {directory} (removed, or the node rebooted)"}
    if touch:
        os.utime(os.path.join(directory, "heartbeat"), None)
    offsets = request.get("offsets") or {}
    limit = int(request.get("max_bytes") or DEFAULT_MAX_BYTES)
    out, more = {}, False
    for stream in spec["streams"]:
        entry = {}
        for suffix in ("out", "err"):
            key = "{}.{}".format(stream["name"], suffix)
            data, new_offset, pending = _read_new(directory, key, int(offsets.get(key) or 0), limit)
            entry[suffix] = {"data": base64.b64encode(data).decode("ascii"), "offset": new_offset}
            more = more or pending
        out[stream["name"]] = entry
    ended = _read_json(os.path.join(directory, "ended.json"))
    supervisor_alive = _alive(spec.get("pid"))
    state = "ended" if ended else ("running" if supervisor_alive else "lost")
    return {"state": state, "ended": ended, "streams": out, "more": more, "started": spec.get("started"),
            "deadline": spec.get("deadline"), "now": _now(), "dir": directory}


def stop(request):
    directory = session_dir(request)
    spec = _read_json(os.path.join(directory, "session.json"))
    if spec is None:
        return {"state": "absent", "dir": directory, "streams": {}, "ended": None}
    if not os.path.exists(os.path.join(directory, "ended.json")):
        if _alive(spec.get("pid")):
            try:
                os.kill(int(spec["pid"]), signal.SIGTERM)
            except OSError:
                pass
        deadline = _now() + STOP_WAIT_S
        while _now() < deadline and not os.path.exists(os.path.join(directory, "ended.json")):
            if not _alive(spec.get("pid")):
                break
            time.sleep(0.05)
    if not os.path.exists(os.path.join(directory, "ended.json")):
        # The supervisor is gone (killed, or stuck): end the streams ourselves.
        pgid = spec.get("streams_pgid")
        for sig in (signal.SIGTERM, signal.SIGKILL):
            if pgid:
                try:
                    os.killpg(int(pgid), sig)
                except OSError:
                    pass
            time.sleep(0.5 if sig == signal.SIGTERM else 0)
        _write_json(os.path.join(directory, "ended.json"), {"reason": "stopped", "at": _now(), "rc": {}})
    answer = poll(request, touch=False)
    answer["state"] = "ended"
    if request.get("remove"):
        while answer.get("more"):  # hand back everything before the files go
            extra = poll(dict(request, offsets=_offsets(answer, request.get("offsets"))), touch=False)
            _merge(answer, extra)
        shutil.rmtree(directory, ignore_errors=True)
        try:
            os.rmdir(os.path.dirname(directory))
        except OSError:
            pass
        answer["removed"] = True
    return answer


def _offsets(answer, previous):
    out = dict(previous or {})
    for name, entry in answer.get("streams", {}).items():
        for suffix, part in entry.items():
            out[f"{name}.{suffix}"] = part["offset"]
    return out


def _merge(answer, extra):
    for name, entry in extra.get("streams", {}).items():
        for suffix, part in entry.items():
            mine = answer["streams"].setdefault(name, {}).setdefault(suffix, {"data": "", "offset": 0})
            joined = base64.b64decode(mine["data"]) + base64.b64decode(part["data"])
            mine.update(data=base64.b64encode(joined).decode("ascii"), offset=part["offset"])
    answer["more"] = extra.get("more", False)


def status(request):
    directory = session_dir(request)
    spec = _read_json(os.path.join(directory, "session.json"))
    if spec is None:
        return {"state": "absent", "dir": directory}
    ended = _read_json(os.path.join(directory, "ended.json"))
    return {"state": "ended" if ended else ("running" if _alive(spec.get("pid")) else "lost"), "ended": ended,
            "dir": directory, "pid": spec.get("pid"), "started": spec.get("started")}


OPS = {"start": start, "poll": poll, "stop": stop, "status": status}


def main():
    try:
        request = json.load(sys.stdin)
        if not isinstance(request, dict):
            raise ValueError("the request must be a JSON object")
        op = OPS[request.get("op")]
    except (ValueError, KeyError) as exc:
        print(json.dumps({"failed": True, "msg": f"unreadable session request: {exc}"}))
        return 2
    try:
        answer = op(request)
    except (OSError, ValueError) as exc:
        answer = {"failed": True, "msg": f"{type(exc).__name__}: {exc}"}
    sys.stdout.write(json.dumps(answer))
    sys.stdout.flush()
    return 0 if not answer.get("failed") else 1


if __name__ == "__main__":
    sys.exit(main())
