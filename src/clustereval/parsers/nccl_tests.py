"""Parser for NVIDIA nccl-tests and AMD rccl-tests result tables (``all_reduce_perf``, ``alltoall_perf``...).

Understands:

* the old nccl-tests 2.0-2.10 layout (``error`` column holding a float max error, no ``root`` column, rank
  lines ``#   Rank  0 Pid ... [0x00] A100``; ``redop`` cells left blank by collectives without a reduction);
* the newer layout (``#wrong`` element counts, ``root`` column, ``Group`` in rank lines, bus ids
  ``[0000:04:00]``, ``# Collective test starting/concluded`` markers, ``NCCL version`` line,
  ``# nccl-tests version`` banner, ``cputime``, per-iteration ``i_min/i_max/i_p99/i_cv%`` and timestamp
  columns of nccl-tests 2.17+);
* rccl-tests (same table; ``rccl-tests: Version``, ``RCCL version :``/``HIP version``/``ROCm version``
  header lines, rank lines with an empty device name, ``# Errors with asterisks`` footer and ``*``-flagged
  error cells);
* NCCL_DEBUG=INFO/WARN lines interleaved anywhere, the NCCL tuning matrix, ``srun``/``mpirun`` prefixes
  (already stripped by :func:`clustereval.parsers._common.clean`), and author elisions (``...``).

A run that dies before the ``# Avg bus bandwidth`` footer gives ``complete: False`` with every row read.
A run that failed before its table (``Test CUDA failure ...``) gives ``complete: False``, no rows and the
failure under ``failures``. Anything else without a table raises :class:`ParseError`.
"""

from __future__ import annotations

import re
from typing import Any

from clustereval.parsers import register
from clustereval.parsers._common import clean, result, to_float, to_int
from clustereval.parsers.errors import ParseError

_MAX_WARNINGS = 50

_RANK_NEW = re.compile(
    r"^#\s*Rank\s+(?P<rank>\d+)\s+Group\s+(?P<group>\d+)\s+Pid\s+(?P<pid>\d+)\s+on\s+(?P<host>\S+)\s+"
    r"device\s+(?P<device>\d+)\s+\[(?P<bus>[^\]]*)\]\s*(?P<name>.*?)\s*$"
)
_RANK_OLD = re.compile(
    r"^#\s*Rank\s+(?P<rank>\d+)\s+Pid\s+(?P<pid>\d+)\s+on\s+(?P<host>\S+)\s+"
    r"device\s+(?P<device>\d+)\s+\[(?P<bus>[^\]]*)\]\s*(?P<name>.*?)\s*$"
)
_NTHREAD = re.compile(r"^#\s*nThread\s+\d+")
_KV_INT = re.compile(r"(nThread|nGpus|minBytes|maxBytes|warmup iters|agg iters|iters|validation|graph"
                     r"|unalign):?\s+(-?\d+)")
_STEP = re.compile(r"step:\s*(\d+)\((factor|bytes)\)")
_OOB = re.compile(r"^#\s*Out of bounds values\s*:\s*(\S+)\s*(\w+)?")
_AVG = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*(\S+)\s*(\w+)?")
_STARTING = re.compile(r"^#\s*Collective test starting:\s*(\S+)")
_CONCLUDED = re.compile(r"^#\s*Collective test concluded:\s*(\S+)")
_NCCL_VERSION = re.compile(r"\bNCCL version\s*:?\s*(\d+\.\d+\.\d+\S*)")
_RCCL_KV = re.compile(r"^(RCCL version|HIP version|ROCm version|Hostname|Librccl path)\s*:\s*(.*?)\s*$")
_RCCL_TESTS_VERSION = re.compile(r"^rccl-tests:\s*Version\s+(\S+)")
_NCCL_TESTS_VERSION = re.compile(r"^#\s*nccl-tests version\s+(\S+)")
_NCCL_LOG = re.compile(r"^\S+:\d+:\d+ \[\d+\] NCCL (INFO|WARN|TRACE|ERROR)\b\s?(.*)$")
_NRANKS_INFO = re.compile(r"\bnranks (\d+)\b", re.IGNORECASE)
_FAILURE = re.compile(r"(Test (?:CUDA |NCCL |HIP |RCCL )?failure.*|NCCL error.*|# error: .*"
                      r"|Invalid number of GPUs.*|Segmentation fault.*|Aborted.*)")
_SECTION = re.compile(r"^=+\s*(.*?)\s*=+$")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_CLOCK = re.compile(r"^\d{2}:\d{2}:\d{2}$")
# A person (or a log shipper) cut rows out: what is left is a partial result, however tidy the footer.
_ELIDED = re.compile(r"\btruncated\b|\bomitted\b|\belided\b|\bsnip(?:ped)?\b", re.I)
_BENIGN_COMMENTS = (
    "# Using devices", "# Errors with asterisks", "# Testing", "# Truncated", "# <", "# Writing JSON",
    "# skipping json", "# Blocking Enabled", "# Per-Iteration Report", "# Parallel Init",
    "# GPU memory usage",
)
_META_COLUMNS = {"size", "count", "type", "redop", "root"}


def _is_number(token: str) -> bool:
    return to_float(token.rstrip("*")) is not None


def _header_columns(line: str) -> list[str] | None:
    """Column names of a ``#  size  count  type ...`` header line, or None when it is not one."""
    tokens = line.lstrip("#").split()
    if len(tokens) < 4 or tokens[0] != "size" or tokens[1] != "count":
        return None
    return tokens


def _group_layout(columns: list[str]) -> tuple[list[str], int]:
    """(names of one out-of-place/in-place group, number of groups) from the header columns."""
    body = [c for c in columns if c not in _META_COLUMNS and c != "timestamp"]
    starts = [i for i, c in enumerate(body) if c in ("time", "cputime")]
    if len(starts) >= 2:
        group = body[starts[0]:starts[1]]
        return group, len(starts)
    return body, 1


def _cell(token: str) -> tuple[float | None, bool]:
    """A numeric table cell; the flag says rccl-tests marked it with ``*`` (over its error threshold)."""
    flagged = token.endswith("*")
    return to_float(token.rstrip("*")), flagged


def _parse_row(line: str, columns: list[str] | None) -> dict[str, Any] | None:
    """One result row as a dict, or None when the line is not a result row."""
    tokens = line.split()
    if len(tokens) < 7:
        return None
    size, count = to_int(tokens[0]), to_int(tokens[1])
    if size is None or count is None or size < 0 or count < 0 or _is_number(tokens[2]):
        return None
    dtype = tokens[2]
    if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*", dtype):
        return None
    idx = 3
    redop = None
    if idx < len(tokens) and not _is_number(tokens[idx]):
        redop = tokens[idx]
        idx += 1
    has_root = "root" in columns if columns else None
    rest = tokens[idx:]
    timestamp = None
    if len(rest) >= 2 and _DATE.match(rest[-2]) and _CLOCK.match(rest[-1]):
        timestamp = f"{rest[-2]} {rest[-1]}"
        rest = rest[:-2]
    group, ngroups = _group_layout(columns) if columns else (["time", "algbw", "busbw", "#wrong"], 2)
    width = max(len(group), 1)
    root = None
    if has_root is None:
        # No header seen (filtered output): a leading integer beyond a whole number of groups is the root.
        has_root = len(rest) % width == 1
    if has_root and rest and to_int(rest[0]) is not None and len(rest) % width == 1:
        root = to_int(rest[0])
        rest = rest[1:]
    if not rest or len(rest) % width or len(rest) // width > max(ngroups, 1):
        return None
    if any(not _is_number(t) and t.upper() != "N/A" for t in rest):
        return None
    groups = [rest[i:i + width] for i in range(0, len(rest), width)]
    # nccl-tests leaves the out-of-place cells blank when it only measures in place (trace replay).
    if len(groups) == 1 and ngroups >= 2:
        groups = [None, groups[0]]
    row: dict[str, Any] = {"size_bytes": size, "count": count, "type": dtype, "redop": redop, "root": root}
    error_column = next((c for c in group if c in ("#wrong", "error")), "#wrong")
    flagged = False
    for prefix, cells in zip(("", "in_place_"), groups + [None] * (2 - len(groups)), strict=False):
        values: dict[str, Any] = {}
        if cells is not None:
            for name, token in zip(group, cells, strict=False):
                value, star = _cell(token)
                flagged = flagged or star
                values[name] = value
        time_key = "cputime" if "cputime" in group else "time"
        row[f"{prefix}time_us"] = values.get(time_key)
        row[f"{prefix}algbw_gbps"] = values.get("algbw")
        row[f"{prefix}busbw_gbps"] = values.get("busbw")
        raw_err = values.get(error_column)
        if error_column == "error":
            row[f"{prefix}wrong"] = None
            row[f"{prefix}error"] = raw_err
        else:
            row[f"{prefix}wrong"] = int(raw_err) if raw_err is not None and raw_err.is_integer() else raw_err
            row[f"{prefix}error"] = None
        for extra in ("i_min", "i_max", "i_p99"):
            if extra in values:
                row[f"{prefix}{extra}_us"] = values[extra]
        if "i_cv%" in values:
            row[f"{prefix}i_cv_pct"] = values["i_cv%"]
    row["flagged"] = flagged
    if timestamp:
        row["timestamp"] = timestamp
    return row


def _parse_nthread(line: str) -> dict[str, Any]:
    names = {"nThread": "nthread", "nGpus": "ngpus", "minBytes": "min_bytes", "maxBytes": "max_bytes",
             "warmup iters": "warmup_iters", "iters": "iters", "agg iters": "agg_iters",
             "validation": "validation", "graph": "graph", "unalign": "unalign"}
    params: dict[str, Any] = {}
    for key, value in _KV_INT.findall(line):
        params.setdefault(names[key], int(value))
    step = _STEP.search(line)
    if step:
        params["step"] = int(step.group(1))
        params["step_kind"] = step.group(2)
    return params


@register("nccl-tests")
def parse(text: str) -> dict[str, Any]:
    """Parse nccl-tests output (any version) into rows, devices and the summary footer."""
    return _parse(text, "nccl-tests")


@register("rccl-tests")
def parse_rccl(text: str) -> dict[str, Any]:
    """Parse rccl-tests output; the table is the nccl-tests one, with RCCL/HIP/ROCm header lines."""
    return _parse(text, "rccl-tests")


def _parse(text: str, tool: str) -> dict[str, Any]:
    # A job launched through two launchers (srun inside mpirun, or an already-prefixed log) carries two
    # prefixes; the registry strips one. No nccl-tests line starts with "N: " or "[n,m]<stdout>:" itself.
    text = clean(text)
    if not text or not text.strip():
        raise ParseError(f"{tool}: the output is empty (did the benchmark binary run at all?)")
    warnings: list[str] = []

    def warn(message: str) -> None:
        if len(warnings) < _MAX_WARNINGS:
            warnings.append(message)
        elif len(warnings) == _MAX_WARNINGS:
            warnings.append("further unrecognised lines not listed")

    rows: list[dict[str, Any]] = []
    devices: list[dict[str, Any]] = []
    columns: list[str] | None = None
    units: list[str] = []
    params: dict[str, Any] = {}
    collectives: list[str] = []
    concluded = False
    avgs: list[float | None] = []
    oobs: list[int | None] = []
    oob_ok: bool | None = None
    avg_check: str | None = None
    nccl_version = tests_version = None
    rccl_info: dict[str, str] = {}
    nccl_warn_lines: list[str] = []
    failures: list[str] = []
    elided: list[str] = []
    info_lines = 0
    nranks_info: int | None = None
    run = 0
    rows_since_header = 0
    section: str | None = None
    in_matrix = False

    for raw in text.split("\n"):
        line = raw.rstrip()
        stripped = line.strip()
        if not stripped:
            in_matrix = False
            continue
        log = _NCCL_LOG.match(stripped)
        if log:
            info_lines += 1
            level, message = log.groups()
            if level in ("WARN", "ERROR"):
                nccl_warn_lines.append(stripped)
            version = _NCCL_VERSION.search(message)
            if version and not nccl_version:
                nccl_version = version.group(1)
            # RCCL under NCCL_DEBUG=INFO prints its banner's first line as an INFO message
            rccl = _RCCL_KV.match(message.strip())
            if rccl:
                rccl_info.setdefault(rccl.group(1), rccl.group(2))
            nranks = _NRANKS_INFO.search(message)
            if nranks:
                nranks_info = max(nranks_info or 0, int(nranks.group(1)))
            in_matrix = "Func/Proto/Algo Matrix" in message
            continue
        if in_matrix and "|" in stripped:
            continue
        if stripped.startswith("#"):
            cols = _header_columns(stripped)
            if cols:
                if rows_since_header:
                    run += 1
                columns = cols
                rows_since_header = 0
                continue
            if stripped.lstrip("#").split()[:1] == ["(B)"]:
                units = stripped.lstrip("#").split()
                continue
            match = _RANK_NEW.match(stripped) or _RANK_OLD.match(stripped)
            if match:
                info = match.groupdict()
                devices.append({
                    "rank": int(info["rank"]), "group": int(info["group"]) if info.get("group") else None,
                    "pid": int(info["pid"]), "host": info["host"], "device": int(info["device"]),
                    "bus_id": info["bus"], "name": info["name"] or None,
                })
                continue
            if _NTHREAD.match(stripped):
                params = params or _parse_nthread(stripped)
                continue
            match = _OOB.match(stripped)
            if match:
                oobs.append(to_int(match.group(1)))
                if match.group(2):
                    oob_ok = match.group(2).upper() == "OK" if oob_ok is None else oob_ok and \
                        match.group(2).upper() == "OK"
                continue
            match = _AVG.match(stripped)
            if match:
                avgs.append(to_float(match.group(1)))
                avg_check = match.group(2) or avg_check
                continue
            match = _STARTING.match(stripped)
            if match:
                collectives.append(match.group(1))
                continue
            match = _CONCLUDED.match(stripped)
            if match:
                concluded = True
                # excerpts that cut the head of the output still name the collective in the footer
                if not collectives:
                    collectives.append(match.group(1))
                continue
            match = _NCCL_TESTS_VERSION.match(stripped)
            if match:
                tests_version = match.group(1)
                continue
            failure = _FAILURE.search(stripped)
            if failure:
                failures.append(failure.group(1).strip())
                continue
            body = stripped.lstrip("#").strip()
            if _ELIDED.search(body):
                elided.append(stripped[:160])
                continue
            if not body or "out-of-place" in body or any(stripped.startswith(p) for p in _BENIGN_COMMENTS):
                continue
            warn(f"unrecognised comment line: {stripped[:160]}")
            continue
        row = _parse_row(stripped, columns)
        if row is not None:
            row["run"] = run
            rows_since_header += 1
            if section is not None:
                row["section"] = section
            rows.append(row)
            continue
        match = _NCCL_VERSION.match(stripped) if stripped.startswith("NCCL version") else None
        if match:
            nccl_version = nccl_version or match.group(1)
            continue
        match = _RCCL_TESTS_VERSION.match(stripped)
        if match:
            tests_version = match.group(1)
            continue
        match = _RCCL_KV.match(stripped)
        if match:
            rccl_info[match.group(1)] = match.group(2)
            continue
        match = _SECTION.match(stripped)
        if match and match.group(1):
            section = match.group(1)
            continue
        failure = _FAILURE.search(stripped)
        if failure:
            failures.append(failure.group(1).strip())
            continue
        if stripped in ("...", "…") or stripped.startswith("$ ") or stripped.startswith("[root@"):
            continue
        warn(f"unrecognised line: {stripped[:160]}")

    if not rows and not failures:
        if columns is not None:
            reason = "the output ends after the table header, before any result row"
        elif devices or params:
            reason = "the output ends after the device list, before the result table header"
        elif info_lines:
            reason = "the output holds only NCCL INFO/WARN lines"
        else:
            reason = "no line looks like nccl-tests output"
        raise ParseError(f"no {tool} table found: {reason}")

    busbws = [v for r in rows for v in (r["busbw_gbps"], r["in_place_busbw_gbps"]) if v is not None]
    wrongs = [v for r in rows for v in (r["wrong"], r["in_place_wrong"]) if v is not None]
    nranks = None
    if devices:
        nranks = max(d["rank"] for d in devices) + 1
    elif nranks_info:
        nranks = nranks_info
    if len(avgs) > 1 or run > 0:
        warn(f"the output holds {max(len(avgs), run + 1)} result tables (several processes or runs); "
             "rows carry a 'run' index")
    complete = bool(rows) and bool(avgs) and not failures and not elided
    if elided:
        warn(f"rows were removed from this output: {elided[0]}")
    if failures and rows:
        warn("the run reported a failure after printing results")
    error_column = None
    if columns:
        error_column = "error" if "error" in columns else ("#wrong" if "#wrong" in columns else None)
    return result(
        tool,
        "table",
        complete=complete,
        warnings=warnings,
        collective=collectives[0] if collectives else None,
        concluded=concluded,
        nccl_version=nccl_version,
        tests_version=tests_version,
        rccl_version=rccl_info.get("RCCL version"),
        hip_version=rccl_info.get("HIP version"),
        rocm_version=rccl_info.get("ROCm version"),
        params=params,
        devices=devices,
        nranks=nranks,
        hosts=sorted({d["host"] for d in devices}),
        columns=columns,
        error_column=error_column,
        time_unit=next((u.strip("()") for u in units[2:] if u in ("(us)", "(ms)", "(s)")), "us"),
        bw_unit="GB/s",
        rows=rows,
        avg_busbw_gbps=avgs[0] if avgs else None,
        avg_busbw_gbps_all=avgs,
        avg_busbw_check=avg_check,
        max_busbw_gbps=max(busbws) if busbws else None,
        out_of_bounds=oobs[0] if oobs else None,
        out_of_bounds_ok=oob_ok,
        wrong_total=int(sum(wrongs)) if wrongs else (0 if error_column == "#wrong" else None),
        rows_with_wrong=sum(1 for r in rows if (r["wrong"] or 0) > 0 or (r["in_place_wrong"] or 0) > 0),
        flagged_rows=sum(1 for r in rows if r["flagged"]),
        nccl_warnings=nccl_warn_lines[:_MAX_WARNINGS],
        nccl_log_lines=info_lines,
        failures=failures,
    )
