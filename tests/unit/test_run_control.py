"""Ctrl-C and SIGTERM on ``clustereval evaluate`` (``clustereval.run_control``), against a stand-in for
ansible-playbook: the first signal is passed on as a SIGINT, a second one stops at once, and whatever the
run left is stopped when it ends."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from clustereval import proctree, run_control

# Stands in for ansible-playbook (its command line says so): records the signal it gets, then exits.
PLAYBOOK = """
import signal, sys, time
def stop(signum, frame):
    open(sys.argv[1], "w").write(signal.Signals(signum).name)
    sys.exit(99)
signal.signal(signal.SIGINT, stop)
time.sleep(60)
"""


@pytest.fixture(autouse=True)
def no_subreaper(monkeypatch):
    # The test process must not become a subreaper for the rest of the session.
    monkeypatch.setattr(proctree, "become_subreaper", lambda on=True: False)


def start_playbook(tmp_path: Path) -> tuple[subprocess.Popen, Path]:
    got = tmp_path / "got"
    proc = subprocess.Popen([sys.executable, "-c", PLAYBOOK, str(got), "ansible-playbook"])
    time.sleep(0.3)  # its handler is installed
    return proc, got


def test_the_first_signal_reaches_ansible_playbook_as_a_sigint(tmp_path):
    proc, got = start_playbook(tmp_path)
    out = io.StringIO()
    with run_control.RunControl(out, grace_s=30) as control:
        assert control.interrupted is None and not control.cancel()
        os.kill(os.getpid(), signal.SIGTERM)
        assert proc.wait(timeout=10) == 99
        assert got.read_text() == "SIGINT"
        assert control.interrupted.startswith("SIGTERM (a cancelled job or a shutdown) at 20")
        assert not control.cancel(), "the playbook gets its grace period to clean up"
        os.kill(os.getpid(), signal.SIGINT)  # a second one: stop at once
        assert control.cancel()
    assert "stopping the run" in out.getvalue() and "stopping the run now" in out.getvalue()
    assert signal.getsignal(signal.SIGINT) is not control._on_signal  # handlers restored


def test_what_the_run_left_is_stopped_when_it_ends(tmp_path):
    left = subprocess.Popen(["sleep", "60"])
    with run_control.RunControl(io.StringIO()) as control:
        forced = control.finish(tmp_path, tmp_path / "no-masters")
    # (the control reaps what it stopped, as it does for orphans: the status is its, not Popen's)
    assert left.wait(timeout=5) is not None and forced == [] and not _running(left.pid)
    stubborn = subprocess.Popen([sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, "
                                 "signal.SIG_IGN); time.sleep(60)"])
    time.sleep(0.3)
    with run_control.RunControl(io.StringIO()) as control:
        forced = control.finish(tmp_path, tmp_path / "no-masters")
    assert forced == [stubborn.pid] and stubborn.wait(timeout=5) is not None and not _running(stubborn.pid)


def _running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False
