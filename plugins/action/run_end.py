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


def callback_enabled() -> bool:
    return CALLBACK in (C.CALLBACKS_ENABLED or [])


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        try:
            run_dir, run_id = rundir.locate(task_vars)
        except rundir.RunDirMissing as exc:
            return {**result, "skipped": True, "msg": f"no clustereval run to finish ({exc})"}
        stats = {"clustereval_run_dir": run_dir, "clustereval_run_id": run_id}
        if callback_enabled():
            result.update(changed=False, msg=f"the {CALLBACK} callback finishes {run_dir} when the playbook ends",
                          ansible_stats={"data": stats, "per_host": False, "aggregate": True})
            return result
        expected = [str(h) for h in self._task.args.get("targets") or []]
        remaining = {str(h) for h in self._task.args.get("remaining") or []}
        dropped = sorted(h for h in expected if h not in remaining and h != "localhost")
        if dropped:
            rundir.record(run_dir, [checks.make_result(
                "harness.task.failed", host, checks.Verdict(
                    "error", f"{host} left the play before its end (a task failed or the node became "
                    f"unreachable); enable the {CALLBACK} callback to record the task and its message",
                    evidence={"left_play": True}),
                run_id=run_id, artifacts=[], started=results.now_iso(), duration_s=0.0) for host in dropped])
        runinfo.mark_ended(run_dir, hosts_left_play=dropped)
        from clustereval import report

        report.render_all(run_dir)
        with open(os.path.join(run_dir, "score.json"), encoding="utf-8") as fh:
            score = json.load(fh)
        stats.update(clustereval_tier=score.get("tier"), clustereval_score=score.get("score"),
                     clustereval_summary=report.summary_line(score))
        result.update(changed=True, msg=f"{report.summary_line(score)}; run directory: {run_dir}",
                      clustereval_tier=score.get("tier"), clustereval_run_dir=run_dir,
                      ansible_stats={"data": stats, "per_host": False, "aggregate": True})
        return result
