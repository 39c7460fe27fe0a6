"""Simulated ``enroot`` (NVIDIA Enroot 3.5.0): answers ``enroot version`` as the real script does (the bare
version on one line); everything that would touch images says it is not available in the simulation."""

import sys

VERSION = "3.5.0"

if __name__ == "__main__":
    args = sys.argv[1:]
    if args[:1] == ["version"]:
        print(VERSION)
        sys.exit(0)
    if not args or args[0] in ("-h", "--help", "help"):
        print("Usage: enroot COMMAND [ARG...]\n\nCommand line utility for manipulating container sandboxes.\n")
        sys.exit(0)
    print(f"[ERROR] Command not supported by the simulated node: {args[0]}", file=sys.stderr)
    sys.exit(1)
