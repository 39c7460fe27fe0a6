"""Action ``clustereval.gpu.fault_drill``: break one node on purpose and time the provider's reaction.

Runs ``clustereval.drills.runner`` over the task's own connection to the node, writes the drill's log as it
goes (``raw/<host>/fault-<drill>.jsonl``), journals every change before making it, restores in ``finally``
and judges the drill's checks from the log.
"""

from __future__ import annotations

import os
import shlex
import socket
import subprocess
import threading
import time
from typing import Any

from ansible.errors import AnsibleActionFail, AnsibleConnectionFailure
from ansible.plugins.action import ActionBase
from ansible_collections.clustereval.gpu.plugins.plugin_utils import bundled  # noqa: F401  (before clustereval)

from clustereval import checks, interrupts, journal, rundir, runinfo, series
from clustereval import facts as facts_mod
from clustereval.checks import catalogue
from clustereval.checks.fault_drill import DrillRecord
from clustereval.drills import KINDS, METHODS, runner
from clustereval.results import TASK_RESULT_KEY, to_task_result

CHECKS = {
    "reboot": ["fault.reboot.recovery", "fault.drill.bystanders"],
    "inject": ["fault.inject.detection", "fault.inject.return", "fault.inject.cleared", "fault.inject.action",
               "fault.drill.bystanders"],
}


class _Link:
    """The runner's view of the node: the task's own connection, each command bounded in time."""

    def __init__(self, action: ActionBase, address: str, port: int):
        self.action, self.address, self.port = action, address, port

    def run(self, cmd: str, timeout_s: float) -> tuple[int, str, str]:
        box: dict[str, Any] = {}

        def call() -> None:
            try:
                box["out"] = self.action._low_level_execute_command(f"/bin/sh -c {shlex.quote(cmd)}")
            except Exception as exc:
                box["exc"] = exc

        worker = threading.Thread(target=call, daemon=True)
        worker.start()
        worker.join(timeout_s)
        if worker.is_alive():
            self.reset()
            raise runner.Unreachable(f"no answer within {timeout_s:g} s")
        exc = box.get("exc")
        if isinstance(exc, AnsibleConnectionFailure):
            raise runner.Unreachable(str(exc).strip()[:300])
        if exc is not None:
            raise exc
        out = box["out"]
        if out.get("rc") == 255:  # ssh's own failure: the connection dropped under the command
            raise runner.Unreachable((out.get("stderr") or "ssh exited 255").strip()[-300:])
        return int(out.get("rc") or 0), str(out.get("stdout") or ""), str(out.get("stderr") or "")

    def reset(self) -> None:
        try:
            self.action._connection.reset()
        except Exception:
            pass

    @staticmethod
    def local(cmd: str, timeout_s: float) -> tuple[int, str, str]:
        """A command on the controller (kubectl with the controller's KUBECONFIG)."""
        try:
            done = subprocess.run(["/bin/sh", "-c", cmd], capture_output=True, text=True, timeout=timeout_s,
                                  stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired as exc:
            return 124, str(exc.stdout or ""), f"timed out after {timeout_s:g} s"
        return done.returncode, done.stdout, done.stderr

    def port_open(self) -> bool | None:
        """Whether the node's SSH port answers with a banner (cheap, and exact to the second while it is down)."""
        try:
            with socket.create_connection((self.address, self.port), timeout=1.0) as sock:
                sock.settimeout(1.0)
                return sock.recv(4).startswith(b"SSH-")
        except OSError:
            return False


class ActionModule(ActionBase):
    TRANSFERS_FILES = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        self._vars = task_vars or {}
        args = dict(self._task.args)
        drill = str(args.get("drill") or "")
        if drill not in KINDS:
            raise AnsibleActionFail(f"drill must be one of {', '.join(KINDS)}, not {drill!r}")
        method = str(args.get("method") or "auto")
        if method not in METHODS:
            raise AnsibleActionFail(f"method must be one of {', '.join(METHODS)}, not {method!r}")
        try:
            self._run_dir, self._run_id = rundir.locate(self._vars)
        except rundir.RunDirMissing as exc:
            raise AnsibleActionFail(str(exc)) from None
        self._host = self._vars["inventory_hostname"]
        options = dict(args.get("options") or {})
        dry_run = bool(args.get("dry_run"))
        variant = {"method": method, "xid": int(args.get("xid", 79))} if drill == "inject" else {}
        wanted = list(args.get("checks") or CHECKS[drill])
        unknown = [c for c in wanted if c not in catalogue.load()]
        if unknown:
            raise AnsibleActionFail(f"checks not in the catalogue: {', '.join(unknown)}")
        chosen = checks.selection(wanted, list(self._vars.get("ansible_run_tags") or ["all"]),
                                  list(self._vars.get("ansible_skip_tags") or []))
        if not chosen:
            result.update(changed=False, skipped=True, msg="no check of this drill is selected: nothing was done")
            return result
        gate = dict(options, allow_destructive=True) if dry_run else options
        refused = checks.not_permitted(chosen[0], gate, self._host)
        api_host = str(args.get("k8s_api_host") or "localhost")
        if not refused and args.get("scheduler") == "k8s" and api_host not in ("localhost", "127.0.0.1", "::1"):
            refused = (f"fault drills read the Kubernetes API from the controller, where they keep timing while the "
                       f"node is down; clustereval_k8s_api_host is {api_host}: run them with "
                       "clustereval_k8s_api_host=localhost and kubectl with its KUBECONFIG on the controller")
        if refused:
            verdict = checks.Verdict("skip", refused, evidence={"not_permitted": True})
            items = [checks.make_result(c, self._host, verdict, run_id=self._run_id, artifacts=[],
                                        started=checks.now_iso(), duration_s=0.0, params=variant) for c in chosen]
            rundir.record(self._run_dir, items)
            result.update(changed=False, msg=f"refused: {refused}", **self._task_result(items))
            return result
        settings = self._settings(args, drill, method, dry_run)
        name = f"fault-{drill}" + (f"-{method}-xid{settings.xid}" if drill == "inject" else "")
        log_path = self._fresh(rundir.host_dir(self._run_dir, self._host), name, ".jsonl")
        artifact = os.path.relpath(log_path, self._run_dir)
        series_path = os.path.join(series.SERIES_DIR, rundir.safe(self._host),
                                   os.path.basename(log_path)[: -len(".jsonl")] + ".csv")
        end, interrupted = self._drill(settings, log_path)
        if drill == "inject" and end.get("fault"):
            # An AMD node: the drill injected its RAS fault, not the Xid; the results and the log say which.
            variant = {"method": method, "fault": str(end["fault"])}
            name = f"fault-inject-{method}-{rundir.safe(str(end['fault']))}"
            renamed = self._fresh(os.path.dirname(log_path), name, ".jsonl")
            os.replace(log_path, renamed)
            log_path = renamed
            artifact = os.path.relpath(log_path, self._run_dir)
            series_path = os.path.join(series.SERIES_DIR, rundir.safe(self._host),
                                       os.path.basename(log_path)[: -len(".jsonl")] + ".csv")
        with open(log_path, encoding="utf-8", errors="replace") as fh:
            text = fh.read()
        ctx_facts = facts_mod.hardware(self._vars.get("clustereval_facts") or {})
        items = []
        for check_id in chosen:
            ctx = checks.Context(subject=self._host, options=dict(options), params=dict(variant), facts=ctx_facts,
                                 host_facts={self._host: ctx_facts}, declared=frozenset(), extra_artifacts=[artifact],
                                 session=DrillRecord(text, artifact, series_path))
            items.extend(checks.evaluate_many(check_id, ctx, self._run_id))
        series.write_pending(self._run_dir, items)
        rundir.record(self._run_dir, items)
        if interrupted:
            os._exit(1)  # everything is recorded and restored; end as Ansible's interrupted workers do
        left = end.get("not_restored")
        result.update(changed=not dry_run and end.get("reason") not in ("not_in_service", "unavailable", "unreachable",
                                                                         "no_scheduler"),
                      msg=f"{name} on {self._host}: {end.get('reason')}"
                          + (f" ({end.get('detail')})" if end.get("detail") else "")
                          + (f"; NOT RESTORED: {left}" if left else ""),
                      clustereval_drill={"log": artifact, "end": end}, **self._task_result(items))
        if left:
            result["failed"] = True
        return result

    def _settings(self, args: dict[str, Any], drill: str, method: str, dry_run: bool) -> runner.Settings:
        return_limit = float(args.get("return_limit_s", 3600) or 0)
        settings = runner.Settings(
            kind=drill, target=self._host, targets=list(args.get("targets") or [self._host]), method=method,
            xid=int(args.get("xid", 79)), gpu=int(args.get("gpu", 0)),
            reboot_cmd=str(args.get("reboot_command") or "systemctl reboot"),
            poll_s=max(0.1, float(args.get("poll_interval_s", 0.5))),
            detect_limit_s=float(args.get("detect_limit_s", 600)),
            return_limit_s=return_limit if return_limit > 0 else None, dry_run=dry_run,
            job_timeout_s=float(args.get("job_timeout_s", 120)),
            scheduler="k8s" if args.get("scheduler") == "k8s" else "slurm",
            k8s_namespace=str(args.get("k8s_namespace") or "default"),
            drain_timeout_s=float(args.get("drain_timeout_s", 300)),
            alert_url=str(args["alert_url"]) if args.get("alert_url") else None,
            params={k: args.get(k) for k in ("poll_interval_s", "detect_limit_s", "return_limit_s") if k in args})
        if args.get("gpu_job_command"):
            settings.gpu_job_cmd = str(args["gpu_job_command"])
        if args.get("k8s_gpu_image"):
            settings.k8s_gpu_image = str(args["k8s_gpu_image"])
        return settings

    @staticmethod
    def _fresh(folder: os.PathLike[str], name: str, suffix: str) -> str:
        """``folder/name.suffix``, or ``name-2.suffix``… when a drill of that name already ran in this run."""
        os.makedirs(folder, exist_ok=True)
        path, count = os.path.join(folder, name + suffix), 1
        while os.path.exists(path):
            count += 1
            path = os.path.join(folder, f"{name}-{count}{suffix}")
        return path

    def _drill(self, settings: runner.Settings, log_path: str) -> tuple[dict[str, Any], bool]:
        address = str(self._templar.template(self._vars.get("ansible_host") or self._host))
        port = int(self._templar.template(self._vars.get("ansible_port") or 22))
        host, run_dir = self._host, self._run_dir

        def applied(what: str, undo: str, detail: dict[str, Any], on_controller: bool) -> str:
            # A Kubernetes object (a cordon, a test pod) is undone from the controller, where kubectl runs.
            return journal.applied(run_dir, "localhost" if on_controller else host, what,
                                   {"kind": "command", "cmd": undo}, destructive=True, detail={**detail, "node": host})

        def restored(entry_id: str, outcome: str, detail: dict[str, Any]) -> None:
            journal.restored(run_dir, entry_id, outcome=outcome, detail=detail)

        interrupted = False
        marker = f"{rundir.safe(host)}-{os.path.basename(log_path)}"
        with runinfo.recording(run_dir, marker), interrupts.Guard() as guard:

            def sleep(seconds: float) -> None:
                deadline = time.monotonic() + seconds
                while (left := deadline - time.monotonic()) > 0:
                    guard.check_parent()
                    time.sleep(min(left, 0.25))

            drill = runner.Drill(_Link(self, address, port), settings, runner.DrillLog(log_path, time.time),
                                 runner.Journal(applied, restored), sleep=sleep, before_restore=guard.ignore)
            try:
                drill.run()
            except interrupts.Interrupted:
                interrupted = True
        return drill.end, interrupted

    def _task_result(self, items: list[dict[str, Any]]) -> dict[str, Any]:
        return {TASK_RESULT_KEY: to_task_result(items), rundir.RECORDED_KEY: True,
                "clustereval_run_dir": self._run_dir}
