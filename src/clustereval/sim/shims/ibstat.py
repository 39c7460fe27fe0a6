#!/usr/bin/python3
# ruff: noqa: UP031  (printf formats mirror the C / shell format strings of the real tool)
"""Simulated ``ibstat`` (infiniband-diags, rdma-core 47) for one simulated node (stdlib only).

Reads the node's ``/sys/class/infiniband`` (the fabric overlay; ``$SIMNODE_SYSFS`` replaces ``/sys`` in
tests), as the real tool reads sysfs through libibumad, and prints the same tab-indented blocks:
``CA 'mlx5_0'`` with type, ports, firmware, GUIDs, then ``Port 1:`` with State, Physical state, Rate,
Base lid, LMC, SM lid, Capability mask, Port GUID and Link layer. ``ibstat -l`` lists CA names,
``ibstat CA`` shows one CA; an unknown CA gets the real ``ibpanic`` line and exit status 255.
"""

import os
import sys

from simnode import read_attr

STATES = {"1": "Down", "2": "Initializing", "3": "Armed", "4": "Active", "5": "Active/Defer"}


def sysfs():
    return os.path.join(os.environ.get("SIMNODE_SYSFS") or "/sys", "class", "infiniband")


def guid_hex(text):
    return "0x" + text.replace(":", "") if text else "0x0000000000000000"


def rate(text):
    value = text.split()[0] if text else "0"
    number = float(value)
    return "%d" % number if number == int(number) else value


def ca_block(name):
    base = os.path.join(sysfs(), name)
    port_dir = os.path.join(base, "ports")
    ports = sorted(os.listdir(port_dir), key=int) if os.path.isdir(port_dir) else []
    guid = guid_hex(read_attr(os.path.join(base, "node_guid")))
    fw = read_attr(os.path.join(base, "fw_ver"))
    lines = ["CA '%s'" % name, "\tCA type: %s" % read_attr(os.path.join(base, "hca_type")),
             "\tNumber of ports: %d" % len(ports), "\tFirmware version: %s" % fw,
             "\tHardware version: %s" % (read_attr(os.path.join(base, "hw_rev")) or "0"),
             "\tNode GUID: %s" % guid, "\tSystem image GUID: %s" % guid]
    for port in ports:
        pdir = os.path.join(base, "ports", port)
        state = read_attr(os.path.join(pdir, "state"), "1: DOWN").split(":")[0].strip()
        phys = read_attr(os.path.join(pdir, "phys_state"), "3: Disabled").split(":", 1)[-1].strip()
        layer = read_attr(os.path.join(pdir, "link_layer"), "InfiniBand")
        gid = read_attr(os.path.join(pdir, "gids", "0"))
        port_guid = guid_hex(":".join(gid.split(":")[4:])) if layer == "InfiniBand" else "0x0000000000000000"
        lines += ["\tPort %s:" % port, "\t\tState: %s" % STATES.get(state, "Down"),
                  "\t\tPhysical state: %s" % phys, "\t\tRate: %s" % rate(read_attr(os.path.join(pdir, "rate"))),
                  "\t\tBase lid: %d" % int(read_attr(os.path.join(pdir, "lid"), "0x0"), 16),
                  "\t\tLMC: %s" % read_attr(os.path.join(pdir, "lid_mask_count"), "0"),
                  "\t\tSM lid: %d" % int(read_attr(os.path.join(pdir, "sm_lid"), "0x0"), 16),
                  "\t\tCapability mask: 0x%08x" % int(read_attr(os.path.join(pdir, "cap_mask"), "0x0"), 16),
                  "\t\tPort GUID: %s" % port_guid, "\t\tLink layer: %s" % layer]
    return "\n".join(lines) + "\n"


def main(argv):
    try:
        names = sorted(os.listdir(sysfs()))
    except OSError:
        names = []
    args = [a for a in argv if not a.startswith("-")]
    if "-l" in argv:
        sys.stdout.write("".join(n + "\n" for n in names))
        return 0
    if not names:
        sys.stderr.write("ibpanic: [%d] main: can't list IB device names: No such file or directory\n" % os.getpid())
        return 255
    wanted = args[:1] or names
    out = []
    for name in wanted:
        if name not in names:
            sys.stdout.write("".join(out))
            sys.stderr.write("ibpanic: [%d] main: stat of IB device '%s' failed: No such file or directory\n"
                             % (os.getpid(), name))
            return 255
        out.append(ca_block(name))
    sys.stdout.write("".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
