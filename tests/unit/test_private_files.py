"""Every file clustereval writes into a run directory is the owner's alone (0600, folders 0700), whatever the
umask: results, raw probe output and its metadata, facts and series hold passwd entries, package lists and
Slurm's configuration (issue S)."""

from __future__ import annotations

import os
import stat

import pytest

from clustereval import facts, results, rundir, series


@pytest.fixture
def open_umask():
    previous = os.umask(0o022)
    yield
    os.umask(previous)


def modes(root):
    return {str(p.relative_to(root)): stat.S_IMODE(p.stat().st_mode) for p in root.rglob("*")}


def test_run_files_are_private_whatever_the_umask(tmp_path, open_umask):
    run = tmp_path / "run"
    results.append(run, [{"run_id": "r", "check": "audit.gpu.inventory", "phase": "audit", "domain": "audit",
                          "subject": "n1", "status": "pass", "severity": "critical", "summary": "8 GPUs"}])
    rundir.keep_probe_outputs(str(run), "n1", {"getent": {"name": "getent", "cmd": "getent passwd", "rc": 0,
                                                           "stdout": "root:x:0:0::/root:/bin/bash\n"}})
    facts.write(run, "n1", {"gpu_count": 8})
    series.write(run, "series/n1/curve.csv", [{"size": 1, "busbw": 2.0}])
    found = modes(run)
    assert {"results.jsonl", "raw/n1/getent.txt", "raw/n1/getent.txt.meta.json", "facts/n1.json",
            "series/n1/curve.csv"} <= set(found)
    assert {p: m for p, m in found.items() if (run / p).is_file() and m != 0o600} == {}
    assert {p: m for p, m in found.items() if (run / p).is_dir() and m != 0o700} == {}
