#!/usr/bin/python3
"""Simulated ``rocm-smi`` for one simulated AMD node (standalone: stdlib and ``simnode`` only).

Reads ``node.json``'s ``amd`` section (sim/amd.py) and prints what ``python_smi_tools/rocm_smi.py`` prints
for it, in the layout of the node's ROCm version. Evidence:

* ROCm/rocm_smi_lib tag ``rocm-6.0.2`` (python_smi_tools/rocm_smi.py ``showAllConcise``): the ROCm 6.0 table
  (``[Model : Revision]`` from the subsystem id and revision, each name padded to 20 characters, the product
  name on a second line, ``Partitions (Mem, Compute)``, VRAM% as ``'% 3.0f%%'``); commit 4b5ccb5 (first in
  rocm-6.1.0) replaced it with the ``Node  IDs (DID, GUID)`` layout and ``(Mem, Compute, ID)``;
* ROCm/rocm-systems commit 1b1610fc2b2ab32af71e6e04e4d4a6a4ae597992 (projects/rocm-smi-lib, the ROCm 7.0
  tree, rocm-smi 4.0.0): the 7.x table, widths ``max(len(header) + 2, len(value) + 2)``, plain spaces (no
  no-break spaces: those in the MI355X capture are a web copy artefact, as its trailing tabs), the
  subheader printed in italics (``printLog(..., useItalics=True)`` wraps it in ESC[3m ... ESC[0m, on a pipe
  too), the banner lines from ``printLogSpacer`` (centred, odd titles padded with one more ``=``), the two
  newlines ``main()`` prints first (``print('\\n')``), no footer for the concise table;
* the same files: ``--showdriverversion`` (``Driver version: <amdgpu version>``), ``--showcomputepartition``
  / ``--showmemorypartition`` (``GPU[n]\\t\\t: Compute Partition: CPX``), each framed by the 90-column
  banner and ``End of ROCm SMI Log``; ``--json`` with nothing else asks for the concise table, which
  refuses JSON (``NOT_SUPPORTED: Cannot print JSON/CSV output for concise output``, exit 1; ROCm 6.0 says
  ``ERROR:``).

The partitions of a socket beyond the first have no hwmon, power or clock files: their temperature, power,
clocks, perf level, power cap and GPU use read N/A ("None" clocks and "Unsupported" in the 6.0 code), their
VRAM% comes from their own memory. Not simulated (stderr note, exit 2): ``-a`` and the other ``--show*``
options, ``--csv``, set/reset options.
"""

import json
import sys

import simnode

HEADER = " ROCm System Management Interface "
FOOTER = " End of ROCm SMI Log "
APP_WIDTH = 90
ITALICS, END = "\033[3m", "\033[0m"
DEGREE = "\N{DEGREE SIGN}C"
SIMULATED = {"--showdriverversion", "--showcomputepartition", "--showmemorypartition", "--json"}


out = simnode.write_utf8


load_amd = simnode.amd_state


def version_tuple(text):
    parts = []
    for piece in str(text).split(".")[:3]:
        try:
            parts.append(int(piece))
        except ValueError:
            parts.append(0)
    return tuple(parts + [0] * (3 - len(parts)))


def spacer(title=None, fill="=", width=0):
    """printLogSpacer."""
    size = width or APP_WIDTH
    if size % 2:
        size += 1
    if not title:
        return fill * size + "\n"
    if len(title) % 2:
        title += fill
    side = fill * int((size - len(title)) / 2)
    return side + title + side + "\n"


def socket_power(amd, gpu):
    return sum(g["power_w"] for g in amd["gpus"] if g["physical_index"] == gpu["physical_index"])


def power_string(watts):
    """str(microwatts / 1000000), as rocm_smi.py prints a power reading."""
    return str(round(watts * 1000000) / 1000000)


def row_text(words, widths):
    return "".join(str(w).ljust(widths[i]) for i, w in enumerate(words))


def concise_layout(header, subheader, rows):
    for i, sub in enumerate(subheader):
        if len(header[i]) < len(sub):
            header[i] += " " * (len(sub) - len(header[i]))
        elif len(sub) < len(header[i]):
            subheader[i] = sub + " " * (len(header[i]) - len(sub))
    widths = [len(h) + 2 for h in header]
    for row in rows:
        widths = [max(w, len(str(v)) + 2) for w, v in zip(widths, row, strict=True)]
    return header, subheader, widths


def concise_60(amd, gpus):
    """showAllConcise of ROCm 6.0.x."""
    header = ["Device", "[Model : Revision]", "Temp", "Power", "Partitions", "SCLK", "MCLK", "Fan", "Perf",
              "PwrCap", "VRAM%", "GPU%"]
    subheader = ["", "Name (20 chars)", "(Junction)", "(Socket)", "(Mem, Compute)", "", "", "", "", "", "", ""]
    rows, names = [], []
    for n, g in enumerate(gpus):
        first = g["partition_id"] == 0
        series = g["market_name"][:20].ljust(20)
        model = f"[{g['subsystem_id']} : {g['rev_id']}]"[:20].ljust(20)
        used, total = g["vram_used_mb"], g["vram_total_mb"]
        rows.append([
            n, model, f"{g['temperature_hotspot_c']}{DEGREE}" if first else "N/A",
            power_string(socket_power(amd, g)) + "W" if first else "N/A",
            f"{g['memory_partition']}, {g['compute_partition']}",
            f"{g['gfx_clock_mhz']}Mhz" if first else "None", f"{g['mem_clock_mhz']}Mhz" if first else "None",
            "0%", "auto" if first else "Unsupported", f"{float(g['power_cap_w']) // 1}W" if first else "Unsupported",
            "% 3.0f%%" % (100 * (used / total)), f"{g['utilization_pct']}%" if first else "Unsupported"])
        names.append(["", series] + [""] * 10)
    header, subheader, widths = concise_layout(header, subheader, rows)
    head = row_text(header, widths)
    text = spacer(HEADER, width=len(head)) + spacer(" Concise Info ", width=len(head))
    text += head + "\n" + ITALICS + row_text(subheader, widths) + END + "\n" + spacer(width=len(head))
    for row, name in zip(rows, names, strict=True):
        text += row_text(row, widths) + "\n" + row_text(name, widths) + "\n"
    return text + spacer(width=len(head)) + spacer(FOOTER, width=len(head))


def concise_7(amd, gpus):
    """showAllConcise of ROCm 6.1 and later (the 7.0 tree)."""
    header = ["Device", "Node", "IDs", "", "Temp", "Power", "Partitions", "SCLK", "MCLK", "Fan", "Perf", "PwrCap",
              "VRAM%", "GPU%"]
    subheader = ["", "", "(DID,", "GUID)", "(Junction)", "(Socket)", "(Mem, Compute, ID)", "", "", "", "", "", "",
                 ""]
    rows = []
    for n, g in enumerate(gpus):
        first = g["partition_id"] == 0
        used, total = g["vram_used_mb"], g["vram_total_mb"]
        rows.append([
            n, g["node_id"], f"{g['device_id']}, ", g["kfd_id"],
            f"{g['temperature_hotspot_c']}{DEGREE}" if first else "N/A",
            power_string(socket_power(amd, g)) + "W" if first else "N/A",
            f"{g['memory_partition']}, {g['compute_partition']}, {g['partition_id']}",
            f"{g['gfx_clock_mhz']}Mhz" if first else "N/A", f"{g['mem_clock_mhz']}Mhz" if first else "N/A",
            "0%", "auto" if first else "N/A", f"{float(g['power_cap_w']) // 1}W" if first else "N/A",
            f"{(100 * (used / total)) // 1:<.0f}%", f"{g['utilization_pct']}%" if first else "N/A"])
    header, subheader, widths = concise_layout(header, subheader, rows)
    head = row_text(header, widths)
    text = spacer(HEADER, width=len(head)) + spacer(" Concise Info ", width=len(head))
    text += head + "\n" + ITALICS + row_text(subheader, widths) + END + "\n" + spacer(width=len(head))
    for row in rows:
        text += row_text(row, widths) + "\n"
    return text + spacer(width=len(head)) + spacer(FOOTER, width=len(head))


def devices(amd, argv):
    """-d/--device N [N ...] (DRM indices), otherwise every device."""
    gpus = amd["gpus"]
    picked, i = None, 0
    while i < len(argv):
        if argv[i] in ("-d", "--device"):
            picked = picked or []
            i += 1
            while i < len(argv) and not argv[i].startswith("-"):
                picked.append(argv[i])
                i += 1
            continue
        i += 1
    if picked is None:
        return gpus, None
    chosen = []
    for value in picked:
        if not value.isdigit() or int(value) >= len(gpus):
            return None, value
        chosen.append(gpus[int(value)])
    return chosen, None


def main(argv):
    amd = load_amd()
    if not amd or not amd.get("gpus"):
        out("ERROR: No DRM devices available. Exiting\n")
        return 1
    old = version_tuple(amd.get("rocm_version", "7.0.0")) < (6, 1, 0)
    gpus, bad = devices(amd, argv)
    if gpus is None:
        sys.stderr.write(f"WARNING: No such device card{bad}\n")
        return 0
    options = [a for a in argv if a.startswith("--")]
    unknown = [a for a in options if a not in SIMULATED and a != "--device"]
    if unknown or any(a.startswith("-") and not a.startswith("--") and a != "-d" for a in argv):
        sys.stderr.write(f"rocm-smi (simulated node): '{' '.join(argv)}' is not simulated\n")
        return 2
    as_json = "--json" in options
    if not argv or argv == ["--json"]:  # isConciseInfoRequested: no argument, or only --json / --csv
        if as_json:
            out(("ERROR" if old else "NOT_SUPPORTED") + ": Cannot print JSON/CSV output for concise output\n")
            return 1
        out("\n\n" + (concise_60(amd, gpus) if old else concise_7(amd, gpus)))
        return 0
    shows = [a for a in options if a.startswith("--show")]
    cards = {f"card{g['index']}": {} for g in gpus}
    system = {}
    text = "\n\n" + spacer(HEADER)
    if "--showdriverversion" in shows:
        system["Driver version"] = amd["amdgpu_version"]
        text += spacer(" Version of System Component ") + f"Driver version: {amd['amdgpu_version']}\n" + spacer()
    for option, title, key, field in (
            ("--showcomputepartition", " Current Compute Partition ", "Compute Partition", "compute_partition"),
            ("--showmemorypartition", " Current Memory Partition ", "Memory Partition", "memory_partition")):
        if option in shows:
            text += spacer(title)
            for g in gpus:
                cards[f"card{g['index']}"][key] = g[field]
                text += f"GPU[{g['index']}]\t\t: {key}: {g[field]}\n"
            text += spacer()
    if as_json:  # the cards' keys were made first, "system" after; empty cards are dropped
        data = {k: v for k, v in cards.items() if v}
        if system:
            data["system"] = system
        if not data:
            sys.stderr.write("WARNING: No JSON data to report\n")
            return 0
        out(json.dumps(data) + "\n")
        return 0
    out(text + spacer(FOOTER))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
