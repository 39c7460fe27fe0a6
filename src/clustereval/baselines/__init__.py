"""Expected values: data files with an explicit direction, separate warn and fail levels and a source.

Two shapes, both in ``baselines/<area>.yml``:

* ``classes: {class: {check_id: limit}}`` with a ``default_class`` — settings that do not depend on the
  hardware (minimum versions, configuration), read with :func:`limit`;
* ``references:`` — expected values **matched on the run's facts** (GPU model, fabric class and rate,
  storage device, ...) and on the result's params (world size, message size), read with
  :func:`reference`. See ``docs/engine.md`` for the format and the fallback order.

A limit is ``{direction: higher|lower, warn: X, fail: Y, unit: U, kind: number|version}``; in references
``warn``/``fail`` may also be relative (``"0.93x"``: 0.93 times the ``reference``), the reference may come
from the facts (``{fact: fabric_rate_gbps, scale: 0.125}``) or from the measured peers (``peers_median``),
and ``points`` holds per-point limits of a curve. Inventory overrides (``clustereval_baseline_overrides``)
replace fields of a limit per check id, whatever matched.
"""

from __future__ import annotations

import fnmatch
import re
import statistics
from dataclasses import dataclass, field, replace
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
    # Filled for references matched on facts: the reference value the relative levels were taken of,
    # how it was obtained, which reference entry matched, and per-point limits of a curve.
    reference: float | None = None
    basis: str | None = None
    matched: str | None = None
    points: dict[str, dict[str, Any]] = field(default_factory=dict)
    # The warn/fail levels as the reference wrote them (``"0.9x"``): a point with its own reference takes
    # the relative ones of it.
    levels: dict[str, Any] = field(default_factory=dict)

    def expected(self) -> dict[str, Any]:
        """The ``expected`` block of a check result."""
        key = "min" if self.direction == "higher" else "max"
        out = {key: self.warn, f"fail_{key}": self.fail, "direction": self.direction,
               "unit": self.unit, "source": self.source}
        if self.reference is not None:
            out["reference"] = self.reference
        if self.basis:
            out["basis"] = self.basis
        if self.matched:
            out["matched"] = self.matched
        return out

    def at(self, point: Any) -> Limit:
        """The limit for one point of a curve (e.g. one message size): its own levels when the reference
        lists the point, else this limit's."""
        spec = self.points.get(str(point))
        if not spec:
            return self
        reference = _number(spec.get("reference", self.reference))
        warn, fail = (spec.get(key, self.levels.get(key, getattr(self, key))) for key in ("warn", "fail"))
        return replace(self, reference=reference, warn=_level(warn, reference), fail=_level(fail, reference),
                       points={}, levels={})


class NoReference(LookupError):
    """No expected value is known for this hardware (the message says what was looked for)."""


@cache
def _area(area: str) -> dict[str, Any]:
    text = resources.files("clustereval.baselines").joinpath(f"{area}.yml").read_text(encoding="utf-8")
    return yamldata.load(text)


def limit(area: str, check: str, hardware_class: str | None = None,
          overrides: dict[str, Any] | None = None) -> Limit:
    """The limit for ``check`` in baselines ``area`` for ``hardware_class`` (default class if None)."""
    data = _area(area)
    cls = hardware_class or data.get("default_class")
    classes = data.get("classes") or {}  # an area may hold only references matched on facts
    if cls not in classes:
        raise KeyError(f"baselines/{area}.yml has no class {cls!r}; known: {', '.join(sorted(classes)) or 'none'}")
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


def graded(value: Any, lim: Limit) -> str:
    """:func:`grade`, or ``pass`` for a limit without levels (a reference recorded for context only)."""
    return grade(value, lim) if lim.warn is not None or lim.fail is not None else "pass"


def shortfall(value: float, lim: Limit, unit: str, digits: int = 4, basis: bool = False) -> str:
    """``"96 GB/s is below 250 GB/s (multinode-ndr)"``: the level ``value`` missed, for a summary."""
    side = "below" if lim.direction == "higher" else "above"
    level = lim.fail if graded(value, lim) == "fail" else lim.warn
    where = f"{lim.basis or 'reference'}, {lim.matched}" if basis else lim.matched
    return f"{value:.{digits}g} {unit} is {side} {level:.{digits}g} {unit} ({where})"


# ------------------------------------------------------------------------------ references matched on facts

_COMPARE = re.compile(r"^\s*(>=|<=|>|<|==|!=)\s*(-?\d+(?:\.\d+)?)\s*$")
_RELATIVE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*x\s*$", re.I)
PEER_REFERENCES = {"peers_median": statistics.median, "peers_max": max}


def _number(value: Any) -> float | None:
    try:
        return None if value is None or isinstance(value, bool) else float(value)
    except (TypeError, ValueError):
        return None


def _level(value: Any, reference: float | None) -> Any:
    """A warn/fail level: relative ('0.93x') levels become absolute against ``reference``."""
    if isinstance(value, str) and (m := _RELATIVE.match(value)):
        return None if reference is None else round(float(m.group(1)) * reference, 6)
    return value


def value_matches(wanted: Any, actual: Any) -> bool:
    """Whether a fact or param ``actual`` satisfies one ``match`` condition ``wanted``: a list (any of its
    items), a comparison string (``">=400"``), a glob (strings, case-insensitive) or an equal value."""
    if isinstance(wanted, list):
        return any(value_matches(item, actual) for item in wanted)
    if actual is None:
        return wanted is None
    if isinstance(wanted, str) and (m := _COMPARE.match(wanted)):
        number = _number(actual)
        if number is None:
            return False
        bound = float(m.group(2))
        return {">=": number >= bound, "<=": number <= bound, ">": number > bound, "<": number < bound,
                "==": number == bound, "!=": number != bound}[m.group(1)]
    if isinstance(wanted, str):
        return fnmatch.fnmatchcase(str(actual).lower(), wanted.lower())
    return wanted == actual or (_number(wanted) is not None and _number(wanted) == _number(actual))


def _holds(match: dict[str, Any], facts: dict[str, Any], params: dict[str, Any]) -> bool:
    for key, wanted in (match or {}).items():
        if key == "params":
            if not all(value_matches(v, params.get(k)) for k, v in (wanted or {}).items()):
                return False
        elif not value_matches(wanted, facts.get(key)):
            return False
    return True


def _specificity(match: dict[str, Any]) -> int:
    return sum(len(v or {}) if k == "params" else 1 for k, v in (match or {}).items())


def candidates(area: str, check: str, facts: dict[str, Any] | None = None,
               params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """The reference entries of ``area`` that hold a limit for ``check`` and whose ``match`` holds for the
    facts and params, most specific first (ties in file order): the fallback order."""
    entries = [e for e in _area(area).get("references") or [] if check in (e.get("limits") or {})]
    holding = [e for e in entries if _holds(e.get("match") or {}, facts or {}, params or {})]
    return sorted(holding, key=lambda e: -_specificity(e.get("match") or {}))


def reference(area: str, check: str, facts: dict[str, Any] | None = None, params: dict[str, Any] | None = None,
              overrides: dict[str, Any] | None = None, peers: list[float] | None = None) -> Limit:
    """The expected value of ``check`` for this hardware: the most specific reference of ``area`` whose
    ``match`` holds for ``facts`` and ``params``, with relative levels resolved; inventory ``overrides``
    replace any field. Raises :class:`NoReference` when none matches (the check then says so)."""
    data = _area(area)
    found = candidates(area, check, facts, params)
    override = dict((overrides or {}).get(check) or {})
    known = sorted({k for e in data.get("references") or [] for k in (e.get("match") or {})})
    shown = ", ".join(f"{k}={(facts or {}).get(k)}" for k in known if k != "params") or "no facts"
    missing = f"no reference in baselines/{area}.yml for this hardware ({shown})"
    if not found and not override:
        raise NoReference(missing)
    entry = found[0] if found else {"id": "inventory", "limits": {check: {}}}
    spec = {**entry["limits"][check], **override}
    source = str(spec.pop("source", None) or entry.get("source") or data.get("source") or "")
    origin = f"baselines/{area}.yml#{entry.get('id', 'reference')}" + (f" ({source.strip()})" if source else "")
    if override:
        origin = f"inventory override of {origin}" if found else "inventory override"
    direction = spec.get("direction", "higher")
    if direction not in ("higher", "lower"):
        raise ValueError(f"{origin}: direction must be 'higher' or 'lower', not {direction!r}")
    ref_spec = spec.get("reference")
    basis = None
    if isinstance(ref_spec, dict) and "fact" in ref_spec:
        fact = (facts or {}).get(ref_spec["fact"])
        ref_value = None if _number(fact) is None else _number(fact) * float(ref_spec.get("scale", 1))
        basis = f"fact {ref_spec['fact']}={fact}" + (f" x {ref_spec['scale']}" if "scale" in ref_spec else "")
        if ref_value is None:
            raise NoReference(f"{origin}: the reference is the fact {ref_spec['fact']}, unknown on this hardware")
    elif isinstance(ref_spec, str) and ref_spec in PEER_REFERENCES:
        values = [_number(v) for v in (peers or []) if _number(v) is not None]
        if len(values) < 2:
            raise NoReference(f"{origin}: the reference is the {ref_spec} of the measured peers, and fewer "
                              f"than two were measured")
        ref_value = float(PEER_REFERENCES[ref_spec](values))
        basis = f"{ref_spec} of {len(values)} measurements"
    else:
        ref_value = _number(ref_spec)
        basis = "reference value" if ref_value is not None else None
    relative = [key for key in ("warn", "fail") if isinstance(spec.get(key), str) and _RELATIVE.match(spec[key])]
    if relative and ref_value is None:
        # e.g. an inventory override of relative levels where no reference entry matched: without a reference
        # they are no levels at all, and every value would pass.
        raise NoReference(f"{origin if found else missing}: {' and '.join(relative)} are relative to a reference, "
                          f"and there is none")
    return Limit(check=check, direction=direction, warn=_level(spec.get("warn"), ref_value),
                 fail=_level(spec.get("fail"), ref_value), unit=spec.get("unit", ""),
                 kind=spec.get("kind", "number"), source=origin, reference=ref_value, basis=basis,
                 matched=str(entry.get("id", "")) or None,
                 points={str(point): dict(limits) for point, limits in (spec.get("points") or {}).items()},
                 levels={key: spec.get(key) for key in ("warn", "fail")})
