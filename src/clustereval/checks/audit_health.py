"""Audit checks: DCGM in the health check, a draining HealthCheckProgram, a quick prolog, and nodes
returning to service.

Reads ``scontrol show config`` (Slurm 17.11 to 25.11), ``dcgmi -v`` (DCGM 2.x to 4.x, through the
``dcgmi`` parser) and the text of the programs slurm.conf names as the node holds them
(``health_slurm_programs``: ``## program key=K path=P exists=yes|no executable=yes|no`` headers,
each followed by the program's first lines). Nothing is executed: a prolog is judged by what it runs.
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath
from typing import Any

from clustereval.checks import Context, HarnessError, ProbeFailed, Skip, Verdict, check
from clustereval.checks.audit_scheduler import is_null, seconds, slurm_config

PROGRAMS_PROBE = "health_slurm_programs"
DCGMI_PROBE = "health_dcgmi_version"
GPU_PROBE = "nvidia_smi_q_x"
DCGM_WORDS = re.compile(r"\b(dcgmi|dcgm|nv-hostengine|check_dcgmi)\b", re.IGNORECASE)
# What makes a health check's failure take the node out: scontrol drain/down, or NHC (which drains itself).
DRAIN_WORDS = re.compile(r"scontrol\b[^\n]*\bstate=(drain|down|fail)|\bstate=drain\b|\bnhc\b|"
                         r"\bnode-mark-offline\b|\bsinfo_drain\b", re.IGNORECASE)
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
    drains = named_nhc or any(DRAIN_WORDS.search(p["text"] or "") for p in checks)
    evidence["drains"] = drains
    if interval == 0:
        return Verdict("warn", f"HealthCheckProgram {path} runs only when slurmd starts (HealthCheckInterval=0): "
                       "a GPU failing later is never caught", interval, evidence=evidence)
    if not drains:
        return Verdict("warn", f"HealthCheckProgram {path} runs every {interval} s but never drains the node "
                       "(no `scontrol update ... state=drain`, not NHC): Slurm ignores its exit status", interval,
                       evidence=evidence)
    return Verdict("pass", f"HealthCheckProgram {path} runs every {interval} s and drains the node on failure",
                   interval, evidence=evidence)


@check("audit.health.prolog")
def prolog(ctx: Context) -> Verdict:
    config = slurm_config(ctx)
    timeout = seconds(config.get("MessageTimeout")) or 10  # Slurm's default MessageTimeout
    evidence: dict[str, Any] = {key: config.get(key) for key in
                                ("Prolog", "PrologSlurmctld", "PrologFlags", "PrologEpilogTimeout", "MessageTimeout")}
    if all(is_null(config.get(key)) for key in ("Prolog", "PrologSlurmctld", "TaskProlog")):
        return Verdict("pass", "no prolog is configured: nothing runs before jobs start", 0, evidence=evidence)
    found = programs(ctx)
    # PrologSlurmctld runs on the controller, so it need not exist on a compute node.
    on_node = _of(found, "Prolog", "TaskProlog")
    evidence["programs"] = [_brief(p) for p in _of(found, "Prolog", "TaskProlog", "PrologSlurmctld")]
    broken = [p for p in on_node if not p["exists"] or not p["executable"]]
    if broken:
        what = "is missing" if not broken[0]["exists"] else "is not executable"
        return Verdict("fail", f"{broken[0]['key']} {broken[0]['path']} {what} on {ctx.subject}: every job "
                       "allocated here fails and the node drains", None, evidence=evidence)
    slow: list[str] = []
    for program in _of(found, "Prolog", "TaskProlog", "PrologSlurmctld"):
        text = program["text"] or ""
        for match in SLOW_DIAG.finditer(text):
            slow.append(f"{program['path']} runs `{match.group(0).strip()}`")
        for match in SLEEP.finditer(text):
            if int(match.group(1)) >= timeout:
                slow.append(f"{program['path']} sleeps {match.group(1)} s")
    evidence["slow"] = slow
    names = ", ".join(p["path"] for p in _of(found, "Prolog", "TaskProlog", "PrologSlurmctld")) or "-"
    if slow:
        return Verdict("warn", f"prolog likely runs longer than MessageTimeout ({timeout} s): {'; '.join(slow)}",
                       timeout, evidence=evidence)
    return Verdict("pass", f"prolog {names} runs no long diagnostics or sleeps (judged from its text; not "
                   "timed, since running it outside a job is unsafe)", timeout, evidence=evidence)


@check("audit.health.auto_remediation")
def auto_remediation(ctx: Context) -> Verdict:
    config = slurm_config(ctx)
    keys = ("ReturnToService", "RebootProgram", "ResumeProgram", "UnkillableStepProgram", "HealthCheckProgram")
    evidence = {key: config.get(key) for key in keys}
    rts = str(config.get("ReturnToService") or "").strip()
    if not rts.isdigit():
        raise HarnessError(f"`scontrol show config` printed no readable ReturnToService ({rts!r})")
    programs_set = [key for key in ("RebootProgram", "ResumeProgram") if not is_null(config.get(key))]
    if int(rts) >= 1:
        how = {"1": "a DOWN node returns once it registers with a valid configuration (non-responding only)",
               "2": "a DOWN node returns as soon as it registers with a valid configuration"}.get(
                   rts, "DOWN nodes return automatically")
        extra = f"; {', '.join(programs_set)} set" if programs_set else ""
        return Verdict("pass", f"ReturnToService={rts}: {how}{extra}", int(rts), evidence=evidence)
    if programs_set:
        return Verdict("warn", f"ReturnToService=0: DOWN nodes wait for a manual resume, although "
                       f"{', '.join(programs_set)} is set", 0, evidence=evidence)
    return Verdict("fail", "ReturnToService=0 and no RebootProgram/ResumeProgram: every node that went DOWN stays "
                   "DOWN until someone resumes it by hand", 0, evidence=evidence)
