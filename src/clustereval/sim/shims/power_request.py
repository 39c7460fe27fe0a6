"""Ask the simulated node's BMC for a power transition (shared by the systemctl/reboot/shutdown shims).

Standalone (stdlib only): writes ``$SIMNODE_ROOT/power/request`` (default ``/sim/power/request``), which the
cluster's power daemon (clustereval/sim/power.py) picks up within 50 ms; the command itself returns at once,
as ``systemctl reboot`` does on a real node (the SSH session ends when the node goes down).
"""

import json
import os
import time


def request(action, by, delay_s=0.0):
    folder = os.path.join(os.environ.get("SIMNODE_ROOT") or "/sim", "power")
    try:
        os.makedirs(folder, exist_ok=True)
        tmp = os.path.join(folder, f".request.{os.getpid()}")
        with open(tmp, "w") as fh:
            json.dump({"action": action, "by": by, "t": time.time(), "not_before": time.time() + delay_s}, fh)
        os.replace(tmp, os.path.join(folder, "request"))
    except OSError as exc:
        return str(exc)
    return None
