#!/usr/bin/python
"""Node-side collector: run many read-only probes in one round trip, each with its own timeout."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: collect
short_description: Run read-only probe commands on a node in one pass and return their raw output
description:
  - Runs every probe (a shell command line) concurrently, each with its own timeout, and returns
    rc, stdout, stderr and duration per probe, so a whole audit costs one SSH exchange per node.
  - A probe whose program is not installed is reported with C(missing=true) (exit status 127),
    one that runs past its timeout with C(timed_out=true). The module itself never fails because
    a probe failed; judging the output is the controller's job.
  - Output is decoded as UTF-8 with replacement characters and capped at O(max_output_bytes).
version_added: 0.1.0
author: clustereval developers
options:
  probes:
    description:
      - List of probes. Each has C(name), C(cmd) (run with /bin/sh -c), optional C(timeout)
        (seconds), C(tool) (the program whose absence means "not installed"), and any other keys
        (passed through untouched, e.g. C(parser), C(artifact)).
    type: list
    elements: dict
    required: true
  max_output_bytes:
    description: Bytes of stdout/stderr kept per probe; the rest is dropped and C(truncated) set.
    type: int
    default: 8388608
  parallel:
    description: How many probes run at the same time.
    type: int
    default: 8
"""

EXAMPLES = r"""
- name: Collect audit facts in one round trip
  clustereval.gpu.collect:
    probes:
      - {name: uname_r, cmd: uname -r, timeout: 5}
      - {name: nvidia_smi_q_x, cmd: nvidia-smi -q -x, tool: nvidia-smi, timeout: 60, parser: nvidia-smi-q-x}
"""

RETURN = r"""
probes:
  description: Per probe name, C(cmd), C(rc), C(stdout), C(stderr), C(duration_s), C(timed_out),
    C(missing), C(truncated) plus the keys given in the probe definition.
  returned: always
  type: dict
duration_s:
  description: Wall time of the whole collection.
  returned: always
  type: float
"""

import os
import shutil
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor

from ansible.module_utils.basic import AnsibleModule

MISSING_RC = 127


def _decode(data, limit):
    data = data or b""
    truncated = len(data) > limit
    return data[:limit].decode("utf-8", errors="replace"), truncated


def run_probe(probe, limit):
    cmd = probe["cmd"]
    timeout = float(probe.get("timeout") or 30)
    tool = probe.get("tool")
    result = dict(probe)
    result.update(rc=None, stdout="", stderr="", timed_out=False, missing=False, truncated=False)
    if tool and shutil.which(tool) is None and not os.path.isabs(tool):
        result.update(rc=MISSING_RC, missing=True, duration_s=0.0,
                      stderr=f"{tool}: command not found")
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


def main():
    module = AnsibleModule(
        argument_spec=dict(
            probes=dict(type="list", elements="dict", required=True),
            max_output_bytes=dict(type="int", default=8 * 1024 * 1024),
            parallel=dict(type="int", default=8),
        ),
        supports_check_mode=True,
    )
    probes = module.params["probes"]
    names = [p.get("name") for p in probes]
    bad = [i for i, p in enumerate(probes) if not p.get("name") or not p.get("cmd")]
    if bad:
        module.fail_json(msg=f"probes {bad} lack a name or a cmd")
    if len(set(names)) != len(names):
        module.fail_json(msg=f"probe names must be unique: {names}")
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=max(1, module.params["parallel"])) as pool:
        results = list(pool.map(lambda p: run_probe(p, module.params["max_output_bytes"]), probes))
    module.exit_json(changed=False, probes={r["name"]: r for r in results},
                     duration_s=round(time.monotonic() - started, 4))


if __name__ == "__main__":
    main()
