# Documentation only: ``clustereval.gpu.undo`` is an action plugin (plugins/action/undo.py) that runs on
# the controller. ansible-doc and ansible-lint find a module's documentation here, as for ansible.builtin.debug.

from __future__ import annotations

DOCUMENTATION = r"""
---
module: undo
short_description: Revert the changes an earlier clustereval run left applied on a host
description:
  - Reads C(journal.jsonl) of C(run_dir), takes the C(applied) entries of this host that no C(restored)
    entry closes, and undoes each by its recipe (stop and remove a session, run a recorded command).
    Each success is journaled as C(restored) by C(undo); a failure is reported and left pending.
  - Used by C(playbooks/undo.yml), which C(clustereval undo RUN) runs.
options:
  run_dir:
    description: The run directory whose journal is read.
    type: str
    required: true
author: clustereval developers
"""

EXAMPLES = r"""
- name: Undo what an interrupted run left behind
  clustereval.gpu.undo:
    run_dir: runs/20261201T120000Z-audit
"""

RETURN = r"""
undone:
  description: The journal entries reverted on this host (id, what, outcome).
  returned: always
  type: list
  elements: dict
not_undone:
  description: The entries that could not be reverted, with the reason; the task fails when any are left.
  returned: always
  type: list
  elements: dict
"""
