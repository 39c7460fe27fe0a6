"""Parser for util-linux ``findmnt -J`` (2.27+): the kernel's mount table as JSON, children nested.

``findmnt-json`` gives ``filesystems``: every mount flattened in findmnt's own order (a mount, then the
mounts below it), each ``{"target", "source", "fstype", "options"}`` as printed (None where findmnt
printed no such column). The order matters to readers: an automount point (``autofs``) comes before the
filesystem mounted on it at the same target.
"""

from __future__ import annotations

import json
from typing import Any

from clustereval.parsers import register
from clustereval.parsers._common import result
from clustereval.parsers.errors import ParseError

TOOL = "findmnt-json"
COLUMNS = ("target", "source", "fstype", "options")


def flatten(items: Any) -> list[dict[str, Any]]:
    """findmnt's ``filesystems`` list (children nested) as one list, each mount before its children."""
    out: list[dict[str, Any]] = []

    def walk(level: Any) -> None:
        for item in level if isinstance(level, list) else []:
            if isinstance(item, dict):
                out.append({column: item.get(column) for column in COLUMNS})
                walk(item.get("children") or [])

    walk(items)
    return out


def filesystems(text: str) -> list[dict[str, Any]]:
    """The mounts of one ``findmnt -J`` document, flattened; ParseError when it is not findmnt's JSON."""
    try:
        tree = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ParseError(f"findmnt printed unreadable JSON: {exc}") from None
    if not isinstance(tree, dict) or not isinstance(tree.get("filesystems"), list):
        raise ParseError("findmnt JSON has no 'filesystems' list")
    return flatten(tree["filesystems"])


@register(TOOL)
def parse(text: str) -> dict[str, Any]:
    return result(TOOL, "json", complete=True, filesystems=filesystems(text))
