"""Parser for ``nvidia-smi nvlink`` (``-s``/``--status``, ``-c``/``--capabilities``, ``-e`` error counters).

Understands the per-GPU layout printed by drivers R450 to R580: a ``GPU <i>: <name> (UUID: <uuid>)`` line,
then one indented line per link (tab, tab+space or spaces):

* status: ``Link 3: 25 GB/s`` (speed per link in GB/s, as printed: 25, 26.562, 14.062 ...) or
  ``Link 3: <inactive>``;
* capabilities: ``Link 0, P2P is supported: true``;
* error/throughput counters: ``Link 0: Replay Errors: 0`` / ``Link 0: Data Tx: 12 KiB``;
* ``NVML: Unable to retrieve NVLink information as all links are inactive`` under a GPU line.

A GPU without NVLink makes ``nvidia-smi nvlink -s`` print nothing at all, so empty output is a valid result
with no GPUs (``format: "empty"``). Lines such as ``...`` (elided by a person) are listed in ``warnings``.

Result: ``gpus``: list of ``{index, name, uuid, links: [{link, speed_gbps, active, speed_raw}],
active_links, inactive_links (link numbers), total_speed_gbps, all_links_inactive, nvml_error,
capabilities {link: {capability: bool}}, counters {link: {counter: int}}}``. A GPU whose links NVML
could not read at all (the "all links are inactive" message) makes ``complete`` False: its per-link
speeds are unknown, only the fact that none is up.
"""

from __future__ import annotations

import re
from typing import Any

from clustereval.parsers import register
from clustereval.parsers._common import result, to_float, to_int
from clustereval.parsers.errors import ParseError

TOOL = "nvidia-smi-nvlink"

_GPU = re.compile(r"^GPU\s+(?P<index>\d+):\s*(?P<name>.*?)\s*(?:\(UUID:\s*(?P<uuid>[^)]*)\))?\s*$")
_STATUS = re.compile(
    r"^Link\s+(?P<link>\d+):\s*(?P<value>(?P<num>[\d.]+)\s*(?P<unit>[GMK]B/s)|<inactive>)\s*$", re.IGNORECASE)
_CAPABILITY = re.compile(r"^Link\s+(?P<link>\d+),\s*(?P<cap>.+?):\s*(?P<value>\S+)\s*$")
_COUNTER = re.compile(r"^Link\s+(?P<link>\d+):\s*(?P<name>[A-Za-z][^:]*?):\s*(?P<value>.+?)\s*$")
_NVML = re.compile(r"^NVML:\s*(?P<msg>.*)$")
_TO_GBPS = {"GB/S": 1.0, "MB/S": 1e-3, "KB/S": 1e-6}


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.strip().lower()).strip("_")


def _new_gpu(match: re.Match[str]) -> dict[str, Any]:
    return {"index": int(match.group("index")), "name": match.group("name") or None,
            "uuid": (match.group("uuid") or "").strip() or None, "links": [], "capabilities": {},
            "counters": {}, "nvml_error": None, "all_links_inactive": False}


def _finish(gpu: dict[str, Any]) -> dict[str, Any]:
    links = gpu["links"]
    gpu["active_links"] = [ln["link"] for ln in links if ln["active"]]
    gpu["inactive_links"] = [ln["link"] for ln in links if not ln["active"]]
    speeds = [ln["speed_gbps"] for ln in links if ln["speed_gbps"] is not None]
    gpu["total_speed_gbps"] = round(sum(speeds), 3) if speeds else None
    if links and not gpu["active_links"]:
        gpu["all_links_inactive"] = True
    return gpu


@register(TOOL)
def parse(text: str) -> dict[str, Any]:
    """Parse ``nvidia-smi nvlink -s`` (and ``-c`` / ``-e``) output into per-GPU, per-link facts."""
    warnings: list[str] = []
    if not text.strip():
        return result(TOOL, "empty", complete=True, warnings=[], gpus=[], link_speed_gbps=None,
                      inactive_link_count=0, gpus_all_links_inactive=[])
    gpus: list[dict[str, Any]] = []
    current: dict[str, Any] | None = None
    complete = True
    kinds: set[str] = set()
    for line in text.split("\n"):
        stripped = line.strip()
        if not stripped:
            continue
        gpu_match = _GPU.match(stripped)
        if gpu_match:
            current = _new_gpu(gpu_match)
            gpus.append(current)
            continue
        if current is None:
            warnings.append(f"line before any 'GPU <n>:' header ignored: {stripped[:120]!r}")
            continue
        status = _STATUS.match(stripped)
        if status:
            kinds.add("status")
            link = int(status.group("link"))
            if status.group("num") is None:
                current["links"].append({"link": link, "speed_gbps": None, "active": False,
                                         "speed_raw": status.group("value")})
            else:
                speed = to_float(status.group("num"))
                factor = _TO_GBPS[status.group("unit").upper()]
                current["links"].append({
                    "link": link, "speed_gbps": round(speed * factor, 6) if speed is not None else None,
                    "active": True, "speed_raw": status.group("value")})
            continue
        capability = _CAPABILITY.match(stripped)
        if capability:
            kinds.add("capabilities")
            value = capability.group("value").lower()
            caps = current["capabilities"].setdefault(capability.group("link"), {})
            caps[_slug(capability.group("cap"))] = (
                True if value == "true" else False if value == "false" else capability.group("value"))
            continue
        counter = _COUNTER.match(stripped)
        if counter:
            kinds.add("counters")
            raw = counter.group("value")
            number = to_int(raw.split()[0]) if raw.split() else None
            current["counters"].setdefault(counter.group("link"), {})[_slug(counter.group("name"))] = (
                number if number is not None else raw)
            continue
        nvml = _NVML.match(stripped)
        if nvml:
            current["nvml_error"] = nvml.group("msg")
            if "inactive" in nvml.group("msg").lower():
                current["all_links_inactive"] = True
            complete = False
            warnings.append(f"GPU {current['index']}: NVML: {nvml.group('msg')}")
            continue
        warnings.append(f"line not understood under GPU {current['index']}: {stripped[:120]!r}")
    if not gpus:
        raise ParseError("no 'GPU <n>: <name> (UUID: ...)' line found: this is not nvidia-smi nvlink output")
    for gpu in gpus:
        _finish(gpu)
    indexes = [g["index"] for g in gpus]
    repeated = sorted({i for i in indexes if indexes.count(i) > 1})
    if repeated:
        warnings.append(f"GPU(s) {repeated} printed more than once (concatenated or repeated captures?)")
    if indexes != list(range(indexes[0], indexes[0] + len(indexes))) and len(indexes) > 1:
        warnings.append(f"GPU indexes are not consecutive ({indexes}): some GPUs are missing from the output")
    speeds = {ln["speed_gbps"] for g in gpus for ln in g["links"] if ln["speed_gbps"] is not None}
    fmt = "status" if "status" in kinds or not kinds else sorted(kinds)[0]
    return result(TOOL, fmt, complete=complete, warnings=warnings, gpus=gpus,
                  link_speed_gbps=speeds.pop() if len(speeds) == 1 else None,
                  inactive_link_count=sum(len(g["inactive_links"]) for g in gpus),
                  gpus_all_links_inactive=[g["index"] for g in gpus if g["all_links_inactive"]])
