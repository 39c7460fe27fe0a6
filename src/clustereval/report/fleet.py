"""Reports that stay readable at fleet scale: passing detail grouped and folded, not repeated per host.

A check that passed on more than :data:`FOLD_PASSES_AT` subjects is shown as one line for all its passes (how
many, on which hosts, the value's spread and the expected value) beside a row for each subject that did not
pass. At 10,000 nodes x 200 checks that is some thirty thousand rows of findings instead of two million rows,
and it is what a reader wants: the failures first, the passes as a count. ``results.jsonl`` keeps every
result, each with its own raw artifacts (``raw/<host>/...``).

Reading such a run, the passes of those checks are held in fewer fields (:func:`slimmer`): what the folded line,
the score and the plots read (check, subject, variant, status, value, expected...), not their summaries and
artifact lists, which no report shows for a folded pass. That is what keeps two million results inside 2 GB.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Callable
from typing import Any

from clustereval import results as results_mod

# More passing subjects than this and a check's passes are folded into one line. Twenty keeps a node's or a
# small cluster's passes visible one by one (an 8-GPU node's per-GPU checks, a 16-node pair mesh's hosts).
FOLD_PASSES_AT = 20
# The fields a folded pass keeps: identity, verdict, value, and what the score, the caps and the plots read. Not
# the expected value: a check's first passes keep theirs, and a folded line shows it once for the check.
SLIM_FIELDS = ("check", "subject", "params", "status", "severity", "domain", "phase", "value", "unit",
               "series", "measured", "duration_s", "title")
_INTERNED = ("check", "status", "severity", "domain", "phase", "unit")
_SLIM_SET = frozenset(SLIM_FIELDS)


def _signature(result: dict[str, Any]) -> tuple[Any, ...]:
    """The values of the :data:`_INTERNED` fields of a result (None where absent)."""
    return (result.get("check"), result.get("status"), result.get("severity"), result.get("domain"),
            result.get("phase"), result.get("unit"))


def slimmer() -> Callable[[dict[str, Any]], dict[str, Any]]:
    """A ``keep`` function for :func:`clustereval.results.load`: passes beyond a check's first
    :data:`FOLD_PASSES_AT` lose the fields no report shows for them; repeated texts and the variant's mapping are
    shared between results instead of held once per result."""
    passes: dict[str, int] = {}
    shared: dict[Any, Any] = {}
    signatures: dict[tuple[Any, ...], tuple[Any, ...]] = {}

    def share(value: Any) -> Any:
        if isinstance(value, dict):
            try:
                key = ("dict", tuple(value.items()))
                return shared.setdefault(key, value)
            except TypeError:  # a list or mapping inside: rare, kept as it is
                return value
        return value

    def keep(result: dict[str, Any]) -> dict[str, Any]:
        # called once per line of a fleet's results. A new dict, not the old one with keys deleted: a dict never
        # shrinks, and the slim one holds a third of the memory
        if result.get("status") != "pass":
            return result
        check = result["check"]
        count = passes[check] = passes.get(check, 0) + 1
        if count <= FOLD_PASSES_AT:
            return result
        slim = {name: value for name, value in result.items() if name in _SLIM_SET}
        # the repeated texts of a pass (check, status, severity, domain, phase, unit) as one shared tuple: one
        # hash per result instead of one per field
        signature = _signature(result)
        try:
            shared_signature = signatures.setdefault(signature, signature)
        except TypeError:  # a unit that is no text: rare, kept as it is
            shared_signature = signature
        for name, text in zip(_INTERNED, shared_signature, strict=True):
            if text is not None:
                slim[name] = text
        if "params" in slim:
            slim["params"] = share(slim["params"])
        return slim

    return keep


def split_passes(members: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """A check's results as (the rows to show, the folded passes or None). Rows keep their order."""
    passes = [r for r in members if r.get("status") == "pass"]
    if len(passes) <= FOLD_PASSES_AT:
        return members, None
    return [r for r in members if r.get("status") != "pass"], folded(passes)


def folded(passes: list[dict[str, Any]]) -> dict[str, Any]:
    """What the folded line says about a check's passes: how many, on how many hosts (first and last by name),
    how many variants, the value's min/median/max and unit, and the expected value (the first pass's that kept
    one: passes beyond the fold do not)."""
    # One walk over the passes (a fleet check has ten thousand and more, each dict a cache miss of its own: one
    # loop touching each once beats one C-level walk per figure). The passes share a handful of params dicts (the
    # slimmer shares them): each is keyed once.
    subjects: set[str] = set()
    values: list[float] = []
    units: Counter[str] = Counter()
    distinct_params: dict[int, Any] = {}
    for r in passes:
        subjects.add(str(r.get("subject")))
        value = r.get("value")
        if type(value) in _NUMBERS and value == value:
            values.append(value)
        unit = r.get("unit")
        if unit:
            units[str(unit)] += 1
        params = r.get("params")
        distinct_params[id(params)] = params
    hosts = sorted(results_mod.hosts_of_subjects(subjects))
    return {
        "count": len(passes),
        "hosts": len(hosts),
        "first_host": hosts[0] if hosts else None,
        "last_host": hosts[-1] if hosts else None,
        "variants": len({results_mod.params_key(params) for params in distinct_params.values()}),
        "values": ({"min": min(values), "median": statistics.median(values), "max": max(values)}
                   if values else None),
        "unit": units.most_common(1)[0][0] if units else "",
        "expected": next((r["expected"] for r in passes if "expected" in r), None),
        "examples": passes[:1],
    }


_NUMBERS = (int, float)  # by exact type: a bool is no value to aggregate


def host_rows(
    grouped: list[tuple[str, list[dict[str, Any]]]],
) -> tuple[list[tuple[str, dict[str, int], list[dict[str, Any]]]], list[str]]:
    """The per-host table: (host, counts per status, its warn and fail findings worst first) per host, and the
    hosts folded away. Hosts whose every result passed are folded when there are more than
    :data:`FOLD_PASSES_AT` of them: the table then lists the hosts with something to say."""
    rows, quiet = [], []
    for host, members in grouped:
        tally = Counter(str(r.get("status")) for r in members)
        counts = {status: tally.get(status, 0) for status in results_mod.STATUSES}
        findings = sorted((r for r in members if r.get("status") in ("fail", "warn")),
                          key=lambda r: results_mod.worst_first(r.get("status")))
        rows.append((host, counts, findings))
        if counts["pass"] == len(members):
            quiet.append(host)
    if len(quiet) <= FOLD_PASSES_AT:
        return rows, []
    folded_hosts = set(quiet)
    return [row for row in rows if row[0] not in folded_hosts], quiet


def quiet_text(quiet: list[str]) -> str:
    """'9,412 hosts passed every check (node00001 … node10000): not listed one by one'."""
    span = f" ({quiet[0]} … {quiet[-1]})" if len(quiet) > 1 else ""
    return f"{len(quiet):,} hosts passed every result naming them{span}: not listed one by one."


def folded_text(fold: dict[str, Any]) -> str:
    """'pass on 79,992 subjects of 9,999 hosts (node00001 … node10000), 1 variant; value min 650.2 · median
    700.1 · max 760.3 TFLOP/s'."""
    where = f"{fold['count']:,} subjects"
    if fold["hosts"]:
        span = (f"{fold['first_host']} … {fold['last_host']}" if fold["hosts"] > 1 else fold["first_host"])
        where += f" of {fold['hosts']:,} hosts ({span})"
    text = f"pass on {where}, {fold['variants']} variant{'s' if fold['variants'] != 1 else ''}"
    values = fold["values"]
    if values:
        unit = f" {fold['unit']}" if fold["unit"] else ""
        text += (f"; value min {values['min']:g} · median {values['median']:g} · max {values['max']:g}{unit}")
    return text + "; each subject's raw output is under raw/<host>/ and its line in results.jsonl"
