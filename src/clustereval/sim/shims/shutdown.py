"""Simulated ``shutdown`` (systemd's): ``shutdown [-r|-h|-P] [now|+M|hh:mm] [message]`` asks the node's BMC.

``now``/``+0`` act at once and print nothing; a later time prints systemd's "Reboot scheduled for …, use
'shutdown -c' to cancel." and the BMC acts then. ``-c`` cancels nothing (no scheduled request is kept
apart from the pending one, which it removes).
"""

import os
import sys
import time

from power_request import request


def main(argv):
    action, when = "poweroff", None
    for arg in argv:
        if arg in ("-r", "--reboot"):
            action = "reboot"
        elif arg in ("-h", "-P", "--poweroff", "-H", "--halt"):
            action = "poweroff"
        elif arg in ("-c",):
            pending = os.path.join(os.environ.get("SIMNODE_ROOT") or "/sim", "power", "request")
            try:
                os.unlink(pending)
            except OSError:
                pass
            return 0
        elif arg.startswith("-") and arg not in ("-k", "--no-wall"):
            sys.stderr.write(f"shutdown: unrecognized option '{arg}'\n")
            return 1
        elif when is None and not arg.startswith("-"):
            when = arg
    delay = 60.0
    if when in ("now", "+0"):
        delay = 0.0
    elif when and when.startswith("+") and when[1:].isdigit():
        delay = 60.0 * int(when[1:])
    elif when and ":" in when:
        hours, _, minutes = when.partition(":")
        try:
            now = time.localtime()
            target = time.mktime((*now[:3], int(hours), int(minutes), 0, *now[6:]))
        except (ValueError, OverflowError):
            sys.stderr.write(f"Failed to parse time specification: {when}\n")
            return 1
        delay = target - time.time() if target > time.time() else target + 86400 - time.time()
    error = request(action, " ".join(["shutdown", *argv]), delay)
    if error:
        sys.stderr.write(f"Failed to {action} system via logind: {error}\n")
        return 1
    if delay > 0:
        at = time.strftime("%a %Y-%m-%d %H:%M:%S %Z", time.localtime(time.time() + delay))
        kind = "Reboot" if action == "reboot" else "Shutdown"
        sys.stdout.write(f"{kind} scheduled for {at}, use 'shutdown -c' to cancel.\n")
    return 0
