"""Simulated Lmod 8.7 command (``$LMOD_CMD <shell> <subcommand>``), as the ``module`` shell function calls it.

Like the real ``lmod``, it writes what users read to stderr and shell code to eval to stdout (nothing
here): ``--version`` prints the banner, ``-t avail``/``avail`` walks the directories of ``$MODULEPATH``
for modulefiles (``name/version.lua`` or Tcl files) and lists them. Other subcommands are refused.
"""

import os
import sys

BANNER = ("\nModules based on Lua: Version 8.7.14  2022-11-08 13:59 -06:00\n"
          "    by Robert McLay mclay@tacc.utexas.edu\n\n")


def modules(path):
    found = []
    for name in sorted(os.listdir(path)):
        full = os.path.join(path, name)
        if os.path.isdir(full):
            for version in sorted(os.listdir(full)):
                if not version.startswith("."):
                    found.append(f"{name}/{version[:-4] if version.endswith('.lua') else version}")
    return found


def main(args):
    args = [a for a in args[1:] if a]  # args[0] is the shell name
    if "--version" in args or "-v" in args:
        sys.stderr.write(BANNER)
        return 0
    terse = "-t" in args or "--terse" in args
    words = [a for a in args if not a.startswith("-")]
    if words[:1] in (["avail"], ["av"]):
        dirs = [d for d in os.environ.get("MODULEPATH", "").split(":") if d]
        out = []
        for d in dirs:
            if not os.path.isdir(d):
                continue
            names = modules(d)
            out.append(f"{d}:" if terse else f"\n{'-' * 10} {d} {'-' * 10}")
            out += names if terse else ["   " + "    ".join(names)]
        sys.stderr.write("\n".join(out) + "\n")
        return 0
    sys.stderr.write(f"Lmod has detected the following error: subcommand not simulated: {' '.join(words)}\n")
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
