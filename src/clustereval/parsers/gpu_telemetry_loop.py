"""GPU telemetry sampling loops of either vendor, read into the same rows: ``gpu-telemetry-loop``.

The telemetry and burn-in roles' GPU stream runs ``nvidia-smi --query-gpu=... --format=csv -lms N`` where the node
has nvidia-smi, and ``amd-smi monitor -p -t -u -m -e -w S`` where it has amd-smi instead (roles/telemetry
``vars/main.yml``). This parser tells the two apart and returns rows keyed by the nvidia-smi field names, so the
checks (``checks/telemetry.py``, ``checks/burnin.py``) judge both the same way:

* nvidia-smi CSV is handed to ``nvidia-smi-query-loop`` and its result returned unchanged;
* ``amd-smi monitor`` output (watch mode or one table; ``parsers/amd_smi.py``) becomes one row per GPU per
  interval: ``timestamp`` (the watch mode's epoch seconds as ``YYYY/MM/DD HH:MM:SS.000`` in UTC, the layout
  nvidia-smi prints; the epoch itself in ``timestamp_epoch_s``), ``index`` (GPU), ``pci.bus_id`` (None: monitor
  prints no BDF), ``temperature.gpu`` (GPU_T / GPU_TEMP: the hotspot, i.e. junction, sensor), ``temperature.memory``
  (MEM_T / MEM_TEMP), ``power.draw`` (POWER: current socket power), ``power.limit`` (PWR_CAP, 26.x ``-p``; None
  when not printed), ``clocks.current.sm`` (GFX_CLK / GFX_CLOCK), ``clocks.current.memory`` (MEM_CLOCK),
  ``utilization.gpu`` (GFX% / GFX_UTIL), ``utilization.memory`` (MEM% / MEM_UTIL), the ECC totals
  ``ecc.errors.corrected.volatile.total`` / ``ecc.errors.uncorrected.volatile.total`` (SINGLE_ECC / DOUBLE_ECC
  of ``-e``: counts since the driver loaded; the checks judge their growth), ``throttle_reasons_active`` (from the
  ``--violation`` columns when printed, else None: see :data:`VIOLATION_REASONS`; ``throttle_reasons_source``
  says whether they were read, since an empty list and None are the same cell in a series) and ``sampler``
  (``amd-smi``: what a check needs to know which readings this tool cannot give).

Result (both vendors): ``rows``, ``fields``, ``units``, ``gpu_indices`` and ``summary`` (per GPU index, min/max/
mean of every numeric field), as ``nvidia-smi-query-loop`` returns them. An amd-smi chunk that holds only rows
whose table header is in an earlier chunk (a poll cut inside one interval's table) gives no rows and a warning,
never a ParseError: the sampler is fine, one interval's rows are lost.
"""

from __future__ import annotations

import datetime
import re
from typing import Any

from clustereval.parsers import amd_smi, nvidia_smi_query_loop, register
from clustereval.parsers._common import result
from clustereval.parsers.errors import ParseError

TOOL = "gpu-telemetry-loop"
_AMD = re.compile(r"^\s*(?:TIMESTAMP\s+)?GPU\s+[A-Z_%]+", re.MULTILINE)
# nvidia-smi field -> the amd-smi monitor columns giving it (26.x names first, then the 24.x/25.x ones), as the
# amd-smi parser keys them (column name lower-cased, ``_<unit>`` appended when the value had one).
AMD_COLUMNS: dict[str, tuple[str, ...]] = {
    "temperature.gpu": ("gpu_t", "gpu_temp"),
    "temperature.memory": ("mem_t", "mem_temp"),
    "power.draw": ("power",),
    "power.limit": ("pwr_cap",),
    "clocks.current.sm": ("gfx_clk", "gfx_clock"),
    "clocks.current.memory": ("mem_clock",),
    "utilization.gpu": ("gfx%", "gfx_util"),
    "utilization.memory": ("mem%", "mem_util"),
    "ecc.errors.corrected.volatile.total": ("single_ecc",),
    "ecc.errors.uncorrected.volatile.total": ("double_ecc",),
}
UNITS = {"temperature.gpu": "°C", "temperature.memory": "°C", "power.draw": "W", "power.limit": "W",
         "clocks.current.sm": "MHz", "clocks.current.memory": "MHz", "utilization.gpu": "%",
         "utilization.memory": "%"}
# ``amd-smi monitor --violation`` (PVIOL TVIOL PHOT_TVIOL VR_TVIOL HBM_TVIOL, 26.x also TVIOL_ACTIVE GFX_CLKVIOL):
# the share of time each limit held the clocks down (amdsmi_get_violation_status: per_ppt_pwr, per_socket_thrm,
# per_prochot_thrm, per_vr_thrm, per_hbm_thrm). A share above 0 is read as the nvidia-smi reason of the same
# meaning: package power tracking is the power cap (normal under load); socket and HBM thermal limits are the
# firmware throttling for heat (the cooling margin is gone); PROCHOT is a board signal and the VR thermal limit a
# power-delivery fault (hardware slowdown).
VIOLATION_REASONS = {"pviol": "sw_power_cap", "tviol": "sw_thermal_slowdown", "hbm_tviol": "sw_thermal_slowdown",
                     "phot_tviol": "hw_slowdown", "vr_tviol": "hw_thermal_slowdown"}
FIELDS = ["timestamp", "index", "pci.bus_id", *AMD_COLUMNS, "throttle_reasons_active", "throttle_reasons_source",
          "timestamp_epoch_s", "sampler"]


def _pick(row: dict[str, Any], names: tuple[str, ...]) -> tuple[bool, Any]:
    """(column present, value) of the first of ``names`` in an amd-smi row (``name`` or ``name_<unit>``)."""
    for name in names:
        for key, value in row.items():
            if key == name or (key.startswith(name + "_") and key[len(name) + 1:].isalpha()):
                return True, value
    return False, None


def _stamp(epoch: Any) -> str | None:
    if not isinstance(epoch, int) or isinstance(epoch, bool):
        return None
    try:
        moment = datetime.datetime.fromtimestamp(epoch, datetime.UTC)
    except (OverflowError, OSError, ValueError):
        return None
    return moment.strftime("%Y/%m/%d %H:%M:%S.000")


def _reasons(row: dict[str, Any]) -> list[str] | None:
    seen = [(column, value) for column in VIOLATION_REASONS for present, value in [_pick(row, (column,))] if present]
    if not seen:
        return None
    active = [VIOLATION_REASONS[c] for c, v in seen if isinstance(v, int | float) and not isinstance(v, bool) and v > 0]
    return sorted(set(active))


def _amd_row(row: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"timestamp": _stamp(row.get("timestamp")), "index": row.get("gpu"), "pci.bus_id": None}
    for field, names in AMD_COLUMNS.items():
        out[field] = _pick(row, names)[1]
    out["throttle_reasons_active"] = _reasons(row)
    out["throttle_reasons_source"] = "amd-smi --violation" if out["throttle_reasons_active"] is not None else None
    out["timestamp_epoch_s"] = row.get("timestamp")
    out["sampler"] = "amd-smi"
    return out


def _parse_amd(text: str) -> dict[str, Any]:
    try:
        parsed = amd_smi.parse(text)
    except ParseError as exc:
        if amd_smi._BANNER in text or re.search(r"^\s*TIMESTAMP\s+GPU\s", text, re.MULTILINE):
            # watch mode, but no table with rows in this chunk: nothing lost but these lines
            return result(TOOL, "amd-smi-monitor", complete=False, warnings=[f"no amd-smi rows: {exc}"],
                          columns=None, fields=list(FIELDS), units=dict(UNITS), rows=[], gpu_indices=[], summary={},
                          vendor="amd")
        raise
    if parsed["format"] not in ("monitor", "monitor-watch"):
        raise ParseError(f"amd-smi printed {parsed['format']!r} output, not a monitor table")
    source = parsed.get("rows") if parsed["format"] == "monitor-watch" else parsed["gpus"]
    rows = [_amd_row(r) for r in source]
    warnings = list(parsed["warnings"])
    if rows and all(r["temperature.gpu"] is None and r["power.draw"] is None for r in rows):
        warnings.append("amd-smi printed no power or temperature reading (columns -p/-t not asked for, or N/A)")
    return result(TOOL, "amd-smi-monitor", complete=parsed["complete"], warnings=warnings, columns=None,
                  fields=list(FIELDS), units=dict(UNITS), rows=rows,
                  gpu_indices=sorted({r["index"] for r in rows if isinstance(r.get("index"), int)}),
                  summary=nvidia_smi_query_loop._summary(rows, list(AMD_COLUMNS)), vendor="amd",
                  samples=parsed.get("samples", 1))


@register("gpu-telemetry-loop")
def parse(text: str) -> dict[str, Any]:
    """nvidia-smi ``--query-gpu`` CSV (unchanged, see ``nvidia-smi-query-loop``) or ``amd-smi monitor`` rows under
    the nvidia-smi field names."""
    if text and (amd_smi._BANNER in text or _AMD.search(text)):
        return _parse_amd(text)
    return nvidia_smi_query_loop.parse(text)
