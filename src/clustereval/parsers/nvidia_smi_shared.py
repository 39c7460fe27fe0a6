"""Helpers shared by the nvidia-smi parsers (no tool of its own is registered here).

``nvidia-smi -q`` (text) and ``nvidia-smi -q -x`` (XML) print the same facts under different names. Both
parsers first build the same kind of tree (:class:`Node`: a value plus named children), then
:func:`gpu_record` turns one GPU's tree into the one record shape both tools return, looking each field up
under the XML tag path or the text label path. Keeping that mapping in one table is what guarantees that a
check can read ``memory_total_mib`` from either tool.

Understood: driver branches R418 (DTD v10) through R595 (DTD v13), including the rename of
"Clocks Throttle Reasons" to "Clocks Event Reasons" (R535), the split of power readings into
average/instantaneous (R550+), the pre-Ampere ECC layout (single/double bit per memory unit) and the newer
SRAM/DRAM layout with parity/SEC-DED split (R550+).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from clustereval.parsers._common import to_float, to_int

# Values nvidia-smi prints where it has no number; all mean "not available here".
NOT_AVAILABLE = {"n/a", "na", "[n/a]", "not supported", "[not supported]", "not available", "unknown",
                 "[unknown error]", "not found", "", "none", "insufficient permissions",
                 "[insufficient permissions]", "requested functionality has been deprecated"}


@dataclass
class Node:
    """One entry of nvidia-smi's nested output: an optional value and named children (first one wins)."""

    value: str | None = None
    children: dict[str, Node] = field(default_factory=dict)

    def child(self, name: str) -> Node | None:
        return self.children.get(name)

    def find(self, path: str) -> Node | None:
        """Follow a ``/``-separated path of child names."""
        node: Node | None = self
        for part in path.split("/"):
            if node is None:
                return None
            node = node.children.get(part)
        return node

    def get(self, *paths: str) -> str | None:
        """The value at the first of ``paths`` that exists and holds a value."""
        for path in paths:
            node = self.find(path)
            if node is not None and node.value is not None:
                return node.value
        return None

    def leaves(self) -> list[tuple[str, str | None]]:
        """Every (name, value) below this node, depth first, nested children flattened."""
        out: list[tuple[str, str | None]] = []
        for name, node in self.children.items():
            out.append((name, node.value))
            out.extend(node.leaves())
        return out


def slug(label: str) -> str:
    """``"FB Memory Usage"`` → ``"fb_memory_usage"``: the key a text label is stored under."""
    return re.sub(r"[^a-z0-9]+", "_", label.strip().lower()).strip("_")


def is_na(value: str | None) -> bool:
    return value is None or value.strip().lower() in NOT_AVAILABLE


def text_or_none(value: str | None) -> str | None:
    """The printed string, or None where nvidia-smi says N/A."""
    return None if is_na(value) else value.strip()  # type: ignore[union-attr]


def number(value: str | None) -> float | None:
    """``"700.00 W"``, ``"143771 MiB"``, ``"33 C"``, ``"16x"``, ``"0 %"`` → the number; N/A → None."""
    if is_na(value):
        return None
    match = re.match(r"\s*([-+]?\d+(?:\.\d+)?)", value or "")
    return to_float(match.group(1)) if match else None


def integer(value: str | None) -> int | None:
    if is_na(value):
        return None
    token = (value or "").strip().split()[0] if (value or "").strip() else ""
    if token.lower().startswith("0x"):
        return to_int(token)
    num = number(value)
    return int(num) if num is not None and num.is_integer() else None


def counter(value: str | None) -> int | bool | None:
    """An ECC/SRAM counter as printed: a count, or a Yes/No flag (``sram_threshold_exceeded``)."""
    num = integer(value)
    return num if num is not None else enabled(value)


def enabled(value: str | None) -> bool | None:
    """Enabled/Disabled, Yes/No, Active/Not Active → bool; anything else → None."""
    if value is None:
        return None
    low = value.strip().lower()
    if low in {"enabled", "yes", "active", "true", "on"}:
        return True
    if low in {"disabled", "no", "not active", "false", "off"}:
        return False
    return None


# Canonical throttle / clocks-event reason names, keyed by every spelling the tools use.
_REASON_ALIASES = {
    "idle": "gpu_idle",
    "gpu_idle": "gpu_idle",
    "applications_clocks_setting": "applications_clocks_setting",
    "sw_power_cap": "sw_power_cap",
    "hw_slowdown": "hw_slowdown",
    "hw_thermal_slowdown": "hw_thermal_slowdown",
    "hw_power_brake_slowdown": "hw_power_brake_slowdown",
    "sync_boost": "sync_boost",
    "sw_thermal_slowdown": "sw_thermal_slowdown",
    "display_clock_setting": "display_clocks_setting",
    "display_clocks_setting": "display_clocks_setting",
    # the event-reason *counters* use shorter names for the same reasons
    "sw_power_capping": "sw_power_cap",
    "sw_therm_slowdown": "sw_thermal_slowdown",
    "hw_therm_slowdown": "hw_thermal_slowdown",
    "hw_power_brake": "hw_power_brake_slowdown",
    "hw_power_braking": "hw_power_brake_slowdown",
}


# NVML's nvmlClocksEventReason* bits, as ``--query-gpu=clocks_event_reasons.active`` prints them (hex mask).
REASON_BITS = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clocks_setting",
}


def decode_reasons(mask: object) -> list[str] | None:
    """Canonical reason names set in a clocks-event bitmask (unknown bits as ``bit_0x...``); None if no mask."""
    if not isinstance(mask, int) or isinstance(mask, bool) or not 0 <= mask < 2**64:
        return None
    names = [name for bit, name in REASON_BITS.items() if mask & bit]
    unknown = mask & ~sum(REASON_BITS)
    bit = 1
    while unknown:
        if unknown & bit:
            names.append(f"bit_{bit:#x}")
            unknown &= ~bit
        bit <<= 1
    return sorted(names)


def reason_name(raw: str) -> str:
    """Canonical reason key for an XML tag or text label (``clocks_event_reason_sw_power_cap``, ``Idle``)."""
    key = slug(raw)
    for prefix in ("clocks_event_reasons_counters_", "clocks_event_reason_", "clocks_throttle_reason_",
                   "clocks_reason_"):
        if key.startswith(prefix):
            key = key[len(prefix):]
            break
    return _REASON_ALIASES.get(key, key)


# Field lookup table: record key → (XML paths, text paths). Paths are tried in order (newest layout first).
_TEXT_FIELDS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "name": (("product_name",), ("product_name",)),
    "brand": (("product_brand",), ("product_brand",)),
    "architecture": (("product_architecture",), ("product_architecture",)),
    "uuid": (("uuid",), ("gpu_uuid",)),
    "serial": (("serial",), ("serial_number",)),
    "vbios_version": (("vbios_version",), ("vbios_version",)),
    "board_part_number": (("board_part_number",), ("board_part_number",)),
    "performance_state": (("performance_state",), ("performance_state",)),
    "compute_mode": (("compute_mode",), ("compute_mode",)),
    "mig_mode_current": (("mig_mode/current_mig",), ("mig_mode/current",)),
    "mig_mode_pending": (("mig_mode/pending_mig",), ("mig_mode/pending",)),
    "ecc_mode_current": (("ecc_mode/current_ecc",), ("ecc_mode/current",)),
    "ecc_mode_pending": (("ecc_mode/pending_ecc",), ("ecc_mode/pending",)),
    "fabric_state": (("fabric/state",), ("fabric/state",)),
    "fabric_status": (("fabric/status",), ("fabric/status",)),
    "gsp_firmware_version": (("gsp_firmware_version",), ("gsp_firmware_version",)),
    "virtualization_mode": (("gpu_virtualization_mode/virtualization_mode",),
                            ("gpu_virtualization_mode/virtualization_mode",)),
}

_NUMBER_FIELDS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "memory_total_mib": (("fb_memory_usage/total",), ("fb_memory_usage/total",)),
    "memory_used_mib": (("fb_memory_usage/used",), ("fb_memory_usage/used",)),
    "memory_free_mib": (("fb_memory_usage/free",), ("fb_memory_usage/free",)),
    "memory_reserved_mib": (("fb_memory_usage/reserved",), ("fb_memory_usage/reserved",)),
    "temperature_c": (("temperature/gpu_temp",), ("temperature/gpu_current_temp",)),
    "memory_temperature_c": (("temperature/memory_temp",), ("temperature/memory_current_temp",)),
    "temperature_tlimit_c": (("temperature/gpu_temp_tlimit",), ("temperature/gpu_t_limit_temp",)),
    "temperature_slowdown_c": (("temperature/gpu_temp_slow_threshold",),
                               ("temperature/gpu_slowdown_temp",)),
    "temperature_shutdown_c": (("temperature/gpu_temp_max_threshold",),
                               ("temperature/gpu_shutdown_temp",)),
    "power_draw_w": (("gpu_power_readings/power_draw", "power_readings/power_draw",
                      "gpu_power_readings/average_power_draw", "gpu_power_readings/instant_power_draw"),
                     ("gpu_power_readings/power_draw", "power_readings/power_draw",
                      "gpu_power_readings/average_power_draw",
                      "gpu_power_readings/instantaneous_power_draw")),
    "power_draw_average_w": (("gpu_power_readings/average_power_draw",),
                             ("gpu_power_readings/average_power_draw",)),
    "power_draw_instant_w": (("gpu_power_readings/instant_power_draw",),
                             ("gpu_power_readings/instantaneous_power_draw",)),
    "power_limit_w": (("gpu_power_readings/current_power_limit", "power_readings/enforced_power_limit",
                       "power_readings/power_limit"),
                      ("gpu_power_readings/current_power_limit", "power_readings/enforced_power_limit",
                       "power_readings/power_limit")),
    "power_limit_default_w": (("gpu_power_readings/default_power_limit",
                               "power_readings/default_power_limit"),
                              ("gpu_power_readings/default_power_limit",
                               "power_readings/default_power_limit")),
    "power_limit_max_w": (("gpu_power_readings/max_power_limit", "power_readings/max_power_limit"),
                          ("gpu_power_readings/max_power_limit", "power_readings/max_power_limit")),
    "clocks_graphics_mhz": (("clocks/graphics_clock",), ("clocks/graphics",)),
    "clocks_sm_mhz": (("clocks/sm_clock",), ("clocks/sm",)),
    "clocks_mem_mhz": (("clocks/mem_clock",), ("clocks/memory",)),
    "clocks_max_graphics_mhz": (("max_clocks/graphics_clock",), ("max_clocks/graphics",)),
    "clocks_max_sm_mhz": (("max_clocks/sm_clock",), ("max_clocks/sm",)),
    "clocks_max_mem_mhz": (("max_clocks/mem_clock",), ("max_clocks/memory",)),
    "utilization_gpu_pct": (("utilization/gpu_util",), ("utilization/gpu",)),
    "utilization_memory_pct": (("utilization/memory_util",), ("utilization/memory",)),
    "fan_speed_pct": (("fan_speed",), ("fan_speed",)),
}

_INT_FIELDS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "minor_number": (("minor_number",), ("minor_number",)),
    # The GPU's slot on an HGX baseboard (1..8); a gap in a node's module ids is a GPU the driver lost.
    "module_id": (("module_id", "gpu_module_id", "platformInfo/module_id", "platform_info/module_id"),
                  ("module_id", "platform_info/module_id")),
    "pcie_link_gen_current": (("pci/pci_gpu_link_info/pcie_gen/current_link_gen",),
                              ("pci/gpu_link_info/pcie_generation/current",)),
    "pcie_link_gen_max": (("pci/pci_gpu_link_info/pcie_gen/max_link_gen",),
                          ("pci/gpu_link_info/pcie_generation/max",)),
    "pcie_link_width_current": (("pci/pci_gpu_link_info/link_widths/current_link_width",),
                                ("pci/gpu_link_info/link_width/current",)),
    "pcie_link_width_max": (("pci/pci_gpu_link_info/link_widths/max_link_width",),
                            ("pci/gpu_link_info/link_width/max",)),
    "pcie_replays": (("pci/replay_counter",), ("pci/replays_since_reset",)),
    "pcie_replay_rollovers": (("pci/replay_rollover_counter",), ("pci/replay_number_rollovers",)),
}


# Text labels whose slug differs from the XML tag for the same ECC counter.
_ECC_ALIASES = {"sram_uncorrectable_sec_ded": "sram_uncorrectable_secded", "texture_shared": "texture_shm"}


def _sum(values: list[int | None]) -> int | None:
    present = [v for v in values if v is not None]
    return sum(present) if present else None


def ecc_errors(node: Node | None) -> dict[str, Any] | None:
    """Volatile/aggregate correctable/uncorrectable totals from either ECC layout, plus the raw counters.

    Newer drivers print SRAM and DRAM counters (uncorrectable SRAM split into parity and SEC-DED since
    R550); older ones and Volta print single-bit/double-bit counters per memory unit with a ``total``.
    """
    if node is None or not node.children:
        return None
    out: dict[str, Any] = {}
    for scope in ("volatile", "aggregate"):
        part = node.child(scope)
        if part is None:
            out[f"{scope}_correctable"] = None
            out[f"{scope}_uncorrectable"] = None
            continue
        counters = {_ECC_ALIASES.get(name, name): counter(value)
                    for name, value in part.leaves() if value is not None}
        single, double = part.child("single_bit"), part.child("double_bit")
        if single is not None or double is not None:
            correctable = integer(single.get("total")) if single else None
            uncorrectable = integer(double.get("total")) if double else None
            counters = {f"{unit}_{_ECC_ALIASES.get(name, name)}": counter(value)
                        for unit, sub in (("single_bit", single), ("double_bit", double)) if sub
                        for name, value in sub.leaves()}
        else:
            correctable = _sum([counters.get("sram_correctable"), counters.get("dram_correctable")])
            uncorrectable = _sum([
                counters.get("sram_uncorrectable"), counters.get("sram_uncorrectable_parity"),
                counters.get("sram_uncorrectable_secded"),
                counters.get("dram_uncorrectable")])
        out[f"{scope}_correctable"] = correctable
        out[f"{scope}_uncorrectable"] = uncorrectable
        out[scope] = counters
    return out


def gpu_record(tree: Node, index: int, dialect: str, bus_id: str | None) -> dict[str, Any]:
    """One GPU's normalised record from its tree; ``dialect`` is ``"xml"`` or ``"text"``."""
    pick = 0 if dialect == "xml" else 1
    rec: dict[str, Any] = {"index": index, "bus_id": bus_id}
    for key, paths in _TEXT_FIELDS.items():
        rec[key] = text_or_none(tree.get(*paths[pick]))
    if rec["bus_id"] is None:
        rec["bus_id"] = text_or_none(tree.get("pci/pci_bus_id" if pick == 0 else "pci/bus_id"))
    for key, paths in _NUMBER_FIELDS.items():
        rec[key] = number(tree.get(*paths[pick]))
    for key, paths in _INT_FIELDS.items():
        rec[key] = integer(tree.get(*paths[pick]))
    for key in _NUMBER_FIELDS:
        # watts keep their decimals; MiB, MHz, °C and % are whole numbers as nvidia-smi prints them
        if not key.endswith("_w") and rec[key] is not None and float(rec[key]).is_integer():
            rec[key] = int(rec[key])
    rec["persistence_mode"] = enabled(tree.get("persistence_mode"))
    rec["ecc_errors"] = ecc_errors(tree.child("ecc_errors"))
    rec["retired_pages"] = _retired_pages(tree.child("retired_pages"), dialect)
    rec["remapped_rows"] = _remapped_rows(tree.child("remapped_rows"), dialect)
    reasons_node, source = None, None
    for name in ("clocks_event_reasons", "clocks_throttle_reasons"):
        if tree.child(name) is not None:
            reasons_node, source = tree.child(name), name
            break
    rec["throttle_reasons"] = ({reason_name(n): enabled(v) for n, v in reasons_node.leaves() if v is not None}
                               if reasons_node is not None and reasons_node.children else None)
    rec["throttle_reasons_active"] = sorted(k for k, v in (rec["throttle_reasons"] or {}).items() if v)
    rec["throttle_reasons_source"] = source
    counters = tree.child("clocks_event_reasons_counters")
    rec["throttle_reason_counters_us"] = (
        {reason_name(n): integer(v) for n, v in counters.leaves() if v is not None}
        if counters is not None and counters.children else None)
    samples = tree.child("power_samples")
    rec["power_samples"] = ({"duration_s": number(samples.get("duration")),
                             "count": integer(samples.get("number_of_samples")),
                             "max_w": number(samples.get("max")), "min_w": number(samples.get("min")),
                             "avg_w": number(samples.get("avg"))}
                            if samples is not None and samples.children else None)
    rec["reset_required"] = enabled(tree.get("gpu_reset_status/reset_required"))
    rec["drain_and_reset_recommended"] = enabled(tree.get("gpu_reset_status/drain_and_reset_recommended"))
    return rec


def _retired_pages(node: Node | None, dialect: str) -> dict[str, Any] | None:
    if node is None or (not node.children and is_na(node.value)):
        return None
    if dialect == "xml":
        single = integer(node.get("multiple_single_bit_retirement/retired_count"))
        double = integer(node.get("double_bit_retirement/retired_count"))
    else:
        single = integer(node.get("single_bit_ecc"))
        double = integer(node.get("double_bit_ecc"))
    return {"single_bit_ecc": single, "double_bit_ecc": double,
            "pending_blacklist": enabled(node.get("pending_blacklist", "pending_page_blacklist", "pending")),
            "pending_retirement": enabled(node.get("pending_retirement"))}


def _remapped_rows(node: Node | None, dialect: str) -> dict[str, Any] | None:
    if node is None or not node.children:
        return None  # "N/A": the GPU has no row remapper (pre-Ampere) or it is not reported
    if dialect == "xml":
        names = {"correctable": "remapped_row_corr", "uncorrectable": "remapped_row_unc",
                 "pending": "remapped_row_pending", "failure": "remapped_row_failure"}
    else:
        names = {"correctable": "correctable_error", "uncorrectable": "uncorrectable_error",
                 "pending": "pending", "failure": "remapping_failure_occurred"}
    return {"correctable": integer(node.get(names["correctable"])),
            "uncorrectable": integer(node.get(names["uncorrectable"])),
            "pending": enabled(node.get(names["pending"])),
            "failure": enabled(node.get(names["failure"]))}
