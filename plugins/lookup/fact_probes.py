"""Lookup ``clustereval.gpu.fact_probes``: the probes the run's hardware facts come from."""

from __future__ import annotations

DOCUMENTATION = r"""
---
name: fact_probes
short_description: Names of the probes clustereval's hardware facts are derived from
description:
  - Returns C(clustereval.facts.HARDWARE_PROBES), for C(query('clustereval.gpu.probes', 'audit', names=...)).
author: clustereval developers
"""

EXAMPLES = r"""
- name: Collect only the hardware facts
  clustereval.gpu.judge:
    collect: >-
      {{ query('clustereval.gpu.probes', 'audit', names=lookup('clustereval.gpu.fact_probes', wantlist=True)) }}
    checks: []
"""

RETURN = r"""
_raw:
  description: Probe names.
  type: list
  elements: str
"""

from ansible.plugins.lookup import LookupBase
from ansible_collections.clustereval.gpu.plugins.plugin_utils import bundled  # noqa: F401  (before clustereval)

from clustereval import facts


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        return list(facts.HARDWARE_PROBES)
