"""Audit checks: Slurm commands that answer, job accounting, node shapes matching the hardware,
slurmd's spool disk and the controller's placement.

Reads ``scontrol show config`` (Slurm 17.11 to 25.11, through the ``slurm`` parser), ``scontrol show
node`` (core probe ``slurm_node``) and two sectioned probes of our own (``scheduler_commands``,
``scheduler_node_hardware``: ``nproc``, ``/proc/meminfo``, util-linux ``findmnt -J`` 2.29+, ``df -P``).
"""

from __future__ import annotations

import re
from typing import Any

from clustereval import baselines
from clustereval.checks import Context, HarnessError, ProbeFailed, Skip, Verdict, check
from clustereval.parsers.slurm import parse_gres

CONFIG_PROBE = "scheduler_slurm_config"
COMMANDS_PROBE = "scheduler_commands"
HARDWARE_PROBE = "scheduler_node_hardware"
NODE_PROBE = "slurm_node"
PARTITION_PROBE = "scheduler_partitions"
MEMORY_DEFAULTS = ("DefMemPerCPU", "DefMemPerNode", "DefMemPerGPU")
# Client commands a tenant uses; sacct belongs to the accounting check.
CLIENT_COMMANDS = ("sinfo", "squeue", "scontrol", "srun", "sbatch", "salloc")
NULL_VALUES = {"", "(null)", "none", "n/a", "unlimited", "0"}


def is_null(value: Any) -> bool:
    """Whether a ``scontrol show config`` value means "not set"."""
    return value is None or str(value).strip().lower() in NULL_VALUES


def seconds(value: Any) -> int | None:
    """``'300 sec'``, ``'10'``, ``'5 min'`` -> seconds (None when unreadable)."""
    match = re.match(r"^\s*(\d+)\s*(sec|secs|s|min|mins)?\b", str(value or ""))
    if not match:
        return None
    return int(match.group(1)) * (60 if (match.group(2) or "").startswith("min") else 1)


def slurm_config(ctx: Context, probe: str = CONFIG_PROBE) -> dict[str, Any]:
    """``scontrol show config`` as a dict; a node without Slurm configuration is a skip."""
    try:
        data = ctx.parsed(probe)
    except ProbeFailed as exc:
        if "could not establish a configuration source" in str(exc).lower():
            raise Skip(f"the Slurm client on {ctx.subject} has no configuration: not a Slurm node ({exc})") from None
        raise
    config = data.get("config") or {}
    if not config:
        raise HarnessError(f"`scontrol show config` printed no settings on {ctx.subject}")
    return config


def _controller_hosts(config: dict[str, Any]) -> list[str]:
    """Short host names of SlurmctldHost[0..] (``ctl1(10.0.0.1)`` -> ``ctl1``), primary first."""
    keyed = sorted((k for k in config if k.startswith("SlurmctldHost") or k == "ControlMachine"),
                   key=lambda k: int(re.sub(r"\D", "", k) or 0))
    hosts = []
    for key in keyed:
        value = str(config[key] or "")
        if is_null(value):
            continue
        hosts.append(value.split("(")[0].split(".")[0].strip().lower())
    return hosts


def _hardware(ctx: Context) -> dict[str, Any]:
    """The ``scheduler_node_hardware`` probe (parser ``probe-scheduler-hardware``), nproc and MemTotal read."""
    hardware = ctx.parsed(HARDWARE_PROBE)
    if not hardware["complete"]:
        raise HarnessError(hardware["warnings"][0])
    if hardware.get("nproc") is None or hardware.get("mem_total_mb") is None:
        raise HarnessError(f"could not read nproc and MemTotal on {ctx.subject}")
    return hardware


def _last_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1][:200] if lines else "no output"


@check("audit.scheduler.commands")
def slurm_commands(ctx: Context) -> Verdict:
    commands = ctx.parsed(COMMANDS_PROBE)["commands"]
    if not commands:
        raise HarnessError("the Slurm command probe printed no results")
    client = {name: commands[name] for name in CLIENT_COMMANDS if name in commands}
    evidence = {"commands": {name: {"rc": c["rc"], "missing": c["missing"]} for name, c in client.items()}}
    unread = [name for name in CLIENT_COMMANDS if name not in commands]
    if unread:
        raise HarnessError(f"the Slurm command probe did not report {', '.join(unread)}")
    missing = [name for name, c in client.items() if c["missing"]]
    failing = {name: c for name, c in client.items() if not c["missing"] and c["rc"] != 0}
    working = len(client) - len(missing) - len(failing)
    if failing:
        detail = "; ".join(f"`{name}` exit {c['rc']}: {_last_line(c['output'])}" for name, c in failing.items())
        evidence["errors"] = {name: _last_line(c["output"]) for name, c in failing.items()}
        return Verdict("fail", f"Slurm commands fail on {ctx.subject}: {detail}", working, evidence=evidence)
    if missing:
        return Verdict("warn", f"Slurm client commands not installed: {', '.join(missing)} "
                       f"({working} of {len(client)} work)", working, evidence=evidence)
    return Verdict("pass", f"{', '.join(CLIENT_COMMANDS)} all run and reach the controller", working,
                   evidence=evidence)


@check("audit.scheduler.accounting")
def accounting(ctx: Context) -> Verdict:
    config = slurm_config(ctx)
    storage = str(config.get("AccountingStorageType") or "")
    gather = str(config.get("JobAcctGatherType") or "")
    try:
        sacct = ctx.parsed(COMMANDS_PROBE)["commands"].get("sacct")
    except Skip:
        sacct = None
    evidence = {"AccountingStorageType": storage or None, "JobAcctGatherType": gather or None,
                "sacct_rc": sacct and sacct["rc"], "sacct_output": sacct and _last_line(sacct["output"])}
    if not storage:
        raise HarnessError("`scontrol show config` did not print AccountingStorageType")
    if is_null(storage) or storage.endswith("/none"):
        return Verdict("warn", f"job accounting is disabled (AccountingStorageType={storage}): sacct cannot "
                       "list past jobs, exit codes or GPU hours; common on clusters without slurmdbd, "
                       "but failures cannot be investigated after the fact", storage, evidence=evidence)
    if sacct is None:
        raise HarnessError("the Slurm command probe did not report sacct")
    if sacct["missing"]:
        return Verdict("warn", f"accounting is configured ({storage}) but sacct is not installed on "
                       f"{ctx.subject}", storage, evidence=evidence)
    if sacct["rc"] != 0:
        return Verdict("fail", f"accounting is configured ({storage}) but sacct fails (exit {sacct['rc']}): "
                       f"{_last_line(sacct['output'])}", storage, evidence=evidence)
    gather_note = (" (JobAcctGatherType is none: no per-job CPU/memory usage)"
                   if is_null(gather) or gather.endswith("/none") else "")
    return Verdict("warn" if gather_note else "pass", f"job accounting through {storage}; sacct answers"
                   + gather_note, storage, evidence=evidence)


def _slurm_node(ctx: Context) -> dict[str, Any]:
    try:
        data = ctx.parsed(NODE_PROBE)
    except ProbeFailed as exc:
        if "not found" in str(exc).lower() or "configuration source" in str(exc).lower():
            raise Skip(f"{ctx.subject} is not a node of the Slurm cluster ({exc})") from None
        raise
    nodes = data.get("nodes") or []
    if not nodes:
        raise Skip(f"Slurm reports no node record for {ctx.subject}")
    return nodes[0]


def _job_defaults(value: Any) -> dict[str, str]:
    """``JobDefaults`` as scontrol prints it (``DefCpuPerGPU=12,DefMemPerGPU=80000``; ``(null)``) as a dict."""
    if is_null(value):
        return {}
    pairs = (item.partition("=") for item in str(value).split(","))
    return {key.strip(): val.strip() for key, _, val in pairs if key.strip()}


def job_defaults(ctx: Context, config: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    """The CPU and memory defaults a job on this node gets, per partition of the node: the partition's own
    (``JobDefaults``, ``DefMemPerCPU``/``DefMemPerNode`` of ``scontrol show partition``) over slurm.conf's."""
    cluster = {**{k: config[k] for k in ("DefMemPerCPU", "DefMemPerNode") if not is_null(config.get(k))},
               **_job_defaults(config.get("JobDefaults"))}
    records = {p["name"]: p["fields"] for p in ctx.parsed(PARTITION_PROBE)["partitions"]}
    partitions = {}
    for name in node.get("partitions") or []:
        fields = records.get(name) or {}
        own = {**{k: fields[k] for k in ("DefMemPerCPU", "DefMemPerNode") if not is_null(fields.get(k))},
               **_job_defaults(fields.get("JobDefaults"))}
        partitions[name] = {**cluster, **own}
    return {"cluster": cluster, "partitions": partitions}


@check("audit.scheduler.resource_limits")
def resource_limits(ctx: Context) -> Verdict:
    node = _slurm_node(ctx)
    config = slurm_config(ctx)
    hardware = _hardware(ctx)
    slurm_cpus, slurm_mem = node.get("cpus"), node.get("real_memory_mb")
    if slurm_cpus is None or slurm_mem is None:
        raise HarnessError(f"scontrol show node printed no CPUTot/RealMemory for {node.get('name')}")
    nproc, mem = hardware["nproc"], hardware["mem_total_mb"]
    lim = ctx.limit("scheduler", "audit.scheduler.resource_limits.memory_fraction")
    fraction = round(int(slurm_mem) / mem, 3) if mem else 0.0
    defaults = job_defaults(ctx, config, node)
    gpus = parse_gres(node.get("gres"))[0] or 0
    evidence = {"slurm_cpus": slurm_cpus, "nproc": nproc, "slurm_real_memory_mb": slurm_mem,
                "mem_total_mb": mem, "memory_fraction": fraction, "gpus": gpus,
                "SelectTypeParameters": config.get("SelectTypeParameters"), "defaults": defaults}
    expected = {"cpus": nproc, "real_memory_max_mb": mem, **lim.expected()}
    fails, warns = [], []
    if int(slurm_cpus) > nproc:
        fails.append(f"Slurm declares {slurm_cpus} CPUs but the node has {nproc}: jobs are oversubscribed")
    elif int(slurm_cpus) < nproc:
        warns.append(f"Slurm declares {slurm_cpus} of the node's {nproc} CPUs")
    if int(slurm_mem) > mem:
        fails.append(f"RealMemory={slurm_mem} MB exceeds the node's {mem} MB: jobs sized to it get OOM-killed")
    else:
        level = baselines.grade(fraction, lim)
        text = f"RealMemory={slurm_mem} MB is {fraction:.0%} of the node's {mem} MB: the rest cannot be allocated"
        {"fail": fails, "warn": warns}.get(level, []).append(text)
    memory_consumable = "MEMORY" in str(config.get("SelectTypeParameters") or "").upper()
    scopes = defaults["partitions"] or {"slurm.conf": defaults["cluster"]}
    no_memory = [name for name, values in scopes.items() if not any(k in values for k in MEMORY_DEFAULTS)]
    if memory_consumable and no_memory:
        warns.append(f"memory is a consumable resource but no DefMemPerCPU/DefMemPerNode/DefMemPerGPU is set "
                     f"({_where(no_memory, defaults)}): a job that asks for no memory gets the whole node's")
    no_cpus = [name for name, values in scopes.items() if "DefCpuPerGPU" not in values]
    if gpus and no_cpus:
        warns.append(f"no DefCpuPerGPU ({_where(no_cpus, defaults)}): a job that asks for GPUs but no CPUs gets "
                     "one CPU per task, so its data loaders starve the GPUs")
    status = "fail" if fails else "warn" if warns else "pass"
    cpu_default = ", ".join(sorted({f"DefCpuPerGPU={v['DefCpuPerGPU']}" for v in scopes.values()
                                    if "DefCpuPerGPU" in v}))
    summary = "; ".join(fails + warns) or (f"Slurm's {slurm_cpus} CPUs and RealMemory={slurm_mem} MB match the "
                                           f"node ({nproc} CPUs, {mem} MB)"
                                           + (f"; GPU jobs get {cpu_default} unless they ask" if gpus else ""))
    return Verdict(status, summary, int(slurm_mem), unit="MB", expected=expected, evidence=evidence)


def _where(partitions: list[str], defaults: dict[str, Any]) -> str:
    if not defaults["partitions"]:
        return "in slurm.conf"
    return f"partition{'s' if len(partitions) > 1 else ''} {', '.join(partitions)}, nor in slurm.conf"


@check("audit.scheduler.spool_disk")
def spool_disk(ctx: Context) -> Verdict:
    hardware = _hardware(ctx)
    slurm_config(ctx)  # a node without Slurm configuration skips here
    spool, mounts = hardware.get("spool"), hardware["mounts"]
    if not spool:
        raise HarnessError("`scontrol show config` printed no SlurmdSpoolDir")
    root, held = mounts.get("root"), mounts.get("spool")
    if not root or not held:
        raise HarnessError(f"findmnt could not resolve the filesystems of / and {spool}")
    used = hardware.get("spool_used_pct")
    evidence = {"spool": spool, "spool_mount": held, "root_mount": root, "spool_used_pct": used}
    lim = ctx.limit("scheduler", "audit.scheduler.spool_disk.used_pct")
    level = baselines.grade(used, lim) if used is not None else "pass"
    where = f"{held['target']} ({held['fstype']} on {held['source']})"
    if level != "pass":
        return Verdict(level, f"slurmd's spool {spool} is on {where}, {used}% full: slurmd stops when it fills",
                       used, unit="%", expected=lim.expected(), evidence=evidence)
    if held["target"] == root["target"]:
        kind = "the container overlay root" if root.get("fstype") == "overlay" else "the root filesystem"
        return Verdict("warn", f"slurmd's spool {spool} is on {kind} {where}: a full root disk stops slurmd "
                       "(the usual default layout, but one disk failure mode for OS and jobs)", used, unit="%",
                       expected=lim.expected(), evidence=evidence)
    return Verdict("pass", f"slurmd's spool {spool} has its own filesystem {where}", used, unit="%",
                   expected=lim.expected(), evidence=evidence)


@check("audit.scheduler.controller_colocated")
def controller_colocated(ctx: Context) -> Verdict:
    config = slurm_config(ctx)
    hardware = _hardware(ctx)
    controllers = _controller_hosts(config)
    if not controllers:
        raise HarnessError("`scontrol show config` printed no SlurmctldHost")
    names = {str(hardware.get(key) or "").split(".")[0].lower() for key in ("hostname", "hostname_short")}
    try:
        node = _slurm_node(ctx)
        hostnames = (node.get("name"), (node.get("fields") or {}).get("NodeHostName"))
        names |= {str(name or "").split(".")[0].lower() for name in hostnames}
    except (Skip, HarnessError, ProbeFailed):
        pass
    names.discard("")
    evidence = {"controllers": controllers, "node_names": sorted(names)}
    here = [host for host in controllers if host in names]
    if not here:
        return Verdict("pass", f"slurmctld runs on {', '.join(controllers)}, not on this compute node",
                       controllers[0], evidence=evidence)
    if len(controllers) == 1:
        return Verdict("fail", f"the only slurmctld ({controllers[0]}) runs on this compute node: a job that "
                       "crashes or reboots it stops the whole cluster's scheduling", here[0], evidence=evidence)
    return Verdict("warn", f"slurmctld {here[0]} runs on this compute node (backup controllers: "
                   f"{', '.join(h for h in controllers if h not in here) or 'none elsewhere'})", here[0],
                   evidence=evidence)
