# Documentation only: ``clustereval.gpu.session`` is an action plugin (plugins/action/session.py) that runs on
# the controller. ansible-doc and ansible-lint find a module's documentation here, as for ansible.builtin.debug.

from __future__ import annotations

DOCUMENTATION = r"""
---
module: session
short_description: Run, poll and stop a clustereval session on a node, recording samples and results as they come
description:
  - C(state=run) starts the session's streams, polls them every C(poll_interval_s), appends what each poll
    returns to the run directory (C(raw/<host>/<name>/<stream>.out) and C(series/<host>/<name>-<stream>.csv)),
    records results of the checks judged live, stops the streams after C(duration_s) and judges C(checks).
  - C(state=started) starts the streams and returns (a server other tasks use); C(state=stopped) stops them,
    keeps their output and judges C(checks).
  - Nothing starts when none of C(checks) is selected by the play's tags (select before running).
  - A journal entry is written before the streams start and closed when they are stopped;
    C(clustereval undo RUN) stops a session an interrupted run left. The node's supervisor also stops the
    streams by itself when no poll comes for C(orphan_after_s).
  - SIGINT or SIGTERM (C(ansible-playbook) passes Ctrl-C and SIGTERM on to its workers) or the loss of the
    controller process ends the session early; every sample taken until then is kept, the streams are stopped,
    the journal entry closed, and the results say the session was interrupted.
options:
  name:
    description: Session name (unique per host and run).
    type: str
    required: true
  state:
    description: C(run), C(started) or C(stopped).
    type: str
    default: run
  streams:
    description:
      - Commands the session runs, each C(name), C(cmd) and optionally C(parser), C(header_lines) (lines put in
        front of every chunk before parsing, e.g. a CSV header), C(kind), C(x), C(accepts) (parameters it reads
        as C($CLUSTEREVAL_<NAME>)).
    type: list
    elements: dict
  params:
    description: Parameter values for the streams (each gets those it accepts).
    type: dict
  duration_s:
    description: How long the streams run (0 = until stopped).
    type: float
    default: 60
  poll_interval_s:
    description: Seconds between polls.
    type: float
    default: 5
  orphan_after_s:
    description: The node stops the streams when no poll came for this long (default max(60, 6 polls)).
    type: float
  base_dir:
    description: Where sessions live on the node.
    type: str
    default: /var/tmp/clustereval/sessions
  checks:
    description: Check ids judged over the session (those with C(judged=live) in the catalogue also at every poll).
    type: list
    elements: str
  options:
    description: Check settings.
    type: dict
  variant:
    description: The params every result of this task carries.
    type: dict
author: clustereval developers
"""

EXAMPLES = r"""
- name: Sample the GPUs while the burn-in runs
  clustereval.gpu.session:
    name: telemetry
    checks: [burnin.telemetry.thermal]
    duration_s: 600
    poll_interval_s: 5
    streams:
      - name: gpu
        command: nvidia-smi --query-gpu=index,temperature.gpu,power.draw --format=csv,noheader -lms 5000
"""

RETURN = r"""
clustereval_results_json:
  description: The check results the task produced, one JSON string (also appended to the run's results.jsonl).
  returned: always
  type: str
"""
