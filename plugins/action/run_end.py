"""Action ``clustereval.gpu.run_end``: finish a run when the results callback is not enabled.

A role included from someone else's playbook runs without this collection's ansible.cfg, so the
``clustereval.gpu.results`` callback (which records dropped nodes and writes the reports when the
playbook ends) is not loaded. Every result is already in ``results.jsonl`` (the actions append their
own); this records the nodes that left the play, marks ``run.json`` ended and writes score.json and
the reports. With the callback enabled it leaves all that to the callback. Either way it hands the run
directory (and the tier, when it scored) to ``set_stats``-style custom stats, which AWX/AAP shows as the
job's artifacts.
"""

from __future__ import annotations

import json
import os

from ansible import constants as C
from ansible.plugins.action import ActionBase
from ansible_collections.clustereval.gpu.plugins.plugin_utils import bundled  # noqa: F401  (before clustereval)

from clustereval import checks, results, rundir, runinfo

CALLBACK = "clustereval.gpu.results"
# Marks a failed gate (a verdict on the cluster): the results callback does not record it as a harness error.
GATE_KEY = "clustereval_gate_failed"


def callback_enabled() -> bool:
    return CALLBACK in (C.CALLBACKS_ENABLED or [])


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        args = self._task.args
        try:
            run_dir, run_id = rundir.locate(task_vars)
        except rundir.RunDirMissing as exc:
            return {**result, "skipped": True, "msg": f"no clustereval run to finish ({exc})"}
        stats = {"clustereval_run_dir": run_dir, "clustereval_run_id": run_id}
        fail_on, min_tier = args.get("fail_on"), args.get("min_tier") or None
        with_callback = callback_enabled()
        if with_callback and not (fail_on or min_tier):
            result.update(changed=False, msg=f"the {CALLBACK} callback finishes {run_dir} when the playbook ends",
                          ansible_stats={"data": stats, "per_host": False, "aggregate": True})
            return result
        if not with_callback:  # the callback records each failed task and unreachable node exactly
            runinfo.mark_ended(run_dir, hosts_left_play=self._record_dropped(run_dir, run_id, args))
        from clustereval import report

        report.render_all(run_dir)
        with open(os.path.join(run_dir, "score.json"), encoding="utf-8") as fh:
            score = json.load(fh)
        summary = report.summary_line(score)
        stats.update(clustereval_tier=score.get("tier"), clustereval_score=score.get("score"),
                     clustereval_summary=summary)
        result.update(changed=True, msg=f"{summary}; run directory: {run_dir}", clustereval_tier=score.get("tier"),
                      clustereval_run_dir=run_dir, ansible_stats={"data": stats, "per_host": False, "aggregate": True})
        if fail_on or min_tier:
            try:
                reason = report.gate(score, str(fail_on or "never"), min_tier)
            except ValueError as exc:
                return {**result, "failed": True, "msg": str(exc)}
            if reason:
                # A verdict on the cluster, not a harness fault: the results callback leaves it out of the results.
                result.update(failed=True, msg=f"the gate failed: {reason}; {summary}; run directory: {run_dir}",
                              **{GATE_KEY: True})
        return result

    @staticmethod
    def _record_dropped(run_dir: str, run_id: str, args: dict) -> list[str]:
        """Record the hosts of ``targets`` no longer in ``remaining`` as harness errors; returns them."""
        expected = [str(h) for h in args.get("targets") or []]
        remaining = {str(h) for h in args.get("remaining") or []}
        dropped = sorted(h for h in expected if h not in remaining and h != "localhost")
        if not dropped:
            return dropped
        rundir.record(run_dir, [checks.make_result(
            "harness.task.failed", host, checks.Verdict(
                "error", f"{host} left the play before its end (a task failed or the node became "
                f"unreachable); enable the {CALLBACK} callback to record the task and its message",
                evidence={"left_play": True}),
            run_id=run_id, artifacts=[], started=results.now_iso(), duration_s=0.0) for host in dropped])
        return dropped
