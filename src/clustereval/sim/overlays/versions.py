"""ConnectX / BlueField firmware versions the security audit reads (audit.versions.nic_firmware).

Per entry of the profile's ``nics``: ``fw_ver`` (default 28.46.3008, a ConnectX-7 image of the newest
firmware train of baselines/security_minimums.yml, so a healthy profile is at the minimum). Fault
(per node, overrides it): ``nic_fw_ver``, one version for every NIC or a mapping
``{mlx5_0: 28.39.1002}``. The fabric area lays out the rest of each device directory (hca_type,
board_id, ports) and documents that this area writes ``fw_ver``.

The running kernel is the profile's ``system.kernel_release`` (default the machine's own; the system area
makes ``uname -r`` and ``/proc/sys/kernel/osrelease`` say it); its image is in the node's ``/boot``
(``vmlinuz-<release>`` and ``config-<release>``) and its modules in ``/lib/modules/<release>``, as on a node
whose kernel the OS installed. Faults: ``kernel_pending: true`` adds a newer image of the same flavour (the
patch level plus one), ``kernel_pending: "<release>"`` that release: installed, not booted (a reboot is
pending); ``kernel_outside_os: true`` leaves ``/boot`` empty (a kernel booted directly by a hypervisor).

Other versions the audit grades come from elsewhere: the NVIDIA driver from the profile's
``driver_version``, DCGM from ``dcgm_version`` (dcgmi shim), nvidia-ctk from the gpustack area's shim,
nvcc from the software area's toolkit (or the machine's own), Docker, runc and the kernel packages from
the machine itself.
"""

from __future__ import annotations

import os
import re
from typing import Any

from clustereval.sim.overlays.system import kernel_release

FAULTS = {"nic_fw_ver", "kernel_pending", "kernel_outside_os"}
DEFAULT_FW = "28.46.3008"


def nic_firmware(settings: dict[str, Any]) -> dict[str, str]:
    """``{device: fw_ver}`` for every NIC rail of the profile."""
    fault = (settings.get("faults") or {}).get("nic_fw_ver")
    out = {}
    for nic in settings.get("nics") or []:
        name = str(nic["name"])
        version = str(nic.get("fw_ver") or DEFAULT_FW)
        if isinstance(fault, dict):
            version = str(fault.get(name) or version)
        elif fault:
            version = str(fault)
        out[name] = version
    return out


def render(settings: dict[str, Any], state: dict[str, Any], tree) -> None:
    for name, version in nic_firmware(settings).items():
        tree.file(f"/sys/class/infiniband/{name}/fw_ver", version + "\n", 0o444)
    render_boot(settings, tree)


def newer_kernel(release: str) -> str:
    """The same kernel release one patch level up (``6.8.0-124-generic`` -> ``6.8.1-124-generic``)."""
    match = re.match(r"^(\d+)\.(\d+)(?:\.(\d+))?(.*)$", release)
    if not match:
        return release + ".1"
    major, minor, patch, rest = match.groups()
    return f"{major}.{minor}.{int(patch or 0) + 1}{rest}"


def boot_images(settings: dict[str, Any], running: str) -> list[str]:
    """Kernel releases with an image in the node's /boot."""
    faults = settings.get("faults") or {}
    if faults.get("kernel_outside_os"):
        return []
    releases = [running]
    pending = faults.get("kernel_pending")
    if pending:
        releases.append(pending if isinstance(pending, str) else newer_kernel(running))
    return releases


def render_boot(settings: dict[str, Any], tree) -> None:
    if not os.path.isdir("/boot"):
        return  # nothing to lay the node's /boot over: the node looks directly booted
    for release in boot_images(settings, kernel_release(settings)):
        # Never booted by the simulation: the files only have to exist, as the audit lists /boot.
        tree.file(f"/boot/vmlinuz-{release}", "", 0o600)
        tree.file(f"/boot/config-{release}", f"# Linux kernel configuration {release} (simulated node)\n", 0o644)
        # /lib is /usr/lib on a merged-/usr system (Debian 12): the canonical path, so one overlay serves both
        tree.file(f"/usr/lib/modules/{release}/modules.dep", "", 0o644)
