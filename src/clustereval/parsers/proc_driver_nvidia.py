"""Parser for the NVIDIA kernel driver's ``/proc/driver/nvidia`` files.

Understood (sub-format detected from the content, reported as ``format``):

* ``version`` — ``/proc/driver/nvidia/version``: the ``NVRM version:`` line of the proprietary module
  (``NVIDIA UNIX x86_64 Kernel Module  535.86.10  Wed Jul 26 23:20:03 UTC 2023``) and of the open kernel
  module (``NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  (builder@host)  <date>``),
  plus the ``GCC version:`` line. Gives ``driver_version``, ``kernel_module`` (``"open"`` or
  ``"proprietary"``), ``arch`` and ``gcc_version``.
* ``params`` — ``/proc/driver/nvidia/params``: ``Name: value`` per line (R450 to R580). Gives ``params``
  (integers converted, quoted strings unquoted) and the settings the audit cares about pulled out:
  ``rm_profiling_admin_only`` (bool: only root may use GPU performance counters), ``nvlink_disabled``.
* ``information`` — ``/proc/driver/nvidia/gpus/<bus id>/information``: ``Model:``, ``GPU UUID:``,
  ``Video BIOS:``, ``Bus Location:``... Gives ``fields`` plus ``model``, ``uuid``, ``bus_location``,
  ``vbios_version``.
* anything else made of ``Name: value`` lines — ``generic`` with ``fields``.

Empty input raises ParseError: every one of these files has content whenever the driver is loaded.
"""

from __future__ import annotations

import re
from typing import Any

from clustereval.parsers import register
from clustereval.parsers._common import result
from clustereval.parsers.errors import ParseError

TOOL = "proc-driver-nvidia"

_KEY_VALUE = re.compile(r"^\s*([A-Za-z][A-Za-z0-9 _./()-]*?)\s*:\s*(.*?)\s*$")
_NVRM = re.compile(
    r"NVRM version:\s*(?P<desc>.*?Kernel Module(?: for (?P<arch_open>\S+))?)\s+"
    r"(?P<version>\d+\.\d+(?:\.\d+)?)\s*(?P<rest>.*)$")
_ARCH_PROPRIETARY = re.compile(r"NVIDIA UNIX (?P<arch>\S+) Kernel Module")
_GCC = re.compile(r"GCC version:\s*(?:gcc version\s+)?(?P<gcc>.*?)\s*$")


def _value(raw: str) -> Any:
    """A params value as the driver prints it: an integer, or a (possibly empty) quoted string."""
    if len(raw) >= 2 and raw[0] == raw[-1] == '"':
        return raw[1:-1]
    if re.fullmatch(r"-?\d+", raw):
        return int(raw)
    if re.fullmatch(r"0x[0-9a-fA-F]+", raw):
        return int(raw, 16)
    return raw


def _key_values(lines: list[str], warnings: list[str]) -> dict[str, str]:
    fields: dict[str, str] = {}
    for line in lines:
        if not line.strip():
            continue
        match = _KEY_VALUE.match(line)
        if not match:
            warnings.append(f"line not understood (expected 'Name: value'): {line.strip()[:120]!r}")
            continue
        key, value = match.group(1), match.group(2)
        if key in fields and fields[key] != value:
            warnings.append(f"{key!r} printed twice with different values; the first is kept")
            continue
        fields.setdefault(key, value)
    return fields


def _version(text: str, warnings: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {"driver_version": None, "kernel_module": None, "arch": None,
                           "nvrm_version_line": None, "gcc_version": None}
    for line in text.split("\n"):
        stripped = line.strip()
        if stripped.startswith("NVRM version:"):
            out["nvrm_version_line"] = stripped[len("NVRM version:"):].strip()
            match = _NVRM.search(stripped)
            if not match:
                warnings.append(f"NVRM version line without a driver version: {stripped[:120]!r}")
                continue
            out["driver_version"] = match.group("version")
            desc = match.group("desc")
            out["kernel_module"] = "open" if "Open Kernel Module" in desc else "proprietary"
            arch = match.group("arch_open")
            if arch is None:
                prop = _ARCH_PROPRIETARY.search(desc)
                arch = prop.group("arch") if prop else None
            out["arch"] = arch
        elif stripped.startswith("GCC version:"):
            gcc = _GCC.match(stripped)
            out["gcc_version"] = gcc.group("gcc") if gcc else None
        elif stripped:
            warnings.append(f"line not understood in the driver version file: {stripped[:120]!r}")
    return out


@register(TOOL)
def parse(text: str) -> dict[str, Any]:
    """Parse one ``/proc/driver/nvidia`` file (version, params or gpus/*/information)."""
    if not text.strip():
        raise ParseError("the /proc/driver/nvidia output is empty (is the nvidia kernel module loaded?)")
    warnings: list[str] = []
    if "NVRM version:" in text:
        fields = _version(text, warnings)
        if fields["driver_version"] is None:
            raise ParseError("found 'NVRM version:' but no driver version number on that line")
        return result(TOOL, "version", complete=fields["gcc_version"] is not None, warnings=warnings,
                      **fields)

    lines = text.split("\n")
    raw = _key_values(lines, warnings)
    if not raw:
        raise ParseError("no 'Name: value' lines found: this is not a /proc/driver/nvidia file")

    if "Model" in raw and ("GPU UUID" in raw or "Bus Location" in raw):
        return result(
            TOOL, "information", complete="Bus Location" in raw and "GPU UUID" in raw, warnings=warnings,
            fields=raw, model=raw.get("Model"), uuid=raw.get("GPU UUID"),
            bus_location=raw.get("Bus Location"), vbios_version=raw.get("Video BIOS"),
            device_minor=_value(raw["Device Minor"]) if "Device Minor" in raw else None)

    params = {key: _value(value) for key, value in raw.items()}
    if any(key in params for key in ("RmProfilingAdminOnly", "NvLinkDisable", "ModifyDeviceFiles")):
        def flag(name: str) -> bool | None:
            value = params.get(name)
            return bool(value) if isinstance(value, int) else None

        # The driver prints params in a fixed order ending with string-valued entries; a file that stops
        # before any quoted value was most likely cut off.
        complete = any(isinstance(v, str) and raw[k].startswith('"') for k, v in params.items())
        if not complete:
            warnings.append("no string-valued parameter seen (RegistryDwords, ...): the file may be cut")
        return result(TOOL, "params", complete=complete, warnings=warnings, params=params,
                      rm_profiling_admin_only=flag("RmProfilingAdminOnly"),
                      nvlink_disabled=flag("NvLinkDisable"))
    return result(TOOL, "generic", complete=True, warnings=warnings, fields=raw)
