"""``/proc/driver/nvidia``: the loaded driver's version line and module parameters.

Faults: ``nvidia_profiling_admin_only`` (bool; RmProfilingAdminOnly, default true as the driver ships).
"""

from __future__ import annotations

from typing import Any

FAULTS = {"nvidia_profiling_admin_only"}


def render(settings: dict[str, Any], state: dict[str, Any], tree) -> None:
    if state.get("nvidia_smi") == "missing" or not state.get("gpus"):
        return
    driver = state.get("driver_version", "550.90.07")
    faults = settings.get("faults") or {}
    admin_only = 1 if faults.get("nvidia_profiling_admin_only", True) else 0
    tree.file("/proc/driver/nvidia/version",
              f"NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  {driver}  Release Build  "
              f"(dvs-builder@U16-I3-B03-4-3)  Tue May 28 21:55:11 UTC 2024\n"
              f"GCC version:  gcc version 12.2.0 (Debian 12.2.0-14+deb12u1) \n")
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
