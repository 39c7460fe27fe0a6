"""AMD Instinct audit checks (MI300X, MI325X, MI355X): inventory, partition modes, VBIOS, XGMI links, RAS
error counters and their kernel-log history, NUMA balancing, the RDMA peer-memory path, and the versions of
ROCm, amdgpu and RCCL against the security table (device access: audit_amd_access.py).

The inventory comes from ``amd-smi static`` (``rocm-smi``'s Concise Info where amd-smi is not installed) and
is held against the AMD GPUs the PCI bus shows (``amd_node``: vendor 0x1002, so a GPU the driver lost is
still counted). amd-smi lists *logical* GPUs: in CPX compute partitioning each physical GPU is eight of them,
so counts are of physical GPUs (partition 0 of each). A node without AMD GPUs skips every check here.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from clustereval import baselines
from clustereval.checks import Context, HarnessError, ProbeFailed, Skip, Verdict, check, facts
from clustereval.checks.audit import _siblings_gpus, _slurm_declared_gpus
from clustereval.checks.audit_versions import _section, _sections, _verdict
from clustereval.parsers import ParseError, parse
from clustereval.parsers.probe_amd_devices import rccl_header_version, rccl_package_version
from clustereval.parsers.probe_key_values import first
from clustereval.parsers.probe_versions import package_rows

STATIC = "amd_smi_static"
TOPOLOGY = "amd_smi_topology"
RAS = "amd_smi_ras"
ROCM_SMI = "rocm_smi"
NODE = "amd_node"
KERNEL_LOG = "monitoring_kernel_log"
AREA = "amd"
NO_AMD = "no AMD GPU on this node"


def _node(ctx: Context) -> dict[str, list[str]]:
    data = ctx.parsed(NODE)["values"]
    if first(data, "end") != "ok":
        raise HarnessError(f"the AMD node probe ended early on {ctx.subject} (no end=ok line)")
    return data


def _pci_gpus(ctx: Context) -> int:
    text = first(_node(ctx), "amd_pci_gpus", "0")
    return int(text) if text.isdigit() else 0


def _get(section: Any, *keys: str) -> Any:
    """The first of ``keys`` a parsed amd-smi section holds (None for none, or N/A)."""
    if not isinstance(section, dict):
        return None
    for key in keys:
        if section.get(key) not in (None, "N/A", ""):
            return section[key]
    return None


def devices(ctx: Context) -> tuple[list[dict[str, Any]], str]:
    """Every logical GPU as ``{bdf, model, partition_id, compute_partition, memory_partition, vbios, driver}``
    and the tool it came from; Skip on a node without AMD GPUs, a warn-worthy Skip when GPUs are on the bus
    but no AMD tool is installed is raised by the caller (:func:`_inventory`)."""
    try:
        data = ctx.parsed(STATIC)
    except Skip:
        data = None
    if data is not None:
        if not data.get("complete", True):
            raise HarnessError(f"amd-smi static output ended early or was elided (read {data.get('gpu_count')} "
                               f"GPU(s)): {'; '.join(data.get('warnings') or [])[:300]}")
        out = []
        for gpu in data.get("gpus") or []:
            partition = gpu.get("partition") or {}
            out.append({
                "gpu": gpu.get("gpu"),
                "bdf": _get(gpu.get("bus"), "bdf"),
                "model": _get(gpu.get("asic"), "market_name") or "unknown",
                "partition_id": _get(partition, "partition_id"),
                "compute_partition": _get(partition, "accelerator_partition", "compute_partition",
                                           "current_compute_partition"),
                "memory_partition": _get(partition, "memory_partition", "current_memory_partition"),
                "vbios": _get(gpu.get("vbios") or gpu.get("ifwi"), "version", "part_number"),
                "driver": _get(gpu.get("driver"), "version"),
            })
        return out, "amd-smi static"
    data = ctx.parsed(ROCM_SMI)  # Skip when rocm-smi is absent too
    out = []
    for gpu in data.get("gpus") or []:
        out.append({"gpu": gpu.get("index"), "bdf": gpu.get("bdf"), "model": gpu.get("name") or "unknown",
                    "partition_id": gpu.get("partition_id"), "compute_partition": gpu.get("compute_partition"),
                    "memory_partition": gpu.get("memory_partition"), "vbios": gpu.get("vbios"), "driver": None})
    return out, "rocm-smi"


def physical(devs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The physical GPUs among logical devices: partition 0 of each (all of them where no partition is shown)."""
    return [d for d in devs if d.get("partition_id") in (0, "0", None)]


def _inventory(ctx: Context) -> tuple[list[dict[str, Any]], str]:
    try:
        return devices(ctx)
    except Skip as exc:
        on_bus = _pci_gpus(ctx)
        if on_bus:
            raise Skip(f"{on_bus} AMD GPU(s) on the PCI bus but neither amd-smi nor rocm-smi is installed "
                       f"({exc}): not assessed") from None
        raise Skip(f"{NO_AMD} ({exc}; no AMD GPU on the PCI bus)") from None


@check("audit.amd.gpu.inventory")
def gpu_inventory(ctx: Context) -> Verdict:
    devs, tool = _inventory(ctx)
    gpus = physical(devs)
    count = len(gpus)
    models = Counter(str(g["model"]) for g in gpus)
    on_bus = _pci_gpus(ctx)
    configured = int(ctx.options.get("expected_gpus_per_node") or 0)
    declared = _slurm_declared_gpus(ctx)
    siblings, like_it = _siblings_gpus(ctx, "amd_gpu_count")
    evidence = {"tool": tool, "models": dict(models), "bdfs": [g["bdf"] for g in gpus], "logical_gpus": len(devs),
                "pci_gpus": on_bus, "slurm_declared_gpus": declared,
                "siblings_gpus": {"majority": siblings, "hosts": like_it} if siblings else None}
    wanted, said_by, expected = 0, "", None
    if configured:
        wanted, said_by = configured, "are expected"
        expected = {"equals": configured, "source": "clustereval_expected_gpus_per_node"}
    elif declared and declared >= (siblings or 0):
        wanted, said_by = declared, "Slurm declares for the node"
        expected = {"min": declared, "source": "Slurm GRES of the node (scontrol show node)"}
    elif siblings:
        wanted, said_by = siblings, f"its siblings have ({', '.join(like_it[:4])}{' …' if len(like_it) > 4 else ''})"
        expected = {"min": siblings, "source": f"what most of its siblings show ({', '.join(like_it)})"}
    describe = ", ".join(f"{n} × {model}" for model, n in models.items()) or "none"

    def verdict(status: str, summary: str) -> Verdict:
        return Verdict(status, summary, count, unit="GPUs", expected=expected, evidence=evidence)

    if count == 0:
        return verdict("fail", f"{tool} runs but lists no GPUs" + (f" ({on_bus} on the PCI bus)" if on_bus else ""))
    if on_bus > count:
        return verdict("fail", f"{count} GPU(s) visible to the driver ({describe}) but {on_bus} AMD GPUs on the PCI "
                       "bus: a GPU the driver lost (check dmesg for amdgpu init or RAS errors)")
    if wanted and (count < wanted or (configured and count != configured)):
        return verdict("fail", f"{count} GPU(s) visible where {wanted} {said_by}: {describe}")
    if len(models) > 1:
        return verdict("warn", f"mixed GPU models in one node: {describe}")
    return verdict("pass", f"{describe} ({tool}; {len(devs)} logical GPU(s))")


def _partition_of(devs: list[dict[str, Any]]) -> dict[str, list[str]]:
    return {"compute": sorted({str(d["compute_partition"]) for d in devs if d.get("compute_partition")}),
            "memory": sorted({str(d["memory_partition"]) for d in devs if d.get("memory_partition")})}


@check("audit.amd.gpu.partition")
def gpu_partition(ctx: Context) -> Verdict:
    devs, tool = _inventory(ctx)
    mine = _partition_of(devs)
    evidence: dict[str, Any] = {"tool": tool, "compute": mine["compute"], "memory": mine["memory"]}
    if not mine["compute"] and not mine["memory"]:
        raise Skip(f"{tool} shows no partition modes on {ctx.subject} (GPU without partitioning, or an older tool)")
    if len(mine["compute"]) > 1 or len(mine["memory"]) > 1:
        return Verdict("fail", f"GPUs of one node in different partition modes: compute {', '.join(mine['compute'])}, "
                       f"memory {', '.join(mine['memory'])}", "/".join(mine["compute"] + mine["memory"]),
                       evidence=evidence)
    here = f"{mine['compute'][0] if mine['compute'] else '?'}/{mine['memory'][0] if mine['memory'] else '?'}"
    others = {h: f["amd_partition"] for h, f in ctx.fleet.items()
              if h != ctx.subject and f and isinstance(f.get("amd_partition"), str)}
    evidence["siblings"] = others
    expected = None
    if len(others) >= 2:
        majority, n = Counter(others.values()).most_common(1)[0]
        expected = {"equals": majority, "source": f"the partition mode most siblings use ({n} of {len(others)})"}
        if here != majority:
            return Verdict("fail", f"compute/memory partitioning {here} where the fleet runs {majority} "
                           f"({n} of {len(others)} siblings): jobs see {len(devs)} GPU(s) here and a different "
                           "shape elsewhere", here, expected=expected, evidence=evidence)
    return Verdict("pass", f"every GPU in {here} partitioning ({len(devs)} logical GPU(s))"
                   + ("; the same as its siblings" if expected else ""), here, expected=expected, evidence=evidence)


@check("audit.amd.gpu.vbios")
def gpu_vbios(ctx: Context) -> Verdict:
    devs, tool = _inventory(ctx)
    versions = Counter(str(d["vbios"]) for d in physical(devs) if d.get("vbios"))
    if not versions:
        raise HarnessError(f"{tool} printed no VBIOS version on {ctx.subject}")
    evidence: dict[str, Any] = {"tool": tool, "vbios": dict(versions)}
    if len(versions) > 1:
        return Verdict("warn", f"GPUs of one node on different VBIOS versions: "
                       f"{', '.join(f'{v} ×{n}' for v, n in versions.items())}", None, evidence=evidence)
    (here,) = versions
    others = {h: f["amd_vbios"] for h, f in ctx.fleet.items()
              if h != ctx.subject and f and isinstance(f.get("amd_vbios"), str)}
    evidence["siblings"] = others
    if len(others) >= 2:
        majority, n = Counter(others.values()).most_common(1)[0]
        if here != majority:
            return Verdict("warn", f"VBIOS {here} where most siblings run {majority} ({n} of {len(others)}): "
                           "firmware drift between nodes", here,
                           expected={"equals": majority, "source": "the VBIOS most siblings run"}, evidence=evidence)
    return Verdict("pass", f"VBIOS {here} on every GPU", here, evidence=evidence)


@check("audit.amd.xgmi.links")
def xgmi_links(ctx: Context) -> Verdict:
    devs, _ = _inventory(ctx)
    gpus = [d["bdf"] for d in physical(devs) if d.get("bdf")]
    if len(gpus) < 2:
        raise Skip(f"fewer than two GPUs on {ctx.subject}: no GPU-to-GPU link to check")
    table = (ctx.parsed(TOPOLOGY).get("tables") or {}).get("link_type")
    if not table:
        raise HarnessError("amd-smi topology printed no LINK TYPE TABLE")
    pairs, not_xgmi, unreadable = 0, [], []
    for k, a in enumerate(gpus):
        for b in gpus[k + 1:]:
            kind = ((table.get(a) or {}).get(b) or "").upper()
            if not kind:
                unreadable.append(f"{a}-{b}")
                continue
            pairs += 1
            if kind != "XGMI":
                not_xgmi.append(f"{a}↔{b} {kind}")
    evidence = {"gpus": gpus, "pairs": pairs, "not_xgmi": not_xgmi, "unreadable": unreadable}
    if not_xgmi:
        return Verdict("fail", f"{len(not_xgmi)} of {pairs} GPU pairs not linked over XGMI (a link down: their "
                       f"traffic crosses PCIe at a fraction of the bandwidth): {', '.join(not_xgmi[:6])}",
                       len(not_xgmi), unit="pairs", evidence=evidence)
    if unreadable:
        raise HarnessError(f"amd-smi topology shows no link type for {len(unreadable)} GPU pair(s): "
                           f"{', '.join(unreadable[:6])}")
    return Verdict("pass", f"all {pairs} GPU pairs linked over XGMI", 0, unit="pairs", evidence=evidence)


def _ras_counts(ctx: Context) -> tuple[dict[str, dict[str, dict[str, int]]], str]:
    """``{gpu: {block: {ce, ue}}}`` from amd-smi metric --ecc-blocks, else the sysfs counters."""
    try:
        data = ctx.parsed(RAS)
    except Skip:
        data = None
    out: dict[str, dict[str, dict[str, int]]] = {}
    if data is not None:
        for gpu in data.get("gpus") or []:
            blocks = gpu.get("ecc_blocks") or {}
            for block, counts in blocks.items() if isinstance(blocks, dict) else ():
                if isinstance(counts, dict):
                    out.setdefault(f"GPU {gpu.get('gpu')}", {})[block.lower()] = {
                        "ce": int(_get(counts, "correctable_count", "correctable") or 0),
                        "ue": int(_get(counts, "uncorrectable_count", "uncorrectable") or 0)}
        if out:
            return out, "amd-smi metric --ecc-blocks"
    for line in _node(ctx).get("ras") or []:
        words = line.split()
        if len(words) == 4:
            card, block, ue, ce = words[0], words[1], words[2].removeprefix("ue="), words[3].removeprefix("ce=")
            out.setdefault(card, {})[block] = {"ce": int(ce) if ce.isdigit() else 0,
                                               "ue": int(ue) if ue.isdigit() else 0}
    if not out:
        raise HarnessError(f"no RAS error counters readable on {ctx.subject} (amd-smi metric --ecc-blocks "
                           "and /sys/class/drm/card*/device/ras)")
    return out, "/sys/class/drm/card*/device/ras"


@check("audit.amd.ras.counters")
def ras_counters(ctx: Context) -> Verdict:
    _inventory(ctx)
    counts, source = _ras_counts(ctx)
    ue = {f"{g} {b}": c["ue"] for g, blocks in counts.items() for b, c in blocks.items() if c["ue"]}
    ce_total = sum(c["ce"] for blocks in counts.values() for c in blocks.values())
    lim = ctx.limit(AREA, "audit.amd.ras.counters")
    evidence = {"source": source, "uncorrectable": ue, "correctable_total": ce_total,
                "correctable": {f"{g} {b}": c["ce"] for g, blocks in counts.items() for b, c in blocks.items()
                                if c["ce"]}}
    if ue:
        return Verdict("fail", f"uncorrectable RAS errors: {', '.join(f'{k} ×{n}' for k, n in ue.items())} "
                       f"({source}): the GPU needs a reset and, if they recur, an RMA", sum(ue.values()),
                       unit="errors", expected=lim.expected(), evidence=evidence)
    status = baselines.grade(ce_total, lim)
    summary = {"pass": f"no uncorrectable RAS errors, {ce_total} correctable ({source})",
               "warn": f"{ce_total} correctable RAS errors ({source}): memory or links degrading",
               "fail": f"{ce_total} correctable RAS errors ({source}): far above what healthy GPUs log"}[status]
    return Verdict(status, summary, ce_total, unit="errors", expected=lim.expected(), evidence=evidence)


@check("audit.amd.ras.history")
def ras_history(ctx: Context) -> Verdict:
    _inventory(ctx)
    sources = ctx.parsed(KERNEL_LOG)["sources"]
    readable = [s for s in sources if s["rc"] == 0 and s["lines"] > 0]
    if not readable:
        raise HarnessError(f"could not read any kernel log on {ctx.subject}; an unreadable log is not a clean one")
    events: dict[tuple[Any, ...], dict[str, Any]] = {}
    for source in readable:
        lines = [line for line in source["xid_lines"] if "amdgpu" in line]
        if not lines:
            continue
        try:
            parsed = parse("kernel-amd-ras", "\n".join(lines))
        except ParseError as exc:
            raise HarnessError(f"could not parse the amdgpu lines of {source['source']}: {exc}") from None
        for event in parsed.get("events") or []:
            key = (event.get("kind"), event.get("pci"), event.get("block"), event.get("count"), event.get("message"))
            events.setdefault(key, event)
    by_kind = Counter()
    for event in events.values():
        by_kind[event["kind"]] += int(event.get("count") or 1) if event["kind"] in ("ce", "ue", "de") else 1
    read = ", ".join(s["source"] for s in readable)
    evidence = {"counts": dict(by_kind), "sample": [e.get("raw") for e in list(events.values())[:5]], "read": read}
    if by_kind["ue"] or by_kind["reset_failed"]:
        return Verdict("fail", f"the kernel log records {by_kind['ue']} uncorrectable RAS error(s)"
                       + (f" and {by_kind['reset_failed']} failed GPU reset(s)" if by_kind["reset_failed"] else "")
                       + f" ({read})", by_kind["ue"], unit="errors", evidence=evidence)
    if by_kind["ce"] or by_kind["reset_begin"]:
        return Verdict("warn", f"the kernel log records {by_kind['ce']} correctable RAS error(s)"
                       + (f" and {by_kind['reset_begin']} GPU reset(s)" if by_kind["reset_begin"] else "")
                       + f" ({read})", by_kind["ce"], unit="errors", evidence=evidence)
    return Verdict("pass", f"no amdgpu RAS errors or GPU resets in the kernel log ({read})", 0, unit="errors",
                   evidence=evidence)


@check("audit.amd.numa_balancing")
def numa_balancing(ctx: Context) -> Verdict:
    _inventory(ctx)
    value = first(_node(ctx), "numa_balancing", "absent")
    evidence = {"kernel.numa_balancing": value}
    if value == "absent":
        raise Skip("the kernel has no automatic NUMA balancing (/proc/sys/kernel/numa_balancing absent)")
    if value != "0":
        return Verdict("warn", f"automatic NUMA balancing is on (kernel.numa_balancing={value}): its page "
                       "migrations cost GEMM and collective throughput on MI300-class nodes", value,
                       expected={"equals": "0", "source": "AMD Instinct MI300X workload tuning guide"},
                       evidence=evidence)
    return Verdict("pass", "automatic NUMA balancing is off", value,
                   expected={"equals": "0", "source": "AMD Instinct MI300X workload tuning guide"}, evidence=evidence)


@check("audit.amd.peer_memory")
def peer_memory(ctx: Context) -> Verdict:
    _inventory(ctx)
    node = _node(ctx)
    modules = set(node.get("module") or [])
    kernel = first(node, "kernel")
    dma_buf = "amdgpu" in modules and baselines.version_key(kernel)[:2] >= (5, 12)
    evidence = {"modules": sorted(modules), "kernel": kernel, "dma_buf": dma_buf}
    if "amdgpu" not in modules:
        return Verdict("fail", "the amdgpu module is not loaded: no GPU peer-memory path for RDMA", None,
                       evidence=evidence)
    if dma_buf:
        return Verdict("pass", f"dma-buf peer memory for RDMA: amdgpu on kernel {kernel}"
                       + (" (amd_peermem also loaded)" if "amd_peermem" in modules else ""), "dma-buf",
                       evidence=evidence)
    if "amd_peermem" in modules:
        return Verdict("pass", f"peer memory for RDMA through amd_peermem (kernel {kernel} predates dma-buf)",
                       "amd_peermem", evidence=evidence)
    return Verdict("fail", f"no GPU peer-memory path for RDMA: kernel {kernel} has no dma-buf support and "
                   "amd_peermem is not loaded", None, evidence=evidence)


@facts(probes=[STATIC, NODE])
def amd_facts(ctx: Context) -> dict[str, Any]:
    """The AMD GPUs' facts (``amd_*``; None on a node without them), read by facts.hardware for gpu_model etc."""
    out: dict[str, Any] = {"problems": {}, "amd_gpu_count": None, "amd_hip_devices": None, "amd_gpu_models": [],
                           "amd_driver_version": None, "amd_partition": None, "amd_vbios": None, "rocm_version": None}
    try:
        devs, _ = devices(ctx)
    except Skip:
        return out
    except (HarnessError, ProbeFailed) as exc:
        out["problems"]["amd_gpu"] = str(exc)
        return out
    gpus = physical(devs)
    parts = _partition_of(devs)
    vbios = Counter(str(d["vbios"]) for d in gpus if d.get("vbios"))
    drivers = Counter(str(d["driver"]) for d in gpus if d.get("driver"))
    out.update(amd_gpu_count=len(gpus), amd_hip_devices=len(devs),
               amd_gpu_models=sorted({str(g["model"]) for g in gpus}),
               amd_partition="/".join([",".join(parts["compute"]) or "?", ",".join(parts["memory"]) or "?"]),
               amd_vbios=vbios.most_common(1)[0][0] if vbios else None,
               amd_driver_version=drivers.most_common(1)[0][0] if drivers else None)
    try:
        rocm = first(_node(ctx), "rocm_version", "absent")
        out["rocm_version"] = None if rocm == "absent" else rocm.split("-")[0]
        if not out["amd_driver_version"]:
            driver = first(_node(ctx), "amdgpu_version", "absent")
            out["amd_driver_version"] = None if driver == "absent" else driver
    except (Skip, HarnessError, ProbeFailed) as exc:
        out["problems"]["amd_node"] = str(exc)
    return out


@check("audit.versions.rocm")
def rocm_version(ctx: Context) -> Verdict:
    _inventory(ctx)
    installed = first(_node(ctx), "rocm_version", "absent")
    if installed == "absent":
        return Verdict("warn", "AMD GPUs but no ROCm release recorded (/opt/rocm/.info/version absent): the ROCm "
                       "version is unknown, not a pass", None, evidence={"rocm_version": None})
    release = installed.split("-")[0]
    return _verdict(ctx, "rocm", release, "ROCm", "/opt/rocm/.info/version", {"file": installed})


@check("audit.versions.amdgpu_driver")
def amdgpu_driver(ctx: Context) -> Verdict:
    devs, tool = _inventory(ctx)
    loaded = first(_node(ctx), "amdgpu_version", "absent")
    reported = Counter(str(d["driver"]) for d in devs if d.get("driver"))
    evidence = {"loaded_module": None if loaded == "absent" else loaded, tool: dict(reported)}
    if loaded != "absent":
        return _verdict(ctx, "amdgpu_driver", loaded, "amdgpu driver", "/sys/module/amdgpu/version", evidence)
    if reported:
        return _verdict(ctx, "amdgpu_driver", reported.most_common(1)[0][0], "amdgpu driver", tool, evidence)
    return Verdict("warn", "AMD GPUs but no amdgpu driver version readable (/sys/module/amdgpu/version absent: "
                   "the in-kernel driver, whose version is the kernel's): not a pass", None, evidence=evidence)


def rccl_found(text: str) -> dict[str, Any]:
    """The versions probe's ``rccl`` section: ``{header, header_version, libraries, package, package_version}``."""
    header = next((line.split(" ", 1)[1] for line in text.splitlines() if line.startswith("header ")), None)
    libraries = [line.split(" ", 1)[1] for line in text.splitlines() if line.startswith("lib ")]
    package = package_rows(text).get("rccl")
    return {"header": header, "header_version": rccl_header_version(text) if header else None,
            "libraries": libraries, "package": package, "package_version": rccl_package_version(package or "")}


@check("audit.versions.rccl")
def rccl_version(ctx: Context) -> Verdict:
    _inventory(ctx)
    section = _section(_sections(ctx), "rccl")
    if section.rc is None:
        raise HarnessError("the versions probe's rccl section was cut short")
    found = rccl_found(section.text)
    evidence = {k: v for k, v in found.items() if v}
    if found["header_version"]:
        return _verdict(ctx, "rccl", found["header_version"], "RCCL", found["header"], evidence)
    if found["package_version"]:
        return _verdict(ctx, "rccl", found["package_version"], "RCCL", "the rccl package", evidence)
    if found["header"]:
        return Verdict("warn", f"{found['header']} names no NCCL_MAJOR/MINOR/PATCH: the RCCL version is unknown, "
                       "not a pass", None, evidence=evidence)
    if found["libraries"] or found["package"]:
        what = ", ".join(found["libraries"][:2]) or f"package rccl {found['package']}"
        return Verdict("warn", f"RCCL is installed ({what}) but neither rccl.h nor an rccl package gives its "
                       "version: unknown, not a pass", None, evidence=evidence)
    return Verdict("warn", "AMD GPUs but no RCCL on the node (no rccl/rccl.h, no librccl.so under /opt/rocm/lib): "
                   "multi-GPU jobs use whatever RCCL their container or wheel brings, which is not graded", None,
                   evidence=evidence)
