#!/usr/bin/python3
"""Simulated ``amd-smi`` (AMD SMI 26.0.x, the CLI of ROCm 7.0) for one simulated AMD node.

Standalone: stdlib only (plus the sibling ``simnode``), never ``clustereval``. Reads ``node.json``'s ``amd``
section (sim/amd.py) and prints what the real CLI prints for that state, byte for byte where the format is
known. Evidence (read from the real tool's source and from published 26.0.x captures):

* ``amdsmi_cli/amdsmi_commands.py`` of ROCm/amdsmi, commit 7ac597a81b6179bbf80bbb61c341802347c70178 (the
  mid-2025 develop tree the 26.0 release was cut from): the keys and their order for ``list``, ``static``
  (asic, bus, vbios, limit, driver, vram, partition), ``metric`` (power, temperature, ecc, ecc_blocks),
  ``topology`` (the nine tables, titles, legend), ``monitor`` (column headers, widths, default set, watch);
* ``amdsmi_cli/amdsmi_logger.py`` of ROCm/amdsmi, commit 427ef5788028a589d11b3f18ab8326dbf9809f73: the
  human-readable dump (``custom_dump``: upper-case keys, 2-space levels widened to 4, quotes dropped, one blank
  line after each device) and the tabular printer (``_convert_json_to_tabular`` column widths);
* ``amdsmi_cli/amdsmi_parser.py`` / ``amdsmi_cli.py`` (ROCm/amdsmi 0ceca28f and the 26.x ``amdsmi_cli.py`` that
  runs ``default`` with no arguments): the ``--help`` text (argparse, width 90) and the error paths: an
  unknown command and an unknown option raise ``AmdSmiInvalidSubcommandException`` (-10) /
  ``AmdSmiInvalidParameterException`` (-2) outside the CLI's try block, so Python prints
  ``amdsmi_cli_exceptions.<Class>: <message>`` on stderr (``sys.tracebacklimit = -1``) and exits 1;
* CHANGELOG.md "amd_smi_lib for ROCm 7.0.0": ``amd-smi`` alone prints the default view (captures of
  26.0.0/26.0.2 on MI300X SPX/DPX and MI355X give its exact layout); partition left ``static``'s default set
  (``static -p`` keeps it, field ``ACCELERATOR_PARTITION`` since 6.4.2); ``monitor -p`` adds ``PWR_CAP``;
  in partition modes only a socket's first partition reports metrics (6.4.1 "Corrected outputs in CPX");
* 26.0.2 captures: ``amd-smi version`` ("... | amdgpu version: 6.14.14 | amd_hsmp version: N/A"), MI355X
  ``topology`` (weights 0, NUMA BW 0-0), MI300X ``topology`` (weights 15, NUMA BW 50000-50000, ROCm 6.1).

Not simulated (stderr note, exit 2): ``--json``/``--csv``, ``metric --usage/--clock/--mem-usage/...``,
``monitor -n -d -r -q -V``, ``xgmi`` (the link index -> peer map is not in the source), the other
subcommands. Derived values (not in node.json): HIP id = device index; ASIC serial from ``serial``; PCIe
Gen 5 x16 OAM; VRAM HBM 8192-bit with the model's peak bandwidth; thermal limits 100/105/110/115 C; memory
activity = 13 % of GFX activity (the ratio of the ROCm 7.0.0 changelog's loaded MI300X default view);
GPUs on buses < 0x80 sit on CPU socket 0 (PCIe paths between sockets weigh 72 over 3 hops, within one 40
over 2).
"""

import argparse
import re
import signal
import sys
import time

import simnode

COMMANDS = [  # (name, aliases, help) in the order amd-smi 26.0 lists them on a Linux bare-metal host
    ("version", [], "Display version information"),
    ("list", [], "List GPU information"),
    ("static", [], "Gets static information about the specified GPU"),
    ("firmware", ["ucode"], "Gets firmware information about the specified GPU"),
    ("bad-pages", [], "Gets bad page information about the specified GPU"),
    ("metric", [], "Gets metric/performance information about the specified GPU"),
    ("process", [], "Lists general process information running on the specified GPU"),
    ("event", [], "Displays event information for the given GPU"),
    ("topology", [], "Displays topology information of the devices"),
    ("set", [], "Set options for devices"),
    ("reset", [], "Reset options for devices"),
    ("monitor", ["dmon"], "Monitor metrics for target devices"),
    ("xgmi", [], "Displays xgmi information of the devices"),
    ("partition", [], "Displays partition information of the devices"),
    ("ras", [], "Retrieve RAS (CPER) entries from the driver"),
]
ALIASES = {alias: name for name, aliases, _ in COMMANDS for alias in aliases}
VALID = {name for name, _, _ in COMMANDS} | set(ALIASES) | {"default", "profile"}
SIMULATED = {"version", "list", "static", "metric", "process", "topology", "monitor", "default"}
CASE_SENSITIVE = ("--folder", "--file", "--gpu", "--cpu", "--core", "--profile", "--cper-file")
DEGREE = "\N{DEGREE SIGN}C"
PLATFORM = "Linux Baremetal"
# Peak HBM bandwidth per model (AMD's data sheets), amd-smi static --vram MAX_BANDWIDTH
VRAM_BANDWIDTH = {"AMD Instinct MI300X": 5300, "AMD Instinct MI325X": 6000, "AMD Instinct MI355X": 8000}
LEGEND = ["\n\nLegend:", "  SELF = Current GPU", "  ENABLED / DISABLED = Link is enabled or disabled",
          "  N/A = Not supported", "  T/F = True / False", "  C/NC = Coherant / Non-Coherant io links",
          "  64,32 = 64 bit and 32 bit atomic support", "  <BW from>-<BW to>"]


class CliError(Exception):
    """An amd-smi exception that escapes the CLI's try block: Python prints it on stderr and exits 1."""

    def __init__(self, name, message):
        super().__init__(message)
        self.name = name


def invalid_subcommand(command):
    return CliError("AmdSmiInvalidSubcommandException",
                    f"AMD-SMI Command '{command}' is invalid. Must receive valid AMD-SMI Command first. "
                    f"Run 'amd-smi -h' for more info. Error code: -10")


def invalid_parameter(parameter):
    return CliError("AmdSmiInvalidParameterException",
                    f"Parameter '{parameter}' is invalid. Run '--help' for more info. Error code: -2")


def device_not_found(value):
    return CliError("AmdSmiDeviceNotFoundException", f"Can not find a device: GPU '{value}' Error code: -3")


out = simnode.write_utf8


# --------------------------------------------------------------------------------------------- node state
load_amd = simnode.amd_state


def primary(gpu):
    return gpu["partition_id"] == 0


def socket_power(amd, gpu):
    """The socket's power (every partition's share summed), what gpu_metrics reports on a partition 0."""
    return sum(g["power_w"] for g in amd["gpus"] if g["physical_index"] == gpu["physical_index"])


def partitions_per_gpu(gpu):
    return {"SPX": 1, "DPX": 2, "QPX": 4, "CPX": 8}.get(gpu["compute_partition"], 1)


def whole(value):
    return round(float(value))


def mem_activity(gpu):
    return round(gpu["utilization_pct"] * 0.13)


def ras_total(gpu, kind):
    return sum(int(c[kind]) for c in gpu["ras"].values())


def socket_of(gpu):
    return 0 if int(gpu["bdf"].split(":")[1], 16) < 0x80 else 1


# --------------------------------------------------------------------------------------------- output forms
def capitalize(obj):
    if isinstance(obj, dict):
        return {(k.upper() if isinstance(k, str) else k): capitalize(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [capitalize(v) if isinstance(v, dict) else v for v in obj]
    return obj


def custom_dump(data, indent=0):
    text = ""
    for key, value in data.items():
        if isinstance(value, dict):
            text += "  " * indent + f"{key}:\n" + custom_dump(value, indent + 1)
        elif isinstance(value, list):
            text += "  " * indent + f"{key}:\n"
            for item in value:
                if isinstance(item, dict):
                    text += custom_dump(item, indent + 1)
                else:
                    text += "  " * (indent + 1) + f"- {item}\n"
        else:
            text += "  " * indent + f"{key}: {value}\n"
    return text


def human(device_output):
    """AMDSMILogger._convert_json_to_human_readable for one device's dict."""
    capitalized = capitalize(device_output)
    tabbed = {k: v for k, v in capitalized.items() if k not in ("GPU", "CPU", "CORE")}
    for key in tabbed:
        del capitalized[key]
    capitalized["AMDSMI_SPACING_REMOVAL"] = tabbed
    text = custom_dump(capitalized).replace("AMDSMI_SPACING_REMOVAL:\n", "").replace("'", "")
    text = re.sub(r"PROCESS_INFO_[0-9]+:", "PROCESS_INFO:", text)
    lines = []
    for line in text.splitlines():
        parts = line.split(":")
        parts[0] = parts[0].replace("-", " ", 1).replace("  ", "    ")
        lines.append(":".join(parts) + "\n")
    return "".join(lines)


def print_devices(outputs, multiple):
    """print_output: one device prints its block and a newline, several print each block plus a blank line."""
    if multiple:
        out("".join(human(o) + "\n" for o in outputs) + "\n")
    else:
        out(human(outputs[0]) + "\n")


# --------------------------------------------------------------------------------------------- arguments
def lower_argv(argv):
    """amdsmi_cli.py lowercases long options and positionals (not the value after a case-sensitive option)."""
    result, keep = [], False
    for arg in argv:
        if keep:
            result.append(arg)
            keep = False
        elif arg in CASE_SENSITIVE:
            result.append(arg.lower())
            keep = True
        elif any(arg.startswith(p + "=") for p in CASE_SENSITIVE):
            flag, _, value = arg.partition("=")
            result.append(flag.lower() + "=" + value)
        elif arg.startswith("--") or not arg.startswith("-"):
            result.append(arg.lower())
        else:
            result.append(arg)
    return result


class MainFormatter(argparse.HelpFormatter):
    """AMDSMIParserHelpFormatter."""

    def __init__(self, prog):
        super().__init__(prog=prog, indent_increment=2, max_help_position=24, width=90)
        self._action_max_length = 20


def main_help(amd):
    parser = argparse.ArgumentParser(
        formatter_class=MainFormatter, add_help=True, prog="amd-smi",
        description=f"AMD System Management Interface | Version: {amd['amd_smi_version']} | "
                    f"ROCm version: {amd['rocm_version']} | Platform: {PLATFORM}")
    subparsers = parser.add_subparsers(title="AMD-SMI Commands", parser_class=argparse.ArgumentParser,
                                       help="Descriptions:", metavar="")
    for name, aliases, text in COMMANDS:
        subparsers.add_parser(name, help=text, aliases=aliases)
    return parser.format_help()


def sub_parser(command):
    parser = argparse.ArgumentParser(prog=f"amd-smi {command}")
    if command != "version":
        parser.add_argument("-g", "--gpu", nargs="+")
    parser.add_argument("--loglevel", metavar="LEVEL")
    flags = {
        "version": [("-g", "--gpu-version"), ("-c", "--cpu-version")],
        "list": [("-e", None)],
        "static": [("-a", "--asic"), ("-b", "--bus"), ("-V", "--vbios"), ("-d", "--driver"), ("-v", "--vram"),
                   ("-p", "--partition"), ("-l", "--limit")],
        "metric": [("-p", "--power"), ("-t", "--temperature"), ("-e", "--ecc"), ("-k", "--ecc-blocks")],
        "process": [],
        "topology": [("-a", "--access"), ("-w", "--weight"), ("-o", "--hops"), ("-t", "--link-type"),
                     ("-b", "--numa-bw"), ("-c", "--coherent"), ("-n", "--atomics"), ("-d", "--dma"),
                     ("-z", "--bi-dir")],
        "monitor": [("-p", "--power-usage"), ("-t", "--temperature"), ("-u", "--gfx"), ("-m", "--mem"),
                    ("-e", "--ecc"), ("-v", "--vram-usage"), ("-V", "--violation")],
        "default": [],
    }[command]
    for short, long in flags:
        parser.add_argument(*[f for f in (short, long) if f], action="store_true",
                            dest=(long or short).lstrip("-").replace("-", "_"))
    if command in ("metric", "monitor"):
        parser.add_argument("-w", "--watch", type=int, metavar="INTERVAL")
        parser.add_argument("-W", "--watch_time", type=int, metavar="TIME")
        parser.add_argument("-i", "--iterations", type=int, metavar="ITERATIONS")
    return parser


UNSIMULATED_OPTIONS = {
    "static": {"-c", "--cache", "-B", "--board", "-R", "--process-isolation", "-r", "--ras", "-C", "--clock",
               "-P", "--soc-pstate", "-x", "--xgmi-plpd", "-u", "--numa"},
    "metric": {"-m", "--mem-usage", "-u", "--usage", "-c", "--clock", "-P", "--pcie", "-V", "--voltage", "-f",
               "--fan", "-C", "--voltage-curve", "-o", "--overdrive", "-l", "--perf-level", "-x", "--xgmi-err",
               "-E", "--energy", "-v", "--violation", "-T", "--throttle"},
    "monitor": {"-n", "--encoder", "-d", "--decoder", "-r", "--pcie", "-q", "--process"},
}


def select_gpus(amd, values):
    """-g/--gpu: IDs, BDFs, UUIDs or ``all``; None = every GPU (as a list: several-device output)."""
    gpus = amd["gpus"]
    if values is None:
        return gpus, len(gpus) > 1
    chosen = []
    for value in values:
        if value == "all":
            chosen.extend(gpus)
            continue
        match = [g for g in gpus if value in (str(g["index"]), g["bdf"], g["bdf"][5:], g["uuid"])]
        if not match:
            raise device_not_found(value)
        chosen.extend(match)
    seen, unique = set(), []
    for gpu in chosen:
        if gpu["index"] not in seen:
            seen.add(gpu["index"])
            unique.append(gpu)
    return unique, len(unique) > 1


# --------------------------------------------------------------------------------------------- commands
def version_line(amd, gpu_version=True, cpu_version=True):
    line = (f"AMDSMI Tool: {amd['amd_smi_version']} | AMDSMI Library version: {amd['amd_smi_lib_version']} | "
            f"ROCm version: {amd['rocm_version']}")
    if gpu_version:
        line += f" | amdgpu version: {amd['amdgpu_version']}"
    if cpu_version:
        line += " | amd_hsmp version: N/A"
    return line + "\n"


def cmd_version(amd, args):
    if not args.gpu_version and not args.cpu_version:
        out(version_line(amd))
    else:
        out(version_line(amd, args.gpu_version, args.cpu_version))
    return 0


def cmd_list(amd, args):
    gpus, multiple = select_gpus(amd, args.gpu)
    outputs = []
    for g in gpus:
        entry = {"gpu": g["index"], "bdf": g["bdf"], "uuid": g["uuid"], "kfd_id": g["kfd_id"],
                 "node_id": g["node_id"], "partition_id": g["partition_id"]}
        if args.e:
            entry.update(render=f"renderD{128 + g['index']}", card=f"card{g['index']}", hsa_id=g["node_id"],
                         hip_id=g["index"], hip_uuid="GPU-" + g["uuid"].replace("-", "")[-16:])
        outputs.append(entry)
    print_devices(outputs, multiple)
    return 0


def asic_serial(gpu):
    return f"0x{int(gpu['serial']) & 0xFFFFFFFFFFFFFFFF:016X}"


def static_sections(amd, g, args):
    sections = {}
    temp = f" {DEGREE}"
    if args.asic:
        sections["asic"] = {
            "market_name": g["market_name"], "vendor_id": "0x1002",
            "vendor_name": "Advanced Micro Devices Inc. [AMD/ATI]", "subvendor_id": "0x1002",
            "device_id": g["device_id"], "subsystem_id": g["subsystem_id"], "rev_id": g["rev_id"],
            "asic_serial": asic_serial(g), "oam_id": g["oam_id"], "num_compute_units": g["compute_units"],
            "target_graphics_version": g["gfx_version"]}
    if args.bus:
        sections["bus"] = {"bdf": g["bdf"], "max_pcie_width": 16, "max_pcie_speed": "32 GT/s",
                           "pcie_interface_version": "Gen 5", "slot_type": "OAM"}
    if args.vbios:
        sections["vbios"] = {k: g["vbios"][k] for k in ("name", "build_date", "part_number", "version")}
    if args.limit:
        cap = whole(g["power_cap_w"])
        sections["limit"] = {
            "max_power": f"{cap} W", "min_power": "0 W", "socket_power": f"{cap} W",
            "slowdown_edge_temperature": "N/A", "slowdown_hotspot_temperature": "100" + temp,
            "slowdown_vram_temperature": "105" + temp, "shutdown_edge_temperature": "N/A",
            "shutdown_hotspot_temperature": "110" + temp, "shutdown_vram_temperature": "115" + temp}
    if args.driver:
        sections["driver"] = {"name": "amdgpu", "version": amd["amdgpu_version"]}
    if args.partition:
        sections["partition"] = {"accelerator_partition": g["compute_partition"],
                                 "memory_partition": g["memory_partition"], "partition_id": g["partition_id"]}
    if args.vram:
        sections["vram"] = {"type": "HBM", "vendor": "UNKNOWN", "size": f"{g['vram_total_mb']} MB",
                            "bit_width": 8192,
                            "max_bandwidth": f"{VRAM_BANDWIDTH.get(g['market_name'], 5300)} GB/s"}
    return sections


def cmd_static(amd, args):
    gpus, multiple = select_gpus(amd, args.gpu)
    if not any([args.asic, args.bus, args.vbios, args.driver, args.vram, args.partition, args.limit]):
        # 26.0 dropped partition from the default set (reading it wakes the GPU); -p still prints it
        args.asic = args.bus = args.vbios = args.driver = args.vram = args.limit = True
    outputs = [{"gpu": g["index"], **static_sections(amd, g, args)} for g in gpus]
    print_devices(outputs, multiple)
    return 0


def metric_sections(amd, g, args):
    sections = {}
    reports = primary(g)
    if args.power:
        sections["power"] = {
            "socket_power": f"{whole(socket_power(amd, g))} W" if reports else "N/A",
            "gfx_voltage": "N/A", "soc_voltage": "N/A", "mem_voltage": "N/A", "throttle_status": "N/A",
            "power_management": "ENABLED"}
    if args.temperature:
        def temp(value):
            return "N/A" if value is None or not reports else f"{whole(value)} {DEGREE}"

        sections["temperature"] = {"edge": temp(g["temperature_edge_c"]), "hotspot": temp(g["temperature_hotspot_c"]),
                                   "mem": temp(g["temperature_mem_c"])}
    if args.ecc:
        ce, ue, umc = ras_total(g, "ce"), ras_total(g, "ue"), g["ras"]["umc"]
        sections["ecc"] = {"total_correctable_count": ce, "total_uncorrectable_count": ue, "total_deferred_count": 0,
                           "cache_correctable_count": ce - int(umc["ce"]),
                           "cache_uncorrectable_count": ue - int(umc["ue"])}
    if args.ecc_blocks:
        sections["ecc_blocks"] = {
            block.upper(): {"correctable_count": counts["ce"], "uncorrectable_count": counts["ue"],
                            "deferred_count": 0}
            for block, counts in g["ras"].items()}
    return sections


def watch_loop(once, args):
    """AMDSMIHelpers.handle_watch: the banner, then every INTERVAL seconds a sample (forever without -W/-i)."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    signal.signal(signal.SIGINT, lambda *_: sys.exit(0))
    out("'CTRL' + 'C' to stop watching output:\n")
    sys.stdout.flush()
    end = time.time() + args.watch_time if args.watch_time else None
    ran = 0
    while True:
        once(int(time.time()))
        sys.stdout.flush()
        ran += 1
        if args.iterations is not None and ran >= args.iterations:
            return 0
        if end is not None and time.time() + args.watch > end:
            return 0
        time.sleep(args.watch)


def cmd_metric(amd, args):
    gpus, multiple = select_gpus(amd, args.gpu)
    if not any([args.power, args.temperature, args.ecc, args.ecc_blocks]):
        args.power = args.temperature = args.ecc = args.ecc_blocks = True

    def once(stamp):
        outputs = []
        for g in gpus:
            entry = {"timestamp": stamp} if stamp is not None else {}
            entry.update({"gpu": g["index"], **metric_sections(amd, g, args)})
            outputs.append(entry)
        print_devices(outputs, multiple)
        if stamp is not None and multiple:  # metric_gpu flushes the (now empty) device list once more
            out("\n")

    if args.watch:
        return watch_loop(once, args)
    once(None)
    return 0


def cmd_process(amd, args):
    gpus, multiple = select_gpus(amd, args.gpu)
    print_devices([{"gpu": g["index"], "process_info_0": "No running processes detected"} for g in gpus], multiple)
    return 0


# --------------------------------------------------------------------------------------------- topology
def link(amd, a, b):
    """(link type, weight, hops, numa bw, access, coherent, atomics, dma, bi-dir) from GPU a to GPU b."""
    pa, pb = a["physical_index"], b["physical_index"]
    down = pa != pb and sorted((pa, pb)) in [sorted(p) for p in amd["xgmi_links_down"]]
    if down:  # over PCIe through the CPUs: GPU->CPU 20, CPU->CPU 32 (numa distance), CPU->GPU 20
        cross = socket_of(a) != socket_of(b)
        return ("PCIE", 72 if cross else 40, 3 if cross else 2, "N/A", "ENABLED", "NC", "64,32", "T", "T")
    gfx950 = a["gfx_version"] == "gfx950"
    return ("XGMI", 0 if gfx950 else 15, 1, "0-0" if gfx950 else "50000-50000", "ENABLED", "C", "64,32", "T", "T")


TABLES = [  # (arg, title, index into link(), value for the GPU itself)
    ("access", "ACCESS TABLE", 4, "ENABLED"), ("weight", "WEIGHT TABLE", 1, 0), ("hops", "HOPS TABLE", 2, 0),
    ("link_type", "LINK TYPE TABLE", 0, "SELF"), ("numa_bw", "NUMA BW TABLE", 3, "N/A"),
    ("coherent", "CACHE COHERANCY TABLE", 5, "SELF"), ("atomics", "ATOMICS TABLE", 6, "SELF"),
    ("dma", "DMA TABLE", 7, "SELF"), ("bi_dir", "BI-DIRECTIONAL TABLE", 8, "SELF"),
]


def cmd_topology(amd, args):
    gpus, _ = select_gpus(amd, args.gpu)
    if not any(getattr(args, arg) for arg, _, _, _ in TABLES):
        for arg, _, _, _ in TABLES:
            setattr(args, arg, True)
    header = "".rjust(12) + "".join(g["bdf"].rjust(13) for g in gpus)
    text = ""
    for arg, title, field, own in TABLES:
        if not getattr(args, arg):
            continue
        rows = []
        for a in gpus:
            cells = [str(own if a is b else link(amd, a, b)[field]).ljust(13) for b in gpus]
            rows.append((f"{a['bdf']} " + "".join(cells)).rstrip())
        text += f"{title}:\n{header}\n" + "\n".join(rows) + "\n"
    out(text + "\n".join(LEGEND) + "\n")
    return 0


# --------------------------------------------------------------------------------------------- watch loop
# amd-smi monitor --violation: (column, width) as amdsmi_commands.py monitor() prints them; each is the share of
# time (%) a firmware limit held the clocks (amdsmi_get_violation_status per_ppt_pwr, per_socket_thrm,
# per_prochot_thrm, per_vr_thrm, per_hbm_thrm).
VIOLATION_COLUMNS = (("PVIOL", 10), ("TVIOL", 10), ("PHOT_TVIOL", 12), ("VR_TVIOL", 10), ("HBM_TVIOL", 11))
# The profile's gpu_throttle reasons (named as NVML's) -> the AMD limit of the same meaning: PROCHOT is the
# board's hardware slowdown signal, VR the voltage regulators' thermal limit, the socket limit the firmware's
# own thermal throttling.
THROTTLE_COLUMNS = {"hw_slowdown": "phot_tviol", "hw_power_brake": "phot_tviol",
                    "hw_power_brake_slowdown": "phot_tviol", "hw_thermal_slowdown": "vr_tviol",
                    "sw_thermal_slowdown": "tviol"}
HOTSPOT_SLOWDOWN_C, HBM_SLOWDOWN_C = 100, 105  # what static --limit prints (SLOWDOWN_HOTSPOT/VRAM_TEMPERATURE)
RAMP_S = 4.0  # a gpu_hot GPU reaches its temperatures over this long, as on the nvidia-smi loop
# Under a sustained GEMM at the power cap (ours, not yet checked against a real MI300X capture): GFX clock at
# 72 % of max when the cap first bites and 66 % once warm (2100 -> 1512 -> 1386 MHz), hotspot 82 C, HBM 68 C,
# PVIOL (package power tracking) at 100 %. Below LOAD_CAP of a full load the GPU stays under its cap.
LOAD_CAP = 0.5
LOADED_HOTSPOT_C, LOADED_HBM_C = 82, 68
LOADED_GFX_COLD, LOADED_GFX_WARM = 0.72, 0.66
CAP_MARGIN_W = 3.0


class WatchSampler:
    """The node's devices as one ``monitor -w`` process samples them: the node's load (simnode.CpuMeter: the
    first sample reads idle, having no interval behind it) drives power, clocks, activity, temperatures and
    PVIOL; the profile's run faults (node.json ``telemetry.faults``, times from this process's start) act on
    every partition of their physical GPU: ``gpu_hot`` (temperatures; past the slowdown limits TVIOL / HBM_TVIOL
    and a lower clock), ``gpu_throttle`` (its limit's column at 100 % and the clock held), ``ecc_growth`` (the
    counts partition 0 reports). ``xid_during_run`` is an NVIDIA driver event: an AMD loop ignores it."""

    def __init__(self, amd):
        node = simnode.read_json(simnode.sim_root() + "/node.json", {})
        self.amd, self.start, self.samples, self.heat, self.last = amd, time.time(), 0, {}, 0.0
        self.faults = [f for f in ((node.get("telemetry") or {}).get("faults") or []) if f.get("kind") != "xid"]
        self.meter = simnode.CpuMeter(node.get("node"))

    def sample(self):
        elapsed = time.time() - self.start
        load = simnode.load_of(self.meter.cores()) if self.samples else 0.0
        dt, self.last = elapsed - self.last, elapsed
        phys = {g["physical_index"] for g in self.amd["gpus"]}
        for p in phys:
            self.heat[p] = simnode.heat_step(self.heat.get(p, 0.0), load, dt)
        self.samples += 1
        return [self.state(g, elapsed, load) for g in self.amd["gpus"]]

    def state(self, gpu, elapsed, load):
        g, p = dict(gpu), gpu["physical_index"]
        heat, top = self.heat.get(p, 0.0), gpu["max_gfx_clock_mhz"]
        shares = {"pviol": 0, "tviol": 0, "phot_tviol": 0, "vr_tviol": 0, "hbm_tviol": 0}
        temp = gpu["temperature_hotspot_c"] + (LOADED_HOTSPOT_C - gpu["temperature_hotspot_c"]) * heat
        mem_temp = gpu["temperature_mem_c"] + (LOADED_HBM_C - gpu["temperature_mem_c"]) * heat
        clock, power = gpu["gfx_clock_mhz"], gpu["power_w"]
        if load > 0:
            share = 1.0 / partitions_per_gpu(gpu)  # each partition reports its share of the socket
            demand = load / LOAD_CAP
            if demand >= 1:
                power = (gpu["power_cap_w"] - CAP_MARGIN_W) * share
                clock = int(top * (LOADED_GFX_COLD - (LOADED_GFX_COLD - LOADED_GFX_WARM) * heat))
                shares["pviol"] = 100
            else:
                power = gpu["power_w"] + (gpu["power_cap_w"] * share - gpu["power_w"]) * demand
                clock = top
            g["utilization_pct"] = round(100 * min(1.0, demand))
        held = None
        for fault in self.faults:
            if fault.get("gpu") != p or elapsed < float(fault.get("after_s", 0)):
                continue
            if fault["kind"] == "gpu_hot":
                progress = min(1.0, (elapsed - fault["after_s"]) / RAMP_S)
                temp = max(temp, temp + (fault["temperature_c"] - temp) * progress)
                mem_temp = max(mem_temp, mem_temp + (fault["memory_temperature_c"] - mem_temp) * progress)
            elif fault["kind"] == "gpu_throttle":
                shares[THROTTLE_COLUMNS.get(fault.get("reason"), "phot_tviol")] = 100
                wanted = min(int(fault.get("sm_clock_mhz") or top // 2), top)
                held = wanted if held is None else min(held, wanted)
            elif fault["kind"] == "ecc_growth" and primary(gpu):
                ras = {block: dict(counts) for block, counts in gpu["ras"].items()}
                umc = ras.setdefault("umc", {"ce": 0, "ue": 0})
                umc["ce"] = int(umc["ce"]) + int(fault["corrected_per_min"] * (elapsed - fault["after_s"]) / 60)
                umc["ue"] = int(umc["ue"]) + int(fault.get("uncorrected", 0))
                g["ras"] = ras
        if temp >= HOTSPOT_SLOWDOWN_C:
            shares["tviol"] = 100
            clock = min(clock, top // 2)
        if mem_temp >= HBM_SLOWDOWN_C:
            shares["hbm_tviol"] = 100
            clock = min(clock, top // 2)
        if held is not None:
            clock = held
        g.update(temperature_hotspot_c=round(temp), temperature_mem_c=round(mem_temp), gfx_clock_mhz=clock,
                 power_w=power, violation=shares)
        return g


# --------------------------------------------------------------------------------------------- monitor
def monitor_row(amd, g, args, stamp):
    """One device's row and the header (monitor(): the header grows as each column is added)."""
    reports = primary(g)
    na = "N/A"
    header = "GPU" if stamp is None else "TIMESTAMP".rjust(10) + "  GPU"
    row = "" if stamp is None else str(stamp).rjust(10) + "  "
    row += str(g["index"]).rjust(3)
    cols = []
    if args.power_usage:
        cols.append(("POWER", 7, f"{whole(socket_power(amd, g))} W" if reports else na))
        if not args.default_output:
            cols.append(("PWR_CAP", 9, f"{whole(g['power_cap_w'])} W" if reports else na))
    if args.temperature:
        cols.append(("GPU_T", 8, f"{whole(g['temperature_hotspot_c'])} {DEGREE}" if reports else na))
        cols.append(("MEM_T", 8, f"{whole(g['temperature_mem_c'])} {DEGREE}" if reports else na))
    if args.gfx:
        cols.append(("GFX_CLK", 10, f"{g['gfx_clock_mhz']} MHz" if reports else na))
        cols.append(("GFX%", 7, f"{g['utilization_pct']} %" if reports else na))
    if args.mem:
        cols.append(("MEM%", 7, f"{mem_activity(g)} %" if reports else na))
        if not args.default_output:
            cols.append(("MEM_CLOCK", 11, f"{g['mem_clock_mhz']} MHz" if reports else na))
    if args.default_output:  # the default set also has the encoder and decoder columns (MI3x: no encoder)
        cols.append(("ENC%", 7, na))
        cols.append(("DEC%", 7, "0 %" if reports else na))
    if args.ecc:
        cols.append(("SINGLE_ECC", 12, str(ras_total(g, "ce"))))
        cols.append(("DOUBLE_ECC", 12, str(ras_total(g, "ue"))))
        cols.append(("PCIE_REPLAY", 13, "0"))
    used, total = g["vram_used_mb"], g["vram_total_mb"]
    if args.vram_usage and not args.default_output:
        cols.append(("VRAM_USED", 11, f"{used} MB"))
        cols.append(("VRAM_FREE", 12, f"{total - used} MB"))
        cols.append(("VRAM_TOTAL", 12, f"{total} MB"))
        cols.append(("VRAM%", 9, f"{round(used / total, 2)} %"))
    if args.vram_usage and args.default_output:
        cols.append(("VRAM_USAGE", 16, f"{used / 1024:5.1f}/{total / 1024:5.1f} GB".rjust(16)))
    if args.violation:  # after every other column (and PCIE_BW), widths kPVIOL_MAX_WIDTH ... kHBM_MAX_WIDTH
        shares = g.get("violation") or {}
        for name, width in VIOLATION_COLUMNS:
            cols.append((name, width, f"{shares.get(name.lower(), 0)} %"))
    for name, width, value in cols:
        header += name.rjust(width)
        row += value.rjust(width)
    return header, row.rstrip()


def cmd_monitor(amd, args):
    gpus, _ = select_gpus(amd, args.gpu)
    args.default_output = not any([args.power_usage, args.temperature, args.gfx, args.mem, args.ecc,
                                   args.vram_usage, args.violation])
    if args.default_output:
        args.power_usage = args.temperature = args.gfx = args.mem = args.vram_usage = True
    sampler = WatchSampler(amd) if args.watch else None

    def once(stamp):
        now = amd
        if sampler is not None:
            now = {**amd, "gpus": sampler.sample()}
        chosen = {g["index"] for g in gpus}
        rows = [monitor_row(now, g, args, stamp) for g in now["gpus"] if g["index"] in chosen]
        text = rows[0][0] + "\n" + "\n".join(r for _, r in rows) + "\n"
        out(text + ("\n\n" if stamp is not None else ""))

    if args.watch:
        return watch_loop(once, args)
    once(None)
    return 0


# --------------------------------------------------------------------------------------------- default view
def cmd_default(amd, _args):
    def line(text):
        return "| " + text.ljust(76) + " |\n"

    rule = "+" + "-" * 78 + "+\n"
    split = "|" + "-" * 37 + "+" + "-" * 40 + "|\n"
    text = rule + line(f"AMD-SMI {amd['amd_smi_version']:<21}amdgpu version: {amd['amdgpu_version']:<9}"
                       f"ROCm version: {amd['rocm_version']}")
    text += line(f"Platform: {PLATFORM}") + split
    text += "| BDF                        GPU-Name | Mem-Uti   Temp   UEC       Power-Usage |\n"
    text += "| GPU  HIP-ID  OAM-ID  Partition-Mode | GFX-Uti    Fan               Mem-Usage |\n"
    text += "|" + "=" * 37 + "+" + "=" * 40 + "|\n"
    rows = []
    for g in amd["gpus"]:
        reports = primary(g)
        name = g["market_name"] if len(g["market_name"]) <= 22 else "..." + g["market_name"][-19:]
        mem = f"{mem_activity(g)} %" if reports else "N/A"
        temp = f"{whole(g['temperature_hotspot_c'])} {DEGREE}" if reports else "N/A"
        power = f"{whole(socket_power(amd, g))}/{whole(g['power_cap_w'])} W" if reports else "N/A"
        left = mem.ljust(8) + temp.rjust(6) + "   " + str(ras_total(g, "ue") if reports else 0)
        first = f"| {g['bdf']} {name:>22} | " + left + power.rjust(38 - len(left)) + " |\n"
        oam = str(g["oam_id"]) if reports else "N/A"
        mode = f"{g['compute_partition']}/{g['memory_partition']}" if reports else "N/A"
        gfx = f"{g['utilization_pct']} %" if reports else "N/A"
        usage = f"{g['vram_used_mb']}/{g['vram_total_mb']} MB"
        second = (f"| {g['index']:>3}{g['index']:>8}{oam:>8}{mode:>16} | " + gfx.ljust(8) + "N/A".rjust(6)
                  + usage.rjust(24) + " |\n")
        rows.append(first + second)
    text += split.join(rows)
    text += "+" + "-" * 37 + "+" + "-" * 40 + "+\n" + rule
    text += line("Processes:")
    text += "|  GPU        PID  Process Name          GTT_MEM  VRAM_MEM  MEM_USAGE     CU % |\n"
    text += "|" + "=" * 78 + "|\n" + line(" No running processes found") + rule
    out(text)
    return 0


HANDLERS = {"version": cmd_version, "list": cmd_list, "static": cmd_static, "metric": cmd_metric,
            "process": cmd_process, "topology": cmd_topology, "monitor": cmd_monitor, "default": cmd_default}


def run(argv):
    amd = load_amd()
    if not amd or not amd.get("gpus"):
        # AMDSMICommands.__init__: no device handles -> logging.error, the version string, sys.exit(-1)
        sys.stderr.write("ERROR:root:Unable to detect any GPU devices, check amdgpu version and module status "
                         "(sudo modprobe amdgpu)\n")
        if amd:
            out(version_line(amd, gpu_version=False, cpu_version=False))
        return 255
    argv = lower_argv(argv)
    if not argv:
        argv = ["default"]
    if argv[0] in ("-h", "--help"):
        out(main_help(amd))
        return 0
    if argv[0] not in VALID:
        raise invalid_subcommand(argv[0])
    command = ALIASES.get(argv[0], argv[0])
    rest = argv[1:]
    if command not in SIMULATED or any(a in ("--json", "--csv", "--file") for a in rest) or \
            any(a in UNSIMULATED_OPTIONS.get(command, ()) for a in rest):
        sys.stderr.write(f"amd-smi (simulated node): '{' '.join(argv)}' is not simulated\n")
        return 2
    args, extras = sub_parser(command).parse_known_args(rest)
    if extras:
        raise invalid_parameter(" ".join(extras))
    return HANDLERS[command](amd, args)


def main(argv):
    try:
        return run(argv)
    except CliError as exc:
        sys.stdout.flush()
        sys.stderr.write(f"amdsmi_cli_exceptions.{exc.name}: {exc}\n")
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
