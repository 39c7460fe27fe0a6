#!/usr/bin/python3
# ruff: noqa: UP031  (printf formats mirror the C format strings of the real tool)
"""``nvidia-smi`` front for simulated nodes: ``topo -m`` here, everything else to the original shim.

Standalone (stdlib only). ``nvidia-smi topo -m`` / ``--matrix`` prints the matrix of drivers R535-R580 as
the corpus capture ``nvidia-smi-topo/topo-m-8gpu-nv18-10nic-mlx5-tabs.txt`` shows it: tab-separated cells,
ANSI underline around the header, ``X`` with spaces on the diagonal, every GPU pair ``NV18`` (HGX H100),
``PIX`` between a GPU and the rail NIC on its PCIe switch, ``NODE``/``SYS`` across host bridges and sockets,
three affinity columns (an empty cell before ``GPU NUMA ID``), then the Legend and NIC Legend.
"""

import json
import os
import sys

LEGEND = """
Legend:

  X    = Self
  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)
  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node
  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)
  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)
  PIX  = Connection traversing at most a single PCIe bridge
  NV#  = Connection traversing a bonded set of # NVLinks
"""
AFFINITY = {0: "0-55,112-167", 1: "56-111,168-223"}


def load_node():
    root = os.environ.get("SIMNODE_ROOT") or "/sim"
    with open(os.path.join(root, "node.json")) as fh:
        return json.load(fh)


def topo(node):
    gpus = node.get("gpus") or []
    nics = (node.get("nics") or [])[: len(gpus)]
    devices = [("GPU%d" % g["index"], int(g["pci_bus"], 16), k) for k, g in enumerate(gpus)]
    devices += [("NIC%d" % k, int(gpus[k]["pci_bus"], 16) + 1, k) for k in range(len(nics))]

    def numa(bus):
        return 0 if bus < 0x80 else 1

    def link(a, b):
        if a == b:
            return " X "
        if a[0].startswith("GPU") and b[0].startswith("GPU"):
            return "NV18"
        if a[2] == b[2]:
            return "PIX"
        return "NODE" if numa(a[1]) == numa(b[1]) else "SYS"

    names = [d[0] for d in devices]
    out = ["\t\x1b[4m" + "\t".join([*names, "CPU Affinity", "NUMA Affinity", "GPU NUMA ID"]) + "\x1b[0m"]
    for dev in devices:
        cells = [link(dev, other) for other in devices]
        tail = [AFFINITY[numa(dev[1])], str(numa(dev[1])), "", "N/A"] if dev[0].startswith("GPU") else ["", "", "", ""]
        out.append("\t".join([dev[0], *cells, *tail]))
    text = "\n".join(out) + "\n" + LEGEND
    if nics:
        text += "\nNIC Legend:\n\n" + "".join("  NIC%d: %s\n" % (k, n["name"]) for k, n in enumerate(nics))
    return text


def main(argv):
    if argv[:1] == ["topo"]:
        if len(argv) == 2 and argv[1] in ("-m", "--matrix"):
            sys.stdout.write(topo(load_node()))
            return 0
        sys.stdout.write("Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.\n")
        return 2
    # Everything else is the original shim's, run in this process (its module sits beside this one).
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import nvidia_smi

    return nvidia_smi.main(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
