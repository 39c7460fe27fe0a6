"""The run history store on a real PostgreSQL server (Debian's postgresql-15), started and stopped here.

The server runs as the ``postgres`` system user from a data directory in a fresh temporary folder, listens on
127.0.0.1 on a free port and on a unix socket in that folder, takes a password over TCP (so the tests see that it
is never printed) and is stopped (``pg_ctl stop -m fast``) and its folder removed when the module ends.
"""

from __future__ import annotations

import argparse
import os
import secrets
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from clustereval import history, results
from tests.unit.test_history import BUSBW, BUSBW_PARAMS, GEMM, H100, make_run, record_at_once

PG_BIN = Path("/usr/lib/postgresql/15/bin")
REPO = Path(__file__).resolve().parents[2]


def _unavailable() -> str | None:
    if os.geteuid() != 0:
        return "starting PostgreSQL as the postgres user needs root"
    if not (PG_BIN / "initdb").exists():
        return "postgresql-15 is not installed"
    if shutil.which("runuser") is None:
        return "runuser (util-linux) is not installed"
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "psycopg is not installed (pip install 'psycopg[binary]>=3.1')"
    return None


pytestmark = [pytest.mark.integration, pytest.mark.skipif(_unavailable() is not None, reason=str(_unavailable()))]


def _as_postgres(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["runuser", "-u", "postgres", "--", *argv], capture_output=True, text=True, timeout=120)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def server() -> Iterator[dict[str, str]]:
    """A PostgreSQL server of its own: ``{"url", "password"}`` (the URL reaches the ``postgres`` database)."""
    base = Path(tempfile.mkdtemp(prefix="clustereval-pg-"))
    data = base / "data"
    started = False
    try:
        password = secrets.token_hex(12)
        (base / "pw").write_text(password + "\n")
        for path in (base, base / "pw"):
            shutil.chown(path, "postgres", "postgres")
        made = _as_postgres(str(PG_BIN / "initdb"), "-D", str(data), "-U", "postgres", "-E", "UTF8", "--no-sync",
                            "--auth-local=trust", "--auth-host=scram-sha-256", f"--pwfile={base / 'pw'}")
        assert made.returncode == 0, made.stdout + made.stderr
        port = _free_port()
        options = f"-c listen_addresses=127.0.0.1 -p {port} -k {base} -c fsync=off"
        up = _as_postgres(str(PG_BIN / "pg_ctl"), "-D", str(data), "-l", str(base / "server.log"), "-w", "-t", "60",
                          "-o", options, "start")
        started = True
        assert up.returncode == 0, up.stdout + up.stderr + (base / "server.log").read_text(errors="replace")
        yield {"url": f"postgresql://postgres:{password}@127.0.0.1:{port}/postgres", "password": password}
    finally:
        if started:
            _as_postgres(str(PG_BIN / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop")
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def db_url(server: dict[str, str]) -> Iterator[str]:
    """A fresh, empty database on the server for one test (dropped afterwards)."""
    import psycopg

    name = f"history_{secrets.token_hex(4)}"
    with psycopg.connect(server["url"], autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    yield server["url"].rsplit("/", 1)[0] + f"/{name}"
    with psycopg.connect(server["url"], autocommit=True) as conn:
        conn.execute(f"DROP DATABASE {name} WITH (FORCE)")


def cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="clustereval")
    history.add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.func(args)


def test_round_trip(tmp_path: Path, db_url: str, server: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    for day, (run_id, values) in enumerate((("r1", {"n1": 100.0, "n2": 102.0}), ("r2", {"n1": 98.0, "n2": 101.0}),
                                            ("r3", {"n1": 90.0})), 1):
        run_dir = make_run(tmp_path, run_id, started=f"2026-01-{day:02d}T00:00:00Z", values=values)
        assert cli(["history", "record", str(run_dir), "--db", db_url]) == 0
    assert cli(["history", "record", str(tmp_path / "r3"), "--db", db_url]) == 0  # again: replaced
    out = capsys.readouterr().out
    assert "postgresql://postgres:***@127.0.0.1" in out and server["password"] not in out
    assert cli(["history", "list", "--db", db_url]) == 0
    table = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in table[1:]] == ["r3", "r2", "r1"]
    assert cli(["history", "show", "r3", "--db", db_url]) == 0
    assert H100 in capsys.readouterr().out
    with history.open_store(db_url) as store:
        assert store.kind == "postgresql"
        assert store.query("SELECT COUNT(*) AS n FROM results WHERE run_id = ?", ("r3",))[0]["n"] == 2
        [curve] = store.query("SELECT column_name, n, min, mean, max FROM series_columns WHERE run_id = ? "
                              "AND column_name = ?", ("r1", "busbw_gbps"))
        dist = history.distribution(store, GEMM, "", {"gpu_model": H100}, exclude_run="r3")
        busbw = history.distribution(store, BUSBW, results.params_key(BUSBW_PARAMS), {"gpu_model": H100})
    assert curve == {"column_name": "busbw_gbps", "n": 4, "min": 10.0, "mean": 25.0, "max": 40.0}
    assert (dist["n"], dist["median"], dist["runs"]) == (4, 100.5, ["r2", "r1"])
    assert busbw["n"] == 3
    judged = history.judge_against_history({"value": 90.0, "expected": {"direction": "higher"}}, dist)
    assert judged["status"] == "warn"


def test_wrong_password_is_masked(db_url: str, server: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    wrong = db_url.replace(server["password"], "not-the-password")
    assert cli(["history", "list", "--db", wrong]) == 2
    err = capsys.readouterr().err
    assert "cannot be opened" in err and "postgres:***@127.0.0.1" in err and "not-the-password" not in err


def test_concurrent_records_of_different_runs_both_land(tmp_path: Path, db_url: str) -> None:
    """Two processes record two runs at once into a store neither has created yet: both runs land, whole."""
    hosts = {f"node{i:04d}": float(i) for i in range(2000)}
    run_dirs = [make_run(tmp_path, run_id, started=f"2026-02-0{day}T00:00:00Z", values=hosts)
                for day, run_id in enumerate(("c1", "c2"), 1)]
    record_at_once(tmp_path, db_url, run_dirs)
    with history.open_store(db_url) as store:
        assert [r["run_id"] for r in history.list_runs(store)] == ["c2", "c1"]
        counts = store.query("SELECT run_id, COUNT(*) AS n FROM results GROUP BY run_id ORDER BY run_id")
        assert counts == [{"run_id": "c1", "n": 2001}, {"run_id": "c2", "n": 2001}]
        assert store.query("SELECT COUNT(*) AS n FROM schema_version")[0]["n"] == 1


def test_the_sla_review_reads_the_same_from_postgresql_as_from_sqlite(tmp_path: Path, db_url: str) -> None:
    """An NVL rack with 3 of 18 nodes down for a day, a drained node and a fault drill: the review built from a
    PostgreSQL store equals the one built from SQLite, figure for figure (the store's URL aside)."""
    from tests.unit.test_history_review import DETECT, GB200, JAN, build, drill, record, sla_file
    from tests.unit.test_history_review import sla_mod as sla

    hosts = [f"gb-r1-n{i:02d}" for i in range(1, 19)]
    domain = dict.fromkeys(hosts, "8f1c2d3e-4b5a-6978-8a9b-0c1d2e3f4a5b")
    runs = [("r0", "2026-01-01T00:00:00Z", {}), ("r1", "2026-01-05T00:00:00Z", {"down": tuple(hosts[:3])}),
            ("r2", "2026-01-09T00:00:00Z", {"extra": [drill("r2", DETECT, hosts[5], 45.0)]}),
            ("r3", "2026-01-20T00:00:00Z", {"down": (hosts[7],)})]
    sqlite_db = str(tmp_path / "store" / "history.sqlite")
    for db in (sqlite_db, db_url):
        record(tmp_path / db.rsplit("/", 1)[-1], db, runs, hosts, domain=domain, gpu_model=GB200, cluster="nvl")
    contract = sla.load_sla(sla_file(tmp_path, **{"cluster.down_when_nodes_up_below": 50.0}))
    reviews = [build(db, "nvl", contract, kind="monthly", **JAN) for db in (sqlite_db, db_url)]
    for review in reviews:
        review.pop("store", None)
    assert reviews[0] == reviews[1]
    [rack] = reviews[1]["racks"]
    assert rack["down_s"] == 4 * 86400.0 and reviews[1]["incident_counts"]["rack"] == 1
