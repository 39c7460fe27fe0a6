"""The processes a run started on the controller, found and stopped as a tree (Linux ``/proc``).

``ansible-playbook``'s workers each start a session of their own (``setsid``), so a signal to its process
group never reaches them, and a killed ``ansible-playbook`` leaves them running under PID 1. The CLI makes
itself a child subreaper: every process the run started stays its descendant, orphaned or not, and can be
stopped at the end.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import time
from pathlib import Path

from clustereval import runinfo

PR_SET_CHILD_SUBREAPER = 36


def become_subreaper(on: bool = True) -> bool:
    """Orphaned descendants are re-parented to this process instead of PID 1 (``on=False``: no longer); False
    where the kernel (or the platform) cannot."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _stats() -> list[tuple[int, str, int]]:
    """(pid, state, parent pid) of every process."""
    out = []
    for entry in Path("/proc").iterdir() if Path("/proc").is_dir() else []:
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                out.append((int(entry.name), fields[0], int(fields[1])))
    return out


def descendants(root: int | None = None) -> list[int]:
    """Live descendants of ``root`` (default: this process), parents before their children."""
    root = os.getpid() if root is None else root
    children: dict[int, list[int]] = {}
    for pid, state, parent in _stats():
        if state not in ("Z", "X"):
            children.setdefault(parent, []).append(pid)
    out, todo = [], list(children.get(root, []))
    while todo:
        pid = todo.pop(0)
        out.append(pid)
        todo.extend(children.get(pid, []))
    return out


def reap(exclude: frozenset[int] | set[int] = frozenset()) -> None:
    """Collect the exit status of this process's exited children (orphans re-parented to it), except those in
    ``exclude`` (a child someone else waits for)."""
    me = os.getpid()
    for pid, state, parent in _stats():
        if state == "Z" and parent == me and pid not in exclude:
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(pid, os.WNOHANG)


def stop(pids: list[int], grace_s: float) -> list[int]:
    """SIGTERM each process, SIGKILL whatever still lives after ``grace_s``; the pids that needed SIGKILL."""
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    alive = list(pids)
    while alive and time.monotonic() < deadline:
        time.sleep(0.05)
        reap()
        alive = [pid for pid in alive if runinfo.process_start(pid) is not None]
    for pid in alive:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    reap()
    return alive
