"""Run probe commands on a node, several at a time, each with its own timeout (standard library only).

Used two ways, one piece of code: the ``clustereval.gpu.collect`` module imports :func:`collect`, and the
``clustereval.gpu.judge`` action sends this file's source to the node and runs it with the node's Python
(``python3 -c SOURCE``, the request as JSON on stdin, the answer as JSON on stdout). The second way skips
Ansible's module wrapper, whose import of ``ansible.module_utils.basic`` (compiled from source on every
run) cost each node more CPU than all its probes together.
"""

from __future__ import annotations

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
    try:
        proc = subprocess.Popen(["/bin/sh", "-c", cmd], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                stdin=subprocess.DEVNULL, start_new_session=True)
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
    return out


def collect(probes, parallel=DEFAULT_PARALLEL, max_output_bytes=DEFAULT_MAX_OUTPUT_BYTES):
    """Run every probe, ``parallel`` at a time: ``{"probes": {name: record}, "duration_s": seconds}``."""
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=max(1, int(parallel))) as pool:
        results = list(pool.map(lambda p: run_probe(p, int(max_output_bytes)), probes))
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
