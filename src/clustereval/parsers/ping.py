"""Parser for ``ping -q`` summaries (iputils, as on every Linux distribution; BusyBox's shorter form too).

Understands the statistics block::

    --- 10.0.0.2 ping statistics ---
    20 packets transmitted, 20 received, 0% packet loss, time 3812ms
    rtt min/avg/max/mdev = 0.020/0.043/0.081/0.015 ms

with ``+N duplicates`` / ``+N corrupted`` / ``+N errors`` in the counts line (in that order, as iputils prints
them), no ``rtt`` line when nothing came back, and BusyBox's ``N packets received, N duplicates`` and
``round-trip min/avg/max = a/b/c ms``. Result: ``destination``, ``transmitted``, ``received``, ``errors``,
``duplicates``, ``corrupted``, ``loss_pct``, ``time_ms`` and ``rtt_ms`` (``min``/``avg``/``max``/``mdev``, or
None when no reply came). Output that stops early (no rtt line after replies, an iputils counts line without
its ``time``) gives ``complete: False``. A name that does not resolve (``ping: NAME: Name or service not
known``) and output without a statistics block raise ParseError.
"""

from __future__ import annotations

import re
from typing import Any

from clustereval.parsers import register
from clustereval.parsers._common import result, to_float, to_int
from clustereval.parsers.errors import ParseError

TOOL = "ping"
_HEAD = re.compile(r"^---\s+(\S+)\s+ping statistics\s+---$")
_COUNTS = re.compile(r"^(\d+) packets transmitted, (\d+) (packets )?received(?:, \+?(\d+) duplicates)?"
                     r"(?:, \+(\d+) corrupted)?(?:, \+(\d+) errors)?, ([\d.]+)% packet loss(?:, time (\d+)ms)?")
_RTT = re.compile(r"^(?:rtt|round-trip) min/avg/max(?:/mdev)? = ([\d.]+)/([\d.]+)/([\d.]+)(?:/([\d.]+))? ms")
_FAILURE = re.compile(r"^ping: (.*)$")


@register(TOOL)
def parse(text: str) -> dict[str, Any]:
    lines = [line.strip() for line in text.splitlines()]
    destination = counts = rtt = None
    failures = []
    for line in lines:
        if (m := _HEAD.match(line)) is not None:
            destination = m.group(1)
        elif (m := _COUNTS.match(line)) is not None:
            counts = m
        elif (m := _RTT.match(line)) is not None:
            rtt = m
        elif (m := _FAILURE.match(line)) is not None:
            failures.append(m.group(1))
    if counts is None:
        if failures:
            raise ParseError(f"ping failed: {failures[0][:200]}")
        raise ParseError("ping printed no statistics block (the output stops before its summary)")
    rtt_ms = None
    if rtt is not None:
        rtt_ms = {"min": to_float(rtt.group(1)), "avg": to_float(rtt.group(2)), "max": to_float(rtt.group(3)),
                  "mdev": to_float(rtt.group(4)) if rtt.group(4) else None}
    received = to_int(counts.group(2)) or 0
    warnings = [] if rtt is not None or received == 0 else ["replies were counted but no rtt line followed"]
    busybox = counts.group(3) is not None  # "N packets received": BusyBox, which prints no time
    if counts.group(8) is None and not busybox:
        warnings.append("the counts line stops before its time (the output is cut short)")
    return result(TOOL, "busybox" if busybox or (rtt is not None and not rtt.group(4)) else "iputils",
                  complete=(rtt is not None or received == 0) and (busybox or counts.group(8) is not None),
                  warnings=warnings, destination=destination,
                  transmitted=to_int(counts.group(1)), received=received,
                  duplicates=to_int(counts.group(4)) or 0, corrupted=to_int(counts.group(5)) or 0,
                  errors=to_int(counts.group(6)) or 0, loss_pct=to_float(counts.group(7)),
                  time_ms=to_int(counts.group(8)) if counts.group(8) else None, rtt_ms=rtt_ms)
