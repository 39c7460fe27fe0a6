"""Shared helpers for the tool-output parsers.

Every parser is a pure function ``text -> dict``. The helpers here normalise what launchers and
terminals do to tool output before a parser sees it, so each parser only has to understand the
tool itself:

* bytes are decoded as UTF-8 with replacement characters (never a UnicodeError);
* CRLF becomes LF and ANSI colour/cursor escape sequences are removed;
* ``srun -l`` rank prefixes (``0: ``, ``12: ``) and ``mpirun --tag-output`` prefixes
  (``[1,0]<stdout>:``, ``[1,3]<stderr>:``) are stripped when they prefix most non-empty lines;
* trailing blanks (spaces, tabs, a CR left over from a mixed line ending) are removed from every line;
* then lone CRs (progress redraws) become LF;
* an indentation every non-blank line shares (a capture pasted as an indented code block) is removed.

Parsers that compare indentation measure it with :func:`indent_columns` (tabs expanded to 8 columns), so a
capture whose tabs became spaces, or whose spaces became tabs, nests the same way.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from clustereval.parsers.errors import ParseError

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-Z\\-_]")
# `srun -l` prints the task id (never zero-padded, right-aligned) then ": " — a PCI domain such as
# "0000:3b:00.0" must not look like one. `mpirun --tag-output` adds no space after the colon.
_SRUN_PREFIX = re.compile(r"^\s{0,5}(?:0|[1-9]\d{0,5}): ")
_MPIRUN_PREFIX = re.compile(r"^\[\d+,\d+\]<(?:stdout|stderr|stddiag)>:")
_BLANKS = " \t\r"


def to_text(data: str | bytes | bytearray | None) -> str:
    """Decode tool output to ``str`` without ever raising (invalid UTF-8 becomes U+FFFD)."""
    if data is None:
        return ""
    if isinstance(data, (bytes, bytearray)):
        return bytes(data).decode("utf-8", errors="replace")
    if not isinstance(data, str):
        raise ParseError(f"expected text or bytes, got {type(data).__name__}")
    return data


def _strip_prefix(lines: list[str], pattern: re.Pattern[str]) -> list[str] | None:
    nonempty = [ln for ln in lines if ln.strip()]
    if not nonempty:
        return None
    hits = sum(1 for ln in nonempty if pattern.match(ln))
    if hits < max(1, int(len(nonempty) * 0.6)):
        return None
    return [pattern.sub("", ln, count=1) for ln in lines]


def clean(data: str | bytes | bytearray | None) -> str:
    """Return tool output with line endings, ANSI codes and launcher prefixes normalised."""
    text = to_text(data)
    text = _ANSI.sub("", text).replace("\r\n", "\n")
    lines = text.split("\n")
    for _layer in range(2):  # `srun` around `mpirun` gives two layers of prefixes
        for pattern in (_MPIRUN_PREFIX, _SRUN_PREFIX):
            stripped = _strip_prefix(lines, pattern)
            if stripped is not None:
                lines = stripped
                break
        else:
            break
    # Progress lines redrawn with a bare CR (gpu-burn, wget-style bars) become lines of their own only
    # now: a launcher labels whole LF-terminated lines, CRs included.
    lines = "\n".join(line.rstrip(_BLANKS) for line in lines).replace("\r", "\n").split("\n")
    return "\n".join(_dedent(lines))


def _dedent(lines: list[str]) -> list[str]:
    """Remove the leading whitespace that every non-blank line shares (none is shared by tool output)."""
    body = [line for line in lines if line.strip()]
    if not body or not body[0][:1].isspace():
        return lines
    shared = body[0][:len(body[0]) - len(body[0].lstrip(_BLANKS))]
    for line in body[1:]:
        while shared and not line.startswith(shared):
            shared = shared[:-1]
        if not shared:
            return lines
    return [line[len(shared):] for line in lines]


def indent_columns(line: str) -> int:
    """How far ``line`` is indented, in columns with tabs expanded to 8 (as a terminal shows it)."""
    expanded = line.expandtabs(8)
    return len(expanded) - len(expanded.lstrip(" "))


def to_float(token: str | None) -> float | None:
    """Parse a number as tools print it; ``N/A``, ``-``, ``inf`` garbage and blanks give None."""
    if token is None:
        return None
    token = token.strip().rstrip(",")
    if not token or token.upper() in {"N/A", "NA", "-", "--", "[N/A]", "NAN", "UNKNOWN", "[UNKNOWN ERROR]"}:
        return None
    try:
        value = float(token)
    except ValueError:
        return None
    if value != value or value in (float("inf"), float("-inf")):
        return None
    return value


def to_int(token: str | None) -> int | None:
    """Parse an integer (decimal or 0x-hex); anything unreadable gives None."""
    if token is None:
        return None
    token = token.strip().rstrip(",")
    try:
        return int(token, 0) if token.lower().startswith("0x") else int(token)
    except ValueError:
        value = to_float(token)
        return int(value) if value is not None and value.is_integer() else None


def result(tool: str, fmt: str, *, complete: bool, warnings: list[str] | None = None,
           **fields: Any) -> dict[str, Any]:
    """Build the common envelope every parser returns."""
    out: dict[str, Any] = {"tool": tool, "format": fmt, "complete": bool(complete)}
    out.update(fields)
    out["warnings"] = list(warnings or [])
    return out


def json_objects(text: str, warnings: list[str], **loads: Any) -> Iterator[tuple[str, dict[str, Any]]]:
    """(line, object) for the JSON objects of a JSON-lines output, in order; a line that is not one goes to
    ``warnings`` (a benchmark's stray print or a library's warning is not its record)."""
    for line in text.split("\n"):
        stripped = line.strip()
        if not stripped:
            continue
        try:
            obj = json.loads(stripped, **loads)
        except ValueError:
            warnings.append(f"not a JSON line: {stripped[:160]}")
            continue
        if not isinstance(obj, dict):
            warnings.append(f"not a JSON object: {stripped[:160]}")
            continue
        yield stripped, obj


_RECORD_WORD = re.compile(r"^([a-z][a-z0-9_]*)=(\S*)$")


def _record_value(key: str, text: str, integers: frozenset[str], warnings: list[str]) -> Any:
    if key in integers:
        number: Any = to_int(text)
    elif key.endswith("_s"):
        number = to_float(text)
    else:
        return text
    if number is None and text:
        warnings.append(f"{key}={text[:40]} is not a number")
        return text
    return number


def _record(line: str, kinds: tuple[str, ...], integers: frozenset[str], warnings: list[str]) -> dict[str, Any] | None:
    kind, _, rest = line.partition(" ")
    if kind not in kinds:
        return None
    head, marker, reason = rest.partition("reason=")
    if marker and head and not head.endswith(" "):  # "reason=" inside a word (e.g. "xreason=") is no reason
        head, marker, reason = rest, "", ""
    out: dict[str, Any] = {"record": kind}
    for word in head.split():
        match = _RECORD_WORD.match(word)
        if not match:
            warnings.append(f"{kind} record: unreadable word {word[:40]!r}")
            continue
        out[match.group(1)] = _record_value(match.group(1), match.group(2), integers, warnings)
    if marker:
        out["reason"] = reason.strip()
    return out


def record_lines(tool: str, text: str, kinds: tuple[str, ...], integers: set[str], what: str) -> dict[str, Any]:
    """Our probes' one-record-per-line output: ``<kind> key=value ... [reason=free text]``, ``kind`` one of
    ``kinds``; numbers read for ``integers`` and every ``*_s`` key (a number that does not read stays its text,
    with a warning); other lines ignored and counted. ``complete`` when the closing ``end`` record came. No
    record at all is a :class:`ParseError` naming ``what`` the probe is."""
    records: list[dict[str, Any]] = []
    warnings: list[str] = []
    ignored = 0
    numbers = frozenset(integers)
    for line in text.splitlines():
        if not line.strip():
            continue
        found = _record(line.strip(), kinds, numbers, warnings)
        if found is None:
            ignored += 1
        else:
            records.append(found)
    if not records:
        raise ParseError(f"no {what} record in the probe's output" + (" (only other output)" if ignored else ""))
    if ignored:
        warnings.append(f"{ignored} line(s) that are no {what} record were ignored")
    ended = any(r["record"] == "end" for r in records)
    return result(tool, "records", complete=ended, warnings=warnings, records=records)
