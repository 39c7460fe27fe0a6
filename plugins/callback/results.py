"""Callback ``clustereval.gpu.results``: append every check result to ``results.jsonl`` as it happens.

It records, it does not judge: results come from ``clustereval.gpu.judge``; the only results it
makes itself are the facts the harness alone sees (a node unreachable, a task that failed). At the
end of the playbook it asks the scorer and reporters to write ``score.json`` and the reports.
"""

from __future__ import annotations

DOCUMENTATION = r"""
---
name: results
type: aggregate
short_description: Record clustereval check results in the run directory as they happen
description:
  - Appends each check result returned by clustereval tasks to C(results.jsonl), flushed and
    fsynced per task, so an interrupted run keeps everything already measured.
  - Records an unreachable node (C(harness.node.reachable) fail) and a failed task
    (C(harness.task.failed) error) with the message Ansible gave.
  - When the playbook ends, scores the run and writes C(score.json), C(report.md), C(junit.xml)
    and C(report.html). When it is interrupted (Ctrl-C, SIGTERM) it waits briefly for the sessions still
    recording, marks C(run.json) as interrupted and writes the reports of what was measured.
requirements:
  - the clustereval Python package on the controller
  - enable in ansible.cfg with C(callbacks_enabled = clustereval.gpu.results)
author: clustereval developers
"""

import atexit
import json
import os
from typing import Any

from ansible.plugins.callback import CallbackBase
from ansible_collections.clustereval.gpu.plugins.plugin_utils import bundled  # noqa: F401  (before clustereval)

from clustereval import checks, results, rundir, runinfo

TARGET_EXCLUDE = {"localhost"}
# How long an interrupted run waits for its sessions to finish recording before the reports are written.
ACTIVE_SESSIONS_WAIT_S = 20.0


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "clustereval.gpu.results"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self) -> None:
        super().__init__()
        # Load every check and parser once here, in the controller's main process: the judge runs in
        # forked workers, which then inherit them instead of importing them again per host and task.
        from clustereval import parsers

        checks.registered()
        parsers.tools()
        from clustereval import security_table

        try:
            security_table.packaged()
        except security_table.TableError:
            pass  # the versions checks report an unreadable table themselves
        self.run_dir: str | None = None
        self.run_id = "unknown"
        self.pending: list[dict[str, Any]] = []
        self.unreachable: set[str] = set()
        self.recorded = 0
        self.finished = False
        atexit.register(self._on_exit)

    def _record(self, items: list[dict[str, Any]]) -> None:
        if not items:
            return
        if self.run_dir is None:
            self.pending.extend(items)
            return
        # What the harness saw before the run directory was known carries the run's real id now: scoring
        # leaves out a line of another run.
        for item in self.pending:
            if item.get("run_id") in (None, "", "unknown"):
                item["run_id"] = self.run_id
        self.recorded += results.append(self.run_dir, self.pending + items)
        self.pending = []

    def _harness_result(self, check_id: str, host: str, verdict: checks.Verdict) -> dict[str, Any]:
        return checks.make_result(check_id, host, verdict, run_id=self.run_id, artifacts=[],
                                  started=results.now_iso(), duration_s=0.0)

    def _take(self, result_dict: dict[str, Any], host: str) -> None:
        run_dir = result_dict.get("clustereval_run_dir")
        if run_dir and self.run_dir is None:
            self.run_dir = run_dir
            self.run_id = result_dict.get("clustereval_run_id") or results.run_id_of(run_dir) or self.run_id
        if result_dict.get(rundir.RECORDED_KEY):
            return  # the action appended its results itself, as they were produced
        try:
            items = results.from_task_result(result_dict)
        except ValueError as exc:
            items = [self._harness_result("harness.task.failed", host, checks.Verdict(
                "error", f"a task returned unreadable results: {exc}", evidence={"error": str(exc)[:2000]}))]
        self._record(items)

    def v2_runner_on_ok(self, result) -> None:
        self._take(result._result, result._host.get_name())

    def v2_runner_item_on_ok(self, result) -> None:
        self._take(result._result, result._host.get_name())

    def v2_runner_on_unreachable(self, result) -> None:
        host = result._host.get_name()
        if host in self.unreachable:
            return
        self.unreachable.add(host)
        message = str(result._result.get("msg") or "unreachable").strip()
        verdict = checks.Verdict("fail", f"{host} is unreachable during '{result._task.get_name()}': "
                                 f"{message[:300]}", evidence={"task": result._task.get_name(),
                                                               "error": message[:2000]})
        self._record([self._harness_result("harness.node.reachable", host, verdict)])

    def v2_runner_on_failed(self, result, ignore_errors: bool = False) -> None:
        host = result._host.get_name()
        if ignore_errors or host in TARGET_EXCLUDE or result._result.get("clustereval_gate_failed"):
            return  # a failed gate (clustereval.gpu.run_end) is the run's verdict, already in its results
        message = str(result._result.get("msg") or result._result.get("stderr") or "failed").strip()
        verdict = checks.Verdict("error", f"task '{result._task.get_name()}' failed on {host}: "
                                 f"{message[:300]}", evidence={"task": result._task.get_name(),
                                                               "error": message[:2000]})
        self._record([self._harness_result("harness.task.failed", host, verdict)])

    def v2_playbook_on_stats(self, stats) -> None:
        self.finished = True
        if self.run_dir is None:
            return
        self._record([])
        hosts = sorted(stats.processed.keys())
        summary = {host: stats.summarize(host) for host in hosts}
        runinfo.mark_ended(self.run_dir, ansible_stats=summary, unreachable_hosts=sorted(self.unreachable))
        self._render()

    def _on_exit(self) -> None:
        """The playbook ended without its stats (Ctrl-C, SIGTERM, a fatal error): say so and report what was
        measured, once the sessions still writing into the run directory are done (or after a short wait)."""
        if self.finished or self.run_dir is None:
            return
        self.finished = True
        reason = "the playbook ended before its last task (interrupted: Ctrl-C, SIGTERM or a fatal error)"
        waited = runinfo.wait_for_sessions(self.run_dir, ACTIVE_SESSIONS_WAIT_S)
        self._record([self._harness_result("harness.run.interrupted", results.CLUSTER_SUBJECT, checks.Verdict(
            "error", f"{reason}; results and samples recorded until then are kept",
            evidence={"sessions_still_recording": waited}))])
        runinfo.mark_ended(self.run_dir, interrupted=reason, unreachable_hosts=sorted(self.unreachable))
        self._render()

    def _render(self) -> None:
        try:
            from clustereval import report

            report.render_all(self.run_dir)
            with open(os.path.join(self.run_dir, "score.json"), encoding="utf-8") as fh:
                score = json.load(fh)
            self._display.banner("CLUSTEREVAL")
            self._display.display(report.summary_line(score))
            self._display.display(f"Run directory: {self.run_dir}")
        except Exception as exc:  # the results are on disk; `clustereval report DIR` can retry
            self._display.warning(f"clustereval: scoring/reporting failed ({type(exc).__name__}: {exc}); "
                                  f"results are kept in {self.run_dir}/results.jsonl; "
                                  f"retry with `clustereval report {self.run_dir}`")
