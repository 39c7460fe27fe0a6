"""A run's results judged also against history: what ``clustereval history judge`` wrote, applied when scoring.

``clustereval history judge RUN_DIR`` compares each numeric result with what earlier recorded runs measured on the
same hardware (:func:`clustereval.history.judging.judge_run`) and writes :data:`BASELINE_FILE` into the run
directory. Scoring and every report then read it through :func:`apply`: a result that met its static bar but sits
beyond the bad edge of its history becomes a ``warn`` whose summary says so, and names the file as evidence. A
result already warning or failing keeps its verdict (it has its problem). The file is the judgement of one run id
and of the values it saw: a re-run into the same folder, or a value measured again since, is not judged by it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from clustereval import results as results_mod

BASELINE_FILE = "history-baseline.json"


def deviation_key(check: Any, subject: Any, params_key: str) -> tuple[str, str, str]:
    return (str(check), str(subject), params_key)


def read(run_dir: Path, run_id: str | None) -> tuple[dict[str, Any] | None, list[str]]:
    """The judgement file of ``run_dir`` (None when there is none) and the warnings about it: unreadable, not a
    judgement or another run's are ignored, with the reason."""
    path = run_dir / BASELINE_FILE
    if not path.is_file():
        return None, []
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return None, [f"{BASELINE_FILE} cannot be read ({getattr(exc, 'strerror', None) or exc}): the run is "
                      f"judged on its static baselines only"]
    if not isinstance(doc, dict) or not isinstance(doc.get("deviations"), list):
        return None, [f"{BASELINE_FILE} is not a history judgement: the run is judged on its static baselines only"]
    if run_id and doc.get("run_id") != run_id:
        return None, [f"{BASELINE_FILE} judged run {doc.get('run_id')!r}, not this run ({run_id}): ignored; run "
                      f"`clustereval history judge` again"]
    return doc, []


def apply(run_dir: Path, latest: list[dict[str, Any]], run_id: str | None
          ) -> tuple[list[dict[str, Any]], list[str], dict[str, Any] | None]:
    """``latest`` with the history's deviations applied, the warnings of reading them, and what ``score.json``
    says about the judgement (None without one). Results are copied where changed, never changed in place."""
    doc, warnings = read(run_dir, run_id)
    if doc is None:
        return latest, warnings, None
    deviations = {deviation_key(d.get("check"), d.get("subject"), str(d.get("params_key") or "")): d
                  for d in doc["deviations"] if isinstance(d, dict)}
    applied: list[dict[str, Any]] = []
    out = latest
    if deviations:
        out = []
        for result in latest:
            found = deviations.get(results_mod.identity(result))
            if found is None or result.get("status") != "pass" or found.get("value") != result.get("value"):
                out.append(result)
                continue
            changed = dict(result)
            changed["status"] = "warn"
            changed["summary"] = f"{result.get('summary')}; against history: {found.get('summary')}"
            changed["artifacts"] = [*(result.get("artifacts") or []), BASELINE_FILE]
            changed["evidence"] = {**(result.get("evidence") if isinstance(result.get("evidence"), dict) else {}),
                                   "history": {k: found.get(k) for k in ("median", "spread", "bound", "k", "n",
                                                                         "runs")}}
            out.append(changed)
            applied.append({"check": changed["check"], "subject": changed["subject"],
                            "summary": found.get("summary")})
    summary = {
        "store": doc.get("store"),
        "judged_at": doc.get("judged_at"),
        "k": doc.get("k"),
        "within": doc.get("within"),
        "not_judged": doc.get("not_judged"),
        "deviations": len(deviations),
        "applied": applied,
    }
    return out, warnings, summary


def explanation(summary: dict[str, Any] | None) -> str | None:
    """The line ``score.json``'s explanation carries about the judgement."""
    if not summary:
        return None
    applied = summary.get("applied") or []
    within = summary.get("within") or 0
    if not applied:
        return (f"Against history ({summary.get('store')}): {within} result(s) within what earlier runs on the "
                f"same hardware measured, none beyond it.")
    names = ", ".join(f"{a['check']} on {a['subject']}" for a in applied[:3])
    more = f" and {len(applied) - 3} more" if len(applied) > 3 else ""
    return (f"Against history ({summary.get('store')}): {len(applied)} result(s) that met their static bar sit "
            f"beyond what earlier runs on the same hardware measured and count as warn: {names}{more}.")
