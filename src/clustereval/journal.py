"""The action journal: what a run changed on the nodes, written before it acts and after it restores.

``journal.jsonl`` in the run directory, append-only, one JSON object a line. An action (a session's
processes, an injected fault, a test PVC, a Slurm reservation) writes an ``applied`` entry *before* it acts,
holding how to undo it, and a ``restored`` entry (same ``id``) once it has put things back. Whatever has an
``applied`` entry and no ``restored`` one is still applied: ``clustereval undo RUN`` reverts it, and the next
run in the same runs folder warns about it.

Undo recipes (``undo``) are data, never code: ``{"kind": "session", "base", "run_id", "name"}`` stops and
removes a session on ``host``; ``{"kind": "command", "cmd": "..."}`` runs a shell command on ``host``
(``localhost`` for the controller, e.g. ``kubectl delete pvc ...``).
"""

from __future__ import annotations

import fcntl
import json
import os
import secrets
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from clustereval import private

JOURNAL_FILE = "journal.jsonl"
UNDO_KINDS = ("session", "command")


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _append(run_dir: str | os.PathLike[str], entry: dict[str, Any]) -> None:
    path = Path(run_dir) / JOURNAL_FILE
    private.folder(path.parent)
    line = json.dumps(entry, sort_keys=True, default=str) + "\n"
    with private.open_file(path, "a", encoding="utf-8") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            fh.write(line)
            fh.flush()
            os.fsync(fh.fileno())
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def applied(run_dir: str | os.PathLike[str], host: str, what: str, undo: dict[str, Any], *,
            destructive: bool = False, detail: dict[str, Any] | None = None) -> str:
    """Record that ``what`` is about to change ``host`` (call it before acting); returns the entry id."""
    if undo.get("kind") not in UNDO_KINDS:
        raise ValueError(f"undo kind must be one of {UNDO_KINDS}, not {undo.get('kind')!r}")
    entry_id = secrets.token_hex(6)
    _append(run_dir, {"id": entry_id, "state": "applied", "at": _now(), "host": host, "what": what,
                      "undo": undo, "destructive": destructive, "detail": detail or {}})
    return entry_id


def restored(run_dir: str | os.PathLike[str], entry_id: str, *, by: str = "run", outcome: str = "restored",
             detail: dict[str, Any] | None = None) -> None:
    """Record that the change of entry ``entry_id`` is undone (``by``: the run itself, or ``undo``)."""
    _append(run_dir, {"id": entry_id, "state": "restored", "at": _now(), "by": by, "outcome": outcome,
                      "detail": detail or {}})


def load(run_dir: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Every journal entry in order; a torn last line (a crash mid-write) is skipped."""
    path = Path(run_dir) / JOURNAL_FILE
    if not path.exists():
        return []
    out = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict) and entry.get("id"):
            out.append(entry)
    return out


def pending(run_dir: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The ``applied`` entries no ``restored`` entry closes: what is still changed on the nodes."""
    entries = load(run_dir)
    closed = {e["id"] for e in entries if e.get("state") == "restored"}
    return [e for e in entries if e.get("state") == "applied" and e["id"] not in closed]


def leftovers(runs_folder: str | os.PathLike[str], exclude: str | os.PathLike[str] | None = None,
              newest: int = 50) -> dict[str, list[dict[str, Any]]]:
    """Pending entries of the other runs in a runs folder (the ``newest`` run directories that have a journal),
    by run directory: what an interrupted run left behind."""
    folder = Path(runs_folder)
    if not folder.is_dir():
        return {}
    skip = Path(exclude).resolve() if exclude else None
    journals = sorted((p for p in folder.glob(f"*/{JOURNAL_FILE}") if p.parent.resolve() != skip),
                      key=lambda p: p.stat().st_mtime, reverse=True)[:newest]
    out = {}
    for path in journals:
        left = pending(path.parent)
        if left:
            out[str(path.parent)] = left
    return out
