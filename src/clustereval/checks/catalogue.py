"""The check catalogue: data describing every check id (title, phase, domain, severity, why, fix)."""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Any

import yaml

REQUIRED = ("id", "title", "phase", "domain", "severity", "harnesses", "why", "fix")


@cache
def load() -> dict[str, dict[str, Any]]:
    """Return the packaged catalogue as ``{check_id: entry}``."""
    text = resources.files("clustereval.checks").joinpath("catalogue.yml").read_text(encoding="utf-8")
    entries = yaml.safe_load(text)["checks"]
    catalogue: dict[str, dict[str, Any]] = {}
    for entry in entries:
        missing = [key for key in REQUIRED if key not in entry]
        if missing:
            raise ValueError(f"catalogue entry {entry.get('id')!r} lacks {', '.join(missing)}")
        if entry["id"] in catalogue:
            raise ValueError(f"catalogue lists {entry['id']!r} twice")
        catalogue[entry["id"]] = entry
    return catalogue


def entry(check_id: str) -> dict[str, Any]:
    try:
        return load()[check_id]
    except KeyError:
        raise KeyError(f"check {check_id!r} is not in the check catalogue (checks/catalogue.yml)") from None
