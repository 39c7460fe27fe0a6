"""Run-directory bookkeeping shared by the Ansible plugins and the CLI (``run.json``)."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from clustereval import redact


def timestamp(moment: datetime | None = None) -> str:
    return (moment or datetime.now(UTC)).strftime("%Y%m%dT%H%M%SZ")


def default_run_dir(playbook_dir: str | os.PathLike[str], moment: datetime | None = None,
                    cwd: str | os.PathLike[str] | None = None) -> str:
    """``runs/<timestamp>`` beside the playbook (the parent of ``playbooks/`` in a checkout), or in the
    working directory when the playbook is inside an installed collection or Python package
    (``ansible-playbook clustereval.gpu.evaluate``): a run never lands in the collection's own directory."""
    base = Path(playbook_dir).resolve()
    if "ansible_collections" in base.parts or "site-packages" in base.parts or "dist-packages" in base.parts:
        return str(Path(cwd or os.getcwd()).resolve() / "runs" / timestamp(moment))
    root = base.parent if base.name == "playbooks" else base
    return str(root / "runs" / timestamp(moment))


def write_json(path: str | os.PathLike[str], data: Any) -> None:
    """Write JSON atomically (tmp file + rename) so a crash never leaves half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(data, fh, indent=2, sort_keys=True, default=str)
        fh.write("\n")
    os.replace(tmp, path)


def safe_options(task_vars: dict[str, Any]) -> dict[str, Any]:
    """The ``clustereval_*`` settings of this run with every secret redacted (``clustereval.redact``: by name
    at any depth, vault values, credentials in URLs, and any secret value of any variable wherever it recurs)."""
    secrets = redact.secret_values(task_vars)
    return {name: _safe_value(value, secrets, name) for name, value in task_vars.items()
            if name.startswith("clustereval_") and name not in ("clustereval_run_dir", "clustereval_run_id")
            # derived settings (playbook expressions) are not something the operator chose
            and not (isinstance(value, str) and "{{" in value)}


def safe_extra_vars(extra_vars: dict[str, Any], task_vars: dict[str, Any]) -> dict[str, Any]:
    """The extra variables the run was given (``-e``, templates as given), secrets redacted as in
    :func:`safe_options`: what ``clustereval resume`` gives the playbook again (a redacted one must be given again
    by the operator)."""
    secrets = redact.secret_values(task_vars)
    return {name: _safe_value(value, secrets, name) for name, value in extra_vars.items()}


def _safe_value(value: Any, secrets: set[str], name: str) -> Any:
    """The value redacted, as JSON can hold it (else its text)."""
    value = redact.redact(value, secrets, name)
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        value = str(value)
    return value


def inventory_summary(task_vars: dict[str, Any], targets: list[str]) -> dict[str, Any]:
    groups = {name: sorted(hosts) for name, hosts in (task_vars.get("groups") or {}).items()
              if name != "all"}
    return {"hosts": sorted(targets) or sorted((task_vars.get("groups") or {}).get("all", [])),
            "groups": groups, "inventory_sources": list(task_vars.get("ansible_inventory_sources") or [])}


def mark_ended(run_dir: str | os.PathLike[str], **extra: Any) -> None:
    """Record the end time (and e.g. the ansible stats) in ``run.json``."""
    path = Path(run_dir) / "run.json"
    try:
        info = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        info = {}
    info["ended"] = datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
    info.update(extra)
    write_json(path, info)


ACTIVE_SESSIONS = Path("sessions") / "active"


def process_start(pid: int) -> str | None:
    """The start time of a live process (kernel ticks since boot); None when it is gone or a zombie."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return None if fields[0] in ("Z", "X") else fields[19]


def mark_active(path: str | os.PathLike[str]) -> None:
    """Say this process records into the run directory: its PID and start time (so a reused PID is not it)."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(f"{os.getpid()} {process_start(os.getpid())}\n", encoding="utf-8")


def marker_alive(path: str | os.PathLike[str]) -> bool:
    """Whether the process a :func:`mark_active` marker names still runs (the same process, not a reused PID)."""
    try:
        pid, started = Path(path).read_text(encoding="utf-8").split()
        return process_start(int(pid)) == started
    except (OSError, ValueError):
        return False


@contextlib.contextmanager
def recording(run_dir: str | os.PathLike[str], name: str) -> Iterator[None]:
    """While the block runs, a marker says this worker still records into the run directory: the results
    callback waits for it (a little) before it writes the reports of an interrupted run."""
    path = Path(run_dir) / ACTIVE_SESSIONS / f"{name}.pid"
    mark_active(path)
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            path.unlink()


def active_sessions(run_dir: str | os.PathLike[str]) -> list[str]:
    """Sessions whose worker still records into the run directory (its marker names a live process)."""
    folder = Path(run_dir) / ACTIVE_SESSIONS
    alive = []
    for marker in sorted(folder.glob("*.pid")) if folder.is_dir() else []:
        if marker_alive(marker):
            alive.append(marker.stem)
    return alive


def wait_for_sessions(run_dir: str | os.PathLike[str], timeout_s: float) -> list[str]:
    """Wait up to ``timeout_s`` for the active sessions to finish recording; those still active after it."""
    deadline = time.monotonic() + timeout_s
    while (left := active_sessions(run_dir)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left
