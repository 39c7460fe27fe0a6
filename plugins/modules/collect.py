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

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.clustereval.gpu.plugins.module_utils.probe_runner import (
    DEFAULT_MAX_OUTPUT_BYTES,
    DEFAULT_PARALLEL,
    collect,
    problems,
)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            probes=dict(type="list", elements="dict", required=True),
            max_output_bytes=dict(type="int", default=DEFAULT_MAX_OUTPUT_BYTES),
            parallel=dict(type="int", default=DEFAULT_PARALLEL),
        ),
        supports_check_mode=True,
    )
    wrong = problems(module.params["probes"])
    if wrong:
        module.fail_json(msg="; ".join(wrong))
    module.exit_json(changed=False, **collect(module.params["probes"], module.params["parallel"],
                                              module.params["max_output_bytes"]))


if __name__ == "__main__":
    main()
