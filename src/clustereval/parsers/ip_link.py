"""Parser for iproute2 ``ip -j -d link show`` (4.x-6.x JSON; ``parentbus``/``parentdev`` from 5.x).

``ip-link-json`` gives ``links``: each interface object as ip prints it (``ifname``, ``flags``,
``operstate``, ``link_type``, ``linkinfo``, ``parentbus``...), those without an ``ifname`` left out.
"""

from __future__ import annotations

import json
from typing import Any

from clustereval.parsers import register
from clustereval.parsers._common import result
from clustereval.parsers.errors import ParseError

TOOL = "ip-link-json"


@register(TOOL)
def parse(text: str) -> dict[str, Any]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ParseError(f"ip -j link printed no JSON: {exc}") from None
    if not isinstance(data, list):
        raise ParseError("ip -j link did not print a JSON list")
    return result(TOOL, "json", complete=True,
                  links=[item for item in data if isinstance(item, dict) and item.get("ifname")])
