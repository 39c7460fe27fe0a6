#!/usr/bin/python3
# ruff: noqa: UP031  (printf formats mirror the C format strings of the real tool, field by field)
"""Simulated ``nvidia-smi`` for one simulated node (standalone: stdlib only, no clustereval import).

Reads the node state ``$SIMNODE_ROOT/node.json`` (default ``/sim/node.json``) written by ``clustereval sim
up`` and prints what the real tool prints for that driver branch:

* default table: the 89-column layout with the timestamp line (drivers >= 535 as shipped on HGX, e.g.
  550.90.07);
* ``-q``: the ``==============NVSMI LOG==============`` text report (535/550 field set);
* ``-q -x``: XML, ``nvsmi_device_v12.dtd`` with 4-space indentation for drivers < 560, the tab-indented
  ``nvsmi_device_v13.dtd`` form for newer ones;
* ``--query-gpu=FIELDS --format=csv[,noheader][,nounits]``, ``-L``, ``-i INDEX`` selection.

Node faults from the profile: ``nvidia_smi: truncated`` cuts ``-q -x`` mid-document, ``garbage`` prints
binary noise, ``missing`` behaves like an absent binary (exit 127).
"""

import json
import os
import random
import sys
import time

XML_TRUNCATE_FRACTION = 0.45


def load_node():
    root = os.environ.get("SIMNODE_ROOT") or "/sim"
    with open(os.path.join(root, "node.json")) as fh:
        return json.load(fh)


def driver_major(node):
    try:
        return int(node["driver_version"].split(".")[0])
    except (ValueError, IndexError):
        return 550


def onoff(flag):
    return "Enabled" if flag else "Disabled"


# ----------------------------------------------------------------------------------------- one GPU, as a tree
# Each entry: (xml tag, -q label, value or list of entries). A None label means XML only, a None tag -q only.


def gpu_tree(gpu, node):
    drv = node["driver_version"]
    bus = gpu["pci_bus_id"]
    mem_total, mem_reserved, mem_used = (
        gpu["memory_total_mib"],
        gpu["memory_reserved_mib"],
        gpu["memory_used_mib"],
    )
    mem_free = mem_total - mem_reserved - mem_used
    plim = "{:.2f} W".format(gpu["power_limit_w"])
    na = "N/A"
    ecc_block = [
        ("sram_correctable", "SRAM Correctable", "0"),
        ("sram_uncorrectable_parity", "SRAM Uncorrectable Parity", "0"),
        ("sram_uncorrectable_secded", "SRAM Uncorrectable SEC-DED", "0"),
        ("dram_correctable", "DRAM Correctable", "0"),
        ("dram_uncorrectable", "DRAM Uncorrectable", str(gpu["ecc_uncorrected_volatile"])),
    ]
    sm, mem_clk = "%d MHz" % gpu["sm_clock_mhz"], "%d MHz" % gpu["mem_clock_mhz"]
    max_sm, max_mem = "%d MHz" % gpu["max_sm_clock_mhz"], "%d MHz" % gpu["max_mem_clock_mhz"]
    return [
        ("product_name", "Product Name", gpu["name"]),
        ("product_brand", "Product Brand", gpu["brand"]),
        ("product_architecture", "Product Architecture", gpu["architecture"]),
        ("display_mode", "Display Mode", "Enabled"),
        ("display_active", "Display Active", "Disabled"),
        ("persistence_mode", "Persistence Mode", onoff(gpu["persistence_mode"])),
        ("addressing_mode", "Addressing Mode", "None"),
        (
            "mig_mode",
            "MIG Mode",
            [("current_mig", "Current", "Disabled"), ("pending_mig", "Pending", "Disabled")],
        ),
        ("mig_devices", None, "None"),
        ("accounting_mode", "Accounting Mode", "Disabled"),
        ("accounting_mode_buffer_size", "Accounting Mode Buffer Size", "4000"),
        ("driver_model", "Driver Model", [("current_dm", "Current", na), ("pending_dm", "Pending", na)]),
        ("serial", "Serial Number", gpu["serial"]),
        ("uuid", "GPU UUID", gpu["uuid"]),
        ("minor_number", "Minor Number", str(gpu["minor_number"])),
        ("vbios_version", "VBIOS Version", gpu["vbios_version"]),
        ("multigpu_board", "MultiGPU Board", "No"),
        ("board_id", "Board ID", gpu["board_id"]),
        ("board_part_number", "Board Part Number", gpu["board_part_number"]),
        ("gpu_part_number", "GPU Part Number", gpu["gpu_part_number"]),
        ("gpu_fru_part_number", "FRU Part Number", na),
        ("gpu_module_id", "Module ID", str(gpu["module_id"])),
        (
            "inforom_version",
            "Inforom Version",
            [
                ("img_version", "Image Version", gpu["inforom_image"]),
                ("oem_object", "OEM Object", "2.1"),
                ("ecc_object", "ECC Object", "7.16"),
                ("pwr_object", "Power Management Object", na),
            ],
        ),
        (
            "inforom_bbx_flush",
            "Inforom BBX Object Flush",
            [("latest_timestamp", "Latest Timestamp", na), ("latest_duration", "Latest Duration", na)],
        ),
        (
            "gpu_operation_mode",
            "GPU Operation Mode",
            [("current_gom", "Current", na), ("pending_gom", "Pending", na)],
        ),
        ("gsp_firmware_version", "GSP Firmware Version", drv),
        (
            "gpu_virtualization_mode",
            "GPU Virtualization Mode",
            [
                ("virtualization_mode", "Virtualization Mode", "None"),
                ("host_vgpu_mode", "Host VGPU Mode", na),
            ],
        ),
        (
            "gpu_reset_status",
            "GPU Reset Status",
            [
                ("reset_required", "Reset Required", "No"),
                ("drain_and_reset_recommended", "Drain and Reset Recommended", "No"),
            ],
        ),
        ("ibmnpu", "IBMNPU", [("relaxed_ordering_mode", "Relaxed Ordering Mode", na)]),
        (
            "pci",
            "PCI",
            [
                ("pci_bus", "Bus", "0x" + gpu["pci_bus"]),
                ("pci_device", "Device", "0x00"),
                ("pci_domain", "Domain", "0x0000"),
                ("pci_device_id", "Device Id", gpu["pci_device_id"]),
                ("pci_bus_id", "Bus Id", bus),
                ("pci_sub_system_id", "Sub System Id", gpu["pci_sub_system_id"]),
                (
                    "pci_gpu_link_info",
                    "GPU Link Info",
                    [
                        (
                            "pcie_gen",
                            "PCIe Generation",
                            [
                                ("max_link_gen", "Max", str(gpu["pcie_gen"])),
                                ("current_link_gen", "Current", str(gpu["pcie_gen"])),
                                ("device_current_link_gen", "Device Current", str(gpu["pcie_gen"])),
                                ("max_device_link_gen", "Device Max", str(gpu["pcie_gen"])),
                                ("max_host_link_gen", "Host Max", str(gpu["pcie_gen"])),
                            ],
                        ),
                        (
                            "link_widths",
                            "Link Width",
                            [
                                ("max_link_width", "Max", "%dx" % gpu["pcie_width"]),
                                ("current_link_width", "Current", "%dx" % gpu["pcie_width"]),
                            ],
                        ),
                    ],
                ),
                (
                    "pci_bridge_chip",
                    "Bridge Chip",
                    [("bridge_chip_type", "Type", na), ("bridge_chip_fw", "Firmware", na)],
                ),
                ("replay_counter", "Replays Since Reset", "0"),
                ("replay_rollover_counter", "Replay Number Rollovers", "0"),
                ("tx_util", "Tx Throughput", "0 KB/s"),
                ("rx_util", "Rx Throughput", "0 KB/s"),
                ("atomic_caps_inbound", "Atomic Caps Inbound", na),
                ("atomic_caps_outbound", "Atomic Caps Outbound", na),
            ],
        ),
        ("fan_speed", "Fan Speed", na),
        ("performance_state", "Performance State", gpu["performance_state"]),
        (
            "clocks_event_reasons",
            "Clocks Event Reasons",
            [
                ("clocks_event_reason_gpu_idle", "Idle", "Not Active"),
                (
                    "clocks_event_reason_applications_clocks_setting",
                    "Applications Clocks Setting",
                    "Not Active",
                ),
                ("clocks_event_reason_sw_power_cap", "SW Power Cap", "Not Active"),
                ("clocks_event_reason_hw_slowdown", "HW Slowdown", "Not Active"),
                ("clocks_event_reason_hw_thermal_slowdown", "    HW Thermal Slowdown", "Not Active"),
                ("clocks_event_reason_hw_power_brake_slowdown", "    HW Power Brake Slowdown", "Not Active"),
                ("clocks_event_reason_sync_boost", "Sync Boost", "Not Active"),
                ("clocks_event_reason_sw_thermal_slowdown", "SW Thermal Slowdown", "Not Active"),
                ("clocks_event_reason_display_clocks_setting", "Display Clock Setting", "Not Active"),
            ],
        ),
        ("sparse_operation_mode", "Sparse Operation Mode", "Disabled"),
        (
            "fb_memory_usage",
            "FB Memory Usage",
            [
                ("total", "Total", "%d MiB" % mem_total),
                ("reserved", "Reserved", "%d MiB" % mem_reserved),
                ("used", "Used", "%d MiB" % mem_used),
                ("free", "Free", "%d MiB" % mem_free),
            ],
        ),
        (
            "bar1_memory_usage",
            "BAR1 Memory Usage",
            [
                ("total", "Total", "%d MiB" % gpu["bar1_mib"]),
                ("used", "Used", "1 MiB"),
                ("free", "Free", "%d MiB" % (gpu["bar1_mib"] - 1)),
            ],
        ),
        (
            "cc_protected_memory_usage",
            "Conf Compute Protected Memory Usage",
            [("total", "Total", "0 MiB"), ("used", "Used", "0 MiB"), ("free", "Free", "0 MiB")],
        ),
        ("compute_mode", "Compute Mode", "Default"),
        (
            "utilization",
            "Utilization",
            [
                ("gpu_util", "Gpu", "%d %%" % gpu["utilization_pct"]),
                ("memory_util", "Memory", "0 %"),
                ("encoder_util", "Encoder", "0 %"),
                ("decoder_util", "Decoder", "0 %"),
                ("jpeg_util", "JPEG", "0 %"),
                ("ofa_util", "OFA", "0 %"),
            ],
        ),
        (
            "encoder_stats",
            "Encoder Stats",
            [
                ("session_count", "Active Sessions", "0"),
                ("average_fps", "Average FPS", "0"),
                ("average_latency", "Average Latency", "0"),
            ],
        ),
        (
            "fbc_stats",
            "FBC Stats",
            [
                ("session_count", "Active Sessions", "0"),
                ("average_fps", "Average FPS", "0"),
                ("average_latency", "Average Latency", "0"),
            ],
        ),
        (
            "ecc_mode",
            "ECC Mode",
            [("current_ecc", "Current", "Enabled"), ("pending_ecc", "Pending", "Enabled")],
        ),
        (
            "ecc_errors",
            "ECC Errors",
            [
                ("volatile", "Volatile", ecc_block),
                (
                    "aggregate",
                    "Aggregate",
                    [*ecc_block, ("sram_threshold_exceeded", "SRAM Threshold Exceeded", "No")],
                ),
                (
                    "aggregate_uncorrectable_sram_sources",
                    "Aggregate Uncorrectable SRAM Sources",
                    [
                        ("sram_l2", "SRAM L2", "0"),
                        ("sram_sm", "SRAM SM", "0"),
                        ("sram_microcontroller", "SRAM Microcontroller", "0"),
                        ("sram_pcie", "SRAM PCIE", "0"),
                        ("sram_other", "SRAM Other", "0"),
                    ],
                ),
            ],
        ),
        (
            "retired_pages",
            "Retired Pages",
            [
                (
                    "multiple_single_bit_retirement",
                    None,
                    [("retired_count", None, na), ("retired_pagelist", None, na)],
                ),
                (None, "Single Bit ECC", na),
                (
                    "double_bit_retirement",
                    None,
                    [("retired_count", None, na), ("retired_pagelist", None, na)],
                ),
                (None, "Double Bit ECC", na),
                ("pending_blacklist", "Pending Page Blacklist", na),
                ("pending_retirement", None, na),
            ],
        ),
        (
            "remapped_rows",
            "Remapped Rows",
            [
                ("remapped_row_corr", "Correctable Error", "0"),
                ("remapped_row_unc", "Uncorrectable Error", "0"),
                ("remapped_row_pending", "Pending", "No"),
                ("remapped_row_failure", "Remapping Failure Occurred", "No"),
                (
                    "row_remapper_histogram",
                    "Bank Remap Availability Histogram",
                    [
                        ("row_remapper_histogram_max", "Max", "2560 bank(s)"),
                        ("row_remapper_histogram_high", "High", "0 bank(s)"),
                        ("row_remapper_histogram_partial", "Partial", "0 bank(s)"),
                        ("row_remapper_histogram_low", "Low", "0 bank(s)"),
                        ("row_remapper_histogram_none", "None", "0 bank(s)"),
                    ],
                ),
            ],
        ),
        (
            "temperature",
            "Temperature",
            [
                ("gpu_temp", "GPU Current Temp", "%d C" % gpu["temperature_c"]),
                ("gpu_temp_tlimit", "GPU T.Limit Temp", "%d C" % (87 - gpu["temperature_c"])),
                ("gpu_temp_max_tlimit_threshold", "GPU Shutdown T.Limit Temp", "-8 C"),
                ("gpu_temp_slow_tlimit_threshold", "GPU Slowdown T.Limit Temp", "-2 C"),
                ("gpu_temp_max_gpu_tlimit_threshold", "GPU Max Operating T.Limit Temp", "0 C"),
                ("gpu_target_temperature", "GPU Target Temperature", na),
                ("memory_temp", "Memory Current Temp", "%d C" % gpu["memory_temperature_c"]),
                ("gpu_temp_max_mem_tlimit_threshold", "Memory Max Operating T.Limit Temp", "0 C"),
            ],
        ),
        (
            "supported_gpu_target_temp",
            None,
            [("gpu_target_temp_min", None, na), ("gpu_target_temp_max", None, na)],
        ),
        (
            "gpu_power_readings",
            "GPU Power Readings",
            [
                ("power_state", None, gpu["performance_state"]),
                ("power_draw", "Power Draw", "{:.2f} W".format(gpu["power_draw_w"])),
                ("current_power_limit", "Current Power Limit", plim),
                ("requested_power_limit", "Requested Power Limit", plim),
                ("default_power_limit", "Default Power Limit", "{:.2f} W".format(gpu["power_limit_max_w"])),
                ("min_power_limit", "Min Power Limit", "{:.2f} W".format(gpu["power_limit_min_w"])),
                ("max_power_limit", "Max Power Limit", "{:.2f} W".format(gpu["power_limit_max_w"])),
            ],
        ),
        (
            "module_power_readings",
            "Module Power Readings",
            [
                ("power_state", None, gpu["performance_state"]),
                ("power_draw", "Power Draw", na),
                ("current_power_limit", "Current Power Limit", na),
                ("requested_power_limit", "Requested Power Limit", na),
                ("default_power_limit", "Default Power Limit", na),
                ("min_power_limit", "Min Power Limit", na),
                ("max_power_limit", "Max Power Limit", na),
            ],
        ),
        (
            "clocks",
            "Clocks",
            [
                ("graphics_clock", "Graphics", sm),
                ("sm_clock", "SM", sm),
                ("mem_clock", "Memory", mem_clk),
                ("video_clock", "Video", "%d MHz" % min(gpu["max_video_clock_mhz"], gpu["sm_clock_mhz"])),
            ],
        ),
        (
            "applications_clocks",
            "Applications Clocks",
            [("graphics_clock", "Graphics", max_sm), ("mem_clock", "Memory", max_mem)],
        ),
        (
            "default_applications_clocks",
            "Default Applications Clocks",
            [("graphics_clock", "Graphics", max_sm), ("mem_clock", "Memory", max_mem)],
        ),
        ("deferred_clocks", "Deferred Clocks", [("mem_clock", "Memory", na)]),
        (
            "max_clocks",
            "Max Clocks",
            [
                ("graphics_clock", "Graphics", max_sm),
                ("sm_clock", "SM", max_sm),
                ("mem_clock", "Memory", max_mem),
                ("video_clock", "Video", "%d MHz" % gpu["max_video_clock_mhz"]),
            ],
        ),
        ("max_customer_boost_clocks", "Max Customer Boost Clocks", [("graphics_clock", "Graphics", max_sm)]),
        (
            "clock_policy",
            "Clock Policy",
            [("auto_boost", "Auto Boost", na), ("auto_boost_default", "Auto Boost Default", na)],
        ),
        ("voltage", "Voltage", [("graphics_volt", "Graphics", "670.000 mV")]),
        ("fabric", "Fabric", [("state", "State", "Completed"), ("status", "Status", "Success")]),
        (
            "supported_clocks",
            None,
            [
                (
                    "supported_mem_clock",
                    None,
                    [
                        ("value", None, max_mem),
                        *[
                            ("supported_graphics_clock", None, "%d MHz" % mhz)
                            for mhz in range(gpu["max_sm_clock_mhz"], 344, -15)
                        ],
                    ],
                )
            ],
        ),
        ("processes", "Processes", None),
        ("accounted_processes", None, None),
    ]


# --------------------------------------------------------------------------------------------- renderers


def render_q(node, gpus):
    """``nvidia-smi -q``: the NVSMI LOG text report, labels padded so every colon sits in column 43."""
    lines = ["", "==============NVSMI LOG==============", ""]

    def kv(indent, label, value):
        lines.append(("    " * indent + label).ljust(42) + ": " + value)

    kv(0, "Timestamp", time.asctime())
    kv(0, "Driver Version", node["driver_version"])
    kv(0, "CUDA Version", node["cuda_version"])
    lines.append("")
    kv(0, "Attached GPUs", str(len(gpus)))

    def walk(entries, indent):
        for _tag, label, value in entries:
            if label is None:
                continue
            if value is None:
                kv(indent, label, "None")
            elif isinstance(value, list):
                lines.append("    " * indent + label)
                walk(value, indent + 1)
            else:
                kv(indent, label, value)

    for k, gpu in enumerate(gpus):
        if k:
            lines.append("")
        lines.append("GPU " + gpu["pci_bus_id"])
        walk(gpu_tree(gpu, node), 1)
    return "\n".join(lines) + "\n\n"


def xml_escape(text):
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def render_xml(node, gpus):
    """``nvidia-smi -q -x``: DTD v12 layout (4 spaces) before driver 560, v13 layout (tabs) after."""
    v13 = driver_major(node) >= 560
    unit = "\t" if v13 else "    "
    out = [
        '<?xml version="1.0" ?>' if v13 else '<?xml version="1.0" encoding="UTF-8"?>',
        '<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v%d.dtd">' % (13 if v13 else 12),
        "<nvidia_smi_log>",
    ]
    out.append(unit + f"<timestamp>{time.asctime()}</timestamp>")
    out.append(unit + "<driver_version>{}</driver_version>".format(node["driver_version"]))
    out.append(unit + "<cuda_version>{}</cuda_version>".format(node["cuda_version"]))
    out.append(unit + "<attached_gpus>%d</attached_gpus>" % len(gpus))

    def walk(entries, depth):
        pad = unit * depth
        for tag, _label, value in entries:
            if tag is None:
                continue
            if value is None:
                if v13:
                    out.append(pad + f"<{tag}>")
                    out.append(pad + f"</{tag}>")
                else:
                    out.append(pad + f"<{tag} />")
            elif isinstance(value, list):
                out.append(pad + f"<{tag}>")
                walk(value, depth + 1)
                out.append(pad + f"</{tag}>")
            elif tag == "mig_devices":
                out.append(pad + "<mig_devices>")
                out.append(pad + unit + value)
                out.append(pad + "</mig_devices>")
            else:
                out.append(pad + f"<{tag}>{xml_escape(value)}</{tag}>")

    for gpu in gpus:
        out.append(unit + '<gpu id="{}">'.format(gpu["pci_bus_id"]))
        walk(gpu_tree(gpu, node), 2)
        out.append(unit + "</gpu>")
    if v13:
        out.append("")
    out.append("</nvidia_smi_log>")
    return "\n".join(out) + "\n"


def render_table(node, gpus):
    """Default ``nvidia-smi`` output: the 89-column table with the timestamp line (drivers >= 535)."""
    rule = "+" + "-" * 41 + "+" + "-" * 24 + "+" + "-" * 22 + "+"
    lines = [
        time.asctime(),
        "+" + "-" * 89 + "+",
        "| NVIDIA-SMI {} Driver Version: {} CUDA Version: {} |".format(
            node["driver_version"].ljust(22), node["driver_version"].ljust(14), node["cuda_version"].ljust(8)
        ),
        "|" + "-" * 41 + "+" + "-" * 24 + "+" + "-" * 22 + "+",
        "| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |",
        "| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |",
        "|                                         |                        |               MIG M. |",
        "|" + "=" * 41 + "+" + "=" * 24 + "+" + "=" * 22 + "|",
    ]
    for gpu in gpus:
        persistence = "On" if gpu["persistence_mode"] else "Off"
        left = " %3d  " % gpu["index"]
        right = f"{persistence.rjust(3)}  "
        room = 41 - len(left) - len(right)
        name = gpu["name"] if len(gpu["name"]) <= room else gpu["name"][: room - 3] + "..."
        cell1 = left + name.ljust(room) + right
        lines.append(
            "|{}|{}|{}|".format(
                cell1,
                gpu["pci_bus_id"].rjust(19) + " Off ",
                str(gpu["ecc_uncorrected_volatile"]).rjust(21) + " ",
            )
        )
        power = (
            ("%dW" % round(gpu["power_draw_w"])).rjust(16)
            + " / "
            + ("%dW" % gpu["power_limit_w"]).rjust(5)
            + " "
        )
        lines.append(
            "| N/A  %3dC    %s%s|%s|%s|"
            % (
                gpu["temperature_c"],
                gpu["performance_state"].ljust(2),
                power,
                ("%dMiB" % gpu["memory_used_mib"]).rjust(11)
                + " / "
                + ("%dMiB" % gpu["memory_total_mib"]).rjust(9)
                + " ",
                ("%d%%" % gpu["utilization_pct"]).rjust(8) + "Default".rjust(13) + " ",
            )
        )
        lines.append("|" + " " * 41 + "|" + " " * 24 + "|" + "Disabled".rjust(21) + " |")
        lines.append(rule)
    lines += [
        "",
        "+" + "-" * 89 + "+",
        "| Processes:" + " " * 78 + "|",
        "|  GPU   GI   CI        PID   Type   Process name                              GPU Memory |",
        "|        ID   ID                                                               Usage      |",
        "|" + "=" * 89 + "|",
        "|  No running processes found" + " " * 61 + "|",
        "+" + "-" * 89 + "+",
    ]
    return "\n".join(lines) + "\n"


def render_list(gpus):
    """``nvidia-smi -L``."""
    return "".join("GPU %d: %s (UUID: %s)\n" % (g["index"], g["name"], g["uuid"]) for g in gpus)


# --------------------------------------------------------------------------------------------- --query-gpu

# canonical field name -> (header unit, value function); aliases map to canonical names first.
ALIASES = {
    "gpu_name": "name",
    "gpu_bus_id": "pci.bus_id",
    "gpu_serial": "serial",
    "gpu_uuid": "uuid",
    "clocks.sm": "clocks.current.sm",
    "clocks.gr": "clocks.current.graphics",
    "clocks.mem": "clocks.current.memory",
    "clocks.memory": "clocks.current.memory",
    "clocks.graphics": "clocks.current.graphics",
    "clocks.video": "clocks.current.video",
    "clocks.max.gr": "clocks.max.graphics",
    "clocks.max.mem": "clocks.max.memory",
    "clocks_throttle_reasons.active": "clocks_event_reasons.active",
    "pstate": "pstate",
    "enforced.power.limit": "enforced.power.limit",
    "ecc.errors.uncorrected.volatile.total": "ecc.errors.uncorrected.volatile.total",
}


def query_fields(node, gpu_count):
    return {
        "timestamp": ("", lambda g: time.strftime("%Y/%m/%d %H:%M:%S.") + "%03d" % (time.time() % 1 * 1000)),
        "driver_version": ("", lambda g: node["driver_version"]),
        "count": ("", lambda g: str(gpu_count)),
        "index": ("", lambda g: str(g["index"])),
        "name": ("", lambda g: g["name"]),
        "serial": ("", lambda g: g["serial"]),
        "uuid": ("", lambda g: g["uuid"]),
        "pci.bus_id": ("", lambda g: g["pci_bus_id"]),
        "pci.device_id": ("", lambda g: g["pci_device_id"]),
        "pci.sub_device_id": ("", lambda g: g["pci_sub_system_id"]),
        "pcie.link.gen.current": ("", lambda g: str(g["pcie_gen"])),
        "pcie.link.gen.max": ("", lambda g: str(g["pcie_gen"])),
        "pcie.link.width.current": ("", lambda g: str(g["pcie_width"])),
        "pcie.link.width.max": ("", lambda g: str(g["pcie_width"])),
        "vbios_version": ("", lambda g: g["vbios_version"]),
        "persistence_mode": ("", lambda g: onoff(g["persistence_mode"])),
        "compute_mode": ("", lambda g: "Default"),
        "compute_cap": ("", lambda g: g["compute_cap"]),
        "pstate": ("", lambda g: g["performance_state"]),
        "fan.speed": (" [%]", lambda g: "[N/A]"),
        "memory.total": (" [MiB]", lambda g: "%d MiB" % g["memory_total_mib"]),
        "memory.reserved": (" [MiB]", lambda g: "%d MiB" % g["memory_reserved_mib"]),
        "memory.used": (" [MiB]", lambda g: "%d MiB" % g["memory_used_mib"]),
        "memory.free": (
            " [MiB]",
            lambda g: "%d MiB" % (g["memory_total_mib"] - g["memory_reserved_mib"] - g["memory_used_mib"]),
        ),
        "utilization.gpu": (" [%]", lambda g: "%d %%" % g["utilization_pct"]),
        "utilization.memory": (" [%]", lambda g: "0 %"),
        "temperature.gpu": ("", lambda g: str(g["temperature_c"])),
        "temperature.memory": ("", lambda g: str(g["memory_temperature_c"])),
        "power.draw": (" [W]", lambda g: "{:.2f} W".format(g["power_draw_w"])),
        "power.limit": (" [W]", lambda g: "{:.2f} W".format(g["power_limit_w"])),
        "enforced.power.limit": (" [W]", lambda g: "{:.2f} W".format(g["power_limit_w"])),
        "power.default_limit": (" [W]", lambda g: "{:.2f} W".format(g["power_limit_max_w"])),
        "power.min_limit": (" [W]", lambda g: "{:.2f} W".format(g["power_limit_min_w"])),
        "power.max_limit": (" [W]", lambda g: "{:.2f} W".format(g["power_limit_max_w"])),
        "clocks.current.graphics": (" [MHz]", lambda g: "%d MHz" % g["sm_clock_mhz"]),
        "clocks.current.sm": (" [MHz]", lambda g: "%d MHz" % g["sm_clock_mhz"]),
        "clocks.current.memory": (" [MHz]", lambda g: "%d MHz" % g["mem_clock_mhz"]),
        "clocks.current.video": (
            " [MHz]",
            lambda g: "%d MHz" % min(g["sm_clock_mhz"], g["max_video_clock_mhz"]),
        ),
        "clocks.max.graphics": (" [MHz]", lambda g: "%d MHz" % g["max_sm_clock_mhz"]),
        "clocks.max.sm": (" [MHz]", lambda g: "%d MHz" % g["max_sm_clock_mhz"]),
        "clocks.max.memory": (" [MHz]", lambda g: "%d MHz" % g["max_mem_clock_mhz"]),
        "clocks_event_reasons.active": ("", lambda g: "0x0000000000000000"),
        "ecc.mode.current": ("", lambda g: "Enabled"),
        "ecc.errors.corrected.volatile.total": ("", lambda g: "0"),
        "ecc.errors.uncorrected.volatile.total": ("", lambda g: str(g["ecc_uncorrected_volatile"])),
        "ecc.errors.corrected.aggregate.total": ("", lambda g: "0"),
        "ecc.errors.uncorrected.aggregate.total": ("", lambda g: str(g["ecc_uncorrected_volatile"])),
        "retired_pages.pending": ("", lambda g: "[N/A]"),
        "remapped_rows.pending": ("", lambda g: "No"),
        "remapped_rows.failure": ("", lambda g: "No"),
        "mig.mode.current": ("", lambda g: "Disabled"),
        "display_mode": ("", lambda g: "Enabled"),
        "inforom.img": ("", lambda g: g["inforom_image"]),
    }


def strip_unit(value):
    for suffix in (" MiB", " W", " MHz", " %"):
        if value.endswith(suffix):
            return value[: -len(suffix)]
    return value


def render_query(node, gpus, fields_arg, format_arg):
    """``--query-gpu=...``: headers are the canonical field names plus their unit, as nvidia-smi prints."""
    options = [o.strip() for o in format_arg.split(",")]
    if options[0] != "csv" or any(o not in ("csv", "noheader", "nounits") for o in options):
        sys.stderr.write(f'"{format_arg}" is not a valid format option.\n')
        return None, 2
    table = query_fields(node, len(gpus))
    requested = [f.strip() for f in fields_arg.split(",") if f.strip()]
    resolved = []
    for field in requested:
        canonical = ALIASES.get(field, field)
        if canonical.startswith("clocks_event_reasons.") and canonical != "clocks_event_reasons.active":
            table[canonical] = ("", lambda g: "Not Active")
        if canonical not in table:
            return f'Field "{field}" is not a valid field to query.\n\n', 2
        resolved.append(canonical)
    lines = []
    if "noheader" not in options:
        lines.append(", ".join(name + table[name][0] for name in resolved))
    for gpu in gpus:
        values = [table[name][1](gpu) for name in resolved]
        if "nounits" in options:
            values = [strip_unit(v) for v in values]
        lines.append(", ".join(values))
    return "\n".join(lines) + "\n", 0


# --------------------------------------------------------------------------------------------- main

USAGE_ERROR = "Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.\n"


def parse_args(argv):
    opts = {"q": False, "x": False, "L": False, "i": None, "query": None, "format": None, "d": None}
    k = 0
    while k < len(argv):
        arg = argv[k]
        value = None
        if "=" in arg and arg.startswith("--"):
            arg, value = arg.split("=", 1)
        if arg in ("-q", "--query"):
            opts["q"] = True
        elif arg in ("-x", "--xml-format"):
            opts["x"] = True
        elif arg in ("-L", "--list-gpus"):
            opts["L"] = True
        elif arg in ("-i", "--id", "--query-gpu", "--format", "-d", "--display"):
            if value is None:
                k += 1
                if k >= len(argv):
                    return None
                value = argv[k]
            key = {
                "-i": "i",
                "--id": "i",
                "--query-gpu": "query",
                "--format": "format",
                "-d": "d",
                "--display": "d",
            }[arg]
            opts[key] = value
        elif arg.startswith("-q") and set(arg[1:]) <= {"q", "x"}:
            opts["q"], opts["x"] = True, "x" in arg
        else:
            return None
        k += 1
    return opts


def select(gpus, selector):
    if selector is None:
        return gpus
    chosen = []
    for item in selector.split(","):
        item = item.strip()
        match = [
            g
            for g in gpus
            if str(g["index"]) == item or g["uuid"] == item or g["pci_bus_id"] == item or g["serial"] == item
        ]
        if not match:
            return None
        chosen += match
    return chosen


def main(argv):
    try:
        node = load_node()
    except (OSError, ValueError):
        sys.stderr.write(
            "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
            "Make sure that the latest NVIDIA driver is installed and running.\n\n"
        )
        return 9
    mode = node.get("nvidia_smi", "ok")
    if mode == "missing":
        sys.stderr.write("nvidia-smi: command not found\n")
        return 127
    opts = parse_args(argv)
    if opts is None:
        sys.stdout.write(USAGE_ERROR)
        return 2
    gpus = select(node["gpus"], opts["i"])
    if gpus is None:
        sys.stdout.write(
            "No devices were found\n"
            if not node["gpus"]
            else "Invalid device id, UUID or PCI bus id: {}\n".format(opts["i"])
        )
        return 6
    if mode == "garbage":
        noise = random.Random(node["node"]).randbytes(3000)
        sys.stdout.buffer.write(noise)
        return 0
    if opts["query"] is not None:
        if opts["format"] is None:
            sys.stdout.write(
                "Output format must be specified with --format when querying. Please run "
                "'nvidia-smi -h' for help.\n"
            )
            return 2
        text, rc = render_query(node, gpus, opts["query"], opts["format"])
        if text:
            sys.stdout.write(text)
        return rc
    if opts["L"]:
        sys.stdout.write(render_list(gpus))
        return 0
    if opts["q"] and opts["x"]:
        text = render_xml(node, gpus)
        if mode == "truncated":
            text = text[: int(len(text) * XML_TRUNCATE_FRACTION)]
        sys.stdout.write(text)
        return 0
    if opts["x"]:
        sys.stdout.write(USAGE_ERROR)
        return 2
    if opts["q"]:
        sys.stdout.write(render_q(node, gpus))
        return 0
    if not node["gpus"]:
        sys.stdout.write("No devices were found\n")
        return 6
    sys.stdout.write(render_table(node, gpus))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except BrokenPipeError:
        sys.exit(0)
