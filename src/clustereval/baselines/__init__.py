"""Expected values per hardware class: data files with an explicit direction and warn/fail levels.

Each ``baselines/<area>.yml`` holds ``classes: {class: {check_id: limit}}`` and a ``default_class``.
A limit is ``{direction: higher|lower, warn: X, fail: Y, unit: U, kind: number|version}``.
Inventory overrides (``clustereval_baseline_overrides``) replace fields of a limit per check id.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from clustereval import yamldata


@dataclass(frozen=True)
class Limit:
    check: str
    direction: str
    warn: Any
    fail: Any
    unit: str
    kind: str
    source: str

    def expected(self) -> dict[str, Any]:
        """The ``expected`` block of a check result."""
        key = "min" if self.direction == "higher" else "max"
        return {key: self.warn, f"fail_{key}": self.fail, "direction": self.direction,
                "unit": self.unit, "source": self.source}


@cache
def _area(area: str) -> dict[str, Any]:
    text = resources.files("clustereval.baselines").joinpath(f"{area}.yml").read_text(encoding="utf-8")
    return yamldata.load(text)


def limit(area: str, check: str, hardware_class: str | None = None,
          overrides: dict[str, Any] | None = None) -> Limit:
    """The limit for ``check`` in baselines ``area`` for ``hardware_class`` (default class if None)."""
    data = _area(area)
    cls = hardware_class or data["default_class"]
    classes = data["classes"]
    if cls not in classes:
        raise KeyError(f"baselines/{area}.yml has no class {cls!r}; known: {', '.join(sorted(classes))}")
    if check not in classes[cls]:
        raise KeyError(f"baselines/{area}.yml class {cls!r} has no limit for {check}")
    spec = dict(classes[cls][check])
    source = f"baselines/{area}.yml#{cls}"
    override = (overrides or {}).get(check)
    if override:
        spec.update(override)
        source = f"inventory override of {source}"
    direction = spec.get("direction", "higher")
    if direction not in ("higher", "lower"):
        raise ValueError(f"{source}: direction must be 'higher' or 'lower', not {direction!r}")
    return Limit(check=check, direction=direction, warn=spec.get("warn"), fail=spec.get("fail"),
                 unit=spec.get("unit", ""), kind=spec.get("kind", "number"), source=source)


def version_key(version: str) -> tuple[int, ...]:
    """Numeric sort key of a version string: '5.15.0-105-generic' -> (5, 15, 0, 105)."""
    return tuple(int(part) for part in re.findall(r"\d+", str(version)))


def grade(value: Any, lim: Limit) -> str:
    """'pass', 'warn' or 'fail' for ``value`` against ``lim`` (honouring direction and kind)."""

    def worse(val: Any, bound: Any) -> bool:
        if bound is None:
            return False
        if lim.kind == "version":
            a, b = version_key(val), version_key(bound)
        else:
            a, b = float(val), float(bound)
        return a < b if lim.direction == "higher" else a > b

    if worse(value, lim.fail):
        return "fail"
    if worse(value, lim.warn):
        return "warn"
    return "pass"
