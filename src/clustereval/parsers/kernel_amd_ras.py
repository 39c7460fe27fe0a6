"""Parser for AMD GPU RAS (reliability) events in kernel logs (amdgpu driver, ROCm 4.x-6.x kernels).

Reads ``amdgpu 0000:08:00.0: {1}1 uncorrectable hardware errors detected in umc block``,
``{1}uncorrectable hardware error(ERREVENT_ATHUB_INTERRUPT) detected!``, poison/RAS notices and the GPU
reset sequence (``GPU reset begin!``, ``BACO reset``, ``GPU reset(2) failed ... ret = -62``,
``PSP ... failed``) from any kernel-log layout the kernel-xid parser understands (dmesg, dmesg -T,
--decode iso, journalctl, /dev/kmsg) plus bare ``hh:mm:ss`` prefixes. Timestamps are kept as printed.
"""

from __future__ import annotations

import re
from typing import Any

from clustereval.parsers import register
from clustereval.parsers._common import result
from clustereval.parsers.errors import ParseError
from clustereval.parsers.kernel_xid import _split_prefix

TOOL = "kernel-amd-ras"

# bare clock prefixes; mm:ss also, because a launcher-prefix cleaner may have eaten the hour ("16:")
_CLOCK = re.compile(r"^(\d{2}:\d{2}(?::\d{2})?(?:\.\d+)?)\s+(.*)$")
_AMDGPU = re.compile(r"\bamdgpu(?:\s+([0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]))?:\s*(.*)$")
_COUNT = re.compile(r"^(?:\{\d+\})?\s*(\d+)\s+(correctable|uncorrectable|deferred)\s+hardware errors? detected in "
                    r"(\w+) block", re.IGNORECASE)
_EVENT = re.compile(r"^(?:\{\d+\})?\s*(correctable|uncorrectable)\s+hardware error\s*\((\w+)\)\s*detected",
                    re.IGNORECASE)


def _classify(message: str) -> dict[str, Any] | None:
    count = _COUNT.match(message)
    if count:
        kind = {"correctable": "ce", "uncorrectable": "ue", "deferred": "de"}[count.group(2).lower()]
        return {"kind": kind, "count": int(count.group(1)), "block": count.group(3).lower()}
    event = _EVENT.match(message)
    if event:
        kind = "ue" if event.group(1).lower() == "uncorrectable" else "ce"
        return {"kind": kind, "count": 1, "block": None, "error_event": event.group(2)}
    lowered = message.lower()
    if "gpu reset begin" in lowered:
        return {"kind": "reset_begin"}
    if re.search(r"gpu reset(\(\d+\))? failed", lowered):
        ret = re.search(r"ret\s*=\s*(-?\d+)", message)
        return {"kind": "reset_failed", "ret": int(ret.group(1)) if ret else None}
    if re.search(r"gpu reset(\(\d+\))? succeeded", lowered):
        return {"kind": "reset_succeeded"}
    if "baco reset" in lowered or "mode1 reset" in lowered or "mode2 reset" in lowered:
        return {"kind": "reset_method", "method": message.strip()}
    if "psp" in lowered and "failed" in lowered:
        return {"kind": "firmware_failure"}
    if "poison" in lowered or "ras" in lowered.split() or "bad page" in lowered:
        return {"kind": "ras_notice"}
    return None


@register("kernel-amd-ras")
def parse(text: str) -> dict[str, Any]:
    """AMD GPU RAS events (correctable/uncorrectable counts per block, resets) from kernel logs."""
    if not text or not text.strip():
        raise ParseError("kernel-amd-ras: the output is empty (a kernel log is never empty: was dmesg "
                         "denied by kernel.dmesg_restrict?)")
    events: list[dict[str, Any]] = []
    warnings: list[str] = []
    elided = 0
    for raw in text.split("\n"):
        line = raw.strip()
        if not line:
            continue
        if line in ("...", "[...]"):
            elided += 1
            continue
        message, meta = _split_prefix(line)
        timestamp = meta["timestamp"]
        if timestamp is None:
            clock = _CLOCK.match(message)
            if clock:
                timestamp, message = clock.group(1), clock.group(2)
        amd = _AMDGPU.search(message)
        if not amd:
            continue
        # newer kernels repeat the driver name: "amdgpu 0000:c1:00.0: amdgpu: 3 correctable ..."
        body = re.sub(r"^amdgpu:\s*", "", amd.group(2).strip())
        info = _classify(body)
        if info is None:
            if re.search(r"error|fail", body, re.IGNORECASE) and len(warnings) < 30:
                warnings.append(f"amdgpu error line not classified: {line[:160]!r}")
            continue
        events.append({"timestamp": timestamp, "pci": amd.group(1).lower() if amd.group(1) else None,
                       **info, "message": body, "raw": line})
    if elided:
        warnings.append(f"{elided} elided line(s) ('...') in the log: events may be missing")
    totals = {"ce": 0, "ue": 0, "de": 0}
    per_device: dict[str, dict[str, Any]] = {}
    for event in events:
        if event["kind"] in totals:
            totals[event["kind"]] += event.get("count") or 0
            dev = per_device.setdefault(event["pci"] or "unknown", {"ce": 0, "ue": 0, "de": 0, "blocks": {}})
            dev[event["kind"]] += event.get("count") or 0
            if event.get("block"):
                block = dev["blocks"].setdefault(event["block"], {"ce": 0, "ue": 0, "de": 0})
                block[event["kind"]] += event["count"]
    resets_failed = sum(1 for e in events if e["kind"] == "reset_failed")
    return result(TOOL, "text", complete=True, warnings=warnings, events=events,
                  correctable_errors=totals["ce"], uncorrectable_errors=totals["ue"],
                  deferred_errors=totals["de"], by_device=per_device,
                  resets_begun=sum(1 for e in events if e["kind"] == "reset_begin"),
                  resets_failed=resets_failed, elided_lines=elided)
