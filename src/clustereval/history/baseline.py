"""Baselines from history: judge a value against what earlier runs measured on the same hardware.

:func:`distribution` gathers the values a check (one variant: its params key) took in earlier recorded runs, on
subjects whose hardware facts match the ones given (:data:`MATCH_KEYS`: the GPU model at least); its median and
spread. :func:`judge_against_history` is a pure function of a result and such a distribution.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Callable
from typing import Any

from clustereval import facts as facts_mod
from clustereval.history.query import host_facts
from clustereval.history.store import Store

# The facts that make two subjects "the same hardware". Driver, CUDA and kernel versions are left out on purpose:
# a change of them between runs is what history should show, not a reason to compare with nothing.
MATCH_KEYS = ("gpu_model", "gpu_count", "fabric_class", "fabric_rate_gbps")
MIN_VALUES = 3
# 1.4826 × MAD estimates the standard deviation of normally distributed values, robust to the odd outlier.
MAD_SCALE = 1.4826
# Identical earlier values (MAD 0) would flag the smallest noise; the spread is never below this share of |median|.
SPREAD_FLOOR = 0.01


def percentile(values: list[float], share: float) -> float:
    """The ``share`` (0..1) percentile of sorted ``values``, linearly interpolated."""
    position = (len(values) - 1) * share
    low, high = math.floor(position), math.ceil(position)
    return values[low] + (values[high] - values[low]) * (position - low)


def _matches(subject_facts: dict[str, Any], wanted: dict[str, Any]) -> bool:
    return all(json.dumps(subject_facts.get(k), sort_keys=True, default=str) == json.dumps(v, sort_keys=True,
                                                                                            default=str)
               for k, v in wanted.items())


def distribution(store: Store, check: str, params_key: str, hardware: dict[str, Any],
                 exclude_run: str | None = None, last: int = 20,
                 facts_of: Callable[[str], dict[str, dict[str, Any]]] | None = None) -> dict[str, Any]:
    """The values ``check`` (variant ``params_key``, as ``results.params_key`` writes it) took in the latest
    ``last`` recorded runs that measured it on matching hardware, before ``exclude_run`` (the run being judged:
    it is left out, and when the store holds it, so is every run started after it).

    A value counts when its result has a verdict (pass, warn or fail) and its subject's facts (``facts.for_subject``
    over the earlier run's hosts) equal ``hardware`` on each :data:`MATCH_KEYS` key it gives. Returns ``{n, median,
    p10, p90, mad, spread, direction, unit, matched_on, runs}`` (figures None when n is 0); ``runs`` lists the run
    ids the values came from, newest first. Raises ``ValueError`` when ``hardware`` gives no GPU model.
    ``facts_of(run_id)`` gives an earlier run's per-host facts (default: read from the store each time; a caller
    judging many checks passes a cached one).
    """
    wanted = {k: hardware[k] for k in MATCH_KEYS if hardware.get(k) is not None}
    if "gpu_model" not in wanted:
        raise ValueError("a baseline from history needs the GPU model among the hardware facts")
    before = None
    if exclude_run is not None:
        found = store.query("SELECT started FROM runs WHERE run_id = ?", (exclude_run,))
        before = found[0]["started"] if found and found[0]["started"] else None
    sql = ("SELECT r.run_id, r.subject, r.value, r.unit, r.direction, runs.started FROM results r "
           "JOIN runs ON runs.run_id = r.run_id WHERE r.check_id = ? AND r.params_key = ? AND r.value IS NOT NULL "
           "AND r.status IN ('pass', 'warn', 'fail') AND r.run_id <> ?")
    params: list[Any] = [check, params_key, exclude_run or ""]
    if before is not None:
        sql += " AND runs.started < ?"
        params.append(before)
    rows = store.query(sql + " ORDER BY runs.started DESC, r.run_id DESC", params)
    by_run: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_run.setdefault(row["run_id"], []).append(row)
    values: list[float] = []
    used: list[str] = []
    kept: list[dict[str, Any]] = []
    for run_id, run_rows in by_run.items():
        if len(used) >= last:
            break
        per_host = facts_of(run_id) if facts_of is not None else host_facts(store, run_id, tuple(wanted))
        matching = [r for r in run_rows if _matches(facts_mod.for_subject(per_host, r["subject"]), wanted)]
        if matching:
            used.append(run_id)
            kept += matching
            values += [float(r["value"]) for r in matching]
    return {**_figures(sorted(values)), "direction": _most_common(r["direction"] for r in kept),
            "unit": _most_common(r["unit"] for r in kept), "matched_on": wanted, "runs": used}


def _most_common(items: Any) -> Any:
    counted = Counter(item for item in items if item)
    return counted.most_common(1)[0][0] if counted else None


def _figures(values: list[float]) -> dict[str, Any]:
    if not values:
        return {"n": 0, "median": None, "p10": None, "p90": None, "mad": None, "spread": None}
    median = percentile(values, 0.5)
    mad = percentile(sorted(abs(v - median) for v in values), 0.5)
    return {"n": len(values), "median": median, "p10": percentile(values, 0.1), "p90": percentile(values, 0.9),
            "mad": mad, "spread": max(MAD_SCALE * mad, SPREAD_FLOOR * abs(median))}


def judge_against_history(result: dict[str, Any], dist: dict[str, Any], k: float = 3.0) -> dict[str, Any]:
    """Whether a result's value sits within what history measured (pure; no store involved).

    ``warn`` when the value lies beyond ``median ± k·spread`` on the bad side (below for ``direction: higher``,
    above for ``lower``; the result's ``expected.direction``, else the distribution's), ``pass`` otherwise, ``skip``
    with the reason when there are fewer than 3 earlier values, no number to judge or no direction. Returns
    ``{status, summary, value, median, spread, bound, k, n, direction}``.
    """
    expected = result.get("expected") if isinstance(result.get("expected"), dict) else {}
    direction = expected.get("direction") or dist.get("direction")
    value = result.get("value")
    out: dict[str, Any] = {"value": value, "median": dist.get("median"), "spread": dist.get("spread"), "bound": None,
                           "k": k, "n": dist.get("n", 0), "direction": direction}
    unit = f" {result.get('unit') or dist.get('unit') or ''}".rstrip()
    if out["n"] < MIN_VALUES:
        return {**out, "status": "skip", "summary": f"only {out['n']} earlier value(s) on this hardware in the "
                                                    f"history; {MIN_VALUES} are needed to judge against it"}
    if not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value):
        return {**out, "status": "skip", "summary": "the result has no number to judge against the history"}
    if direction not in ("higher", "lower"):
        return {**out, "status": "skip", "summary": f"direction {direction!r} says neither higher nor lower is "
                                                    f"better: nothing to judge against the history"}
    median, spread = float(dist["median"]), float(dist["spread"])
    if direction == "higher":
        bound = median - k * spread
        bad = value < bound
    else:
        bound = median + k * spread
        bad = value > bound
    out["bound"] = bound
    where = "below" if direction == "higher" else "above"
    if bad:
        return {**out, "status": "warn", "summary": f"{value:g}{unit} is {where} {bound:g}{unit}, the bad edge of "
                                                    f"{out['n']} earlier values on this hardware (median "
                                                    f"{median:g}{unit}, {k:g}× spread {spread:g})"}
    return {**out, "status": "pass", "summary": f"{value:g}{unit} is within {out['n']} earlier values on this "
                                                f"hardware (median {median:g}{unit}, bound {bound:g}{unit})"}
