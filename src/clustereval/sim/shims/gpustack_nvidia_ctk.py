#!/usr/bin/python3
# ruff: noqa: UP031  (printf formats mirror the C format strings of the real tool)
"""Simulated ``nvidia-ctk`` (NVIDIA Container Toolkit CLI 1.17.x): ``--version`` only (stdlib only)."""

import sys

VERSION = "1.17.8"
COMMIT = "f202b80a9b9d0db00d9b1d73c0128c8962c55f4d"


def main(argv):
    if argv in (["--version"], ["-v"]):
        sys.stdout.write("NVIDIA Container Toolkit CLI version %s\ncommit: %s\n" % (VERSION, COMMIT))
        return 0
    sys.stderr.write("Incorrect Usage: flag provided but not defined: -%s\n" % (argv[0].lstrip("-") if argv else ""))
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
