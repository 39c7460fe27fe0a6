"""GPU stack files of a simulated node: loaded-module version, IOMMU groups, container toolkit config.

Healthy defaults (HGX H100 on iommu=pt, open driver module, toolkit configured) unless a fault says:
``driver_module_version`` (the loaded module's version differs from the userspace driver, as after an
upgrade without reboot), ``iommu_mode`` (``DMA`` / ``DMA-FQ`` instead of ``identity``),
``pcie_acs_redirect`` (ACS redirect on the GPU/NIC switch ports, seen by the ``lspci`` shim),
``container_toolkit_unconfigured`` (no runtime config or CDI spec), ``bluefield_rshim_exposed`` (a
BlueField-3 on the bus; the isolation overlay adds its host RShim netdev). ``driver_module.peermem``
(nvidia_driver area) adds ``/sys/module/nvidia_peermem``.
``gdrcopy: {version: "2.4.4", device: false}`` (profile section, unset: not installed) installs GDRCopy's
user library as its ``make install`` does (``/usr/local/lib/libgdrapi.so.MAJOR.MINOR`` and its soname
``libgdrapi.so.MAJOR``: src/Makefile's LIB_VER/LIB_SONAME) and loads gdrdrv (``/sys/module/gdrdrv/version``:
``MAJOR.MINOR``, gdrdrv.h's GDRDRV_VERSION_STRING). ``device: false`` is required for now, and states what the
node then is: gdrdrv loaded without its ``/dev/gdrdrv`` (gdrcopy's insmod.sh or udev rule not run, gdr_open()
fails). A per-node ``/dev/gdrdrv`` needs an overlay of ``/dev`` that keeps the machine's ``/dev/pts`` and
``/dev/shm`` mounts, which the overlay mounts (overlays/__init__.py) do not make yet.
Not simulated: ``/dev/gdrdrv`` (see ``gdrcopy``) and
``nvidia-smi boost-slider`` (no real capture of its output to be faithful to), ``lsmod`` and ``modinfo``
(they read the host's /proc/modules and module files: only /sys/module shows the node's modules).
"""

from __future__ import annotations

import json
import re
from typing import Any

from clustereval.sim.overlays.nvidia_driver import module_settings

FAULTS = {"driver_module_version", "iommu_mode", "pcie_acs_redirect", "container_toolkit_unconfigured",
          "bluefield_rshim_exposed"}
SHIMS = {"lspci": "lspci.py", "nvidia-ctk": "gpustack_nvidia_ctk.py",
         # nvidia-smi gains `topo -m` through a front that hands every other call to the original shim.
         "nvidia-smi": "gpustack_nvidia_smi.py"}

CDI_SPEC = """---
cdiVersion: 0.5.0
kind: nvidia.com/gpu
devices:
{devices}containerEdits:
  env:
  - NVIDIA_VISIBLE_DEVICES=void
  hooks:
  - hookName: createContainer
    path: /usr/bin/nvidia-ctk
    args:
    - nvidia-ctk
    - hook
    - update-ldcache
"""

RUNTIME_CONFIG = """#accept-nvidia-visible-devices-as-volume-mounts = false
#accept-nvidia-visible-devices-envvar-when-unprivileged = true
disable-require = false
supported-driver-capabilities = "compat32,compute,display,graphics,ngx,utility,video"

[nvidia-container-cli]
environment = []
ldconfig = "@/sbin/ldconfig.real"
load-kmods = true

[nvidia-container-runtime]
log-level = "info"
mode = "auto"
runtimes = ["docker-runc", "runc", "crun"]

[nvidia-container-runtime.modes.cdi]
annotation-prefixes = ["cdi.k8s.io/"]
default-kind = "nvidia.com/gpu"
spec-dirs = ["/etc/cdi", "/var/run/cdi"]
"""


GDRCOPY_KEYS = {"version", "device"}
GDRCOPY_VERSION = re.compile(r"2\.[0-9]+(\.[0-9]+)?")  # the 2.x API (gdrapi.h GDR_API_MAJOR_VERSION 2)


def validate_settings(settings: dict[str, Any]) -> None:
    """Refuse a malformed ``gdrcopy:`` section with a message naming the key."""
    given = settings.get("gdrcopy")
    if given is None:
        return
    if not isinstance(given, dict) or set(given) - GDRCOPY_KEYS:
        raise ValueError(f"gdrcopy must be null or {{version: '2.4.4', device: false}}; known keys: "
                         f"{sorted(GDRCOPY_KEYS)}")
    if not GDRCOPY_VERSION.fullmatch(str(given.get("version", ""))):
        raise ValueError("gdrcopy.version must be a GDRCopy 2.x release such as '2.4.4'")
    if given.get("device") is not False:
        raise ValueError("gdrcopy.device must be false: a per-node /dev/gdrdrv is not simulated yet (the overlay "
                         "of /dev would hide the machine's /dev/pts and /dev/shm); the node shows gdrdrv loaded "
                         "without its device node")


def render_gdrcopy(given: dict[str, Any], tree) -> None:
    major, minor = str(given["version"]).split(".")[:2]
    library = f"/usr/local/lib/libgdrapi.so.{major}.{minor}"
    tree.file(library, "", 0o755)
    tree.file(f"/usr/local/lib/libgdrapi.so.{major}", "", 0o755)  # the soname link ldconfig makes, as a file
    tree.file("/sys/module/gdrdrv/version", f"{major}.{minor}\n", 0o444)
    tree.file("/sys/module/gdrdrv/initstate", "live\n", 0o444)


def iommu_groups(state: dict[str, Any]) -> list[list[str]]:
    """Groups as on an HGX with ACS off in the switches: each root port alone, each switch with its GPU/NIC."""
    groups = []
    nics = state.get("nics") or []
    for k, gpu in enumerate(state.get("gpus") or []):
        bus = int(gpu["pci_bus"], 16)
        groups.append([f"0000:{bus - 4:02x}:01.0"])
        members = [f"0000:{bus - 3:02x}:00.0", f"0000:{bus - 2:02x}:01.0", f"0000:{bus:02x}:00.0"]
        if k < len(nics):
            members += [f"0000:{bus - 2:02x}:02.0", f"0000:{bus + 1:02x}:00.0"]
        groups.append(sorted(members))
    return groups


def render(settings: dict[str, Any], state: dict[str, Any], tree) -> None:
    faults = settings.get("faults") or {}
    tree.file("/etc/clustereval-sim/pci.json", json.dumps({
        "pcie_acs_redirect": bool(faults.get("pcie_acs_redirect")),
        "bluefield": bool(faults.get("bluefield_rshim_exposed"))}))
    gpus = state.get("gpus") or []
    if state.get("nvidia_smi") == "missing" or not gpus:
        return
    tree.file("/sys/module/nvidia/version",
              str(faults.get("driver_module_version") or state.get("driver_version", "550.90.07")) + "\n")
    loaded = ["nvidia_uvm", "ib_core", "mlx5_ib"]
    if module_settings(settings)["peermem"]:
        loaded.append("nvidia_peermem")
    for module in loaded:
        tree.file(f"/sys/module/{module}/initstate", "live\n")
    if settings.get("gdrcopy"):
        render_gdrcopy(settings["gdrcopy"], tree)
    mode = str(faults.get("iommu_mode") or "identity")
    for number, members in enumerate(iommu_groups(state), start=20):
        tree.file(f"/sys/kernel/iommu_groups/{number}/type", mode + "\n")
        for member in members:
            # Real entries are symlinks to the device; an empty file lists the same under `ls`.
            tree.file(f"/sys/kernel/iommu_groups/{number}/devices/{member}", "")
    if not faults.get("container_toolkit_unconfigured"):
        tree.file("/etc/nvidia-container-runtime/config.toml", RUNTIME_CONFIG)
        devices = "".join(f"- name: \"{g['index']}\"\n  containerEdits:\n    deviceNodes:\n"
                          f"    - path: /dev/nvidia{g['minor_number']}\n" for g in gpus)
        tree.file("/etc/cdi/nvidia.yaml", CDI_SPEC.format(devices=devices))
