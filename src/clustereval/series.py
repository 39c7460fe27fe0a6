"""Series files: curves and time series in the run directory, as CSV with a header row.

A data person loads one with one line (``pandas.read_csv("series/_cluster/network-mesh-tcp.csv")`` or
``duckdb.read_csv("series/*/telemetry-gpu.csv")``). A result points at its series with
``{"path", "kind": "curve"|"timeseries", "x", "columns", "rows"}`` (see ``clustereval.results``); a check
hands the judge the rows under ``data`` and the judge writes the file (:func:`write_pending`).
"""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path
from typing import Any

from clustereval import private

SERIES_DIR = "series"


def cell(value: Any) -> Any:
    """A value as one CSV cell: lists joined with '|', mappings as JSON, None empty."""
    if value is None:
        return ""
    if isinstance(value, list | tuple):
        return "|".join(str(v) for v in value)
    if isinstance(value, dict):
        return json.dumps(value, sort_keys=True, default=str)
    return value


def typed(value: str) -> Any:
    """A CSV cell back as a number where it is one ('' -> None)."""
    if value == "":
        return None
    if "_" in value:  # float() reads "1_000"; a CSV written from a number never has one
        return value
    try:
        number = float(value)
    except ValueError:
        return value
    return int(number) if number.is_integer() and "." not in value and "e" not in value.lower() else number


def write(run_dir: str | os.PathLike[str], relative: str, rows: list[dict[str, Any]],
          columns: list[str] | None = None) -> list[str]:
    """Write ``rows`` to ``run_dir/relative`` (replacing it, atomically); returns the columns written."""
    if columns is None:
        seen: dict[str, None] = {}
        for row in rows:
            seen.update(dict.fromkeys(row))
        columns = list(seen)
    path = Path(run_dir) / relative
    private.folder(path.parent)
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    with private.open_file(tmp, "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(columns)
        for row in rows:
            writer.writerow([cell(row.get(c)) for c in columns])
    os.replace(tmp, path)
    return columns


def read(run_dir: str | os.PathLike[str], relative: str) -> list[dict[str, Any]]:
    """Every row of a series file, numbers typed."""
    with open(Path(run_dir) / relative, newline="", encoding="utf-8") as fh:
        return [{key: typed(value) for key, value in row.items()} for row in csv.DictReader(fh)]


def write_pending(run_dir: str | os.PathLike[str], items: list[dict[str, Any]]) -> None:
    """Write the rows checks attached to their results' series (``data``), one file per path with the rows
    of every result pointing at it, and replace ``data`` with the row count."""
    tables: dict[str, list[dict[str, Any]]] = {}
    for item in items:
        for ref in item.get("series") or []:
            if "data" in ref:
                tables.setdefault(ref["path"], []).extend(ref["data"])
    columns = {path: write(run_dir, path, rows) for path, rows in tables.items()}
    for item in items:
        for ref in item.get("series") or []:
            if "data" in ref:
                ref["rows"] = len(ref.pop("data"))
                ref["columns"] = columns[ref["path"]]
