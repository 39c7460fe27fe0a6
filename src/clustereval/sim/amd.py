"""AMD Instinct nodes of the simulated cluster: what ``node.json`` holds under ``amd`` for the AMD shims.

A profile makes a node AMD with ``gpus: {vendor: amd, model: "AMD Instinct MI300X"}`` (MI300X, MI325X or
MI355X; :data:`MODELS` gives each one's device id, gfx target, compute units, memory, power cap and clocks, any
of which ``gpus:`` may override) and an ``amd:`` section for the software (:data:`AMD_DEFAULTS`). Such a node has
no ``nvidia-smi``, ``dcgmi``, ``dcgm-exporter`` or ``nvbandwidth``; it has ``amd-smi`` and ``rocm-smi`` (shims in
``sim/shims/``), the amdgpu sysfs (``overlays/amd_gpu.py``) and rccl-tests under the nccl-tests names (the
binaries are called the same: ``all_reduce_perf``...).

:func:`render` resolves, per *logical* device (a GPU in CPX compute partitioning is 8 of them, each a KFD node
of its own, as amd-smi lists them): BDF, KFD id and node id, partition, VBIOS, memory, idle readings and the
RAS error counters per block. Faults:

* ``gpu_missing`` (shared with NVIDIA nodes): the physical GPUs the driver lost;
* ``xgmi_link_down``: ``[[a, b], ...]`` physical GPU pairs whose XGMI link is down (their traffic goes over
  PCIe: amd-smi's link type table says PCIE, the KFD io_link is gone);
* ``amd_partition``: ``{compute: CPX, memory: NPS4}`` over the profile's ``gpus.compute_partition`` /
  ``memory_partition`` on one node;
* ``ras_errors``: ``[{gpu, block, ce, ue}]`` RAS error counts on a physical GPU (sysfs counters, amd-smi
  ``metric --ecc-blocks``) and the amdgpu kernel lines that reported them;
* ``amd_device_access``: ``{kfd: {mode: "0660", group: root}, render: {mode, group}, card: {mode, group},
  job_user_not_in: [render]}`` over the device nodes' healthy modes (:data:`DEVICE_NODES`: ``/dev/kfd`` and
  ``/dev/dri/renderD*`` 0660 root:render, ``/dev/dri/card*`` 0660 root:video) and the evaluation account's
  membership of the render and video groups;
* ``rccl_version``: the RCCL this node has installed (``"2.22.3"``), over ``amd.rccl_version``;

The kernel's automatic NUMA balancing is a sysctl: ``system: {sysctls: {kernel.numa_balancing: 1}}``.
"""

from __future__ import annotations

import hashlib
from typing import Any

VENDORS = ("nvidia", "amd")
# NVIDIA tools an AMD node does not have (and AMD tools an NVIDIA node does not have).
NVIDIA_ONLY_TOOLS = frozenset({"nvidia-smi", "dcgmi", "dcgm-exporter", "nvbandwidth", "ncu", "nvcc"})
AMD_ONLY_TOOLS = frozenset({"amd-smi", "rocm-smi", "TransferBench", "amd-metrics-exporter"})
FAULTS = {"xgmi_link_down", "amd_partition", "ras_errors", "amd_device_access", "rccl_version"}

# What amd-smi static / rocm-smi report per model (ROCm 6.4 / 7.0 era figures: device ids from the amdgpu PCI
# table, gfx targets and CU counts from AMD's CDNA 3/4 specifications, VRAM as amd-smi prints VRAM_TOTAL).
MODELS: dict[str, dict[str, Any]] = {
    "AMD Instinct MI300X": {"device_id": "0x74a1", "subsystem_id": "0x74a1", "gfx_version": "gfx942",
                            "compute_units": 304, "memory_mb": 196592, "power_cap_w": 750, "max_gfx_clock_mhz": 2100,
                            "max_mem_clock_mhz": 1300, "idle_power_w": 133.0, "idle_temperature_c": 36,
                            "vbios_name": "AMD MI300X_HW_SRIOV_CVS_1VF", "vbios_part_number": "113-M3000100-102",
                            "vbios_version": "022.040.003.041.000001", "vbios_build_date": "2023/10/24 13:48",
                            "market_name": "AMD Instinct MI300X", "xcds": 8},
    "AMD Instinct MI325X": {"device_id": "0x74a5", "subsystem_id": "0x74a5", "gfx_version": "gfx942",
                            "compute_units": 304, "memory_mb": 262128, "power_cap_w": 1000, "max_gfx_clock_mhz": 2100,
                            "max_mem_clock_mhz": 1300, "idle_power_w": 160.0, "idle_temperature_c": 37,
                            "vbios_name": "AMD MI325X_HW_SRIOV_CVS_1VF", "vbios_part_number": "113-M3250101-100",
                            "vbios_version": "022.042.003.004.000001", "vbios_build_date": "2024/09/17 11:02",
                            "market_name": "AMD Instinct MI325X", "xcds": 8},
    "AMD Instinct MI355X": {"device_id": "0x75a3", "subsystem_id": "0x75a3", "gfx_version": "gfx950",
                            "compute_units": 256, "memory_mb": 294896, "power_cap_w": 1400, "max_gfx_clock_mhz": 2400,
                            "max_mem_clock_mhz": 2000, "idle_power_w": 210.0, "idle_temperature_c": 38,
                            "vbios_name": "AMD MI355X_HW_SRIOV_CVS_1VF", "vbios_part_number": "113-M3550100-100",
                            "vbios_version": "023.010.001.011.000001", "vbios_build_date": "2025/05/22 09:40",
                            "market_name": "AMD Instinct MI355X", "xcds": 8},
}
# Partitions per GPU of each compute partitioning mode (8 XCDs), and memory partitions of each NPS mode.
COMPUTE_PARTITIONS = {"SPX": 1, "DPX": 2, "QPX": 4, "CPX": 8}
MEMORY_PARTITIONS = {"NPS1": 1, "NPS2": 2, "NPS4": 4}
# Memory partitioning each compute mode allows on MI300-class GPUs (AMD's GPU partitioning guide).
ALLOWED_MEMORY = {"SPX": {"NPS1"}, "DPX": {"NPS1", "NPS2"}, "QPX": {"NPS1"}, "CPX": {"NPS1", "NPS4"}}
# The RAS blocks amdgpu keeps counters for on MI300-class GPUs (/sys/class/drm/cardN/device/ras/<block>_err_count).
RAS_BLOCKS = ("umc", "sdma", "gfx", "mmhub", "pcie_bif", "hdp", "xgmi_wafl")
# The software of a healthy MI300X/MI355X node on ROCm 7.0 (amdgpu from the ROCm 7.0 DKMS package).
AMD_DEFAULTS = {
    "rocm_version": "7.0.2",
    "amdgpu_version": "6.14.14",       # /sys/module/amdgpu/version (DKMS driver), amd-smi's DRIVER VERSION
    "amd_smi_version": "26.0.1+5df6c765",
    "amd_smi_lib_version": "26.0.1",
    "rccl_version": "2.26.6",
    "hip_version": "70051831",
    "rccl_tests_version": "develop:a7809b3",
    "peer_memory": "dma_buf",          # dma_buf (upstream, no module), amd_peermem, or none
}
PEER_MEMORY = ("dma_buf", "amd_peermem", "none")
# The device nodes of a healthy node as amdgpu's udev rule (70-amdgpu.rules) leaves them: the KFD and each
# render node for the render group, the card nodes for video (ROCm's install guide puts job users in both).
DEVICE_NODES = {"kfd": {"mode": "0660", "group": "render"}, "render": {"mode": "0660", "group": "render"},
                "card": {"mode": "0660", "group": "video"}}
DEVICE_GROUPS = ("render", "video", "root")
# /dev/kfd's major number (dynamic: the first free char major from 511 down, as on MI300X nodes) and DRM's.
KFD_MAJOR, DRM_MAJOR = 511, 226
# Healthy MI300X bus numbers (a Supermicro AS-8125GS: one GPU per root complex) and OAM slot order.
DEFAULT_BUSES = ["05", "26", "46", "65", "85", "a6", "c6", "e5"]


def vendor_of(settings: dict[str, Any]) -> str:
    """``nvidia`` or ``amd`` from ``gpus.vendor`` (ValueError on anything else)."""
    vendor = str((settings.get("gpus") or {}).get("vendor", "nvidia")).lower()
    if vendor not in VENDORS:
        raise ValueError(f"gpus.vendor {vendor!r} is none of {', '.join(VENDORS)}")
    return vendor


def absent_tools(state: dict[str, Any]) -> frozenset[str]:
    """The vendor tools a node of this vendor does not have."""
    return NVIDIA_ONLY_TOOLS if state.get("amd") else AMD_ONLY_TOOLS


def _digest(*parts: object) -> str:
    return hashlib.sha256("/".join(str(p) for p in parts).encode()).hexdigest()


def _model(gpu_cfg: dict[str, Any]) -> dict[str, Any]:
    name = str(gpu_cfg.get("model", "AMD Instinct MI300X"))
    if name not in MODELS:
        raise ValueError(f"gpus.model {name!r} is not an AMD model the simulation knows ({', '.join(MODELS)})")
    return {**MODELS[name], **{k: gpu_cfg[k] for k in MODELS[name] if k in gpu_cfg}}


def _pairs(value: Any, physical: int) -> list[tuple[int, int]]:
    pairs = []
    for pair in value or []:
        if not (isinstance(pair, list | tuple) and len(pair) == 2 and all(isinstance(i, int) for i in pair)):
            raise ValueError(f"faults.xgmi_link_down: {pair!r} is not a pair of GPU indices [a, b]")
        a, b = sorted(pair)
        if a == b or b >= physical:
            raise ValueError(f"faults.xgmi_link_down: {pair!r} is not two different GPUs of the node's {physical}")
        pairs.append((a, b))
    return sorted(set(pairs))


def _ras(faults: dict[str, Any], physical: int) -> dict[int, dict[str, dict[str, int]]]:
    out: dict[int, dict[str, dict[str, int]]] = {}
    for entry in faults.get("ras_errors") or []:
        if not isinstance(entry, dict) or set(entry) - {"gpu", "block", "ce", "ue"} or "gpu" not in entry:
            raise ValueError("faults.ras_errors entries are {gpu, block, ce, ue}")
        gpu, block = int(entry["gpu"]), str(entry.get("block", "umc"))
        if gpu >= physical:
            raise ValueError(f"faults.ras_errors: gpu {gpu} is not one of the node's {physical} GPUs")
        if block not in RAS_BLOCKS:
            raise ValueError(f"faults.ras_errors: block {block!r} is none of {', '.join(RAS_BLOCKS)}")
        counts = out.setdefault(gpu, {}).setdefault(block, {"ce": 0, "ue": 0})
        counts["ce"] += int(entry.get("ce", 0))
        counts["ue"] += int(entry.get("ue", 0))
    return out


def device_access(faults: dict[str, Any]) -> dict[str, Any]:
    """The device nodes' modes and groups and the groups the evaluation account is left out of
    (ValueError naming the fault's bad value)."""
    given = faults.get("amd_device_access") or {}
    if not isinstance(given, dict) or set(given) - {*DEVICE_NODES, "job_user_not_in"}:
        raise ValueError(f"faults.amd_device_access takes {sorted({*DEVICE_NODES, 'job_user_not_in'})}")
    out: dict[str, Any] = {}
    for kind, healthy in DEVICE_NODES.items():
        entry = {**healthy, **{k: str(v) for k, v in (given.get(kind) or {}).items()}}
        if set(entry) != {"mode", "group"} or not all(c in "01234567" for c in entry["mode"]) \
                or len(entry["mode"]) != 4 or entry["group"] not in DEVICE_GROUPS:
            raise ValueError(f"faults.amd_device_access.{kind}: {{mode: 4 octal digits, group: one of "
                             f"{', '.join(DEVICE_GROUPS)}}}, got {given.get(kind)!r}")
        out[kind] = entry
    left_out = [str(g) for g in given.get("job_user_not_in") or []]
    if set(left_out) - {"render", "video"}:
        raise ValueError(f"faults.amd_device_access.job_user_not_in: render and/or video, got {left_out}")
    out["job_user_groups"] = [g for g in ("render", "video") if g not in left_out]
    return out


def render(settings: dict[str, Any], faults: dict[str, Any], node: str, cluster: str,
           missing: set[int]) -> dict[str, Any]:
    """node.json's ``amd`` section for an AMD node (ValueError naming the setting it cannot use)."""
    from clustereval.sim.profile import _per_gpu as _per  # profile.py imports this module: read it when rendering

    gpu_cfg = settings.get("gpus") or {}
    model = _model(gpu_cfg)
    software = {**AMD_DEFAULTS, **(settings.get("amd") or {})}
    unknown = set(settings.get("amd") or {}) - set(AMD_DEFAULTS)
    if unknown:
        raise ValueError(f"amd: unknown keys {sorted(unknown)}; known: {sorted(AMD_DEFAULTS)}")
    if software["peer_memory"] not in PEER_MEMORY:
        raise ValueError(f"amd.peer_memory {software['peer_memory']!r} is none of {', '.join(PEER_MEMORY)}")
    partition = {"compute": str(gpu_cfg.get("compute_partition", "SPX")),
                 "memory": str(gpu_cfg.get("memory_partition", "NPS1"))}
    partition.update({k: str(v) for k, v in (faults.get("amd_partition") or {}).items()})
    if partition["compute"] not in COMPUTE_PARTITIONS or partition["memory"] not in MEMORY_PARTITIONS:
        raise ValueError(f"compute/memory partition {partition} is not one of {sorted(COMPUTE_PARTITIONS)} / "
                         f"{sorted(MEMORY_PARTITIONS)}")
    if partition["memory"] not in ALLOWED_MEMORY[partition["compute"]]:
        raise ValueError(f"{partition['compute']} compute partitioning does not allow {partition['memory']}")
    physical = int(gpu_cfg.get("count", 8))
    buses = [str(b).lower() for b in gpu_cfg.get("pci_bus_ids") or DEFAULT_BUSES]
    down = _pairs(faults.get("xgmi_link_down"), physical)
    ras = _ras(faults, physical)
    per_gpu = COMPUTE_PARTITIONS[partition["compute"]]
    nps = MEMORY_PARTITIONS[partition["memory"]]
    idle = gpu_cfg.get("idle") or {}
    temps = faults.get("gpu_temperature_c")
    devices: list[dict[str, Any]] = []
    for phys in range(physical):
        if phys in missing:
            continue
        bus = buses[phys] if phys < len(buses) else f"{0x05 + 0x20 * phys:02x}"
        for part in range(per_gpu):
            h = _digest("amd", cluster, node, phys)
            temp = _per(temps, phys, _per(idle.get("temperature_c"), phys, model["idle_temperature_c"]))
            devices.append({
                "index": len(devices),
                "physical_index": phys,
                "partition_id": part,
                # each partition beyond the first is a PCI function of its own, as amdgpu exposes them
                "bdf": f"0000:{bus}:00.{part}",
                "uuid": f"{h[0:2]}ff{model['device_id'][2:]}-0000-1000-80{h[2:4]}-{h[4:16]}",
                "kfd_id": int(h[16:20], 16) + part,
                # KFD topology nodes: the CPU sockets are 0 and 1, the GPUs follow in order
                "node_id": 2 + len(devices),
                "oam_id": phys,
                "serial": f"69{int(h[20:30], 16) % 10**14:014d}",
                "market_name": model["market_name"],
                "device_id": model["device_id"],
                "subsystem_id": model["subsystem_id"],
                "rev_id": "0x00",
                "gfx_version": model["gfx_version"],
                "compute_units": model["compute_units"] // per_gpu,
                "vbios": {"name": model["vbios_name"], "build_date": model["vbios_build_date"],
                          "part_number": model["vbios_part_number"],
                          "version": str(gpu_cfg.get("vbios_version", model["vbios_version"]))},
                "compute_partition": partition["compute"],
                "memory_partition": partition["memory"],
                "vram_total_mb": model["memory_mb"] // nps if per_gpu > 1 else model["memory_mb"],
                "vram_used_mb": int(idle.get("memory_used_mib", 283)),
                "temperature_edge_c": None,  # MI300-class report no edge sensor (N/A)
                "temperature_hotspot_c": float(temp),
                "temperature_mem_c": float(temp) + 8,
                "power_w": float(_per(idle.get("power_draw_w"), phys, model["idle_power_w"])) / per_gpu,
                "power_cap_w": float(gpu_cfg.get("power_limit_w", model["power_cap_w"])),
                "gfx_clock_mhz": int(idle.get("sm_clock_mhz", 131)),
                "mem_clock_mhz": int(idle.get("mem_clock_mhz", 900)),
                "max_gfx_clock_mhz": int(model["max_gfx_clock_mhz"]),
                "max_mem_clock_mhz": int(model["max_mem_clock_mhz"]),
                "utilization_pct": int(idle.get("utilization_pct", 0)),
                # the counters are the physical GPU's: its first partition shows them, the others none
                "ras": {block: dict(((ras.get(phys) or {}).get(block) if part == 0 else None) or {"ce": 0, "ue": 0})
                        for block in RAS_BLOCKS},
            })
    physical_present = sorted({d["physical_index"] for d in devices})
    if faults.get("rccl_version") is not None:
        software["rccl_version"] = str(faults["rccl_version"])
    return {
        **software,
        "device_access": device_access(faults),
        "model": model["market_name"],
        "physical_gpus": physical_present,
        "gpus": devices,
        # XGMI: every pair of present GPUs is linked (MI300-class OAMs are fully connected) but these
        "xgmi_links_down": [list(p) for p in down if p[0] in physical_present and p[1] in physical_present],
        "ras_kernel_lines": ras_kernel_lines(devices, ras),
    }


def ras_kernel_lines(devices: list[dict[str, Any]], ras: dict[int, dict[str, dict[str, int]]]) -> list[str]:
    """amdgpu's kernel lines for the injected RAS errors, as the driver prints them (corpus: kernel-amd-ras)."""
    lines = []
    stamp = 2345.5
    for phys, blocks in sorted(ras.items()):
        bdf = next((d["bdf"] for d in devices if d["physical_index"] == phys and d["partition_id"] == 0), None)
        if bdf is None:
            continue
        for block, counts in blocks.items():
            for kind in ("ce", "ue"):
                if counts[kind]:
                    word = "correctable" if kind == "ce" else "uncorrectable"
                    lines.append(f"[{stamp:12.6f}] amdgpu {bdf}: {counts[kind]} {word} hardware errors detected "
                                 f"in {block} block")
                    stamp += 0.000004
    return lines

