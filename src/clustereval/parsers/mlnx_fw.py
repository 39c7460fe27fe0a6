"""Parser for NVIDIA/Mellanox firmware tools: ``flint -d DEV query`` (``flint -q``), ``mlxup`` and
``mlxfwmanager`` (MFT 4.x, mlxup 4.x, DOCA-OFED/MLNX_OFED bundled versions).

``flint``: ``Key:   value`` lines (Image type, FW Version, FW Release Date, Product Version, multi-line
Rom Info, Base GUID/MAC with counts, PSID, Security Attributes). ``mlxup``/``mlxfwmanager``: ``Device #N:``
blocks (Device Type, Part Number, Description, PSID, PCI Device Name, Base MAC or Port1/Port2 MAC), the
``Versions: Current Available`` table (FW, PXE, UEFI...; ``N/A`` becomes None) and ``Status``; the interactive
update log (``Updating FW ... Done``, ``Restart needed``) is summarised. The sub-format is detected.
"""

from __future__ import annotations

import re
from typing import Any

from clustereval.parsers import register
from clustereval.parsers._common import result
from clustereval.parsers.errors import ParseError

_KV = re.compile(r"^([A-Za-z][A-Za-z0-9 ./_-]*?):\s*(.*?)\s*$")
_DEVICE = re.compile(r"^Device #(\d+):\s*$")
_VERSION_ROW = re.compile(r"^([A-Z][A-Za-z0-9_]*)\s+(\S+)\s+(\S+)\s*$")
_UPDATE = re.compile(r"^Device #(\d+): Updating FW")
_FLINT_KEYS = {
    "Image type": "image_type", "FW Version": "firmware_version", "FW Release Date": "release_date",
    "Product Version": "product_version", "Rom Info": "rom_info", "Base GUID": "base_guid",
    "Base MAC": "base_mac", "Image VSD": "image_vsd", "Device VSD": "device_vsd", "PSID": "psid",
    "Security Attributes": "security_attributes", "Description": "description",
    "FW Version(Running)": "firmware_version_running",
}
_MLXUP_KEYS = {
    "Device Type": "device_type", "Part Number": "part_number", "Description": "description",
    "PSID": "psid", "PCI Device Name": "pci_device", "Base MAC": "base_mac",
    "Port1 MAC": "port1_mac", "Port2 MAC": "port2_mac", "Base GUID": "base_guid", "Status": "status",
}


def _na(value: str | None) -> str | None:
    return None if value is None or value.strip() in ("", "N/A", "NA") else value.strip()


def _parse_flint(lines: list[str]) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    warnings: list[str] = []
    rom: list[str] = []
    last = None
    for raw in lines:
        line = raw.strip()
        if not line:
            continue
        if raw[:1].isspace() and last == "rom_info":
            rom.append(line)
            continue
        match = _KV.match(line)
        if match and match.group(1) in _FLINT_KEYS:
            last = _FLINT_KEYS[match.group(1)]
            value = match.group(2)
            if last == "rom_info":
                rom.append(value)
            elif last in ("base_guid", "base_mac"):
                parts = value.split()
                fields[last] = parts[0] if parts else None
                if len(parts) > 1:
                    fields[f"{last}_count"] = int(parts[1]) if parts[1].isdigit() else None
            else:
                fields[last] = _na(" ".join(value.split()))
            continue
        warnings.append(f"unrecognised line: {line[:160]}")
        last = None
    roms = []
    for entry in rom:
        item = dict(pair.split("=", 1) for pair in entry.split() if "=" in pair)
        if item:
            roms.append(item)
    if "firmware_version" not in fields:
        raise ParseError("mlnx-fw: flint query output without a 'FW Version:' line")
    if fields.get("description") == "UID GuidsNumber":
        fields.pop("description")  # the column header of the GUID/MAC lines, not a description
    return result("mlnx-fw", "flint", complete="psid" in fields, warnings=warnings,
                  devices=[{**fields, "rom_info": roms}],
                  firmware_version=fields.get("firmware_version"), psid=fields.get("psid"))


def _parse_mlxup(lines: list[str]) -> dict[str, Any]:
    devices: list[dict[str, Any]] = []
    warnings: list[str] = []
    device: dict[str, Any] | None = None
    in_versions = False
    updated: set[int] = set()
    restart_needed = False
    failures: list[str] = []
    for raw in lines:
        line = raw.strip()
        if not line or set(line) <= {"-"}:
            continue
        match = _DEVICE.match(line)
        if match:
            device = {"index": int(match.group(1)), "versions": {}}
            devices.append(device)
            in_versions = False
            continue
        match = _UPDATE.match(line)
        if match:
            updated.add(int(match.group(1)))
            continue
        if line.startswith("Restart needed") or "reboot" in line.lower():
            restart_needed = True
            continue
        if line.startswith(("Querying Mellanox", "Found ", "Perform FW update", "Log File", "Done",
                            "FSMST_", "Writing ", "Updating FW", "Preparing", "Verifying")):
            if "FAIL" in line.upper():
                failures.append(line)
            continue
        if device is None:
            if "error" in line.lower() or "fail" in line.lower():
                failures.append(line)
            else:
                warnings.append(f"unrecognised line: {line[:160]}")
            continue
        if line.startswith("Versions:"):
            in_versions = True
            continue
        if in_versions:
            row = _VERSION_ROW.match(line)
            if row:
                current, available = _na(row.group(2)), _na(row.group(3))
                device["versions"][row.group(1)] = {"current": current, "available": available}
                continue
            in_versions = False
        match = _KV.match(line)
        if match and match.group(1) in _MLXUP_KEYS:
            device[_MLXUP_KEYS[match.group(1)]] = match.group(2)
            continue
        if "error" in line.lower() or "fail" in line.lower():
            failures.append(line)
            continue
        warnings.append(f"unrecognised line: {line[:160]}")
    if not devices:
        reason = failures[0] if failures else "no 'Device #N:' block"
        raise ParseError(f"mlnx-fw: no device found in mlxup/mlxfwmanager output: {reason}")
    for item in devices:
        fw = item["versions"].get("FW", {})
        item["firmware_version"] = fw.get("current")
        item["firmware_available"] = fw.get("available")
        status = str(item.get("status") or "")
        item["up_to_date"] = status.lower() == "up to date" if status else None
        item["updated"] = item["index"] in updated
    return result(
        "mlnx-fw", "mlxup",
        complete=all("status" in d for d in devices) and not failures,
        warnings=warnings,
        devices=devices,
        update_performed=bool(updated),
        restart_needed=restart_needed,
        failures=failures,
    )


@register("mlnx-fw")
def parse(text: str) -> dict[str, Any]:
    """Parse ``flint query`` or ``mlxup``/``mlxfwmanager`` output into per-device firmware facts."""
    if not text or not text.strip():
        raise ParseError("mlnx-fw: the output is empty")
    lines = text.split("\n")
    if any(_DEVICE.match(ln.strip()) for ln in lines) or "Querying Mellanox devices" in text:
        return _parse_mlxup(lines)
    if re.search(r"^\s*FW Version:", text, re.MULTILINE):
        return _parse_flint(lines)
    first = text.strip().split("\n")[0][:80]
    raise ParseError(f"mlnx-fw: neither flint query nor mlxup/mlxfwmanager output (it begins {first!r})")
