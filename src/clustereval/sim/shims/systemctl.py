"""Simulated ``systemctl`` of a simulated node (standalone: stdlib only, no clustereval import).

``systemctl reboot`` / ``poweroff`` / ``halt`` (with ``-i``, ``-f``/``--force``, ``--no-wall``, ``--message=``)
ask the node's BMC for that transition (power_request.py) and return 0 at once, silently, as systemd does
for root. Every other verb runs the host's real ``systemctl``; without it, the text systemd prints on a host
not booted with systemd.
"""

import os
import sys

from power_request import request

NO_SYSTEMD = ("System has not been booted with systemd as init system (PID 1). Can't operate.\n"
              "Failed to connect to bus: Host is down\n")
VERBS = {"reboot": "reboot", "poweroff": "poweroff", "halt": "poweroff", "kexec": "reboot"}
FLAGS = ("-i", "--ignore-inhibitors", "-f", "--force", "--no-wall", "-q", "--quiet", "--no-block")


def power_verb(argv, by):
    verbs = [a for a in argv if not a.startswith("-")]
    if len(verbs) != 1 or verbs[0] not in VERBS:
        return None
    if any(a.startswith("-") and a not in FLAGS and not a.startswith("--message=") for a in argv):
        return None
    error = request(VERBS[verbs[0]], by)
    if error:
        sys.stderr.write(f"Failed to {verbs[0]} system via logind: {error}\n")
        return 1
    return 0


def main(argv):
    rc = power_verb(argv, "systemctl " + " ".join(argv))
    if rc is not None:
        return rc
    for real in ("/usr/bin/systemctl", "/bin/systemctl"):
        if os.access(real, os.X_OK):
            sys.stdout.flush()
            os.execv(real, ["systemctl", *argv])
    sys.stderr.write(NO_SYSTEMD)
    return 1
