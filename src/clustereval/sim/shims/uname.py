"""``uname`` of a simulated node (stdlib only): GNU coreutils' fields, with the node's kernel and machine.

The kernel's release and machine are not per UTS namespace, so the node's own (``/sim/system.json``:
``kernel_release``, ``kernel_version``, ``architecture``, from the profile's ``system:``) come from here;
the kernel name, the node name (its own UTS namespace) and the OS are the real ``uname(2)``'s. Any usage the
fields below do not cover (``--help``, ``--version``, a bad option or operand) runs the real
``/usr/bin/uname``, which prints its own text.
"""

import os
import sys

from simnode import node_view

SHORT = "snrvmpio"
LONG = {"--kernel-name": "s", "--nodename": "n", "--kernel-release": "r", "--kernel-version": "v",
        "--machine": "m", "--processor": "p", "--hardware-platform": "i", "--operating-system": "o", "--all": "a"}
REAL = "/usr/bin/uname"


def wanted(argv):
    """The field letters asked for, or None when the real tool must answer (help, errors)."""
    letters = []
    for arg in argv:
        if arg in LONG:
            letters.append(LONG[arg])
        elif arg.startswith("-") and not arg.startswith("--") and len(arg) > 1 and all(
                c in SHORT + "a" for c in arg[1:]):
            letters.extend(arg[1:])
        else:
            return None
    return letters or ["s"]


def main(argv):
    letters = wanted(argv)
    if letters is None:
        sys.stdout.flush()
        os.execv(REAL, ["uname", *argv])
    real, node = os.uname(), node_view()
    fields = {"s": real.sysname, "n": real.nodename, "r": node.get("kernel_release") or real.release,
              "v": node.get("kernel_version") or real.version, "m": node.get("architecture") or real.machine,
              "p": "unknown", "i": "unknown", "o": "GNU/Linux"}
    if "a" in letters:
        chosen = [k for k in SHORT if fields[k] != "unknown" or k in letters]
    else:
        chosen = [k for k in SHORT if k in letters]
    sys.stdout.write(" ".join(fields[k] for k in chosen) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
