"""Run history: saved runs kept in a store (SQLite by default, PostgreSQL by URL for a fleet that shares one), so
runs can be listed per cluster and a check judged against what earlier runs measured on the same hardware.

See ``docs/history.md``. ``open_store`` opens a store, ``record`` puts a run directory in it, ``list_runs`` and
``show_run`` read it back, ``distribution`` and ``judge_against_history`` make a baseline of it,
``build_review`` judges a cluster's runs against SLA definitions (``load_sla``; see ``docs/review.md``),
``add_parser`` registers ``clustereval history``.
"""

from __future__ import annotations

from clustereval.history.baseline import MATCH_KEYS, distribution, judge_against_history
from clustereval.history.cli import add_parser
from clustereval.history.query import list_runs, show_run
from clustereval.history.recording import record
from clustereval.history.review import build_review, render_json
from clustereval.history.review_markdown import render_markdown
from clustereval.history.sla import SlaError, load_sla
from clustereval.history.store import HistoryError, Store, mask_url, open_store

__all__ = [
    "MATCH_KEYS",
    "HistoryError",
    "SlaError",
    "Store",
    "add_parser",
    "build_review",
    "distribution",
    "judge_against_history",
    "list_runs",
    "load_sla",
    "mask_url",
    "open_store",
    "record",
    "render_json",
    "render_markdown",
    "show_run",
]
