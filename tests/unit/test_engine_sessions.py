"""Sessions end to end without a cluster: the node-side session runner (run as the action runs it, its source as
``python3 -c`` with JSON on stdin, in a temporary base directory), the controller's Recorder and SessionView, the
action journal, series files and probe outputs kept in the run directory."""

from __future__ import annotations

import base64
import csv
import itertools
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from clustereval import journal, rundir, series
from clustereval.sessions import Recorder, SessionView, Stream
from tests.conftest import read_corpus
from tests.unit.test_engine_probes import old_pythons

REPO = Path(__file__).resolve().parents[2]
RUNNER = (REPO / "plugins/module_utils/session_runner.py").read_text()


def runner(request: dict[str, Any], python: str = sys.executable) -> dict[str, Any]:
    proc = subprocess.run([python, "-c", RUNNER], input=json.dumps(request), capture_output=True, text=True,
                          timeout=30)
    answer = json.loads(proc.stdout)
    assert proc.returncode == (1 if answer.get("failed") else 0), proc.stderr
    return answer


def alive(pid: Any) -> bool:
    """Running (a zombie nobody reaped, as under a container's init, counts as gone)."""
    try:
        with open(f"/proc/{int(pid)}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError, ValueError, TypeError):
        return False


def processes_under(base: Path) -> list[int]:
    """Processes whose working directory is under ``base`` (every stream runs in its session's directory)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cwd = os.readlink(entry / "cwd")
            except OSError:
                continue
            if cwd.startswith(str(base)) and alive(entry.name):
                found.append(int(entry.name))
    return found


def wait_for(predicate, timeout: float = 8.0, step: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return False


@pytest.fixture
def base(tmp_path):
    """A session base directory; whatever a test leaves running is stopped and counted as a failure."""
    folder = tmp_path / "sessions"
    yield folder
    leftovers = []
    for spec in folder.glob("*/*/session.json"):
        data = json.loads(spec.read_text())
        if not (spec.parent / "ended.json").exists():
            leftovers.append(spec.parent.name)
        runner({"op": "stop", "base": str(folder), "run_id": data["run_id"], "name": data["name"], "remove": True})
    assert wait_for(lambda: not processes_under(folder)), f"stray processes: {processes_under(folder)}"
    assert not leftovers, f"sessions left running: {leftovers}"


def request(base: Path, op: str, name: str = "s1", **extra: Any) -> dict[str, Any]:
    return {"op": op, "base": str(base), "run_id": "run1", "name": name, **extra}


def data_of(answer: dict[str, Any], key: str) -> bytes:
    stream, suffix = key.split(".")
    return base64.b64decode(answer["streams"][stream][suffix]["data"])


# ------------------------------------------------------------------------------------------------ runner


def test_start_poll_stop_and_remove(base):
    streams = [{"name": "ticks", "cmd": 'echo "first $CLUSTEREVAL_LABEL"; echo oops >&2; sleep 30',
                "params": {"label": "x y", "flag": True}},
               {"name": "other", "cmd": "echo other; sleep 30"}]
    started = runner(request(base, "start", streams=streams, duration_s=0, orphan_after_s=60))
    assert not started.get("failed") and alive(started["pid"]) and started["deadline"] is None
    pids = [started["pid"], *started["stream_pids"].values()]
    directory = Path(started["dir"])
    assert directory == base / "run1" / "s1" and oct(directory.stat().st_mode & 0o777) == "0o700"
    assert wait_for(lambda: (directory / "ticks.out").stat().st_size > 0 and (directory / "other.out").stat().st_size)
    again = runner(request(base, "start", streams=streams))
    assert again["failed"] and "already running" in again["msg"]

    polled = runner(request(base, "poll", offsets={}))
    assert polled["state"] == "running" and not polled["more"]
    assert data_of(polled, "ticks.out") == b"first x y\n" and data_of(polled, "ticks.err") == b"oops\n"
    offsets = {f"{n}.{s}": polled["streams"][n][s]["offset"] for n in ("ticks", "other") for s in ("out", "err")}
    assert offsets == {"ticks.out": 10, "ticks.err": 5, "other.out": 6, "other.err": 0}
    assert data_of(runner(request(base, "poll", offsets=offsets)), "ticks.out") == b""  # nothing new
    assert runner(request(base, "status"))["state"] == "running"

    stopped = runner(request(base, "stop", offsets=offsets, remove=True))
    assert stopped["state"] == "ended" and stopped["removed"] and stopped["ended"]["reason"] == "stopped"
    assert set(stopped["ended"]["rc"]) == {"ticks", "other"}
    assert not directory.exists() and not (base / "run1").exists()  # the run's folder goes with its last session
    assert wait_for(lambda: not any(alive(pid) for pid in pids))
    assert runner(request(base, "status"))["state"] == "absent"
    gone = runner(request(base, "poll", offsets={}))
    assert gone["failed"] and gone["gone"]
    assert runner(request(base, "stop"))["state"] == "absent"


@pytest.mark.parametrize("python", old_pythons() or [pytest.param(None, marks=pytest.mark.skip(
    reason="no Python older than ours here (set CLUSTEREVAL_OLD_PYTHON)"))])
def test_the_runner_runs_on_the_oldest_python_a_node_may_have(base, python):
    started = runner(request(base, "start", streams=[{"name": "w", "cmd": 'echo "$CLUSTEREVAL_N"; sleep 30',
                                                      "params": {"n": 7}}]), python)
    assert wait_for(lambda: (Path(started["dir"]) / "w.out").stat().st_size > 0)
    stopped = runner(request(base, "stop", remove=True), python)
    assert data_of(stopped, "w.out") == b"7\n" and stopped["removed"] and not alive(started["stream_pids"]["w"])


def test_the_session_ends_by_itself_after_its_duration(base):
    t0 = time.monotonic()
    started = runner(request(base, "start", duration_s=0.6, streams=[{"name": "w", "cmd": "echo go; sleep 30"}]))
    assert started["deadline"] == pytest.approx(started["started"] + 0.6)
    assert wait_for(lambda: runner(request(base, "status"))["state"] == "ended")
    assert time.monotonic() - t0 < 5
    ended = runner(request(base, "poll", offsets={}))
    assert ended["state"] == "ended" and ended["ended"]["reason"] == "duration"
    assert ended["ended"]["rc"]["w"] == -signal.SIGTERM and data_of(ended, "w.out") == b"go\n"
    assert not alive(started["pid"]) and not alive(started["stream_pids"]["w"])


def test_streams_that_exit_end_the_session(base):
    streams = [{"name": "a", "cmd": "echo done"}, {"name": "b", "cmd": "exit 3"}]
    started = runner(request(base, "start", streams=streams))
    assert wait_for(lambda: runner(request(base, "status"))["state"] == "ended")
    ended = runner(request(base, "status"))["ended"]
    assert ended["reason"] == "streams_exited" and ended["rc"] == {"a": 0, "b": 3}
    assert not alive(started["pid"])


def test_with_no_poll_the_node_stops_what_nobody_watches(base):
    started = runner(request(base, "start", orphan_after_s=0.5, streams=[{"name": "w", "cmd": "sleep 30"}]))
    # status does not count as a poll: it must not keep an abandoned session alive
    assert wait_for(lambda: runner(request(base, "status"))["state"] == "ended", timeout=6)
    assert runner(request(base, "status"))["ended"]["reason"] == "orphaned"
    assert not alive(started["stream_pids"]["w"])


def test_polls_keep_a_session_alive_past_its_orphan_timeout(base):
    runner(request(base, "start", orphan_after_s=1.0, streams=[{"name": "w", "cmd": "sleep 30"}]))
    t0 = time.monotonic()
    for _ in range(4):  # more than the timeout in polls, each well within it
        assert runner(request(base, "poll", offsets={}))["state"] == "running"
        time.sleep(0.45)
    assert time.monotonic() - t0 > 1.0
    assert runner(request(base, "stop", remove=True))["ended"]["reason"] == "stopped"


def test_the_streams_children_are_ended_with_them(base):
    cmd = "sleep 60 & echo $!; sh -c 'sleep 60 & echo $!; wait' & wait"
    streams = [{"name": "tree", "cmd": cmd}, {"name": "peer", "cmd": "sleep 60"}]
    started = runner(request(base, "start", streams=streams))
    directory = Path(started["dir"])
    assert wait_for(lambda: len((directory / "tree.out").read_text().split()) == 2)
    children = [int(p) for p in (directory / "tree.out").read_text().split()]
    peer = started["stream_pids"]["peer"]
    groups = {os.getpgid(pid) for pid in [*children, peer, started["stream_pids"]["tree"]]}
    assert len(groups) == 1 and os.getpgid(started["pid"]) not in groups  # one group of their own
    runner(request(base, "stop", remove=True))
    assert wait_for(lambda: not any(alive(pid) for pid in [*children, peer]))


def test_a_stream_ignoring_sigterm_is_killed_after_the_grace_period(base):
    assert "\nGRACE_S = 3.0\n" in RUNNER
    quick = RUNNER.replace("\nGRACE_S = 3.0\n", "\nGRACE_S = 0.6\n")  # the same code, a shorter grace
    cmd = "trap '' TERM; sleep 60 & wait; sleep 60"
    proc = subprocess.run([sys.executable, "-c", quick], capture_output=True, text=True, timeout=30,
                          input=json.dumps(request(base, "start", streams=[{"name": "stubborn", "cmd": cmd}])))
    started = json.loads(proc.stdout)
    t0 = time.monotonic()
    stopped = runner(request(base, "stop", remove=True))
    assert 0.5 < time.monotonic() - t0 < 8  # the grace period, then SIGKILL
    assert stopped["ended"]["rc"]["stubborn"] == -signal.SIGKILL
    assert not alive(started["stream_pids"]["stubborn"])


def test_large_output_comes_in_several_polls_and_stop_hands_back_the_rest(base):
    cmd = "head -c 10000 /dev/zero | tr '\\0' 'x'; echo; sleep 30"
    runner(request(base, "start", streams=[{"name": "big", "cmd": cmd}]))
    directory = base / "run1" / "s1"
    assert wait_for(lambda: (directory / "big.out").stat().st_size == 10001)
    first = runner(request(base, "poll", offsets={}, max_bytes=4096))
    assert first["more"] and len(data_of(first, "big.out")) == 4096
    second = runner(request(base, "poll", offsets={"big.out": 4096}, max_bytes=4096))
    assert second["streams"]["big"]["out"]["offset"] == 8192
    stopped = runner(request(base, "stop", offsets={"big.out": 8192}, max_bytes=1000, remove=True))
    assert data_of(stopped, "big.out") == b"x" * 1808 + b"\n" and not stopped["more"]
    assert stopped["streams"]["big"]["out"]["offset"] == 10001


def test_a_lost_supervisor_is_said_and_stop_ends_its_streams(base):
    started = runner(request(base, "start", streams=[{"name": "w", "cmd": "sleep 60"}]))
    os.kill(started["pid"], signal.SIGKILL)
    assert wait_for(lambda: runner(request(base, "status"))["state"] == "lost")
    assert runner(request(base, "poll", offsets={}))["state"] == "lost"
    stopped = runner(request(base, "stop", remove=True))
    assert stopped["state"] == "ended" and stopped["ended"]["reason"] == "stopped"
    assert wait_for(lambda: not alive(started["stream_pids"]["w"]))


@pytest.mark.parametrize(("fields", "words"), [
    ({"streams": []}, "a session needs streams"),
    ({"streams": [{"name": "a"}]}, "a session needs streams"),
    ({"streams": [{"name": "a", "cmd": "x"}, {"name": "a", "cmd": "y"}]}, "unique plain names"),
    ({"streams": [{"name": "../a", "cmd": "x"}]}, "unique plain names"),
    ({"streams": [{"name": "a", "cmd": "x"}], "name": "../escape"}, "name must be a plain name"),
    ({"streams": [{"name": "a", "cmd": "x"}], "run_id": ".."}, "run_id must be a plain name"),
])
def test_a_bad_start_request_starts_nothing(base, fields, words):
    answer = runner({**request(base, "start"), **fields})
    assert answer["failed"] and words in answer["msg"]
    assert not processes_under(base) and not list(base.glob("*/*/session.json"))


def test_an_unreadable_request():
    proc = subprocess.run([sys.executable, "-c", RUNNER], input='{"op": "dance"}', capture_output=True, text=True,
                          timeout=30)
    assert proc.returncode == 2 and "unreadable session request" in json.loads(proc.stdout)["msg"]


# ------------------------------------------------------------------------------------------------ recorder


GPU_STREAM = Stream(name="gpu", cmd="nvidia-smi ...", parser="nvidia-smi-query-loop", header_lines=1)
KERNEL_STREAM = Stream(name="kernel", cmd="tail -F ...", parser="kernel-xid")


def answer(offsets: dict[str, int], **chunks: bytes) -> dict[str, Any]:
    """One poll's answer as the session runner returns it: ``gpu_out=b"..."`` etc."""
    streams: dict[str, Any] = {}
    for key, data in chunks.items():
        stream, suffix = key.rsplit("_", 1)
        offsets[f"{stream}.{suffix}"] = offsets.get(f"{stream}.{suffix}", 0) + len(data)
        streams.setdefault(stream, {})[suffix] = {"data": base64.b64encode(data).decode(),
                                                  "offset": offsets[f"{stream}.{suffix}"]}
    return {"state": "running", "streams": streams}


def split_at(data: bytes, cuts: list[int]) -> list[bytes]:
    edges = [0, *sorted(set(cuts)), len(data)]
    return [data[a:b] for a, b in itertools.pairwise(edges)]


def test_the_recorder_keeps_bytes_verbatim_and_rows_whatever_the_chunking(tmp_path):
    capture = read_corpus("nvidia-smi-query-loop", "h200-query-lms1000-idle-burn-idle-clock-event-reasons.csv")
    data = capture.encode()
    header_end = data.index(b"\n")
    # cuts inside the header, right after it, mid-value, mid-line and on line ends
    cuts = [17, header_end, header_end + 1, header_end + 40, 2100, 2101, 3000, len(data) - 5]
    recorder = Recorder(str(tmp_path), "n1", "telemetry", [GPU_STREAM])
    offsets: dict[str, int] = {}
    parsed_rows = 0
    for chunk in split_at(data, cuts):
        chunks = recorder.feed(answer(offsets, gpu_out=chunk))
        parsed_rows += len(chunks["gpu"].get("rows") or [])
    chunks = recorder.feed(answer(offsets), final=True)  # the last line had no newline yet? none here
    parsed_rows += len((chunks.get("gpu") or {}).get("rows") or [])
    assert recorder.raw_path("gpu").read_bytes() == data
    assert recorder.offsets["gpu.out"] == len(data)
    rows = list(SessionView(recorder, "telemetry").rows("gpu"))
    assert len(rows) == parsed_rows == capture.count("\n") - 1 == recorder.stats()["gpu"]["rows"]
    assert rows[0]["host"] == "n1" and rows[0]["index"] == 0 and rows[0]["power.draw"] == 123.85
    assert rows[6]["throttle_reasons_active"] == "sw_power_cap" and rows[0]["throttle_reasons_active"] == "gpu_idle"
    assert recorder.stats()["gpu"]["parse_errors"] == 0
    # the series file is CSV with one header row: one line of any CSV reader loads it
    with open(recorder.series_path("gpu"), newline="") as fh:
        table = list(csv.reader(fh))
    assert table[0][:3] == ["host", "received_at", "timestamp"] and len(table) == len(rows) + 1
    [ref] = recorder.series_refs()
    assert ref == {"path": "series/n1/telemetry-gpu.csv", "kind": "timeseries", "x": "timestamp",
                   "columns": table[0], "rows": len(rows), "stream": "gpu"}
    assert recorder.artifacts() == ["raw/n1/telemetry/gpu.out"]


def test_a_last_line_without_newline_is_parsed_at_the_end_and_stderr_kept_apart(tmp_path):
    recorder = Recorder(str(tmp_path), "n1", "telemetry", [GPU_STREAM, KERNEL_STREAM])
    offsets: dict[str, int] = {}
    header = b"timestamp, index, temperature.gpu\n"
    assert recorder.feed(answer(offsets, gpu_out=header + b"2026/01/01 00:00:00.000, 0, 40\n2026/01/01 00:0",
                                gpu_err=b"warning: slow\n"))["gpu"]["rows"][0]["temperature.gpu"] == 40
    assert recorder.feed(answer(offsets, gpu_out=b"0:01.000, 0, 41")) == {"gpu": {}}  # no complete line yet
    last = recorder.feed(answer(offsets), final=True)
    assert last["gpu"]["rows"] == [{"timestamp": "2026/01/01 00:00:01.000", "index": 0, "temperature.gpu": 41}]
    view = SessionView(recorder, "telemetry", started="a", ended="b", end_reason="duration",
                       events=[{"at": "a", "event": "x"}])
    assert [r["temperature.gpu"] for r in view.rows("gpu")] == [40, 41]
    assert view.stderr_tail("gpu") == ["warning: slow"]
    assert view.output_tail("gpu", 1) == ["2026/01/01 00:00:01.000, 0, 41"]
    assert recorder.raw_path("gpu", "err").read_bytes() == b"warning: slow\n"
    assert recorder.stats()["gpu"]["stderr_bytes"] == 14
    assert list(view.rows("kernel")) == [] and view.stderr_tail("kernel") == []
    assert view.measured() == {"started": "a", "ended": "b", "events": [{"at": "a", "event": "x"}],
                               "end_reason": "duration"}
    assert SessionView(recorder, "t", interrupted="SIGTERM").measured()["interrupted"] == "SIGTERM"


def test_kernel_lines_become_events_and_a_parse_error_is_counted(tmp_path):
    bad = Stream(name="bad", cmd="x", parser="nvidia-smi-query-loop", header_lines=1)
    raw = Stream(name="raw", cmd="x")  # no parser: kept, never parsed
    recorder = Recorder(str(tmp_path), "n1", "telemetry", [KERNEL_STREAM, bad, raw])
    offsets: dict[str, int] = {}
    line = (b"[ 8123.617543] NVRM: Xid (PCI:0000:1b:00): 79, pid='<unknown>', name=<unknown>, "
            b"GPU has fallen off the bus.\n")
    chunks = recorder.feed(answer(offsets, kernel_out=b"[ 8120.1] eth0: link up\n" + line,
                                  bad_out=b"index, temperature.gpu\nNo devices were found\n", raw_out=b"anything\n"))
    [event] = chunks["kernel"]["events"]
    assert (event["code"], event["pci"]) == (79, "0000:1b:00")
    assert chunks["bad"] == {"error": recorder.stats()["bad"]["last_parse_error"]}
    assert "No devices" in chunks["bad"]["error"]
    assert recorder.stats()["bad"]["parse_errors"] == 1 and chunks["raw"] == {}
    [row] = SessionView(recorder, "telemetry").rows("kernel")
    assert row["code"] == 79 and row["pci"] == "0000:1b:00" and row["kind"] == "xid" and row["host"] == "n1"
    assert recorder.feed(answer(offsets, unknown_out=b"ignored\n")) == {}  # a stream the session does not have
    assert [r["stream"] for r in recorder.series_refs()] == ["kernel"]


def test_a_second_recorder_of_the_same_session_appends_rows_under_the_one_header(tmp_path):
    header = b"timestamp, index, temperature.gpu\n"
    for temperature in (40, 41):
        recorder = Recorder(str(tmp_path), "n1", "telemetry", [GPU_STREAM])
        recorder.feed(answer({}, gpu_out=header + b"2026/01/01 00:00:00.000, 0, %d\n" % temperature))
    rows = list(SessionView(recorder, "telemetry").rows("gpu"))
    assert [r["temperature.gpu"] for r in rows] == [40, 41]
    assert recorder.series_path("gpu").read_text().count("received_at") == 1


# ------------------------------------------------------------------------------------------------ journal


def test_the_journal_says_what_is_still_applied(tmp_path):
    run = tmp_path / "runs" / "r1"
    undo = {"kind": "session", "base": "/var/tmp/x", "run_id": "r1", "name": "n1.telemetry"}
    first = journal.applied(run, "n1", "session telemetry", undo, detail={"streams": ["gpu"]})
    second = journal.applied(run, "localhost", "test PVC", {"kind": "command", "cmd": "kubectl delete pvc x"},
                             destructive=True)
    assert [e["id"] for e in journal.pending(run)] == [first, second]
    journal.restored(run, first, detail={"reason": "duration"})
    [left] = journal.pending(run)
    assert left["id"] == second and left["destructive"] and left["undo"]["cmd"] == "kubectl delete pvc x"
    entries = journal.load(run)
    assert [e["state"] for e in entries] == ["applied", "applied", "restored"] and entries[2]["by"] == "run"
    assert entries[0]["detail"] == {"streams": ["gpu"]} and entries[0]["host"] == "n1"
    with open(run / journal.JOURNAL_FILE, "a") as fh:
        fh.write('{"id": "torn", "sta')  # a crash mid-write
    assert len(journal.load(run)) == 3
    with pytest.raises(ValueError, match="undo kind must be one of"):
        journal.applied(run, "n1", "x", {"kind": "python", "code": "os.system('...')"})
    assert oct((run / journal.JOURNAL_FILE).stat().st_mode & 0o777) == "0o600"


def test_leftovers_of_other_runs_in_the_runs_folder(tmp_path):
    runs = tmp_path / "runs"
    undo = {"kind": "command", "cmd": "true"}
    journal.applied(runs / "old", "n1", "fault", undo)
    done = journal.applied(runs / "clean", "n1", "fault", undo)
    journal.restored(runs / "clean", done, by="undo")
    journal.applied(runs / "current", "n1", "fault", undo)
    (runs / "no-journal").mkdir()
    left = journal.leftovers(runs, exclude=runs / "current")
    assert list(left) == [str(runs / "old")] and left[str(runs / "old")][0]["what"] == "fault"
    assert set(journal.leftovers(runs)) == {str(runs / "old"), str(runs / "current")}
    os.utime(runs / "old" / journal.JOURNAL_FILE, (1, 1))  # the oldest
    assert list(journal.leftovers(runs, newest=1)) == [str(runs / "current")]
    assert journal.leftovers(tmp_path / "absent") == {} and journal.pending(tmp_path / "absent") == []


# ------------------------------------------------------------------------------------------------ series


def test_series_round_trip_with_cells_as_csv_holds_them(tmp_path):
    rows = [{"t": 0, "gbitps": 9.5, "pair": ["n1", "n2"], "meta": {"b": 1}, "none": None, "name": "n1"},
            {"t": 1, "gbitps": 1e-3, "extra": "only here", "name": "007"}]
    columns = series.write(tmp_path, "series/_cluster/x.csv", rows)
    assert columns == ["t", "gbitps", "pair", "meta", "none", "name", "extra"]
    back = series.read(tmp_path, "series/_cluster/x.csv")
    assert back[0] == {"t": 0, "gbitps": 9.5, "pair": "n1|n2", "meta": '{"b": 1}', "none": None, "name": "n1",
                       "extra": None}
    assert back[1]["gbitps"] == 0.001 and back[1]["extra"] == "only here"
    assert not list((tmp_path / "series/_cluster").glob(".*"))  # written atomically, nothing left over
    series.write(tmp_path, "series/_cluster/x.csv", rows[:1], columns=["t"])  # replaced, as asked
    assert series.read(tmp_path, "series/_cluster/x.csv") == [{"t": 0}]


@pytest.mark.parametrize(("text", "value"), [
    ("", None), ("12", 12), ("-3", -3), ("12.0", 12.0), ("1e3", 1000.0), ("0.5", 0.5), ("abc", "abc"),
    ("0000:1b:00", "0000:1b:00"), ("2026/11/30 00:19:14.021", "2026/11/30 00:19:14.021"),
    ("1_000", "1_000"), ("0_1", "0_1"),  # underscores are text (Python's float() would read them)
])
def test_typed_reads_back_numbers_only_where_they_are_numbers(text, value):
    assert series.typed(text) == value and type(series.typed(text)) is type(value)


def test_write_pending_writes_one_file_per_path_and_counts_rows(tmp_path):
    path = "series/_cluster/network-mesh-tcp.csv"
    items = [{"check": "a", "series": [{"path": path, "kind": "timeseries",
                                        "data": [{"s": 1, "v": 2}, {"s": 1, "v": 3}]}]},
             {"check": "b", "series": [{"path": path, "kind": "timeseries", "data": [{"s": 2, "v": 4}]}]},
             {"check": "c", "series": [{"path": "series/n1/kept.csv", "rows": 9}]}, {"check": "d"}]
    series.write_pending(tmp_path, items)
    assert [r["v"] for r in series.read(tmp_path, path)] == [2, 3, 4]
    assert items[0]["series"][0] == {"path": path, "kind": "timeseries", "rows": 2, "columns": ["s", "v"]}
    assert items[1]["series"][0]["rows"] == 1 and items[2]["series"][0] == {"path": "series/n1/kept.csv", "rows": 9}
    assert not (tmp_path / "series/n1/kept.csv").exists()


# ------------------------------------------------------------------------------------------------ kept probes


def test_probe_outputs_kept_and_read_back_by_pattern(tmp_path):
    probes = {"network_ping@n2": {"name": "network_ping@n2", "cmd": "ping", "rc": 0, "stdout": "out\n",
                                  "stderr": "", "params": {"destination": "10.0.0.2"},
                                  "artifact": "network-ping-to-n2.txt", "duration_s": 1.5, "secret_extra": "not kept"},
              "network_route": {"name": "network_route", "cmd": "ip", "rc": 0, "stdout": "route\n"},
              "odd name/with slash": {"name": "odd name/with slash", "cmd": "x", "rc": 1, "stdout": ""}}
    kept = rundir.keep_probe_outputs(str(tmp_path), "n1", probes)
    assert kept["network_ping@n2"]["artifact"] == "raw/n1/network-ping-to-n2.txt"
    assert kept["odd name/with slash"]["artifact"] == "raw/n1/odd_name_with_slash.txt"
    meta = json.loads((tmp_path / "raw/n1/network-ping-to-n2.txt.meta.json").read_text())
    assert set(meta) == set(rundir.META_KEYS) and meta["params"] == {"destination": "10.0.0.2"}
    assert "secret_extra" not in meta and "stdout" not in meta
    back = rundir.kept_probes(str(tmp_path), "n1", ["network_ping@*", "network_route"])
    assert set(back) == {"network_ping@n2", "network_route"}
    assert back["network_ping@n2"]["stdout"] == "out\n"
    assert back["network_ping@n2"]["params"]["destination"] == "10.0.0.2"
    assert back["network_ping@n2"]["artifact"] == "raw/n1/network-ping-to-n2.txt"
    (tmp_path / "raw/n1/broken.meta.json").write_text("{")
    assert set(rundir.kept_probes(str(tmp_path), "n1", ["*"])) == set(probes)
    assert rundir.kept_probes(str(tmp_path), "n9", ["*"]) == {}
