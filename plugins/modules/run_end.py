# Documentation only: ``clustereval.gpu.run_end`` is an action plugin (plugins/action/run_end.py) that runs on
# the controller. ansible-doc and ansible-lint find a module's documentation here, as for ansible.builtin.debug.

from __future__ import annotations

DOCUMENTATION = r"""
---
module: run_end
short_description: Finish a clustereval run (score it, write the reports) when the results callback is not enabled
description:
  - Used by the C(run) role's handler and the last play of C(clustereval.gpu.evaluate), so roles included from any
    playbook produce score.json, report.md, junit.xml, report.html and metrics.prom without a callback setting.
  - Records each host of C(targets) missing from C(remaining) as C(harness.task.failed) (an error of the harness,
    never a cluster failure), marks C(run.json) ended, scores the run and writes the reports.
  - With the C(clustereval.gpu.results) callback enabled it does none of that (the callback records each failed
    task and unreachable node exactly and reports when the playbook ends).
  - Always returns the run directory (and the tier when it scored) as custom stats, which AWX/AAP shows as the
    job's artifacts.
options:
  targets:
    description: The hosts the run started with (C(ansible_play_hosts_all)).
    type: list
    elements: str
  remaining:
    description: The hosts still in the play (C(ansible_play_hosts)).
    type: list
    elements: str
  fail_on:
    description:
      - Gate the run (for CI and bring-up pipelines) - the task fails, so C(ansible-playbook) exits non-zero, when a
        result failed (C(fail)), warned or failed (C(warn)); C(never) gates on C(min_tier) only.
      - With a gate the task scores the run itself also when the results callback is enabled.
    type: str
    choices: [fail, warn, never]
  min_tier:
    description: Fail the task when the run's tier is below this tier of the rubric.
    type: str
author: clustereval developers
"""

EXAMPLES = r"""
- name: Finish the clustereval run
  clustereval.gpu.run_end:
    targets: "{{ ansible_play_hosts_all }}"
    remaining: "{{ ansible_play_hosts }}"
  run_once: true
  delegate_to: localhost
"""

RETURN = r"""
clustereval_run_dir:
  description: The run directory.
  returned: success
  type: str
clustereval_tier:
  description: The tier the run scored (only when this task scored it).
  returned: when the results callback is not enabled
  type: str
"""
