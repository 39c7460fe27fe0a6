"""Run one of our standard-library scripts on a node from an action plugin: ``python3 -c SOURCE`` with a
JSON request on stdin and a JSON answer on stdout, over the task's connection (its ``environment`` and
``become`` apply). One exchange, no module wrapper to unpack and compile on the node.
"""

from __future__ import annotations

import json
import shlex
from typing import Any


class RemoteFailed(RuntimeError):
    """The script did not answer with a JSON object (the message carries its exit status and output)."""

    def __init__(self, message: str, rc: Any = None):
        super().__init__(message)
        self.rc = rc


def node_python(action: Any, task_vars: dict[str, Any]) -> str:
    """The node's Python: ansible_python_interpreter when set (not auto), the interpreter Ansible discovered,
    else the first python3 the node's shell finds."""
    configured = action._templar.template(task_vars.get("ansible_python_interpreter") or "")
    if configured and not str(configured).startswith("auto"):
        return shlex.quote(str(configured))
    discovered = (task_vars.get("ansible_facts") or {}).get("discovered_interpreter_python")
    if discovered:
        return shlex.quote(str(discovered))
    return "$(command -v python3 || echo /usr/libexec/platform-python)"


def run_script(action: Any, task_vars: dict[str, Any], source: str, request: dict[str, Any]) -> dict[str, Any]:
    """Send ``source`` with ``request``; the script's JSON answer. A lost connection raises Ansible's own
    connection error (the host is then reported unreachable); an answer that is not JSON raises
    :class:`RemoteFailed`. An answer with ``failed`` is returned as it is."""
    python = node_python(action, task_vars)
    cmd = f"{action._compute_environment_string()} {python} -c {shlex.quote(source)}".strip()
    out = action._low_level_execute_command(cmd, in_data=json.dumps(request))
    try:
        answer = json.loads(out.get("stdout") or "")
    except ValueError:
        answer = None
    if not isinstance(answer, dict):
        detail = (out.get("stderr") or out.get("stdout") or "no output").strip()[-1500:]
        raise RemoteFailed(f"exit status {out.get('rc')}: {detail}", out.get("rc"))
    return answer
