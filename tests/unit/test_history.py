"""The run history store on SQLite: record, list, show, re-record, series summaries, baselines from history, URLs."""

from __future__ import annotations

import argparse
import builtins
import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from clustereval import facts, history, results, series
from clustereval.history import store as store_mod

H100 = "NVIDIA H100 80GB HBM3"
B200 = "NVIDIA B200"
GEMM = "burnin.gemm.sustained"  # a node check with a number, higher is better
BUSBW = "network.nccl.busbw"  # a cluster-wide check with variants
BUSBW_PARAMS = {"collective": "all_reduce", "nodes": 2}


def result(run_id: str, check: str, subject: str, status: str = "pass", value: Any = 100.0,
           params: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    from clustereval.checks import catalogue

    meta = catalogue.entry(check)
    out = {"run_id": run_id, "check": check, "phase": meta["phase"], "domain": meta["domain"], "subject": subject,
           "status": status, "severity": meta["severity"], "value": value, "unit": "TFLOPS",
           "expected": {"direction": "higher", "source": "test"}, "summary": f"{check} measured {value}",
           "artifacts": [], "started": "2026-01-01T00:00:00Z", **extra}
    if params:
        out["params"] = params
    return out


def make_run(base: Path, run_id: str, *, started: str, values: dict[str, float], gpu_model: str = H100,
             cluster: str | None = "alpha", extra: list[dict[str, Any]] | None = None) -> Path:
    """A run directory: run.json, one host facts file and one GEMM result per host in ``values``, a cluster-wide
    busbw result with a series curve."""
    run_dir = base / run_id
    run_dir.mkdir(parents=True)
    info: dict[str, Any] = {"run_id": run_id, "started": started, "ended": started.replace("00:00", "01:00"),
                            "inventory": {"hosts": sorted(values)}, "versions": {"clustereval": "0.1.0"}}
    if cluster:
        info["inventory"]["cluster"] = cluster
    (run_dir / "run.json").write_text(json.dumps(info))
    for host in values:
        facts.write(run_dir, host, {**dict.fromkeys(facts.HARDWARE_KEYS), "gpu_model": gpu_model, "gpu_count": 8,
                                    "fabric_class": "infiniband", "driver_version": "550.1"})
    rows = [{"size_bytes": 1 << n, "busbw_gbps": 10.0 * n} for n in range(1, 5)]
    columns = series.write(run_dir, "series/_cluster/nccl-all_reduce.csv", rows)
    curve = {"path": "series/_cluster/nccl-all_reduce.csv", "kind": "curve", "x": "size_bytes", "columns": columns,
             "rows": len(rows)}
    lines = [result(run_id, GEMM, host, value=v) for host, v in values.items()]
    lines.append(result(run_id, BUSBW, "_cluster", value=40.0, params=BUSBW_PARAMS, series=[curve]))
    results.append(run_dir, lines + (extra or []))
    return run_dir


@pytest.fixture
def db(tmp_path: Path) -> str:
    return str(tmp_path / "store" / "history.sqlite")


def record_at_once(tmp_path: Path, url: str, run_dirs: list[Path]) -> None:
    """Record each run dir into ``url`` from its own process, all released at the same instant; every one must
    exit 0 (a writer that has to wait waits, it does not fail)."""
    go = tmp_path / "go"
    code = ("import sys, time, pathlib\n"
            "from clustereval import history\n"
            "while not pathlib.Path(sys.argv[1]).exists(): time.sleep(0.01)\n"
            "with history.open_store(sys.argv[2]) as store: history.record(store, sys.argv[3])\n")
    src = str(Path(__file__).resolve().parents[2] / "src")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
    procs = [subprocess.Popen([sys.executable, "-c", code, str(go), url, str(d)], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for d in run_dirs]
    try:
        time.sleep(1.0)  # all imported and waiting
        go.touch()
        outcomes = [proc.communicate(timeout=120) for proc in procs]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert [proc.returncode for proc in procs] == [0] * len(procs), outcomes


def cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="clustereval")
    history.add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.func(args)


def test_record_list_show_round_trip(tmp_path: Path, db: str, capsys: pytest.CaptureFixture[str]) -> None:
    run_dir = make_run(tmp_path, "r1", started="2026-01-01T00:00:00Z",
                       values={"node1": 100.0, "node2": 50.0},
                       extra=[result("r1", GEMM, "node3", status="fail", value=10.0)])
    assert cli(["history", "record", str(run_dir), "--db", db]) == 0
    assert "recorded run r1 of cluster alpha (3 hosts" in capsys.readouterr().out
    with history.open_store(db) as store:
        [run] = history.list_runs(store)
        assert (run["run_id"], run["cluster"], run["n_fail"], run["n_pass"], run["hosts"]) == ("r1", "alpha", 1, 3, 3)
        assert run["tier"] and run["score"] is not None and run["run_dir"] == str(run_dir.resolve())
        assert run["clustereval_version"] == "0.1.0"
        shown = history.show_run(store, "r1")
    assert shown["hardware"]["gpu_model"] == H100 and shown["hardware"]["hosts"] == 2
    assert [(f["status"], f["subject"]) for f in shown["findings"]] == [("fail", "node3")]
    assert cli(["history", "list", "--db", db]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].split()[:3] == ["run", "id", "cluster"] and table[1].split()[:2] == ["r1", "alpha"]
    assert cli(["history", "show", "r1", "--db", db]) == 0
    shown_text = capsys.readouterr().out
    assert "fail  burnin.gemm.sustained on node3" in shown_text and H100 in shown_text


def test_list_filters_by_cluster_newest_first(tmp_path: Path, db: str, capsys: pytest.CaptureFixture[str]) -> None:
    for run_id, started, cluster in (("a1", "2026-01-01T00:00:00Z", "alpha"), ("b1", "2026-01-02T00:00:00Z", "beta"),
                                     ("a2", "2026-01-03T00:00:00Z", "alpha")):
        with history.open_store(db) as store:
            history.record(store, make_run(tmp_path, run_id, started=started, values={"n1": 1.0}, cluster=cluster))
    with history.open_store(db) as store:
        assert [r["run_id"] for r in history.list_runs(store)] == ["a2", "b1", "a1"]
        assert [r["run_id"] for r in history.list_runs(store, cluster="alpha")] == ["a2", "a1"]
    assert cli(["history", "list", "--db", db, "--cluster", "beta", "--json"]) == 0
    assert [r["run_id"] for r in json.loads(capsys.readouterr().out)] == ["b1"]
    assert cli(["history", "list", "--db", db, "--cluster", "gamma"]) == 0
    assert "no runs recorded for cluster gamma" in capsys.readouterr().out


def test_record_twice_replaces_never_duplicates(tmp_path: Path, db: str) -> None:
    run_dir = make_run(tmp_path, "r1", started="2026-01-01T00:00:00Z", values={"node1": 100.0, "node2": 90.0})
    with history.open_store(db) as store:
        first = history.record(store, run_dir)
        results.append(run_dir, [result("r1", GEMM, "node2", status="fail", value=5.0)])  # a re-run supersedes
        history.record(store, run_dir)
        [run] = history.list_runs(store)
        assert (run["n_fail"], run["n_pass"]) == (1, 2)
        assert run["score"] < first["score"]  # score.json predates the new line: the run is scored again
        rows = store.query("SELECT subject, status, value FROM results WHERE check_id = ? ORDER BY subject", (GEMM,))
        assert rows == [{"subject": "node1", "status": "pass", "value": 100.0},
                        {"subject": "node2", "status": "fail", "value": 5.0}]
        assert store.query("SELECT COUNT(*) AS n FROM facts")[0]["n"] == 2 * len(facts.HARDWARE_KEYS)
        assert store.query("SELECT COUNT(*) AS n FROM series")[0]["n"] == 1


def test_cluster_from_option_and_missing_cluster_is_a_clear_error(tmp_path: Path, db: str,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    run_dir = make_run(tmp_path, "r1", started="2026-01-01T00:00:00Z", values={"n1": 1.0}, cluster=None)
    assert cli(["history", "record", str(run_dir), "--db", db]) == 2
    err = capsys.readouterr().err
    assert err.startswith("clustereval: history: ") and "names no cluster: give one with --cluster" in err
    assert cli(["history", "record", str(run_dir), "--db", db, "--cluster", "given"]) == 0
    with history.open_store(db) as store:
        assert history.list_runs(store)[0]["cluster"] == "given"


def test_not_a_run_directory_unknown_run_and_unusable_store(tmp_path: Path, db: str,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    assert cli(["history", "record", str(tmp_path / "nothing"), "--db", db]) == 2
    assert "is not a run directory (no results.jsonl)" in capsys.readouterr().err
    assert cli(["history", "show", "nope", "--db", db]) == 2
    assert "has no run 'nope'" in capsys.readouterr().err
    assert cli(["history", "list", "--db", f"sqlite://{tmp_path}"]) == 2  # a directory is no database file
    assert capsys.readouterr().err.startswith(f"clustereval: history: history store {tmp_path} cannot be opened: ")


def test_cluster_option_differing_from_run_json_is_said(tmp_path: Path, db: str) -> None:
    run_dir = make_run(tmp_path, "r1", started="2026-01-01T00:00:00Z", values={"n1": 1.0})
    with history.open_store(db) as store:
        run = history.record(store, run_dir, cluster="other")
    assert run["cluster"] == "alpha"
    assert "run.json names the cluster 'alpha': recorded under it, not under 'other'" in run["warnings"]


def test_torn_results_line_is_a_warning(tmp_path: Path, db: str, capsys: pytest.CaptureFixture[str]) -> None:
    run_dir = make_run(tmp_path, "r1", started="2026-01-01T00:00:00Z", values={"node1": 100.0})
    with open(run_dir / "results.jsonl", "a") as fh:
        fh.write('{"run_id": "r1", "check": "burnin.gemm.sus')  # a crash mid-write
    assert cli(["history", "record", str(run_dir), "--db", db]) == 0
    assert "results.jsonl:3: unreadable line skipped" in capsys.readouterr().err
    with history.open_store(db) as store:
        [run] = history.list_runs(store)
    assert run["n_pass"] == 2 and any("unreadable line" in w for w in run["warnings"])


def test_series_summary_figures(tmp_path: Path, db: str) -> None:
    run_dir = make_run(tmp_path, "r1", started="2026-01-01T00:00:00Z", values={"node1": 100.0})
    with history.open_store(db) as store:
        history.record(store, run_dir)
        [ref] = store.query("SELECT path, kind, rows, problem FROM series")
        figures = store.query("SELECT column_name, n, min, mean, max FROM series_columns ORDER BY column_name")
    assert ref == {"path": "series/_cluster/nccl-all_reduce.csv", "kind": "curve", "rows": 4, "problem": None}
    assert figures == [{"column_name": "busbw_gbps", "n": 4, "min": 10.0, "mean": 25.0, "max": 40.0},
                       {"column_name": "size_bytes", "n": 4, "min": 2.0, "mean": 7.5, "max": 16.0}]


def test_torn_and_missing_series_are_warnings(tmp_path: Path, db: str) -> None:
    run_dir = make_run(tmp_path, "r1", started="2026-01-01T00:00:00Z", values={"node1": 1.0}, extra=[
        result("r1", GEMM, "node9", series=[{"path": "series/node9/gone.csv", "kind": "timeseries"}]),
        result("r1", GEMM, "node8", series=[{"path": "series/node8/text.csv", "kind": "timeseries"}])])
    with open(run_dir / "series/_cluster/nccl-all_reduce.csv", "a") as fh:
        fh.write("32,99,7\n64")  # a row with too many fields, and one torn mid-write
    (run_dir / "series/node8").mkdir()
    (run_dir / "series/node8/text.csv").write_text("t,state,temp\n1,ok,50\n2,hot,70\n")
    with history.open_store(db) as store:
        run = history.record(store, run_dir)
        problems = {r["path"]: r["problem"] for r in store.query("SELECT path, problem FROM series")}
        columns = store.query("SELECT path, column_name, n, max FROM series_columns ORDER BY path, column_name")
    assert "series series/node9/gone.csv is missing" in run["warnings"]
    assert "line(s) 6, 7 torn" in problems["series/_cluster/nccl-all_reduce.csv"]
    assert problems["series/node9/gone.csv"] == "series series/node9/gone.csv is missing"
    assert [(c["path"].split("/")[1], c["column_name"], c["n"], c["max"]) for c in columns] == [
        ("_cluster", "busbw_gbps", 4, 40.0), ("_cluster", "size_bytes", 4, 16.0),
        ("node8", "t", 2, 2.0), ("node8", "temp", 2, 70.0)]  # the text column is no figure


def _history_of(tmp_path: Path, db: str, runs: list[tuple[str, dict[str, float], str]]) -> None:
    with history.open_store(db) as store:
        for day, (run_id, values, model) in enumerate(runs, 1):
            history.record(store, make_run(tmp_path, run_id, started=f"2026-01-{day:02d}T00:00:00Z", values=values,
                                           gpu_model=model))


def test_distribution_matches_hardware_and_leaves_out_the_judged_run(tmp_path: Path, db: str) -> None:
    _history_of(tmp_path, db, [("r1", {"n1": 100.0, "n2": 102.0}, H100), ("b1", {"n1": 500.0}, B200),
                               ("r2", {"n1": 98.0, "n2": 101.0}, H100), ("r3", {"n1": 10.0}, H100)])
    with history.open_store(db) as store:
        dist = history.distribution(store, GEMM, "", {"gpu_model": H100, "gpu_count": 8, "kernel": "6.1"},
                                    exclude_run="r3")
        cluster = history.distribution(store, BUSBW, results.params_key(BUSBW_PARAMS), {"gpu_model": H100})
        one = history.distribution(store, GEMM, "", {"gpu_model": H100}, last=1)
        with pytest.raises(ValueError, match="GPU model"):
            history.distribution(store, GEMM, "", {"gpu_count": 8})
    assert dist["runs"] == ["r2", "r1"] and dist["n"] == 4  # B200 left out, r3 is the judged run
    assert dist["matched_on"] == {"gpu_model": H100, "gpu_count": 8}
    assert (dist["median"], dist["mad"], dist["direction"]) == (100.5, 1.0, "higher")
    assert dist["spread"] == pytest.approx(1.4826)
    assert dist["p10"] == pytest.approx(98.6) and dist["p90"] == pytest.approx(101.7)
    assert cluster["n"] == 3 and cluster["runs"] == ["r3", "r2", "r1"]  # _cluster results match the fleet's facts
    assert one["runs"] == ["r3"] and one["n"] == 1


def test_judge_against_history_pass_warn_skip(tmp_path: Path, db: str) -> None:
    _history_of(tmp_path, db, [("r1", {"n1": 100.0, "n2": 102.0}, H100), ("r2", {"n1": 98.0, "n2": 101.0}, H100)])
    with history.open_store(db) as store:
        dist = history.distribution(store, GEMM, "", {"gpu_model": H100})
        few = history.distribution(store, GEMM, "", {"gpu_model": H100}, last=1)
    low = history.judge_against_history(result("r9", GEMM, "n1", value=90.0), dist)
    assert low["status"] == "warn" and low["bound"] == pytest.approx(100.5 - 3 * 1.4826)
    assert "below" in low["summary"] and "median 100.5" in low["summary"]
    assert history.judge_against_history(result("r9", GEMM, "n1", value=97.0), dist)["status"] == "pass"
    assert history.judge_against_history(result("r9", GEMM, "n1", value=150.0), dist)["status"] == "pass"
    lower = result("r9", GEMM, "n1", value=110.0, expected={"direction": "lower"})
    assert history.judge_against_history(lower, dist)["status"] == "warn"
    assert history.judge_against_history(lower, dist, k=10.0)["status"] == "pass"
    skipped = history.judge_against_history(result("r9", GEMM, "n1", value=1.0), few)
    assert skipped["status"] == "skip" and "only 2 earlier value(s)" in skipped["summary"]
    assert history.judge_against_history(result("r9", GEMM, "n1", value="n/a"), dist)["status"] == "skip"


def test_identical_history_has_a_spread_floor() -> None:
    dist = {"n": 5, "median": 200.0, "spread": history.baseline._figures([200.0] * 5)["spread"],
            "direction": "higher"}
    assert dist["spread"] == pytest.approx(2.0)
    assert history.judge_against_history({"value": 195.0}, dist)["status"] == "pass"
    assert history.judge_against_history({"value": 193.0}, dist)["status"] == "warn"


def test_store_urls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLUSTEREVAL_HISTORY", str(tmp_path / "env.sqlite"))
    assert store_mod.resolve(None) == ("sqlite", str(tmp_path / "env.sqlite"))
    assert store_mod.resolve("") == ("sqlite", str(tmp_path / "env.sqlite"))
    monkeypatch.delenv("CLUSTEREVAL_HISTORY")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert store_mod.resolve(None) == ("sqlite", str(tmp_path / ".local/share/clustereval/history.sqlite"))
    assert store_mod.resolve("sqlite:///var/lib/h.sqlite") == ("sqlite", "/var/lib/h.sqlite")
    assert store_mod.resolve("rel/h.sqlite") == ("sqlite", "rel/h.sqlite")
    assert store_mod.resolve("postgres://u@db/h") == ("postgresql", "postgres://u@db/h")
    with pytest.raises(history.HistoryError, match=r"mysql://u:\*\*\*@db/h: unknown scheme 'mysql'"):
        store_mod.resolve("mysql://u:hunter2@db/h")
    with history.open_store(None) as store:
        assert store.kind == "sqlite"
    path = tmp_path / ".local/share/clustereval/history.sqlite"
    assert path.stat().st_mode & 0o777 == 0o600


def test_password_is_masked() -> None:
    assert history.mask_url("postgresql://fleet:s3cr%40t@db.example:5432/history?sslmode=require") == \
        "postgresql://fleet:***@db.example:5432/history?sslmode=require"
    assert history.mask_url("postgresql://db/history?password=s3cret&user=u") == \
        "postgresql://db/history?password=***&user=u"
    assert history.mask_url("postgresql://fleet@db/history") == "postgresql://fleet@db/history"
    assert history.mask_url("/var/lib/history.sqlite") == "/var/lib/history.sqlite"


def test_postgres_without_psycopg_names_the_pip_command(monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    real_import = builtins.__import__

    def no_psycopg(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "psycopg" or name.startswith("psycopg."):
            raise ImportError("No module named 'psycopg'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_psycopg)
    assert cli(["history", "list", "--db", "postgresql://fleet:hunter2@db.example/history"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == ("clustereval: history: history store postgresql://fleet:***@db.example/history is PostgreSQL, "
                   "which needs psycopg: pip install 'psycopg[binary]>=3.1'")


def test_newer_schema_is_refused(db: str) -> None:
    history.open_store(db).close()
    conn = sqlite3.connect(db)
    conn.execute("UPDATE schema_version SET version = 99")
    conn.commit()
    conn.close()
    with pytest.raises(history.HistoryError, match="schema version 99, newer than this clustereval knows"):
        history.open_store(db)


def test_a_failed_record_leaves_the_earlier_record(tmp_path: Path, db: str, monkeypatch: pytest.MonkeyPatch) -> None:
    run_dir = make_run(tmp_path, "r1", started="2026-01-01T00:00:00Z", values={"node1": 100.0})
    with history.open_store(db) as store:
        history.record(store, run_dir)
        real = store.insert_many

        def fail_on_series(table: str, columns: Any, rows: Any) -> None:
            if table == "series":
                raise sqlite3.OperationalError("disk I/O error")
            real(table, columns, rows)

        monkeypatch.setattr(store, "insert_many", fail_on_series)
        with pytest.raises(sqlite3.OperationalError):
            history.record(store, run_dir)
        monkeypatch.undo()
        assert store.query("SELECT COUNT(*) AS n FROM results")[0]["n"] == 2
        assert store.query("SELECT COUNT(*) AS n FROM series")[0]["n"] == 1


def test_concurrent_sqlite_records_all_land(tmp_path: Path, db: str) -> None:
    """Three processes record three runs at once into a store none has created yet: SQLite's one writer at a
    time (and its switch of a new file to WAL, which answers "locked" without waiting) makes the others wait,
    they do not fail."""
    hosts = {f"node{i:03d}": float(i) for i in range(300)}
    run_dirs = [make_run(tmp_path, run_id, started=f"2026-02-0{day}T00:00:00Z", values=hosts)
                for day, run_id in enumerate(("c1", "c2", "c3"), 1)]
    record_at_once(tmp_path, db, run_dirs)
    with history.open_store(db) as store:
        assert [r["run_id"] for r in history.list_runs(store)] == ["c3", "c2", "c1"]
        assert store.query("SELECT COUNT(*) AS n FROM results")[0]["n"] == 3 * 301
