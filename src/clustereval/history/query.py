"""Reading the history back: the runs of a cluster, and one run in detail."""

from __future__ import annotations

import json
from typing import Any

from clustereval import facts as facts_mod
from clustereval import results as results_mod
from clustereval.history.store import HistoryError, Store

SHOWN_FINDINGS = 20


def list_runs(store: Store, cluster: str | None = None) -> list[dict[str, Any]]:
    """Every recorded run (of ``cluster`` when given), newest first; each a dict of the ``runs`` columns with
    ``warnings`` as a list and ``provisional`` as a bool."""
    sql = "SELECT * FROM runs"
    params: tuple[Any, ...] = ()
    if cluster:
        sql += " WHERE cluster = ?"
        params = (cluster,)
    rows = store.query(sql + " ORDER BY started DESC, run_id DESC", params)
    return [_run(row) for row in rows]


def _run(row: dict[str, Any]) -> dict[str, Any]:
    return {**row, "provisional": bool(row["provisional"]), "warnings": json.loads(row["warnings"] or "[]")}


def host_facts(store: Store, run_id: str, names: tuple[str, ...] = ()) -> dict[str, dict[str, Any]]:
    """Per host of a recorded run, its facts as the run directory held them (only ``names`` when given)."""
    out: dict[str, dict[str, Any]] = {}
    sql = "SELECT host, name, value FROM facts WHERE run_id = ?"
    if names:
        sql += f" AND name IN ({', '.join('?' for _ in names)})"
    for row in store.query(sql, (run_id, *names)):
        out.setdefault(row["host"], {})[row["name"]] = json.loads(row["value"]) if row["value"] is not None else None
    return out


def show_run(store: Store, run_id: str) -> dict[str, Any]:
    """One recorded run: its row, the fleet's hardware (majority facts, who differs), the worst findings (fail,
    error, warn; at most :data:`SHOWN_FINDINGS`), how many findings there are and its series summaries.

    Raises :class:`HistoryError` when the store has no such run.
    """
    rows = store.query("SELECT * FROM runs WHERE run_id = ?", (run_id,))
    if not rows:
        raise HistoryError(f"history store {store.url} has no run {run_id!r} (clustereval history list shows them)")
    findings = store.query("SELECT check_id, subject, params_key, status, severity, value, value_text, unit, summary "
                           "FROM results WHERE run_id = ? AND status IN ('fail', 'error', 'warn')", (run_id,))
    findings.sort(key=lambda r: (results_mod.worst_first(r["status"]), r["check_id"], r["subject"]))
    series_rows = store.query("SELECT path, column_name, n, min, mean, max FROM series_columns WHERE run_id = ? "
                              "ORDER BY path, column_name", (run_id,))
    return {"run": _run(rows[0]), "hardware": facts_mod.fleet(host_facts(store, run_id)),
            "findings": findings[:SHOWN_FINDINGS], "findings_total": len(findings), "series": series_rows}
