"""Files and folders of a run directory are the owner's alone: they hold `getent passwd`, package lists and
Slurm's configuration. Created 0600 and 0700 whatever the umask; an existing one keeps its mode."""

from __future__ import annotations

import os
from pathlib import Path
from typing import IO, Any

_FLAGS = {"w": os.O_WRONLY | os.O_CREAT | os.O_TRUNC, "a": os.O_WRONLY | os.O_CREAT | os.O_APPEND}


def folder(path: str | os.PathLike[str]) -> Path:
    """``mkdir -p`` with every folder it creates 0700."""
    path = Path(path)
    missing = []
    probe = path
    while not probe.exists():
        missing.append(probe)
        probe = probe.parent
    for part in reversed(missing):
        try:
            part.mkdir(mode=0o700)
        except FileExistsError:
            continue
        os.chmod(part, 0o700)  # mkdir's mode is filtered by the umask
    return path


def open_file(path: str | os.PathLike[str], mode: str = "w", **options: Any) -> IO[Any]:
    """``open(path, mode)`` (``w``, ``a``, ``wb``, ``ab``) for a run file, created 0600."""
    fd = os.open(path, _FLAGS[mode.replace("b", "")], 0o600)
    return os.fdopen(fd, mode, **options)
