"""Basic tools a simulated node lacks: ``missing_tools: [lspci, numactl, ethtool, ibstat]`` (a profile key,
cluster-wide or per node; default none).

Each named tool disappears from every directory of the node's PATH: the machine's own binary is hidden in
the node's mount namespace (an overlay whiteout over ``/usr/bin/lspci``; with a merged /usr that also
hides ``/bin/lspci``), a program another area installed there is not installed, and the simulation's
shim of that name is not linked into ``/sim/bin`` (cluster.py asks :func:`missing`). A shell then says
``lspci: command not found`` and exits 127, as on a node where the package was never installed. This
area renders after the other software areas (its name sorts last), so it also removes what they put
on the PATH.
"""

from __future__ import annotations

import os
import re
from typing import Any

# The node's PATH (cluster.NODE_PATH) less /sim/bin, whose shims cluster.py leaves out instead.
PATH_DIRS = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]*$")


def missing(settings: dict[str, Any]) -> set[str]:
    """The tools the node lacks (ValueError naming ``missing_tools`` for a malformed value)."""
    given = settings.get("missing_tools") or []
    if not isinstance(given, list) or not all(isinstance(t, str) and _NAME.match(t) for t in given):
        raise ValueError(f"missing_tools must be a list of program names (e.g. [lspci, numactl]), not {given!r}")
    return set(given)


def validate_settings(settings: dict[str, Any]) -> None:
    missing(settings)


def render(settings: dict[str, Any], state: dict[str, Any], tree) -> None:
    for tool in sorted(missing(settings)):
        for directory in PATH_DIRS:
            path = f"{directory}/{tool}"
            tree.files.pop(path, None)
            if os.path.lexists(path):
                # /bin -> usr/bin: hide the file where it really is, once
                tree.whiteout(os.path.join(os.path.realpath(directory), tool))
