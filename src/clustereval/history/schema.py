"""The history schema: one DDL text for SQLite and PostgreSQL (types both accept), created when missing.

``schema_version`` holds the version these tables follow, so a later clustereval can migrate a store it finds
older (and this one refuses a newer store instead of writing rows it does not understand). ``check`` is an SQL
keyword, so the check id column is ``check_id``. Facts are name/value rows (values as JSON text): a hardware fact
added later needs no migration.
"""

from __future__ import annotations

VERSION = 1

DDL = (
    "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)",
    """CREATE TABLE IF NOT EXISTS runs (
        run_id TEXT PRIMARY KEY,
        cluster TEXT NOT NULL,
        started TEXT,
        ended TEXT,
        tier TEXT,
        score DOUBLE PRECISION,
        provisional INTEGER NOT NULL,
        coverage DOUBLE PRECISION,
        hosts INTEGER NOT NULL,
        n_pass INTEGER NOT NULL,
        n_warn INTEGER NOT NULL,
        n_fail INTEGER NOT NULL,
        n_skip INTEGER NOT NULL,
        n_error INTEGER NOT NULL,
        run_dir TEXT,
        clustereval_version TEXT,
        recorded TEXT NOT NULL,
        warnings TEXT NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS runs_cluster ON runs (cluster, started)",
    """CREATE TABLE IF NOT EXISTS facts (
        run_id TEXT NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
        host TEXT NOT NULL,
        name TEXT NOT NULL,
        value TEXT,
        PRIMARY KEY (run_id, host, name)
    )""",
    "CREATE INDEX IF NOT EXISTS facts_value ON facts (name, value)",
    """CREATE TABLE IF NOT EXISTS results (
        run_id TEXT NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
        check_id TEXT NOT NULL,
        subject TEXT NOT NULL,
        params_key TEXT NOT NULL,
        status TEXT NOT NULL,
        severity TEXT,
        value DOUBLE PRECISION,
        value_text TEXT,
        unit TEXT,
        direction TEXT,
        summary TEXT,
        PRIMARY KEY (run_id, check_id, subject, params_key)
    )""",
    "CREATE INDEX IF NOT EXISTS results_check ON results (check_id, params_key)",
    """CREATE TABLE IF NOT EXISTS series (
        run_id TEXT NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
        check_id TEXT NOT NULL,
        subject TEXT NOT NULL,
        params_key TEXT NOT NULL,
        path TEXT NOT NULL,
        kind TEXT,
        rows INTEGER,
        problem TEXT,
        PRIMARY KEY (run_id, check_id, subject, params_key, path)
    )""",
    """CREATE TABLE IF NOT EXISTS series_columns (
        run_id TEXT NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
        path TEXT NOT NULL,
        column_name TEXT NOT NULL,
        n INTEGER NOT NULL,
        min DOUBLE PRECISION,
        mean DOUBLE PRECISION,
        max DOUBLE PRECISION,
        PRIMARY KEY (run_id, path, column_name)
    )""",
)

# Child tables first: what re-recording a run deletes before it inserts the run again.
RUN_TABLES = ("series_columns", "series", "results", "facts", "runs")
