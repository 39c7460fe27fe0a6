"""Parser for the ``facts_host`` probe (``checks/probes/facts.yml``): CPU and memory of a node.

The probe prints ``cpu_model: …``, ``cpus: N``, ``sockets: N`` and ``memory_kib: N`` (one awk over
``/proc/cpuinfo`` and ``/proc/meminfo``). Result: ``cpu_model`` (None when the kernel names none, as on
many Arm servers), ``cpus``, ``sockets`` (0 where cpuinfo has no ``physical id``, e.g. in some VMs) and
``memory_gib`` (MemTotal in GiB, one decimal). A key missing or a last line without its newline (the output
cut short) gives ``complete: False``.
"""

from __future__ import annotations

from typing import Any

from clustereval.parsers import register
from clustereval.parsers._common import result, to_int
from clustereval.parsers.errors import ParseError

TOOL = "probe-facts-host"
KEYS = ("cpu_model", "cpus", "sockets", "memory_kib")


@register(TOOL)
def parse(text: str) -> dict[str, Any]:
    values: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() in KEYS:
            values[key.strip()] = value.strip()
    missing = [key for key in KEYS if key not in values]
    if len(missing) == len(KEYS):
        raise ParseError(f"{TOOL}: none of {', '.join(KEYS)} in the output")
    cpus, sockets, memory = (to_int(values.get(k) or "") for k in ("cpus", "sockets", "memory_kib"))
    warnings = [f"{key} missing (the output stops early)" for key in missing]
    if not text.endswith("\n"):
        warnings.append("the last line has no newline (the output is cut short)")
    return result(TOOL, "key-value", complete=not warnings, warnings=warnings,
                  cpu_model=values.get("cpu_model") or None, cpus=cpus, sockets=sockets,
                  memory_gib=round(memory / 1024 / 1024, 1) if memory else None)
