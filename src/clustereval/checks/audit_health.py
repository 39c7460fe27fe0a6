"""Audit checks: DCGM in the health check, a HealthCheckProgram that checks the GPUs and drains, a prolog
within Slurm's timeouts, and nodes returning to service.

Reads ``scontrol show config`` (Slurm 17.11 to 25.11), ``dcgmi -v`` (DCGM 2.x to 4.x, through the
``dcgmi`` parser), the text of the programs slurm.conf names as the node holds them
(``health_slurm_programs``: ``## program key=K path=P exists=yes|no executable=yes|no`` headers,
each followed by the program's first lines) and, while actions are allowed, one empty job step on the
node timed from outside (``health_prolog_timing``: ``rc=``, ``start=``/``end=`` from /proc/uptime,
``err=`` lines): the prolog the node really runs, measured. No program is run by hand.
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath
from typing import Any

from clustereval.checks import Context, HarnessError, ProbeFailed, Skip, Verdict, check
from clustereval.checks.audit_scheduler import is_null, seconds, slurm_config
from clustereval.parsers.probe_key_values import first

PROGRAMS_PROBE = "health_slurm_programs"
DCGMI_PROBE = "health_dcgmi_version"
AMD_NODE_PROBE = "amd_node"
GPU_PROBE = "nvidia_smi_q_x"
DCGM_WORDS = re.compile(r"\b(dcgmi|dcgm|nv-hostengine|check_dcgmi)\b", re.IGNORECASE)
# What makes a health check's failure take the node out: scontrol drain/down, or NHC run as a command (which
# drains itself); "nhc:" in a message it prints is not NHC.
DRAIN_WORDS = re.compile(r"scontrol\b[^\n]*\bstate=(drain|down|fail)|\bstate=drain\b|"
                         r"(?:^|[\s;|&(])(?:\S*/)?nhc(?:\s|$)|\bnode-mark-offline\b|\bsinfo_drain\b",
                         re.IGNORECASE | re.MULTILINE)
# What shows a health check looks at the GPUs: DCGM, nvidia-smi / NVML, Xids in the kernel log, NHC's GPU checks.
GPU_CHECK_WORDS = re.compile(r"\b(dcgmi|nvidia-smi|nvml\w*|xid\w*|check_nv_\w+|check_dcgmi|check_gpu\w*|"
                             r"nv-hostengine)\b", re.IGNORECASE)
# ... and the AMD GPUs: amd-smi / rocm-smi, the ROCm Validation Suite or AGFHC, amdgpu RAS lines, NHC-style AMD checks.
AMD_CHECK_WORDS = re.compile(r"\b(amd-smi|rocm-smi|rvs|agfhc|amdgpu|check_amd_\w+)\b", re.IGNORECASE)
# HealthCheckNodeState words under which the check also runs on nodes that have jobs.
BUSY_STATES = {"ANY", "ALLOC", "MIXED"}
TIMING_PROBE = "health_prolog_timing"
# PrologEpilogTimeout as Slurm 21.08+ prints it when unset (it waits for ever).
NO_TIMEOUT = {65534, 65535}
# Prolog commands that take minutes: DCGM's medium/long diagnostics, burn tests, long sleeps.
SLOW_DIAG = re.compile(r"dcgmi\s+diag\b[^\n]*(-r|--run)\s*['\"]?([234]|medium|long|xlong)\b|gpu[-_]burn|"
                       r"all_reduce_perf|nvbandwidth", re.IGNORECASE)
SLEEP = re.compile(r"(?<![\w-])sleep\s+(\d+)\b")


def has_gpus(ctx: Context) -> bool | None:
    """Whether nvidia-smi lists GPUs here: False when it is not installed, None when it could not tell."""
    probe = ctx.probes.get(GPU_PROBE)
    if probe is None or probe.get("timed_out"):
        return None
    if probe.get("missing"):
        return False
    try:
        return bool(ctx.parsed(GPU_PROBE).get("gpus"))
    except (Skip, HarnessError, ProbeFailed):
        return None


def amd_gpus(ctx: Context) -> bool:
    """Whether the node has AMD GPUs (the ``amd_node`` probe counted some on the PCI bus); False when unknown."""
    probe = ctx.probes.get(AMD_NODE_PROBE)
    if probe is None or probe.get("timed_out") or probe.get("rc") not in (0, None):
        return False
    count = first(ctx.parsed(AMD_NODE_PROBE)["values"], "amd_pci_gpus", "0")
    return count.isdigit() and int(count) > 0


def programs(ctx: Context) -> dict[str, Any]:
    """The ``health_slurm_programs`` probe (parser ``probe-health-programs``): ``programs`` ({key, path,
    exists, executable, text}), ``nhc_paths``, ``nhc_conf``; a skip when the node has no Slurm configuration."""
    found = ctx.parsed(PROGRAMS_PROBE)
    failed = found["scontrol_failed"]
    if failed:
        raise Skip(f"`scontrol show config` failed on {ctx.subject} (exit {failed.get('rc')}): no Slurm "
                   "configuration to read")
    return found


def _of(found: dict[str, Any], *keys: str) -> list[dict[str, Any]]:
    return [p for p in found["programs"] if p["key"] in keys]


def _brief(program: dict[str, Any]) -> dict[str, Any]:
    return {k: program[k] for k in ("key", "path", "exists", "executable")}


@check("audit.health.dcgm")
def dcgm(ctx: Context) -> Verdict:
    if has_gpus(ctx) is False:
        raise Skip("no NVIDIA GPU on this node")
    try:
        data = ctx.parsed(DCGMI_PROBE)
    except Skip:
        return Verdict("fail", "dcgmi is not installed: DCGM cannot watch or diagnose this node's GPUs",
                       None, evidence={"dcgmi": "missing"})
    version = data.get("version") or data.get("hostengine_version")
    if not version:
        raise HarnessError("`dcgmi -v` printed no version")
    evidence: dict[str, Any] = {"dcgm_version": version, "hostengine_version": data.get("hostengine_version")}
    try:
        found = programs(ctx)
    except Skip as exc:
        return Verdict("warn", f"DCGM {version} is installed; whether the health check uses it is unknown: {exc}",
                       version, evidence=evidence)
    checks = _of(found, "HealthCheckProgram")
    evidence["health_check"] = [_brief(p) for p in checks]
    uses = [p["path"] for p in checks if DCGM_WORDS.search(p["text"] or "") or DCGM_WORDS.search(p["path"] or "")]
    if DCGM_WORDS.search(found["nhc_conf"]):
        uses.append("/etc/nhc/nhc.conf")
    if uses:
        return Verdict("pass", f"DCGM {version}; the health check calls it ({', '.join(uses)})", version,
                       evidence=evidence)
    where = ", ".join(p["path"] for p in checks) or "no HealthCheckProgram"
    return Verdict("warn", f"DCGM {version} is installed but the health check ({where}) never calls dcgmi: GPU "
                   "memory, PCIe and NVLink faults go unnoticed between jobs", version, evidence=evidence)


@check("audit.health.healthcheck_program")
def healthcheck_program(ctx: Context) -> Verdict:
    config = slurm_config(ctx)
    interval = seconds(config.get("HealthCheckInterval"))
    evidence: dict[str, Any] = {key: config.get(key) for key in
                                ("HealthCheckProgram", "HealthCheckInterval", "HealthCheckNodeState")}
    path = config.get("HealthCheckProgram")
    if is_null(path):
        return Verdict("fail", "slurm.conf sets no HealthCheckProgram: nothing takes a node with a failed GPU "
                       "out of service", None, evidence=evidence)
    found = programs(ctx)
    checks = _of(found, "HealthCheckProgram")
    evidence["program"] = [_brief(p) for p in checks]
    if not checks:
        raise HarnessError(f"the program probe did not report HealthCheckProgram {path}")
    broken = [p for p in checks if not p["exists"] or not p["executable"]]
    if broken:
        what = "is missing" if not broken[0]["exists"] else "is not executable"
        return Verdict("fail", f"HealthCheckProgram {broken[0]['path']} {what} on {ctx.subject}: slurmd cannot "
                       "run it", interval, evidence=evidence)
    if interval is None:
        raise HarnessError(f"unreadable HealthCheckInterval {config.get('HealthCheckInterval')!r}")
    named_nhc = any(PurePosixPath(str(p["path"])).name.startswith("nhc") for p in checks)
    text = "\n".join(p["text"] or "" for p in checks) + "\n" + found["nhc_conf"]
    drains = named_nhc or bool(DRAIN_WORDS.search(text))
    # NHC keeps its checks in nhc.conf: without one to read, what it checks is not known
    checks_unknown = (named_nhc or bool(re.search(r"\bnhc\b", text))) and not found["nhc_conf"].strip()
    amd = amd_gpus(ctx)
    nvidia_words = sorted({m.group(1).lower() for m in GPU_CHECK_WORDS.finditer(text)})
    # On an AMD node only checks of AMD GPUs count: dcgmi or nvidia-smi find nothing wrong with them.
    gpu_words = sorted({m.group(1).lower() for m in AMD_CHECK_WORDS.finditer(text)}) if amd else nvidia_words
    states = {w.strip().upper() for w in str(config.get("HealthCheckNodeState") or "ANY").split(",") if w.strip()}
    evidence.update(drains=drains, gpu_checks="unknown (NHC without a readable nhc.conf)"
                    if checks_unknown and not gpu_words else gpu_words)
    problems = []
    if interval == 0:
        problems.append("it runs only when slurmd starts (HealthCheckInterval=0): a GPU failing later is never "
                        "caught")
    if not drains:
        problems.append("it never drains the node (no `scontrol update ... state=drain`, not NHC): slurmd ignores "
                        "its exit status, so a failure it finds goes nowhere")
    if amd and not gpu_words and not checks_unknown:
        only = f" (only NVIDIA checks: {', '.join(nvidia_words[:4])})" if nvidia_words else ""
        problems.append(f"it checks no AMD GPU{only}: no amd-smi, rocm-smi, RVS/AGFHC or amdgpu RAS check in it, so "
                        "a node with a lost or failing GPU stays in service")
    elif not amd and not gpu_words and not checks_unknown and has_gpus(ctx) is not False:
        problems.append("it checks no GPU (no dcgmi, nvidia-smi, Xid or NHC GPU check in it): a node with a lost "
                        "or failing GPU stays in service")
    if not states & BUSY_STATES:
        problems.append(f"HealthCheckNodeState={','.join(sorted(states))} skips nodes that have jobs: a GPU failing "
                        "under a long job is caught only once the node is idle again")
    if problems:
        return Verdict("warn", f"HealthCheckProgram {path}: " + "; ".join(problems), interval, evidence=evidence)
    looks = f"checks the GPUs ({', '.join(gpu_words[:4])})" if gpu_words else "runs NHC"
    return Verdict("pass", f"HealthCheckProgram {path} runs every {interval} s on {','.join(sorted(states))} nodes, "
                   f"{looks} and drains the node on failure", interval, evidence=evidence)


def _timeouts(config: dict[str, Any]) -> dict[str, int | None]:
    """MessageTimeout (Slurm's default 10 s), BatchStartTimeout (10 s), PrologEpilogTimeout (None: unset)."""
    prolog_epilog = seconds(config.get("PrologEpilogTimeout"))
    return {"MessageTimeout": seconds(config.get("MessageTimeout")) or 10,
            "BatchStartTimeout": seconds(config.get("BatchStartTimeout")) or 10,
            "PrologEpilogTimeout": None if prolog_epilog in NO_TIMEOUT or not prolog_epilog else prolog_epilog}


def _measured(ctx: Context) -> dict[str, Any] | None:
    """The timed job step: ``{"seconds", "rc", "errors"}``, ``{"skipped": why}``, or None without the probe."""
    if TIMING_PROBE not in ctx.probes:
        return None
    try:
        values = ctx.parsed(TIMING_PROBE)["values"]
    except (Skip, ProbeFailed) as exc:
        return {"skipped": str(exc)}
    if values.get("skipped"):
        return {"skipped": values["skipped"][0]}
    try:
        spent = round(float(values["end"][0]) - float(values["start"][0]), 1)
        rc = int(values["rc"][0])
    except (KeyError, IndexError, ValueError):
        raise HarnessError("the timed job step printed no rc=/start=/end= lines") from None
    return {"seconds": spent, "rc": rc, "errors": (values.get("err") or [])[-5:]}


def _slow_steps(found: dict[str, Any], keys: tuple[str, ...]) -> list[tuple[str, int | None]]:
    """(what, seconds or None) for each long diagnostic or sleep in the named programs' text."""
    slow: list[tuple[str, int | None]] = []
    for program in _of(found, *keys):
        text = program["text"] or ""
        slow += [(f"{program['path']} runs `{m.group(0).strip()}`", None) for m in SLOW_DIAG.finditer(text)]
        slow += [(f"{program['path']} sleeps {m.group(1)} s", int(m.group(1))) for m in SLEEP.finditer(text)]
    return slow


@check("audit.health.prolog")
def prolog(ctx: Context) -> Verdict:
    config = slurm_config(ctx)
    limits = _timeouts(config)
    message = limits["MessageTimeout"]
    evidence: dict[str, Any] = {key: config.get(key) for key in
                                ("Prolog", "PrologSlurmctld", "PrologFlags", "Epilog", "PrologEpilogTimeout",
                                 "MessageTimeout", "BatchStartTimeout")}
    if all(is_null(config.get(key)) for key in ("Prolog", "PrologSlurmctld", "TaskProlog", "Epilog")):
        return Verdict("pass", "no prolog or epilog is configured: nothing runs before or after jobs", 0,
                       evidence=evidence)
    found = programs(ctx)
    # PrologSlurmctld runs on the controller, so it need not exist on a compute node.
    on_node = _of(found, "Prolog", "TaskProlog", "Epilog")
    evidence["programs"] = [_brief(p) for p in _of(found, "Prolog", "TaskProlog", "PrologSlurmctld", "Epilog")]
    broken = [p for p in on_node if not p["exists"] or not p["executable"]]
    if broken:
        what = "is missing" if not broken[0]["exists"] else "is not executable"
        return Verdict("fail", f"{broken[0]['key']} {broken[0]['path']} {what} on {ctx.subject}: every job "
                       "allocated here fails and the node drains", None, evidence=evidence)
    measured = _measured(ctx)
    evidence["measured"] = measured
    killed_at = limits["PrologEpilogTimeout"]
    fails: list[str] = []
    if measured and "rc" in measured and measured["rc"] != 0 and "prolog" in " ".join(measured["errors"]).lower():
        fails.append(f"an empty job step here failed after {measured['seconds']} s: "
                     f"{measured['errors'][-1][:160]} (Slurm drains the node, reason \"Prolog error\")")
    for program_keys, word in ((("Prolog", "TaskProlog", "PrologSlurmctld"), "Prolog"), (("Epilog",), "Epilog")):
        for what, spent in _slow_steps(found, program_keys):
            if killed_at and spent is not None and spent >= killed_at:
                fails.append(f"{what}, past PrologEpilogTimeout={killed_at} s: Slurm kills it, fails the job and "
                             f"drains the node (\"{word} error\")")
    slow = [what for what, spent in _slow_steps(found, ("Prolog", "TaskProlog", "PrologSlurmctld"))
            if spent is None or spent >= message]
    took = measured.get("seconds") if measured and measured.get("rc") == 0 else None
    if took is not None and took >= message:
        slow.insert(0, f"an empty job step here took {took} s")
    evidence["slow"] = slow
    value = took if took is not None else message
    if fails:
        return Verdict("fail", "; ".join(fails), value, evidence=evidence)
    names = ", ".join(p["path"] for p in _of(found, "Prolog", "TaskProlog", "PrologSlurmctld")) or "-"
    if slow:
        return Verdict("warn", f"the prolog delays every job start past MessageTimeout ({message} s; "
                       f"BatchStartTimeout {limits['BatchStartTimeout']} s): {'; '.join(slow)}", value,
                       evidence=evidence)
    how = f"an empty job step took {took} s" if took is not None else f"not timed ({_untimed(measured)})"
    return Verdict("pass", f"prolog {names} runs no long diagnostics or sleeps and finishes within MessageTimeout "
                   f"({message} s): {how}", value, evidence=evidence)


def _untimed(measured: dict[str, Any] | None) -> str:
    if measured is None:
        return "no timing probe"
    if "skipped" in measured:
        return measured["skipped"]
    return f"the job step could not start: {' '.join(measured['errors'])[:160] or 'exit ' + str(measured['rc'])}"


# What each ReturnToService does to a DOWN node (slurm.conf(5), 22.05); drained nodes stay drained under all.
RETURN_TO_SERVICE = {
    "1": "a node set DOWN for not responding returns once slurmd registers with a valid configuration",
    "2": "a DOWN node returns as soon as slurmd registers with a valid configuration, whatever set it DOWN",
}


@check("audit.health.auto_remediation")
def auto_remediation(ctx: Context) -> Verdict:
    config = slurm_config(ctx)
    keys = ("ReturnToService", "RebootProgram", "ResumeProgram", "SuspendProgram", "UnkillableStepProgram",
            "HealthCheckProgram")
    evidence = {key: config.get(key) for key in keys}
    rts = str(config.get("ReturnToService") or "").strip()
    if not rts.isdigit():
        raise HarnessError(f"`scontrol show config` printed no readable ReturnToService ({rts!r})")
    programs_set = [key for key in ("RebootProgram", "ResumeProgram") if not is_null(config.get(key))]
    extra = f"; {', '.join(programs_set)} set" if programs_set else ""
    if int(rts) >= 1:
        how = RETURN_TO_SERVICE.get(rts, "DOWN nodes return automatically")
        if rts == "2" and is_null(config.get("HealthCheckProgram")):
            return Verdict("warn", f"ReturnToService=2: {how}, and no HealthCheckProgram runs when slurmd starts: "
                           "a node that rebooted after a hardware fault (a GPU off the bus, ECC errors) is back in "
                           f"service unchecked{extra}", int(rts), evidence=evidence)
        return Verdict("pass", f"ReturnToService={rts}: {how}{extra}", int(rts), evidence=evidence)
    if programs_set:
        return Verdict("warn", f"ReturnToService=0: DOWN nodes wait for a manual resume, although "
                       f"{', '.join(programs_set)} is set", 0, evidence=evidence)
    return Verdict("fail", "ReturnToService=0 and no RebootProgram/ResumeProgram: every node that went DOWN stays "
                   "DOWN until someone resumes it by hand", 0, evidence=evidence)
