"""The dpkg database of a simulated node whose packages drift from the fleet's.

Nodes share the host's ``/var/lib/dpkg`` unless the profile gives them ``package_versions``
(``{package: version}``; version ``null`` removes the package): then the node shows its own copy of
the host's ``/var/lib/dpkg/status`` with those stanzas changed, so the real ``dpkg-query`` lists them.

Faults: ``package_versions``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

FAULTS = {"package_versions"}
STATUS = Path("/var/lib/dpkg/status")


def drift_status(text: str, versions: dict[str, Any]) -> str:
    """``text`` (a dpkg status file) with the named packages' Version changed, or removed when None."""
    out = []
    for stanza in text.split("\n\n"):
        name = next((line[9:].strip() for line in stanza.splitlines() if line.startswith("Package: ")), None)
        if name in versions:
            if versions[name] is None:
                continue
            stanza = "".join(f"Version: {versions[name]}\n" if line.startswith("Version: ") else line
                             for line in stanza.splitlines(keepends=True))
        out.append(stanza)
    return "\n\n".join(out)


def render(settings: dict[str, Any], state: dict[str, Any], tree) -> None:
    versions = (settings.get("faults") or {}).get("package_versions") or {}
    if versions and STATUS.is_file():
        tree.file(str(STATUS), drift_status(STATUS.read_text(encoding="utf-8"), versions))
