"""Filters ``clustereval.gpu.parse`` and one per tool (``clustereval.gpu.nccl_tests`` ...).

Thin wrappers around ``clustereval.parsers``: text in, dict out. A parse failure raises an Ansible
filter error carrying the parser's message.
"""

from __future__ import annotations

from functools import partial

from ansible.errors import AnsibleFilterError
from ansible_collections.clustereval.gpu.plugins.plugin_utils import bundled  # noqa: F401  (before clustereval)

from clustereval import parsers

DOCUMENTATION = r"""
---
name: parse
short_description: Parse a GPU-cluster tool's output into structured data
description:
  - C(text | clustereval.gpu.parse('nccl-tests')) or the per-tool filters such as
    C(text | clustereval.gpu.nccl_tests), C(text | clustereval.gpu.nvidia_smi_q_x).
  - The tool names are the corpus names listed by C(clustereval parsers).
options:
  _input:
    description: The tool's raw output.
    type: str
    required: true
  tool:
    description: Tool name, e.g. C(fio), C(nvidia-smi-q-x), C(slurm).
    type: str
    required: true
author: clustereval developers
"""


def parse(text, tool):
    try:
        return parsers.parse(tool, text)
    except parsers.ParseError as exc:
        raise AnsibleFilterError(f"clustereval.gpu.parse('{tool}'): {exc}") from None


class FilterModule:
    def filters(self):
        table = {"parse": parse}
        for tool in parsers.tools():
            table[tool.replace("-", "_")] = partial(parse, tool=tool)
        return table
