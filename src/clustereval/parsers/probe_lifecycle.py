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

import re
from typing import Any

from clustereval.parsers import register
from clustereval.parsers._common import result, to_float, to_int
from clustereval.parsers.errors import ParseError

TOOL = "probe-lifecycle"
RECORDS = ("tier", "install", "import", "wan", "pull", "model", "serve", "actions", "end")
INTEGERS = {"rc", "http", "bytes", "up_bytes", "files", "installed", "repeat"}
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
    if marker and head and not head.endswith(" "):  # "reason=" inside a word (e.g. "xreason=") is no reason
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
        raise ParseError("no lifecycle record in the probe's output" + (" (only other output)" if ignored else ""))
    if ignored:
        warnings.append(f"{ignored} line(s) that are no lifecycle record were ignored")
    ended = any(r["record"] == "end" for r in records)
    return result(TOOL, "records", complete=ended, warnings=warnings, records=records)
