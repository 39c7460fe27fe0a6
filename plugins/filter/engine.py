"""Filters the roles use to plan their work: which checks the run selects, the pairs of a mesh and the
schedule that measures them, and per-peer instances of a catalogue probe."""

from __future__ import annotations

from typing import Any

from ansible.errors import AnsibleFilterError
from ansible_collections.clustereval.gpu.plugins.plugin_utils import bundled  # noqa: F401  (before clustereval)

from clustereval import checks
from clustereval.checks import catalogue

DOCUMENTATION = r"""
---
name: selected_checks
short_description: The clustereval checks the play's tags select (select before running)
description:
  - C(ids | clustereval.gpu.selected_checks(ansible_run_tags, ansible_skip_tags)) keeps the check ids the tags
    select, so a role never starts a test none of whose checks was selected.
  - C(hosts | clustereval.gpu.mesh_schedule(mode)) lists the steps that measure every ordered pair of
    C(hosts) once, each a mapping source -> destination; C(matching) puts every node in at most one pair per
    step (a round-robin tournament, 2(N-1) steps for N even), C(serial) one pair per step.
  - C(probe | clustereval.gpu.probe_instances(peers, addresses)) is one instance of a catalogue probe per
    peer, named C(<probe>@<peer>), its C(destination) parameter the peer's address.
  - C(hosts | clustereval.gpu.mesh_addresses(hostvars, var)) maps each host to the address its peers use.
options:
  _input:
    description: Check ids, hosts or a probe definition.
    type: raw
    required: true
author: clustereval developers
"""


def selected_checks(check_ids: list[str], run_tags: list[str] | None = None,
                    skip_tags: list[str] | None = None) -> list[str]:
    unknown = [c for c in check_ids if c not in catalogue.load()]
    if unknown:
        raise AnsibleFilterError(f"checks not in the catalogue: {', '.join(unknown)}")
    return checks.selection(list(check_ids), list(run_tags or ["all"]), list(skip_tags or []))


def mesh_schedule(hosts: list[str], mode: str = "matching") -> list[dict[str, str]]:
    """Steps covering every ordered pair once; in ``matching`` mode a node is in at most one pair per step."""
    hosts = list(dict.fromkeys(hosts))
    if mode == "serial":
        return [{a: b} for a in hosts for b in hosts if a != b]
    if mode != "matching":
        raise AnsibleFilterError(f"mesh_schedule: mode must be 'matching' or 'serial', not {mode!r}")
    ring = hosts + ([None] if len(hosts) % 2 else [])
    steps = []
    for _ in range(len(ring) - 1):
        pairs = [(ring[i], ring[len(ring) - 1 - i]) for i in range(len(ring) // 2)]
        pairs = [(a, b) for a, b in pairs if a is not None and b is not None]
        steps.append({a: b for a, b in pairs})
        steps.append({b: a for a, b in pairs})
        ring = [ring[0], ring[-1], *ring[1:-1]]  # the circle method: rotate all but the first
    return [step for step in steps if step]


def probe_instances(probe: dict[str, Any], peers: list[str], addresses: dict[str, str] | None = None,
                    timeout: float | None = None) -> list[dict[str, Any]]:
    """One instance of ``probe`` per peer: ``<probe>@<peer>``, artifact ``<name>-to-<peer>.<ext>``, the peer's
    address as its ``destination`` parameter (instance params win over the task's)."""
    name = probe["name"]
    artifact = str(probe.get("artifact") or f"{name.replace('_', '-')}.txt")
    stem, dot, ext = artifact.rpartition(".")
    out = []
    for peer in peers:
        instance = {**probe, "name": f"{name}@{peer}", "probe": name,
                    "artifact": f"{stem}-to-{peer}.{ext}" if dot else f"{artifact}-to-{peer}",
                    "params": {**(probe.get("params") or {}), "destination": (addresses or {}).get(peer, peer)}}
        if timeout is not None:
            instance["timeout"] = float(timeout)
        out.append(instance)
    return out


def mesh_addresses(hosts: list[str], hostvars: Any, variable: str = "clustereval_network_mesh_address") -> dict:
    out = {}
    for host in hosts:
        known = hostvars[host]
        out[host] = str(known.get(variable) or known.get("ansible_host") or host)
    return out


class FilterModule:
    def filters(self):
        return {"selected_checks": selected_checks, "mesh_schedule": mesh_schedule,
                "probe_instances": probe_instances, "mesh_addresses": mesh_addresses}
