"""Parser for the ``storage_consistency`` probe (checks/probes/storage_consistency.yml): the JSON report its
coordinator prints once every test ran.

``probe-storage-consistency`` gives the report as printed (``self``, ``tests``, ``discovery``, ``peers``,
``settings`` and ``directories``: per shared directory its ``mount``, what each peer saw of it and each
test's counts), checked for the shape the checks read: a mapping with the report's ``format``, a
``directories`` list of mappings each with a ``path`` and ``tests`` and ``peers`` mappings.
"""

from __future__ import annotations

import json
from typing import Any

from clustereval.parsers import register
from clustereval.parsers._common import result
from clustereval.parsers.errors import ParseError

TOOL = "probe-storage-consistency"
FORMAT = "clustereval-storage-consistency/1"


@register(TOOL)
def parse(text: str) -> dict[str, Any]:
    start = text.find("{")
    if start < 0:
        raise ParseError("the consistency test printed no JSON report")
    try:
        report = json.loads(text[start:])
    except ValueError as exc:
        raise ParseError(f"the consistency test's report is not complete JSON: {exc}") from None
    if not isinstance(report, dict) or report.get("format") != FORMAT:
        raise ParseError(f"not a consistency test report (format {FORMAT} expected)")
    directories = report.get("directories")
    if not isinstance(directories, list):
        raise ParseError("the consistency test's report has no 'directories' list")
    for index, entry in enumerate(directories):
        if not isinstance(entry, dict) or not isinstance(entry.get("path"), str):
            raise ParseError(f"directory {index} of the consistency test's report has no path")
        for key in ("tests", "peers"):
            if not isinstance(entry.get(key), dict):
                raise ParseError(f"directory {entry['path']} of the consistency test's report has no '{key}'")
    for key in ("discovery", "settings"):
        if not isinstance(report.get(key) or {}, dict):
            raise ParseError(f"the consistency test's report has a malformed '{key}'")
    fields = {k: v for k, v in report.items() if k not in ("format", "tool", "complete", "warnings")}
    return result(TOOL, "json", complete=True, **fields)
