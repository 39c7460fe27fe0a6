"""Parser for ``nvidia-smi dmon`` (device monitoring, one line per GPU per sample).

Understands the layout of drivers R450 to R580: two ``#`` header lines (column names, then units such as
``W``, ``C``, ``%``, ``MHz``, ``MB``, ``MB/s``, ``bool``, ``errs``), reprinted every few samples, then
whitespace-separated rows. Any ``-s`` selection (``pucvmet`` ...) and the ``-o DT`` date/time columns
(``#Date Time``) work, because the columns are read from the header itself. ``-`` in a cell is "not
available" and becomes None.

Result: ``columns`` (names as printed), ``units`` (name → unit as printed), ``samples`` (one dict per row,
numbers converted; ``gpu`` is the GPU index) and ``gpus``: per GPU index (as a string key) the sample count
and the ``max`` / ``mean`` of every numeric column, which is what a burn-in check quotes ("pviol 100 %",
"power 693 W of 700 W"). A last row with fewer cells than the header (a killed ``dmon``) is kept out of
``samples``, noted in ``warnings`` and makes ``complete`` False.
"""

from __future__ import annotations

import re
from typing import Any

from clustereval.parsers import register
from clustereval.parsers._common import result, to_float
from clustereval.parsers.errors import ParseError

TOOL = "nvidia-smi-dmon"
_TEXT_COLUMNS = {"date", "time"}


def _cell(column: str, token: str) -> Any:
    if column.lower() in _TEXT_COLUMNS:
        return token
    if token in {"-", "N/A"}:
        return None
    value = to_float(token)
    if value is None:
        return token
    return int(value) if value.is_integer() and re.fullmatch(r"-?\d+", token) else value


def _header_tokens(line: str) -> list[str]:
    return line.lstrip("#").split()


@register(TOOL)
def parse(text: str) -> dict[str, Any]:
    """Parse ``nvidia-smi dmon`` output into samples and a per-GPU summary."""
    if not text.strip():
        raise ParseError("the nvidia-smi dmon output is empty")
    warnings: list[str] = []
    columns: list[str] = []
    units: dict[str, str] = {}
    samples: list[dict[str, Any]] = []
    complete = True
    pending_names: list[str] | None = None
    lines = text.split("\n")
    last_data = max((i for i, ln in enumerate(lines) if ln.strip() and not ln.lstrip().startswith("#")),
                    default=-1)
    for number, line in enumerate(lines):
        stripped = line.strip()
        if not stripped:
            continue
        if stripped.startswith("#"):
            tokens = _header_tokens(stripped)
            if pending_names is None:
                pending_names = tokens
                continue
            # second header line: the units (or the index/format line of the -o DT columns)
            names = pending_names
            pending_names = None
            if columns and names != columns:
                warnings.append(f"header changed at line {number + 1}; later rows use the new columns")
            columns = names
            units = dict(zip(names, tokens, strict=False)) if len(tokens) == len(names) else {}
            if len(tokens) != len(names):
                warnings.append(f"unit line at line {number + 1} does not match the column names")
            continue
        if pending_names is not None:
            # only one header line was printed (e.g. a cut-off reprint): take it as the names
            columns, pending_names = pending_names, None
        if not columns:
            warnings.append(f"data before any header, ignored: {stripped[:120]!r}")
            continue
        cells = stripped.split()
        if len(cells) != len(columns):
            if number == last_data and len(cells) < len(columns):
                complete = False
                warnings.append(f"last row is cut short ({len(cells)} of {len(columns)} cells): {stripped!r}")
            else:
                warnings.append(f"row with {len(cells)} cells for {len(columns)} columns ignored: "
                                f"{stripped[:120]!r}")
            continue
        row = {col: _cell(col, tok) for col, tok in zip(columns, cells, strict=True)}
        samples.append(row)
    if pending_names is not None and not columns:
        columns = pending_names
        warnings.append("the output ends inside the header (no unit line)")
    if not columns:
        raise ParseError("no '# gpu ...' header line found: this does not look like nvidia-smi dmon output")
    if not samples:
        complete = False
        warnings.append("header printed but no sample rows: dmon stopped before its first sample")
    return result(TOOL, "dmon", complete=complete, warnings=warnings, columns=columns, units=units,
                  samples=samples, gpus=_summary(samples, columns))


def _summary(samples: list[dict[str, Any]], columns: list[str]) -> dict[str, dict[str, Any]]:
    gpu_key = next((c for c in columns if c.lower() == "gpu"), None)
    groups: dict[str, list[dict[str, Any]]] = {}
    for row in samples:
        key = str(row.get(gpu_key)) if gpu_key else "all"
        groups.setdefault(key, []).append(row)
    out: dict[str, dict[str, Any]] = {}
    for key, rows in groups.items():
        maxima: dict[str, float] = {}
        means: dict[str, float] = {}
        for col in columns:
            if col == gpu_key or col.lower() in _TEXT_COLUMNS:
                continue
            values = [r[col] for r in rows if isinstance(r.get(col), (int, float))]
            if values:
                maxima[col] = max(values)
                means[col] = round(sum(values) / len(values), 3)
        out[key] = {"samples": len(rows), "max": maxima, "mean": means}
    return out
