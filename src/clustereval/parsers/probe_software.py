"""Readers of tool output the software probes carry in their ``key=value`` lines (``checks/probes/software.yml``).

The probes print each line of a tool's output under one key (``mpi_list=``, ``module_avail=``,
``enroot_version=``, ``nccl_lib=``); these pure functions understand those lines once the
``probe-key-equals-value`` parser has grouped them: Slurm 20-25 ``srun --mpi=list``, Lmod 8 / Environment
Modules 4-5 ``module -t avail``, Enroot 3 ``enroot version`` and NCCL 2.x library file names.
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath


def nccl_version(path: str) -> str | None:
    """NCCL version from a resolved library name (``libnccl.so.2.21.5`` -> ``2.21.5``), else None."""
    match = re.search(r"libnccl\.so\.(\d+\.\d+\.\d+)", PurePosixPath(path).name)
    return match.group(1) if match else None


def mpi_plugins(lines: list[str]) -> list[str] | None:
    """Plugin names from ``srun --mpi=list`` lines (Slurm 20-25 layouts), or None when unrecognisable.

    Older Slurm prints ``srun: MPI types are...`` then ``srun: pmix``; newer prints ``MPI plugin types
    are...`` then tab-indented names and ``specific pmix plugin versions available: pmix_v4``.
    """
    text = "\n".join(lines)
    if "MPI" not in text or "types are" not in text:
        return None
    names: list[str] = []
    for line in lines:
        line = line.removeprefix("srun:").strip()
        if not line or "types are" in line:
            continue
        if line.startswith("specific pmix plugin versions available:"):
            names += [v.strip() for v in line.split(":", 1)[1].split(",") if v.strip()]
            continue
        if re.fullmatch(r"[a-z0-9_]+", line):
            names.append(line)
    return names


def module_names(lines: list[str]) -> list[str]:
    """Module names from ``module -t avail`` (terse: ``/dir:`` headers, then ``name/version`` lines)."""
    names = []
    for line in lines:
        line = line.strip()
        if not line or line.endswith(":") or line.startswith(("Lmod", "Use \"module", "If the avail")):
            continue
        names.append(line.removesuffix("(default)").strip())
    return names


def enroot_version(lines: list[str]) -> str | None:
    """The version ``enroot version`` printed (``3.5.0``, or ``v3.4.1`` from a source build)."""
    for line in lines:
        match = re.fullmatch(r"v?(\d+\.\d+(?:\.\d+)?)", line.strip())
        if match:
            return match.group(1)
    return None
