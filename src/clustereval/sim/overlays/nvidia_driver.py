"""``/proc/driver/nvidia``: the loaded driver's version line and module parameters.

Settings (``driver_module:`` in a profile, per node or cluster-wide): ``flavour`` (``open``, the
default: "NVIDIA UNIX Open Kernel Module for x86_64", dma-buf GPUDirect RDMA on a kernel >= 5.12;
``proprietary``: "NVIDIA UNIX x86_64 Kernel Module", no dma-buf, and Blackwell GPUs need the open one),
``peermem`` (false; true: nvidia-peermem is loaded, ``/sys/module/nvidia_peermem``, the gpustack area) and
``profiling_admin_only`` (RmProfilingAdminOnly; true as the driver ships, false lets users profile). A
proprietary module without nvidia-peermem has no GPUDirect RDMA path, so such a profile must say
``fabric: {gpudirect: false}`` (perftest then refuses ``--use_cuda``); the contradiction is refused.

Faults: ``nvidia_profiling_admin_only`` (bool; RmProfilingAdminOnly on one node, over ``driver_module``).
"""

from __future__ import annotations

from typing import Any

from clustereval.sim.keys import known_mapping

FAULTS = {"nvidia_profiling_admin_only"}
MODULE_KEYS = {"flavour", "peermem", "profiling_admin_only"}
FLAVOURS = ("open", "proprietary")
BUILT = "Tue May 28 21:55:11 UTC 2024"


def module_settings(settings: dict[str, Any]) -> dict[str, Any]:
    """``{"flavour", "peermem"}`` of the node's NVIDIA kernel modules (ValueError naming the key)."""
    given = settings.get("driver_module") or {}
    known_mapping("driver_module", given, MODULE_KEYS)
    flavour = str(given.get("flavour", "open"))
    if flavour not in FLAVOURS:
        raise ValueError(f"driver_module.flavour {flavour!r} is none of {', '.join(FLAVOURS)}")
    return {"flavour": flavour, "peermem": bool(given.get("peermem", False)),
            # RmProfilingAdminOnly: 1 as the driver ships; a site that lets users profile sets it to 0.
            "profiling_admin_only": bool(given.get("profiling_admin_only", True))}


def validate_settings(settings: dict[str, Any]) -> None:
    module = module_settings(settings)
    gpudirect = (settings.get("fabric") or {}).get("gpudirect", True)
    if module["flavour"] == "proprietary" and not module["peermem"] and gpudirect:
        raise ValueError("driver_module: a proprietary module without peermem has no GPUDirect RDMA path, but "
                         "fabric.gpudirect is true (perftest --use_cuda would work); set fabric: {gpudirect: false}"
                         " or driver_module.peermem: true")


def version_file(driver: str, flavour: str) -> str:
    """``/proc/driver/nvidia/version`` of a loaded module of that flavour."""
    if flavour == "open":
        line = (f"NVIDIA UNIX Open Kernel Module for x86_64  {driver}  Release Build  "
                f"(dvs-builder@U16-I3-B03-4-3)  {BUILT}")
    else:
        line = f"NVIDIA UNIX x86_64 Kernel Module  {driver}  {BUILT}"
    return f"NVRM version: {line}\nGCC version:  gcc version 12.2.0 (Debian 12.2.0-14+deb12u1) \n"


def render(settings: dict[str, Any], state: dict[str, Any], tree) -> None:
    if state.get("nvidia_smi") == "missing" or not state.get("gpus"):
        return
    driver = state.get("driver_version", "550.90.07")
    faults = settings.get("faults") or {}
    module = module_settings(settings)
    admin_only = 1 if faults.get("nvidia_profiling_admin_only", module["profiling_admin_only"]) else 0
    tree.file("/proc/driver/nvidia/version", version_file(driver, module["flavour"]))
    params = [("ResmanDebugLevel", "4294967295"), ("RmLogonRC", "1"), ("ModifyDeviceFiles", "1"),
              ("DeviceFileUID", "0"), ("DeviceFileGID", "0"), ("DeviceFileMode", "438"),
              ("InitializeSystemMemoryAllocations", "1"), ("UsePageAttributeTable", "4294967295"),
              ("EnableMSI", "1"), ("EnablePCIeGen3", "0"), ("MemoryPoolSize", "0"), ("KMallocHeapMaxSize", "0"),
              ("VMallocHeapMaxSize", "0"), ("IgnoreMMIOCheck", "0"), ("TCEBypassMode", "0"),
              ("EnableStreamMemOPs", "0"), ("EnableUserNUMAManagement", "1"), ("NvLinkDisable", "0"),
              ("RmProfilingAdminOnly", str(admin_only)), ("PreserveVideoMemoryAllocations", "0"),
              ("EnableS0ixPowerManagement", "0"), ("S0ixPowerManagementVideoMemoryThreshold", "256"),
              ("DynamicPowerManagement", "3"), ("DynamicPowerManagementVideoMemoryThreshold", "200"),
              ("RegisterPCIDriver", "1"), ("EnablePCIERelaxedOrderingMode", "0"), ("EnableGpuFirmware", "18"),
              ("EnableGpuFirmwareLogs", "2"), ("RmNvlinkBandwidthLinkCount", "0"), ("EnableDbgBreakpoint", "0"),
              ("OpenRmEnableUnsupportedGpus", "0"), ("DmaRemapPeerMmio", "1"), ("ImexChannelCount", "2048"),
              ("CreateImexChannel0", "0"), ("GrdmaPciTopoCheckOverride", "0"), ("RegistryDwords", '""'),
              ("RegistryDwordsPerDevice", '""'), ("RmMsg", '""'), ("GpuBlacklist", '""'),
              ("TemporaryFilePath", '""'), ("ExcludedGpus", '""')]
    tree.file("/proc/driver/nvidia/params", "".join(f"{key}: {value}\n" for key, value in params))
