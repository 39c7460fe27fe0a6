"""Parser for fio (flexible I/O tester) output.

Understands:

* ``--output-format=json`` (and ``json+``) from fio 2.x (``clat``/``lat`` in usec, ``io_bytes`` in KiB)
  and fio 3.x (``clat_ns``/``lat_ns`` in nsec, ``io_bytes`` in bytes, ``io_kbytes``), including the
  client/server form (``client_stats``). fio may print notes or errors before the JSON object
  ("note: both iodepth >= 1 and synchronous I/O engine are selected..."); those lines are skipped
  and reported under ``warnings``.
* the normal text output of fio 2.x (``io=..., bw=KB/s, iops=, runt=``) and fio 3.x
  (``IOPS=..., BW=MiB/s (MB/s)(io/runtime)``), with clat/lat lines in nsec/usec/msec.

Result: ``fio_version``, ``jobs`` (each ``name``, ``error`` and a ``read``/``write``/``trim`` entry
with ``io_bytes``, ``bw_kibps`` (fio's JSON ``bw`` is KiB/s), ``bw_mibps``, ``iops``, ``runtime_ms``,
``lat_mean_us``, ``clat_mean_us``, ``clat_percentiles_us`` and ``lat_percentiles_us`` (percentile
string as fio prints it in JSON, e.g. ``"99.000000"`` -> µs), ``total_ios``) and ``totals`` (per
direction ``bw_mibps`` and ``iops`` summed over jobs). A direction that did no I/O is still present,
with zeros. Truncated or malformed JSON raises :class:`ParseError`.
"""

from __future__ import annotations

import json
import re
from typing import Any

from clustereval.parsers import register
from clustereval.parsers._common import result, to_float, to_int
from clustereval.parsers.errors import ParseError

DIRECTIONS = ("read", "write", "trim")
_TIME_TO_US = {"nsec": 0.001, "usec": 1.0, "msec": 1000.0, "sec": 1_000_000.0}
# fio's text output: binary (KiB, MiB) units from 3.x, and 2.x "KB" which meant 1024 unless kb_base=1000
_BYTES = {"": 1, "B": 1, "K": 1024, "KB": 1024, "KIB": 1024, "M": 1024**2, "MB": 1024**2, "MIB": 1024**2,
          "G": 1024**3, "GB": 1024**3, "GIB": 1024**3, "T": 1024**4, "TB": 1024**4, "TIB": 1024**4,
          "P": 1024**5, "PB": 1024**5, "PIB": 1024**5}
_DECIMAL_BYTES = {"KB": 1000, "MB": 1000**2, "GB": 1000**3, "TB": 1000**4, "PB": 1000**5}
_SUFFIX = {"": 1, "k": 1000, "K": 1000, "m": 1_000_000, "M": 1_000_000, "g": 1e9, "G": 1e9}


def _empty_direction() -> dict[str, Any]:
    return {"io_bytes": 0, "bw_kibps": 0.0, "bw_mibps": 0.0, "iops": 0.0, "runtime_ms": 0,
            "lat_mean_us": None, "clat_mean_us": None, "clat_percentiles_us": {},
            "lat_percentiles_us": {}, "total_ios": 0}


def _totals(jobs: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    totals: dict[str, dict[str, float]] = {}
    for direction in DIRECTIONS:
        bw = sum((job[direction].get("bw_mibps") or 0.0) for job in jobs if direction in job)
        iops = sum((job[direction].get("iops") or 0.0) for job in jobs if direction in job)
        totals[direction] = {"bw_mibps": round(bw, 6), "iops": round(iops, 6)}
    return totals


# --------------------------------------------------------------------------- JSON


def _num(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return to_float(str(value))
    if isinstance(value, str):
        return to_float(value)
    return None


def _percentiles(block: Any, scale: float) -> dict[str, float]:
    out: dict[str, float] = {}
    if not isinstance(block, dict):
        return out
    pct = block.get("percentile")
    if not isinstance(pct, dict):
        return out
    for key, value in pct.items():
        number = _num(value)
        key_value = to_float(str(key))
        # fio 2.x pads the map with "0.00": 0 entries for unused percentile slots
        if number is None or key_value is None or key_value <= 0:
            continue
        out[str(key)] = round(number * scale, 6)
    return out


def _latency_block(data: dict[str, Any], name: str) -> tuple[Any, float]:
    """fio 3.x reports ``<name>_ns`` in nanoseconds, fio 2.x ``<name>`` in microseconds."""
    if isinstance(data.get(f"{name}_ns"), dict):
        return data[f"{name}_ns"], 0.001
    if isinstance(data.get(name), dict):
        return data[name], 1.0
    return None, 1.0


def _json_direction(data: Any, major: int | None) -> dict[str, Any]:
    out = _empty_direction()
    if not isinstance(data, dict):
        return out
    if "io_kbytes" in data or (major is not None and major >= 3):
        io_bytes = _num(data.get("io_bytes"))
    else:
        # fio 2.x wrote io_bytes in KiB (it became bytes, with io_kbytes added, in fio 3.0)
        kib = _num(data.get("io_bytes"))
        io_bytes = kib * 1024 if kib is not None else None
    out["io_bytes"] = int(io_bytes) if io_bytes is not None else None
    bw = _num(data.get("bw"))
    out["bw_kibps"] = bw
    out["bw_mibps"] = round(bw / 1024, 6) if bw is not None else None
    out["iops"] = _num(data.get("iops"))
    runtime = _num(data.get("runtime"))
    out["runtime_ms"] = int(runtime) if runtime is not None else None
    total = _num(data.get("total_ios"))
    out["total_ios"] = int(total) if total is not None else None
    for name in ("lat", "clat"):
        block, scale = _latency_block(data, name)
        mean = _num(block.get("mean")) if isinstance(block, dict) else None
        out[f"{name}_mean_us"] = round(mean * scale, 6) if mean is not None else None
        out[f"{name}_percentiles_us"] = _percentiles(block, scale)
    return out


def _major_version(version: str) -> int | None:
    match = re.match(r"fio-(\d+)", version)
    return int(match.group(1)) if match else None


def _decode_json(text: str, start: int) -> tuple[Any, int]:
    try:
        obj, end = json.JSONDecoder().raw_decode(text, start)
    except json.JSONDecodeError as exc:
        rest = text[exc.pos:].rstrip()
        # fio pretty-prints its JSON, so a decoding error on the last line means the object was cut off
        pretty = "\n" in text[start:exc.pos]
        if not rest or exc.msg.startswith("Unterminated string") or (pretty and "\n" not in rest):
            size = len(text.encode("utf-8", "replace"))
            raise ParseError(f"fio JSON is truncated at byte {size}: {exc.msg}; the run may have been "
                             "killed before fio finished writing") from None
        raise ParseError(f"fio JSON is malformed at line {exc.lineno} column {exc.colno}: "
                         f"{exc.msg}") from None
    return obj, end


def _parse_json(text: str, start: int) -> dict[str, Any]:
    warnings: list[str] = []
    preamble = [ln.strip() for ln in text[:start].splitlines() if ln.strip()]
    for line in preamble:
        warnings.append(f"skipped non-JSON line before the fio JSON: {line[:200]}")
    obj, end = _decode_json(text, start)
    trailing = text[end:].strip()
    if trailing:
        warnings.append(f"ignored {len(trailing)} characters after the fio JSON object")
    if not isinstance(obj, dict):
        raise ParseError("fio JSON is not an object: expected the output of fio --output-format=json")
    version = obj.get("fio version")
    if not isinstance(version, str) or not version.startswith("fio"):
        raise ParseError("JSON has no valid 'fio version' key: this is not fio --output-format=json output "
                         f"(fio version is {version!r})")
    raw_jobs = obj.get("jobs")
    if raw_jobs is None:
        raw_jobs = obj.get("client_stats")
    if not isinstance(raw_jobs, list):
        raise ParseError("fio JSON has no 'jobs' list: fio did not report any job")
    major = _major_version(version)
    jobs = []
    for index, raw in enumerate(raw_jobs):
        if not isinstance(raw, dict):
            warnings.append(f"job entry {index} is not an object; skipped")
            continue
        job: dict[str, Any] = {"name": raw.get("jobname") if isinstance(raw.get("jobname"), str) else None,
                               "error": to_int(str(raw.get("error", 0))) or 0}
        if isinstance(raw.get("hostname"), str):
            job["hostname"] = raw["hostname"]
        for direction in DIRECTIONS:
            job[direction] = _json_direction(raw.get(direction), major)
        if job["error"]:
            warnings.append(f"job {job['name']!r} reported error {job['error']}")
        jobs.append(job)
    if not jobs:
        warnings.append("fio JSON lists no jobs")
    return result("fio", "json", complete=bool(jobs), warnings=warnings, fio_version=version,
                  jobs=jobs, totals=_totals(jobs))


# --------------------------------------------------------------------------- text

_JOB_HEADER = re.compile(
    r"^(?P<name>\S.*?): \(groupid=(?P<gid>\d+), jobs=(?P<jobs>\d+)\): err=\s*(?P<err>-?\d+)")
_DIR_LINE = re.compile(r"^\s+(?P<dir>read|write|trim)\s*:\s*(?P<body>.*)$")
_LAT_LINE = re.compile(r"^\s+(?P<kind>clat|lat|slat)\s*\((?P<unit>[nmu]?sec)\)\s*:\s*(?P<body>.*)$")
_PCT_HEAD = re.compile(r"^\s+(?P<kind>clat|lat) percentiles \((?P<unit>[nmu]?sec)\):")
_PCT_ITEM = re.compile(r"(\d+(?:\.\d+)?)th=\[\s*(\d+(?:\.\d+)?)([kKmMgG]?)\]")
_SYNC_HEAD = re.compile(r"^\s+sync\s*\((?P<unit>[nmu]?sec)\)\s*:\s*(?P<body>.*)$")
_SYNC_PCT_HEAD = re.compile(r"^\s+sync percentiles \((?P<unit>[nmu]?sec)\):")
_VERSION = re.compile(r"^(fio-\d[\w.\-]*)\s*$")
_SIZE = re.compile(r"^(\d+(?:\.\d+)?)\s*([KMGTP]?i?B?)$", re.IGNORECASE)


def _bytes(token: str, decimal: bool = False) -> float | None:
    match = _SIZE.match(token.strip())
    if not match:
        return None
    unit = match.group(2).upper()
    if decimal and unit in _DECIMAL_BYTES:
        return float(match.group(1)) * _DECIMAL_BYTES[unit]
    factor = _BYTES.get(unit)
    return float(match.group(1)) * factor if factor else None


def _scaled(token: str) -> float | None:
    match = re.match(r"^(\d+(?:\.\d+)?)([kKmMgG]?)$", token.strip())
    if not match:
        return None
    return float(match.group(1)) * _SUFFIX[match.group(2)]


def _text_direction(body: str) -> tuple[dict[str, Any], str | None]:
    out = _empty_direction()
    if "IOPS=" in body:
        # fio 3.x: "IOPS=4801, BW=18.8MiB/s (19.7MB/s)(22.0MiB/1173msec)"
        iops = re.search(r"IOPS=([\d.]+[kKmMgG]?)", body)
        out["iops"] = _scaled(iops.group(1)) if iops else None
        rates = re.findall(r"(\d+(?:\.\d+)?)([KMGTP]?i?B)/s", body)
        mib = None
        for value, unit in rates:
            if "i" in unit or unit == "B":
                factor = _BYTES.get(unit.upper())
                mib = float(value) * factor / 1024**2 if factor else None
                break
        if mib is None and rates:  # kb_base=1000 prints only decimal units
            value, unit = rates[0]
            mib = float(value) * _DECIMAL_BYTES.get(unit.upper(), 1) / 1024**2
        out["bw_mibps"] = round(mib, 6) if mib is not None else None
        out["bw_kibps"] = round(mib * 1024, 6) if mib is not None else None
        io = re.search(r"\)\((\d+(?:\.\d+)?[KMGTP]?i?B)/(\d+)msec\)", body)
        if io:
            size = _bytes(io.group(1), decimal="i" not in io.group(1))
            out["io_bytes"] = int(size) if size is not None else None
            out["runtime_ms"] = int(io.group(2))
        else:
            out["io_bytes"] = out["runtime_ms"] = None
        return out, None
    if "iops=" in body or "bw=" in body:
        # fio 2.x: "io=1024.0MB, bw=26099KB/s, iops=101, runt= 40177msec"
        io = re.search(r"io=\s*(\d+(?:\.\d+)?[KMGTP]?B)", body)
        size = _bytes(io.group(1)) if io else None
        out["io_bytes"] = int(size) if size is not None else None
        bw = re.search(r"bw=\s*(\d+(?:\.\d+)?)([KMGTP]?B)/s", body)
        if bw:
            bytes_per_s = float(bw.group(1)) * _BYTES[bw.group(2).upper()]
            out["bw_kibps"] = round(bytes_per_s / 1024, 6)
            out["bw_mibps"] = round(bytes_per_s / 1024**2, 6)
        else:
            out["bw_kibps"] = out["bw_mibps"] = None
        iops = re.search(r"iops=\s*([\d.]+[kKmM]?)", body)
        out["iops"] = _scaled(iops.group(1)) if iops else None
        runt = re.search(r"runt=\s*(\d+)msec", body)
        out["runtime_ms"] = int(runt.group(1)) if runt else None
        return out, None
    return out, f"direction line not understood: {body[:120]}"


def _avg(body: str) -> float | None:
    match = re.search(r"avg=\s*([\d.]+)", body)
    return to_float(match.group(1)) if match else None


def _parse_text(text: str) -> dict[str, Any]:
    warnings: list[str] = []
    version = None
    jobs: list[dict[str, Any]] = []
    job: dict[str, Any] | None = None
    direction: str | None = None
    pct_target: dict[str, float] | None = None
    pct_scale = 1.0
    status_seen = False
    for line in text.split("\n"):
        if version is None:
            match = _VERSION.match(line.strip())
            if match:
                version = match.group(1)
                continue
        header = _JOB_HEADER.match(line)
        if header:
            job = {"name": header.group("name"), "error": int(header.group("err"))}
            for name in DIRECTIONS:
                job[name] = _empty_direction()
            jobs.append(job)
            direction, pct_target = None, None
            if job["error"]:
                warnings.append(f"job {job['name']!r} reported err={job['error']}")
            continue
        if line.startswith("Run status group"):
            status_seen = True
            job, direction, pct_target = None, None, None
            continue
        if job is None:
            continue
        if pct_target is not None:
            if line.lstrip().startswith("|"):
                for key, value, suffix in _PCT_ITEM.findall(line):
                    pct_target[f"{float(key):.6f}"] = round(float(value) * _SUFFIX[suffix] * pct_scale, 6)
                continue
            pct_target = None
        match = _DIR_LINE.match(line)
        if match:
            direction = match.group("dir")
            parsed, problem = _text_direction(match.group("body"))
            job[direction] = parsed
            if problem:
                warnings.append(problem)
            continue
        match = _LAT_LINE.match(line)
        # "lat (usec)   : 20=96.89%" bucket lines have the same prefix but no avg=
        avg = _avg(match.group("body")) if match else None
        if match and direction and match.group("kind") in ("lat", "clat") and avg is not None:
            scale = _TIME_TO_US[match.group("unit")]
            job[direction][f"{match.group('kind')}_mean_us"] = round(avg * scale, 6)
            continue
        match = _PCT_HEAD.match(line)
        if match and direction:
            pct_target = job[direction][f"{match.group('kind')}_percentiles_us"]
            pct_scale = _TIME_TO_US[match.group("unit")]
            continue
        match = _SYNC_HEAD.match(line)
        if match:
            avg = _avg(match.group("body"))
            scale = _TIME_TO_US[match.group("unit")]
            job["sync"] = {"lat_mean_us": round(avg * scale, 6) if avg is not None else None,
                           "lat_percentiles_us": {}}
            continue
        match = _SYNC_PCT_HEAD.match(line)
        if match and "sync" in job:
            pct_target = job["sync"]["lat_percentiles_us"]
            pct_scale = _TIME_TO_US[match.group("unit")]
            continue
        issued = re.search(r"issued\s*(?:rwts|rwt|rw)?\s*:\s*total=(\S+)", line)
        if issued:
            _issued_totals(job, issued.group(1))
    if not jobs:
        raise ParseError("no fio job results found: the output has no '<job>: (groupid=N, jobs=N): err=' "
                         "line (fio was killed before finishing, or this is not fio output)")
    if not status_seen:
        warnings.append("no 'Run status group' summary: the output ends early")
    return result("fio", "text", complete=status_seen, warnings=warnings, fio_version=version,
                  jobs=jobs, totals=_totals(jobs))


def _issued_totals(job: dict[str, Any], token: str) -> None:
    """fio 3.x prints ``total=0,5632,0,0``; fio 2.x prints ``total=r=0/w=4096/d=0``."""
    if "=" in token:
        parts = dict(part.split("=", 1) for part in token.split("/") if "=" in part)
        values = [parts.get("r"), parts.get("w"), parts.get("d") or parts.get("t")]
    else:
        values = token.rstrip(",").split(",")[:3]
    for name, value in zip(DIRECTIONS, values, strict=False):
        number = to_int(value)
        if number is not None:
            job[name]["total_ios"] = number


# --------------------------------------------------------------------------- entry point


@register("fio")
def parse(text: str) -> dict[str, Any]:
    """Parse fio output (JSON or normal text, fio 2.x and 3.x); see the module docstring."""
    if not text or not text.strip():
        raise ParseError("the fio output is empty")
    match = re.search(r"^\s*\{", text, re.MULTILINE)
    if match and "(groupid=" not in text[: match.start()]:
        return _parse_json(text, match.end() - 1)
    return _parse_text(text)
