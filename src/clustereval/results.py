"""The check result: the contract between roles, the callback, scoring and reports.

One JSON object per check per subject (a host name, or ``_cluster`` for cluster-wide checks), appended
to ``results.jsonl`` in the run directory and flushed as soon as the check finishes.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

STATUSES = ("pass", "warn", "fail", "skip", "error")
SEVERITIES = ("critical", "major", "minor", "info")
PHASES = ("audit", "performance", "reliability")
CLUSTER_SUBJECT = "_cluster"
RESULTS_FILE = "results.jsonl"
# The task-result key carrying a task's results, as one JSON string: Ansible walks and tags every nested
# value of a task result before each callback, which cost 0.7 s of the controller's one strategy thread
# per 60-result host on ansible-core 2.19; a string is one value.
TASK_RESULT_KEY = "clustereval_results_json"

REQUIRED_FIELDS = ("run_id", "check", "phase", "domain", "subject", "status", "severity", "summary")


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def problems(result: dict[str, Any]) -> list[str]:
    """What is wrong with a check result dict (empty when it honours the contract)."""
    out = [f"missing field {name!r}" for name in REQUIRED_FIELDS if result.get(name) in (None, "")]
    if result.get("status") not in STATUSES:
        out.append(f"status {result.get('status')!r} is not one of {', '.join(STATUSES)}")
    if result.get("severity") not in SEVERITIES:
        out.append(f"severity {result.get('severity')!r} is not one of {', '.join(SEVERITIES)}")
    if result.get("phase") not in PHASES:
        out.append(f"phase {result.get('phase')!r} is not one of {', '.join(PHASES)}")
    if result.get("status") == "skip" and not result.get("summary"):
        out.append("a skip must say why in its summary")
    if not isinstance(result.get("artifacts", []), list):
        out.append("artifacts must be a list of paths relative to the run directory")
    if not isinstance(result.get("evidence", {}), dict):
        out.append("evidence must be a mapping")
    return out


def to_task_result(results: list[dict[str, Any]]) -> str:
    """The value of :data:`TASK_RESULT_KEY` for ``results``."""
    return json.dumps(results, sort_keys=True, default=str)


def from_task_result(task_result: dict[str, Any]) -> list[dict[str, Any]]:
    """The results a task returned under :data:`TASK_RESULT_KEY` (none when it returned none).

    Raises ``ValueError`` when the value is not a JSON list of result objects.
    """
    text = task_result.get(TASK_RESULT_KEY)
    if not text:
        return []
    items = json.loads(text)
    if not isinstance(items, list) or not all(isinstance(item, dict) for item in items):
        raise ValueError(f"{TASK_RESULT_KEY} is not a JSON list of result objects")
    return items


def append(run_dir: str | os.PathLike[str], results: Iterable[dict[str, Any]]) -> int:
    """Append results to ``results.jsonl``; each line is flushed and fsynced before returning."""
    path = Path(run_dir) / RESULTS_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    count = 0
    with open(path, "a", encoding="utf-8") as fh:
        for result in results:
            fh.write(json.dumps(result, sort_keys=True, default=str) + "\n")
            count += 1
        fh.flush()
        os.fsync(fh.fileno())
    return count


def load(run_dir: str | os.PathLike[str]) -> tuple[list[dict[str, Any]], list[str]]:
    """Read ``results.jsonl``; returns (results, warnings). A torn last line (a crash mid-write) is
    reported in the warnings, never fatal."""
    path = Path(run_dir) / RESULTS_FILE
    if not path.exists():
        return [], [f"{path} does not exist"]
    results: list[dict[str, Any]] = []
    warnings: list[str] = []
    with open(path, encoding="utf-8", errors="replace") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                warnings.append(f"{path.name}:{lineno}: unreadable line skipped ({exc.msg})")
                continue
            if not isinstance(obj, dict):
                warnings.append(f"{path.name}:{lineno}: not a JSON object, skipped")
                continue
            results.append(obj)
    return results, warnings


def latest(results: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Keep the last result per (check, subject): a re-run check supersedes its earlier line."""
    keyed: dict[tuple[str, str], dict[str, Any]] = {}
    for result in results:
        keyed[(str(result.get("check")), str(result.get("subject")))] = result
    return list(keyed.values())
