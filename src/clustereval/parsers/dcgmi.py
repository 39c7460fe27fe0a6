"""Parser for NVIDIA DCGM's command line client ``dcgmi``.

Sub-formats detected from the text itself:

* ``discovery`` - ``dcgmi discovery -l``: the "N GPUs found." box plus the NvSwitch, ConnectX and CPU
  boxes newer DCGM (3.3+) prints after it (DCGM 3.1.8 prints only GPUs and NvSwitches).
* ``diag`` - ``dcgmi diag -r 1|2|3|4`` box ("Diagnostic | Result"), DCGM 3.1-3.3 layout with
  Metadata / Deployment / Integration / Hardware / Stress sections, wrapped Info/Warning rows and
  ``Pass - All`` / ``Fail - GPU: 3`` style results. Output repeated by ``srun`` is collapsed.
* ``diag-json`` - ``dcgmi diag -j`` (DCGM 3.x ``"DCGM GPU Diagnostic"`` document, including the
  ``null`` entries and stray text before the JSON that DCGM 3.1 prints).
* ``health`` - ``dcgmi health -c``: overall health and per-GPU, per-subsystem incidents.
* ``nvlink`` / ``nvlink-json`` - ``dcgmi nvlink -g N -e`` error counters, text box or ``-j`` JSON.
* ``version`` - ``dcgmi -v``: client and host-engine build information.
"""

from __future__ import annotations

import json
import re
from typing import Any

from clustereval.parsers import register
from clustereval.parsers._common import result, to_int
from clustereval.parsers.errors import ParseError

TOOL = "dcgmi"

_FOUND = re.compile(r"^\s*(\d+)\s+(GPUs?|NvSwitch(?:es)?|ConnectX|CPUs?)\s+found\.?\s*$", re.IGNORECASE)
_BORDER = re.compile(r"^\s*\+[-=+]+\+\s*$")
_SECTION = re.compile(r"^\s*[|+]-+\s+([A-Za-z][\w /-]*?)\s+-+\+")
_STATUS = re.compile(r"^(Pass|Fail|Warn|Skip)\b(?:\s*-\s*(All|GPUs?\s*:?\s*([\d,\s]+)))?\s*$", re.IGNORECASE)
_STATUS_WORDS = {"pass": "Pass", "fail": "Fail", "warn": "Warn", "warning": "Warn", "skip": "Skip",
                 "skipped": "Skip", "failed": "Fail", "passed": "Pass"}
_SEVERITY_ORDER = ["Fail", "Warn", "Pass", "Skip"]
_HEALTH_ORDER = ["Failure", "Warning", "Healthy"]


def _cells(line: str) -> list[str] | None:
    """Raw cells of a ``| a | b |`` box row (padding kept), or None for anything else."""
    stripped = line.rstrip()
    if not stripped.lstrip().startswith("|") or not stripped.endswith("|") or len(stripped.strip()) < 2:
        return None
    return stripped.strip()[1:-1].split("|")


def _snake(key: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", key.strip().lower()).strip("_")


def _status_word(token: str) -> str | None:
    return _STATUS_WORDS.get(token.strip().lower())


# --------------------------------------------------------------------------------------------- discovery

def _parse_discovery(text: str) -> dict[str, Any]:
    """``dcgmi discovery -l``: one entry per box row group, keyed by the box's first column."""
    sections: dict[str, dict[str, Any]] = {}
    warnings: list[str] = []
    current: dict[str, Any] | None = None
    entry: dict[str, Any] | None = None
    for raw in text.split("\n"):
        line = raw.strip()
        found = _FOUND.match(line)
        if found:
            kind = found.group(2).lower()
            name = ("gpus" if kind.startswith("gpu") else "nvswitches" if kind.startswith("nvswitch")
                    else "connectx" if kind.startswith("connectx") else "cpus")
            current = {"announced": int(found.group(1)), "entries": [], "closed": False, "header_seen": False}
            sections[name] = current
            entry = None
            continue
        if current is None or not line:
            continue
        if _BORDER.match(line):
            if current["header_seen"]:
                current["closed"] = True
            continue
        cells = _cells(line)
        if cells is None:
            warnings.append(f"unrecognised line in discovery output: {line[:120]!r}")
            continue
        first = cells[0].strip()
        rest = "|".join(cells[1:]).strip() if len(cells) > 1 else ""
        if not current["header_seen"]:
            # the first row of each box is its column header ("GPU ID | Device Information")
            current["header_seen"] = True
            continue
        current["closed"] = False
        if first:
            entry = {"id": to_int(first) if to_int(first) is not None else first}
            current["entries"].append(entry)
        elif entry is None:
            warnings.append(f"device information row before any device id: {line[:120]!r}")
            continue
        if rest:
            key, sep, value = rest.partition(":")
            if sep:
                entry[_snake(key)] = value.strip()
            else:
                entry.setdefault("info", []).append(rest)

    if "gpus" not in sections:
        raise ParseError("dcgmi discovery: no 'N GPUs found.' line; this is not `dcgmi discovery -l` output")

    complete = True
    out: dict[str, Any] = {}
    for name, sec in sections.items():
        entries = sec["entries"]
        if len(entries) < sec["announced"]:
            complete = False
            warnings.append(f"{name}: {sec['announced']} announced but only {len(entries)} listed "
                            "(output cut short?)")
        elif len(entries) > sec["announced"]:
            warnings.append(f"{name}: {sec['announced']} announced but {len(entries)} listed")
        if not sec["closed"]:
            complete = False
            warnings.append(f"{name}: the table is not closed by its bottom border (output cut short?)")
        out[name] = entries
    for gpu in out["gpus"]:
        gpu["bus_id"] = gpu.pop("pci_bus_id", None)
        gpu["uuid"] = gpu.pop("device_uuid", None)
        gpu.setdefault("name", None)
    return result(TOOL, "discovery", complete=complete, warnings=warnings,
                  gpu_count=sections["gpus"]["announced"], gpus=out["gpus"],
                  nvswitches=out.get("nvswitches"), connectx=out.get("connectx"), cpus=out.get("cpus"),
                  nvswitch_count=sections.get("nvswitches", {}).get("announced"),
                  connectx_count=sections.get("connectx", {}).get("announced"),
                  cpu_count=sections.get("cpus", {}).get("announced"))


# -------------------------------------------------------------------------------------------------- diag

def _split_diag_tables(lines: list[str]) -> list[list[str]]:
    """Each ``| Diagnostic | Result |`` box as its own list of lines (srun may print several)."""
    tables: list[list[str]] = []
    current: list[str] | None = None
    for line in lines:
        cells = _cells(line)
        if cells and len(cells) >= 2 and cells[0].strip() == "Diagnostic" and cells[1].strip() == "Result":
            current = []
            tables.append(current)
            continue
        if current is not None:
            current.append(line)
    return tables


def _wrapped_chunk(cell: str) -> str:
    """One line of a wrapped Result cell: DCGM pads each chunk with one space before and two after."""
    body = cell[1:] if cell.startswith(" ") else cell
    return body[:-2] if body.endswith("  ") else body.rstrip()


def _expand_gpus(spec: str | None, gpu_ids: list[int]) -> list[int]:
    if spec is None or spec.strip().lower() == "all":
        return list(gpu_ids)
    return [int(tok) for tok in re.findall(r"\d+", spec)]


def _parse_diag_table(lines: list[str], warnings: list[str]) -> dict[str, Any]:
    metadata: dict[str, str] = {}
    tests: list[dict[str, Any]] = []
    section = None
    closed = False
    last_kind = None  # "meta", "status", "info", "warning"
    last_test: dict[str, Any] | None = None
    last_note: dict[str, Any] | None = None
    for line in lines:
        stripped = line.strip()
        if not stripped:
            continue
        sec = _SECTION.match(stripped)
        if sec:
            section = sec.group(1).strip()
            closed = False
            last_kind = None
            continue
        if _BORDER.match(stripped):
            closed = True
            continue
        cells = _cells(line)
        if cells is None or len(cells) < 2:
            warnings.append(f"unrecognised line in diag table: {stripped[:120]!r}")
            continue
        closed = False
        name, value_cell = cells[0].strip(), "|".join(cells[1:])
        value = value_cell.strip()
        if name == "":
            # continuation of the row above: another per-GPU status, or wrapped text
            status = _STATUS.match(value)
            if last_kind == "status" and status and last_test is not None:
                last_test["result_lines"].append(value)
            elif last_kind in ("info", "warning") and last_note is not None:
                last_note["text"] += _wrapped_chunk(value_cell)
            elif last_kind == "meta" and metadata:
                key = next(reversed(metadata))
                metadata[key] += value
            else:
                warnings.append(f"continuation row with nothing to continue: {stripped[:120]!r}")
            continue
        if section is None or section.lower() == "metadata":
            metadata[name] = value
            last_kind = "meta"
            continue
        if name.lower() in ("info", "warning", "warnings", "error"):
            if last_test is None:
                warnings.append(f"{name} row before any test: {stripped[:120]!r}")
                continue
            kind = "info" if name.lower() == "info" else "warning"
            last_note = {"text": _wrapped_chunk(value_cell)}
            last_test.setdefault(kind + "s" if kind == "warning" else "info", []).append(last_note)
            last_kind = kind
            continue
        last_test = {"category": section, "name": name, "result_lines": [value]}
        tests.append(last_test)
        last_kind = "status"

    gpu_ids_text = metadata.get("GPU Device IDs Detected", "")
    device_ids = [tok.strip() for tok in gpu_ids_text.split(",") if tok.strip()]
    gpu_ids = list(range(len(device_ids)))
    for test in tests:
        per_gpu: dict[str, str] = {}
        overall = None
        for text in test.pop("result_lines"):
            status = _STATUS.match(text)
            if not status:
                warnings.append(f"{test['name']}: result {text!r} not understood")
                continue
            word = _status_word(status.group(1)) or status.group(1)
            overall = _worst([overall, word]) if overall else word
            for gpu in _expand_gpus(status.group(2), gpu_ids):
                per_gpu[str(gpu)] = word
        test["result"] = overall
        test["per_gpu"] = per_gpu
        if "info" in test:
            test["info"] = [note["text"].strip() for note in test["info"]]
            for text in test["info"]:
                if text and text[-1] not in ".!?)\"'":
                    # dcgmi caps the Info cell; what it printed ends mid-word
                    warnings.append(f"{test['name']}: Info text ends mid-sentence ({text[-30:]!r}); "
                                    "dcgmi cut it short")
        if "warnings" in test:
            texts = [note["text"].strip() for note in test["warnings"]]
            test["warnings"] = [{"gpu": _warning_gpu(t), "text": t} for t in texts]
    return {"metadata": metadata, "device_ids": device_ids, "tests": tests, "closed": closed}


def _warning_gpu(text: str) -> int | None:
    match = re.match(r"GPU\s+(\d+)\b", text)
    return int(match.group(1)) if match else None


def _worst(results: list[str | None]) -> str | None:
    present = [r for r in results if r]
    for word in _SEVERITY_ORDER:
        if word in present:
            return word
    return None


def _diag_summary(tests: list[dict[str, Any]]) -> tuple[str | None, dict[str, str]]:
    overall = _worst([t.get("result") for t in tests])
    per_gpu: dict[str, list[str]] = {}
    for test in tests:
        for gpu, word in test.get("per_gpu", {}).items():
            per_gpu.setdefault(gpu, []).append(word)
    ordered = sorted(per_gpu.items(), key=lambda kv: int(kv[0]))
    gpu_overall = {gpu: _worst(words) or "Skip" for gpu, words in ordered}
    return overall, gpu_overall


def _parse_diag(text: str) -> dict[str, Any]:
    lines = text.split("\n")
    warnings: list[str] = []
    tables = _split_diag_tables(lines)
    if not tables:
        raise ParseError("dcgmi diag: no 'Diagnostic | Result' table found")
    parsed = [_parse_diag_table(t, warnings) for t in tables]
    if len(parsed) > 1:
        same = all(p["tests"] == parsed[0]["tests"] and p["metadata"] == parsed[0]["metadata"]
                   for p in parsed)
        warnings.append(f"the diag table appears {len(parsed)} times (e.g. srun ran dcgmi in several tasks); "
                        + ("the copies are identical and were collapsed" if same
                           else "the copies differ; only the first is reported"))
    first = parsed[0]
    complete = first["closed"] and bool(first["tests"])
    if not first["closed"]:
        warnings.append("the diag table is not closed by its bottom border (output cut short?)")
    overall, gpu_overall = _diag_summary(first["tests"])
    meta = first["metadata"]
    success_line = bool(re.search(r"Successfully ran diagnostic", text))
    return result(TOOL, "diag", complete=complete, warnings=warnings,
                  dcgm_version=meta.get("DCGM Version"), driver_version=meta.get("Driver Version Detected"),
                  device_ids=first["device_ids"], gpu_count=len(first["device_ids"]) or None,
                  metadata=meta, tests=first["tests"], overall=overall, per_gpu_overall=gpu_overall,
                  ran_successfully=success_line, copies=len(parsed))


def _json_start(text: str) -> int:
    idx = text.find("{")
    if idx < 0:
        raise ParseError("dcgmi: expected a JSON document but found no '{'")
    return idx


def _load_json(text: str, what: str, warnings: list[str]) -> Any:
    start = _json_start(text)
    preamble = text[:start].strip()
    if preamble:
        warnings.append(f"text before the JSON document ignored: {preamble[:120]!r}")
    body = text[start:]
    try:
        doc, end = json.JSONDecoder().raw_decode(body)
    except json.JSONDecodeError as exc:
        raise ParseError(f"dcgmi {what}: the JSON document is cut off or invalid ({exc.msg} at line "
                         f"{exc.lineno}); rerun and capture the full output") from None
    trailer = body[end:].strip()
    if trailer:
        warnings.append(f"text after the JSON document ignored: {trailer[:120]!r}")
    return doc


def _as_gpu_list(value: Any) -> list[int]:
    if isinstance(value, bool):
        return []
    if isinstance(value, int):
        return [value]
    if isinstance(value, str):
        return [int(tok) for tok in re.findall(r"\d+", value)]
    if isinstance(value, list):
        return [v for v in value if isinstance(v, int) and not isinstance(v, bool)]
    return []


def _texts(value: Any) -> list[str]:
    """Warning/info entries: plain strings in DCGM 3.1, objects with ``message`` in later releases."""
    if value is None:
        return []
    items = value if isinstance(value, list) else [value]
    out = []
    for item in items:
        if isinstance(item, str):
            out.append(item)
        elif isinstance(item, dict):
            msg = item.get("message") or item.get("warning") or item.get("msg")
            if isinstance(msg, str):
                out.append(msg)
    return out


def _parse_diag_json(doc: Any, warnings: list[str]) -> dict[str, Any]:
    root = None
    if isinstance(doc, dict):
        for value in doc.values():
            if isinstance(value, dict) and "test_categories" in value:
                root = value
                break
        if root is None and "test_categories" in doc:
            root = doc
    if root is None:
        raise ParseError("dcgmi diag JSON: no 'test_categories' list found")
    categories = root.get("test_categories")
    if not isinstance(categories, list):
        raise ParseError("dcgmi diag JSON: 'test_categories' is not a list")
    tests: list[dict[str, Any]] = []
    nulls = 0
    all_gpus: set[int] = set()
    for cat in categories:
        if not isinstance(cat, dict):
            nulls += 1
            continue
        for test in cat.get("tests") or []:
            if not isinstance(test, dict):
                nulls += 1
                continue
            per_gpu: dict[str, str] = {}
            notes_warn: list[dict[str, Any]] = []
            notes_info: list[str] = []
            results = test.get("results") or []
            for res in results if isinstance(results, list) else []:
                if not isinstance(res, dict):
                    nulls += 1
                    continue
                word = _status_word(str(res.get("status", ""))) or None
                gpus = _as_gpu_list(res.get("gpu_ids", res.get("gpu_id")))
                all_gpus.update(gpus)
                if word is None:
                    warnings.append(f"{test.get('name')}: status {res.get('status')!r} not understood")
                    continue
                for gpu in gpus:
                    per_gpu[str(gpu)] = _worst([per_gpu.get(str(gpu)), word]) or word
                for msg in _texts(res.get("warnings", res.get("warning"))):
                    notes_warn.append({"gpu": gpus[0] if len(gpus) == 1 else None, "text": msg})
                notes_info.extend(_texts(res.get("info")))
            words = list(per_gpu.values())
            entry: dict[str, Any] = {"category": cat.get("category"), "name": test.get("name"),
                                     "result": _worst(words), "per_gpu": per_gpu}
            if notes_warn:
                entry["warnings"] = notes_warn
            if notes_info:
                entry["info"] = notes_info
            tests.append(entry)
    if nulls:
        warnings.append(f"{nulls} null/non-object entries in the JSON were skipped")
    overall, gpu_overall = _diag_summary(tests)
    return result(TOOL, "diag-json", complete=bool(tests), warnings=warnings,
                  dcgm_version=root.get("version") if isinstance(root.get("version"), str) else None,
                  driver_version=root.get("Driver Version Detected") if isinstance(
                      root.get("Driver Version Detected"), str) else None,
                  gpu_count=len(all_gpus) or None, tests=tests, overall=overall, per_gpu_overall=gpu_overall)


# ------------------------------------------------------------------------------------------------ health

def _parse_health(text: str) -> dict[str, Any]:
    """``dcgmi health -c``: 'Overall Health' row, then 'GPU ID: N' rows with '<X> system: <status> - msg'."""
    warnings: list[str] = []
    overall = None
    entities: list[dict[str, Any]] = []
    entity: dict[str, Any] | None = None
    incident: dict[str, Any] | None = None
    closed = False
    seen_header = False
    group_id = None
    for raw in text.split("\n"):
        line = raw.strip()
        if not line:
            continue
        if _BORDER.match(line):
            closed = seen_header
            continue
        cells = _cells(line)
        if cells is None:
            if line == "Health Monitor Report":  # older DCGM prints the title above the box
                seen_header = True
            else:
                warnings.append(f"unrecognised line in health report: {line[:120]!r}")
            continue
        closed = False
        if len(cells) == 1:
            if "Health Monitor Report" in cells[0]:
                seen_header = True
            else:
                warnings.append(f"unrecognised row in health report: {line[:120]!r}")
            continue
        name, value = cells[0].strip(), "|".join(cells[1:]).strip()
        if name.lower() == "overall health":
            overall = value
            continue
        group_overall = re.match(r"^Overall Health:\s*(\w+)", value)
        if group_overall:  # DCGM 1.x/2.x layout: '| Group 1 | Overall Health: Warning |'
            overall = group_overall.group(1)
            group = re.match(r"^Group\s+(\d+)$", name)
            group_id = int(group.group(1)) if group else None
            continue
        ent = re.match(r"^(GPU|NvSwitch|Switch|CPU)\s*(?:ID)?\s*:?\s*(\d+)$", name, re.IGNORECASE)
        if ent:
            entity = {"entity": ent.group(1).upper() if ent.group(1).lower() != "nvswitch" else "NVSWITCH",
                      "id": int(ent.group(2)), "health": value or None, "incidents": []}
            entities.append(entity)
            incident = None
            continue
        if name:
            warnings.append(f"unrecognised row in health report: {line[:120]!r}")
            continue
        if entity is None:
            warnings.append(f"health detail before any GPU row: {line[:120]!r}")
            continue
        sub = re.match(r"^([A-Za-z][\w /.-]*?)\s+system:\s*(\w+)\s*(?:-\s*(.*))?$", value)
        if sub:
            incident = {"system": sub.group(1).strip(), "health": sub.group(2),
                        "message": (sub.group(3) or "").strip()}
            entity["incidents"].append(incident)
        elif incident is not None:
            incident["message"] = (incident["message"] + " " + value).strip()
        else:
            warnings.append(f"health detail not understood: {line[:120]!r}")
    if overall is None and not seen_header:
        raise ParseError("dcgmi health: no 'Health Monitor Report' / 'Overall Health' row found")
    subsystems: dict[str, str] = {}
    for ent in entities:
        for inc in ent["incidents"]:
            key = _snake(inc["system"])
            subsystems[key] = _worst_health(subsystems.get(key), inc["health"])
    complete = overall is not None and closed
    if not closed:
        warnings.append("the health report is not closed by its bottom border (output cut short?)")
    healthy = None if overall is None else overall.strip().lower() == "healthy"
    return result(TOOL, "health", complete=complete, warnings=warnings, overall=overall, healthy=healthy,
                  group=group_id, entities=entities, subsystems=subsystems)


def _worst_health(old: str | None, new: str) -> str:
    for word in _HEALTH_ORDER:
        if word.lower() in ((old or "").lower(), new.lower()):
            return word
    return new


# ------------------------------------------------------------------------------------------------ nvlink

_COUNTER_KEYS = {"crc flit error": "crc_flit_errors", "crc data error": "crc_data_errors",
                 "replay error": "replay_errors", "recovery error": "recovery_errors"}


def _counter_key(name: str) -> str:
    return _COUNTER_KEYS.get(name.strip().lower(), _snake(name))


def _nvlink_result(fmt: str, gpu: int | None, links: list[dict[str, Any]], complete: bool,
                   warnings: list[str]) -> dict[str, Any]:
    def counters(link: dict[str, Any]) -> list[int]:
        return [v for k, v in link.items() if k != "link" and isinstance(v, int)]

    return result(TOOL, fmt, complete=complete, warnings=warnings, gpu=gpu, links=links,
                  link_count=len(links), total_errors=sum(sum(counters(link)) for link in links),
                  links_with_errors=[link["link"] for link in links if any(v > 0 for v in counters(link))])


def _parse_nvlink_text(text: str) -> dict[str, Any]:
    warnings: list[str] = []
    gpu = None
    links: list[dict[str, Any]] = []
    closed = False
    for raw in text.split("\n"):
        line = raw.strip()
        if not line:
            continue
        if _BORDER.match(line):
            closed = bool(links)
            continue
        cells = _cells(line)
        if cells is None:
            warnings.append(f"unrecognised line in nvlink error table: {line[:120]!r}")
            continue
        closed = False
        name = cells[0].strip()
        value = "|".join(cells[1:]).strip() if len(cells) > 1 else ""
        head = re.match(r"^GPU\s+(\d+)$", name)
        if head:
            gpu = int(head.group(1))
            continue
        link = re.match(r"^Link\s+(\d+)$", name)
        if link:
            links.append({"link": int(link.group(1))})
            continue
        if name.startswith("->") and links:
            links[-1][_counter_key(name[2:])] = to_int(value)
            continue
        if "NVLINK Error Counts" in name:
            continue
        warnings.append(f"unrecognised row in nvlink error table: {line[:120]!r}")
    if not links:
        raise ParseError("dcgmi nvlink: no 'Link N' rows found in the error-count table")
    if not closed:
        warnings.append("the nvlink table is not closed by its bottom border (output cut short?)")
    return _nvlink_result("nvlink", gpu, links, closed, warnings)


def _parse_nvlink_json(doc: Any, warnings: list[str]) -> dict[str, Any]:
    body = doc.get("body") if isinstance(doc, dict) else None
    if not isinstance(body, dict):
        raise ParseError("dcgmi nvlink JSON: no 'body' object")
    gpu = None
    header = doc.get("header")
    for item in header if isinstance(header, list) else []:
        match = re.match(r"^GPU\s+(\d+)$", str(item).strip())
        if match:
            gpu = int(match.group(1))
    links = []
    for name, node in body.items():
        match = re.match(r"^Link\s+(\d+)$", str(name).strip())
        if not match:
            warnings.append(f"unexpected key in nvlink JSON body: {name!r}")
            continue
        entry: dict[str, Any] = {"link": int(match.group(1))}
        children = node.get("children") if isinstance(node, dict) else None
        for cname, cval in (children.items() if isinstance(children, dict) else []):
            raw = cval.get("value") if isinstance(cval, dict) else cval
            entry[_counter_key(str(cname))] = to_int(str(raw)) if raw is not None else None
        links.append(entry)
    links.sort(key=lambda link: link["link"])
    return _nvlink_result("nvlink-json", gpu, links, True, warnings)


# ----------------------------------------------------------------------------------------------- version

def _parse_version(text: str) -> dict[str, Any]:
    client: dict[str, str] = {}
    hostengine: dict[str, str] = {}
    target = client
    for raw in text.split("\n"):
        line = raw.strip()
        if not line:
            continue
        if line.lower().startswith("hostengine build info"):
            target = hostengine
            continue
        key, sep, value = line.partition(":")
        if sep:
            target.setdefault(_snake(key), value.strip())
    if "version" not in client:
        raise ParseError("dcgmi -v: no 'Version :' line found")
    return result(TOOL, "version", complete=bool(hostengine) or "crc" in client, warnings=[],
                  version=client.get("version"), build_id=client.get("build_id"),
                  commit_id=client.get("commit_id"), branch=client.get("branch_name"), client=client,
                  hostengine=hostengine or None, hostengine_version=hostengine.get("version"))


# -------------------------------------------------------------------------------------------- dispatcher

@register("dcgmi")
def parse(text: str) -> dict[str, Any]:
    """Parse any supported ``dcgmi`` output (see the module docstring for the sub-formats)."""
    if not text or not text.strip():
        raise ParseError("dcgmi: the output is empty")
    stripped = text.strip()
    if "DCGM GPU Diagnostic" in text or ('"test_categories"' in text and "{" in text):
        warnings: list[str] = []
        return _parse_diag_json(_load_json(text, "diag", warnings), warnings)
    if stripped.startswith("{") and '"body"' in text:
        warnings = []
        return _parse_nvlink_json(_load_json(text, "nvlink", warnings), warnings)
    if re.search(r"^\s*\d+\s+GPUs?\s+found", text, re.MULTILINE | re.IGNORECASE):
        return _parse_discovery(text)
    if re.search(r"\|\s*Diagnostic\s*\|\s*Result\s*\|", text):
        return _parse_diag(text)
    if "Health Monitor Report" in text or re.search(r"\|\s*Overall Health\s*\|", text):
        return _parse_health(text)
    if "NVLINK Error Counts" in text or re.search(r"\|\s*Link\s+\d+\s*\|", text):
        return _parse_nvlink_text(text)
    if re.search(r"^\s*Version\s*:", text, re.MULTILINE):
        return _parse_version(text)
    if "Successfully ran diagnostic" in text:
        raise ParseError("dcgmi diag: 'Successfully ran diagnostic' printed but no result table follows "
                         "(output cut short?)")
    first = stripped.split("\n", 1)[0][:120]
    raise ParseError(f"dcgmi: output not recognised as discovery, diag, health, nvlink or version "
                     f"(first line: {first!r})")
