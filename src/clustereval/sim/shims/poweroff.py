"""Simulated ``poweroff`` (Debian 12: a link to systemctl): asks the node's BMC to power the node off."""

import reboot


def main(argv):
    return reboot.main(argv, default="poweroff")
