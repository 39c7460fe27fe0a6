"""Lookup ``clustereval.gpu.probes``: the node probes of a phase, from the package's probe catalogue."""

from __future__ import annotations

DOCUMENTATION = r"""
---
name: probes
short_description: Node probes (read-only commands) a clustereval phase runs on every node
description:
  - Returns the probe definitions of C(clustereval/checks/probes/*.yml) for the given phases,
    ready to pass to C(clustereval.gpu.collect).
options:
  _terms:
    description: Phase names, e.g. C(audit).
    required: true
  timeout:
    description: Timeout in seconds for probes that do not set their own.
    type: float
  names:
    description: Only these probes (by name).
    type: list
    elements: str
  params:
    description:
      - Values of probe parameters; each probe gets those its catalogue entry lists (C(params)), which its
        command reads as C($CLUSTEREVAL_<NAME>).
    type: dict
author: clustereval developers
"""

EXAMPLES = r"""
- name: Collect every audit probe
  clustereval.gpu.collect:
    probes: "{{ query('clustereval.gpu.probes', 'audit', timeout=60) }}"
"""

RETURN = r"""
_raw:
  description: One dict per probe (name, cmd, tool, parser, artifact, timeout).
  type: list
  elements: dict
"""

from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase
from ansible_collections.clustereval.gpu.plugins.plugin_utils import bundled  # noqa: F401  (before clustereval)

from clustereval.checks import probe_catalogue


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        self.set_options(var_options=variables, direct=kwargs)
        timeout = self.get_option("timeout")
        names = self.get_option("names")
        values = self.get_option("params")
        try:
            found = [probe for phase in terms
                     for probe in probe_catalogue.for_phase(str(phase), timeout, set(names) if names else None)]
            return probe_catalogue.with_params(found, values) if values is not None else found
        except ValueError as exc:
            raise AnsibleLookupError(f"clustereval probe catalogue: {exc}") from exc
