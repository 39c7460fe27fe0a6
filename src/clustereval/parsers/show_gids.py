"""Parser for MLNX_OFED / DOCA-OFED ``show_gids`` (the RoCE GID table script, OFED 4.x-24.x).

Rows are tab-separated ``DEV PORT INDEX GID IPv4 VER DEV``; the IPv4 cell is empty for link-local GIDs and may
carry padding; lines may end in stray spaces. The ``n_gids_found=N`` footer, when printed, is checked against
the rows read (a shorter table gives ``complete: False``).
"""

from __future__ import annotations

import re
from typing import Any

from clustereval.parsers import register
from clustereval.parsers._common import result, to_int
from clustereval.parsers.errors import ParseError

_GID = re.compile(r"^[0-9a-fA-F]{4}(?::[0-9a-fA-F]{4}){7}$")
_IPV4 = re.compile(r"^\d{1,3}(?:\.\d{1,3}){3}$")
_FOOTER = re.compile(r"^n_gids_found=(\d+)")


@register("show_gids")
def parse(text: str) -> dict[str, Any]:
    """Parse ``show_gids`` into GID entries (device, port, index, gid, ipv4, RoCE version, netdev)."""
    if not text or not text.strip():
        raise ParseError("show_gids: the output is empty")
    gids: list[dict[str, Any]] = []
    warnings: list[str] = []
    expected: int | None = None
    for raw in text.split("\n"):
        line = raw.strip()
        if not line or line.startswith(("DEV", "---")):
            continue
        footer = _FOOTER.match(line)
        if footer:
            expected = int(footer.group(1))
            continue
        tokens = line.split()
        gid_pos = next((i for i, t in enumerate(tokens) if _GID.match(t)), None)
        if gid_pos != 3 or len(tokens) < 5 or to_int(tokens[1]) is None or to_int(tokens[2]) is None:
            warnings.append(f"unrecognised line: {line[:160]}")
            continue
        rest = tokens[4:]
        ipv4 = rest.pop(0) if rest and _IPV4.match(rest[0]) else None
        version = rest.pop(0) if rest and re.fullmatch(r"v\d", rest[0]) else None
        gids.append({
            "device": tokens[0], "port": to_int(tokens[1]), "index": to_int(tokens[2]), "gid": tokens[3],
            "ipv4": ipv4, "roce_version": version, "netdev": rest[0] if rest else None,
        })
    if not gids:
        raise ParseError("show_gids: no GID rows found (expected 'DEV PORT INDEX GID IPv4 VER DEV')")
    if expected is not None and expected != len(gids):
        warnings.append(f"footer says {expected} GIDs but {len(gids)} rows were read")
    return result(
        "show_gids", "table",
        complete=expected is None or expected == len(gids),
        warnings=warnings,
        gids=gids,
        devices=sorted({g["device"] for g in gids}),
        n_gids_found=expected,
    )
