"""``systemd-detect-virt`` of a simulated node (stdlib only): bare metal or a KVM guest, as its profile says.

The real tool asks the CPU (CPUID's hypervisor leaf), which only the machine's hypervisor answers, and
finds this machine's own container marker, so a node's answer comes from ``/sim/system.json``
(``virtualization``: ``none`` or ``kvm``). As systemd 252: the type on stdout and exit 0, or ``none`` and
exit 1; ``-q`` prints nothing; ``-c`` (a node is no container) says ``none``; ``-r``/``--private-users`` set
the exit status only. ``--help``, ``--version``, ``--list`` and usage errors run the real tool.
"""

import os
import sys

from simnode import node_view

REAL = "/usr/bin/systemd-detect-virt"
MODES = {"-c": "container", "--container": "container", "-v": "vm", "--vm": "vm", "-r": "chroot",
         "--chroot": "chroot", "--private-users": "userns"}


def node_virtualization():
    return node_view().get("virtualization") or "none"


def main(argv):
    quiet, mode = False, "any"
    for arg in argv:
        if arg in ("-q", "--quiet"):
            quiet = True
        elif arg in MODES:
            mode = MODES[arg]
        else:
            sys.stdout.flush()
            os.execv(REAL, ["systemd-detect-virt", *argv])
    if mode in ("chroot", "userns"):
        return 1  # sshd and slurmd run in the node's root and the initial user namespace
    found = node_virtualization() if mode in ("any", "vm") else "none"
    if not quiet:
        sys.stdout.write(found + "\n")
    return 0 if found != "none" else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
