"""GPU stack files of a simulated node: loaded-module version, IOMMU groups, container toolkit config.

Healthy defaults (HGX H100 on iommu=pt, open driver module, toolkit configured) unless a fault says:
``driver_module_version`` (the loaded module's version differs from the userspace driver, as after an
upgrade without reboot), ``iommu_mode`` (``DMA`` / ``DMA-FQ`` instead of ``identity``),
``pcie_acs_redirect`` (ACS redirect on the GPU/NIC switch ports, seen by the ``lspci`` shim),
``container_toolkit_unconfigured`` (no runtime config or CDI spec), ``bluefield_rshim_exposed`` (a
BlueField-3 on the bus; the isolation overlay adds its host RShim netdev). ``driver_module.peermem``
(nvidia_driver area) adds ``/sys/module/nvidia_peermem``.
Not simulated: ``/dev/gdrdrv`` (device nodes cannot be made in the overlays; GDRCopy shows as absent) and
``nvidia-smi boost-slider`` (no real capture of its output to be faithful to), ``lsmod`` and ``modinfo``
(they read the host's /proc/modules and module files: only /sys/module shows the node's modules).
"""

from __future__ import annotations

import json
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
