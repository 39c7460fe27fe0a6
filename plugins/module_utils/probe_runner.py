"""Run probe commands on a node, several at a time, each with its own timeout (standard library only).

Used two ways, one piece of code: the ``clustereval.gpu.collect`` module imports :func:`collect`, and the
``clustereval.gpu.judge`` action sends this file's source to the node and runs it with the node's Python
(``python3 -c SOURCE``, the request as JSON on stdin, the answer as JSON on stdout). The second way skips
Ansible's module wrapper, whose import of ``ansible.module_utils.basic`` (compiled from source on every
run) cost each node more CPU than all its probes together. Python 3.6+ (the nodes' own Python, e.g. RHEL 8's).

Nothing it starts outlives the controller's interest in it: when the answer can no longer be delivered (the
SSH session closed: Ctrl-C, a cancelled job, a lost network) or the runner is signalled, every running probe's
process group gets SIGTERM, then SIGKILL after a grace period, no further probe starts, and each started
probe's ``cleanup`` command runs (fio's test file is removed). ``cleanup`` also runs once every probe of the
collection has ended, so what a probe leaves on the node never outlives the collection.
"""

import json
import os
import select
import shutil
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

MISSING_RC = 127
DEFAULT_PARALLEL = 8
DEFAULT_MAX_OUTPUT_BYTES = 8 * 1024 * 1024
# How a probe may run: beside the others, alone on the node (benchmarks that share GPUs or disks, run one at
# a time after the parallel ones), or once per cluster (the role runs it on one host; here it is parallel).
RUN_MODES = ("parallel", "exclusive", "cluster")
PARAM_PREFIX = "CLUSTEREVAL_"
# Seconds a probe's processes get between SIGTERM and SIGKILL when the collection is abandoned (mpirun and
# srun pass the SIGTERM on to their remote ranks in that time).
STOP_GRACE_S = 3.0
CLEANUP_TIMEOUT_S = 20.0
ABANDONED_RC = 3


class Collection:
    """The probes of one collection that are running or have run, so an abandoned collection can stop them
    and undo what they left."""

    def __init__(self):
        self.lock = threading.Lock()
        self.running = {}  # pid -> Popen (each probe is the leader of its own process group)
        self.started = []  # probe definitions that started, in order
        self.abandoned = None  # why, once the collection is abandoned
        self.stopped = threading.Event()  # set once an abandoned collection's probes are stopped and cleaned up

    def begin(self, probe):
        with self.lock:
            if self.abandoned:
                return False
            self.started.append(probe)
            return True

    def track(self, proc):
        with self.lock:
            self.running[proc.pid] = proc
            late = self.abandoned is not None
        if late:  # started while the collection was being abandoned
            _signal_groups([proc], signal.SIGKILL)

    def untrack(self, proc):
        with self.lock:
            self.running.pop(proc.pid, None)

    def abandon(self, why):
        """Stop every running probe (SIGTERM, SIGKILL after the grace period) and run the clean-ups; the first
        caller does it, later ones return at once."""
        with self.lock:
            if self.abandoned:
                return
            self.abandoned = why
            procs = list(self.running.values())
        _signal_groups(procs, signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE_S
        while time.monotonic() < deadline and any(p.poll() is None for p in procs):
            time.sleep(0.05)
        _signal_groups(procs, signal.SIGKILL)
        self.clean_up()
        self.stopped.set()

    def clean_up(self):
        """Each started probe's ``cleanup`` command, once per distinct command (fio's write and read share one)."""
        done = set()
        for probe in list(self.started):
            cmd = probe.get("cleanup")
            if not cmd or cmd in done:
                continue
            done.add(cmd)
            env = dict(os.environ)
            env.update(param_env(probe.get("params")))
            try:
                subprocess.run(["/bin/sh", "-c", cmd], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, env=env, timeout=CLEANUP_TIMEOUT_S)
            except (OSError, subprocess.SubprocessError):
                pass  # best effort: the role's own clean-up task removes it too when the run goes on


def _signal_groups(procs, sig):
    for proc in procs:
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, sig)
            except OSError:
                pass


def answer_undeliverable(fd=1):
    """Whether nobody reads our standard output any more: the SSH session that started us closed (poll reports
    an error or a hang-up on the pipe or socket; a terminal that went away too)."""
    poller = select.poll()
    poller.register(fd, select.POLLERR | select.POLLHUP)
    try:
        return bool(poller.poll(0))
    except OSError:
        return False


def watch_controller(collection, stop, interval_s=0.25, fd=1):
    """Until ``stop`` is set, abandon the collection as soon as its answer can no longer be delivered."""
    while not stop.wait(interval_s):
        if answer_undeliverable(fd):
            collection.abandon("the connection to the controller closed")
            return


def param_env(params):
    """A probe's parameters as the environment its command reads them from: ``{"peer_host": "n2"}`` ->
    ``CLUSTEREVAL_PEER_HOST=n2`` (booleans as 1/0, None as empty, lists comma-joined, mappings as JSON).
    Environment variables, not text spliced into the command: a value can never change the command line."""
    env = {}
    for key, value in (params or {}).items():
        if isinstance(value, bool):
            text = "1" if value else "0"
        elif value is None:
            text = ""
        elif isinstance(value, (list, tuple)):
            text = ",".join(str(v) for v in value)
        elif isinstance(value, dict):
            text = json.dumps(value, sort_keys=True)
        else:
            text = str(value)
        env[PARAM_PREFIX + str(key).upper()] = text
    return env


def _decode(data, limit):
    data = data or b""
    truncated = len(data) > limit
    return data[:limit].decode("utf-8", errors="replace"), truncated


def run_probe(probe, limit, collection=None):
    """Run one probe (``/bin/sh -c cmd``); its record with rc, stdout, stderr, duration and outcome flags.
    A probe of an abandoned collection does not start (``abandoned`` says why)."""
    collection = collection or Collection()
    cmd = probe["cmd"]
    timeout = float(probe.get("timeout") or 30)
    tool = probe.get("tool")
    result = dict(probe)
    result.update(rc=None, stdout="", stderr="", timed_out=False, missing=False, truncated=False)
    if tool and shutil.which(tool) is None and not os.path.isabs(tool):
        result.update(rc=MISSING_RC, missing=True, duration_s=0.0, stderr=f"{tool}: command not found")
        return result
    if not collection.begin(probe):
        result.update(rc=None, duration_s=0.0, abandoned=collection.abandoned,
                      stderr=f"not started: {collection.abandoned}")
        return result
    started = time.monotonic()
    env = None
    if probe.get("params"):
        env = dict(os.environ)
        env.update(param_env(probe["params"]))
    try:
        proc = subprocess.Popen(["/bin/sh", "-c", cmd], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                stdin=subprocess.DEVNULL, start_new_session=True, env=env)
        collection.track(proc)
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, 9)
            except OSError:
                pass
            out, err = proc.communicate()
            result["timed_out"] = True
        finally:
            collection.untrack(proc)
        result["rc"] = proc.returncode
    except OSError as exc:
        out, err = b"", str(exc).encode()
        result["rc"] = MISSING_RC
    result["duration_s"] = round(time.monotonic() - started, 4)
    result["stdout"], trunc_out = _decode(out, limit)
    result["stderr"], trunc_err = _decode(err, limit)
    result["truncated"] = trunc_out or trunc_err
    if result["rc"] == MISSING_RC and not tool:
        result["missing"] = "not found" in result["stderr"]
    return result


def problems(probes):
    """Why a probe list cannot run (empty list: it can)."""
    if not isinstance(probes, list) or not all(isinstance(p, dict) for p in probes):
        return ["probes must be a list of mappings"]
    out = []
    bad = [i for i, p in enumerate(probes) if not p.get("name") or not p.get("cmd")]
    if bad:
        out.append(f"probes {bad} lack a name or a cmd")
    names = [p.get("name") for p in probes]
    if len(set(names)) != len(names):
        out.append(f"probe names must be unique: {names}")
    modes = sorted({str(p.get("runs")) for p in probes if p.get("runs", "parallel") not in RUN_MODES})
    if modes:
        out.append(f"unknown run mode(s) {modes}; known: {', '.join(RUN_MODES)}")
    bad_params = [p.get("name") for p in probes if not isinstance(p.get("params") or {}, dict)]
    if bad_params:
        out.append(f"params of probes {bad_params} must be mappings")
    return out


def collect(probes, parallel=DEFAULT_PARALLEL, max_output_bytes=DEFAULT_MAX_OUTPUT_BYTES, collection=None):
    """Run every probe: the parallel ones ``parallel`` at a time, then each ``exclusive`` one alone; then the
    started probes' clean-ups.

    Returns ``{"probes": {name: record}, "duration_s": seconds}`` (plus ``abandoned``: why, when it was).
    """
    collection = collection or Collection()
    started = time.monotonic()
    limit = int(max_output_bytes)
    shared = [p for p in probes if p.get("runs", "parallel") != "exclusive"]
    alone = [p for p in probes if p.get("runs", "parallel") == "exclusive"]
    with ThreadPoolExecutor(max_workers=max(1, int(parallel))) as pool:
        results = list(pool.map(lambda p: run_probe(p, limit, collection), shared))
    results += [run_probe(p, limit, collection) for p in alone]
    answer = {"probes": {r["name"]: r for r in results}, "duration_s": round(time.monotonic() - started, 4)}
    if collection.abandoned:
        answer["abandoned"] = collection.abandoned
    else:
        collection.clean_up()
    return answer


def main():
    """Script mode: the request ``{"probes": [...], "parallel": n, "max_output_bytes": n}`` on stdin."""
    try:
        request = json.load(sys.stdin)
    except ValueError as exc:
        print(json.dumps({"failed": True, "msg": f"unreadable probe request: {exc}"}))
        return 2
    wrong = problems(request.get("probes"))
    if wrong:
        print(json.dumps({"failed": True, "msg": "; ".join(wrong)}))
        return 2
    collection = Collection()
    stop = threading.Event()

    def on_signal(signum, frame):
        # In a thread of its own: the handler interrupts the main thread, which may hold the collection's lock.
        why = f"the probe runner got {signal.Signals(signum).name}"
        threading.Thread(target=collection.abandon, args=(why,)).start()

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, on_signal)
    threading.Thread(target=watch_controller, args=(collection, stop), daemon=True).start()
    answer = collect(request["probes"], request.get("parallel", DEFAULT_PARALLEL),
                     request.get("max_output_bytes", DEFAULT_MAX_OUTPUT_BYTES), collection)
    stop.set()
    if answer.get("abandoned"):
        collection.stopped.wait(STOP_GRACE_S + CLEANUP_TIMEOUT_S + 5)
        return ABANDONED_RC  # nobody is left to read an answer
    sys.stdout.write(json.dumps(answer))
    return 0


if __name__ == "__main__":
    sys.exit(main())
