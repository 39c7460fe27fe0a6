"""What the controller-side actions share about the run directory: where it is, keeping raw tool output as
artifacts, recording results the moment they are known, and reading back probes kept earlier in the run.

The judge, session and undo actions run in Ansible's forked workers, several at once: every write here is
per host (artifacts) or append-only under a lock (``results.jsonl``, ``journal.jsonl``).
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
from pathlib import Path
from typing import Any

from clustereval import private, redact
from clustereval import results as results_mod

SAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")
META_SUFFIX = ".meta.json"
META_KEYS = ("name", "cmd", "rc", "stderr", "duration_s", "timed_out", "missing", "truncated", "timeout",
             "parser", "params", "on_timeout", "runs")
# Task-result key saying the action already appended its results (the callback must not write them again).
RECORDED_KEY = "clustereval_results_recorded"


class RunDirMissing(RuntimeError):
    """No run directory is known for this task."""


def safe(name: str) -> str:
    """A name usable as one path component."""
    return SAFE_NAME.sub("_", str(name)) or "_"


def locate(task_vars: dict[str, Any]) -> tuple[str, str]:
    """(run directory, run id) from the task's variables or localhost's (where ``run_start`` sets them)."""
    local = (task_vars.get("hostvars") or {}).get("localhost", {})
    run_dir = task_vars.get("clustereval_run_dir") or local.get("clustereval_run_dir")
    run_id = task_vars.get("clustereval_run_id") or local.get("clustereval_run_id") or "unknown"
    if not run_dir:
        raise RunDirMissing("clustereval_run_dir is not set: run clustereval.gpu.run_start first "
                            "(playbooks/evaluate.yml and every clustereval role do) or set it as a variable")
    return str(run_dir), str(run_id)


def host_dir(run_dir: str | os.PathLike[str], subject: str) -> Path:
    return Path(run_dir) / "raw" / safe(subject)


def keep_probe_outputs(run_dir: str, subject: str, probes: dict[str, Any]) -> dict[str, Any]:
    """Write each probe's stdout under ``raw/<subject>/`` (plus ``<file>.meta.json``: command, exit status,
    stderr, duration, params, with secrets and URL credentials redacted) and point the probe record at it
    (``artifact``, relative to the run dir)."""
    folder = host_dir(run_dir, subject)
    if probes:
        private.folder(folder)
    kept = {}
    for name, probe in probes.items():
        probe = dict(probe)
        path = folder / safe(probe.get("artifact") or f"{name}.txt")
        with private.open_file(path, "w", encoding="utf-8", errors="replace") as fh:
            fh.write(probe.get("stdout") or "")
        # A probe's params and command may carry a credential (a pip index URL with a token): never on disk.
        meta = redact.redact({key: probe.get(key) for key in META_KEYS})
        with private.open_file(str(path) + META_SUFFIX, "w", encoding="utf-8") as fh:
            json.dump(meta, fh, indent=2, sort_keys=True, default=str)
        probe["artifact"] = os.path.relpath(path, run_dir)
        kept[name] = probe
    return kept


def kept_probes(run_dir: str, subject: str, patterns: list[str]) -> dict[str, Any]:
    """Probe records kept earlier in this run for ``subject`` whose names match one of ``patterns`` (globs),
    read back from ``raw/<subject>/`` — how a cluster-wide check judges what every node measured."""
    folder = host_dir(run_dir, subject)
    out: dict[str, Any] = {}
    if not folder.is_dir():
        return out
    for meta_path in sorted(folder.glob("*" + META_SUFFIX)):
        try:
            meta = json.loads(meta_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        name = str(meta.get("name") or "")
        if not name or not any(fnmatch.fnmatchcase(name, p) for p in patterns):
            continue
        data_path = Path(str(meta_path)[: -len(META_SUFFIX)])
        try:
            stdout = data_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        out[name] = {**meta, "stdout": stdout, "artifact": os.path.relpath(data_path, run_dir)}
    return out


def record(run_dir: str, items: list[dict[str, Any]]) -> int:
    """Append results to the run's ``results.jsonl`` now (fsynced; safe from several workers at once)."""
    return results_mod.append(run_dir, items)
