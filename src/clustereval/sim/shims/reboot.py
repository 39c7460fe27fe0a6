"""Simulated ``reboot`` (Debian 12: a link to systemctl): ``reboot [-f] [-p]`` asks the node's BMC."""

import sys

from power_request import request


def main(argv, default="reboot"):
    action = default
    for arg in argv:
        if arg in ("-p", "--poweroff"):
            action = "poweroff"
        elif arg in ("--reboot",):
            action = "reboot"
        elif arg not in ("-f", "--force", "-w", "--wtmp-only", "-d", "--no-wtmp", "-n", "--no-sync",
                         "--no-wall"):
            sys.stderr.write(f"{default}: unrecognized option '{arg}'\n")
            return 1
    if "-w" in argv or "--wtmp-only" in argv:
        return 0
    error = request(action, " ".join([default, *argv]))
    if error:
        sys.stderr.write(f"Failed to {action} system via logind: {error}\n")
        return 1
    return 0
