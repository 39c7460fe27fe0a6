"""Filters the network role plans its collective and RDMA runs with (``clustereval.collective_plan``)."""

from __future__ import annotations

from ansible_collections.clustereval.gpu.plugins.plugin_utils import bundled  # noqa: F401  (before clustereval)

from clustereval import collective_plan
from clustereval.checks import isolation

DOCUMENTATION = r"""
---
name: nccl_runs
short_description: Plan the network role's nccl-tests, pairwise isolation and perftest runs
description:
  - C(hosts | clustereval.gpu.nccl_runs(collectives, scaling, nvlink_off, launchers)) lists the nccl-tests runs
    (every collective over node sets doubling to the whole allocation, one NVLink-off run, one per extra launcher).
  - C(probe | clustereval.gpu.nccl_instances(runs, addresses, slurm_names, settings)) turns them into probe
    instances C(nccl@<collective>.<label>) with their parameters.
  - C(hosts | clustereval.gpu.isolation_pairs) is round one of the pairwise isolation; C(run_dir |
    clustereval.gpu.isolation_second_round(hosts, options)) the pairs that resolve its failing pairs.
  - C(probe | clustereval.gpu.nccl_pair_steps(pairs, collective, round, addresses, slurm_names, settings))
    lists steps of disjoint pair runs, each mapping a launching host to its run.
  - C(hosts | clustereval.gpu.rail_steps) lists ring steps, each mapping a client to its server; C(rails |
    clustereval.gpu.perftest_plan(tools, memories)) and C(probe | clustereval.gpu.perftest_instances(client,
    server, plan, addresses, settings)) the perftest runs of one pair; C(nics | clustereval.gpu.active_rails)
    the active RDMA devices of a node's facts; C(probe | clustereval.gpu.torchdist_instances(collectives, nodes,
    addresses, settings)) one torch.distributed run per collective.
options:
  _input:
    description: Hosts, a probe definition, rails, NIC facts or the run directory.
    type: raw
    required: true
author: clustereval developers
"""


def isolation_pairs(hosts):
    return [list(pair) for pair in isolation.plan_pairs(list(hosts))]


class FilterModule:
    def filters(self):
        return {"nccl_runs": collective_plan.nccl_runs, "nccl_instances": collective_plan.nccl_instances,
                "isolation_pairs": isolation_pairs, "isolation_second_round": collective_plan.second_round,
                "nccl_pair_steps": collective_plan.pair_steps, "rail_steps": collective_plan.rail_steps,
                "perftest_plan": collective_plan.perftest_plan,
                "perftest_instances": collective_plan.perftest_instances,
                "active_rails": collective_plan.active_rails,
                "torchdist_instances": collective_plan.torchdist_instances}
