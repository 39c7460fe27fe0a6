"""Parser for the lifecycle probes (``checks/probes/lifecycle.yml``): one record per line.

Each line the probes print is ``<record> key=value key=value ... [reason=free text]``: the record's kind
(``tier``, ``install``, ``import``, ``wan``, ``pull``, ``model``, ``serve``, ``actions``, ``end``), then
``key=value`` words (a value holds no blank), and last, optionally, ``reason=`` with the rest of the line
(a tool's last message, which may hold blanks and ``=``). Numbers are read for the keys that hold them
(``rc``, ``http``, ``bytes``, ``up_bytes``, ``files``, ``installed``, ``repeat`` and every ``*_s``); a
number that does not read stays the text it was, with a warning. Lines of any other shape (a tool's own
output that slipped through) are ignored and counted in ``warnings``.

Result: ``records`` (list of dicts, each with its ``record`` kind, in the order printed) and ``complete``:
whether the probe's closing ``end`` record was printed (a probe cut short has none; every record read
so far is still returned). No record at all is a :class:`ParseError`.
"""

from __future__ import annotations

from typing import Any

from clustereval.parsers import register
from clustereval.parsers._common import record_lines

TOOL = "probe-lifecycle"
RECORDS = ("tier", "install", "import", "wan", "pull", "model", "serve", "actions", "end")
INTEGERS = {"rc", "http", "bytes", "up_bytes", "files", "installed", "repeat"}


@register(TOOL)
def parse(text: str) -> dict[str, Any]:
    return record_lines(TOOL, text, RECORDS, INTEGERS, "lifecycle")
