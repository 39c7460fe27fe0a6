# Documentation only: ``clustereval.gpu.judge`` is an action plugin (plugins/action/judge.py) that runs on
# the controller. ansible-doc and ansible-lint find a module's documentation here, as for ansible.builtin.debug.

from __future__ import annotations

DOCUMENTATION = r"""
---
module: judge
short_description: Collect probes on a node, keep their raw output and judge them into clustereval check results
description:
  - Selects the checks (C(checks) or C(select)) the play's tags ask for; a tag selects a check when it equals
    the check id, is a dotted prefix of it (C(audit.slurm)), or names its phase. C(--skip-tags) works the same
    way. Acting checks need their opt-in (see C(options)); a check that may not act is recorded as skipped.
  - With C(collect), runs on the node only the probes the selected checks name (plus the facts probes every
    run collects), in one exchange; a deselected check's probe never starts.
  - Writes every probe's raw output to C(<run dir>/raw/<subject>/<artifact>) (plus a C(.meta.json) with the
    command, exit status, stderr, duration and params), writes the node's hardware facts to
    C(<run dir>/facts/<host>.json), evaluates each selected check with C(clustereval.checks) and appends the
    results to C(results.jsonl) at once (they are also returned, marked as recorded).
options:
  checks:
    description: Check ids this task may evaluate (all must be in the check catalogue).
    type: list
    elements: str
  select:
    description:
      - Instead of C(checks), every catalogue check of C(phase) and C(scope) (node or cluster).
      - Node checks marked C(judged_with_fleet) in the catalogue (they compare the node with its siblings) are
        judged only by a task whose C(select) has C(with_fleet=true) and C(siblings); the others' probes are
        still collected with the rest.
    type: dict
  siblings:
    description:
      - For node checks judged with the fleet, the hosts whose C(clustereval_facts) (from the task that
        collected and judged every node) the node is compared with. The probes the checks read are the ones
        kept earlier in this run for the node, read back from the run directory; nothing runs on the node.
    type: list
    elements: str
  probes:
    description: The C(probes) returned by C(clustereval.gpu.collect) for this host.
    type: dict
  collect:
    description:
      - Probe definitions to run on the host first, in the same task (one worker and one SSH exchange
        per host), with the probe runner the C(clustereval.gpu.collect) module uses, run with the node's
        Python directly (no module wrapper to unpack and compile); the task's C(environment) applies.
        Only the probes the selected checks name run. An unreachable host is reported as unreachable,
        like any module task.
    type: list
    elements: dict
  collect_for:
    description:
      - Instead of C(checks), check ids whose probes this task collects and keeps, judging nothing here; the
        checks are judged later, once per cluster, from what every node kept (C(load_probes)). The checks'
        selection by tags still decides whether the probes run.
    type: list
    elements: str
  params:
    description:
      - Values of probe parameters. Each probe receives those it declares (C(params) in the probe catalogue,
        C(accepts) in a probe definition) as C($CLUSTEREVAL_<NAME>) in its environment, never spliced into
        its command.
    type: dict
  variant:
    description: The params every result of this task carries (what tells the variants of a check apart).
    type: dict
  fleet_hosts:
    description: For cluster-wide checks, the hosts whose C(clustereval_facts) are compared.
    type: list
    elements: str
  load_probes:
    description:
      - For cluster-wide checks, names (globs) of probes kept earlier in this run on the C(fleet_hosts),
        read back from the run directory for the checks (a mesh judged once every pair is measured).
    type: list
    elements: str
  options:
    description:
      - Check settings (expected GPU count, baseline overrides, harness, scratch dir). C(allow_actions)
        false skips restoring acting checks; C(allow_destructive) true and C(destructive_targets) enable
        destructive ones.
    type: dict
author: clustereval developers
"""

EXAMPLES = r"""
- name: Collect the audit probes on each node and judge them
  clustereval.gpu.judge:
    collect: "{{ query('clustereval.gpu.probes', 'audit') }}"
    select:
      phase: audit
      scope: node
"""

RETURN = r"""
clustereval_results_json:
  description: The check results the task produced, one JSON string (also appended to the run's results.jsonl).
  returned: always
  type: str
"""
