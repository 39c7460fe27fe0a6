"""Audit checks: GPU inventory, kernel, Slurm node state and GRES, and fleet consistency."""

from __future__ import annotations

from collections import Counter
from typing import Any

from clustereval import baselines
from clustereval.checks import Context, HarnessError, ProbeFailed, Skip, Verdict, check, facts
from clustereval.facts import nvlink_domain
from clustereval.parsers.nvidia_smi_q_x_text import gpu_fabric
from clustereval.results import worst

GPU_PROBE = "nvidia_smi_q_x"
KERNEL_PROBE = "uname_r"
SLURM_NODE_PROBE = "slurm_node"


def _gpus(ctx: Context) -> dict[str, Any]:
    data = ctx.parsed(GPU_PROBE)
    if not data.get("complete", True):
        read = len(data.get("gpus") or [])
        raise HarnessError(f"nvidia-smi -q -x output ended early (read {read} GPU(s)); "
                           f"parser warnings: {'; '.join(data.get('warnings') or []) or 'none'}")
    return data


def _slurm_node(ctx: Context) -> dict[str, Any]:
    try:
        data = ctx.parsed(SLURM_NODE_PROBE)
    except ProbeFailed as exc:
        message = str(exc).lower()
        if "not found" in message:
            raise Skip(f"{ctx.subject} is not a node of the Slurm cluster ({exc})") from None
        if "could not establish a configuration source" in message:
            raise Skip(f"the Slurm client on {ctx.subject} has no configuration: not a Slurm cluster "
                       f"node ({exc})") from None
        raise
    nodes = data.get("nodes") or []
    if not nodes:
        raise Skip(f"Slurm reports no node record for {ctx.subject}")
    return nodes[0]


def _slurm_declared_gpus(ctx: Context) -> int | None:
    """The GPUs Slurm's node record declares for this node (``gres=gpu:…:N``), or None where Slurm says
    nothing about it (no Slurm here, not a Slurm node, output unreadable: audit.slurm.* report those)."""
    try:
        declared = _slurm_node(ctx).get("gres_gpus")
    except (Skip, HarnessError, ProbeFailed):
        return None
    return int(declared) if declared is not None else None


def _empty_baseboard_slots(gpus: list[dict[str, Any]]) -> list[int]:
    """HGX baseboard slots (module ids 1..highest seen) with no GPU the driver can see. Only where every GPU
    reports its own distinct module id: PCIe cards all say 0 or 1, and then nothing can be concluded."""
    ids = [gpu.get("module_id") for gpu in gpus]
    if len(ids) < 2 or any(not isinstance(i, int) or i < 1 for i in ids) or len(set(ids)) != len(ids):
        return []
    return sorted(set(range(1, max(ids) + 1)) - set(ids))


def _siblings_gpus(ctx: Context, key: str = "gpu_count") -> tuple[int | None, list[str]]:
    """The GPU count most of this node's siblings show (from their facts ``key``: ``amd_gpu_count`` for AMD
    GPUs) and which siblings show it; None with fewer than two siblings to go by (a one-node run, a --limit,
    siblings whose GPUs were unreadable)."""
    counts = {host: known[key] for host, known in ctx.fleet.items()
              if host != ctx.subject and known and isinstance(known.get(key), int) and known[key]}
    if len(counts) < 2:
        return None, []
    majority, _ = Counter(counts.values()).most_common(1)[0]
    return majority, sorted(h for h, n in counts.items() if n == majority)


@check("audit.gpu.inventory")
def gpu_inventory(ctx: Context) -> Verdict:
    data = _gpus(ctx)
    gpus = data.get("gpus") or []
    count = len(gpus)
    models = Counter(gpu.get("name") or "unknown" for gpu in gpus)
    configured = int(ctx.options.get("expected_gpus_per_node") or 0)
    declared = _slurm_declared_gpus(ctx)
    empty_slots = _empty_baseboard_slots(gpus)
    evidence = {
        "driver_version": data.get("driver_version"),
        "cuda_version": data.get("cuda_version"),
        "attached_gpus": data.get("attached_gpus"),
        "models": dict(models),
        "bus_ids": [gpu.get("bus_id") for gpu in gpus],
        "module_ids": [gpu.get("module_id") for gpu in gpus],
        "slurm_declared_gpus": declared,
    }
    siblings, like_it = _siblings_gpus(ctx)
    evidence["siblings_gpus"] = {"majority": siblings, "hosts": like_it} if siblings else None
    # What the node should show: the configured count; else the most of what the scheduler hands out for it
    # and what its siblings show.
    if configured:
        expected_block: dict[str, Any] | None = {"equals": configured, "source": "clustereval_expected_gpus_per_node"}
        wanted, said_by = configured, "are expected"
    elif declared and declared >= (siblings or 0):
        expected_block = {"min": declared, "source": "Slurm GRES of the node (scontrol show node)"}
        wanted, said_by = declared, "Slurm declares for the node"
    elif siblings:
        expected_block = {"min": siblings, "source": f"what most of its siblings show ({', '.join(like_it)})"}
        wanted = siblings
        said_by = (f"its siblings have ({', '.join(like_it[:4])}{' …' if len(like_it) > 4 else ''})"
                   + (f"; Slurm declares {declared}" if declared else ""))
    else:
        expected_block, wanted, said_by = None, 0, ""
    describe = ", ".join(f"{n} × {model}" for model, n in models.items())
    versions = f"driver {data.get('driver_version')}, CUDA {data.get('cuda_version')}"

    def verdict(status: str, summary: str) -> Verdict:
        return Verdict(status, summary, count, expected=expected_block, evidence=evidence)

    if count == 0:
        return verdict("fail", "nvidia-smi runs but lists no GPUs")
    if wanted and (count < wanted or (configured and count != configured)):
        return verdict("fail", f"{count} GPU(s) visible where {wanted} {said_by}: {describe}")
    if empty_slots:
        return verdict("fail", f"{count} GPU(s) visible ({describe}) but baseboard module slot(s) "
                       f"{', '.join(map(str, empty_slots))} show none: a GPU the driver lost")
    attached = data.get("attached_gpus")
    if attached is not None and int(attached) != count:
        return verdict("warn", f"nvidia-smi says {attached} GPUs are attached but describes {count}")
    if len(models) > 1:
        return verdict("warn", f"mixed GPU models in one node: {describe}")
    return verdict("pass", f"{describe}; {versions}")


@check("audit.os.kernel")
def kernel(ctx: Context) -> Verdict:
    release = ctx.probe(KERNEL_PROBE).get("stdout", "").strip()
    if not release or not baselines.version_key(release):
        raise HarnessError(f"`uname -r` printed no kernel version: {release[:80]!r}")
    lim = ctx.limit("software", "audit.os.kernel")
    status = baselines.grade(release, lim)
    summary = {
        "pass": f"kernel {release}",
        "warn": f"kernel {release} is older than {lim.warn}",
        "fail": f"kernel {release} is older than {lim.fail}, below what current GPU drivers support",
    }[status]
    return Verdict(status, summary, release, expected=lim.expected(), evidence={"release": release})


@check("audit.slurm.node_state")
def slurm_node_state(ctx: Context) -> Verdict:
    node = _slurm_node(ctx)
    state = node.get("state_raw") or node.get("state")
    evidence = {key: node.get(key) for key in ("name", "state", "state_raw", "flags", "reason")}
    flags = {str(flag).upper() for flag in node.get("flags") or []}
    reason = f" (reason: {node['reason']})" if node.get("reason") else ""
    if node.get("down") or "DOWN" in flags or str(node.get("state", "")).lower() == "down":
        return Verdict("fail", f"Slurm has {node.get('name')} DOWN{reason}", state, evidence=evidence)
    if node.get("drain") or flags & {"DRAIN", "DRAINED", "DRAINING"}:
        return Verdict("fail", f"Slurm has {node.get('name')} drained{reason}", state, evidence=evidence)
    if node.get("not_responding") or "NOT_RESPONDING" in flags:
        return Verdict("warn", f"slurmctld cannot reach slurmd on {node.get('name')}", state, evidence=evidence)
    suspect = flags & {"FAIL", "MAINT", "REBOOT_REQUESTED", "REBOOT_ISSUED", "INVALID", "INVALID_REG"}
    if suspect:
        return Verdict("warn", f"Slurm flags {', '.join(sorted(suspect))} on {node.get('name')}{reason}",
                       state, evidence=evidence)
    return Verdict("pass", f"Slurm node {node.get('name')} is {state}", state, evidence=evidence)


def _visible_gpus(ctx: Context) -> tuple[list[dict[str, Any]], str]:
    """The GPUs the node's driver shows (``{"name": model}`` each) and the tool that listed them: nvidia-smi,
    or, on a node without it, the physical AMD GPUs amd-smi (rocm-smi) lists."""
    from clustereval.checks import audit_amd  # audit_amd builds on this module

    try:
        return _gpus(ctx).get("gpus") or [], "nvidia-smi -q -x"
    except Skip:
        pass
    try:
        devices, tool = audit_amd.devices(ctx)
    except Skip:
        return [], "nvidia-smi or amd-smi"
    return [{"name": d["model"]} for d in audit_amd.physical(devices)], tool


@check("audit.slurm.gres")
def slurm_gres(ctx: Context) -> Verdict:
    node = _slurm_node(ctx)
    slurm_gpus = node.get("gres_gpus")
    gpus, tool = _visible_gpus(ctx)
    visible = len(gpus)
    models = sorted({str(gpu.get("name") or "") for gpu in gpus})
    evidence = {"slurm_gres": node.get("gres"), "slurm_gpus": slurm_gpus, "visible_gpus": visible, "tool": tool,
                "gpu_models": models}
    expected = {"equals": visible, "source": tool}
    if not slurm_gpus and not visible:
        raise Skip(f"no GPUs on {ctx.subject} in either Slurm or {tool}")
    if slurm_gpus is None:
        return Verdict("fail", f"Slurm declares no gpu GRES on {ctx.subject} but {tool} sees {visible}",
                       0, expected=expected, evidence=evidence)
    if int(slurm_gpus) != visible:
        more = "more" if int(slurm_gpus) > visible else "fewer"
        return Verdict("fail", f"Slurm declares {slurm_gpus} GPUs ({node.get('gres')}), {more} than the "
                       f"{visible} {tool} sees", slurm_gpus, expected=expected, evidence=evidence)
    gres_type = str(node.get("gres_gpu_type") or "")
    squashed = [model.lower().replace(" ", "").replace("-", "") for model in models]
    if gres_type and not any(gres_type.lower().replace("-", "") in model for model in squashed):
        return Verdict("warn", f"Slurm GRES type '{gres_type}' does not name the GPU model "
                       f"({', '.join(models)}): jobs asking for --gres=gpu:{gres_type} get other hardware",
                       slurm_gpus, expected=expected, evidence=evidence)
    return Verdict("pass", f"Slurm GRES {node.get('gres')} matches the {visible} GPUs {tool} sees",
                   slurm_gpus, expected=expected, evidence=evidence)


@facts(probes=[GPU_PROBE, KERNEL_PROBE])
def host_facts(ctx: Context) -> dict[str, Any]:
    """Small per-host facts the fleet checks compare (each None with a reason when unavailable)."""
    facts: dict[str, Any] = {"problems": {}}
    try:
        data = _gpus(ctx)
        gpus = data.get("gpus") or []
        facts.update(gpu_count=len(gpus), gpu_models=sorted({g.get("name") or "unknown" for g in gpus}),
                     driver_version=data.get("driver_version"), cuda_version=data.get("cuda_version"))
        facts["nvlink_domain"] = nvlink_domain(gpu_fabric(str(ctx.probe(GPU_PROBE).get("stdout") or "")))
    except Skip as exc:
        facts.update(gpu_count=0, gpu_models=[], driver_version=None, cuda_version=None)
        facts["problems"]["gpu"] = str(exc)
    except (HarnessError, ProbeFailed) as exc:
        facts["problems"]["gpu"] = str(exc)
    try:
        facts["kernel"] = ctx.probe(KERNEL_PROBE).get("stdout", "").strip() or None
    except (Skip, HarnessError, ProbeFailed) as exc:
        facts["problems"]["kernel"] = str(exc)
    facts["artifacts"] = {key: ctx.probes[probe].get("artifact")
                          for key, probe in (("gpu", GPU_PROBE), ("kernel", KERNEL_PROBE)) if probe in ctx.probes}
    return facts


def _odd_ones(values: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """The majority value and the hosts that differ from it."""
    counted = Counter(repr(v) for v in values.values())
    majority_repr = counted.most_common(1)[0][0]
    majority = next(v for v in values.values() if repr(v) == majority_repr)
    return majority, {host: v for host, v in values.items() if repr(v) != majority_repr}


def _unassessable(ctx: Context, values: dict[str, Any], missing: list[str], what: str, topic: str) -> None:
    """Raise the right outcome when fewer than two nodes can be compared: error when the harness
    failed to read them, skip when there is genuinely nothing to compare."""
    if len(values) >= 2:
        return
    problems = {host: (ctx.fleet.get(host) or {}).get("problems", {}).get(topic) for host in missing}
    harness = {host: problem for host, problem in problems.items() if problem}
    if harness and len(values) + len(harness) >= 2:
        detail = "; ".join(f"{host}: {problem}" for host, problem in harness.items())
        raise HarnessError(f"could not read {what} on enough nodes to compare: {detail[:400]}")
    raise Skip(f"fewer than two nodes reported {what} (not assessed: {', '.join(missing) or '-'})")


def _fleet(ctx: Context, key: str, source: str) -> tuple[dict[str, Any], list[str], list[str]]:
    """Per-host ``key`` values, the hosts without the fact, and the ``source`` artifacts they came from."""
    values, missing, artifacts = {}, [], []
    for host, known in sorted(ctx.fleet.items()):
        if not known or known.get(key) is None:
            missing.append(host)
            continue
        values[host] = known[key]
        artifact = (known.get("artifacts") or {}).get(source)
        if artifact:
            artifacts.append(artifact)
    return values, missing, artifacts


# What the fleet must agree on, per GPU vendor: (fact, label, level when a node differs). Different drivers on
# nodes of one job give ranks different NCCL/RCCL behaviour (and NVLink/IMEX need one driver): a fail, like the count.
FLEET_GPU_FACTS = {
    "nvidia": (("gpu_count", "GPU count", "fail"), ("gpu_models", "GPU model", "fail"),
               ("driver_version", "driver", "fail"), ("cuda_version", "CUDA", "fail")),
    "amd": (("amd_gpu_count", "GPU count", "fail"), ("amd_gpu_models", "GPU model", "fail"),
            ("amd_driver_version", "amdgpu driver", "fail"), ("rocm_version", "ROCm", "fail")),
}


@check("audit.fleet.gpu_consistency")
def fleet_gpu_consistency(ctx: Context) -> Verdict:
    counts, missing, artifacts = _fleet(ctx, "gpu_count", "gpu")
    ctx.extra_artifacts.extend(artifacts)
    _unassessable(ctx, counts, missing, "a GPU inventory", "gpu")
    vendor = "nvidia"
    if not any(counts.values()):
        amd_counts, _, _ = _fleet(ctx, "amd_gpu_count", "amd_gpu")
        if not any(amd_counts.values()):
            raise Skip(f"none of the {len(counts)} nodes has GPUs the driver can see (no nvidia-smi or amd-smi, "
                       "or no GPUs)")
        vendor, counts = "amd", amd_counts
    evidence: dict[str, Any] = {"nodes_assessed": len(counts), "not_assessed": missing, "vendor": vendor}
    findings: list[str] = []
    levels: set[str] = set()
    for key, label, severity in FLEET_GPU_FACTS[vendor]:
        values, _, _ = _fleet(ctx, key, "gpu")
        if not values:
            continue
        majority, odd = _odd_ones(values)
        evidence[key] = {"fleet": majority, "odd_nodes": odd}
        if odd:
            findings.append(f"{label} differs on {', '.join(f'{h} ({v})' for h, v in odd.items())} "
                            f"from the fleet's {majority}")
            levels.add(severity)
    majority_count, _ = _odd_ones(counts)
    if findings:
        return Verdict(worst(levels), "; ".join(findings), len(counts), evidence=evidence)
    toolkit = "CUDA" if vendor == "nvidia" else "ROCm"
    return Verdict("pass", f"{len(counts)} nodes agree: {majority_count} GPUs each, same model, driver and {toolkit}",
                   len(counts), evidence=evidence)


@check("audit.fleet.kernel_consistency")
def fleet_kernel_consistency(ctx: Context) -> Verdict:
    kernels, missing, artifacts = _fleet(ctx, "kernel", "kernel")
    ctx.extra_artifacts.extend(artifacts)
    _unassessable(ctx, kernels, missing, "a kernel", "kernel")
    majority, odd = _odd_ones(kernels)
    evidence = {"fleet": majority, "odd_nodes": odd, "not_assessed": missing}
    if odd:
        # Another kernel series (5.15 vs 6.8) means another driver build and RDMA stack: a fail;
        # another patch level of the same series is drift to schedule away: a warn.
        series = {host: baselines.version_key(k)[:2] for host, k in kernels.items()}
        other_series = any(series[h] != baselines.version_key(majority)[:2] for h in odd)
        return Verdict("fail" if other_series else "warn",
                       f"kernel differs on {', '.join(f'{h} ({v})' for h, v in odd.items())} "
                       f"from the fleet's {majority}", len(set(kernels.values())), evidence=evidence)
    return Verdict("pass", f"{len(kernels)} nodes run kernel {majority}", 1, evidence=evidence)
