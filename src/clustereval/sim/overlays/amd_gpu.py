"""The amdgpu driver's sysfs on an AMD node (``gpus: {vendor: amd}``; see sim/amd.py), and its AMD tools.

* ``/sys/module/amdgpu/{version,initstate}``: the loaded DKMS driver (``amd.amdgpu_version``); ROCm's
  ``/opt/rocm/.info/version``;
  ``/sys/module/amd_peermem/initstate`` where ``amd.peer_memory`` is ``amd_peermem``;
* per GPU (physical; ``cardN`` in the order the driver probed them, as ``/sys/class/drm`` lists them):
  ``device/ras/<block>_err_count`` (``ue: N`` / ``ce: N``, as amdgpu's ``amdgpu_ras_sysfs_read`` prints
  them), ``device/ras/features``, ``device/current_compute_partition``,
  ``device/current_memory_partition``, ``device/vbios_version``, ``device/unique_id``;
* ``/sys/class/kfd/kfd/topology/nodes/N/{gpu_id,properties}`` for each logical device (N from 2: the
  CPU sockets are nodes 0 and 1), with ``io_links/M/properties`` of ``type 11`` (XGMI) to every other GPU whose
  link is up (``faults.xgmi_link_down`` removes the pair's link, as a dead XGMI link drops out of the CRAT).

Shims: ``amd-smi`` and ``rocm-smi`` (linked only on AMD nodes; an AMD node lacks the NVIDIA tools).
Faults: sim/amd.py's (``xgmi_link_down``, ``amd_partition``, ``ras_errors``).
"""

from __future__ import annotations

from typing import Any

from clustereval.sim import amd

FAULTS = amd.FAULTS
SHIMS = {"amd-smi": "amd_smi.py", "rocm-smi": "rocm_smi.py"}
# KFD io_link types (kfd_crat.h CRAT_IOLINK_TYPE_*): PCIe express 2, XGMI 11.
IOLINK_XGMI = 11


def validate_settings(settings: dict[str, Any]) -> None:
    amd.vendor_of(settings)


def render(settings: dict[str, Any], state: dict[str, Any], tree) -> None:
    info = state.get("amd")
    if not info:
        return
    tree.file("/sys/module/amdgpu/version", info["amdgpu_version"] + "\n", 0o444)
    tree.file("/sys/module/amdgpu/initstate", "live\n", 0o444)
    # ROCm's own record of the installed release (rocm-core writes "<version>-<build>", e.g. "6.2.0-66")
    tree.file("/opt/rocm/.info/version", f"{info['rocm_version']}-1\n")
    if info["peer_memory"] == "amd_peermem":
        tree.file("/sys/module/amd_peermem/initstate", "live\n", 0o444)
    first = [d for d in info["gpus"] if d["partition_id"] == 0]
    for card, device in enumerate(first, start=1):  # card0 is the BMC's display adapter on an Instinct node
        base = f"/sys/class/drm/card{card}/device"
        for block, counts in device["ras"].items():
            tree.file(f"{base}/ras/{block}_err_count", f"ue: {counts['ue']}\nce: {counts['ce']}\n", 0o444)
        tree.file(f"{base}/ras/features", "feature mask: 0x3fbf\n", 0o444)
        tree.file(f"{base}/current_compute_partition", device["compute_partition"] + "\n")
        tree.file(f"{base}/current_memory_partition", device["memory_partition"] + "\n")
        tree.file(f"{base}/vbios_version", device["vbios"]["part_number"] + "\n", 0o444)
        tree.file(f"{base}/unique_id", device["uuid"].replace("-", "")[:16] + "\n", 0o444)
        tree.file(f"{base}/vendor", "0x1002\n", 0o444)
        tree.file(f"{base}/device", device["device_id"] + "\n", 0o444)
    down = {tuple(pair) for pair in info["xgmi_links_down"]}
    topology = "/sys/class/kfd/kfd/topology"
    tree.file(f"{topology}/generation_id", "1\n", 0o444)
    for device in info["gpus"]:
        node = f"{topology}/nodes/{device['node_id']}"
        tree.file(f"{node}/gpu_id", f"{device['kfd_id']}\n", 0o444)
        domain, bus = device["bdf"][:4], device["bdf"][5:7]
        location = (int(bus, 16) << 8) | int(device["bdf"][-1])
        major, minor, step = _gfx_numbers(device["gfx_version"])
        properties = (
            ("cpu_cores_count", 0), ("simd_count", device["compute_units"] * 4), ("array_count", 4),
            ("cu_per_simd_array", device["compute_units"] // 4),
            ("gfx_target_version", major * 10000 + minor * 100 + step), ("vendor_id", 4098),
            ("device_id", int(device["device_id"], 16)), ("location_id", location), ("domain", int(domain, 16)),
            ("drm_render_minor", 128 + device["index"]), ("local_mem_size", device["vram_total_mb"] * 1024 * 1024),
            ("num_xcc", 8 // _partitions(device)), ("unique_id", int(device["uuid"].replace("-", "")[:16], 16)))
        tree.file(f"{node}/properties", "".join(f"{k} {v}\n" for k, v in properties), 0o444)
        links = [peer for peer in info["gpus"] if peer["physical_index"] != device["physical_index"]
                 and tuple(sorted((peer["physical_index"], device["physical_index"]))) not in down]
        for m, peer in enumerate(links):
            link = (("type", IOLINK_XGMI), ("version_major", 0), ("version_minor", 0),
                    ("node_from", device["node_id"]), ("node_to", peer["node_id"]), ("weight", 15),
                    ("min_latency", 0), ("max_latency", 0), ("min_bandwidth", 50000), ("max_bandwidth", 50000),
                    ("recommended_transfer_size", 0), ("recommended_sdma_engine_id_mask", 0), ("flags", 1))
            tree.file(f"{node}/io_links/{m}/properties", "".join(f"{k} {v}\n" for k, v in link), 0o444)


def _gfx_numbers(gfx: str) -> tuple[int, int, int]:
    """``gfx942`` -> (9, 4, 2); ``gfx950`` -> (9, 5, 0)."""
    digits = gfx.removeprefix("gfx")
    return int(digits[:-2]), int(digits[-2], 16), int(digits[-1], 16)


def _partitions(device: dict[str, Any]) -> int:
    return amd.COMPUTE_PARTITIONS.get(device["compute_partition"], 1)
