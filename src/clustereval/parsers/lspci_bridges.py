"""Bridge bus ranges from ``lspci -D -nn -vvv`` text (pciutils 3.x), which the ``lspci`` parser's devices
do not carry: a pure reader used beside that parser to place GPUs and NICs under their PCIe switches.

:func:`bus_ranges` maps each function that prints a ``Bus: primary=.., secondary=.., subordinate=..``
line (a bridge) to its ``(secondary, subordinate)`` bus numbers; :func:`access_denied` says whether lspci
ran without the privilege to read capabilities (``<access denied>``). The text is first normalised as the
``lspci`` parser's is (:func:`clustereval.parsers._common.clean`: CRLF, launcher prefixes, trailing blanks,
a shared indentation), so both read the same device headers from the same probe output.
"""

from __future__ import annotations

import re

from clustereval.parsers._common import clean

_HEADER = re.compile(r"^(?:([0-9a-fA-F]{4}):)?([0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])\s")
_BUS_LINE = re.compile(r"Bus: primary=([0-9a-f]{2}), secondary=([0-9a-f]{2}), subordinate=([0-9a-f]{2})", re.I)


def bus_ranges(text: str) -> dict[str, tuple[int, int]]:
    """``{"0000:17:01.0": (0x19, 0x19)}``: the buses behind each bridge, by its full address."""
    ranges: dict[str, tuple[int, int]] = {}
    current = None
    for line in clean(text).split("\n"):
        header = _HEADER.match(line)
        if header:
            current = f"{(header.group(1) or '0000').lower()}:{header.group(2).lower()}"
            continue
        bus = _BUS_LINE.search(line)
        if bus and current:
            ranges[current] = (int(bus.group(2), 16), int(bus.group(3), 16))
    return ranges


def access_denied(text: str) -> bool:
    return "<access denied>" in text
