"""Parser for ``ibdev2netdev`` and ``ibdev2netdev -v`` (MLNX_OFED 4.x-24.x, DOCA-OFED).

Plain: ``mlx5_0 port 1 ==> ens64np1 (Up)``. Verbose: ``0000:31:00.0 mlx5_0 (MT4117 - MT2138K10121)
CX4121A - ConnectX-4 LX SFP28 fw 14.27.1016 port 1 (DOWN  ) ==> ens4f0 (Down)``, including SR-IOV VFs printed
as ``(MT4116 - NA)`` with an empty description and descriptions padded with many spaces before ``fw``.
The PCI address is kept as ``bus:dev.fn`` without its domain: the launcher-prefix cleaning can take an
all-digit domain (every ``-v`` line starts with ``0000:``) for an ``srun -l`` rank prefix, so the domain is
not reliable. The RDMA port state
(verbose only) and the netdev link state are kept apart: a port can be ACTIVE while its
netdev is Down.
"""

from __future__ import annotations

import re
from typing import Any

from clustereval.parsers import register
from clustereval.parsers._common import result
from clustereval.parsers.errors import ParseError

_PLAIN = re.compile(r"^(?P<dev>\S+) port (?P<port>\d+) ==> (?P<netdev>\S+) \((?P<link>[^)]*)\)\s*$")
_VERBOSE = re.compile(
    r"^(?P<pci>(?:[0-9a-fA-F]{4}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])\s+(?P<dev>\S+)\s+"
    r"\((?P<mt>[^\s)]+)\s*-\s*(?P<psid>[^)]*?)\)\s*(?P<desc>.*?)\s*fw\s+(?P<fw>\S+)\s+port\s+(?P<port>\d+)\s+"
    r"\((?P<state>[^)]*)\)\s*==>\s*(?P<netdev>\S+)\s+\((?P<link>[^)]*)\)\s*$"
)


@register("ibdev2netdev")
def parse(text: str) -> dict[str, Any]:
    """Parse ``ibdev2netdev`` (plain or ``-v``) into one mapping per RDMA device port."""
    if not text or not text.strip():
        raise ParseError("ibdev2netdev: the output is empty (no RDMA device has a network interface)")
    mappings: list[dict[str, Any]] = []
    warnings: list[str] = []
    verbose = False
    for raw in text.split("\n"):
        line = raw.strip()
        if not line:
            continue
        match = _VERBOSE.match(line)
        if match:
            verbose = True
            psid = match.group("psid").strip()
            mappings.append({
                "device": match.group("dev"), "port": int(match.group("port")),
                "netdev": match.group("netdev"), "link": match.group("link").strip(),
                "up": match.group("link").strip().lower() == "up",
                "pci": match.group("pci").lower().split(":", 1)[-1] if match.group("pci").count(":") == 2
                else match.group("pci").lower(),
                "mt": match.group("mt"),
                "board": None if psid in ("", "NA", "N/A") else psid,
                "description": match.group("desc").strip() or None,
                "firmware_version": match.group("fw"),
                "port_state": match.group("state").strip(),
                "port_active": match.group("state").strip().upper() == "ACTIVE",
            })
            continue
        match = _PLAIN.match(line)
        if match:
            mappings.append({
                "device": match.group("dev"), "port": int(match.group("port")),
                "netdev": match.group("netdev"), "link": match.group("link").strip(),
                "up": match.group("link").strip().lower() == "up",
            })
            continue
        warnings.append(f"unrecognised line: {line[:160]}")
    if not mappings:
        raise ParseError("ibdev2netdev: no 'DEVICE port N ==> NETDEV (State)' line found")
    return result(
        "ibdev2netdev", "verbose" if verbose else "plain",
        complete=not warnings,
        warnings=warnings,
        mappings=mappings,
        netdev_by_device={f"{m['device']}/{m['port']}": m["netdev"] for m in mappings},
        up=[m["netdev"] for m in mappings if m["up"]],
        down=[m["netdev"] for m in mappings if not m["up"]],
    )
