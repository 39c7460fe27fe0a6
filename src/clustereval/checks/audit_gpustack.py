"""Audit checks of the GPU stack and profiling access (audit.gpustack.*).

Evidence comes from four probes (``checks/probes/gpustack.yml``): ``lspci -D -nn -vvv`` (pciutils 3.x;
ACS bits, bridge bus ranges), a ``key: value`` node probe (sysfs/procfs reads, ``command -v``),
``/proc/driver/nvidia/params`` (R450-R580) and ``nvidia-smi topo -m`` / ``boost-slider -l`` (R535+).
The helpers here are shared with ``audit_isolation``. Nothing changes node state: vboost is only read.
"""

from __future__ import annotations

import re
from typing import Any

from clustereval import baselines
from clustereval.checks import Context, HarnessError, ProbeFailed, Skip, Verdict, check
from clustereval.parsers import ParseError, parse
from clustereval.parsers.lspci_bridges import access_denied, bus_ranges
from clustereval.parsers.nvidia_smi_q_x_text import driver_versions
from clustereval.parsers.probe_key_values import first
from clustereval.parsers.probe_versions import sections as version_sections
from clustereval.results import worst

LSPCI = "gpustack_lspci"
NODE = "gpustack_node"
PARAMS = "gpustack_params"
TOPO = "gpustack_topo"
VBOOST = "gpustack_vboost"
SMI_XML = "nvidia_smi_q_x"  # the core probe; its report names the driver nvidia-smi (NVML) loaded
VERSIONS = "versions_inventory"  # runs nvidia-ctk --version for the security table; read here too

NVIDIA, AMD, MELLANOX = "10de", "1002", "15b3"
# PCI classes a GPU shows as: NVIDIA's data-centre GPUs are 3D controllers, AMD Instinct parts Processing
# accelerators (class 1200; older Instinct and Radeon parts Display/VGA). An EPYC host's own AMD functions
# (host bridges, PSP, IOMMU) have other classes.
GPU_CLASSES = ("3D controller", "VGA compatible controller", "Display controller", "Processing accelerators")
_VERSION = re.compile(r"\b(\d{3}\.\d{2,3}(?:\.\d{2})?)\b")
_ARCHITECTURE = re.compile(r"<product_architecture>\s*([^<]*?)\s*</product_architecture>")
# GPU architectures NVIDIA supports only with the open GPU kernel modules (R560+ installs them by default).
OPEN_MODULE_ONLY = ("Blackwell",)
REDIRECT_BITS = ("ReqRedir", "CmpltRedir", "UpstreamFwd")


# ------------------------------------------------------------------------------------------ shared helpers


def node_facts(ctx: Context, name: str) -> dict[str, list[str]]:
    """A ``key: value`` probe (parser ``probe-key-colon-value``), checked for completeness (its last line is
    ``end: ok``)."""
    facts = ctx.parsed(name)["values"]
    if "end" not in facts:
        raise HarnessError(f"probe {name} output is cut short or unreadable (no final 'end: ok' line)")
    return facts


def privileged(facts: dict[str, list[str]]) -> bool:
    """Whether the audit's user is root or has passwordless sudo (what a root-capable tenant can do)."""
    return first(facts, "sudo") in ("root", "yes")


def is_vm_guest(facts: dict[str, list[str]]) -> bool | None:
    """True in a VM (systemd-detect-virt --vm), False on bare metal, None when it could not tell."""
    virt = first(facts, "virt_vm")
    if not virt:
        return None
    return virt != "none"


def pci_inventory(ctx: Context) -> dict[str, Any]:
    """GPUs, RDMA NICs, BlueField functions and bridges (with bus ranges) from ``lspci -D -nn -vvv``."""
    text = str(ctx.probe(LSPCI).get("stdout", ""))
    data = ctx.parsed(LSPCI)
    ranges = bus_ranges(text)
    devices = data.get("devices") or []

    def vendor(dev: dict[str, Any], vid: str, word: str) -> bool:
        return dev.get("vendor_id") == vid or (dev.get("vendor_id") is None and word in dev["description"])

    gpus = [d for d in devices if vendor(d, NVIDIA, "NVIDIA") and d["class"] in GPU_CLASSES[:3]]
    amd_gpus = [d for d in devices if vendor(d, AMD, "[AMD/ATI]") and d["class"] in GPU_CLASSES]
    bluefield = [d for d in devices if "BlueField" in d["description"]]
    nics = [d for d in devices if d["class"] in ("Infiniband controller", "Ethernet controller", "Network controller")
            and vendor(d, MELLANOX, "Mellanox") and "Virtual Function" not in d["description"]]
    bridges = {d["address"]: d for d in devices if d["class"] == "PCI bridge"}
    denied = access_denied(text)
    # gpus: NVIDIA's (what the NVIDIA driver checks read); accelerators: every vendor's, for the PCIe-path
    # checks (ACS, IOMMU, passthrough) that hold for any GPU doing peer DMA with a NIC.
    return {"gpus": gpus, "accelerators": gpus + amd_gpus, "nics": nics, "bluefield": bluefield,
            "bridges": bridges, "ranges": ranges, "devices": devices, "access_denied": denied,
            "complete": data.get("complete", True)}


def ancestors(address: str, ranges: dict[str, tuple[int, int]]) -> list[str]:
    """Bridges whose secondary..subordinate bus range holds ``address`` (outermost first)."""
    domain, bus = address.split(":")[0], int(address.split(":")[1], 16)
    found = [(hi - lo, br) for br, (lo, hi) in ranges.items()
             if br.split(":")[0] == domain and lo <= bus <= hi and br != address]
    return [br for _, br in sorted(found, reverse=True)]


def smi_driver(ctx: Context) -> str:
    """What nvidia-smi says of the driver: the version in its ``-q -x`` report, else what it printed (an
    NVML error), else ``absent`` (not installed or not collected). Cut or garbled XML still names the
    driver in its first lines."""
    if SMI_XML not in ctx.probes:
        return "absent"
    probe = ctx.raw(SMI_XML)
    if probe.get("missing"):
        return "absent"
    text = str(probe.get("stdout") or "")
    found = driver_versions(text)
    if found:
        return " ".join(found)
    said = text.strip() or str(probe.get("stderr") or "").strip()
    return said[:300] if said else f"nothing (exit status {probe.get('rc')})"


def ctk_version(ctx: Context) -> str | None:
    """The first line ``nvidia-ctk --version`` printed in the versions probe (None: not installed or not read)."""
    if VERSIONS not in ctx.probes:
        return None
    probe = ctx.raw(VERSIONS)
    section = version_sections(str(probe.get("stdout") or "")).get("nvidia-ctk")
    if section is None or not section["present"]:
        return None
    return section["text"].splitlines()[0] if section["text"] else ""


def smi_architectures(ctx: Context) -> set[str]:
    """GPU architectures the ``nvidia-smi -q -x`` report names (``<product_architecture>``, R470+); empty when
    nvidia-smi is missing or named none (a cut report keeps those of the GPUs before the cut)."""
    if SMI_XML not in ctx.probes or ctx.raw(SMI_XML).get("missing"):
        return set()
    return set(_ARCHITECTURE.findall(str(ctx.raw(SMI_XML).get("stdout") or ""))) - {"", "N/A"}


def gpu_present(ctx: Context) -> tuple[bool, dict[str, Any] | None]:
    """Whether the node has an NVIDIA GPU: lspci when it is there, else the driver's own files."""
    try:
        inv = pci_inventory(ctx)
        return bool(inv["gpus"]), inv
    except Skip:
        facts = node_facts(ctx, NODE)
        return (first(facts, "proc_version", "absent") != "absent" or smi_driver(ctx) != "absent"), None


def require_gpu(ctx: Context) -> dict[str, Any] | None:
    present, inv = gpu_present(ctx)
    if not present:
        raise Skip(f"no NVIDIA GPU on this node ({ctx.subject})")
    return inv


def require_any_gpu(ctx: Context) -> dict[str, Any] | None:
    """The PCI inventory (None without lspci) of a node with an NVIDIA or AMD GPU; Skip on a node with neither.
    Without lspci an AMD GPU is known by the loaded amdgpu module."""
    try:
        inv = pci_inventory(ctx)
    except Skip:
        present, inv = gpu_present(ctx)
        if present or "amdgpu" in (node_facts(ctx, NODE).get("module") or []):
            return None
        raise Skip(f"no GPU on this node ({ctx.subject})") from None
    if not inv["accelerators"]:
        raise Skip(f"no NVIDIA or AMD GPU on this node ({ctx.subject})")
    return inv


def driver_params(ctx: Context) -> dict[str, Any] | None:
    """``/proc/driver/nvidia/params`` parsed, or None when the driver is not loaded."""
    text = ctx.probe(PARAMS).get("stdout", "")
    if text.strip() == "absent":
        return None
    try:
        return parse("proc-driver-nvidia", text)
    except ParseError as exc:
        raise HarnessError(f"could not parse /proc/driver/nvidia/params: {exc}") from None


# ------------------------------------------------------------------------------------------ checks


@check("audit.gpustack.driver")
def driver(ctx: Context) -> Verdict:
    facts = node_facts(ctx, NODE)
    present, _ = gpu_present(ctx)
    smi_raw, proc_raw = smi_driver(ctx), first(facts, "proc_version", "absent")
    module_raw = first(facts, "module_version", "absent")
    evidence = {"nvidia_smi": smi_raw, "proc_driver_nvidia_version": proc_raw, "sys_module_nvidia_version": module_raw}
    if not present and smi_raw == "absent" and proc_raw == "absent":
        raise Skip(f"no NVIDIA GPU on this node ({ctx.subject})")
    if any(s in smi_raw for s in ("version mismatch", "couldn't communicate", "Failed to initialize NVML")):
        return Verdict("fail", f"nvidia-smi cannot use the driver: {smi_raw[:160]}", evidence=evidence)
    if smi_raw == "absent" and proc_raw == "absent":
        return Verdict("fail", "NVIDIA GPUs are on the PCI bus but no NVIDIA driver is loaded and nvidia-smi is "
                       "missing", evidence=evidence)
    versions: dict[str, str | None] = {}
    if "No devices were found" in smi_raw:
        hint = ("; the loaded module is the proprietary one, which newer GPUs (Blackwell) do not bind"
                if "NVIDIA UNIX x86_64 Kernel Module" in proc_raw else "")
        return Verdict("fail", f"the NVIDIA driver sees none of this node's GPUs (nvidia-smi: No devices were "
                       f"found){hint}", evidence=evidence)
    if smi_raw != "absent":
        found = set(_VERSION.findall(smi_raw))
        if not found:
            raise HarnessError(f"nvidia-smi printed no driver version: {smi_raw[:120]!r}")
        if len(found) > 1:
            return Verdict("fail", f"nvidia-smi reports several driver versions: {', '.join(sorted(found))}",
                           evidence=evidence)
        versions["nvidia-smi"] = found.pop()
    flavour = None
    if proc_raw != "absent":
        try:
            loaded = parse("proc-driver-nvidia", proc_raw)
            versions["/proc/driver/nvidia/version"], flavour = loaded.get("driver_version"), loaded.get("kernel_module")
        except ParseError:
            versions["/proc/driver/nvidia/version"] = None
    needs_open = sorted(smi_architectures(ctx) & set(OPEN_MODULE_ONLY))
    evidence.update(kernel_module=flavour, architectures=sorted(smi_architectures(ctx)))
    if flavour == "proprietary" and needs_open:
        return Verdict("fail", f"proprietary NVIDIA kernel module on {', '.join(needs_open)} GPUs: these are "
                       "supported only with the open GPU kernel modules (NVIDIA UNIX Open Kernel Module)",
                       evidence=evidence)
    if module_raw != "absent":
        found_module = _VERSION.findall(module_raw)
        versions["/sys/module/nvidia/version"] = found_module[0] if found_module else None
    evidence["versions"] = versions
    unreadable = [src for src, ver in versions.items() if ver is None]
    known = {ver for ver in versions.values() if ver}
    if len(known) > 1:
        detail = ", ".join(f"{src} {ver}" for src, ver in versions.items() if ver)
        return Verdict("fail", f"driver versions disagree ({detail}): library and loaded module differ; "
                       "reboot or reload the module", evidence=evidence)
    missing = [s for s in ("nvidia-smi", "/proc/driver/nvidia/version", "/sys/module/nvidia/version")
               if s not in versions]
    if unreadable or missing or not known:
        gaps = unreadable + missing
        return Verdict("warn", f"driver {next(iter(known), 'unknown')}: could not confirm it from "
                       f"{', '.join(gaps)}", next(iter(known), None), evidence=evidence)
    version = known.pop()
    return Verdict("pass", f"driver {version} in nvidia-smi, /proc/driver/nvidia and the loaded module",
                   version, evidence=evidence)


@check("audit.gpustack.container_toolkit")
def container_toolkit(ctx: Context) -> Verdict:
    require_gpu(ctx)
    facts = node_facts(ctx, NODE)
    tools = set(facts.get("tool") or [])
    files = facts.get("ctk_file") or []
    ctk = {"nvidia-ctk", "nvidia-container-cli", "nvidia-container-runtime", "nvidia-container-runtime-hook"}
    version = ctk_version(ctx)
    evidence = {"tools": sorted(tools & ctk), "config_files": files, "ctk_version": version}
    if not tools & ctk:
        if files:
            return Verdict("warn", f"toolkit configuration present ({', '.join(files)}) but no toolkit binary "
                           "on PATH: containers may start without GPUs", evidence=evidence)
        return Verdict("fail", "no NVIDIA Container Toolkit on a GPU node: containers cannot use the GPUs",
                       evidence=evidence)
    version = version or ""
    if "nvidia-ctk" in tools and not _VERSION_LOOSE.search(version):
        return Verdict("warn", f"nvidia-ctk is installed but its version is unreadable: {version[:80]!r}",
                       evidence=evidence)
    if not files:
        return Verdict("warn", "toolkit installed but no runtime configuration, CDI spec or enroot hook found",
                       evidence=evidence)
    label = _VERSION_LOOSE.search(version).group(0) if _VERSION_LOOSE.search(version) else "installed"
    return Verdict("pass", f"NVIDIA Container Toolkit {label}; {', '.join(files)}", label, evidence=evidence)


_VERSION_LOOSE = re.compile(r"\d+\.\d+\.\d+")


@check("audit.gpustack.gpudirect_rdma")
def gpudirect_rdma(ctx: Context) -> Verdict:
    inv = require_gpu(ctx)
    facts = node_facts(ctx, NODE)
    modules = set(facts.get("module") or [])
    nics = inv["nics"] if inv else []
    if inv is not None and not nics and "ib_core" not in modules:
        raise Skip("no RDMA NIC on this node: GPUDirect RDMA does not apply")
    proc = first(facts, "proc_version", "absent")
    if proc == "absent":
        return Verdict("fail", "NVIDIA driver not loaded: no GPUDirect RDMA path",
                       evidence={"modules": sorted(modules)})
    try:
        flavour = parse("proc-driver-nvidia", proc).get("kernel_module")
    except ParseError:
        raise HarnessError(f"could not read the driver flavour from {proc[:100]!r}") from None
    kernel = first(facts, "kernel")
    dma_buf = flavour == "open" and baselines.version_key(kernel)[:2] >= (5, 12)
    peermem = bool(modules & {"nvidia_peermem", "nv_peer_mem"})
    evidence = {"kernel_module": flavour, "kernel": kernel, "dma_buf": dma_buf, "peermem_loaded": peermem,
                "rdma_nics": [n["address"] for n in nics]}
    if dma_buf:
        return Verdict("pass", f"dma-buf GPUDirect RDMA: open GPU kernel module on kernel {kernel}"
                       + (" (nvidia-peermem also loaded)" if peermem else ""), "dma-buf", evidence=evidence)
    if peermem:
        return Verdict("warn", "GPUDirect RDMA only through nvidia-peermem (legacy path, proprietary module); "
                       "the open module with dma-buf is the supported path", "peermem", evidence=evidence)
    return Verdict("fail", f"no GPUDirect RDMA path: {flavour or 'unknown'} module on kernel {kernel} without "
                   "nvidia-peermem", None, evidence=evidence)


def acs_paths(inv: dict[str, Any]) -> tuple[dict[str, list[str]], list[str]]:
    """Bridges between each GPU and the NICs sharing a PCIe switch with it (below their common bridge)."""
    ranges = inv["ranges"]
    paths: dict[str, list[str]] = {}
    pairs: list[str] = []
    for gpu in inv["accelerators"]:
        up_gpu = ancestors(gpu["address"], ranges)
        for nic in inv["nics"]:
            up_nic = ancestors(nic["address"], ranges)
            common = set(up_gpu) & set(up_nic)
            # Meeting only at root ports (bridges with no bridge above) means crossing the CPU: no switch path.
            if not [br for br in common if ancestors(br, ranges)]:
                continue
            path = sorted((set(up_gpu) | set(up_nic)) - common)
            paths[f"{gpu['address']}<->{nic['address']}"] = path
            pairs.append(f"{gpu['address']}<->{nic['address']}")
    return paths, pairs


@check("audit.gpustack.pcie_acs")
def pcie_acs(ctx: Context) -> Verdict:
    inv = require_any_gpu(ctx)
    if inv is None:  # the lspci probe found no lspci (pciutils not installed): the node facts found the GPUs
        raise Skip("lspci is not installed on this node (command not found): ACS on the GPU-NIC path cannot be "
                   "read without it")
    if not inv["nics"]:
        raise Skip("no RDMA NIC on this node: no GPU-NIC peer path")
    virtual = [b for b in inv["bridges"].values() if "QEMU" in b["description"] or "Red Hat" in b["description"]]
    if virtual:
        raise Skip("virtual machine PCIe bridges (QEMU): ACS is the host's; see audit.isolation.pcie_passthrough")
    paths, _ = acs_paths(inv)
    evidence: dict[str, Any] = {"pairs": paths}
    if not inv["ranges"]:
        return Verdict("warn", "lspci shows no bridge bus ranges: the GPU-NIC path could not be resolved",
                       evidence=evidence)
    if not paths:
        raise Skip("no GPU shares a PCIe switch with an RDMA NIC: their traffic crosses the CPU anyway")
    on_path = sorted({br for path in paths.values() for br in path})
    if not on_path:
        return Verdict("warn", "the switch ports between GPUs and NICs are missing from the lspci output: ACS on "
                       "the path could not be read", evidence=evidence)
    unread = [br for br in on_path if inv["bridges"].get(br, {}).get("acs_ctl") is None
              and (inv["access_denied"] or br not in inv["bridges"])]
    redirect = {br: [b for b in REDIRECT_BITS if (inv["bridges"][br].get("acs_ctl") or {}).get(b)]
                for br in on_path if br in inv["bridges"]}
    redirect = {br: bits for br, bits in redirect.items() if bits}
    evidence.update(bridges_on_path=on_path, redirecting=redirect, unreadable=unread)
    if redirect:
        names = ", ".join(f"{br} ({'+'.join(bits)})" for br, bits in sorted(redirect.items()))
        return Verdict("fail", f"ACS redirect enabled on {len(redirect)} bridge(s) between GPUs and NICs: {names}; "
                       "GPUDirect peer traffic is sent to the root complex", len(redirect), evidence=evidence)
    if unread:
        return Verdict("warn", f"ACS control of {len(unread)} bridge(s) on the GPU-NIC path unreadable "
                       "(lspci ran without root: '<access denied>')", None, evidence=evidence)
    return Verdict("pass", f"ACS redirect off on all {len(on_path)} bridges of {len(paths)} GPU-NIC pair(s)", 0,
                   evidence=evidence)


@check("audit.gpustack.gdrcopy")
def gdrcopy(ctx: Context) -> Verdict:
    require_gpu(ctx)
    facts = node_facts(ctx, NODE)
    lib = first(facts, "gdr_lib")
    module = "gdrdrv" in (facts.get("module") or [])
    device = "gdr_dev" in facts
    evidence = {"libgdrapi": lib or None, "gdrdrv_loaded": module, "dev_gdrdrv": device}
    if lib and module and device:
        return Verdict("pass", f"GDRCopy ready: {lib}, gdrdrv loaded, /dev/gdrdrv present", evidence=evidence)
    if not (lib or module or device):
        return Verdict("warn", "GDRCopy is not installed (NCCL works without it; UCX/NVSHMEM small-message "
                       "latency suffers)", evidence=evidence)
    missing = [name for name, ok in (("libgdrapi", lib), ("gdrdrv module", module), ("/dev/gdrdrv", device))
               if not ok]
    return Verdict("fail", f"GDRCopy half-installed: {', '.join(missing)} missing; gdr_open() fails",
                   evidence=evidence)


@check("audit.gpustack.vboost")
def vboost(ctx: Context) -> Verdict:
    require_gpu(ctx)
    try:
        data = ctx.parsed(VBOOST)
    except ProbeFailed as exc:
        message = f"{exc.probe.get('stdout', '')} {exc.probe.get('stderr', '')}"
        if "Invalid combination" in message:
            raise Skip("this nvidia-smi does not accept `boost-slider -l` (driver older than R535, or a build "
                       "without it)") from None
        if "not supported" in message.lower():
            raise Skip("vboost is not supported on these GPUs (e.g. B300/GB300)") from None
        if "permission" in message.lower() or "privilege" in message.lower():
            return Verdict("warn", "vboost cannot be read by the tenant (insufficient permissions)",
                           evidence={"output": message.strip()[:200]})
        raise
    if data["not_supported"]:
        raise Skip("vboost is not supported on these GPUs (e.g. B300/GB300)")
    rows = data["gpus"]
    if not rows:
        text = str(ctx.probe(VBOOST).get("stdout") or "")
        raise HarnessError(f"could not read vboost rows from `nvidia-smi boost-slider -l`: {text.strip()[:120]!r}")
    changed = [r for r in rows if r["current"] != r["default"]]
    evidence = {"gpus": rows}
    if changed:
        listed = ", ".join(f"GPU{r['gpu']}={r['current']} (default {r['default']})" for r in changed)
        return Verdict("warn", f"vboost left changed on {len(changed)} GPU(s): {listed}", len(changed),
                       evidence=evidence)
    return Verdict("pass", f"vboost readable and at its default on {len(rows)} GPU(s)", 0, evidence=evidence)


def iommu_groups(facts: dict[str, list[str]]) -> dict[str, dict[str, Any]]:
    """``iommu_group: <n> <type> <bdf> <bdf>...`` lines as ``{n: {type, devices}}``."""
    groups = {}
    for line in facts.get("iommu_group") or []:
        parts = line.split()
        if len(parts) >= 2:
            groups[parts[0]] = {"type": parts[1], "devices": [p.lower() for p in parts[2:]]}
    return groups


@check("audit.gpustack.iommu_mode")
def iommu_mode(ctx: Context) -> Verdict:
    inv = require_any_gpu(ctx)
    facts = node_facts(ctx, NODE)
    groups = iommu_groups(facts)
    targets = {d["address"] for d in (inv["accelerators"] + inv["nics"])} if inv else set()
    cmdline = first(facts, "cmdline")
    passthrough_arg = bool(re.search(r"\b(iommu=pt|iommu\.passthrough=1|(intel|amd)_iommu=pt)\b", cmdline))
    evidence: dict[str, Any] = {"cmdline_passthrough": passthrough_arg, "groups": len(groups),
                                "iommu_units": facts.get("iommu_unit") or []}
    if not groups:
        return Verdict("pass", "no IOMMU groups: DMA is not translated (IOMMU off or absent)", "off", evidence=evidence)
    mine = {n: g for n, g in groups.items() if set(g["devices"]) & targets} if targets else groups
    if not mine:
        return Verdict("warn", "IOMMU groups exist but none holds the GPUs/NICs lspci lists: mode unknown",
                       evidence=evidence)
    kinds = {}
    for group in mine.values():
        kinds.setdefault(group["type"], []).append(group)
    evidence["types"] = {kind: len(items) for kind, items in kinds.items()}
    if "unknown" in kinds:
        return Verdict("warn", f"IOMMU group type unreadable for {len(kinds['unknown'])} GPU/NIC group(s) "
                       "(kernel without the group 'type' file)", evidence=evidence)
    if "DMA" in kinds:
        return Verdict("fail", f"strict IOMMU translation (DMA) on {len(kinds['DMA'])} GPU/NIC group(s): every "
                       "GPUDirect mapping pays synchronous IOTLB invalidation", "DMA", evidence=evidence)
    if "DMA-FQ" in kinds:
        return Verdict("warn", f"IOMMU translates GPU/NIC DMA (DMA-FQ, lazy) on {len(kinds['DMA-FQ'])} group(s); "
                       "iommu=pt avoids the translation cost", "DMA-FQ", evidence=evidence)
    return Verdict("pass", f"IOMMU passthrough (identity) for all {len(mine)} GPU/NIC group(s)", "identity",
                   evidence=evidence)


@check("audit.gpustack.arm_smmu_cmdqv")
def arm_smmu_cmdqv(ctx: Context) -> Verdict:
    facts = node_facts(ctx, NODE)
    arch = first(facts, "arch")
    if arch != "aarch64":
        raise Skip(f"{arch or 'unknown'} node: CMDQV is an Arm (Grace) SMMU feature")
    require_gpu(ctx)
    guest = is_vm_guest(facts)
    drivers = set(facts.get("smmu_driver") or []) | set(facts.get("module") or [])
    cmdqv = bool(drivers & {"tegra241-cmdqv", "tegra241_cmdqv"})
    evidence = {"virt": first(facts, "virt_vm"), "cmdqv": cmdqv, "smmu": sorted(drivers)}
    if guest is None:
        return Verdict("warn", "could not tell whether this Grace node is a VM", evidence=evidence)
    if cmdqv:
        return Verdict("pass", "tegra241-cmdqv is bound: SMMU commands go to a hardware queue", evidence=evidence)
    if not guest:
        return Verdict("pass", "bare-metal Grace: SMMU commands do not trap to a hypervisor", evidence=evidence)
    strict = any(g["type"] == "DMA" for g in iommu_groups(facts).values())
    if strict:
        return Verdict("fail", "Grace VM with strict IOMMU translation and no CMDQV: every DMA unmap traps to the "
                       "hypervisor", evidence=evidence)
    return Verdict("warn", "Grace VM without CMDQV (tegra241-cmdqv): SMMU invalidations trap to the host",
                   evidence=evidence)


@check("audit.gpustack.ncu_profiling")
def ncu_profiling(ctx: Context) -> Verdict:
    params = driver_params(ctx)
    if params is None:
        require_gpu(ctx)
        return Verdict("fail", "NVIDIA GPUs present but the driver is not loaded: nothing to profile")
    facts = node_facts(ctx, NODE)
    admin_only = params.get("rm_profiling_admin_only")
    has_ncu = "ncu" in (facts.get("tool") or [])
    evidence = {"RmProfilingAdminOnly": admin_only, "ncu_installed": has_ncu, "audit_user": first(facts, "sudo")}
    if admin_only is None:
        raise HarnessError("RmProfilingAdminOnly is not in /proc/driver/nvidia/params")
    if admin_only and not privileged(facts):
        return Verdict("fail", "GPU performance counters are root-only (RmProfilingAdminOnly=1) and the tenant has "
                       "no root: ncu fails with ERR_NVGPUCTRPERM", 1, evidence=evidence)
    if admin_only:
        return Verdict("warn", "GPU performance counters are root-only (RmProfilingAdminOnly=1, the driver default): "
                       "only root can run ncu; job users cannot", 1, evidence=evidence)
    if not has_ncu:
        return Verdict("warn", "counters open to users, but ncu (Nsight Compute) is not installed", 0,
                       evidence=evidence)
    return Verdict("pass", "GPU performance counters open to users (RmProfilingAdminOnly=0) and ncu installed", 0,
                   evidence=evidence)


@check("audit.gpustack.perf_access")
def perf_access(ctx: Context) -> Verdict:
    facts = node_facts(ctx, NODE)
    paranoid_raw, kptr_raw = first(facts, "perf_event_paranoid", "absent"), first(facts, "kptr_restrict", "absent")
    if paranoid_raw == "absent":
        raise Skip("kernel without perf events (/proc/sys/kernel/perf_event_paranoid absent)")
    try:
        paranoid = int(paranoid_raw)
        kptr = int(kptr_raw) if kptr_raw != "absent" else None
    except ValueError:
        raise HarnessError(f"unreadable sysctl values: paranoid={paranoid_raw!r} kptr={kptr_raw!r}") from None
    lim = ctx.limit("gpustack", "audit.gpustack.perf_access")
    kptr_lim = ctx.limit("gpustack", "audit.gpustack.kptr_restrict")
    status = baselines.grade(paranoid, lim)
    notes = [f"perf_event_paranoid={paranoid}"]
    if kptr is not None:
        notes.append(f"kptr_restrict={kptr}")
        if baselines.grade(kptr, kptr_lim) != "pass":
            status = worst(status, "warn")
    has_perf = "perf" in (facts.get("tool") or [])
    if not has_perf:
        notes.append("perf not installed")
        status = worst(status, "warn")
    evidence = {"perf_event_paranoid": paranoid, "kptr_restrict": kptr, "perf_installed": has_perf}
    detail = {"pass": "users can profile", "warn": "user profiling limited",
              "fail": "perf events forbidden to users"}[status]
    return Verdict(status, f"{detail}: {', '.join(notes)}", paranoid, expected=lim.expected(), evidence=evidence)
