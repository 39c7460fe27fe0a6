"""Audit checks: idle GPU thermals, Xid history, metrics exporters, CPU governor, job attribution.

Reads ``nvidia-smi -q -x`` (core probe, drivers R470 to R580), the kernel log as the node keeps it
(``journalctl _TRANSPORT=kernel`` of systemd 219+, util-linux ``dmesg -T``, ``/var/log/kern.log`` and
``/var/log/messages``, through the ``kernel-xid`` parser and its Xid catalogue), iproute2 ``ss -ltn``
with procps ``ps -eo comm=``, cpufreq's sysfs ``scaling_governor``, and the Slurm programs' text.
"""

from __future__ import annotations

import re
from functools import cache
from importlib import resources
from typing import Any

from clustereval import baselines, yamldata
from clustereval.checks import Context, HarnessError, ProbeFailed, Skip, Verdict, check
from clustereval.checks.audit_health import GPU_PROBE, amd_gpus, has_gpus, programs
from clustereval.parsers import ParseError, parse
from clustereval.parsers.kernel_xid import xid_info
from clustereval.results import worst

LISTENERS_PROBE = "monitoring_listeners"
KERNEL_LOG_PROBE = "monitoring_kernel_log"
CPUFREQ_PROBE = "monitoring_cpufreq"
ROCM_SMI_PROBE = "rocm_smi"
# Governors that keep clocks at the top (intel_pstate/amd-pstate "performance") or let hardware
# (HWP/CPPC) pick them; "powersave" under a passive driver pins the lowest frequency.
ACTIVE_PSTATE_DRIVERS = {"intel_pstate", "amd-pstate-epp", "amd_pstate_epp"}
ATTRIBUTION = re.compile(r"dcgmi\s+stats\b[^\n]*(--jstart|-s\b|--jstop|-x\b)|hpc[-_]job[-_]mapping|"
                         r"DCGM_HPC_JOB_MAPPING", re.IGNORECASE)


@cache
def _data() -> dict[str, Any]:
    text = resources.files("clustereval.baselines").joinpath("monitoring.yml").read_text(encoding="utf-8")
    return yamldata.load(text)


def gpu_class(names: list[str]) -> str:
    """The idle-ceiling class of a GPU product name (``NVIDIA H100 80GB HBM3`` -> ``h100``)."""
    for pattern, cls in _data().get("class_patterns") or []:
        if any(re.search(pattern, name or "", re.IGNORECASE) for name in names):
            return cls
    return _data()["default_class"]


def _idle_readings(ctx: Context) -> tuple[list[dict[str, Any]], str]:
    """Every GPU's index, name, temperature, power, utilisation and processes, and the tool that read them:
    nvidia-smi -q -x, or on a node without it rocm-smi's Concise Info (junction temperature, socket power)."""
    try:
        data = ctx.parsed(GPU_PROBE)
    except Skip as nvidia:
        try:
            amd = ctx.parsed(ROCM_SMI_PROBE)
        except Skip:
            raise Skip(f"no NVIDIA or AMD GPU tool on this node ({nvidia})") from None
        if not amd.get("complete", True):
            raise HarnessError("rocm-smi's Concise Info ended early") from None
        # ROCm 6.1+ prints no product name in the table: amd-smi's inventory names the GPUs then
        names = {g.get("index"): g.get("name") for g in amd.get("gpus") or []}
        if not any(names.values()):
            from clustereval.checks.audit_amd import devices  # audit_amd builds on the audit modules

            try:
                names = {d["gpu"]: d["model"] for d in devices(ctx)[0]}
            except (Skip, HarnessError, ProbeFailed):
                pass
        return [{"index": g.get("index"), "name": names.get(g.get("index")), "temperature_c": g.get("temp_junction_c"),
                 "power_draw_w": g.get("power_w"), "utilization_gpu_pct": g.get("gpu_use_pct")}
                for g in amd.get("gpus") or []], "rocm-smi"
    if not data.get("complete", True):
        raise HarnessError("nvidia-smi -q -x output ended early")
    return data.get("gpus") or [], "nvidia-smi"


@check("audit.monitoring.idle_thermals")
def idle_thermals(ctx: Context) -> Verdict:
    gpus, tool = _idle_readings(ctx)
    if not gpus:
        raise Skip(f"{tool} lists no GPU on this node")
    cls = (ctx.options.get("hardware_classes") or {}).get("monitoring") or gpu_class([g.get("name") for g in gpus])
    overrides = ctx.options.get("baseline_overrides")
    power_lim = baselines.limit("monitoring", "audit.monitoring.idle_thermals.power", cls, overrides)
    temp_lim = baselines.limit("monitoring", "audit.monitoring.idle_thermals.temperature", cls, overrides)
    busy_pct = float(_data().get("idle_utilization_pct", 10))
    busy = [g.get("index") for g in gpus if g.get("processes") or (g.get("utilization_gpu_pct") or 0) > busy_pct]
    per_gpu = [{"index": g.get("index"), "temperature_c": g.get("temperature_c"), "power_w": g.get("power_draw_w")}
               for g in gpus]
    evidence = {"class": cls, "gpus": per_gpu, "busy": busy, "tool": tool}
    if len(busy) == len(gpus):
        raise Skip(f"every GPU is busy (processes or >{busy_pct:.0f}% utilisation): not an idle reading")
    idle = [g for g in gpus if g.get("index") not in busy]
    temps = [g["temperature_c"] for g in idle if g.get("temperature_c") is not None]
    powers = [g["power_draw_w"] for g in idle if g.get("power_draw_w") is not None]
    if not temps and not powers:
        raise HarnessError(f"{tool} reported neither temperature nor power draw for any GPU")
    findings, levels = [], set()
    for label, values, lim, unit in (("temperature", temps, temp_lim, "°C"), ("power", powers, power_lim, "W")):
        if not values:
            continue
        level = baselines.grade(max(values), lim)
        if level != "pass":
            hot = [f"GPU {g.get('index')} {g.get('temperature_c' if label == 'temperature' else 'power_draw_w')} {unit}"
                   for g in idle if baselines.grade((g.get("temperature_c") if label == "temperature"
                                                     else g.get("power_draw_w")) or 0, lim) != "pass"]
            findings.append(f"idle {label} above the {cls} ceiling of {lim.warn} {unit}: {', '.join(hot)}")
            levels.add(level)
    expected = {"power": power_lim.expected(), "temperature": temp_lim.expected()}
    value = max(powers) if powers else None
    note = f" ({len(busy)} busy GPU(s) not judged)" if busy else ""
    if findings:
        return Verdict(worst(levels), "; ".join(findings) + note, value, unit="W",
                       expected=expected, evidence=evidence)
    return Verdict("pass", f"{len(idle)} idle GPU(s) at most {max(temps) if temps else '?'} °C and "
                   f"{max(powers) if powers else '?'} W ({cls} ceilings {temp_lim.warn} °C, {power_lim.warn} W)"
                   + note, value, unit="W", expected=expected, evidence=evidence)


@check("audit.monitoring.xid_history")
def xid_history(ctx: Context) -> Verdict:
    sources = ctx.parsed(KERNEL_LOG_PROBE)["sources"]
    readable = [s for s in sources if s["rc"] == 0 and s["lines"] > 0]
    evidence: dict[str, Any] = {"sources": {s["source"]: {"rc": s["rc"], "lines": s["lines"]} for s in sources}}
    if not readable:
        tried = ", ".join(f"{s['source']} (exit {s['rc']}, {s['lines']} lines)" for s in sources) or "none found"
        account = ctx.parsed(KERNEL_LOG_PROBE).get("account") or {}
        if account.get("uid") not in (0, None) and not account.get("sudo"):
            raise Skip(f"the evaluation account (uid {account['uid']}, no sudo) may read no kernel log on "
                       f"{ctx.subject} ({tried}): Xid history not assessed; run the audit as root, or give the "
                       "account sudo or the adm and systemd-journal groups")
        raise HarnessError(f"could not read any kernel log on {ctx.subject} ({tried}); an unreadable log is not "
                           "a clean one (dmesg needs root where kernel.dmesg_restrict=1)")
    events: dict[tuple[Any, ...], dict[str, Any]] = {}
    for source in readable:
        if not source["xid_lines"]:
            continue
        try:
            parsed = parse("kernel-xid", "\n".join(source["xid_lines"]))
        except ParseError as exc:
            raise HarnessError(f"could not parse the Xid lines of {source['source']}: {exc}") from None
        for event in parsed.get("events") or []:
            # The same event reaches several logs (ring buffer, journal, kern.log) with different stamps.
            key = (event.get("kind"), event.get("code"), event.get("pci"), event.get("pid"), event.get("message"))
            events.setdefault(key, event)
    codes: dict[tuple[str, int], dict[str, Any]] = {}
    for event in events.values():
        entry = codes.setdefault((event["kind"], event["code"]), {"count": 0, "pcis": set()})
        entry["count"] += 1
        entry["pcis"].add(event.get("pci"))
    described, levels = [], set()
    for (kind, code), entry in sorted(codes.items()):
        info = xid_info(code) if kind == "xid" else None
        severity = (info or {}).get("severity") if kind == "xid" else "major"
        level = {"critical": "fail", "major": "warn"}.get(str(severity), "pass" if info else "warn")
        levels.add(level)
        name = (info or {}).get("name") or ("NVSwitch SXid" if kind == "sxid" else "not in the Xid catalogue")
        pcis = ", ".join(sorted(p for p in entry["pcis"] if p))
        described.append({"kind": kind, "code": code, "count": entry["count"], "name": name, "severity": severity,
                          "pcis": pcis, "level": level})
    evidence["events"] = described
    evidence["sample"] = [e.get("raw") for e in list(events.values())[:5]]
    read = ", ".join(s["source"] for s in readable)
    if not described:
        return Verdict("pass", f"no Xid or SXid events in the kernel log ({read})", 0, evidence=evidence)
    text = "; ".join(f"{'Xid' if d['kind'] == 'xid' else 'SXid'} {d['code']} ({d['name']}) ×{d['count']}"
                     f"{' on ' + d['pcis'] if d['pcis'] else ''}" for d in described)
    status = worst(levels)
    lead = {"fail": "hardware Xid events in the kernel log", "warn": "Xid events worth a look in the kernel log",
            "pass": "only application-level Xid events in the kernel log"}[status]
    return Verdict(status, f"{lead}: {text}", len(events), evidence=evidence)


@check("audit.monitoring.exporters")
def exporters(ctx: Context) -> Verdict:
    listening = ctx.parsed(LISTENERS_PROBE)
    ports, names = set(listening["ports"]), set(listening["processes"])
    if not listening["ss_listed"]:
        raise HarnessError(f"`ss -ltn` listed no listening socket on {ctx.subject} (not even sshd)")
    # nvidia: nvidia-smi lists GPUs (False or None, could not tell: not required); amd: the amd_node probe
    # counted AMD GPUs on the PCI bus
    gpus = {"nvidia": has_gpus(ctx), "amd": amd_gpus(ctx)}
    found: dict[str, dict[str, Any]] = {}
    for name, spec in (_data().get("exporters") or {}).items():
        by_port = sorted(set(spec.get("ports") or []) & ports)
        by_name = sorted(n for n in names if any(n == p[:15] for p in spec.get("processes") or []))
        found[name] = {"present": bool(by_port or by_name), "ports": by_port, "processes": by_name,
                       "missing": spec.get("missing"), "gpus": spec.get("gpus")}
    evidence = {"exporters": found, "gpus": gpus["nvidia"], "amd_gpus": gpus["amd"]}
    fails, warns = [], []
    for name, item in found.items():
        if item["present"] or not item["missing"]:
            continue
        if item["gpus"] == "amd" and not gpus["amd"]:
            continue
        if item["gpus"] == "nvidia" and not gpus["nvidia"]:
            continue
        (fails if item["missing"] == "fail" else warns).append(name)
    present = [name for name, item in found.items() if item["present"]]
    seen = f"running: {', '.join(present)}" if present else "no exporter running"
    if fails or warns:
        return Verdict("fail" if fails else "warn", f"{', '.join(fails + warns)} not listening on {ctx.subject} "
                       f"({seen}; checked default ports and process names)", len(present), evidence=evidence)
    return Verdict("pass", f"metrics exporters on {ctx.subject}: {seen}", len(present), evidence=evidence)


@check("audit.monitoring.cpu_governor")
def cpu_governor(ctx: Context) -> Verdict:
    data = ctx.parsed(CPUFREQ_PROBE)
    if data["cpus"] is None:
        raise HarnessError("the cpufreq probe printed no CPU count")
    governors = data["governors"]
    if not governors:
        raise Skip("the kernel exposes no cpufreq governor (a VM, or frequency scaling left to the firmware)")
    counts: dict[str, int] = {}
    for governor in governors.values():
        counts[governor] = counts.get(governor, 0) + 1
    evidence = {"driver": data["driver"], "governors": counts, "cpus": data["cpus"], "cpus_read": len(governors)}
    describe = ", ".join(f"{g} on {n} CPU(s)" for g, n in sorted(counts.items()))
    if set(counts) == {"performance"}:
        return Verdict("pass", f"governor performance on all {len(governors)} CPUs ({data['driver'] or 'driver ?'})",
                       "performance", evidence=evidence)
    pinned_low = counts.get("powersave") and (data["driver"] or "") not in ACTIVE_PSTATE_DRIVERS
    if pinned_low:
        return Verdict("fail", f"governor powersave under {data['driver'] or 'an unknown driver'} holds CPUs at their "
                       f"lowest frequency ({describe})", "powersave", evidence=evidence)
    worst = sorted(g for g in counts if g != "performance")[0]
    return Verdict("warn", f"CPU clocks drop between bursts: {describe} (driver {data['driver'] or '?'})", worst,
                   evidence=evidence)


def _code(script: str) -> str:
    """A shell script without its comment lines: a commented-out `dcgmi stats` call tags no job."""
    return "\n".join(line for line in script.splitlines() if not line.lstrip().startswith("#"))


@check("audit.monitoring.job_attribution")
def job_attribution(ctx: Context) -> Verdict:
    if has_gpus(ctx) is False:
        raise Skip("no NVIDIA GPU on this node")
    found = programs(ctx)
    hooks = [p for p in found["programs"] if p["key"] in ("Prolog", "Epilog", "TaskProlog", "PrologSlurmctld")]
    evidence: dict[str, Any] = {"programs": [{k: p[k] for k in ("key", "path", "exists")} for p in hooks]}
    using = [p for p in hooks if ATTRIBUTION.search(_code(p["text"] or ""))]
    evidence["attribution_in"] = [p["path"] for p in using]
    if not using:
        where = ", ".join(p["path"] for p in hooks) or "no prolog or epilog configured"
        return Verdict("warn", f"GPU metrics cannot be tied to Slurm jobs: no prolog/epilog starts DCGM job stats or "
                       f"writes dcgm-exporter's job mapping ({where})", None, evidence=evidence)
    needs_dcgmi = any(re.search(r"dcgmi\s+stats", _code(p["text"] or "")) for p in using)
    dcgmi = ctx.probes.get("health_dcgmi_version") or {}
    if needs_dcgmi and (dcgmi.get("missing") or dcgmi.get("rc") not in (0, None)):
        return Verdict("fail", f"{using[0]['path']} calls `dcgmi stats` but dcgmi does not work on {ctx.subject}: "
                       "the hook fails on every job", None, evidence=evidence)
    return Verdict("pass", f"jobs are tagged in GPU metrics by {', '.join(p['path'] for p in using)}",
                   len(using), evidence=evidence)

