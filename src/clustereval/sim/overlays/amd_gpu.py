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

* what a job opens: ``/dev/kfd`` and per logical device ``/dev/dri/renderD<128+index>`` (per physical GPU
  ``/dev/dri/card<N>``), real character device nodes (KFD major 511, DRM 226) with the modes and groups of
  ``amd.device_access`` (0660 root:render / root:video; fault ``amd_device_access``), made in the node's overlay
  of ``/dev`` (which keeps ``/dev``'s own mounts, ``/dev/pts`` and ``/dev/shm``: overlays.build);
  ``/sys/class/drm/renderD*/device/uevent`` and
  ``card*/device/uevent`` (``DRIVER=amdgpu``, ``PCI_ID``, ``PCI_SLOT_NAME``, as the PCI device's uevent reads);
  the ``render`` and ``video`` groups in ``/etc/group`` with the evaluation account (``evaluator``) a member
  unless ``amd_device_access.job_user_not_in`` leaves it out; the udev rule that sets the modes
  (``/etc/udev/rules.d/70-amdgpu.rules``);
* RCCL: ``/opt/rocm/include/rccl/rccl.h`` (the head of the header RCCL's CMakeLists configures from
  ``src/nccl.h.in``: ``#define NCCL_MAJOR/MINOR/PATCH`` of ``amd.rccl_version``, fault ``rccl_version``).

Shims: ``amd-smi`` and ``rocm-smi`` (linked only on AMD nodes; an AMD node lacks the NVIDIA tools).
Faults: sim/amd.py's (``xgmi_link_down``, ``amd_partition``, ``ras_errors``, ``amd_device_access``,
``rccl_version``).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

from clustereval.sim import amd
from clustereval.sim.overlays.accounts import evaluator

FAULTS = amd.FAULTS
SHIMS = {"amd-smi": "amd_smi.py", "rocm-smi": "rocm_smi.py"}
# KFD io_link types (kfd_crat.h CRAT_IOLINK_TYPE_*): PCIe express 2, XGMI 11.
IOLINK_XGMI = 11
# gids the render and video groups get where the host's /etc/group lacks them (Debian/Ubuntu's usual ones).
GROUP_GIDS = {"video": 44, "render": 109, "root": 0}
# The modes and groups amdgpu's udev rule gives the nodes (rule text per kind of node).
UDEV_MATCH = {"kfd": 'KERNEL=="kfd"', "render": 'SUBSYSTEM=="drm", KERNEL=="renderD*"',
              "card": 'SUBSYSTEM=="drm", KERNEL=="card[0-9]*"'}


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
    tree.file("/opt/rocm/include/rccl/rccl.h", rccl_header(info["rccl_version"]))
    render_devices(settings, state, info, tree)
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


def rccl_header(version: str) -> str:
    """The head of RCCL's installed ``rccl.h`` for ``version`` (src/nccl.h.in with CMake's values)."""
    major, minor, patch = [*version.split("."), "0", "0"][:3]
    # CMakeLists: NCCL_VERSION is MAJOR MINOR PATCH run together, PATCH padded to two digits
    code = f"{major}{minor}{int(patch):02d}"
    return ("/*************************************************************************\n"
            " * Copyright (c) 2015-2021, NVIDIA CORPORATION. All rights reserved.\n"
            " * Modifications Copyright (c) 2019-2023 Advanced Micro Devices, Inc. All rights reserved.\n"
            " *\n * See LICENSE.txt for license information\n"
            " ************************************************************************/\n\n"
            "#ifndef NCCL_H_\n#define NCCL_H_\n\n#include <hip/hip_runtime.h>\n#include <hip/hip_fp16.h>\n\n"
            f"#define NCCL_MAJOR {int(major)}\n#define NCCL_MINOR {int(minor)}\n#define NCCL_PATCH {int(patch)}\n"
            '#define NCCL_SUFFIX ""\n\n'
            f"#define NCCL_VERSION_CODE {code}\n"
            "#define NCCL_VERSION(X,Y,Z) (((X) <= 2 && (Y) <= 8) ? (X) * 1000 + (Y) * 100 + (Z) : "
            "(X) * 10000 + (Y) * 100 + (Z))\n\n#endif // end include guard\n")


def _groups(settings: dict[str, Any], tree, access: dict[str, Any]) -> dict[str, int]:
    """The node's /etc/group with render and video (the evaluation account in those it belongs to); their gids."""
    account = evaluator(settings)
    if "/etc/group" in tree.files:
        text, mode = tree.files["/etc/group"]
    else:
        try:
            text, mode = Path("/etc/group").read_text(encoding="utf-8"), 0o644
        except OSError:
            text, mode = "", 0o644
    lines = text.splitlines()
    gids = dict(GROUP_GIDS)
    for name in ("render", "video"):
        row = next((k for k, line in enumerate(lines) if line.split(":")[0] == name), None)
        if row is None:
            used = {int(f[2]) for f in (line.split(":") for line in lines) if len(f) > 2 and f[2].isdigit()}
            gid = GROUP_GIDS[name]
            while gid in used:
                gid += 1
            lines.append(f"{name}:x:{gid}:")
            row = len(lines) - 1
        cells = lines[row].split(":") + [""] * 4
        gids[name] = int(cells[2])
        members = [m for m in cells[3].split(",") if m]
        if account and name in access["job_user_groups"] and account["user"] not in members:
            members.append(account["user"])
        lines[row] = ":".join([cells[0], cells[1], cells[2], ",".join(members)])
    tree.file("/etc/group", "\n".join(lines) + "\n", mode)
    return gids


def _device_node(tree, node: str, path: str, major: int, minor: int, mode: int, gid: int) -> None:
    """A character device node the node shows at ``path`` (Tree has none: made in the node's overlay upper
    directory, as ``_files.symlink`` makes links)."""
    tree.whiteout(path)
    if tree.cluster_dir is None:
        return  # rendering for inspection only: nothing is mounted
    target = Path(tree.cluster_dir) / "nodes" / node / "overlay" / path.lstrip("/")
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.exists() or target.is_symlink():
        target.unlink()
    os.mknod(target, stat.S_IFCHR | mode, os.makedev(major, minor))
    os.chown(target, 0, gid)
    os.chmod(target, mode)


def _uevent(device: dict[str, Any]) -> str:
    vendor, dev = "1002", device["device_id"][2:].upper()
    sub = device["subsystem_id"][2:].upper()
    return (f"DRIVER=amdgpu\nPCI_CLASS=120000\nPCI_ID={vendor}:{dev}\nPCI_SUBSYS_ID={vendor}:{sub}\n"
            f"PCI_SLOT_NAME={device['bdf']}\nMODALIAS=pci:v0000{vendor}d0000{dev}sv0000{vendor}sd0000{sub}"
            "bc12sc00i00\n")


def render_devices(settings: dict[str, Any], state: dict[str, Any], info: dict[str, Any], tree) -> None:
    """The device nodes a job opens, the DRM class entries naming their PCI devices, the groups and the udev
    rule (see the module docstring)."""
    access = info["device_access"]
    gids = _groups(settings, tree, access)
    rules = ["# amdgpu: the KFD and render nodes for the render group, the card nodes for video"]
    rules += [f'{UDEV_MATCH[kind]}, GROUP="{access[kind]["group"]}", MODE="{access[kind]["mode"]}"'
              for kind in ("kfd", "render", "card")]
    tree.file("/etc/udev/rules.d/70-amdgpu.rules", "\n".join(rules) + "\n")
    firsts = [d for d in info["gpus"] if d["partition_id"] == 0]
    for card, device in enumerate(firsts, start=1):
        tree.file(f"/sys/class/drm/card{card}/device/uevent", _uevent(device), 0o644)
    for device in info["gpus"]:
        tree.file(f"/sys/class/drm/renderD{128 + device['index']}/device/uevent", _uevent(device), 0o644)
    node = str(state.get("node", ""))

    def made(path: str, kind: str, major: int, minor: int) -> None:
        entry = access[kind]
        _device_node(tree, node, path, major, minor, int(entry["mode"], 8), gids[entry["group"]])

    made("/dev/kfd", "kfd", amd.KFD_MAJOR, 0)
    for card, _device in enumerate(firsts, start=1):
        made(f"/dev/dri/card{card}", "card", amd.DRM_MAJOR, card)
    for device in info["gpus"]:
        made(f"/dev/dri/renderD{128 + device['index']}", "render", amd.DRM_MAJOR, 128 + device["index"])
