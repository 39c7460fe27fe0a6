"""Run probe commands on a node, several at a time, each with its own timeout (standard library only).

Used two ways, one piece of code: the ``clustereval.gpu.collect`` module imports :func:`collect`, and the
``clustereval.gpu.judge`` action sends this file's source to the node and runs it with the node's Python
(``python3 -c SOURCE``, the request as JSON on stdin, the answer as JSON on stdout). The second way skips
Ansible's module wrapper, whose import of ``ansible.module_utils.basic`` (compiled from source on every
run) cost each node more CPU than all its probes together. Python 3.6+ (the nodes' own Python, e.g. RHEL 8's).
"""

import json
import os
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

MISSING_RC = 127
DEFAULT_PARALLEL = 8
DEFAULT_MAX_OUTPUT_BYTES = 8 * 1024 * 1024
# How a probe may run: beside the others, alone on the node (benchmarks that share GPUs or disks, run one at
# a time after the parallel ones), or once per cluster (the role runs it on one host; here it is parallel).
RUN_MODES = ("parallel", "exclusive", "cluster")
PARAM_PREFIX = "CLUSTEREVAL_"


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


def run_probe(probe, limit):
    """Run one probe (``/bin/sh -c cmd``); its record with rc, stdout, stderr, duration and outcome flags."""
    cmd = probe["cmd"]
    timeout = float(probe.get("timeout") or 30)
    tool = probe.get("tool")
    result = dict(probe)
    result.update(rc=None, stdout="", stderr="", timed_out=False, missing=False, truncated=False)
    if tool and shutil.which(tool) is None and not os.path.isabs(tool):
        result.update(rc=MISSING_RC, missing=True, duration_s=0.0, stderr=f"{tool}: command not found")
        return result
    started = time.monotonic()
    env = None
    if probe.get("params"):
        env = dict(os.environ)
        env.update(param_env(probe["params"]))
    try:
        proc = subprocess.Popen(["/bin/sh", "-c", cmd], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                stdin=subprocess.DEVNULL, start_new_session=True, env=env)
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, 9)
            except OSError:
                pass
            out, err = proc.communicate()
            result["timed_out"] = True
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


def collect(probes, parallel=DEFAULT_PARALLEL, max_output_bytes=DEFAULT_MAX_OUTPUT_BYTES):
    """Run every probe: the parallel ones ``parallel`` at a time, then each ``exclusive`` one alone.

    Returns ``{"probes": {name: record}, "duration_s": seconds}``.
    """
    started = time.monotonic()
    limit = int(max_output_bytes)
    shared = [p for p in probes if p.get("runs", "parallel") != "exclusive"]
    alone = [p for p in probes if p.get("runs", "parallel") == "exclusive"]
    with ThreadPoolExecutor(max_workers=max(1, int(parallel))) as pool:
        results = list(pool.map(lambda p: run_probe(p, limit), shared))
    results += [run_probe(p, limit) for p in alone]
    return {"probes": {r["name"]: r for r in results}, "duration_s": round(time.monotonic() - started, 4)}


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
    answer = collect(request["probes"], request.get("parallel", DEFAULT_PARALLEL),
                     request.get("max_output_bytes", DEFAULT_MAX_OUTPUT_BYTES))
    sys.stdout.write(json.dumps(answer))
    return 0


if __name__ == "__main__":
    sys.exit(main())
