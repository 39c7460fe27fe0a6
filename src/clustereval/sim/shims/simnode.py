"""What the shims share: where the node's private /sim is, reading its JSON files without failing on a missing
or torn one, reading a sysfs attribute, an AMD node's state and UTF-8 output. Imported by name: the launcher
puts the shim directory first on sys.path."""

from __future__ import annotations

import json
import os
import sys


def sim_root() -> str:
    return os.environ.get("SIMNODE_ROOT") or "/sim"


def read_json(path: str, default):
    try:
        with open(path) as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return default


def node_view() -> dict:
    """``/sim/system.json``: the node's own machine (sim/overlays/system.py), ``{}`` when it has none."""
    return read_json(os.path.join(sim_root(), "system.json"), {})


def read_attr(path: str, default: str = "") -> str:
    """A sysfs attribute's value (stripped), ``default`` when it cannot be read."""
    try:
        with open(path) as fh:
            return fh.read().strip()
    except OSError:
        return default


def amd_state() -> dict | None:
    """``/sim/node.json``'s ``amd`` section (sim/amd.py): None on a node without AMD GPUs."""
    return read_json(os.path.join(sim_root(), "node.json"), {}).get("amd")


def write_utf8(text: str) -> None:
    """Write to stdout as UTF-8 whatever the locale (the AMD tools print the degree sign in C and POSIX too)."""
    sys.stdout.buffer.write(text.encode("utf-8"))
