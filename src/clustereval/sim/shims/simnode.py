"""What the shims share: where the node's private /sim is, reading its JSON files without failing on a missing
or torn one, and reading a sysfs attribute. Imported by name: the launcher puts the shim directory first on
sys.path."""

from __future__ import annotations

import json
import os


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
