"""ConnectX / BlueField firmware versions the security audit reads (audit.versions.nic_firmware).

Per entry of the profile's ``nics``: ``fw_ver`` (default 28.46.3008, a ConnectX-7 image of the newest
firmware train of baselines/security_minimums.yml, so a healthy profile is at the minimum). Fault
(per node, overrides it): ``nic_fw_ver``, one version for every NIC or a mapping
``{mlx5_0: 28.39.1002}``. The fabric area lays out the rest of each device directory (hca_type,
board_id, ports) and documents that this area writes ``fw_ver``.

Other versions the audit grades come from elsewhere: the NVIDIA driver from the profile's
``driver_version``, DCGM from ``dcgm_version`` (dcgmi shim), nvidia-ctk from the gpustack area's shim,
nvcc from the software area's toolkit (or the machine's own), Docker, runc and the installed
kernels from the machine itself.
"""

from __future__ import annotations

from typing import Any

FAULTS = {"nic_fw_ver"}
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
