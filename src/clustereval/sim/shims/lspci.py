#!/usr/bin/python3
# ruff: noqa: UP031  (printf formats mirror the C format strings of the real tool)
"""Simulated ``lspci`` (pciutils 3.x) for one simulated node (standalone: stdlib only, no clustereval import).

Builds an HGX-style PCIe tree from ``$SIMNODE_ROOT/node.json``: per GPU a CPU root port, a Broadcom PEX890xx
Gen5 switch (upstream port, downstream ports) with the GPU and its rail NIC (ConnectX-7) below it, as on
HGX H100 boards (compare the corpus ``lspci/h100-hgx-lspci-vvv-acs-excerpt.txt``). Options understood:
``-D`` (domain), ``-n``/``-nn`` (numeric ids), ``-v``/``-vv``/``-vvv`` (detail; ACS capability and control
on root and downstream ports). As the real tool, capabilities print ``<access denied>`` for non-root users.
Node faults (``/etc/clustereval-sim/pci.json``, from the gpustack overlay): ``pcie_acs_redirect``
sets ReqRedir/CmpltRedir/UpstreamFwd on the
downstream ports; ``bluefield`` adds a BlueField-3 DPU with its RShim function.
"""

import json
import os
import sys

ACS_BITS = ("SrcValid", "TransBlk", "ReqRedir", "CmpltRedir", "UpstreamFwd", "EgressCtrl", "DirectTrans")
REDIRECT = ("SrcValid", "ReqRedir", "CmpltRedir", "UpstreamFwd")


PCI_STATE = "/etc/clustereval-sim/pci.json"  # written per node by the sim's gpustack overlay


def load_node():
    root = os.environ.get("SIMNODE_ROOT") or "/sim"
    with open(os.path.join(root, "node.json")) as fh:
        node = json.load(fh)
    try:
        with open(PCI_STATE) as fh:
            node["gpustack"] = json.load(fh)
    except OSError:
        node["gpustack"] = {}
    return node


def functions(node):
    """Every PCI function: dict(bus, dev, fn, cls, clsid, name, ids, kind, extra)."""
    state = node.get("gpustack") or {}
    redirect = bool(state.get("pcie_acs_redirect"))
    out = []
    gpus = node.get("gpus") or []
    nics = node.get("nics") or []
    buses = [int(g["pci_bus"], 16) for g in gpus]
    for k, bus in enumerate(buses):
        root, up, down = bus - 4, bus - 3, bus - 2
        out.append(dict(bus=root, dev=1, fn=0, kind="root", sec=up, sub=bus + 3, redirect=False))
        out.append(dict(bus=up, dev=0, fn=0, kind="upstream", sec=down, sub=bus + 3, redirect=False))
        out.append(dict(bus=down, dev=1, fn=0, kind="downstream", sec=bus, sub=bus, redirect=redirect))
        out.append(dict(bus=bus, dev=0, fn=0, kind="gpu", gpu=gpus[k]))
        if k < len(nics):
            out.append(dict(bus=down, dev=2, fn=0, kind="downstream", sec=bus + 1, sub=bus + 1, redirect=redirect))
            out.append(dict(bus=bus + 1, dev=0, fn=0, kind="nic", nic=nics[k]))
    if state.get("bluefield"):
        out.append(dict(bus=0xa0, dev=1, fn=0, kind="root", sec=0xa1, sub=0xa1, redirect=False))
        out.append(dict(bus=0xa1, dev=0, fn=0, kind="bluefield"))
        out.append(dict(bus=0xa1, dev=0, fn=1, kind="bluefield"))
        out.append(dict(bus=0xa1, dev=0, fn=2, kind="rshim"))
    return sorted(out, key=lambda f: (f["bus"], f["dev"], f["fn"]))


AMD_DEVICE_NAMES = {"74a1": "Aqua Vanjaram [Instinct MI300X]", "74a5": "Aqua Vanjaram [Instinct MI325X]"}

def describe(func):
    """(class, class id, vendor+device name, vendor id, device id, rev, driver)."""
    kind = func["kind"]
    if kind == "root":
        return "PCI bridge", "0604", "Intel Corporation Device", "8086", "352a", "04", "pcieport"
    if kind in ("upstream", "downstream"):
        return ("PCI bridge", "0604", "Broadcom / LSI PEX890xx PCIe Gen 5 Switch", "1000", "c030", "b0",
                "pcieport")
    if kind == "gpu" and func["gpu"].get("vendor") == "amd":
        device = func["gpu"].get("pci_device_id", "0x74a11002")[2:6].lower()
        # pci.ids names (2024-2025): the MI300 family is "Aqua Vanjaram"; newer ids print as "Device xxxx"
        name = AMD_DEVICE_NAMES.get(device, f"Device {device}")
        return ("Processing accelerators", "1200", f"Advanced Micro Devices, Inc. [AMD/ATI] {name}", "1002", device,
                "00", "amdgpu")
    if kind == "gpu":
        device = func["gpu"].get("pci_device_id", "0x233010DE")[2:6].lower()
        return "3D controller", "0302", "NVIDIA Corporation Device", "10de", device, "a1", "nvidia"
    if kind == "nic":
        return ("Infiniband controller", "0207", "Mellanox Technologies MT2910 Family [ConnectX-7]", "15b3", "1021",
                None, "mlx5_core")
    if kind == "bluefield":
        return ("Ethernet controller", "0200", "Mellanox Technologies MT43244 BlueField-3 integrated ConnectX-7 "
                "network controller", "15b3", "a2dc", "01", "mlx5_core")
    return ("DMA controller", "0801", "Mellanox Technologies MT43244 BlueField-3 SoC Management Interface", "15b3",
            "c2d5", "01", None)


def header(func, opts):
    cls, clsid, name, vid, did, rev, _ = describe(func)
    slot = "%02x:%02x.%d" % (func["bus"], func["dev"], func["fn"])
    if opts["domain"]:
        slot = "0000:" + slot
    if opts["numeric"] == 1:
        text = "%s %s: %s:%s" % (slot, clsid, vid, did)
    elif opts["numeric"] >= 2:
        text = "%s %s [%s]: %s [%s:%s]" % (slot, cls, clsid, name, vid, did)
    else:
        text = "%s %s: %s" % (slot, cls, name)
    if rev:
        text += " (rev %s)" % rev
    if func["kind"] in ("root", "upstream", "downstream") and opts["verbose"]:
        text += " (prog-if 00 [Normal decode])"
    return text


def details(func, opts, root_user):
    _cls, _, name, _, _, _, driver = describe(func)
    lines = []
    bridge = func["kind"] in ("root", "upstream", "downstream")
    if not bridge:
        lines.append("\tSubsystem: %s" % name)
    lines.append("\tControl: I/O+ Mem+ BusMaster+ SpecCycle- MemWINV- VGASnoop- ParErr- Stepping- SERR- "
                 "FastB2B- DisINTx+")
    lines.append("\tNUMA node: %d" % (0 if func["bus"] < 0x80 else 1))
    if bridge:
        lines.append("\tBus: primary=%02x, secondary=%02x, subordinate=%02x, sec-latency=0"
                     % (func["bus"], func["sec"], func["sub"]))
    if opts["verbose"] >= 2:
        if not root_user:
            lines.append("\tCapabilities: <access denied>")
        else:
            port = {"root": "Root Port (Slot-)", "upstream": "Upstream Port", "downstream": "Downstream Port (Slot+)"}
            lines.append("\tCapabilities: [40] Express (v2) %s, MSI 00" % port.get(func["kind"], "Endpoint"))
            lines.append("\t\tLnkCap:\tPort #0, Speed 32GT/s, Width x16, ASPM not supported")
            lines.append("\t\tLnkSta:\tSpeed 32GT/s (ok), Width x16 (ok)")
            if func["kind"] in ("root", "downstream"):
                lines.append("\tCapabilities: [220 v1] Access Control Services")
                lines.append("\t\tACSCap:\tSrcValid+ TransBlk+ ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- "
                             "DirectTrans-")
                ctl = " ".join("%s%s" % (bit, "+" if func["redirect"] and bit in REDIRECT else "-")
                               for bit in ACS_BITS)
                lines.append("\t\tACSCtl:\t%s" % ctl)
    if driver:
        lines.append("\tKernel driver in use: %s" % driver)
    if func["kind"] == "gpu":
        lines.append("\tKernel modules: nvidiafb, nouveau, nvidia_drm, nvidia")
    elif driver and not bridge:
        lines.append("\tKernel modules: %s" % driver)
    return lines


def parse_args(argv):
    opts = {"domain": False, "numeric": 0, "verbose": 0}
    for arg in argv:
        if not arg.startswith("-") or arg == "-":
            sys.stderr.write("lspci: Unknown option '%s' (see \"lspci --help\")\n" % arg)
            sys.exit(2)
        for letter in arg[1:]:
            if letter == "D":
                opts["domain"] = True
            elif letter == "n":
                opts["numeric"] += 1
            elif letter == "v":
                opts["verbose"] += 1
            elif letter not in "kq":
                sys.stderr.write("lspci: invalid option -- '%s'\n" % letter)
                sys.exit(2)
    return opts


def main(argv):
    opts = parse_args(argv)
    node = load_node()
    root_user = os.geteuid() == 0
    out = []
    for func in functions(node):
        out.append(header(func, opts))
        if opts["verbose"]:
            out.extend(details(func, opts, root_user))
            out.append("")
    sys.stdout.write("\n".join(out) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
