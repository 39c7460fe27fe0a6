"""``ip link`` of a simulated node (stdlib only): the node's own interfaces, as iproute2 6.1 prints them.

The nodes share the machine's network namespace (they talk over loopback addresses), so netlink would
list the machine's interfaces. ``ip [-j] [-p] [-d] [-o] [-br] link [show|list] [[dev] NAME]`` is answered from
the node's ``/sys/class/net`` instead (the system overlay area: ``lo`` and the profile's interfaces), each
with the attributes the kernel keeps there (``ifindex``, ``flags``, ``mtu``, ``operstate``, ``carrier``,
``address``, ``broadcast``, ``type``, ``tx_queue_len``, the ``device`` link for parentbus/parentdev).
Everything else (``addr``, ``route``, other options) runs the real ``/usr/sbin/ip``.
"""

import json
import os
import re
import sys

from simnode import read_attr

REAL = "/usr/sbin/ip"
SYSFS = os.path.join(os.environ.get("SIMNODE_SYSFS") or "/sys", "class", "net")  # SIMNODE_SYSFS: tests
OPTIONS = {"-j": "json", "-json": "json", "-d": "details", "-details": "details", "-o": "oneline",
           "-oneline": "oneline", "-p": "pretty", "-pretty": "pretty", "-br": "brief", "-brief": "brief"}
# iproute2's print order of the interface flags (ip/ipaddress.c print_link_flags), after NO-CARRIER
FLAG_BITS = [("LOOPBACK", 0x8), ("BROADCAST", 0x2), ("POINTOPOINT", 0x10), ("MULTICAST", 0x1000),
             ("NOARP", 0x80), ("ALLMULTI", 0x200), ("PROMISC", 0x100), ("UP", 0x1)]
LINK_TYPES = {"1": "ether", "32": "infiniband", "772": "loopback"}
BDF = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")


def parse(argv):
    """(options, device name or None) for an ``ip link show`` call, or None for the real tool."""
    opts, rest = set(), list(argv)
    while rest and rest[0].startswith("-"):
        if rest[0] not in OPTIONS:
            return None
        opts.add(OPTIONS[rest.pop(0)])
    if not rest or rest[0] not in ("link", "l", "li", "lin"):
        return None
    rest.pop(0)
    if rest and rest[0] in ("show", "list", "lst", "ls", "sh"):
        rest.pop(0)
    if rest and rest[0] == "dev":
        rest.pop(0)
    if len(rest) > 1:
        return None
    return opts, (rest[0] if rest else None)


def interface(name):
    base = os.path.join(SYSFS, name)
    kind = LINK_TYPES.get(read_attr(os.path.join(base, "type")), "ether")
    flags_value = int(read_attr(os.path.join(base, "flags"), "0x0"), 16)
    up, carrier = bool(flags_value & 0x1), read_attr(os.path.join(base, "carrier")) == "1"
    flags = (["NO-CARRIER"] if up and not carrier else []) + [f for f, bit in FLAG_BITS if flags_value & bit]
    if up and carrier:
        flags.append("LOWER_UP")
    state = read_attr(os.path.join(base, "operstate"), "unknown").upper()
    link = {"ifindex": int(read_attr(os.path.join(base, "ifindex"), "0")), "ifname": name, "flags": flags,
            "mtu": int(read_attr(os.path.join(base, "mtu"), "1500")),
            "qdisc": "noqueue" if kind == "loopback" else "mq", "operstate": state, "linkmode": "DEFAULT",
            "group": "default", "txqlen": int(read_attr(os.path.join(base, "tx_queue_len"), "1000")),
            "link_type": kind, "address": read_attr(os.path.join(base, "address")),
            "broadcast": read_attr(os.path.join(base, "broadcast"))}
    details = {"promiscuity": 0, "allmulti": 0, "min_mtu": 0 if kind == "loopback" else 68,
               "max_mtu": {"loopback": 0, "infiniband": 65520}.get(kind, 9978)}
    if kind == "infiniband":
        details["linkinfo"] = {"info_kind": "ipoib", "info_data": {"pkey": 65535, "mode": "datagram", "umcast": 0}}
    queues = 1 if kind == "loopback" else 64
    details.update({"inet6_addr_gen_mode": "eui64", "num_tx_queues": queues, "num_rx_queues": queues,
                    "gso_max_size": 65536, "gso_max_segs": 65535,
                    "tso_max_size": 524280, "tso_max_segs": 65535, "gro_max_size": 65536})
    try:
        parent = os.path.basename(os.readlink(os.path.join(base, "device")))
    except OSError:
        parent = None
    if parent:
        details.update(parentbus="pci" if BDF.match(parent) else "virtio", parentdev=parent)
    return link, details


def text(link, details, with_details):
    lines = [f"{link['ifindex']}: {link['ifname']}: <{','.join(link['flags'])}> mtu {link['mtu']} qdisc "
             f"{link['qdisc']} state {link['operstate']} mode DEFAULT group default qlen {link['txqlen']}",
             f"    link/{link['link_type']} {link['address']} brd {link['broadcast']}"]
    if with_details:
        tail = (f" promiscuity 0  allmulti 0 minmtu {details['min_mtu']} maxmtu {details['max_mtu']} ")
        info = details.get("linkinfo")
        if info:
            tail += (f"\n    ipoib pkey  {info['info_data']['pkey']:#06x} mode  {info['info_data']['mode']} "
                     f"umcast  {info['info_data']['umcast']:04x} ")
        tail += (f"addrgenmode eui64 numtxqueues {details['num_tx_queues']} numrxqueues {details['num_rx_queues']} "
                 "gso_max_size 65536 gso_max_segs 65535 tso_max_size 524280 tso_max_segs 65535 gro_max_size 65536 ")
        if "parentbus" in details:
            tail += f"parentbus {details['parentbus']} parentdev {details['parentdev']} "
        lines[-1] += tail
    return "\n".join(lines).split("\n")


def main(argv):
    call = parse(argv)
    if call is None:
        sys.stdout.flush()
        os.execv(REAL, ["ip", *argv])
    opts, wanted = call
    try:
        names = os.listdir(SYSFS)
    except OSError:
        names = []
    if wanted is not None:
        if wanted not in names:
            sys.stderr.write(f'Device "{wanted}" does not exist.\n')
            return 1
        names = [wanted]
    rows = sorted((interface(n) for n in names), key=lambda row: row[0]["ifindex"])
    if "json" in opts:
        objects = [{**link, **details} if "details" in opts else link for link, details in rows]
        sys.stdout.write((json.dumps(objects, indent=4) if "pretty" in opts
                          else json.dumps(objects, separators=(",", ":"))) + "\n")
        return 0
    if "brief" in opts:  # ip/iplink.c print_linkinfo_brief: name, state, address, flags (padded columns)
        for link, _details in rows:
            sys.stdout.write(f"{link['ifname']:<16} {link['operstate']:<14} {link['address']} "
                             f"<{','.join(link['flags'])}> \n")
        return 0
    for link, details in rows:
        lines = text(link, details, "details" in opts)
        sys.stdout.write(("\\".join(lines) if "oneline" in opts else "\n".join(lines)) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
