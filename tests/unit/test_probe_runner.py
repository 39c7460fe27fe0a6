"""The probe runner, run the way the judge action runs it on a node: its source as ``python -c``, JSON in and out."""

from __future__ import annotations

import json
import subprocess
import sys
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
