# Documentation only: ``clustereval.gpu.run_start`` is an action plugin (plugins/action/run_start.py) that runs on
# the controller. ansible-doc and ansible-lint find a module's documentation here, as for ansible.builtin.debug.

from __future__ import annotations

DOCUMENTATION = r"""
---
module: run_start
short_description: Create the evaluation's run directory and record what is being run
description:
  - Creates the run directory (C(out), default C(runs/<timestamp>) beside the playbooks) with its
    C(raw/) folder and writes C(run.json) (run id, inventory summary, versions, phases and options).
  - Sets the facts C(clustereval_run_dir) and C(clustereval_run_id) used by every later task.
  - Warns (and records C(harness.journal.leftovers)) when other runs in the same runs folder left changes
    their journal says were never undone.
options:
  out:
    description: Run directory; empty means C(runs/<UTC timestamp>) in the checkout.
    type: str
  phases:
    description: Phases this run covers.
    type: list
    elements: str
  targets:
    description: Hosts being evaluated.
    type: list
    elements: str
  resume:
    description:
      - Continue the run already in C(out) (C(clustereval resume)) instead of starting one; its run id, plan and
        options stay, and C(run.json) gains an entry in C(resumes). C(only) maps each host to the checks still to
        run on it.
    type: dict
author: clustereval developers
"""

EXAMPLES = r"""
- name: Open the run directory once for the play
  clustereval.gpu.run_start:
    out: /var/lib/clustereval/runs
    phases: [audit]
    targets: "{{ ansible_play_hosts_all }}"
  run_once: true
  delegate_to: localhost
"""

RETURN = r"""
clustereval_run_dir:
  description: The run directory opened (also set as a fact of the same name).
  returned: always
  type: str
clustereval_run_id:
  description: The run's id (the run directory's name).
  returned: always
  type: str
"""
