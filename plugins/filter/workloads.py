"""Filters the training and inference roles plan their runs with (``clustereval.workload_plan``)."""

from __future__ import annotations

from ansible_collections.clustereval.gpu.plugins.plugin_utils import bundled  # noqa: F401  (before clustereval)

from clustereval import workload_plan

DOCUMENTATION = r"""
---
name: training_instances
short_description: Plan the training and inference roles' runs on one node and across nodes
description:
  - >-
    C(probe | clustereval.gpu.training_instances(runs, scope, hosts, addresses, slurm_names, settings)) turns
    C(clustereval_training_runs) into probe instances C(<probe>@<run>), for scope C(node) the runs on each node
    alone (C(nodes) 1), for scope C(cluster) the runs over every host (C(nodes) all; none for fewer than two hosts).
  - C(runs | clustereval.gpu.training_run_problems) lists what is wrong with the runs (empty when usable).
  - C(hosts | clustereval.gpu.launch_params(addresses, slurm_names)) is how a run over the hosts is launched
    (mpirun's C(-H) list, srun's C(-w) names, the node count, node rank 0's address).
options:
  _input:
    description: A probe definition, the runs or the hosts.
    type: raw
    required: true
author: clustereval developers
"""


class FilterModule:
    def filters(self):
        return {"training_instances": workload_plan.training_instances,
                "training_run_problems": workload_plan.run_problems,
                "launch_params": workload_plan.launch_params}
