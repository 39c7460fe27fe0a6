"""Parser for NVIDIA Fabric Manager output (``nv-fabricmanager`` R535-R595).

Two sub-formats:

* ``log`` - ``/var/log/fabricmanager.log`` (``[Dec 19 2024 19:17:49] [ERROR] [tid 1374] ...``, with
  un-prefixed continuation lines): restarts ("Fabric Manager Log initializing at"), version, detected
  topology, the NVSwitch table (index, physical id, PCI bus id, enabled link mask, UUID), NVSwitch
  fatal/non-fatal errors per switch and port, NVLS multicast team setup/release counts, every
  ERROR/WARNING entry.
* ``startup`` - what ``systemctl start nvidia-fabricmanager`` / ``nv-fabricmanager -c ...`` prints when
  it refuses to start (e.g. ``Detected Pre-NVL5 system`` + ``NV_WARN_NOTHING_TO_DO``, also when the
  message is wrapped over several lines). Such output is reported with ``failed: true`` and
  ``complete: false`` (Fabric Manager never reached its running state).
"""

from __future__ import annotations

import re
from typing import Any

from clustereval.parsers import register
from clustereval.parsers._common import result
from clustereval.parsers.errors import ParseError

TOOL = "nvswitch-fabricmanager"

_ENTRY = re.compile(r"^\[([A-Z][a-z]{2} \d{1,2} \d{4} \d{2}:\d{2}:\d{2})\] \[([A-Z]+)\] \[tid (\d+)\]\s?(.*)$")
_SWITCH_ERROR = re.compile(r"detected NVSwitch (non-fatal|fatal) error (\d+) on fid (\d+) on NVSwitch pci bus id "
                           r"(\S+) physical id (\d+) port (\d+)", re.IGNORECASE)
_SWITCH_ROW = re.compile(r"Index:\s*(\d+)\s+Physical Id:\s*(\d+)\s+PCI Bus ID:\s*(\S+)\s+Enabled Link Mask:\s*"
                         r"(\S+)(?:\s+Arch Type:\s*(\d+))?(?:\s+UUID\s*:\s*(\S+))?")
_NV_CODE = re.compile(r"\[(NV_[A-Z_]+)\]")


def _parse_startup(text: str) -> dict[str, Any]:
    flat = re.sub(r"\s+", " ", text)
    codes = sorted(set(_NV_CODE.findall(flat)))
    exit_code = re.search(r"Exit code:\s*(-?\d+)", flat)
    reasons = []
    for pattern in (r"request to query NVSwitch device information from NVSwitch driver.*?\[NV_[A-Z_]+\]",
                    r"failed to [^.\n]*", r"Detected Pre-NVL5 system"):
        match = re.search(pattern, flat, re.IGNORECASE)
        if match:
            reasons.append(match.group(0).strip())
    failed = bool(codes or exit_code or re.search(r"\bfailed\b", flat))
    return result(TOOL, "startup", complete=False,
                  warnings=["Fabric Manager did not reach its running state"] if failed else [],
                  failed=failed, pre_nvl5="Pre-NVL5" in flat, error_codes=codes,
                  exit_code=int(exit_code.group(1)) if exit_code else None,
                  failure_reason=reasons[0] if reasons else None, details=reasons,
                  nvswitch_device_nodes_missing=bool(re.search(r"no /dev/nvidia-nvswitch\d", flat)))


def _parse_log(text: str) -> dict[str, Any]:
    entries: list[dict[str, Any]] = []
    warnings: list[str] = []
    restarts = 0
    for raw in text.split("\n"):
        line = raw.rstrip()
        if not line.strip():
            continue
        match = _ENTRY.match(line)
        if match:
            entries.append({"timestamp": match.group(1), "level": match.group(2), "tid": int(match.group(3)),
                            "message": match.group(4).strip()})
            continue
        if line.startswith("Fabric Manager Log initializing at:"):
            restarts += 1
            entries.append({"timestamp": line.split(":", 1)[1].strip(), "level": "START", "tid": None,
                            "message": line.strip()})
            continue
        if entries:
            entries[-1]["message"] += "\n" + line.strip()
        else:
            warnings.append(f"line before the first log entry: {line[:120]!r}")

    versions: list[str] = []
    topology = None
    switches: dict[str, dict[str, Any]] = {}
    switch_errors: list[dict[str, Any]] = []
    problems: list[dict[str, Any]] = []
    multicast = {"setup": 0, "released": 0}
    for entry in entries:
        message = entry["message"]
        version = re.search(r"Fabric Manager version (\S+) is running", message)
        if version and version.group(1) not in versions:
            versions.append(version.group(1))
        topo = re.search(r"detected system topology is based on (.+)", message)
        if topo:
            topology = topo.group(1).strip()
        for row in _SWITCH_ROW.finditer(message):
            switches[row.group(3)] = {"index": int(row.group(1)), "physical_id": int(row.group(2)),
                                      "bus_id": row.group(3), "enabled_link_mask": row.group(4),
                                      "arch_type": int(row.group(5)) if row.group(5) else None,
                                      "uuid": row.group(6)}
        err = _SWITCH_ERROR.search(message)
        if err:
            switch_errors.append({"timestamp": entry["timestamp"], "fatal": err.group(1).lower() == "fatal",
                                  "code": int(err.group(2)), "fid": int(err.group(3)), "bus_id": err.group(4),
                                  "physical_id": int(err.group(5)), "port": int(err.group(6))})
        if "successfully setup multicast team" in message:
            multicast["setup"] += 1
        elif "successfully released multicast team" in message:
            multicast["released"] += 1
        if entry["level"] in ("ERROR", "WARNING", "WARN", "FATAL"):
            problems.append({"timestamp": entry["timestamp"], "level": entry["level"],
                             "message": message.split("\n", 1)[0]})
    counts: dict[str, int] = {}
    by_switch: dict[str, int] = {}
    for err in switch_errors:
        counts[str(err["code"])] = counts.get(str(err["code"]), 0) + 1
        by_switch[err["bus_id"]] = by_switch.get(err["bus_id"], 0) + 1
    return result(TOOL, "log", complete=True, warnings=warnings, entries=len(entries), restarts=restarts,
                  versions=versions, version=versions[-1] if versions else None, topology=topology,
                  nvswitches=sorted(switches.values(), key=lambda s: s["index"]),
                  nvswitch_errors=switch_errors, nvswitch_error_counts_by_code=counts,
                  nvswitch_errors_by_bus_id=by_switch,
                  fatal_errors=sum(1 for e in switch_errors if e["fatal"]),
                  nonfatal_errors=sum(1 for e in switch_errors if not e["fatal"]),
                  problems=problems, multicast_teams=multicast, failed=False)


@register("nvswitch-fabricmanager")
def parse(text: str) -> dict[str, Any]:
    """Fabric Manager log or start-up failure output (see the module docstring)."""
    if not text or not text.strip():
        raise ParseError("nvswitch-fabricmanager: the output is empty")
    if re.search(r"^\[[A-Z][a-z]{2} \d{1,2} \d{4} \d{2}:\d{2}:\d{2}\] \[[A-Z]+\]", text, re.MULTILINE):
        return _parse_log(text)
    if re.search(r"fabricmanager|NV_WARN_|NV_ERR_|NVSwitch", text, re.IGNORECASE):
        return _parse_startup(text)
    raise ParseError("nvswitch-fabricmanager: neither a Fabric Manager log ('[Mon DD YYYY hh:mm:ss] [LEVEL]') "
                     "nor Fabric Manager start-up output")
