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

from typing import Any

from clustereval.parsers import register
from clustereval.parsers._common import record_lines

TOOL = "probe-orchestration"
RECORDS = ("submit", "wait", "job", "requeue", "end")
INTEGERS = {"jobs", "failed", "restarts", "arraytaskid"}


@register(TOOL)
def parse(text: str) -> dict[str, Any]:
    return record_lines(TOOL, text, RECORDS, INTEGERS, "orchestration")
