"""Where run history lives: a SQLite file by default, a PostgreSQL database by URL for a fleet that shares one.

Both speak the same schema (:mod:`clustereval.history.schema`). Everything that differs between them — the
parameter style, how a transaction takes its lock, how many rows go in at once — is in :class:`Store`, so the
code that records and reads runs writes one SQL text with ``?`` placeholders.
"""

from __future__ import annotations

import os
import re
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from clustereval import private
from clustereval.history import schema

ENV_VAR = "CLUSTEREVAL_HISTORY"
DEFAULT_PATH = Path("~/.local/share/clustereval/history.sqlite")
POSTGRES_SCHEMES = ("postgresql", "postgres")
PSYCOPG_HINT = "pip install 'psycopg[binary]>=3.1'"
MASK = "***"
SQLITE_BUSY_TIMEOUT_S = 60.0
# pg_advisory_xact_lock key held while the schema is created or migrated: two first writers must not race.
_SCHEMA_LOCK = 0x636C7573  # "clus"
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")


class HistoryError(Exception):
    """A history store that cannot be opened, read or written; the message is one sentence for the operator."""


def mask_url(url: str) -> str:
    """``url`` with its password (in the user part or a ``password=`` query parameter) replaced by ``***``."""
    if not _SCHEME.match(url):
        return url
    parts = urlsplit(url)
    netloc = parts.netloc
    if parts.password is not None:
        user, _, host = netloc.rpartition("@")
        netloc = f"{user.split(':', 1)[0]}:{MASK}@{host}"
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        query = urlencode([(k, MASK if k.lower() == "password" else v) for k, v in pairs], safe="*")
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def _secrets_of(url: str) -> list[str]:
    """The password texts of ``url`` (to scrub from a driver's error message)."""
    if not _SCHEME.match(url):
        return []
    parts = urlsplit(url)
    found = [parts.password] if parts.password else []
    found += [v for k, v in parse_qsl(parts.query) if k.lower() == "password" and v]
    return found


def scrub(text: str, url: str | None) -> str:
    """``text`` (a driver's message) with every password of ``url`` masked."""
    for secret in _secrets_of(url or ""):
        text = text.replace(secret, MASK)
    return text


def driver_errors() -> tuple[type[Exception], ...]:
    """The exceptions the database drivers raise (psycopg's only when it is installed)."""
    try:
        import psycopg
    except ImportError:
        return (sqlite3.Error,)
    return (sqlite3.Error, psycopg.Error)


class Store:
    """One open history store. Use as a context manager (or call :meth:`close`).

    ``kind`` is ``"sqlite"`` or ``"postgresql"``; ``url`` is the location with any password masked, safe to print.
    """

    def __init__(self, kind: str, connection: Any, url: str) -> None:
        self.kind = kind
        self.url = url
        self._conn = connection

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._conn.close()

    def _sql(self, sql: str) -> str:
        """The one place the parameter styles differ: SQLite takes ``?``, psycopg ``%s``."""
        return sql.replace("?", "%s") if self.kind == "postgresql" else sql

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        """Rows of a SELECT, each a dict keyed by column name."""
        cur = self._conn.execute(self._sql(sql), tuple(params))
        names = [col[0] for col in cur.description or []]
        return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]

    def execute(self, sql: str, params: Sequence[Any] = ()) -> None:
        self._conn.execute(self._sql(sql), tuple(params))

    def insert_many(self, table: str, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
        """Insert every row in one statement stream: ``COPY`` on PostgreSQL, ``executemany`` on SQLite (a
        10,000-node run is two million results; a row at a time would take minutes)."""
        if self.kind == "postgresql":
            with self._conn.cursor() as cur, cur.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)
            return
        marks = ", ".join("?" for _ in columns)
        self._conn.executemany(f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks})", rows)

    @contextmanager
    def transaction(self, lock: str | None = None) -> Iterator[Store]:
        """One transaction: everything inside commits together or not at all. ``lock`` names what the writer
        needs alone (a run id): concurrent writers of the same name wait for each other, of different names not
        (SQLite has one writer at a time anyway: ``BEGIN IMMEDIATE`` waits for it)."""
        if self.kind == "postgresql":
            with self._conn.transaction():
                if lock is not None:
                    self.execute("SELECT pg_advisory_xact_lock(hashtext(?))", (lock,))
                yield self
            return
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            yield self
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        self._conn.execute("COMMIT")

    def ensure_schema(self) -> None:
        """Create the tables when missing and check the schema version (a newer store is refused, not damaged)."""
        if self.kind == "postgresql":
            with self._conn.transaction():
                self.execute("SELECT pg_advisory_xact_lock(?)", (_SCHEMA_LOCK,))
                self._create()
            return
        with self.transaction():
            self._create()

    def _create(self) -> None:
        for statement in schema.DDL:
            self.execute(statement)
        rows = self.query("SELECT version FROM schema_version")
        if not rows:
            self.execute("INSERT INTO schema_version (version) VALUES (?)", (schema.VERSION,))
            return
        found = max(int(r["version"]) for r in rows)
        if found > schema.VERSION:
            raise HistoryError(f"history store {self.url} has schema version {found}, newer than this clustereval "
                               f"knows ({schema.VERSION}): upgrade clustereval to use it")


def resolve(url: str | None) -> tuple[str, str]:
    """(kind, location) of a store URL: ``("sqlite", path)`` or ``("postgresql", url)``.

    None or '' means ``$CLUSTEREVAL_HISTORY``, else ``~/.local/share/clustereval/history.sqlite``.
    """
    if not url:
        url = os.environ.get(ENV_VAR) or str(DEFAULT_PATH)
    found = _SCHEME.match(url)
    if not found:
        return "sqlite", str(Path(url).expanduser())
    scheme = found.group(1).lower()
    if scheme in POSTGRES_SCHEMES:
        return "postgresql", url
    if scheme == "sqlite":
        path = url[len(found.group(0)):]
        if not path:
            raise HistoryError(f"history store URL {mask_url(url)} names no file (sqlite:///path/to/history.sqlite)")
        return "sqlite", str(Path(path).expanduser())
    raise HistoryError(f"history store URL {mask_url(url)}: unknown scheme {scheme!r} "
                       f"(use a path, sqlite:///path or postgresql://user@host/db)")


def open_store(url: str | None = None) -> Store:
    """Open (and create when missing) the history store at ``url``; see :func:`resolve` for what it may be.

    Raises :class:`HistoryError` (password masked) when it cannot be opened.
    """
    kind, location = resolve(url)
    store = _open_postgres(location) if kind == "postgresql" else _open_sqlite(location)
    try:
        store.ensure_schema()
    except BaseException:
        store.close()
        raise
    return store


def _open_sqlite(path: str) -> Store:
    target = Path(path)
    try:
        private.folder(target.parent)
        if not target.exists():
            os.close(os.open(target, os.O_WRONLY | os.O_CREAT, 0o600))  # the history is the operator's alone
        conn = sqlite3.connect(target, timeout=SQLITE_BUSY_TIMEOUT_S, isolation_level=None)
        try:
            _while_busy(lambda: conn.execute("PRAGMA journal_mode=WAL"))  # readers never wait for a writer
            conn.execute("PRAGMA foreign_keys=ON")
        except BaseException:
            conn.close()
            raise
    except (OSError, sqlite3.Error) as exc:
        raise HistoryError(f"history store {path} cannot be opened: {exc}") from None
    return Store("sqlite", conn, str(target))


def _while_busy(step: Callable[[], object]) -> None:
    """Run ``step`` until SQLite stops answering "database is locked", for up to the busy timeout.

    Switching a new file to WAL takes the file's exclusive lock, and SQLite answers a second opener that is
    switching at the same moment with SQLITE_BUSY at once, without calling the busy handler that
    ``timeout=`` installs (it could deadlock otherwise). Two first writers are ordinary, so they take turns.
    """
    deadline = time.monotonic() + SQLITE_BUSY_TIMEOUT_S
    while True:
        try:
            step()
            return
        except sqlite3.OperationalError as exc:
            contended = "locked" in str(exc) or "busy" in str(exc)
            if not contended or time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def _open_postgres(url: str) -> Store:
    try:
        import psycopg
    except ImportError:
        raise HistoryError(f"history store {mask_url(url)} is PostgreSQL, which needs psycopg: {PSYCOPG_HINT}"
                           ) from None
    try:
        conn = psycopg.connect(url, autocommit=True, connect_timeout=30)
    except psycopg.Error as exc:
        raise HistoryError(f"history store {mask_url(url)} cannot be opened: "
                           f"{scrub(str(exc).strip(), url)}") from None
    return Store("postgresql", conn, mask_url(url))
