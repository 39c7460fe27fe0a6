"""Simulated ``apptainer`` (Apptainer 1.3.4): ``apptainer --version`` / ``apptainer version`` as the real
binary prints them; running containers is not simulated."""

import sys

VERSION = "1.3.4"

if __name__ == "__main__":
    args = sys.argv[1:]
    if args[:1] == ["--version"]:
        print(f"apptainer version {VERSION}")
        sys.exit(0)
    if args[:1] == ["version"]:
        print(VERSION)
        sys.exit(0)
    print(f"FATAL:   command not supported by the simulated node: {' '.join(args)}", file=sys.stderr)
    sys.exit(255)
