"""Put a saved run directory into the history store: the run, its hosts' facts, its results, its series.

The run is read the way scoring reads it (``results.load`` → ``plan.current`` → ``results.latest``; the score
from ``score.json``, or scored now when the run has none) and written in one transaction, replacing whatever the
store held for the same run id: recording a run twice leaves it once.
"""

from __future__ import annotations

import csv
import json
import math
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from clustereval import facts as facts_mod
from clustereval import plan, series
from clustereval import results as results_mod
from clustereval.history import schema
from clustereval.history.store import HistoryError, Store
from clustereval.scoring import score as score_mod

RESULT_COLUMNS = ("run_id", "check_id", "subject", "params_key", "status", "severity", "value", "value_text", "unit",
                  "direction", "summary")
SERIES_COLUMNS = ("run_id", "check_id", "subject", "params_key", "path", "kind", "rows", "problem")
SUMMARY_COLUMNS = ("run_id", "path", "column_name", "n", "min", "mean", "max")
RUN_COLUMNS = ("run_id", "cluster", "started", "ended", "tier", "score", "provisional", "coverage", "hosts", "n_pass",
               "n_warn", "n_fail", "n_skip", "n_error", "run_dir", "clustereval_version", "recorded", "warnings")


def cluster_name(info: dict[str, Any]) -> str | None:
    """The cluster a run names in ``run.json``: ``cluster``, ``inventory.cluster`` or the
    ``clustereval_cluster_name`` setting (None when it names none)."""
    inventory = info.get("inventory") if isinstance(info.get("inventory"), dict) else {}
    options = info.get("options") if isinstance(info.get("options"), dict) else {}
    for value in (info.get("cluster"), inventory.get("cluster"), options.get("clustereval_cluster_name")):
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


def _score_of(run_dir: Path) -> dict[str, Any]:
    """``score.json`` when the run has a readable one at least as new as its results, else the run scored now
    (which writes it): a result appended after the last scoring must count."""
    path = run_dir / score_mod.SCORE_FILE
    try:
        if path.stat().st_mtime_ns > (run_dir / results_mod.RESULTS_FILE).stat().st_mtime_ns:
            score = json.loads(path.read_text(encoding="utf-8"))
            if isinstance(score, dict) and "tier" in score:
                return score
    except (OSError, ValueError):
        pass
    return score_mod.score_run(run_dir)


def _number(value: Any) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


def _result_row(run_id: str, result: dict[str, Any]) -> tuple[Any, ...]:
    value = result.get("value")
    number = _number(value)
    expected = result.get("expected") if isinstance(result.get("expected"), dict) else {}
    text = None if number is not None or value is None else results_mod.dumps(value, sort_keys=True)
    return (run_id, str(result["check"]), str(result["subject"]), results_mod.params_key(result.get("params")),
            str(result["status"]), result.get("severity"), number, text, result.get("unit"),
            expected.get("direction"), result.get("summary"))


def summarise_series(run_dir: Path, relative: str) -> tuple[int | None, dict[str, dict[str, float]], str | None]:
    """(rows, per numeric column {n, min, mean, max}, problem) of one series CSV. A missing, unreadable or torn file
    (a row whose field count differs from the header's) is a problem sentence, never an exception; a torn row is
    left out of the figures."""
    path = (run_dir / relative).resolve()
    if not path.is_relative_to(run_dir.resolve()):
        return None, {}, f"series {relative} points outside the run directory: not read"
    columns: dict[str, list[float]] = {}
    torn: list[int] = []
    rows = 0
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            reader = csv.reader(fh)
            header = next(reader, None)
            if not header:
                return 0, {}, f"series {relative} is empty (no header row)"
            for lineno, cells in enumerate(reader, 2):
                if len(cells) != len(header):
                    torn.append(lineno)
                    continue
                rows += 1
                for name, cell in zip(header, cells, strict=True):
                    number = _number(series.typed(cell))
                    values = columns.setdefault(name, [])
                    if number is not None:
                        values.append(number)
                    elif cell != "":
                        columns[name] = [math.nan]  # a text cell: the column is not numeric
    except FileNotFoundError:
        return None, {}, f"series {relative} is missing"
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        return None, {}, f"series {relative} cannot be read ({exc})"
    figures = {name: {"n": len(v), "min": min(v), "mean": math.fsum(v) / len(v), "max": max(v)}
               for name, v in columns.items() if v and not any(math.isnan(x) for x in v)}
    problem = (f"series {relative}: line(s) {', '.join(map(str, torn[:5]))} torn (field count differs from the "
               f"header), left out of the summary") if torn else None
    return rows, figures, problem


def _series(folder: Path, run_id: str, current: list[dict[str, Any]], result_rows: list[tuple[Any, ...]]
            ) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]], list[str]]:
    """The ``series`` rows (one per result and file), the ``series_columns`` rows (one per file and numeric column:
    a file several results point at is read once) and the problems found."""
    series_rows: dict[tuple[Any, ...], tuple[Any, ...]] = {}
    summary_rows: list[tuple[Any, ...]] = []
    summarised: dict[str, tuple[int | None, str | None]] = {}
    warnings: list[str] = []
    for result, row in zip(current, result_rows, strict=True):
        for ref in result.get("series") or []:
            relative = str(ref["path"])
            if relative not in summarised:
                rows, figures, problem = summarise_series(folder, relative)
                summarised[relative] = (rows, problem)
                warnings += [problem] if problem else []
                summary_rows += [(run_id, relative, column, f["n"], f["min"], f["mean"], f["max"])
                                 for column, f in figures.items()]
            rows, problem = summarised[relative]
            # keyed by result and path: a result listing one file twice is kept once
            series_rows[(*row[:4], relative)] = (*row[:4], relative, ref.get("kind"), rows, problem)
    return list(series_rows.values()), summary_rows, warnings


def collect(run_dir: str | os.PathLike[str], cluster: str | None = None) -> dict[str, Any]:
    """Everything :func:`record` writes, read from the run directory (no store involved): ``run`` (a dict of
    :data:`RUN_COLUMNS`), ``facts``, ``results``, ``series``, ``series_columns`` (row tuples) and ``warnings``."""
    folder = Path(run_dir).resolve()
    if not (folder / results_mod.RESULTS_FILE).is_file():
        raise HistoryError(f"{run_dir} is not a run directory (no {results_mod.RESULTS_FILE})")
    info, warnings = score_mod.read_run_info(folder)
    run_id = info.get("run_id")
    if not isinstance(run_id, str) or not run_id:
        raise HistoryError(f"{folder / score_mod.RUN_FILE} names no run id: the run cannot be recorded")
    name = cluster_name(info) or cluster
    if not name:
        raise HistoryError(f"{folder / score_mod.RUN_FILE} names no cluster: give one with --cluster NAME")
    loaded, load_warnings = results_mod.load(folder)
    current = results_mod.latest(plan.current(loaded, info))
    score = _score_of(folder)
    warnings = [*load_warnings, *warnings]
    if cluster and cluster != name:
        warnings.append(f"run.json names the cluster {name!r}: recorded under it, not under {cluster!r}")

    per_host = facts_mod.load(folder)
    fact_rows = [(run_id, host, key, json.dumps(value, sort_keys=True, default=str))
                 for host, host_facts in per_host.items() for key, value in sorted(host_facts.items())]
    result_rows = [_result_row(run_id, result) for result in current]
    series_rows, summary_rows, series_warnings = _series(folder, run_id, current, result_rows)
    warnings += series_warnings

    counts = {status: 0 for status in results_mod.STATUSES}
    for result in current:
        counts[result["status"]] += 1
    hosts = set(per_host) | set((score.get("subjects") or {}).get("hosts") or [])
    versions = info.get("versions") if isinstance(info.get("versions"), dict) else {}
    run = {
        "run_id": run_id, "cluster": name, "started": info.get("started"), "ended": info.get("ended"),
        "tier": score.get("tier"), "score": _number(score.get("score")), "provisional": int(bool(score.get(
            "provisional"))), "coverage": _number(score.get("coverage")), "hosts": len(hosts),
        **{f"n_{status}": counts[status] for status in results_mod.STATUSES},
        "run_dir": str(folder), "clustereval_version": versions.get("clustereval"),
        "recorded": datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
        "warnings": json.dumps(warnings),
    }
    return {"run": run, "facts": fact_rows, "results": result_rows, "series": series_rows,
            "series_columns": summary_rows, "warnings": warnings}


def record(store: Store, run_dir: str | os.PathLike[str], cluster: str | None = None) -> dict[str, Any]:
    """Record a run directory in ``store`` in one transaction, replacing an earlier record of the same run id.

    ``cluster`` names the cluster when ``run.json`` does not. Returns the run's row (a dict) with ``warnings``:
    results lines left out and series that could not be summarised. Raises :class:`HistoryError` when the
    directory is no run or names no run id or cluster.
    """
    data = collect(run_dir, cluster)
    run = data["run"]
    with store.transaction(lock=run["run_id"]):
        for table in schema.RUN_TABLES:
            store.execute(f"DELETE FROM {table} WHERE run_id = ?", (run["run_id"],))
        store.insert_many("runs", RUN_COLUMNS, [tuple(run[c] for c in RUN_COLUMNS)])
        store.insert_many("facts", ("run_id", "host", "name", "value"), data["facts"])
        store.insert_many("results", RESULT_COLUMNS, data["results"])
        store.insert_many("series", SERIES_COLUMNS, data["series"])
        store.insert_many("series_columns", SUMMARY_COLUMNS, data["series_columns"])
    return {**run, "warnings": data["warnings"]}
