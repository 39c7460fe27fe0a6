"""Action ``clustereval.gpu.session``: long work on a node that records as it goes.

Starts detached streams on the node (``module_utils/session_runner.py``), polls them, keeps every chunk as
it arrives (raw output and series, ``clustereval.sessions.Recorder``), records results of live checks the
moment they are known, stops the streams and judges the session's checks. The change is journaled
(``clustereval.journal``) before the streams start and closed once they are stopped.
"""

from __future__ import annotations

import os
import time
from typing import Any

from ansible.errors import AnsibleActionFail, AnsibleConnectionFailure
from ansible.plugins.action import ActionBase
from ansible_collections.clustereval.gpu.plugins.module_utils import session_runner
from ansible_collections.clustereval.gpu.plugins.plugin_utils import bundled  # noqa: F401  (before clustereval)

from clustereval import checks, interrupts, journal, remote, rundir, runinfo, sessions
from clustereval import facts as facts_mod
from clustereval.checks import catalogue, probe_catalogue
from clustereval.results import TASK_RESULT_KEY, now_iso, to_task_result

with open(session_runner.__file__, encoding="utf-8") as _source:
    RUNNER_SOURCE = _source.read()

STATES = ("run", "started", "stopped")
# Beyond its duration, how long the controller waits for the node to end the session by itself.
END_GRACE_S = 30.0
# How long a started server gets before the first look says whether it is still running.
SETTLE_S = 0.5


class ActionModule(ActionBase):
    TRANSFERS_FILES = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        self._vars = task_vars or {}
        args = dict(self._task.args)
        state = args.get("state", "run")
        if state not in STATES:
            raise AnsibleActionFail(f"state must be one of {', '.join(STATES)}, not {state!r}")
        try:
            self._run_dir, self._run_id = rundir.locate(self._vars)
        except rundir.RunDirMissing as exc:
            raise AnsibleActionFail(str(exc)) from None
        self._host = self._vars["inventory_hostname"]
        self._name = str(args.get("name") or "")
        if not self._name:
            raise AnsibleActionFail("a session needs a name")
        # The host is part of the name: the base directory may be shared between nodes (a shared /var/tmp).
        self._request = {"base": args.get("base_dir") or session_runner.DEFAULT_BASE, "run_id": self._run_id,
                         "name": f"{rundir.safe(self._host)}.{rundir.safe(self._name)}"}
        wanted = list(args.get("checks") or [])
        unknown = [c for c in wanted if c not in catalogue.load()]
        if unknown:
            raise AnsibleActionFail(f"checks not in the catalogue: {', '.join(unknown)}")
        self._checks = checks.selection(wanted, list(self._vars.get("ansible_run_tags") or ["all"]),
                                        list(self._vars.get("ansible_skip_tags") or []))
        if wanted and not self._checks and state != "stopped":
            result.update(changed=False, skipped=True, msg=f"no check of session {self._name} is selected: not started")
            return result
        specs = probe_catalogue.with_params(list(args.get("streams") or []), args.get("params"))
        self._streams = [sessions.Stream.from_spec(spec) for spec in specs]
        self._options = dict(args.get("options") or {})
        self._variant = dict(args.get("variant") or {})
        if state == "started":
            return self._start_only(result, args)
        if state == "stopped":
            return self._stop_and_judge(result)
        return self._run_session(result, args)

    # ------------------------------------------------------------------ node exchanges
    def _remote(self, op: str, **extra: Any) -> dict[str, Any]:
        try:
            return remote.run_script(self, self._vars, RUNNER_SOURCE, {**self._request, "op": op, **extra})
        except remote.RemoteFailed as exc:
            return {"failed": True, "msg": f"the session runner failed on the node ({exc})"}

    def _start(self, args: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        poll = float(args.get("poll_interval_s") or 5)
        orphan = float(args.get("orphan_after_s") or max(60.0, 6 * poll))
        entry = journal.applied(self._run_dir, self._host, f"session {self._name}",
                                {"kind": "session", **self._request},
                                detail={"streams": [s.name for s in self._streams],
                                        "duration_s": args.get("duration_s", 60)})
        answer = self._remote("start", duration_s=float(args.get("duration_s", 60) or 0), orphan_after_s=orphan,
                              streams=[{"name": s.name, "cmd": s.cmd, "params": s.params} for s in self._streams])
        if answer.get("failed"):
            journal.restored(self._run_dir, entry, outcome="never started", detail={"msg": answer.get("msg")})
            raise AnsibleActionFail(f"session {self._name} did not start on {self._host}: {answer.get('msg')}")
        return entry, answer

    def _start_only(self, result: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
        entry, answer = self._start(args)
        # A server that cannot start (its port taken, its binary broken) exits at once: say so now, with its
        # own words, rather than let every client fail later.
        time.sleep(SETTLE_S)
        early = self._remote("poll", offsets={})
        if early.get("state") in ("ended", "lost"):
            recorder = sessions.Recorder(self._run_dir, self._host, self._name, self._streams)
            stopped = self._remote("stop", offsets={}, remove=True)
            recorder.feed(stopped if not stopped.get("failed") else early, final=True)
            journal.restored(self._run_dir, entry, outcome="exited at start")
            errors = "; ".join(sessions.SessionView(recorder, self._name).stderr_tail(s.name, 3)[-1:]
                               for s in self._streams) or "no message"
            raise AnsibleActionFail(f"session {self._name} ended as soon as it started on {self._host}: {errors}")
        result.update(changed=True, clustereval_session={"journal_id": entry, "started": now_iso(), **answer},
                      msg=f"session {self._name} started on {self._host} (supervisor {answer.get('pid')})")
        return result

    # ------------------------------------------------------------------ the whole session in one task
    def _run_session(self, result: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
        duration = float(args.get("duration_s", 60) or 0)
        interval = max(0.2, float(args.get("poll_interval_s") or 5))
        recorder = sessions.Recorder(self._run_dir, self._host, self._name, self._streams)
        view = sessions.SessionView(recorder, self._name)
        interrupted: str | None = None
        lost: str | None = None
        entry = None
        polls = 0
        marker = f"{rundir.safe(self._host)}-{rundir.safe(self._name)}"
        with runinfo.recording(self._run_dir, marker), interrupts.Guard() as guard:
            try:
                entry, _ = self._start(args)
                view.started = now_iso()
                deadline = time.monotonic() + (duration + END_GRACE_S if duration > 0 else float("inf"))
                next_poll = time.monotonic() + interval
                while True:
                    time.sleep(max(0.0, next_poll - time.monotonic()))
                    next_poll += interval
                    guard.check_parent()
                    answer = self._remote("poll", offsets=recorder.offsets)
                    if answer.get("failed"):
                        raise AnsibleActionFail(f"polling session {self._name} on {self._host}: {answer.get('msg')}")
                    polls += 1
                    self._judge_live(view, recorder.feed(answer))
                    if answer.get("more"):
                        next_poll = time.monotonic()
                        continue
                    if answer.get("state") in ("ended", "lost") or time.monotonic() > deadline:
                        break
            except interrupts.Interrupted as exc:
                interrupted = str(exc)
            except AnsibleConnectionFailure as exc:
                lost = f"{self._host} stopped answering during session {self._name}: {str(exc)[:300]}"
            finally:
                guard.ignore()  # the clean-up runs to its end whatever signal comes next
                if entry is not None and lost is None:
                    self._stop(recorder, view, entry)
                view.final, view.interrupted = True, interrupted or lost
                view.ended = view.ended or now_iso()
                items = self._judge_final(view)
        if lost:
            return {"unreachable": True, "msg": lost, **self._task_result(items, recorder, polls)}
        if interrupted:
            # Everything is recorded and the node cleaned up; the main process is shutting down and reads no
            # more results (a worker handing one back would block it at exit). End as Ansible's own
            # interrupted workers do.
            os._exit(1)
            result.update(failed=True, msg=f"session {self._name} on {self._host}: {interrupted}; every sample "
                                           f"taken until then is kept")
        result.update(changed=True, **self._task_result(items, recorder, polls))
        result.setdefault("msg", f"session {self._name}: {polls} polls, "
                                 f"{sum(s['rows'] for s in recorder.stats().values())} samples")
        return result

    def _stop(self, recorder: sessions.Recorder, view: sessions.SessionView, entry: str) -> None:
        answer = self._remote("stop", offsets=recorder.offsets, remove=True)
        if answer.get("failed"):
            view.events.append({"at": now_iso(), "event": "stop_failed", "detail": str(answer.get("msg"))[:300]})
            return
        recorder.feed(answer, final=True)
        ended = answer.get("ended") or {}
        view.end_reason = ended.get("reason")
        view.ended = now_iso()
        journal.restored(self._run_dir, entry, detail={"reason": ended.get("reason"), "rc": ended.get("rc")})

    def _stop_and_judge(self, result: dict[str, Any]) -> dict[str, Any]:
        recorder = sessions.Recorder(self._run_dir, self._host, self._name, self._streams)
        view = sessions.SessionView(recorder, self._name)
        pending = [e for e in journal.pending(self._run_dir)
                   if e.get("host") == self._host and (e.get("undo") or {}).get("name") == self._request["name"]
                   and (e.get("undo") or {}).get("kind") == "session"]
        answer = self._remote("stop", offsets={}, remove=True)
        if answer.get("failed"):
            raise AnsibleActionFail(f"stopping session {self._name} on {self._host}: {answer.get('msg')}")
        recorder.feed(answer, final=True)
        view.end_reason = (answer.get("ended") or {}).get("reason")
        view.final, view.ended = True, now_iso()
        for item in pending:
            journal.restored(self._run_dir, item["id"], detail={"reason": view.end_reason})
        items = self._judge_final(view) if self._checks else []
        result.update(changed=bool(pending), **self._task_result(items, recorder, 1),
                      msg=f"session {self._name} stopped on {self._host} ({answer.get('state')})")
        return result

    # ------------------------------------------------------------------ judging
    def _context(self, view: sessions.SessionView) -> checks.Context:
        host_facts = facts_mod.hardware(self._vars.get("clustereval_facts") or {})
        return checks.Context(subject=self._host, options=dict(self._options), params=dict(self._variant),
                              facts=host_facts, host_facts={self._host: host_facts}, session=view,
                              declared=frozenset(), extra_artifacts=view.recorder.artifacts())

    def _judge_live(self, view: sessions.SessionView, chunks: dict[str, dict[str, Any]]) -> None:
        live = [c for c in self._checks if catalogue.entry(c).get("judged") == "live"]
        if not live or not any(chunks.values()):
            return
        view.chunks = chunks
        items = []
        for check_id in live:
            items.extend(checks.evaluate_many(check_id, self._context(view), self._run_id, empty_ok=True))
        rundir.record(self._run_dir, items)

    def _judge_final(self, view: sessions.SessionView) -> list[dict[str, Any]]:
        view.chunks = {}
        items = []
        for check_id in self._checks:
            items.extend(checks.evaluate_many(check_id, self._context(view), self._run_id))
        rundir.record(self._run_dir, items)
        return items

    def _task_result(self, items: list[dict[str, Any]], recorder: sessions.Recorder, polls: int) -> dict[str, Any]:
        return {TASK_RESULT_KEY: to_task_result(items), rundir.RECORDED_KEY: True,
                "clustereval_run_dir": self._run_dir,
                "clustereval_session": {"name": self._name, "polls": polls, "streams": recorder.stats(),
                                        "series": recorder.series_refs()}}

