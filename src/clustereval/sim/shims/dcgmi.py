#!/usr/bin/python3
# ruff: noqa: UP031  (printf formats mirror the C format strings of the real tool, field by field)
"""Simulated ``dcgmi`` for one simulated node (standalone: stdlib only, no clustereval import).

Reads ``$SIMNODE_ROOT/node.json`` (default ``/sim/node.json``) and prints ``dcgmi discovery -l`` as DCGM
prints it: the ``N GPUs found.`` box and the NvSwitch box (DCGM 3.1 layout); DCGM >= 3.3 adds the
ConnectX and CPU boxes. ``dcgmi -v`` prints the version block. GPUs marked missing in the profile are
absent, as they are from the driver. A node whose ``nvidia_smi`` fault is ``garbage``/``missing`` still
has a working dcgmi: the fault is in the one tool only.
"""

import json
import os
import sys
import time

WIDE = 70


def load_node():
    root = os.environ.get("SIMNODE_ROOT") or "/sim"
    with open(os.path.join(root, "node.json")) as fh:
        return json.load(fh)


def version_tuple(text):
    parts = []
    for piece in text.split(".")[:3]:
        try:
            parts.append(int(piece))
        except ValueError:
            parts.append(0)
    return tuple(parts)


def box_rule(first):
    return "+" + "-" * (first + 2) + "+" + "-" * WIDE + "+"


def discovery_list(node):
    gpus = node["gpus"]
    out = [
        "%d GPUs found." % len(gpus),
        box_rule(6),
        "| GPU ID | Device Information".ljust(9 + WIDE + 1) + "|",
        box_rule(6),
    ]
    for gpu in gpus:
        rows = ["Name: " + gpu["name"], "PCI Bus ID: " + gpu["pci_bus_id"], "Device UUID: " + gpu["uuid"]]
        for k, text in enumerate(rows):
            ident = str(gpu["index"]) if k == 0 else ""
            out.append(f"| {ident.ljust(6)} | {text.ljust(WIDE - 2)} |")
        out.append(box_rule(6))
    out += ["0 NvSwitches found.", "+-----------+", "| Switch ID |", "+-----------+", "+-----------+"]
    if version_tuple(node.get("dcgm_version", "3.1.8")) >= (3, 3):
        out += ["0 ConnectX found.", "+----------+", "| ConnectX |", "+----------+", "+----------+"]
        out += [
            "0 CPUs found.",
            box_rule(6),
            "| CPU ID | Device Information".ljust(9 + WIDE + 1) + "|",
            box_rule(6),
            box_rule(6),
        ]
    return "\n".join(out) + "\n"


def version_block(node):
    version = node.get("dcgm_version", "3.1.8")
    fields = [("Version", version), ("Build ID", "8"), ("Build Type", "Release"), ("CPU Arch", "x86_64")]
    body = "".join("{} : {}\n".format(*kv) for kv in fields)
    return "\n" + body + "\nHostengine build info:\n" + body


# DCGM 4.x health watches (modules/health/DcgmHealthWatch.cpp): the "devastating" Xids it always watches
# (code -> (health, DCGM_FR message or None for DCGM_FR_XID_ERROR "Detected XID %u for GPU %u", the table's
# text)), and the volatile DBE watch on DCGM_FI_DEV_ECC_DBE_VOL_TOTAL (311).
FALLEN_OFF_BUS_MSG = "GPU %d has fallen off the bus"
DEVASTATING_XIDS = {
    48: ("Failure", None, "Double Bit ECC Error"),
    74: ("Failure", None, "NVLink Critical Error"),
    79: ("Failure", FALLEN_OFF_BUS_MSG, FALLEN_OFF_BUS_MSG),
    94: ("Warning", "GPU had a contained error.", "GPU had a contained error."),
    95: ("Failure", "GPU had an uncontained error (XID 95)", "GPU had an uncontained error (XID 95)"),
    119: ("Failure", None, "GSP RPC Timeout"),
    120: ("Failure", None, "GSP Error"),
    140: ("Failure", None, "ECC unrecovered error"),
}
FIELD_XID_ERRORS = 230
FIELD_ECC_DBE_VOL_TOTAL = 311
HEALTH_RANK = {"Healthy": 0, "Warning": 1, "Failure": 2}
MAX_SIZE_OF_HEALTH_INFO = 54
INJECTED = "dcgm-injected.json"


def run_dir():
    return os.path.join(os.environ.get("SIMNODE_ROOT") or "/sim", "run")


def read_json(path, default):
    try:
        with open(path) as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return default


def incidents(node):
    """[(gpu id, system label, health, message)] as the hostengine's health check finds them: injected
    fields (dcgmi test --inject), and Xid 79 for GPUs the driver lost since boot (run/runtime.json)."""
    injected = read_json(os.path.join(run_dir(), INJECTED), {})
    lost = set(read_json(os.path.join(run_dir(), "runtime.json"), {}).get("lost_gpus") or [])
    out = []
    for gpu in node["gpus"]:
        gid = gpu["index"]
        fields = injected.get(str(gid)) or {}
        dbe = fields.get(str(FIELD_ECC_DBE_VOL_TOTAL))
        if isinstance(dbe, int) and dbe > 0:
            out.append((gid, "Memory system", "Failure",
                        "Detected %d volatile double-bit ECC error(s) in GPU %u." % (dbe, gid)))
        history = set(fields.get("xid_history") or [])
        if gid in lost:
            history.add(79)
        for xid in sorted(history):
            if xid not in DEVASTATING_XIDS:
                continue
            health, fr_message, table_text = DEVASTATING_XIDS[xid]
            if fr_message is None:
                message = "Detected XID %u for GPU %u" % (xid, gid)
            else:
                message = fr_message.replace("%d", str(gid)) if "%d" in fr_message else fr_message
            detail = " (triggered by XID %d: %s)" % (xid, table_text)
            out.append((gid, "Internal error", health, message + " " + detail))
    return out


def split_message(text):
    """Health::AddErrorMessage: lines of at most 54 characters, broken at word ends."""
    msg = text.replace("\n", " ")
    if len(msg) <= MAX_SIZE_OF_HEALTH_INFO:
        return [msg]
    out, p, start = [], 0, 0
    while start < len(msg):
        p += MAX_SIZE_OF_HEALTH_INFO
        if p >= len(msg):
            p = len(msg) - 1
        elif p != len(msg) - 1:
            while msg[p] != " ":
                if msg[p + 1] in " .,/":
                    break
                p -= 1
            while msg[p] == " ":
                p -= 1
        while start < len(msg) and msg[start] == " ":
            start += 1
        if start >= len(msg):
            break
        out.append(msg[start:p + 1])
        start = p + 2
    return out


def tree_row(level, prefix, label, value):
    """DcgmiOutputTree(28, 60)::rowStr."""
    left = prefix.rjust(level * 3) + label if level else prefix + label
    return "| " + left.ljust(25) + " | " + value.ljust(56) + " |\n"


def health_report(node):
    """``dcgmi health -c``: the Health Monitor Report tree (Health::GenerateOutputFromResponse)."""
    found = incidents(node)
    rule = "+---------------------------+----------------------------------------------------------+\n"
    overall = max((h for _, _, h, _ in found), key=HEALTH_RANK.get, default="Healthy")
    out = [rule, "| Health Monitor Report" + " " * 64 + "|\n", rule.replace("-", "="),
           tree_row(0, "", "Overall Health", overall)]
    if found:
        out.append(tree_row(0, "", "GPU", ""))
        for gid in sorted({g for g, _, _, _ in found}):
            mine = [f for f in found if f[0] == gid]
            out.append(tree_row(1, "-> ", str(gid), max((h for _, _, h, _ in mine), key=HEALTH_RANK.get)))
            out.append(tree_row(2, "-> ", "Errors", ""))
            systems = []
            for _, system, health, message in mine:  # AppendSystemIncidents: one entry per system
                if systems and systems[-1][0] == system:
                    systems[-1][1] = max(systems[-1][1], health, key=HEALTH_RANK.get)
                    systems[-1][2] += ", " + message
                else:
                    systems.append([system, health, message])
            for system, health, message in systems:
                out.append(tree_row(3, "-> ", system, health))
                out += [tree_row(3, "", "", line) for line in split_message(message)]
    out.append(rule)
    return "".join(out)


# dcgmi test --inject (dcgmi/CommandLineParser.cpp ProcessAdminCommandLine, DcgmiTest.cpp InjectCache).
INJECT_OK = "Successfully injected field info.\n"
NOT_SUPPORTED = "Feature not supported"  # errorString(DCGM_ST_NOT_SUPPORTED)
DCGM_ST_NOT_SUPPORTED = -6


def tclap_error(message):
    sys.stderr.write("PARSE ERROR: \n             %s\n\n" % message)
    return 254  # (dcgmReturn_t)-2


def test_command(node, argv):
    opts, k = {}, 0
    names = {"--gpuid": "gpuid", "-g": "group", "--group": "group", "-f": "field", "--field": "field",
             "-v": "value", "--value": "value", "--offset": "offset", "--host": "host"}
    while k < len(argv):
        arg, value = argv[k], None
        if arg.startswith("--") and "=" in arg:
            arg, value = arg.split("=", 1)
        if arg in ("--inject", "--introspect", "--pause", "--resume"):
            opts.setdefault("modes", []).append(arg)
        elif arg in names:
            if value is None:
                k += 1
                if k >= len(argv):
                    return tclap_error("Missing a value for the argument: %s" % arg)
                value = argv[k]
            opts[names[arg]] = value
        else:
            return tclap_error("Couldn't find match for argument")
        k += 1
    modes = opts.get("modes") or []
    if len(modes) != 1:
        return tclap_error("One of required arguments (--introspect|--inject|--pause|--resume) not provided."
                           if not modes else "Only one of (--introspect|--inject|--pause|--resume) may be given.")
    if modes[0] != "--inject":
        sys.stdout.write("Error: Unable to get field info for entity ID: 0. Return: %s\n" % NOT_SUPPORTED)
        return DCGM_ST_NOT_SUPPORTED & 0xFF
    if "gpuid" in opts and "group" in opts:
        return tclap_error("Both group and GPU ID set. Please use only one at a time")
    if "field" not in opts:
        return tclap_error("The --field argument is required for --inject and --introspect")
    if "group" in opts:
        return tclap_error("Injection can only be specified for a single GPU")
    if "value" not in opts:
        return tclap_error("The -v/--value argument is required for --inject")
    try:
        gpu_id = int(opts.get("gpuid", "1"))
    except ValueError:
        return tclap_error("Couldn't read argument value from string '%s'" % opts["gpuid"])
    field = int(opts["field"]) if opts["field"].strip().lstrip("-").isdigit() else 0
    provider = read_json(os.path.join(os.environ.get("SIMNODE_ROOT") or "/sim", "provider.json"), {})
    if not provider.get("dcgm_injection", True) or gpu_id not in {g["index"] for g in node["gpus"]}:
        sys.stdout.write("Error: Unable to inject info. Return: %s\n" % (
            NOT_SUPPORTED if not provider.get("dcgm_injection", True) else "Bad parameter passed to function"))
        return (DCGM_ST_NOT_SUPPORTED if not provider.get("dcgm_injection", True) else -1) & 0xFF
    try:
        value = int(float(opts["value"]))
    except ValueError:
        value = 0  # atol()/atof() of text
    path = os.path.join(run_dir(), INJECTED)
    injected = read_json(path, {})
    fields = injected.setdefault(str(gpu_id), {})
    fields[str(field)] = value
    if field == FIELD_XID_ERRORS and value in DEVASTATING_XIDS:  # the watch keeps every Xid it saw
        fields["xid_history"] = sorted(set(fields.get("xid_history") or []) | {value})
    try:
        os.makedirs(run_dir(), exist_ok=True)
        with open(path + ".tmp", "w") as fh:
            json.dump(injected, fh)
        os.replace(path + ".tmp", path)
    except OSError:
        pass
    record(provider, "fault", source="dcgm_inject", gpu=gpu_id, field=field, value=value,
           **({"xid": value} if field == FIELD_XID_ERRORS else {}))
    sys.stdout.write(INJECT_OK)
    return 0


def record(provider, event, **fields):
    path = provider.get("ground_truth")
    if not path:
        return
    line = json.dumps({"t": time.time(), "node": provider.get("node"), "event": event, **fields}) + "\n"
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        os.write(fd, line.encode())
        os.close(fd)
    except OSError:
        pass


def main(argv):
    try:
        node = load_node()
    except (OSError, ValueError):
        sys.stderr.write(
            "Error: unable to establish a connection to the specified host: localhost\n"
            "Error: Unable to connect to host engine. Host engine connection invalid/disconnected.\n"
        )
        return 255
    if argv in (["-v"], ["--version"]):
        sys.stdout.write(version_block(node))
        return 0
    if argv and argv[0] == "health" and any(a in ("-c", "--check") for a in argv[1:]):
        sys.stdout.write(health_report(node))
        return 0
    if argv and argv[0] == "test":
        return test_command(node, argv[1:])
    if argv and argv[0] == "discovery" and any(a in ("-l", "--list") for a in argv[1:]):
        sys.stdout.write(discovery_list(node))
        return 0
    sys.stderr.write(
        "\nPARSE ERROR: Invalid or missing subcommand arguments.\n"
        "Brief USAGE: \n   dcgmi  subsystem  [-h] [--version]\n\n"
        "For complete USAGE and HELP type: \n   dcgmi --help\n\n"
    )
    return 1


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except BrokenPipeError:
        sys.exit(0)
