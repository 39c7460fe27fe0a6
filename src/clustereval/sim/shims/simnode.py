"""What the fabric shims (nccl-tests, perftest, nvbandwidth) share: where the node's private /sim is, and
reading its JSON files without failing on a missing or torn one. Imported by name: the launcher puts the
shim directory first on sys.path."""

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
