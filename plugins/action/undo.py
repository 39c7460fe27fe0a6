"""Action ``clustereval.gpu.undo``: revert what a run's action journal says is still applied on this host."""

from __future__ import annotations

import shlex
from typing import Any

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase
from ansible_collections.clustereval.gpu.plugins.module_utils import session_runner
from ansible_collections.clustereval.gpu.plugins.plugin_utils import bundled  # noqa: F401  (before clustereval)

from clustereval import journal, remote

with open(session_runner.__file__, encoding="utf-8") as _source:
    SESSION_SOURCE = _source.read()


class ActionModule(ActionBase):
    TRANSFERS_FILES = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        run_dir = self._task.args.get("run_dir")
        if not run_dir:
            raise AnsibleActionFail("run_dir is required")
        host = task_vars["inventory_hostname"]
        todo = [e for e in journal.pending(run_dir) if e.get("host") == host]
        done, failed = [], []
        for entry in todo:
            outcome, detail = self._undo(entry, task_vars)
            if outcome is None:
                failed.append({"id": entry["id"], "what": entry.get("what"), "error": detail})
                continue
            journal.restored(run_dir, entry["id"], by="undo", outcome=outcome, detail={"detail": detail})
            done.append({"id": entry["id"], "what": entry.get("what"), "outcome": outcome})
        result.update(changed=bool(done), undone=done, not_undone=failed, failed=bool(failed),
                      msg=(f"{len(done)} undone, {len(failed)} not undone on {host}" if todo
                           else f"nothing left applied on {host}"))
        return result

    def _undo(self, entry: dict[str, Any], task_vars: dict[str, Any]) -> tuple[str | None, str]:
        recipe = entry.get("undo") or {}
        if recipe.get("kind") == "session":
            request = {"op": "stop", "remove": True, "offsets": {},
                       **{k: recipe.get(k) for k in ("base", "run_id", "name")}}
            try:
                answer = remote.run_script(self, task_vars, SESSION_SOURCE, request)
            except remote.RemoteFailed as exc:
                return None, str(exc)
            if answer.get("failed"):
                return None, str(answer.get("msg"))
            if answer.get("state") == "absent":
                return "already gone", f"no session at {answer.get('dir')}"
            return "stopped", f"session stopped ({(answer.get('ended') or {}).get('reason')}) and removed"
        if recipe.get("kind") == "command":
            out = self._low_level_execute_command(f"/bin/sh -c {shlex.quote(str(recipe.get('cmd')))}")
            if out.get("rc") == 0:
                return "command ran", str(recipe.get("cmd"))
            return None, f"`{recipe.get('cmd')}` exited {out.get('rc')}: {(out.get('stderr') or '').strip()[-300:]}"
        return None, f"unknown undo recipe {recipe!r}"
