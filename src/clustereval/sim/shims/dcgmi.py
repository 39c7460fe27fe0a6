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


def health_report(node):
    """``dcgmi health -c`` of a node whose watches found nothing (the layout of a real DCGM 3.x report)."""
    rule = "+---------------------------+----------------------------------------------------------+\n"
    return (rule + "| Health Monitor Report" + " " * 64 + "|\n"
            + rule.replace("-", "=") + "| Overall Health            | Healthy" + " " * 50 + "|\n" + rule)


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
