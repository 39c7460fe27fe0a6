"""Audit checks: the same installed packages and the same firmware on every node.

Reads ``dpkg-query -W`` (dpkg 1.16+, installed packages only) or ``rpm -qa --qf`` (``name.arch<TAB>
[epoch:]version-release``), the HCA firmware in ``/sys/class/infiniband/*/fw_ver``, the system BIOS in
``/sys/class/dmi/id/bios_version`` and the GPU VBIOS from the core ``nvidia-smi -q -x`` probe. GPU
count, driver and kernel drift are checked in :mod:`clustereval.checks.audit`.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from typing import Any

from clustereval.checks import Context, HarnessError, ProbeFailed, Skip, Verdict, check, facts
from clustereval.results import worst

PACKAGES_PROBE = "fleet_packages"
FIRMWARE_PROBE = "fleet_firmware"
GPU_PROBE = "nvidia_smi_q_x"
# Packages whose drift changes what GPU jobs run on (driver, CUDA, NCCL, RDMA, MPI, kernel, Slurm).
GPU_STACK = re.compile(r"^(cuda|libcuda|libnccl|nccl|nvidia|libnvidia|datacenter-gpu-manager|dcgm|mlnx|mft|"
                       r"rdma-core|libibverbs|ibverbs|ucx|openmpi|hpcx|linux-image|kernel|slurm|libpmix|"
                       r"nvidia-container|libnvidia-container|"
                       # AMD's: RCCL, ROCm, HIP, the HSA runtime, amdgpu-dkms, amd-smi, the profilers, MIOpen
                       r"rccl|rocm|hip-|hsa-|amdgpu|amd-smi|rocprofiler|miopen)", re.IGNORECASE)
LISTED = 8


@facts(probes=[PACKAGES_PROBE, FIRMWARE_PROBE, GPU_PROBE])
def fleet_facts(ctx: Context) -> dict[str, Any]:
    """Package list (with a digest to compare cheaply) and firmware versions of this host.

    The list is kept as its ``name<TAB>version`` text, one string: host facts travel through Ansible, which
    walks every nested value of them (a thousand-package dict per host cost more than the probes).
    """
    out: dict[str, Any] = {"problems": {}, "artifacts": {}}
    try:
        listed = ctx.parsed(PACKAGES_PROBE)
        manager, packages = listed["manager"], listed["packages"]
        if manager is None:
            raise HarnessError("the package probe printed no package manager line")
        if manager != "none" and not packages:
            raise HarnessError(f"{manager} listed no installed packages")
        body = "\n".join(f"{k}\t{v}" for k, v in sorted(packages.items()))
        out.update(fleet_package_manager=manager, fleet_packages=body,
                   fleet_packages_digest=hashlib.sha256(body.encode()).hexdigest()[:16])
    except (Skip, HarnessError, ProbeFailed) as exc:
        out["problems"]["fleet_packages"] = str(exc)
    firmware: dict[str, Any] = {}
    try:
        read = ctx.parsed(FIRMWARE_PROBE)
        if read["nic_firmware"]:
            firmware["nic_firmware"] = dict(read["nic_firmware"])
        if read["bios"] is not None:
            firmware["bios"] = read["bios"]
    except (Skip, HarnessError, ProbeFailed) as exc:
        out["problems"]["fleet_firmware"] = str(exc)
    try:
        gpus = ctx.parsed(GPU_PROBE).get("gpus") or []
        vbios = sorted({str(g.get("vbios_version")) for g in gpus if g.get("vbios_version")})
        if vbios:
            firmware["vbios"] = vbios
    except (Skip, HarnessError, ProbeFailed):
        pass  # no GPUs or no nvidia-smi: the GPU checks report that
    out["fleet_firmware"] = firmware
    for key, probe in (("fleet_packages", PACKAGES_PROBE), ("fleet_firmware", FIRMWARE_PROBE)):
        if probe in ctx.probes:
            out["artifacts"][key] = ctx.probes[probe].get("artifact")
    return out


def _split(ctx: Context, key: str, topic: str) -> tuple[dict[str, Any], dict[str, str]]:
    """Per-host ``key`` facts and why the others have none (``topic`` names their problems and artifacts)."""
    values, not_assessed = {}, {}
    for host, known in sorted(ctx.fleet.items()):
        if not known:
            not_assessed[host] = "unreachable"
        elif known.get(key) is None:
            not_assessed[host] = (known.get("problems") or {}).get(topic) or "not collected"
        else:
            values[host] = known[key]
            path = (known.get("artifacts") or {}).get(topic)
            if path:
                ctx.extra_artifacts.append(path)
    if len(values) < 2:
        harness = {h: why for h, why in not_assessed.items() if why not in ("unreachable", "not collected")}
        if harness and len(values) + len(harness) >= 2:
            raise HarnessError("could not read enough nodes to compare: "
                               + "; ".join(f"{h}: {why}" for h, why in harness.items())[:400])
        raise Skip(f"fewer than two nodes reported {key.replace('_', ' ')} (not assessed: "
                   f"{', '.join(not_assessed) or '-'})")
    return values, not_assessed


def package_diff(fleet: dict[str, str], node: dict[str, str]) -> list[str]:
    """Human-readable differences of ``node``'s packages against the fleet's, GPU stack first."""
    changed = [f"{n} {node[n]} (fleet {fleet[n]})" for n in sorted(fleet) if n in node and node[n] != fleet[n]]
    missing = [f"{n} missing (fleet {fleet[n]})" for n in sorted(fleet) if n not in node]
    extra = [f"{n} {node[n]} extra" for n in sorted(node) if n not in fleet]
    return sorted(changed + missing + extra, key=lambda item: not GPU_STACK.match(item))


def _package_list(known: dict[str, Any]) -> dict[str, str]:
    """``{name: version}`` of a host's ``fleet_packages`` fact (its ``name<TAB>version`` lines)."""
    return dict(line.split("\t", 1) for line in str(known.get("fleet_packages") or "").splitlines() if "\t" in line)


@check("audit.fleet.packages")
def packages(ctx: Context) -> Verdict:
    digests, not_assessed = _split(ctx, "fleet_packages_digest", "fleet_packages")
    managers = {h: ctx.fleet[h].get("fleet_package_manager") for h in digests}
    evidence: dict[str, Any] = {"nodes_assessed": len(digests), "not_assessed": not_assessed, "managers": managers}
    if len(set(managers.values())) > 1:
        return Verdict("fail", "nodes run different distributions: " + ", ".join(
            f"{h} ({m})" for h, m in managers.items()), len(set(managers.values())), evidence=evidence)
    if set(managers.values()) == {"none"}:
        raise Skip("no node has dpkg or rpm to list packages")
    majority_digest, _ = Counter(digests.values()).most_common(1)[0]
    reference = next(h for h, d in digests.items() if d == majority_digest)
    fleet_pkgs = _package_list(ctx.fleet[reference])
    odd = {h: package_diff(fleet_pkgs, _package_list(ctx.fleet[h])) for h, d in digests.items()
           if d != majority_digest}
    evidence.update(fleet_digest=majority_digest, reference_node=reference, packages=len(fleet_pkgs),
                    odd_nodes={h: diff[:50] for h, diff in odd.items()})
    if not odd:
        return Verdict("pass", f"{len(digests)} nodes have the same {len(fleet_pkgs)} packages and versions", 0,
                       evidence=evidence)
    gpu_stack = any(GPU_STACK.match(item) for diff in odd.values() for item in diff)
    text = "; ".join(f"{h}: {', '.join(diff[:LISTED])}{f' and {len(diff) - LISTED} more' if len(diff) > LISTED else ''}"
                     for h, diff in odd.items())
    lead = "GPU/RDMA/kernel stack packages differ" if gpu_stack else "packages differ"
    return Verdict("fail" if gpu_stack else "warn", f"{lead} from the fleet ({reference}'s set) on {text}",
                   sum(len(d) for d in odd.values()), evidence=evidence)


def _flatten(firmware: dict[str, Any]) -> dict[str, str]:
    """``{"vbios": "…", "nic_firmware": "…", "bios": "…"}`` comparable strings (NIC/VBIOS as sorted sets)."""
    out = {}
    if firmware.get("vbios"):
        out["vbios"] = ", ".join(firmware["vbios"])
    if firmware.get("nic_firmware"):
        out["nic_firmware"] = ", ".join(sorted(set(firmware["nic_firmware"].values())))
    if firmware.get("bios"):
        out["bios"] = firmware["bios"]
    return out


@check("audit.fleet.firmware")
def firmware(ctx: Context) -> Verdict:
    raw, not_assessed = _split(ctx, "fleet_firmware", "fleet_firmware")
    flat = {h: _flatten(fw) for h, fw in raw.items()}
    evidence: dict[str, Any] = {"nodes_assessed": len(flat), "not_assessed": not_assessed, "firmware": {}}
    findings, levels = [], set()
    labels = {"vbios": ("GPU VBIOS", "fail"), "nic_firmware": ("NIC firmware", "warn"), "bios": ("BIOS", "warn")}
    mixed = [f"{h} ({fw['vbios']})" for h, fw in flat.items() if "," in fw.get("vbios", "")]
    if mixed:
        findings.append(f"GPUs in one node carry different VBIOS versions: {', '.join(mixed)}")
        levels.add("warn")
    compared = []
    for key, (label, level) in labels.items():
        values = {h: fw[key] for h, fw in flat.items() if key in fw}
        if len(values) < 2:
            continue
        compared.append(label)
        majority, _ = Counter(values.values()).most_common(1)[0]
        odd = {h: v for h, v in values.items() if v != majority}
        lacking = sorted(set(flat) - set(values))
        evidence["firmware"][key] = {"fleet": majority, "odd_nodes": odd, "not_reported_by": lacking}
        if odd:
            findings.append(f"{label} differs on {', '.join(f'{h} ({v})' for h, v in odd.items())} from the "
                            f"fleet's {majority}")
            levels.add(level)
    if not compared:
        raise Skip("the nodes report no firmware versions to compare (no GPUs, HCAs or DMI BIOS data)")
    if findings:
        return Verdict(worst(levels), "; ".join(findings), len(flat), evidence=evidence)
    return Verdict("pass", f"{len(flat)} nodes agree on {', '.join(compared)}", len(flat), evidence=evidence)
