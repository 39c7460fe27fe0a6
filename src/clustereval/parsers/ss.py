"""Parser for iproute2 ``ss -Hltn`` / ``ss -ltnpH`` (5.x/6.x): listening TCP sockets, no header row.

Columns are ``State Recv-Q Send-Q Local-Address:Port Peer-Address:Port [Process]``. ``ss`` gives
``sockets``: one ``{"state", "host", "port", "processes"}`` per row of four columns or more; ``port`` is
None when the local column ends in no number, ``host`` has IPv6 brackets and a ``%interface`` zone
removed (``*`` and ``0.0.0.0`` stay as printed, ``""`` when the row printed none), ``processes`` the
``users:(("name",pid=…))`` names (``-p`` only). ``understood`` says
whether the text looks like ss output at all (a state word or an ``:port`` column).
"""

from __future__ import annotations

import re
from typing import Any

from clustereval.parsers import register
from clustereval.parsers._common import result

TOOL = "ss"
_PROCESS = re.compile(r'\(\("([^"]+)"')
_LOOKS_LIKE_SS = re.compile(r"LISTEN|UNCONN|:\d+\s")


def sockets(text: str) -> list[dict[str, Any]]:
    """Rows of ss output with at least four columns (shorter lines are not socket rows)."""
    out = []
    for line in text.splitlines():
        cols = line.split()
        if len(cols) < 4:
            continue
        host, _, port = cols[3].rpartition(":")
        out.append({"state": cols[0], "host": host.strip("[]").split("%")[0],
                    "port": int(port) if port.isascii() and port.isdigit() else None,
                    "processes": _PROCESS.findall(line)})
    return out


@register(TOOL)
def parse(text: str) -> dict[str, Any]:
    understood = not text.strip() or bool(_LOOKS_LIKE_SS.search(text))
    return result(TOOL, "table", complete=True, understood=understood, sockets=sockets(text))
