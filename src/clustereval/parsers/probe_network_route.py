"""Parser for the ``network_route`` probe (``checks/probes/network.yml``): the path to each mesh peer.

The probe prints, per destination, ``route <destination>: <ip -o route get output>`` and
``speed <device>: <Mb/s from /sys/class/net/DEV/speed, or 'unknown'>``. Result: ``routes``
``{destination: {"device", "source", "via", "local", "speed_mbps"}}`` — ``speed_mbps`` None when the
kernel does not know the link speed (loopback, many virtual NICs report none or -1). Output that stops early
(a route through a device without the speed line the probe prints next, a last line without its newline)
gives ``complete: False``.
"""

from __future__ import annotations

import re
from typing import Any

from clustereval.parsers import register
from clustereval.parsers._common import result, to_int
from clustereval.parsers.errors import ParseError

TOOL = "probe-network-route"
_ROUTE = re.compile(r"^route (\S+): (.*)$")
_SPEED = re.compile(r"^speed (\S+): (\S+)$")


def _field(words: list[str], key: str) -> str | None:
    return words[words.index(key) + 1] if key in words[:-1] else None


@register(TOOL)
def parse(text: str) -> dict[str, Any]:
    routes: dict[str, dict[str, Any]] = {}
    speeds: dict[str, int | None] = {}
    warnings = []
    cut = []
    pending = None  # the device of the last route: the probe prints its speed line next
    for line in text.splitlines():
        if (m := _ROUTE.match(line.strip())) is not None:
            if pending:
                cut.append(f"no speed line for {pending} before the next route")
            pending = None
            words = m.group(2).split()
            if not words or "dev" not in words:
                warnings.append(f"no route to {m.group(1)}: {m.group(2)[:120]}")
                routes[m.group(1)] = {"device": None, "source": None, "via": None, "local": False,
                                      "error": m.group(2)[:200]}
                continue
            routes[m.group(1)] = {"device": _field(words, "dev"), "source": _field(words, "src"),
                                  "via": _field(words, "via"), "local": words[0] == "local"}
            pending = routes[m.group(1)]["device"]
            if pending is None:
                cut.append(f"the route to {m.group(1)} stops at 'dev'")
        elif (m := _SPEED.match(line.strip())) is not None:
            speed = to_int(m.group(2))
            speeds[m.group(1)] = speed if speed is not None and speed > 0 else None
            if m.group(1) == pending:
                pending = None
    if not routes:
        raise ParseError(f"{TOOL}: no 'route <destination>:' line in the output")
    if pending:
        cut.append(f"no speed line for {pending} (the output stops early)")
    if not text.endswith("\n"):
        cut.append("the last line has no newline (the output is cut short)")
    for route in routes.values():
        route["speed_mbps"] = speeds.get(route["device"]) if route.get("device") else None
    return result(TOOL, "text", complete=not cut, warnings=warnings + cut, routes=routes)
