"""A simulated node's PCI sysfs (``/sys/bus/pci``), good enough for the real ``setpci -A linux-sysfs``.

The tree is the HGX PCIe topology the ``lspci`` shim prints (shims/lspci.py ``functions``: per GPU a CPU root
port, a PEX890xx switch upstream port and downstream ports, the GPU and its rail NIC), written as files under
``D/nodes/NODE/pci`` and bind-mounted over ``/sys/bus/pci`` inside the node's own mount namespace only (with
an empty directory over ``/proc/bus/pci``), so that nothing run on the node reaches the host's devices.

Layout (as the kernel's, except where the real tree would leave ``/sys/bus/pci``):

* ``devices/<dddd:bb:dd.f>``: symlinks to ``../hierarchy/pci0000:RR/<root port>/…/<device>``, so that
  ``readlink -f`` resolves inside the bound tree and the parent directory is the upstream bridge (on a real
  machine the link points into ``/sys/devices/pci0000:RR/…``, which the node shares with the host);
* each device directory: ``config`` (4096 bytes, the PCIe configuration space: vendor/device ids, command,
  status with a capability list, revision and class, header type 1 for bridges with primary/secondary/
  subordinate bus numbers and the bridge control word at 0x3E, subsystem ids at 0x2C for endpoints, a PCI
  Express capability at 0x40), ``vendor``, ``device``, ``class``, ``revision``, ``subsystem_vendor``,
  ``subsystem_device``, ``irq``, ``resource``, ``numa_node``, ``enable``, ``local_cpulist``;
* ``drivers/``, ``slots/``, ``drivers_autoprobe``.

The power daemon (sim/power.py) watches every bridge's control word: while the Secondary Bus Reset bit
(0x40) is set, the GPUs below that bridge fall off the bus.
"""

from __future__ import annotations

import importlib.util
import shutil
import struct
from pathlib import Path
from typing import Any

LSPCI_SHIM = Path(__file__).resolve().parent / "shims" / "lspci.py"
BRIDGE_CONTROL = 0x3E
SECONDARY_BUS_RESET = 0x40
CONFIG_SIZE = 4096
PORT_TYPE = {"root": 4, "upstream": 5, "downstream": 6}


def _lspci() -> Any:
    spec = importlib.util.spec_from_file_location("clustereval_sim_lspci_shim", LSPCI_SHIM)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def bdf(func: dict[str, Any]) -> str:
    """``0000:19:00.0``: the kernel's sysfs name (lower-case hex)."""
    return f"0000:{func['bus']:02x}:{func['dev']:02x}.{func['fn']}"


def topology(state: dict[str, Any]) -> list[dict[str, Any]]:
    """Every PCI function of the node (lspci shim's list), each with ``bdf``, ``parent`` (bdf or None),
    ``ids`` (vendor, device, class, revision, subsystem vendor, subsystem device)."""
    lspci = _lspci()
    funcs = lspci.functions({**state, "gpustack": {}})
    by_secondary = {f["sec"]: f for f in funcs if "sec" in f}
    for func in funcs:
        func["bdf"] = bdf(func)
        parent = by_secondary.get(func["bus"])
        func["parent"] = bdf(parent) if parent is not None and parent is not func else None
        _cls, clsid, _name, vid, did, rev, _driver = lspci.describe(func)
        sub_vendor, sub_device = 0, 0
        if func["kind"] == "gpu":
            sub = int(func["gpu"].get("pci_sub_system_id", "0x16C110DE"), 16)
            sub_vendor, sub_device = sub & 0xFFFF, sub >> 16
        elif func["kind"] == "nic":
            sub_vendor, sub_device = 0x15B3, 0x0040
        func["ids"] = (int(vid, 16), int(did, 16), int(clsid, 16) << 8, int(rev or "00", 16), sub_vendor, sub_device)
    by_bdf = {f["bdf"]: f for f in funcs}
    for func in funcs:  # the device's directory under hierarchy/: pci0000:RR/<root port>/.../<device>
        chain = [func["bdf"]]
        while by_bdf[chain[-1]]["parent"]:
            chain.append(by_bdf[chain[-1]]["parent"])
        func["path"] = f"pci0000:{by_bdf[chain[-1]]['bus']:02x}/" + "/".join(reversed(chain))
    return funcs


def config_space(func: dict[str, Any]) -> bytes:
    vendor, device, cls, rev, sub_vendor, sub_device = func["ids"]
    space = bytearray(CONFIG_SIZE)
    bridge = func["kind"] in PORT_TYPE
    struct.pack_into("<HHHH", space, 0, vendor, device, 0x0406 if not bridge else 0x0407, 0x0010)
    struct.pack_into("<I", space, 0x08, cls | rev)
    space[0x0E] = 0x01 if bridge else 0x00
    if bridge:
        space[0x18], space[0x19], space[0x1A] = func["bus"], func["sec"], func["sub"]
        struct.pack_into("<H", space, BRIDGE_CONTROL, 0x0002)  # SERR# forwarding on, as firmware leaves it
    else:
        struct.pack_into("<HH", space, 0x2C, sub_vendor, sub_device)
    space[0x34] = 0x40
    space[0x40], space[0x41] = 0x10, 0x00  # PCI Express capability, last in the list
    struct.pack_into("<H", space, 0x42, 0x0002 | PORT_TYPE.get(func["kind"], 0) << 4)
    return bytes(space)


def build(state: dict[str, Any], target: Path) -> list[dict[str, Any]]:
    """(Re)write the node's tree under ``target`` (a fresh boot: every config space at its reset value)."""
    shutil.rmtree(target, ignore_errors=True)
    funcs = topology(state)
    for sub in ("devices", "drivers", "slots", "hierarchy"):
        (target / sub).mkdir(parents=True, exist_ok=True)
    (target / "drivers_autoprobe").write_text("1\n")
    for func in funcs:
        path = func["path"]
        folder = target / "hierarchy" / path
        folder.mkdir(parents=True, exist_ok=True)
        vendor, device, cls, rev, sub_vendor, sub_device = func["ids"]
        (folder / "config").write_bytes(config_space(func))
        (folder / "config").chmod(0o644)
        for name, value in (("vendor", f"0x{vendor:04x}"), ("device", f"0x{device:04x}"), ("class", f"0x{cls:06x}"),
                            ("revision", f"0x{rev:02x}"), ("subsystem_vendor", f"0x{sub_vendor:04x}"),
                            ("subsystem_device", f"0x{sub_device:04x}"), ("irq", "0"), ("enable", "1"),
                            ("numa_node", "0" if func["bus"] < 0x80 else "1"), ("local_cpulist", "0-111")):
            (folder / name).write_text(value + "\n")
        (folder / "resource").write_text("0x0000000000000000 0x0000000000000000 0x0000000000000000\n" * 13)
        (target / "devices" / func["bdf"]).symlink_to("../hierarchy/" + path)
    return funcs


def watches(funcs: list[dict[str, Any]], target: Path) -> list[dict[str, Any]]:
    """Per bridge: its config file, bdf and the nvidia-smi indices of the GPUs on its secondary buses."""
    out = []
    for func in funcs:
        if func["kind"] not in PORT_TYPE:
            continue
        gpus = [f["gpu"]["index"] for f in funcs if f["kind"] == "gpu" and func["sec"] <= f["bus"] <= func["sub"]]
        out.append({"bdf": func["bdf"], "config": str(target / "hierarchy" / func["path"] / "config"), "gpus": gpus})
    return out


def bridge_control(config: str) -> int | None:
    try:
        with open(config, "rb") as fh:
            fh.seek(BRIDGE_CONTROL)
            raw = fh.read(2)
    except OSError:
        return None
    return struct.unpack("<H", raw)[0] if len(raw) == 2 else None
