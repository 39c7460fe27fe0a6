"""The probe runner, run the way the judge action runs it on a node: its source as ``python -c``, JSON in and out."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

SOURCE = (Path(__file__).resolve().parents[2] / "plugins/module_utils/probe_runner.py").read_text()


def run(request: object, raw: str | None = None) -> tuple[int, dict]:
    proc = subprocess.run([sys.executable, "-c", SOURCE], input=raw if raw is not None else json.dumps(request),
                          capture_output=True, text=True, timeout=60)
    return proc.returncode, json.loads(proc.stdout)


def test_each_outcome_is_reported_per_probe():
    rc, answer = run({"probes": [
        {"name": "ok", "cmd": "echo hello; echo oops >&2", "parser": "x", "artifact": "ok.txt"},
        {"name": "failed", "cmd": "exit 3"},
        {"name": "slow", "cmd": "sleep 5", "timeout": 0.3},
        {"name": "absent_tool", "cmd": "no-such-tool --version", "tool": "no-such-tool"},
        {"name": "absent_cmd", "cmd": "no-such-tool-either"},
    ]})
    assert rc == 0 and answer["duration_s"] < 5
    probes = answer["probes"]
    assert probes["ok"]["stdout"] == "hello\n" and probes["ok"]["stderr"] == "oops\n"
    assert probes["ok"]["parser"] == "x" and probes["ok"]["artifact"] == "ok.txt"  # passed through
    assert probes["failed"]["rc"] == 3 and not probes["failed"]["missing"]
    assert probes["slow"]["timed_out"] and probes["slow"]["rc"] is not None
    assert probes["absent_tool"]["missing"] and probes["absent_tool"]["rc"] == 127
    assert probes["absent_cmd"]["missing"] and probes["absent_cmd"]["rc"] == 127
    rc, answer = run({"max_output_bytes": 10, "probes": [{"name": "long", "cmd": "printf '0123456789abcdef'"}]})
    assert answer["probes"]["long"]["stdout"] == "0123456789" and answer["probes"]["long"]["truncated"]


def test_a_bad_request_fails_with_a_reason_and_runs_nothing():
    rc, answer = run({"probes": [{"name": "a", "cmd": "true"}, {"name": "a", "cmd": "true"}]})
    assert rc == 2 and answer["failed"] and "unique" in answer["msg"]
    rc, answer = run({"probes": [{"name": "no command"}]})
    assert rc == 2 and "lack a name or a cmd" in answer["msg"]
    rc, answer = run(None, raw="{not json")
    assert rc == 2 and "unreadable probe request" in answer["msg"]


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def _wait_for(path: Path, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert path.exists(), f"{path} never appeared"


def _start_runner(request: dict) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-c", SOURCE], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    proc.stdin.write(json.dumps(request))
    proc.stdin.close()
    return proc


def _cut_short_request(tmp_path: Path) -> dict:
    """A probe that leaves a file and then works on (its process group: a shell and a background sleep), and a
    probe queued after it, both with the same clean-up."""
    left = tmp_path / "left-behind.dat"
    body = ('echo data > "$CLUSTEREVAL_FILE"; echo $$ > "$CLUSTEREVAL_FILE.pid"; '
            'sleep 60 & echo $! > "$CLUSTEREVAL_FILE.child"; wait')
    cleanup = 'rm -f -- "$CLUSTEREVAL_FILE"'
    return {"probes": [
        {"name": "writes", "cmd": body, "runs": "exclusive", "timeout": 120, "params": {"file": str(left)},
         "cleanup": cleanup},
        {"name": "queued", "cmd": f'touch "{tmp_path}/queued-ran"', "runs": "exclusive",
         "params": {"file": str(left)}, "cleanup": cleanup},
    ]}


def test_a_lost_controller_stops_every_probe_and_cleans_up(tmp_path):
    # The SSH session closing is the reader of the runner's stdout going away.
    left = tmp_path / "left-behind.dat"
    proc = _start_runner(_cut_short_request(tmp_path))
    _wait_for(Path(f"{left}.child"))
    shell, child = int(Path(f"{left}.pid").read_text()), int(Path(f"{left}.child").read_text())
    proc.stdout.close()  # the controller is gone: nobody reads the answer
    assert proc.wait(timeout=15) == 3
    deadline = time.monotonic() + 5
    while (_alive(shell) or _alive(child)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(shell) and not _alive(child)
    assert not left.exists(), "the probe's clean-up did not run"
    assert not (tmp_path / "queued-ran").exists(), "a probe started after the collection was abandoned"


def test_a_signalled_runner_stops_its_probes_and_cleans_up(tmp_path):
    left = tmp_path / "left-behind.dat"
    proc = _start_runner(_cut_short_request(tmp_path))
    _wait_for(Path(f"{left}.child"))
    child = int(Path(f"{left}.child").read_text())
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=15) == 3
    assert proc.stdout.read() == ""  # nobody is left to answer
    assert not _alive(child) and not left.exists() and not (tmp_path / "queued-ran").exists()


def test_cleanup_runs_once_the_collection_ends(tmp_path):
    # The write and the read share the file: it is removed once, after both, not between them.
    data = tmp_path / "data"
    rc, answer = run({"probes": [
        {"name": "write", "cmd": 'echo x > "$CLUSTEREVAL_FILE"', "runs": "exclusive",
         "params": {"file": str(data)}, "cleanup": 'rm -f -- "$CLUSTEREVAL_FILE"'},
        {"name": "read", "cmd": 'cat "$CLUSTEREVAL_FILE"', "runs": "exclusive",
         "params": {"file": str(data)}, "cleanup": 'rm -f -- "$CLUSTEREVAL_FILE"'},
    ]})
    assert rc == 0 and answer["probes"]["read"]["stdout"] == "x\n" and "abandoned" not in answer
    assert not data.exists()
