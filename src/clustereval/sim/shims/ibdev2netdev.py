#!/usr/bin/python3
# ruff: noqa: UP031  (printf formats mirror the C / shell format strings of the real tool)
"""Simulated ``ibdev2netdev`` (MLNX_OFED / DOCA-OFED script) for one simulated node (stdlib only).

Like the real script it walks ``/sys/class/infiniband/*/device/net/*`` (``$SIMNODE_SYSFS`` replaces
``/sys`` in tests) and prints ``mlx5_0 port 1 ==> ibp26s0 (Up)``, the netdev state from its
``operstate`` (``up`` gives ``Up``, anything else ``Down``), one line per device in name order.
"""

import os
import sys

from simnode import read_attr


def main(argv):
    root = os.path.join(os.environ.get("SIMNODE_SYSFS") or "/sys", "class", "infiniband")
    try:
        names = sorted(os.listdir(root))
    except OSError:
        names = []
    for name in names:
        net = os.path.join(root, name, "device", "net")
        netdevs = sorted(os.listdir(net)) if os.path.isdir(net) else []
        port_dir = os.path.join(root, name, "ports")
        ports = sorted(os.listdir(port_dir)) if os.path.isdir(port_dir) else ["1"]
        for netdev in netdevs:
            state = "Up" if read_attr(os.path.join(net, netdev, "operstate")) == "up" else "Down"
            sys.stdout.write("%s port %s ==> %s (%s)\n" % (name, ports[0], netdev, state))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
