"""What the run learnt about each node's hardware and software, kept in the run directory.

The judge derives per-host facts from the probes every run collects (``checks.host_facts``); the
documented hardware subset (:data:`HARDWARE_KEYS`) is written to ``facts/<host>.json`` as soon as a node
is judged, so a performance-only run, ``clustereval report``, compare and history know what was tested,
and baselines are matched on it (``clustereval.baselines.reference``).
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from pathlib import Path
from typing import Any

from clustereval import private
from clustereval import results as results_mod

FACTS_DIR = "facts"
# key -> what it holds. Every key is present in a host's facts; None means "not known".
HARDWARE_KEYS = {
    "gpu_model": "the GPU model the driver names (the most common one when a node mixes models)",
    "gpu_count": "GPUs the driver sees (physical GPUs: an AMD GPU in CPX partitioning counts once)",
    "gpu_vendor": "nvidia or amd (None: no GPU seen)",
    "driver_version": "GPU driver version (NVIDIA driver, or the amdgpu driver on AMD nodes)",
    "cuda_version": "CUDA version the driver supports",
    "rocm_version": "ROCm release installed (AMD nodes)",
    "kernel": "running kernel release",
    "cpu_model": "CPU model name",
    "cpu_count": "logical CPUs",
    "cpu_sockets": "CPU sockets",
    "memory_gib": "memory the kernel sees, GiB",
    "fabric_class": "the most common active RDMA port class (infiniband, roce, efa, ...)",
    "fabric_rate_gbps": "the fastest active RDMA port rate, Gbit/s",
    "fabric_ports_active": "active RDMA ports",
    "nics": "RDMA ports as 'name class rate' (down ports say 'down')",
    "harness": "slurm, k8s or standalone",
    "nvlink_domain": "the multi-node NVLink domain (NVL72 rack) the GPUs belong to: their fabric clusterUuid; None "
                     "outside one (no fabric, N/A or an all-zero UUID)",
}
# Facts that name *which* instance a host is part of rather than what hardware it is: they differ between hosts by
# design, so the fleet keeps no majority of them and never lists their hosts as differing.
IDENTITY_KEYS = ("nvlink_domain",)
# The probes the hardware facts come from: what a run that does not audit collects (roles/facts).
HARDWARE_PROBES = ("nvidia_smi_q_x", "amd_smi_static", "amd_node", "uname_r", "slurm_node", "fabric_rdma",
                   "facts_host")
_RATE = re.compile(r"(\d+(?:\.\d+)?)G$")
_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


def hardware(host_facts: dict[str, Any]) -> dict[str, Any]:
    """The documented hardware facts of one host from the merged facts the audit's functions derive."""
    nvidia = bool(host_facts.get("gpu_count"))
    amd = not nvidia and bool(host_facts.get("amd_gpu_count"))
    models = (host_facts.get("amd_gpu_models") if amd else host_facts.get("gpu_models")) or []
    rails = [str(r) for r in host_facts.get("fabric_rails") or []]
    rates = [float(m.group(1)) for r in rails if (m := _RATE.search(r.split()[-1] if r.split() else ""))]
    out = {
        "gpu_model": Counter(models).most_common(1)[0][0] if models else None,
        "gpu_count": host_facts.get("amd_gpu_count") if amd else host_facts.get("gpu_count"),
        "gpu_vendor": "amd" if amd else "nvidia" if nvidia else None,
        "driver_version": host_facts.get("amd_driver_version") if amd else host_facts.get("driver_version"),
        "cuda_version": host_facts.get("cuda_version"),
        "rocm_version": host_facts.get("rocm_version"),
        "kernel": host_facts.get("kernel"),
        "cpu_model": host_facts.get("cpu_model"),
        "cpu_count": host_facts.get("cpu_count"),
        "cpu_sockets": host_facts.get("cpu_sockets"),
        "memory_gib": host_facts.get("memory_gib"),
        "fabric_class": host_facts.get("fabric_class"),
        "fabric_rate_gbps": max(rates) if rates else None,
        "fabric_ports_active": len(rates) if host_facts.get("fabric_rails") is not None else None,
        "nics": rails if host_facts.get("fabric_rails") is not None else None,
        "harness": host_facts.get("harness"),
        "nvlink_domain": host_facts.get("nvlink_domain"),
    }
    return {key: out.get(key) for key in HARDWARE_KEYS}


def nvlink_domain(fabric: list[dict[str, str]]) -> str | None:
    """The multi-node NVLink domain of a host from its GPUs' ``<fabric>`` blocks (``parsers.nvidia_smi_q_x_text.
    gpu_fabric``): the ``clusterUuid`` most of its GPUs report, None when none reports one (N/A, empty, or the
    all-zero UUID a GPU outside a multi-node domain shows)."""
    uuids = [str(g.get("clusterUuid") or "").strip() for g in fabric]
    found = [u for u in uuids if u and u.upper() != "N/A" and set(u.replace("-", "")) != {"0"}]
    return Counter(found).most_common(1)[0][0] if found else None


def write(run_dir: str | os.PathLike[str], host: str, facts: dict[str, Any]) -> Path:
    """Write one host's facts to ``facts/<host>.json`` (atomically: readers never see half a file)."""
    folder = Path(run_dir) / FACTS_DIR
    private.folder(folder)
    path = folder / f"{_SAFE.sub('_', host)}.json"
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    with private.open_file(tmp, "w", encoding="utf-8") as fh:
        fh.write(json.dumps({"host": host, **facts}, indent=2, sort_keys=True, default=str) + "\n")
    os.replace(tmp, path)
    return path


def load(run_dir: str | os.PathLike[str]) -> dict[str, dict[str, Any]]:
    """Every host's facts in a run directory (``{}`` when none were written); unreadable files are skipped."""
    folder = Path(run_dir) / FACTS_DIR
    out: dict[str, dict[str, Any]] = {}
    if not folder.is_dir():
        return out
    for path in sorted(folder.glob("*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and data.get("host"):
            out[str(data.pop("host"))] = data
    return out


def fleet(per_host: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The cluster's facts: per key the value most hosts share (None when no host knows it), the number
    of hosts, and which hosts differ from the majority on which key."""
    summary: dict[str, Any] = {"hosts": len(per_host), "differing": {}}
    for key in HARDWARE_KEYS:
        values = {h: f.get(key) for h, f in per_host.items() if f.get(key) is not None}
        if not values or key in IDENTITY_KEYS:
            summary[key] = None
            continue
        counted = Counter(json.dumps(v, sort_keys=True, default=str) for v in values.values())
        majority = json.loads(counted.most_common(1)[0][0])
        summary[key] = majority
        odd = sorted(h for h, v in values.items() if json.dumps(v, sort_keys=True, default=str)
                     != json.dumps(majority, sort_keys=True, default=str))
        if odd:
            summary["differing"][key] = odd
    return summary


def for_subject(per_host: dict[str, dict[str, Any]], subject: str) -> dict[str, Any]:
    """The facts a result about ``subject`` is judged on: its host's for a host or a host's component,
    the values all its hosts share for a pair or a set (numbers: the smallest, the path's bottleneck),
    the fleet's for the cluster and named subjects."""
    hosts = [h for h in results_mod.subject_hosts(subject) if h in per_host]
    if not hosts:
        return {k: v for k, v in fleet(per_host).items() if k in HARDWARE_KEYS}
    if len(hosts) == 1:
        return dict(per_host[hosts[0]])
    out: dict[str, Any] = {}
    for key in HARDWARE_KEYS:
        values = [per_host[h].get(key) for h in hosts]
        if any(v is None for v in values):
            out[key] = None
        elif all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
            out[key] = min(values)
        else:
            first = json.dumps(values[0], sort_keys=True, default=str)
            same = all(json.dumps(v, sort_keys=True, default=str) == first for v in values)
            out[key] = values[0] if same else None
    return out
