"""Judge a run against history: each numeric result against what earlier runs measured on the same hardware.

:func:`judge_run` reads a run directory, asks the store for the distribution of every (check, variant, hardware)
it measured (:func:`clustereval.history.baseline.distribution`, once per group, not once per result: a fleet's
10,000 hosts of one hardware share one query per variant) and writes
:data:`clustereval.scoring.against_history.BASELINE_FILE`: the deviations in full, the rest counted. Scoring
applies it (:mod:`clustereval.scoring.against_history`).
"""

from __future__ import annotations

import json
import math
import os
from collections import Counter
from pathlib import Path
from typing import Any

from clustereval import facts as facts_mod
from clustereval import results as results_mod
from clustereval.history.baseline import MATCH_KEYS, MIN_VALUES, distribution, judge_against_history
from clustereval.history.query import host_facts
from clustereval.history.store import Store
from clustereval.scoring.against_history import BASELINE_FILE
from clustereval.scoring.score import load_current, write_atomic

DEFAULT_K = 3.0
DEFAULT_LAST = 20
VERDICTS = ("pass", "warn", "fail")


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def judge_run(store: Store, run_dir: str | os.PathLike[str], k: float = DEFAULT_K, last: int = DEFAULT_LAST
              ) -> dict[str, Any]:
    """Judge every result of ``run_dir`` that has a verdict and a number against the ``last`` earlier runs in
    ``store`` on matching hardware (the run itself, and runs started after it, left out), write the judgement
    file and return it: ``{run_id, store, judged_at, k, last, within, not_judged: {reason: n}, deviations}``."""
    folder = Path(run_dir)
    if not (folder / "results.jsonl").is_file():
        raise ValueError(f"{folder} is not a run directory (no results.jsonl)")
    if not (k > 0 and math.isfinite(k)) or last < 1:
        raise ValueError(f"k must be a positive number and last at least 1 (got k={k}, last={last})")
    # the judgement is of the static verdicts: an earlier judgement file must not judge this one
    target = folder / BASELINE_FILE
    target.unlink(missing_ok=True)
    latest, _, info, _ = load_current(folder)
    per_host = facts_mod.load(folder)
    run_id = info.get("run_id") or results_mod.run_id_of(folder)
    cache: dict[tuple[str, str, str], dict[str, Any]] = {}
    facts_cache: dict[str, dict[str, dict[str, Any]]] = {}

    def earlier_facts(earlier_run: str) -> dict[str, dict[str, Any]]:
        if earlier_run not in facts_cache:
            facts_cache[earlier_run] = host_facts(store, earlier_run, MATCH_KEYS)
        return facts_cache[earlier_run]

    not_judged: Counter[str] = Counter()
    deviations: list[dict[str, Any]] = []
    within = 0
    for result in latest:
        if result.get("status") not in VERDICTS or not _number(result.get("value")):
            not_judged["no verdict with a number"] += 1
            continue
        facts = facts_mod.for_subject(per_host, str(result.get("subject")))
        hardware = {key: facts.get(key) for key in MATCH_KEYS if facts.get(key) is not None}
        if "gpu_model" not in hardware:
            not_judged["no GPU model among the subject's facts"] += 1
            continue
        key = results_mod.params_key(result.get("params"))
        group = (str(result.get("check")), key, json.dumps(hardware, sort_keys=True, default=str))
        if group not in cache:
            cache[group] = distribution(store, group[0], key, hardware, exclude_run=run_id, last=last,
                                        facts_of=earlier_facts)
        verdict = judge_against_history(result, cache[group], k)
        if verdict["status"] == "skip":
            not_judged[f"fewer than {MIN_VALUES} earlier values on this hardware" if verdict["n"] < MIN_VALUES
                       else verdict["summary"]] += 1
        elif verdict["status"] == "warn":
            deviations.append({"check": result.get("check"), "subject": result.get("subject"), "params_key": key,
                               "runs": cache[group]["runs"], "matched_on": cache[group]["matched_on"], **verdict})
        else:
            within += 1
    doc = {"run_id": run_id, "store": store.url, "judged_at": results_mod.now_iso(), "k": k, "last": last,
           "within": within, "not_judged": dict(not_judged), "deviations": deviations}
    write_atomic(target, json.dumps(doc, indent=2, default=str) + "\n")
    return doc
