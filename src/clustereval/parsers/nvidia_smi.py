"""Parser for plain ``nvidia-smi`` (the default summary table), and the other shapes it is run in.

Sub-formats detected (``format`` in the result):

* ``table``: the default summary, in the old 79-column layout (R418 to R535: ``Driver Version: ...`` on
  the banner line, ``Persistence-M|`` without a space) and the 89-column layout (R545 and later: wider
  name and PID columns, a ``+---+`` rule under the banner since R580), with or without the timestamp
  line, under ``watch`` or not, trailing spaces and all. Per GPU: ``index``, ``name`` (as printed,
  possibly truncated with ``...``), ``bus_id``, ``persistence_mode``, ``display_active``, ``fan_pct``,
  ``temperature_c``, ``performance_state``, ``power_draw_w``, ``power_limit_w``, ``memory_used_mib``,
  ``memory_total_mib``, ``utilization_gpu_pct``, ``ecc_uncorrected_volatile`` (the "Volatile Uncorr.
  ECC" column), ``compute_mode``, ``mig_mode``, and ``err_fields`` (columns that show ``ERR!``, which
  nvidia-smi prints when it cannot read a sensor: a hardware fault sign). Also ``mig_devices`` and
  ``processes`` (``gpu``, ``gi``, ``ci``, ``pid``, ``type``, ``name``, ``used_memory_mib``).
* ``list``: ``nvidia-smi -L`` (GPUs with UUIDs, MIG devices with profile and UUID).
* ``csv``: ``nvidia-smi --query-gpu ... --format=csv`` (delegated to
  :mod:`clustereval.parsers.nvidia_smi_query_loop`).
* ``text`` / ``xml``: ``nvidia-smi -q`` / ``-q -x`` captured under the plain name (delegated).
"""

from __future__ import annotations

import re
from typing import Any

from clustereval.parsers import register
from clustereval.parsers._common import result, to_float, to_int
from clustereval.parsers.errors import ParseError

TOOL = "nvidia-smi"
_BANNER = re.compile(r"NVIDIA-SMI\s+(?P<smi>\S+)\s+Driver Version:\s*(?P<driver>\S+)"
                     r"(?:\s+CUDA Version:\s*(?P<cuda>\S+))?")
_LIST_GPU = re.compile(r"^GPU (\d+): (.+?) \(UUID: ([^)]+)\)\s*$")
_LIST_MIG = re.compile(r"^\s+MIG (\S+)\s+Device\s+(\d+): \(UUID: ([^)]+)\)\s*$")
_GPU_LINE0 = re.compile(r"^\s*(\d+)\s+(.*?)\s+(On|Off|N/A)\s*$")
_GPU_LINE1 = re.compile(r"^\s*(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s*/\s*(\S+)\s*$")
_MEMORY = re.compile(r"^\s*(\S+?)\s*/\s*(\S+?)\s*$")
_PROCESS = re.compile(r"^\s*(\d+|N/A)\s+(?:(\S+)\s+(\S+)\s+)?(\d+)\s+(C\+G|M\+C|C|G|M)\s+(.*?)\s+"
                      r"(\d+MiB|N/A)\s*$")
_FAILURES = re.compile(r"NVIDIA-SMI has failed[^\n]*|No devices were found|Failed to initialize NVML[^\n]*|"
                       r"Unable to determine the device handle[^\n]*", re.IGNORECASE)


def _mib(token: str | None) -> int | None:
    if not token or not token.upper().endswith("MIB"):
        return None
    return to_int(token[:-3])


def _unit_number(token: str | None, unit: str) -> float | None:
    if not token or not token.endswith(unit):
        return None
    return to_float(token[: -len(unit)])


def _whole(value: float | None) -> int | float | None:
    return int(value) if value is not None and value.is_integer() else value


def _cells(line: str) -> list[str] | None:
    stripped = line.strip()
    if len(stripped) < 2 or not stripped.startswith("|") or not stripped.endswith("|"):
        return None
    return stripped[1:-1].split("|")


def _is_rule(line: str) -> bool:
    stripped = line.strip()
    return len(stripped) > 2 and stripped[0] in "+|" and set(stripped) <= set("+-=|")


def _gpu_line0(gpu: dict[str, Any], cells: list[str]) -> bool:
    match = _GPU_LINE0.match(cells[0])
    if not match:
        return False
    gpu["index"] = int(match.group(1))
    gpu["name"] = match.group(2)
    gpu["persistence_mode"] = {"On": True, "Off": False}.get(match.group(3))
    bus = cells[1].split()
    gpu["bus_id"] = bus[0] if bus else None
    gpu["display_active"] = {"On": True, "Off": False}.get(bus[1]) if len(bus) > 1 else None
    ecc = cells[2].strip()
    gpu["ecc_uncorrected_volatile_raw"] = ecc
    gpu["ecc_uncorrected_volatile"] = to_int(ecc)
    if ecc.upper() == "ERR!":
        gpu["err_fields"].append("ecc")
    return True


def _gpu_line1(gpu: dict[str, Any], cells: list[str]) -> None:
    match = _GPU_LINE1.match(cells[0])
    if match:
        fan, temp, perf, power, cap = match.groups()
        gpu["fan_raw"] = fan
        gpu["fan_pct"] = _whole(_unit_number(fan, "%"))
        gpu["temperature_c"] = _whole(_unit_number(temp, "C"))
        gpu["performance_state"] = perf if perf.upper() != "ERR!" else None
        gpu["power_draw_w"] = _unit_number(power, "W")
        gpu["power_limit_w"] = _unit_number(cap, "W")
        for name, token in (("fan", fan), ("temperature", temp), ("performance_state", perf),
                            ("power_draw", power), ("power_limit", cap)):
            if token.upper() == "ERR!":
                gpu["err_fields"].append(name)
    memory = _MEMORY.match(cells[1])
    if memory:
        gpu["memory_used_mib"] = _mib(memory.group(1))
        gpu["memory_total_mib"] = _mib(memory.group(2))
    util = cells[2].split(None, 1)
    if util:
        gpu["utilization_gpu_pct"] = _whole(_unit_number(util[0], "%"))
        if util[0].upper() == "ERR!":
            gpu["err_fields"].append("utilization")
        gpu["compute_mode"] = util[1].strip() if len(util) > 1 else None


def _new_gpu() -> dict[str, Any]:
    return {"index": None, "name": None, "bus_id": None, "persistence_mode": None, "display_active": None,
            "fan_raw": None, "fan_pct": None, "temperature_c": None, "performance_state": None,
            "power_draw_w": None, "power_limit_w": None, "memory_used_mib": None, "memory_total_mib": None,
            "utilization_gpu_pct": None, "ecc_uncorrected_volatile": None,
            "ecc_uncorrected_volatile_raw": None, "compute_mode": None, "mig_mode": None, "err_fields": []}


def _parse_table(lines: list[str]) -> dict[str, Any]:
    warnings: list[str] = []
    timestamp = None
    banner = None
    gpus: list[dict[str, Any]] = []
    mig_devices: list[dict[str, Any]] = []
    processes: list[dict[str, Any]] | None = None
    section = "pre"  # pre → header → gpus → after → mig/procs-header → procs → done
    block_line = 0
    current: dict[str, Any] | None = None
    gpu_table_closed = False
    processes_closed = False
    last_block_closed = False
    for raw in lines:
        line = raw.rstrip()
        if not line.strip():
            if section == "gpus" and block_line == 0 and gpus:
                section, gpu_table_closed = "after", True
            continue
        if section == "pre":
            match = _BANNER.search(line)
            if match:
                banner = match
                section = "header"
            elif not line.lstrip().startswith(("+", "|")) and not line.startswith("Every "):
                timestamp = line.strip()
            continue
        if section == "header":
            if line.strip().startswith("|=") and _is_rule(line):
                section, block_line = "gpus", 0
            continue
        if section == "gpus":
            if _is_rule(line):
                stripped = line.strip()
                if current is not None:
                    current = None
                    block_line = 0
                    last_block_closed = True
                if stripped.count("+") <= 2 and stripped.startswith("+"):
                    # a full-width rule (no column joints) ends the GPU table
                    section, gpu_table_closed = "after", True
                continue
            cells = _cells(line)
            if cells is None or len(cells) != 3:
                if "Processes:" in line or "MIG devices:" in line:
                    section, gpu_table_closed = "after", True
                else:
                    warnings.append(f"unrecognised line in the GPU table: {line.strip()[:100]!r}")
                    continue
            else:
                if block_line == 0:
                    last_block_closed = False
                    current = _new_gpu()
                    if _gpu_line0(current, cells):
                        gpus.append(current)
                    else:
                        warnings.append(f"unrecognised GPU row: {line.strip()[:100]!r}")
                        current = None
                elif current is not None and block_line == 1:
                    _gpu_line1(current, cells)
                elif current is not None and block_line == 2:
                    mig = cells[2].strip()
                    current["mig_mode"] = None if mig.upper() == "N/A" else mig
                block_line += 1
                continue
        if section in ("after", "mig", "mig-rows"):
            if "MIG devices:" in line:
                section = "mig"
                continue
            if "Processes:" in line:
                section, processes = "procs-header", []
                continue
            if section == "mig" and line.strip().startswith("|=") and _is_rule(line):
                section = "mig-rows"
                continue
            if section == "mig-rows":
                cells = _cells(line)
                if cells and len(cells) >= 2:
                    ids = cells[0].split()
                    memory = _MEMORY.match(cells[1])
                    if len(ids) == 4 and all(i.isdigit() for i in ids):
                        mig_devices.append({
                            "gpu": int(ids[0]), "gi": int(ids[1]), "ci": int(ids[2]), "mig_dev": int(ids[3]),
                            "memory_used_mib": _mib(memory.group(1)) if memory else None,
                            "memory_total_mib": _mib(memory.group(2)) if memory else None})
            continue
        if section == "procs-header":
            if line.strip().startswith("|=") and _is_rule(line):
                section = "procs"
            continue
        if section == "procs":
            if _is_rule(line):
                section, processes_closed = "done", True
                continue
            cells = _cells(line)
            body = cells[0] if cells and len(cells) == 1 else None
            if body is None:
                warnings.append(f"unrecognised line in the Processes table: {line.strip()[:100]!r}")
                continue
            if "No running processes found" in body:
                continue
            match = _PROCESS.match(body)
            if not match:
                warnings.append(f"unrecognised process row: {body.strip()[:100]!r}")
                continue
            gpu, gi, ci, pid, ptype, name, mem = match.groups()
            processes.append({  # type: ignore[union-attr]
                "gpu": to_int(gpu), "gi": to_int(gi), "ci": to_int(ci), "pid": int(pid), "type": ptype,
                "name": name, "used_memory_mib": _mib(mem)})
            continue
        if section == "done" and line.strip():
            warnings.append(f"text after the Processes table: {line.strip()[:100]!r}")

    if banner is None:
        raise ParseError("nvidia-smi: no 'NVIDIA-SMI ... Driver Version' banner found; not the default "
                         "nvidia-smi table")
    if section == "header":
        raise ParseError("nvidia-smi: the output stops inside the table header, before any GPU row")
    if section == "gpus" and last_block_closed:
        gpu_table_closed = True  # the output ends right after the last GPU block's closing rule
    complete = gpu_table_closed and processes_closed
    if not gpu_table_closed:
        warnings.append(f"the GPU table is cut off after {len(gpus)} GPU(s)")
    elif processes is None:
        warnings.append("no Processes table: the output stops after the GPU table")
    elif not processes_closed:
        warnings.append("the Processes table is cut off")
    for gpu in gpus:
        if gpu["memory_total_mib"] is None and gpu["temperature_c"] is None and not gpu["err_fields"]:
            complete = False
            warnings.append(f"GPU {gpu['index']}: only the first row of its block was read")
    cuda = banner.group("cuda")
    return result(
        TOOL, "table", complete=complete, warnings=warnings,
        timestamp=timestamp,
        nvidia_smi_version=banner.group("smi"),
        driver_version=banner.group("driver"),
        cuda_version=None if cuda in (None, "N/A") else cuda,
        layout="89-col" if len(lines[_first_rule(lines)].strip()) > 85 else "79-col",
        gpus=gpus,
        mig_devices=mig_devices,
        processes=processes,
    )


def _first_rule(lines: list[str]) -> int:
    for number, line in enumerate(lines):
        if line.strip().startswith("+-"):
            return number
    return 0


def _parse_list(lines: list[str]) -> dict[str, Any]:
    gpus: list[dict[str, Any]] = []
    warnings: list[str] = []
    for line in lines:
        if not line.strip():
            continue
        gpu = _LIST_GPU.match(line)
        mig = _LIST_MIG.match(line)
        if gpu:
            gpus.append({"index": int(gpu.group(1)), "name": gpu.group(2), "uuid": gpu.group(3),
                         "mig_devices": []})
        elif mig and gpus:
            gpus[-1]["mig_devices"].append({"profile": mig.group(1), "device": int(mig.group(2)),
                                            "uuid": mig.group(3)})
        else:
            warnings.append(f"unrecognised line: {line.strip()[:100]!r}")
    return result(TOOL, "list", complete=True, warnings=warnings, gpus=gpus)


@register(TOOL)
def parse(text: str) -> dict[str, Any]:
    """Parse plain ``nvidia-smi`` output (table, ``-L``, CSV query, ``-q``/``-q -x``) into GPU records."""
    if not text.strip():
        raise ParseError("nvidia-smi: the output is empty")
    lines = text.split("\n")
    head = text.lstrip()[:2000]
    if head.startswith("<?xml") or "<nvidia_smi_log" in head:
        from clustereval.parsers import nvidia_smi_q_x
        return {**nvidia_smi_q_x.parse(text), "tool": TOOL}
    if "==NVSMI LOG==" in head:
        from clustereval.parsers import nvidia_smi_q
        return {**nvidia_smi_q.parse(text), "tool": TOOL}
    if _BANNER.search(text):
        return _parse_table(lines)
    nonempty = [ln for ln in lines if ln.strip()]
    if _LIST_GPU.match(nonempty[0]):
        return _parse_list(lines)
    failure = _FAILURES.search(text)
    if failure:
        raise ParseError(f"nvidia-smi failed: {failure.group(0).strip()[:200]}")
    if any("," in ln for ln in nonempty[:3]):
        from clustereval.parsers import nvidia_smi_query_loop
        return {**nvidia_smi_query_loop.parse(text), "tool": TOOL}
    raise ParseError(f"nvidia-smi: not a recognised nvidia-smi output (first line: "
                     f"{nonempty[0].strip()[:120]!r})")
