"""Parser for ``ofed_info -s`` (MLNX_OFED 4.x-24.x, DOCA-OFED) and the first line of plain ``ofed_info``.

``MLNX_OFED_LINUX-5.8-1.1.2.1:`` (the usual form), ``OFED-internal-24.10-1.1.4.0.200:``
(DOCA-OFED and some 5.0
builds) and the same without the trailing colon are understood. The version is split into its release
(``24.10``) and build (``1.1.4.0.200``).
"""

from __future__ import annotations

import re
from typing import Any

from clustereval.parsers import register
from clustereval.parsers._common import result
from clustereval.parsers.errors import ParseError

_VERSION = re.compile(r"^(?P<flavour>MLNX_OFED_LINUX|OFED-internal|OFED|MLNX_EN|DOCA-OFED|doca-ofed)"
                      r"-(?P<release>\d+\.\d+)-(?P<build>[0-9][0-9A-Za-z.]*?)(?P<colon>:)?\s*(?:\(.*\))?$")


@register("ofed_info")
def parse(text: str) -> dict[str, Any]:
    """Parse the OFED/DOCA version string printed by ``ofed_info -s``."""
    if not text or not text.strip():
        raise ParseError("ofed_info: the output is empty (is MLNX_OFED / DOCA-OFED installed?)")
    warnings: list[str] = []
    for raw in text.split("\n"):
        line = raw.strip()
        if not line:
            continue
        match = _VERSION.match(line)
        if match:
            if not match.group("colon"):
                warnings.append("version line lacks the trailing ':' that ofed_info -s prints")
            flavour = match.group("flavour")
            return result(
                "ofed_info", "short",
                complete=True,
                warnings=warnings,
                raw=line,
                flavour=flavour,
                distribution="MLNX_OFED" if flavour == "MLNX_OFED_LINUX" else flavour,
                version=f"{match.group('release')}-{match.group('build')}",
                release=match.group("release"),
                build=match.group("build"),
            )
        if "command not found" in line or "No such file" in line:
            raise ParseError(f"ofed_info: the tool is missing: {line[:120]}")
    first = text.strip().split("\n")[0][:80]
    raise ParseError(f"ofed_info: no OFED version string (e.g. 'MLNX_OFED_LINUX-5.8-1.1.2.1:') in {first!r}")
