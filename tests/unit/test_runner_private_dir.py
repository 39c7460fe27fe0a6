"""ansible-runner's private folder (the run's extra vars and the controller's environment in clear) never
outlives the run: removed by the run itself, or, after a SIGKILL, by the next run (issue S)."""

from __future__ import annotations

import subprocess
import sys

from clustereval import runinfo, runner


def test_a_killed_runs_private_folder_is_removed_by_the_next_run(tmp_path):
    # A run killed before its clean-up: its marker names a process that is gone.
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    killed = tmp_path / f"{runner.RUNNER_PREFIX}dead"
    killed.mkdir()
    (killed / "env").mkdir()
    (killed / "env" / "extravars").write_text("secret: canary\n")
    (killed / runner.RUNNER_OWNER).write_text(f"{child.pid} {runinfo.process_start(child.pid)}\n")
    child.kill()
    child.wait()
    # A run still going on (this test's own process) and a folder of someone else's making stay.
    live = tmp_path / f"{runner.RUNNER_PREFIX}live"
    live.mkdir()
    runinfo.mark_active(live / runner.RUNNER_OWNER)
    foreign = tmp_path / f"{runner.RUNNER_PREFIX}unmarked"
    foreign.mkdir()
    assert runner.sweep_runner_dirs(tmp_path) == [killed]
    assert not killed.exists() and live.exists() and foreign.exists()
