"""The check catalogue: data describing every check id (title, phase, domain, severity, why, fix).

The catalogue is every ``checks/catalogue.d/*.yml`` file (one per area, each a ``checks:`` list).
Optional keys: ``scope`` (``node``, the default, or ``cluster``), ``cmax`` (the ClusterMAX audit
criterion ids the check covers), ``probes`` (node probes it reads), ``unit``, ``acts`` (true when the
check must change node state to measure, and restores it), ``recorded_by: callback`` (results only the
results callback writes, never selected for judging).
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Any

import yaml

REQUIRED = ("id", "title", "phase", "domain", "severity", "harnesses", "why", "fix")


SCOPES = ("node", "cluster")


@cache
def load() -> dict[str, dict[str, Any]]:
    """Return the packaged catalogue as ``{check_id: entry}``."""
    folder = resources.files("clustereval.checks").joinpath("catalogue.d")
    entries: list[dict[str, Any]] = []
    for item in sorted(folder.iterdir(), key=lambda f: f.name):
        if item.name.endswith(".yml"):
            entries.extend(yaml.safe_load(item.read_text(encoding="utf-8")).get("checks") or [])
    catalogue: dict[str, dict[str, Any]] = {}
    for entry in entries:
        entry.setdefault("scope", "cluster" if ".fleet." in entry.get("id", "") else "node")
        entry.setdefault("cmax", [])
        if entry["scope"] not in SCOPES:
            raise ValueError(f"catalogue entry {entry.get('id')!r}: scope must be one of {SCOPES}")
        missing = [key for key in REQUIRED if key not in entry]
        if missing:
            raise ValueError(f"catalogue entry {entry.get('id')!r} lacks {', '.join(missing)}")
        if entry["id"] in catalogue:
            raise ValueError(f"catalogue lists {entry['id']!r} twice")
        catalogue[entry["id"]] = entry
    return catalogue


def select(phase: str, scope: str, domain: str | None = None) -> list[str]:
    """Check ids of a phase and scope (and domain), in catalogue order."""
    return [cid for cid, e in load().items()
            if not e.get("recorded_by") and e["phase"] == phase and e["scope"] == scope
            and (domain is None or e["domain"] == domain)]


def entry(check_id: str) -> dict[str, Any]:
    try:
        return load()[check_id]
    except KeyError:
        raise KeyError(f"check {check_id!r} is not in the check catalogue (checks/catalogue.d/)") from None
