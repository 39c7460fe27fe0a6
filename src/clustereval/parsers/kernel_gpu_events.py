"""Parser for GPU driver events in a kernel log of either vendor: ``kernel-gpu-events``.

The telemetry and burn-in roles follow the node's kernel log while the GPUs are watched (``tail -F`` of
kern.log/messages and ``dmesg --follow-new``). On an NVIDIA node the events are Xids and SXids (``NVRM: Xid
(PCI:...)``), on an AMD Instinct node the amdgpu RAS reports and GPU resets (``amdgpu 0000:65:00.0: 2
uncorrectable hardware errors detected in umc block``). This parser reads both from the same text: everything
``kernel-xid`` returns, unchanged (its ``events`` keep their ``kind`` ``xid`` / ``sxid``), with the amdgpu events
of ``kernel-amd-ras`` added to ``events`` as ``kind: amdgpu`` and their own kind in ``ras`` (``ue``, ``ce``,
``de``, ``reset_begin``, ``reset_failed``, ``reset_succeeded``, ``reset_method``, ``firmware_failure``,
``ras_notice``), plus ``amdgpu_count``. ParseError as ``kernel-xid`` raises it (empty text, dmesg denied).
"""

from __future__ import annotations

from typing import Any

from clustereval.parsers import kernel_amd_ras, kernel_xid, register
from clustereval.parsers.errors import ParseError


@register("kernel-gpu-events")
def parse(text: str) -> dict[str, Any]:
    """Xids/SXids and amdgpu RAS events and resets from one kernel log text."""
    out = kernel_xid.parse(text)
    out["tool"] = "kernel-gpu-events"
    try:
        amd = kernel_amd_ras.parse(text)
    except ParseError:  # kernel-xid took the text: only an empty one fails here, and it failed there first
        amd = {"events": [], "warnings": []}
    amdgpu = [{**{k: v for k, v in e.items() if k != "kind"}, "kind": "amdgpu", "ras": e["kind"]}
              for e in amd["events"]]
    out["events"] = list(out.get("events") or []) + amdgpu
    out["warnings"] = list(out.get("warnings") or []) + list(amd.get("warnings") or [])
    out["amdgpu_count"] = len(amdgpu)
    return out
