"""Ctrl-C and SIGTERM on ``clustereval evaluate``: stop the whole run within seconds, cleanly.

The first signal is passed on to ``ansible-playbook`` as a SIGINT, which it passes on to every worker (each
in a session of its own): a worker's SSH client goes, so the node's probe runner stops its probes and runs
their clean-up; a session or a fault drill restores what it changed (``clustereval.interrupts``); the
results callback records the interruption and writes the reports of what was measured. Whatever still runs
once that is over (or at once on a second signal, or after :data:`GRACE_S`) is stopped as a tree: the CLI
is the run's child subreaper, so no worker escapes to PID 1. SSH master connections live in a folder of
the run's own and are closed with it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from clustereval import proctree, runinfo

SIGNALS = (signal.SIGINT, signal.SIGTERM)
# How long ansible-playbook gets to stop its workers, let sessions and drills restore what they changed and
# write the reports (the callback waits up to 20 s for sessions) before the rest is stopped by force.
GRACE_S = 45.0
# What a process still running after the playbook ended gets between SIGTERM and SIGKILL.
STOP_GRACE_S = 3.0


class RunControl:
    """Signal handling around one ``ansible-playbook`` run (use as a context manager in the main thread)."""

    def __init__(self, stream=sys.stderr, grace_s: float = GRACE_S) -> None:
        self.stream = stream
        self.grace_s = grace_s
        self.signal_name: str | None = None
        self.at: str | None = None
        self.deadline: float | None = None
        self.previous: dict[int, Any] = {}
        self.subreaper = False

    def __enter__(self) -> RunControl:
        self.subreaper = proctree.become_subreaper()
        self.previous = {sig: signal.getsignal(sig) for sig in SIGNALS}
        for sig in SIGNALS:
            signal.signal(sig, self._on_signal)
        return self

    def __exit__(self, *exc: Any) -> None:
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)
        if self.subreaper:  # a long-lived caller (a scheduler calling runner.evaluate) gets its process back
            proctree.become_subreaper(False)

    @property
    def interrupted(self) -> str | None:
        """'SIGINT (Ctrl-C) at 2026-…Z', or None while no signal came."""
        if not self.signal_name:
            return None
        how = " (Ctrl-C)" if self.signal_name == "SIGINT" else " (a cancelled job or a shutdown)"
        return f"{self.signal_name}{how} at {self.at}"

    def _on_signal(self, signum: int, frame: Any) -> None:
        if self.signal_name:  # a second one: stop at once
            self.deadline = time.monotonic()
            print("clustereval: stopping the run now, without waiting for its clean-up", file=self.stream,
                  flush=True)
            return
        self.signal_name = signal.Signals(signum).name
        self.at = datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
        self.deadline = time.monotonic() + self.grace_s
        print(f"clustereval: {self.interrupted}: stopping the run (workers, the probes on the nodes and their "
              f"clean-up); results measured so far are kept. Press Ctrl-C again to stop at once.",
              file=self.stream, flush=True)
        for pid in self._playbooks():
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGINT)

    @staticmethod
    def _playbooks() -> list[int]:
        """The run's ansible-playbook main process (ansible-runner's pexpect child: the first descendant so named;
        its workers bear the same name)."""
        for pid in proctree.descendants():
            with contextlib.suppress(OSError):
                if b"ansible-playbook" in Path(f"/proc/{pid}/cmdline").read_bytes():
                    return [pid]
        return []

    def cancel(self) -> bool:
        """ansible-runner's cancel callback: True (kill ansible-playbook) once the grace period is over."""
        return self.deadline is not None and time.monotonic() >= self.deadline

    def finish(self, run_dir: Path, control_dir: Path, sessions_wait_s: float = 20.0) -> list[int]:
        """Once ansible-playbook has ended: close the run's SSH master connections and stop every process the
        run left (after waiting for sessions and drills still restoring); the pids that needed SIGKILL."""
        if self.signal_name and self.deadline is not None:
            runinfo.wait_for_sessions(run_dir, max(0.0, min(sessions_wait_s, self.deadline - time.monotonic())))
        close_masters(control_dir)
        left = proctree.descendants()
        return proctree.stop(left, STOP_GRACE_S) if left else []


def close_masters(control_dir: Path) -> None:
    """Ask each SSH master connection whose socket is in ``control_dir`` to exit (``ssh -O exit``)."""
    for socket in sorted(control_dir.glob("*")) if control_dir.is_dir() else []:
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            subprocess.run(["ssh", "-o", f"ControlPath={socket}", "-O", "exit", "clustereval-master"],
                           stdin=subprocess.DEVNULL, capture_output=True, timeout=5)
