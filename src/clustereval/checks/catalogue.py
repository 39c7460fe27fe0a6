"""The check catalogue: data describing every check id (title, phase, domain, severity, why, fix).

The catalogue is every ``checks/catalogue.d/*.yml`` file (one per area, each a ``checks:`` list).
Optional keys: ``scope`` (``node``, the default, or ``cluster``), ``cmax`` (the ClusterMAX audit
criterion ids the check covers), ``probes`` (node probes it reads), ``unit``, ``acts`` (true when the
check must change node state to measure, and restores it), ``recorded_by: callback`` (results only the
results callback writes, never selected for judging), ``value`` (the one type the check's value has:
``number``, ``text``, ``list``, ``mapping`` or ``flag``; checked on every verdict), ``params`` (the
parameters that tell the variants of one parameterised check apart, with what each means), ``runs``
(for checks measured by a benchmark or a session: ``parallel``, ``exclusive`` — alone on the node — or
``cluster`` — once per cluster), ``series`` (what its series files hold), ``judged_with_fleet`` (a node check
that also compares the node with its siblings: judged once every node's facts are known, from the probes the
node kept).
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Any

from clustereval import yamldata

REQUIRED = ("id", "title", "phase", "domain", "severity", "harnesses", "why", "fix")


SCOPES = ("node", "cluster")
VALUE_TYPES = {"number": (int, float), "text": (str,), "list": (list, tuple), "mapping": (dict,), "flag": (bool,)}


@cache
def load() -> dict[str, dict[str, Any]]:
    """Return the packaged catalogue as ``{check_id: entry}``."""
    folder = resources.files("clustereval.checks").joinpath("catalogue.d")
    entries: list[dict[str, Any]] = []
    for item in sorted(folder.iterdir(), key=lambda f: f.name):
        if item.name.endswith(".yml"):
            entries.extend(yamldata.load(item.read_text(encoding="utf-8")).get("checks") or [])
    catalogue: dict[str, dict[str, Any]] = {}
    for entry in entries:
        entry.setdefault("scope", "cluster" if ".fleet." in entry.get("id", "") else "node")
        entry.setdefault("cmax", [])
        if entry["scope"] not in SCOPES:
            raise ValueError(f"catalogue entry {entry.get('id')!r}: scope must be one of {SCOPES}")
        missing = [key for key in REQUIRED if key not in entry]
        if missing:
            raise ValueError(f"catalogue entry {entry.get('id')!r} lacks {', '.join(missing)}")
        if entry.get("value") is not None and entry["value"] not in VALUE_TYPES:
            raise ValueError(f"catalogue entry {entry['id']!r}: value must be one of {sorted(VALUE_TYPES)}")
        if entry["id"] in catalogue:
            raise ValueError(f"catalogue lists {entry['id']!r} twice")
        catalogue[entry["id"]] = entry
    return catalogue


def select(phase: str, scope: str, domain: str | None = None) -> list[str]:
    """Check ids of a phase and scope (and domain), in catalogue order."""
    return [cid for cid, e in load().items()
            if not e.get("recorded_by") and e["phase"] == phase and e["scope"] == scope
            and (domain is None or e["domain"] == domain)]


def value_problem(entry_: dict[str, Any], value: Any) -> str | None:
    """Why ``value`` breaks the one value type the catalogue entry declares (None: it does not, or none is
    declared). No value at all (None) is always allowed: a verdict need not measure."""
    kind = entry_.get("value")
    if kind is None or value is None:
        return None
    types = VALUE_TYPES[kind]
    if isinstance(value, bool) and kind != "flag":
        return f"value {value!r} is a flag where the catalogue says {kind}"
    if not isinstance(value, types):
        return f"value {value!r} is a {type(value).__name__} where the catalogue says {kind}"
    return None


def entry(check_id: str) -> dict[str, Any]:
    try:
        return load()[check_id]
    except KeyError:
        raise KeyError(f"check {check_id!r} is not in the check catalogue (checks/catalogue.d/)") from None


@cache
def cmax_criteria() -> list[dict[str, Any]]:
    """The 73 public audit criteria clustereval measures its coverage against (data)."""
    text = resources.files("clustereval.checks").joinpath("cmax_criteria.yml").read_text(encoding="utf-8")
    return yamldata.load(text)["criteria"]


def coverage() -> dict[str, Any]:
    """Which public criteria the catalogue's checks cover, per criterion and harness.

    A criterion counts as covered for a harness when some check lists it under ``cmax`` and applies
    to that harness. Ids in the catalogue that are not public criteria are reported as unknown.
    """
    known = {c["id"] for c in cmax_criteria()}
    text = resources.files("clustereval.checks").joinpath("cmax_criteria.yml").read_text(encoding="utf-8")
    extras = {e["id"] for e in yamldata.load(text).get("extras") or []}
    by_criterion: dict[str, list[dict[str, Any]]] = {}
    unknown: dict[str, list[str]] = {}
    for check_id, item in load().items():
        for cid in item.get("cmax") or []:
            if cid in known or cid in extras:
                by_criterion.setdefault(cid, []).append(item)
            else:
                unknown.setdefault(cid, []).append(check_id)
    rows = []
    for criterion in cmax_criteria():
        checks_for = by_criterion.get(criterion["id"], [])
        covered = sorted({h for item in checks_for for h in item["harnesses"]} & set(criterion["harnesses"]))
        rows.append({**criterion, "checks": [item["id"] for item in checks_for], "covered_harnesses": covered,
                     "missing_harnesses": sorted(set(criterion["harnesses"]) - set(covered))})
    full = sum(1 for r in rows if r["checks"] and not r["missing_harnesses"])
    extra_rows = {cid: [item["id"] for item in by_criterion.get(cid, [])] for cid in sorted(extras)}
    return {"criteria": rows, "total": len(rows), "fully_covered": full, "extras": extra_rows,
            "partly_covered": sum(1 for r in rows if r["checks"] and r["missing_harnesses"]),
            "not_covered": sum(1 for r in rows if not r["checks"]), "unknown_ids": unknown}


FAILURE_MODE_KEYS = {"id", "title", "found_by", "sim"}
FINDING_STATUSES = ("warn", "fail")


@cache
def failure_modes() -> list[dict[str, Any]]:
    """The documented provider failure modes (``checks/failure_modes.yml``), each with the checks that find it
    (``found_by``: check id and the status it gives) and the simulated profile and nodes that rebuild it."""
    text = resources.files("clustereval.checks").joinpath("failure_modes.yml").read_text(encoding="utf-8")
    modes = yamldata.load(text).get("failure_modes") or []
    known = load()
    seen: set[str] = set()
    for mode in modes:
        where = f"failure mode {mode.get('id')!r}"
        if set(mode) != FAILURE_MODE_KEYS:
            raise ValueError(f"{where} must have exactly the keys {sorted(FAILURE_MODE_KEYS)}, has {sorted(mode)}")
        if mode["id"] in seen:
            raise ValueError(f"{where} is listed twice")
        seen.add(mode["id"])
        if not mode["found_by"]:
            raise ValueError(f"{where} names no check that finds it")
        for finding in mode["found_by"]:
            if finding.get("check") not in known:
                raise ValueError(f"{where} names {finding.get('check')!r}, which is not in the catalogue")
            if finding.get("status") not in FINDING_STATUSES:
                raise ValueError(f"{where}: {finding['check']} must find it with one of {FINDING_STATUSES}")
    return modes


def finds(check_id: str) -> list[str]:
    """Ids of the documented failure modes ``check_id`` finds."""
    return [m["id"] for m in failure_modes() if any(f["check"] == check_id for f in m["found_by"])]
