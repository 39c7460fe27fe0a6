"""Parser for the orchestration probes (``checks/probes/orchestration.yml``): one record per line.

Each line is ``<record> key=value ... [reason=free text]`` (the lifecycle probes' shape):
``submit`` (a loop of sbatch or one array: jobs, failed, submit_s), ``wait`` (makespan_s, state
done/timeout), ``job`` (one per job or array task, the fields of ``scontrol show job`` in lower case:
jobstate, restarts, submittime, eligibletime, starttime, endtime),
``requeue`` and ``end``. Numbers are read for ``jobs``, ``failed``, ``restarts``, ``arraytaskid`` and every
``*_s``; Slurm's times (``2026-12-02T12:23:20``, or ``Unknown``/``None``) stay text for the checks.

Result: ``records`` and ``complete`` (the closing ``end`` was printed). No record at all is a
:class:`ParseError`.
"""

from __future__ import annotations

import re
from typing import Any

from clustereval.parsers import register
from clustereval.parsers._common import result, to_float, to_int
from clustereval.parsers.errors import ParseError

TOOL = "probe-orchestration"
RECORDS = ("submit", "wait", "job", "requeue", "end")
INTEGERS = {"jobs", "failed", "restarts", "arraytaskid"}
WORD = re.compile(r"^([a-z][a-z0-9_]*)=(\S*)$")


def _value(key: str, text: str, warnings: list[str]) -> Any:
    if key in INTEGERS:
        number: Any = to_int(text)
    elif key.endswith("_s"):
        number = to_float(text)
    else:
        return text
    if number is None and text:
        warnings.append(f"{key}={text[:40]} is not a number")
        return text
    return number


def record(line: str, warnings: list[str]) -> dict[str, Any] | None:
    """One line as a record, or None when it is not one."""
    kind, _, rest = line.partition(" ")
    if kind not in RECORDS:
        return None
    head, marker, reason = rest.partition("reason=")
    if marker and head and not head.endswith(" "):
        head, marker, reason = rest, "", ""
    out: dict[str, Any] = {"record": kind}
    for word in head.split():
        match = WORD.match(word)
        if not match:
            warnings.append(f"{kind} record: unreadable word {word[:40]!r}")
            continue
        out[match.group(1)] = _value(match.group(1), match.group(2), warnings)
    if marker:
        out["reason"] = reason.strip()
    return out


@register(TOOL)
def parse(text: str) -> dict[str, Any]:
    records: list[dict[str, Any]] = []
    warnings: list[str] = []
    ignored = 0
    for line in text.splitlines():
        if not line.strip():
            continue
        found = record(line.strip(), warnings)
        if found is None:
            ignored += 1
        else:
            records.append(found)
    if not records:
        raise ParseError("no orchestration record in the probe's output" + (" (only other output)" if ignored else ""))
    if ignored:
        warnings.append(f"{ignored} line(s) that are no orchestration record were ignored")
    ended = any(r["record"] == "end" for r in records)
    return result(TOOL, "records", complete=ended, warnings=warnings, records=records)
