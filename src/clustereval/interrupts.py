"""Ctrl-C, SIGTERM and a vanished controller, as an action's worker process meets them.

``ansible-playbook`` passes SIGINT and SIGTERM on to its workers. Inside a :class:`Guard` the first one raises
:class:`Interrupted` where the work is; later ones are ignored, so the clean-up (stopping streams, restoring
what a drill changed) runs to its end. :meth:`Guard.ignore` does the same before a clean-up that no signal
has started yet, and :meth:`Guard.check_parent` turns a controller that went away into the same exception.
"""

from __future__ import annotations

import os
import signal
from typing import Any

# What Ansible's main process passes on to its workers when it is interrupted.
INTERRUPTS = (signal.SIGINT, signal.SIGTERM)


class Interrupted(Exception):
    """The work was cut short (the message says by what)."""


class Guard:
    def __init__(self) -> None:
        self.parent = os.getppid()
        self.previous: dict[int, Any] = {}

    def __enter__(self) -> Guard:
        self.previous = {sig: signal.getsignal(sig) for sig in INTERRUPTS}
        for sig in INTERRUPTS:
            signal.signal(sig, self._on_signal)
        return self

    def __exit__(self, *exc: Any) -> None:
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)

    def ignore(self) -> None:
        """From now on until the guard ends, signals are ignored: the clean-up runs to its end."""
        for sig in INTERRUPTS:
            signal.signal(sig, signal.SIG_IGN)

    def check_parent(self) -> None:
        if os.getppid() != self.parent:
            raise Interrupted("the controller process went away (ansible-playbook is gone)")

    def _on_signal(self, signum: int, frame: Any) -> None:
        self.ignore()  # one is enough
        raise Interrupted(f"the run was interrupted ({signal.Signals(signum).name}: Ctrl-C or a cancelled job)")
