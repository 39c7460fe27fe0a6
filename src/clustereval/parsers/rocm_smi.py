"""Parser for AMD ``rocm-smi`` (ROCm 4.3-7.x).

Sub-formats:

* ``json`` - ``rocm-smi ... --json``: ``{"card0": {...}, "system": {"Driver version": ...}}``, with the
  key spellings of ROCm 4.3 (``Card series``) and 6.x (``Card Series``, ``Device Name``,
  ``GPU Memory Allocated (VRAM%)``); topology weights/hops/link types from ``system``.
* ``concise`` - the default "Concise Info" table: ROCm 5.x (``Device Node IDs ...``), 6.x MI300X
  (``[Model : Revision]``, Partitions, name on a second line) and 7.x layouts, including tables whose
  columns are padded with no-break spaces and trailing tabs (kubectl logs copies).
* ``all`` - ``rocm-smi -a`` / section output (``GPU[0]  : Device ID: 0x74a1``).

Every GPU gets the same normalised keys (``temp_junction_c``, ``power_w``, ``gpu_use_pct`` ...; None when
the tool printed N/A or nothing); the raw key/value pairs are kept under ``fields`` for JSON and ``-a``.
"""

from __future__ import annotations

import json
import re
from typing import Any

from clustereval.parsers import register
from clustereval.parsers._common import result, to_float, to_int
from clustereval.parsers.errors import ParseError

TOOL = "rocm-smi"

_NORMAL = {
    "name": ("Device Name", "Card series", "Card Series", "Card model", "Card Model"),
    "device_id": ("Device ID", "GPU ID"),
    "unique_id": ("Unique ID",),
    "vbios": ("VBIOS version",),
    "temp_edge_c": ("Temperature (Sensor edge) (C)",),
    "temp_junction_c": ("Temperature (Sensor junction) (C)",),
    "temp_memory_c": ("Temperature (Sensor memory) (C)",),
    "power_w": ("Average Graphics Package Power (W)", "Current Socket Graphics Package Power (W)"),
    "power_cap_w": ("Max Graphics Package Power (W)",),
    "gpu_use_pct": ("GPU use (%)",),
    "vram_use_pct": ("GPU Memory Allocated (VRAM%)", "GPU memory use (%)"),
    "vram_total_bytes": ("VRAM Total Memory (B)",),
    "vram_used_bytes": ("VRAM Total Used Memory (B)",),
    "perf_level": ("Performance Level",),
    "memory_partition": ("Memory Partition",),
    "compute_partition": ("Compute Partition",),
    "serial": ("Serial Number",),
}
_NUMERIC = {"temp_edge_c", "temp_junction_c", "temp_memory_c", "power_w", "power_cap_w", "gpu_use_pct",
            "vram_use_pct", "vram_total_bytes", "vram_used_bytes"}


def _normalise(index: int, fields: dict[str, str]) -> dict[str, Any]:
    gpu: dict[str, Any] = {"index": index}
    for key, candidates in _NORMAL.items():
        value = next((fields[c] for c in candidates if c in fields and fields[c] not in ("", "N/A")), None)
        if key.endswith("_bytes"):
            gpu[key] = to_int(value) if value is not None else None
        elif key in _NUMERIC:
            gpu[key] = to_float(value) if value is not None else None
        else:
            gpu[key] = value
    for clock in ("sclk", "mclk", "fclk", "socclk"):
        raw = fields.get(f"{clock} clock speed:") or fields.get(f"{clock} clock level")
        mhz = re.search(r"(\d+)\s*Mhz", raw or "", re.IGNORECASE)
        gpu[f"{clock}_mhz"] = int(mhz.group(1)) if mhz else None
    gpu["fields"] = fields
    return gpu


def _parse_json(text: str) -> dict[str, Any]:
    warnings: list[str] = []
    start = text.find("{")
    if start > 0 and text[:start].strip():
        warnings.append(f"text before the JSON document ignored: {text[:start].strip()[:120]!r}")
    try:
        doc, _end = json.JSONDecoder().raw_decode(text[start:])
    except json.JSONDecodeError as exc:
        raise ParseError(f"rocm-smi: the JSON document is cut off or invalid ({exc.msg} at line {exc.lineno})"
                         ) from None
    if not isinstance(doc, dict):
        raise ParseError("rocm-smi: the JSON document is not an object of cards")
    gpus = []
    for key, value in doc.items():
        card = re.match(r"^card(\d+)$", str(key))
        if card and isinstance(value, dict):
            gpus.append(_normalise(int(card.group(1)), {str(k): str(v) for k, v in value.items()}))
        elif key != "system":
            warnings.append(f"unexpected top-level key {key!r}")
    system = doc.get("system") if isinstance(doc.get("system"), dict) else {}
    links = []
    for key, value in system.items():
        match = re.match(r"^\(Topology\) (Weight|Hops|Link type) between DRM devices (\d+) and (\d+)$", str(key))
        if match:
            kind = {"Weight": "weight", "Hops": "hops", "Link type": "link_type"}[match.group(1)]
            pair = next((p for p in links if p["a"] == int(match.group(2)) and p["b"] == int(match.group(3))), None)
            if pair is None:
                pair = {"a": int(match.group(2)), "b": int(match.group(3))}
                links.append(pair)
            pair[kind] = to_int(str(value)) if kind != "link_type" else value
    processes = {k: v for k, v in system.items() if str(k).startswith("PID")}
    if not gpus:
        raise ParseError("rocm-smi: JSON without any 'cardN' entry (no GPU visible to ROCm?)")
    gpus.sort(key=lambda g: g["index"])
    return result(TOOL, "json", complete=True, warnings=warnings, driver_version=system.get("Driver version"),
                  gpus=gpus, gpu_count=len(gpus), topology=links, processes=processes)


_CONCISE_ROW = re.compile(r"^(\d+)\s+\S")


def _parse_concise(text: str) -> dict[str, Any]:
    warnings: list[str] = []
    gpus: list[dict[str, Any]] = []
    lines = [ln.replace("\xa0", " ").replace("\t", " ").rstrip() for ln in text.split("\n")]
    ended = any("End of ROCm SMI Log" in ln for ln in lines)
    in_table = False
    rule_count = 0
    amdsmi = None
    for line in lines:
        stripped = line.strip()
        if not stripped:
            continue
        if stripped.startswith("AMDSMI Tool:"):
            amdsmi = {k.strip(): v.strip() for k, _, v in (part.partition(":") for part in stripped.split("|"))}
            continue
        if re.fullmatch(r"=+", stripped):
            rule_count += 1
            in_table = rule_count == 1 or in_table
            continue
        if stripped.startswith("=") or stripped.startswith(("Device", "Name (", "(DID", "GPU[")):
            continue
        row = _CONCISE_ROW.match(stripped)
        if row and ("%" in stripped or "W" in stripped or "Mhz" in stripped):
            gpus.append(_concise_row(stripped))
            continue
        if gpus and not row and not gpus[-1].get("name") and line.startswith(" "):
            gpus[-1]["name"] = stripped  # MI300X layout prints the name on the next line
            continue
        if len(warnings) < 20:
            warnings.append(f"line not understood: {stripped[:120]!r}")
    if not gpus:
        raise ParseError("rocm-smi: a Concise Info table with no GPU row (no GPU visible, or cut short)")
    if not ended:
        warnings.append("no 'End of ROCm SMI Log' line: the table may be cut short")
    return result(TOOL, "concise", complete=ended, warnings=warnings, gpus=gpus, gpu_count=len(gpus),
                  amdsmi_version=(amdsmi or {}).get("AMDSMI Tool"),
                  rocm_version=(amdsmi or {}).get("ROCm version"))


def _concise_row(row: str) -> dict[str, Any]:
    tokens = row.split()
    gpu: dict[str, Any] = {"index": int(tokens[0]), "name": None}
    temp = re.search(r"(-?[\d.]+)\s*°C", row)
    watts = re.findall(r"([\d.]+)W\b", row)
    clocks = re.findall(r"(\d+)Mhz", row, re.IGNORECASE)
    percents = re.findall(r"(\d+(?:\.\d+)?)%", row)
    model = re.search(r"\[(0x[0-9a-fA-F]+)\s*:\s*(0x[0-9a-fA-F]+)\]", row)
    did = re.search(r"\b(0x[0-9a-fA-F]{4}),", row)
    partitions = re.search(r"\b(NPS\d+),\s*([A-Z]PX)(?:,\s*(\d+))?", row)
    perf = re.search(r"\b(auto|manual|low|high|determinism|stable_std|stable_peak|stable_min_mclk|"
                     r"stable_min_sclk|N/A)\b", row)
    gpu["device_id"] = model.group(1) if model else (did.group(1) if did else None)
    gpu["revision"] = model.group(2) if model else None
    if not model and len(tokens) > 2 and tokens[1].isdigit():
        gpu["node"] = int(tokens[1])  # newer layouts put the KFD node next to the device index
    gpu["temp_junction_c"] = to_float(temp.group(1)) if temp else None
    gpu["power_w"] = to_float(watts[0]) if watts else None
    gpu["power_cap_w"] = to_float(watts[-1]) if len(watts) > 1 else None
    gpu["sclk_mhz"] = int(clocks[0]) if clocks else None
    gpu["mclk_mhz"] = int(clocks[1]) if len(clocks) > 1 else None
    gpu["fan_pct"] = to_float(percents[0]) if len(percents) >= 3 else None
    gpu["vram_use_pct"] = to_float(percents[-2]) if len(percents) >= 2 else None
    gpu["gpu_use_pct"] = to_float(percents[-1]) if percents else None
    gpu["perf_level"] = perf.group(1) if perf else None
    gpu["memory_partition"] = partitions.group(1) if partitions else None
    gpu["compute_partition"] = partitions.group(2) if partitions else None
    return gpu


def _parse_all(text: str) -> dict[str, Any]:
    per_gpu: dict[int, dict[str, str]] = {}
    driver = None
    warnings: list[str] = []
    for raw in text.split("\n"):
        line = raw.strip()
        match = re.match(r"^GPU\[(\d+)\]\s*:\s*(.*)$", line)
        if match:
            body = match.group(2)
            key, sep, value = body.rpartition(": ") if body.count(": ") > 1 else body.partition(": ")
            if not sep:
                key, value = body.rstrip(":"), ""
            per_gpu.setdefault(int(match.group(1)), {})[key.strip()] = value.strip()
            continue
        if line.startswith("Driver version:"):
            driver = line.split(":", 1)[1].strip()
    if not per_gpu:
        raise ParseError("rocm-smi: no 'GPU[n] : key: value' lines found")
    complete = "End of ROCm SMI Log" in text
    if not complete:
        warnings.append("no 'End of ROCm SMI Log' line: the output may be cut short")
    gpus = [_normalise(index, fields) for index, fields in sorted(per_gpu.items())]
    return result(TOOL, "all", complete=complete, warnings=warnings, driver_version=driver, gpus=gpus,
                  gpu_count=len(gpus))


@register("rocm-smi")
def parse(text: str) -> dict[str, Any]:
    """rocm-smi JSON, Concise Info table or ``-a`` output (see the module docstring)."""
    if not text or not text.strip():
        raise ParseError("rocm-smi: the output is empty")
    stripped = text.strip()
    if stripped.startswith("{") or re.match(r"^[^\n{]{0,200}\n?\s*\{\s*\"card", stripped):
        return _parse_json(text)
    if "Concise Info" in text:
        return _parse_concise(text)
    if re.search(r"^GPU\[\d+\]\s*:", text, re.MULTILINE):
        return _parse_all(text)
    raise ParseError("rocm-smi: neither JSON, a Concise Info table nor 'GPU[n] :' lines")
