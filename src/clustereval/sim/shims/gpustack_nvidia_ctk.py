#!/usr/bin/python3
# ruff: noqa: UP031  (printf formats mirror the C format strings of the real tool)
"""Simulated ``nvidia-ctk`` (NVIDIA Container Toolkit CLI): ``--version`` only (stdlib only).

The version is the node's ``container_toolkit_version`` in ``$SIMNODE_ROOT/node.json`` (profile key).
"""

import json
import os
import sys


def version():
    root = os.environ.get("SIMNODE_ROOT") or "/sim"
    try:
        with open(os.path.join(root, "node.json"), encoding="utf-8") as fh:
            return json.load(fh).get("container_toolkit_version") or "1.19.1"
    except (OSError, ValueError):
        return "1.19.1"


COMMIT = "f202b80a9b9d0db00d9b1d73c0128c8962c55f4d"


def main(argv):
    if argv in (["--version"], ["-v"]):
        sys.stdout.write("NVIDIA Container Toolkit CLI version %s\ncommit: %s\n" % (version(), COMMIT))
        return 0
    sys.stderr.write("Incorrect Usage: flag provided but not defined: -%s\n" % (argv[0].lstrip("-") if argv else ""))
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
