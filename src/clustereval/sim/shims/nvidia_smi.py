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
* ``--query-gpu=FIELDS --format=csv[,noheader][,nounits]``, ``-L``, ``-i INDEX`` selection;
* loop mode, ``-l [SEC]`` / ``--loop=SEC`` / ``-lms MS`` / ``--loop-ms=MS`` with any of the above but ``-L``:
  one process sampling until killed, values evolving with the profile's faults during a run (``gpu_hot``,
  ``gpu_throttle``, ``xid_during_run``, ``ecc_growth``, ``clock_loss``) and with the node's CPU load (a
  busy node's GPUs read as under a sustained GEMM); see "loop mode" below, also for its test-only environment knobs.

Node faults from the profile: ``nvidia_smi: truncated`` cuts ``-q -x`` mid-document, ``garbage`` prints
binary noise, ``missing`` behaves like an absent binary (exit 127).
"""

import json
import os
import random
import signal
import sys
import time

from simnode import CpuMeter, heat_step, load_of

XML_TRUNCATE_FRACTION = 0.45

# NVML clock event reason bits (nvml.h: nvmlClocksEventReason* / the older nvmlClocksThrottleReason* names).
REASON_GPU_IDLE = 0x1
REASON_APPLICATIONS_CLOCKS_SETTING = 0x2
REASON_SW_POWER_CAP = 0x4
REASON_HW_SLOWDOWN = 0x8
REASON_SYNC_BOOST = 0x10
REASON_SW_THERMAL_SLOWDOWN = 0x20
REASON_HW_THERMAL_SLOWDOWN = 0x40
REASON_HW_POWER_BRAKE_SLOWDOWN = 0x80
REASON_DISPLAY_CLOCK_SETTING = 0x100
# --query-gpu fields, one per reason (``clocks_event_reasons.<name>``, legacy ``clocks_throttle_reasons.<name>``):
# nvidia-smi --help-query-gpu lists these eight (no query field for the display clock reason).
REASON_FIELDS = {
    "gpu_idle": REASON_GPU_IDLE,
    "applications_clocks_setting": REASON_APPLICATIONS_CLOCKS_SETTING,
    "sw_power_cap": REASON_SW_POWER_CAP,
    "hw_slowdown": REASON_HW_SLOWDOWN,
    "hw_thermal_slowdown": REASON_HW_THERMAL_SLOWDOWN,
    "hw_power_brake_slowdown": REASON_HW_POWER_BRAKE_SLOWDOWN,
    "sw_thermal_slowdown": REASON_SW_THERMAL_SLOWDOWN,
    "sync_boost": REASON_SYNC_BOOST,
}
# Unverified: the mask clocks_event_reasons.supported prints on HGX H100/H200 (every reason -q lists).
REASONS_SUPPORTED = 0x1FF

# Temperatures in the -q report are T.Limit margins (Hopper, R535+): the GPU's "max operating" temperature
# (T.Limit 0) sits at TLIMIT_TEMP_C, the HW slowdown 2 C above it, the shutdown 8 C above it (the three
# thresholds every -q capture of H100/H200 in the corpus prints; the 87 C origin matches the H200 capture).
TLIMIT_TEMP_C = 87
SLOWDOWN_TLIMIT_C = -2
SHUTDOWN_TLIMIT_C = -8
# HBM3 maximum operating temperature (best knowledge: the HBM3 stacks' 95 C; the -q report prints only
# the margin "Memory Max Operating T.Limit Temp: 0 C").
MEMORY_MAX_OPERATING_C = 95


def load_node():
    root = os.environ.get("SIMNODE_ROOT") or "/sim"
    with open(os.path.join(root, "node.json")) as fh:
        return json.load(fh)


# GPUs that fell off the bus since the node booted (a secondary bus reset seen by the sim's power daemon):
# ``$SIMNODE_ROOT/run/runtime.json`` ``lost_gpus`` (nvidia-smi indices), gone at the next boot. A process
# started after that cannot get a device handle for them (NVML_ERROR_GPU_IS_LOST): nvidia-smi prints the
# driver's message for each on stderr, goes on with the others (-L, --query-gpu, -q) or prints nothing else
# (the default table), and exits 15 ("the GPU has fallen off the bus", man nvidia-smi RETURN VALUE).
# Unverified: from which driver branch the message names the GPU index ("GPU0: 0000:24:00.0", captures of
# recent drivers) instead of only the bus ("GPU 0000:05:00.0", older ones); taken here as from 565 on.
GPU_IS_LOST_RC = 15


def runtime_lost():
    try:
        with open(os.path.join(os.environ.get("SIMNODE_ROOT") or "/sim", "run", "runtime.json")) as fh:
            return set(json.load(fh).get("lost_gpus") or [])
    except (OSError, ValueError, AttributeError):
        return set()


def lost_message(node, gpu):
    bus = gpu["pci_bus_id"][4:]
    who = "GPU%d: %s" % (gpu["index"], bus) if driver_major(node) >= 565 else "GPU " + bus
    return "Unable to determine the device handle for %s: GPU is lost.  Reboot the system to recover this GPU\n" % who


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
        ("dram_correctable", "DRAM Correctable", str(gpu.get("ecc_corrected_volatile", 0))),
        ("dram_uncorrectable", "DRAM Uncorrectable", str(gpu["ecc_uncorrected_volatile"])),
    ]
    reasons = gpu.get("clocks_event_reasons", 0)

    def active(bit):
        return "Active" if reasons & bit else "Not Active"

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
                ("clocks_event_reason_gpu_idle", "Idle", active(REASON_GPU_IDLE)),
                (
                    "clocks_event_reason_applications_clocks_setting",
                    "Applications Clocks Setting",
                    active(REASON_APPLICATIONS_CLOCKS_SETTING),
                ),
                ("clocks_event_reason_sw_power_cap", "SW Power Cap", active(REASON_SW_POWER_CAP)),
                ("clocks_event_reason_hw_slowdown", "HW Slowdown", active(REASON_HW_SLOWDOWN)),
                (
                    "clocks_event_reason_hw_thermal_slowdown",
                    "    HW Thermal Slowdown",
                    active(REASON_HW_THERMAL_SLOWDOWN),
                ),
                (
                    "clocks_event_reason_hw_power_brake_slowdown",
                    "    HW Power Brake Slowdown",
                    active(REASON_HW_POWER_BRAKE_SLOWDOWN),
                ),
                ("clocks_event_reason_sync_boost", "Sync Boost", active(REASON_SYNC_BOOST)),
                ("clocks_event_reason_sw_thermal_slowdown", "SW Thermal Slowdown", active(REASON_SW_THERMAL_SLOWDOWN)),
                (
                    "clocks_event_reason_display_clocks_setting",
                    "Display Clock Setting",
                    active(REASON_DISPLAY_CLOCK_SETTING),
                ),
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
                ("gpu_temp_tlimit", "GPU T.Limit Temp", "%d C" % (TLIMIT_TEMP_C - gpu["temperature_c"])),
                ("gpu_temp_max_tlimit_threshold", "GPU Shutdown T.Limit Temp", "%d C" % SHUTDOWN_TLIMIT_C),
                ("gpu_temp_slow_tlimit_threshold", "GPU Slowdown T.Limit Temp", "%d C" % SLOWDOWN_TLIMIT_C),
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

# What -q / -q -x print for a GPU that fell off the bus (Xid 79) while a loop runs: NVML answers
# NVML_ERROR_GPU_IS_LOST for everything it must read from the device; the static facts the driver holds
# (names, ids, bus) stay. Unverified (no capture of a lost GPU in the corpus): "Unknown Error" as the
# value of each such entry.
GPU_LOST_Q = "Unknown Error"
LOST_SECTIONS = ("clocks_event_reasons/", "utilization/", "clocks/", "voltage/")
LOST_ENTRIES = {"performance_state", "fb_memory_usage/used", "fb_memory_usage/free", "temperature/gpu_temp",
                "temperature/gpu_temp_tlimit", "temperature/memory_temp", "gpu_power_readings/power_draw",
                "gpu_power_readings/power_state", "module_power_readings/power_state"}


def lost_tree(entries, prefix=""):
    out = []
    for tag, label, value in entries:
        path = prefix + (tag or label or "")
        if isinstance(value, list):
            value = lost_tree(value, path + "/")
        elif value is not None and (path in LOST_ENTRIES or prefix in LOST_SECTIONS):
            value = GPU_LOST_Q
        out.append((tag, label, value))
    return out


def tree_of(gpu, node):
    tree = gpu_tree(gpu, node)
    return lost_tree(tree) if gpu.get("lost") else tree



def asctime(now):
    """The report's timestamp line (``Mon Nov 30 00:20:00 2026``) at ``now`` (None: the real clock)."""
    return time.asctime() if now is None else time.asctime(time.localtime(now))


def render_q(node, gpus, now=None):
    """``nvidia-smi -q``: the NVSMI LOG text report, labels padded so every colon sits in column 43."""
    lines = ["", "==============NVSMI LOG==============", ""]

    def kv(indent, label, value):
        lines.append(("    " * indent + label).ljust(42) + ": " + value)

    kv(0, "Timestamp", asctime(now))
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
        walk(tree_of(gpu, node), 1)
    return "\n".join(lines) + "\n\n"


def xml_escape(text):
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def render_xml(node, gpus, now=None):
    """``nvidia-smi -q -x``: DTD v12 layout (4 spaces) before driver 560, v13 layout (tabs) after."""
    v13 = driver_major(node) >= 560
    unit = "\t" if v13 else "    "
    out = [
        '<?xml version="1.0" ?>' if v13 else '<?xml version="1.0" encoding="UTF-8"?>',
        '<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v%d.dtd">' % (13 if v13 else 12),
        "<nvidia_smi_log>",
    ]
    out.append(unit + f"<timestamp>{asctime(now)}</timestamp>")
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
        walk(tree_of(gpu, node), 2)
        out.append(unit + "</gpu>")
    if v13:
        out.append("")
    out.append("</nvidia_smi_log>")
    return "\n".join(out) + "\n"


def render_table(node, gpus, now=None):
    """Default ``nvidia-smi`` output: the 89-column table with the timestamp line (drivers >= 535)."""
    rule = "+" + "-" * 41 + "+" + "-" * 24 + "+" + "-" * 22 + "+"
    lines = [
        asctime(now),
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
        lost = gpu.get("lost")  # unverified: the table's "ERR!" (as in its Fan column, corpus) for a lost GPU
        power = (
            ("ERR!" if lost else "%dW" % round(gpu["power_draw_w"])).rjust(16)
            + " / "
            + ("%dW" % gpu["power_limit_w"]).rjust(5)
            + " "
        )
        lines.append(
            "| N/A  %4s    %s%s|%s|%s|"
            % (
                "ERR!" if lost else "%3dC" % gpu["temperature_c"],
                gpu["performance_state"].ljust(2),
                power,
                ("%dMiB" % gpu["memory_used_mib"]).rjust(11)
                + " / "
                + ("%dMiB" % gpu["memory_total_mib"]).rjust(9)
                + " ",
                ("ERR!" if lost else "%d%%" % gpu["utilization_pct"]).rjust(8) + "Default".rjust(13) + " ",
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
    "clocks_throttle_reasons.supported": "clocks_event_reasons.supported",
    # the R535 rename: the old names still query, the header prints the new one (corpus: h200-query-gpu-csv)
    **{"clocks_throttle_reasons." + name: "clocks_event_reasons." + name for name in REASON_FIELDS},
    "pstate": "pstate",
    "enforced.power.limit": "enforced.power.limit",
    "ecc.errors.uncorrected.volatile.total": "ecc.errors.uncorrected.volatile.total",
}


def query_timestamp(now):
    """``2026/11/30 00:19:14.021`` (local time, milliseconds truncated), as the corpus loop prints it."""
    return time.strftime("%Y/%m/%d %H:%M:%S.", time.localtime(now)) + "%03d" % (now % 1 * 1000)


def reason_state(bit):
    return lambda g: "Active" if g.get("clocks_event_reasons", 0) & bit else "Not Active"


# Fields that still print for a GPU lost mid-loop (what nvidia-smi holds without asking the device);
# every other field prints GPU_LOST. Unverified (no capture of a lost GPU in the corpus): NVML's
# NVML_ERROR_GPU_IS_LOST, printed the way nvidia-smi prints NVML errors in CSV ("[Not Supported]",
# "[Unknown Error]"), and which identity fields stay readable.
GPU_LOST = "[GPU is lost]"
STATIC_FIELDS = {"timestamp", "driver_version", "count", "index", "name", "serial", "uuid", "pci.bus_id",
                 "pci.device_id", "pci.sub_device_id", "vbios_version", "compute_cap", "inforom.img"}


def query_fields(node, gpu_count, clock=time.time):
    return {
        "timestamp": ("", lambda g: query_timestamp(clock())),
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
        "clocks_event_reasons.active": ("", lambda g: "0x%016x" % g.get("clocks_event_reasons", 0)),
        "clocks_event_reasons.supported": ("", lambda g: "0x%016x" % REASONS_SUPPORTED),
        **{"clocks_event_reasons." + name: ("", reason_state(bit)) for name, bit in REASON_FIELDS.items()},
        "ecc.mode.current": ("", lambda g: "Enabled"),
        "ecc.errors.corrected.volatile.total": ("", lambda g: str(g.get("ecc_corrected_volatile", 0))),
        "ecc.errors.uncorrected.volatile.total": ("", lambda g: str(g["ecc_uncorrected_volatile"])),
        "ecc.errors.corrected.aggregate.total": ("", lambda g: str(g.get("ecc_corrected_volatile", 0))),
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


def compile_query(node, gpus, fields_arg, format_arg, clock=time.time):
    """Resolve ``--query-gpu`` fields once: ``((header line or None, gpu -> row line), 0)``, or
    ``(error text or None, exit status)`` for a bad format (message on stderr) or an unknown field."""
    options = [o.strip() for o in format_arg.split(",")]
    if options[0] != "csv" or any(o not in ("csv", "noheader", "nounits") for o in options):
        sys.stderr.write(f'"{format_arg}" is not a valid format option.\n')
        return None, 2
    table = query_fields(node, len(gpus), clock)
    requested = [f.strip() for f in fields_arg.split(",") if f.strip()]
    resolved = []
    for field in requested:
        canonical = ALIASES.get(field, field)
        if canonical not in table:
            return f'Field "{field}" is not a valid field to query.\n\n', 2
        resolved.append(canonical)
    header = None if "noheader" in options else ", ".join(name + table[name][0] for name in resolved)
    getters = [(name in STATIC_FIELDS, table[name][1]) for name in resolved]
    nounits = "nounits" in options

    def row(gpu):
        if gpu.get("lost"):
            values = [get(gpu) if static else GPU_LOST for static, get in getters]
        else:
            values = [get(gpu) for _, get in getters]
        if nounits:
            values = [strip_unit(v) for v in values]
        return ", ".join(values)

    return (header, row), 0


def render_query(node, gpus, fields_arg, format_arg):
    """``--query-gpu=...``: headers are the canonical field names plus their unit, as nvidia-smi prints."""
    compiled, rc = compile_query(node, gpus, fields_arg, format_arg)
    if rc:
        return compiled, rc
    header, row = compiled
    lines = [] if header is None else [header]
    lines += [row(gpu) for gpu in gpus]
    return "\n".join(lines) + "\n", 0


# --------------------------------------------------------------------------------------------- loop mode
#
# ``-l [SEC]`` / ``--loop=SEC`` and ``-lms MS`` / ``--loop-ms=MS`` with ``--query-gpu`` (header once, then one
# row per selected GPU each interval), ``-q`` / ``-q -x`` (the whole report each interval) or the default
# table: one process for the whole loop, each sample written with one write(2) as soon as it is taken,
# sleeping the interval after each sample (so timestamps drift by the sampling time, as in the corpus
# capture: +1.000 to +1.001 s per -lms 1000 sample). Runs until killed: SIGINT, SIGTERM, SIGHUP and SIGPIPE
# keep their default action (the process ends at once, nothing printed, status 128+signal in a shell).
# Unverified: whether nvidia-smi catches Ctrl-C to exit 0 instead, and whether it prints NVML Xid events
# between samples (its man page says -l does on Linux without -x; no capture shows the layout).
#
# What a loop sees evolves from node.json (single-shot calls keep printing node.json as it is, which is
# what the audit reads):
#
# * idle readings with a small jitter, deterministic per node, GPU and sample: temperature +-1 C now and
#   then, power +-0.15 W; the first two samples draw more power (x1.55, x1.03) and an idle-clocked GPU
#   (GpuIdle) shows a higher SM clock in the first one, as the GPU wakes up (the corpus capture: 123.85 W
#   and 480 MHz, then 81.12 W, then 78.7 W at 345 MHz);
# * clock event reasons from the temperature: above the max operating temperature (T.Limit < 0, or HBM
#   above MEMORY_MAX_OPERATING_C) SwThermalSlowdown, at the slowdown margin (T.Limit <= -2)
#   HwThermalSlowdown, each capping the SM clock (85 % of max, then half of max or the fault's clock);
# * the node's ``telemetry.faults`` (profile faults ``gpu_hot``, ``gpu_throttle``, ``xid_during_run``), timed
#   from the start of this process: a hot GPU's temperatures climb to their targets over RAMP_S seconds; a
#   throttled GPU gets its reason bit and SM clock; an Xid is appended once, at its time, to ``/sim/kmsg``
#   (what the Slurm health check reads) and to the node's own ``/var/log/kern.log`` in rsyslog's format
#   (overlays/monitoring.py ``kern_log_line``), written only where that file is the node's overlay file
#   inside its private mount namespace (node_kern_log), never the host's; after an Xid 79 the GPU is lost (GPU_LOST,
#   GPU_LOST_Q, "ERR!"), after an Xid 48/94/95 its volatile uncorrected ECC count is one higher;
#   ``ecc_growth`` adds ``uncorrected`` volatile uncorrected errors at its time and corrected ones at
#   ``corrected_per_min`` from then on; ``clock_loss`` holds the SM clock at its value with no reason bit
#   (a drifting GPU: under load it then draws less than its cap, so not even SwPowerCap shows);
# * load (see CpuMeter): the simulated GPUs cannot run the node's work, so a loop reads "load" from the
#   CPU time the node's processes consume between samples, the interface a real node has for it (the node's
#   cgroup v2 cpu.stat usage_usec, else /proc/stat). A busy node's GPUs read as a real HGX H100/H200 under a
#   sustained GEMM (research/h200-ground-truth.md): utilization 100 %, power at the cap with SwPowerCap
#   (0x4) active, the SM clock down from max to ~82 % at once and to ~75 % (1485 of 1980 MHz) as the GPU
#   warms, temperatures rising with a HEAT_TAU_S time constant to LOADED_TEMP_C / LOADED_MEMORY_TEMP_C,
#   no thermal event; below LOAD_CAP of a full load the GPU stays under its cap at max clock. An idle node
#   (under LOAD_IDLE_CORES) prints exactly the idle readings above. Single-shot calls stay idle: one
#   reading has no interval to measure load over.
#
# Test-only knobs (environment): SIMNODE_TIME_SCALE=K runs the loop's clock K times faster than real time
# (intervals, timestamps and fault times all on that clock); SIMNODE_KERN_LOG=PATH writes the kernel log
# lines there instead (a temp file in unit tests); SIMNODE_CPU_STAT=PATH reads the node's CPU time from that
# cpu.stat-format file instead of the node's cgroup (unit tests: a file they write, so load is theirs to set).

RAMP_S = 4.0
# The node's load (CpuMeter, load_of, heat_step: shared with the amd-smi loop) is simnode's.
# A GEMM's power demand exceeds the cap well before the node's load is full: half a core's worth already
# reads as capped, so a burn-in on a crowded test machine (its processes getting a share of the CPUs) does.
LOAD_CAP = 0.5
LOADED_TEMP_C = 58  # GPU 56-60 C, HBM 43-48 C at the 700 W cap (h200-ground-truth.md)
LOADED_MEMORY_TEMP_C = 46
LOADED_SM_COLD = 0.82  # of max SM clock when the cap first bites, and once warm (1485 of 1980 MHz)
LOADED_SM_WARM = 0.75
CAP_MARGIN_W = 3.0  # the power controller holds the draw just under the cap
WAKE_POWER = (1.55, 1.03)
WAKE_SM_STEP_MHZ = 135
DEFAULT_LOOP_S = 5.0


def time_scale():
    try:
        scale = float(os.environ.get("SIMNODE_TIME_SCALE") or 1)
    except ValueError:
        return 1.0
    return scale if scale > 0 else 1.0


def clock_step(mhz):
    """Hopper SM clocks move in 15 MHz steps."""
    return int(mhz) // 15 * 15


def rsyslog_stamp(now):
    """``2026-11-30T00:20:00.123456+00:00``: RFC 3339 with microseconds, as Debian 12's rsyslog writes."""
    local = time.localtime(now)
    offset = time.strftime("%z", local)
    return time.strftime("%Y-%m-%dT%H:%M:%S", local) + ".%06d" % (now % 1 * 1e6) + offset[:3] + ":" + offset[3:]


def kern_log_line(stamp, host, line):
    """Same format as overlays/monitoring.py ``kern_log_line`` (this shim cannot import clustereval)."""
    return f"{stamp} {host} kernel: {line}\n"


def node_kern_log(configured, node_name):
    """Where this loop may append kernel log lines: the test override, else the node's kern.log when it is
    the node's own overlay file (the mount covering its directory is the simulated node's overlay: an
    overlayfs whose upper directory, or a bind mount whose source, is ``.../nodes/<node>/overlay/<dir>``,
    as overlays/__init__.py mounts it inside the node's mount namespace), else None: never the host's."""
    override = os.environ.get("SIMNODE_KERN_LOG")
    if override:
        return override
    if not configured:
        return None
    directory = os.path.dirname(configured)
    own = "/nodes/%s/overlay%s" % (node_name, directory)
    try:
        with open("/proc/self/mountinfo") as fh:
            mounts = [line.rstrip("\n").split(" - ", 1) for line in fh]
    except OSError:
        return None
    found = None
    for entry in mounts:
        fields = entry[0].split()
        if len(fields) < 5 or len(entry) < 2:
            continue
        point = fields[4]
        covers = point == "/" or configured == point or configured.startswith(point + "/")
        if covers and (found is None or len(point) >= len(found[0])):  # the last mount on a point wins
            found = (point, fields[3], entry[1].split())
    if found is None or found[0] != directory:
        return None
    root, (fstype, _source, *options) = found[1], found[2]
    upper = [o for o in ",".join(options).split(",") if o.startswith("upperdir=")]
    if (fstype == "overlay" and upper and upper[0].endswith(own)) or root.endswith(own):
        return configured
    return None


def append_lines(path, lines):
    try:
        with open(path, "a") as fh:
            fh.write("".join(lines))
    except OSError:
        pass  # the driver's log line is not the tool's business: nvidia-smi itself never fails on it


def loaded(gpu, state, load, heat, r_power):
    """``state`` (the idle reading) as the GPU reads at ``load`` after warming to ``heat``."""
    if heat > 0:
        state["temperature_c"] = round(state["temperature_c"] + (LOADED_TEMP_C - gpu["temperature_c"]) * heat)
        state["memory_temperature_c"] = round(
            state["memory_temperature_c"] + (LOADED_MEMORY_TEMP_C - gpu["memory_temperature_c"]) * heat)
    if load <= 0:
        return state
    limit, top = gpu["power_limit_w"], gpu["max_sm_clock_mhz"]
    mask = state["clocks_event_reasons"] & ~REASON_GPU_IDLE
    demand = load / LOAD_CAP
    if demand >= 1:
        mask |= REASON_SW_POWER_CAP
        power = limit - CAP_MARGIN_W * r_power
        sm = clock_step(top * (LOADED_SM_COLD - (LOADED_SM_COLD - LOADED_SM_WARM) * heat))
    else:
        power = state["power_draw_w"] + (limit - state["power_draw_w"]) * demand
        sm = top
    state.update(power_draw_w=power, sm_clock_mhz=sm, clocks_event_reasons=mask, performance_state="P0",
                 utilization_pct=round(100 * min(1.0, load / LOAD_CAP)))
    return state


class Telemetry:
    """The node's GPUs as one loop process samples them (see "loop mode" above)."""

    def __init__(self, node, start, mono_start):
        telemetry = node.get("telemetry") or {}
        self.node, self.start, self.mono_start = node, start, mono_start
        self.faults = telemetry.get("faults") or []
        self.pending = sorted((f for f in self.faults if f["kind"] == "xid"), key=lambda f: f["after_s"])
        self.kern_log = node_kern_log(telemetry.get("kern_log"), node.get("node"))
        self.kmsg = os.path.join(os.environ.get("SIMNODE_ROOT") or "/sim", "kmsg")
        self.lost, self.ecc_extra, self.rngs, self.samples = set(), {}, {}, 0
        self.meter, self.heat, self.last_elapsed = CpuMeter(node.get("node")), {}, 0.0

    def next_event(self):
        return self.start + self.pending[0]["after_s"] if self.pending else None

    def fire(self, now):
        """Write every Xid whose time has come (once each), at its own time."""
        while self.pending and self.start + self.pending[0]["after_s"] <= now:
            event = self.pending.pop(0)
            at = self.start + event["after_s"]
            # consecutive driver lines a few microseconds apart in the ring buffer
            ring = ["[%12.6f] %s\n" % (self.mono_start + event["after_s"] + 4e-6 * k, text)
                    for k, text in enumerate(event["lines"])]
            append_lines(self.kmsg, ring)
            if self.kern_log:
                stamp = rsyslog_stamp(at)
                append_lines(self.kern_log, [kern_log_line(stamp, self.node["node"], r[:-1]) for r in ring])
            if event["code"] == 79:
                self.lost.add(event["gpu"])
            elif event["code"] in (48, 94, 95):
                self.ecc_extra[event["gpu"]] = self.ecc_extra.get(event["gpu"], 0) + 1

    def sample(self, gpus, now):
        elapsed = now - self.start
        # the first sample has no interval behind it to measure load over: it reads idle
        load = load_of(self.meter.cores()) if self.samples else 0.0
        dt, self.last_elapsed = elapsed - self.last_elapsed, elapsed
        for gpu in gpus:
            self.heat[gpu["index"]] = heat_step(self.heat.get(gpu["index"], 0.0), load, dt)
        states = [self.state(gpu, elapsed, load) for gpu in gpus]
        self.samples += 1
        return states

    def state(self, gpu, elapsed, load=0.0):
        index = gpu["index"]
        rng = self.rngs.get(index)
        if rng is None:
            rng = self.rngs[index] = random.Random("%s/%s/%d" % (self.node.get("node"), gpu["uuid"], index))
        r_temp, r_mem, r_power = rng.random(), rng.random(), rng.random()
        g = dict(gpu)
        n, mask, sm = self.samples, gpu.get("clocks_event_reasons", 0), gpu["sm_clock_mhz"]
        temp = gpu["temperature_c"] + (1 if r_temp < 0.1 else 0)
        mem_temp = gpu["memory_temperature_c"] + (1 if r_mem < 0.3 else 0)
        power = gpu["power_draw_w"] * (WAKE_POWER[n] if n < len(WAKE_POWER) else 1.0) + (r_power - 0.5) * 0.3
        if n == 0 and mask & REASON_GPU_IDLE:
            sm = min(gpu["max_sm_clock_mhz"], sm + WAKE_SM_STEP_MHZ)
        g.update(temperature_c=temp, memory_temperature_c=mem_temp, power_draw_w=power, sm_clock_mhz=sm,
                 clocks_event_reasons=mask)
        g = loaded(gpu, g, load, self.heat.get(index, 0.0), r_power)
        temp, mem_temp, power, sm, mask = (g["temperature_c"], g["memory_temperature_c"], g["power_draw_w"],
                                           g["sm_clock_mhz"], g["clocks_event_reasons"])
        hot_clock, throttle_clock, lost_clock = None, None, None
        corrected, uncorrected = 0, 0
        for fault in self.faults:
            if fault["gpu"] != index or elapsed < fault["after_s"]:
                continue
            if fault["kind"] == "gpu_hot":
                progress = min(1.0, (elapsed - fault["after_s"]) / RAMP_S)
                temp = max(temp, round(temp + (fault["temperature_c"] - temp) * progress))
                mem_temp = max(mem_temp, round(mem_temp + (fault["memory_temperature_c"] - mem_temp) * progress))
                hot_clock = fault.get("sm_clock_mhz") or hot_clock
            elif fault["kind"] == "gpu_throttle":
                mask |= fault["mask"]
                clock = fault["sm_clock_mhz"]
                throttle_clock = clock if throttle_clock is None else min(throttle_clock, clock)
            elif fault["kind"] == "clock_loss":
                clock = fault["sm_clock_mhz"]
                lost_clock = clock if lost_clock is None else min(lost_clock, clock)
            elif fault["kind"] == "ecc_growth":
                corrected += int(fault["corrected_per_min"] * (elapsed - fault["after_s"]) / 60)
                uncorrected += fault["uncorrected"]
        if throttle_clock is not None:
            sm = throttle_clock  # held there, whatever the idle clock was
        if lost_clock is not None and lost_clock < sm:
            if mask & REASON_SW_POWER_CAP:
                # slower than the cap asks: it draws less than the cap, so the cap is no longer the reason
                power = gpu["power_draw_w"] + (power - gpu["power_draw_w"]) * lost_clock / sm
                mask &= ~REASON_SW_POWER_CAP
            sm = lost_clock
        if TLIMIT_TEMP_C - temp < 0 or mem_temp > MEMORY_MAX_OPERATING_C:
            mask |= REASON_SW_THERMAL_SLOWDOWN
            sm = min(sm, clock_step(gpu["max_sm_clock_mhz"] * 0.85))
        if TLIMIT_TEMP_C - temp <= SLOWDOWN_TLIMIT_C:
            mask |= REASON_HW_THERMAL_SLOWDOWN
            sm = min(sm, hot_clock or clock_step(gpu["max_sm_clock_mhz"] / 2))
        g.update(temperature_c=temp, memory_temperature_c=mem_temp, power_draw_w=power, sm_clock_mhz=sm,
                 clocks_event_reasons=mask, ecc_corrected_volatile=gpu.get("ecc_corrected_volatile", 0) + corrected,
                 ecc_uncorrected_volatile=gpu["ecc_uncorrected_volatile"] + self.ecc_extra.get(index, 0)
                 + uncorrected)
        if index in self.lost:
            g["lost"] = True
        return g


def write_all(data):
    view = memoryview(data)
    while view:
        view = view[os.write(1, view):]


def run_loop(node, gpus, interval_s, render, header=None, make_render=None):
    """Sample every ``interval_s`` seconds until killed. ``render(states, now)`` returns one sample's
    text; ``make_render(clock)`` builds it when it needs the loop's clock first."""
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGPIPE):
        signal.signal(signum, signal.SIG_DFL)
    scale = time_scale()
    mono_start, start = time.monotonic(), time.time()

    def clock():
        return start + (time.monotonic() - mono_start) * scale

    if make_render is not None:
        header, render = make_render(clock)
    telemetry = Telemetry(node, start, mono_start)
    sys.stdout.flush()
    if header is not None:
        write_all((header + "\n").encode())
    while True:
        now = clock()
        telemetry.fire(now)
        write_all(render(telemetry.sample(gpus, now), now).encode())
        due = clock() + interval_s
        while True:
            now = clock()
            event = telemetry.next_event()
            target = due if event is None else min(due, event)
            if target > now:
                time.sleep((target - now) / scale)
                now = clock()
            telemetry.fire(now)
            if now >= due:
                break


# --------------------------------------------------------------------------------------------- main

USAGE_ERROR = "Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.\n"


def loop_interval(value, unit_s):
    """Seconds between samples for ``-l``/``-lms`` VALUE (a positive integer), or None when invalid."""
    if value is None:
        return DEFAULT_LOOP_S
    if not value.isdigit() or int(value) <= 0:
        return None
    return int(value) * unit_s


def parse_args(argv):
    opts = {"q": False, "x": False, "L": False, "i": None, "query": None, "format": None, "d": None, "loop": None}
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
        elif arg in ("-l", "--loop", "-lms", "--loop-ms"):
            # the value is optional (man page: "-l [sec]", default 5 seconds)
            if value is None and k + 1 < len(argv) and not argv[k + 1].startswith("-"):
                k += 1
                value = argv[k]
            opts["loop"] = loop_interval(value, 0.001 if arg in ("-lms", "--loop-ms") else 1.0)
            if opts["loop"] is None:
                return None
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
    lost = runtime_lost()
    if lost and any(g["index"] in lost for g in gpus):
        return with_lost_gpus(node, gpus, lost, opts)
    loop = opts["loop"]
    if opts["query"] is not None:
        if opts["format"] is None:
            sys.stdout.write(
                "Output format must be specified with --format when querying. Please run "
                "'nvidia-smi -h' for help.\n"
            )
            return 2
        if loop is not None:
            checked, rc = compile_query(node, gpus, opts["query"], opts["format"])
            if rc:
                if checked:
                    sys.stdout.write(checked)
                return rc

            def make_render(clock):
                (header, row), _ = compile_query(node, gpus, opts["query"], opts["format"], clock)
                return header, lambda states, now: "".join(row(g) + "\n" for g in states)

            return run_loop(node, gpus, loop, None, make_render=make_render)
        text, rc = render_query(node, gpus, opts["query"], opts["format"])
        if text:
            sys.stdout.write(text)
        return rc
    if opts["L"]:
        sys.stdout.write(render_list(gpus))
        return 0
    if opts["q"] and opts["x"]:

        def xml(states, now):
            text = render_xml(node, states, now)
            return text[: int(len(text) * XML_TRUNCATE_FRACTION)] if mode == "truncated" else text

        if loop is not None:
            return run_loop(node, gpus, loop, xml)
        sys.stdout.write(xml(gpus, None))
        return 0
    if opts["x"]:
        sys.stdout.write(USAGE_ERROR)
        return 2
    if opts["q"]:
        if loop is not None:
            return run_loop(node, gpus, loop, lambda states, now: render_q(node, states, now))
        sys.stdout.write(render_q(node, gpus))
        return 0
    if not node["gpus"]:
        sys.stdout.write("No devices were found\n")
        return 6
    if loop is not None:
        return run_loop(node, gpus, loop, lambda states, now: render_table(node, states, now))
    sys.stdout.write(render_table(node, gpus))
    return 0


def with_lost_gpus(node, gpus, lost, opts):
    """The run of a process that finds GPUs lost at start (see runtime_lost): no loop, as nvidia-smi stops."""
    reachable = [g for g in gpus if g["index"] not in lost]
    if opts["q"] or not (opts["L"] or opts["query"] is not None):
        for gpu in gpus:
            if gpu["index"] in lost:
                sys.stderr.write(lost_message(node, gpu))
        if opts["q"] and reachable:
            sys.stdout.write(render_xml(node, reachable, None) if opts["x"] else render_q(node, reachable))
        return GPU_IS_LOST_RC
    header = True
    for gpu in gpus:
        if gpu["index"] in lost:
            sys.stdout.flush()
            sys.stderr.write(lost_message(node, gpu))
            sys.stderr.flush()
            continue
        if opts["L"]:
            sys.stdout.write(render_list([gpu]))
        else:
            fmt = opts["format"] or "csv"
            text, rc = render_query(node, [gpu], opts["query"], fmt if header else fmt + ",noheader")
            if rc:
                sys.stdout.write(text or "")
                return rc
            sys.stdout.write(text)
        header = False
    sys.stdout.flush()
    return GPU_IS_LOST_RC


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except BrokenPipeError:
        sys.exit(0)
