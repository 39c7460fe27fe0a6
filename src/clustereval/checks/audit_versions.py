"""Security minimum versions: every installed component against the dated minimum table.

One probe (``versions_inventory``, probes/versions.yml) prints each tool's version in a section
``### <name>`` … ``### <name> rc=N`` (or ``### <name> absent``). Understood outputs: ``nvcc --version``
(CUDA 11–13), ``nvidia-ctk --version`` (1.x), ``runc --version`` (0.1–1.5), ``docker version --format
'{{.Server.Version}}'`` and ``dockerd --version`` (20–29), ``dcgmi -v`` (DCGM 3–4),
``dcgm-exporter --version`` (tag ``<DCGM>-<exporter>``), ``virtnet version``, ``dpkg-query -W`` and
``rpm -q`` rows, ``/proc/driver/nvidia/version`` (R470+), ``/sys/class/infiniband/*/fw_ver``,
``/etc/os-release`` and the HPC SDK install tree. The table and its comparisons live in
:mod:`clustereval.security_table`; this module only finds the versions and words the verdicts.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from clustereval import baselines, security_table
from clustereval.checks import Context, HarnessError, ProbeFailed, Skip, Verdict, check
from clustereval.checks.agreement import reconcile
from clustereval.parsers import ParseError, parse
from clustereval.parsers.probe_versions import (
    exporter_version,
    first_version,
    ib_devices,
    installed_kernels,
    kernel_flavour,
    nvcc_version,
    os_release,
    package_rows,
)
from clustereval.results import Status, rank, worst

PROBE = "versions_inventory"
# `dcgmi -v` starts once per node, in the health area's probe; the versions checks read it there.
DCGMI_PROBE = "health_dcgmi_version"
GPU_PROBE = "nvidia_smi_q_x"
# ConnectX / BlueField adapters show a Mellanox "MT<device id>" hca_type; soft-RoCE and EFA do not.
_BLUEFIELD_HCA = {"MT41682", "MT41686", "MT41692", "MT41693"}  # BlueField, BlueField-2, BlueField-3 (+ VF)
_BLUEFIELD_FAMILIES = {18, 24, 32}  # firmware family field of BlueField, BlueField-2, BlueField-3
# The status each state of a table assessment gives (see _word): a grace period or an unknown version warns.
STATE_STATUS = {"pass": Status.PASS, "grace": Status.WARN, "unknown": Status.WARN, "fail": Status.FAIL}


@dataclass
class Section:
    """One tool's section of the versions probe (see :mod:`clustereval.parsers.probe_versions`), or a
    version tool another probe runs, read the same way."""

    name: str
    present: bool
    rc: int | None
    text: str


def driver_from_proc(text: str) -> str | None:
    """The loaded module's version from ``/proc/driver/nvidia/version`` (the ``proc-driver-nvidia`` parser)."""
    try:
        return parse("proc-driver-nvidia", text).get("driver_version")
    except ParseError:
        return None


def dcgm_versions(text: str) -> dict[str, str]:
    """``{"client": …, "hostengine": …}`` from ``dcgmi -v`` (the ``dcgmi`` parser; the host-engine entry only
    when it answered)."""
    try:
        data = parse("dcgmi", text)
    except ParseError:
        return {}
    found = {"client": (data.get("client") or {}).get("version"), "hostengine": data.get("hostengine_version")}
    return {key: value for key, value in found.items() if value}


# ---------------------------------------------------------------------------------------- plumbing


def _sections(ctx: Context) -> dict[str, Section]:
    """The versions probe's sections (parser ``probe-versions-inventory``); none at all is a harness error."""
    found = ctx.parsed(PROBE)["sections"]
    if not found:
        text = ctx.probe(PROBE).get("stdout", "")
        raise HarnessError(f"the versions probe printed no sections: {text[:120]!r}")
    return {name: Section(name, **sec) for name, sec in found.items()}


def _section(sections: dict[str, Section], name: str) -> Section:
    sec = sections.get(name)
    if sec is None:
        raise HarnessError(f"the versions probe output has no `{name}` section (cut short?)")
    return sec


def _table(ctx: Context) -> security_table.Table:
    try:
        return security_table.load(ctx.options.get("security_table"))
    except security_table.TableError as exc:
        raise HarnessError(f"security minimum table unavailable, nothing can be graded: {exc}") from None


def _today(ctx: Context) -> dt.date:
    given = ctx.options.get("today")
    return dt.date.fromisoformat(str(given)) if given else dt.date.today()


def _verdict(ctx: Context, component: str, observed: str | None, what: str, source: str,
             evidence: dict[str, Any] | None = None, line: str | None = None) -> Verdict:
    """The verdict for one observed version: pass / fail, warn for a grace period or an unknown."""
    table = _table(ctx)
    result = table.assess(component, observed, _today(ctx), line=line)
    return _word(table, result, what, source, evidence)


def _graded(states: Iterable[str]) -> str:
    """The state a verdict over several assessments is worded from: the one whose status is worst, a grace
    period before an unknown version (both warn)."""
    return max(states, key=lambda state: (rank(STATE_STATUS[state]), state == "grace"))


def _word(table: security_table.Table, result: security_table.Assessment, what: str, source: str,
          evidence: dict[str, Any] | None = None) -> Verdict:
    expected = {"min": result.minimum, "selector": result.selector, "advisory": result.advisory,
                "url": result.url, "source": table.origin,
                "table_generated": table.generated.isoformat() if table.generated else None}
    expected = {k: v for k, v in expected.items() if v is not None}
    ev = {**result.evidence(), "read_from": source, **(evidence or {})}
    advisory = f" ({result.advisory})" if result.advisory else ""
    if result.state == "pass":
        return Verdict("pass", f"{what} {result.observed}: {result.reason}", result.observed,
                       expected=expected, evidence=ev)
    if result.state == "fail":
        return Verdict("fail", f"{what} {result.observed} is vulnerable: {result.reason}{advisory}",
                       result.observed, expected=expected, evidence=ev)
    if result.state == "grace":
        return Verdict("warn", f"GRACE PERIOD, not a pass: {what} {result.observed}: {result.reason}{advisory}",
                       result.observed, expected=expected, evidence=ev)
    return Verdict("warn", f"{what} version unknown, not a pass: {result.reason}", result.observed,
                   expected=expected, evidence=ev)


# ---------------------------------------------------------------------------------------- checks


@check("audit.versions.table_fresh")
def table_fresh(ctx: Context) -> Verdict:
    table = _table(ctx)
    today = _today(ctx)
    lim = ctx.limit("versions", "audit.versions.table_fresh")
    age = table.age_days(today)
    generated = table.generated.isoformat() if table.generated else None
    evidence: dict[str, Any] = {"origin": table.origin, "generated": generated, "age_days": age,
                                "max_age_days": lim.warn, "grace_days": table.grace_days}
    expected = lim.expected()
    problems = []
    if table.origin != security_table.PACKAGED:
        lowered = security_table.lowered_minimums(table, security_table.packaged())
        evidence["lowered_minimums"] = lowered
        if lowered:
            problems.append(f"the table from {table.origin} sets minimums below the packaged table's "
                            f"({'; '.join(lowered[:5])}{' …' if len(lowered) > 5 else ''}): older data or "
                            f"tampering, verdicts may pass vulnerable versions")
    if age is not None and age < 0:
        problems.append(f"the table claims to be generated {generated}, {-age} days in the future")
    elif age is not None and baselines.grade(age, lim) != "pass":
        problems.append(f"STALE SECURITY TABLE: generated {generated}, {age} days ago (limit {lim.warn} days); "
                        f"bulletins published since are not applied, so passes may be wrong. Refresh it with "
                        f"clustereval_audit_security_table=<file or URL>")
    if problems:
        return Verdict("warn", "; ".join(problems), age, expected=expected, evidence=evidence)
    return Verdict("pass", f"security table from {table.origin} generated {generated}, {age} days ago",
                   age, expected=expected, evidence=evidence)


@check("audit.versions.nvidia_driver")
def nvidia_driver(ctx: Context) -> Verdict:
    sections = _sections(ctx)
    loaded = driver_from_proc(_section(sections, "driver").text)
    smi = None
    smi_problem = None
    try:
        smi = ctx.parsed(GPU_PROBE).get("driver_version")
    except (Skip, HarnessError, ProbeFailed) as exc:
        smi_problem = str(exc)
    evidence: dict[str, Any] = {"loaded_module": loaded, "nvidia_smi": smi}
    if loaded:
        # The loaded module is the driver that runs; nvidia-smi's library is what runs after the next reboot.
        note, evidence["agreement"] = reconcile(
            "the NVIDIA driver version", {"the loaded kernel module": loaded, "nvidia-smi's library": smi},
            "the loaded kernel module", "it is the driver running now; the library on disk runs after a reboot")
        verdict = _verdict(ctx, "nvidia_driver", loaded, "NVIDIA driver", "/proc/driver/nvidia/version", evidence)
        if note:
            verdict.summary = f"{verdict.summary}; {note}"
        return verdict
    if smi:
        return _verdict(ctx, "nvidia_driver", smi, "NVIDIA driver", "nvidia-smi -q -x", evidence)
    gpus = [line for line in _section(sections, "nvidia-pci").text.splitlines() if line.strip()]
    if gpus:
        evidence["pci_gpus"] = gpus
        return Verdict("warn", f"{len(gpus)} NVIDIA GPU(s) on the PCI bus but no driver version readable "
                       f"(module not loaded? {smi_problem or 'nvidia-smi printed no version'}): not a pass",
                       None, evidence=evidence)
    raise Skip(f"no NVIDIA GPU on this node (no loaded NVIDIA module, no NVIDIA display device on PCI; "
               f"{smi_problem or 'nvidia-smi printed no version'})")


# The login shell's view of the toolkit (the software area's probe): what users and their job steps get.
LOGIN_ENV_PROBE = "software_batch_env"


def _login_nvcc(ctx: Context) -> tuple[str, str] | None:
    """``(path, version)`` of the nvcc a login shell finds, or None when that probe has nothing to say."""
    try:
        values = ctx.parsed(LOGIN_ENV_PROBE)["values"]
    except (Skip, HarnessError, ProbeFailed):
        return None
    path = (values.get("login_nvcc") or [""])[0]
    version = (values.get("login_nvcc_version") or values.get("login_nvcc_release") or [""])[0]
    return (path, version) if path and version else None


@check("audit.versions.cuda_toolkit")
def cuda_toolkit(ctx: Context) -> Verdict:
    sections = _sections(ctx)
    sec = _section(sections, "nvcc")
    path_sec = sections.get("nvcc-path")
    own_path = path_sec.text.strip() if path_sec is not None and path_sec.present and path_sec.rc == 0 else ""
    readings = {"a login shell": _login_nvcc(ctx),
                "a non-login shell": (own_path or "nvcc", nvcc_version(sec.text) or sec.text[-80:])
                if sec.present else None}
    if not any(readings.values()):
        raise Skip("no CUDA Toolkit: nvcc is neither in PATH nor in /usr/local/cuda*/bin")
    # A login shell's nvcc is the one users and their job steps start from; the probe's own (non-login) shell
    # is what `ssh node cmd` and cron get. The value reported is the login shell's; both are graded.
    believed = "a login shell" if readings["a login shell"] else "a non-login shell"
    note, agreement = reconcile("the CUDA Toolkit version", {k: v[1] if v else None for k, v in readings.items()},
                                believed, "what users' shells and their job steps run; the other is graded too")
    agreement["paths"] = {k: v[0] for k, v in readings.items() if v}
    path, version = readings[believed] or ("", "")
    table = _table(ctx)
    verdict = _word(table, table.assess("cuda_toolkit", version, _today(ctx)), f"CUDA Toolkit (nvcc at {path})",
                    "nvcc --version", {"rc": sec.rc, "agreement": agreement})
    if note:
        other_path, other_version = readings["a non-login shell"] or ("", "")
        other = table.assess("cuda_toolkit", other_version, _today(ctx))
        verdict.status = worst(verdict.status, STATE_STATUS[other.state])
        verdict.summary = f"{verdict.summary}; {note}; {other_path} {other_version}: {other.reason}"
    return verdict


def _package_version(sections: dict[str, Section], *names: str) -> tuple[str | None, str | None]:
    for source in ("dpkg", "rpm"):
        sec = sections.get(source)
        rows = package_rows(sec.text) if sec and sec.present else {}
        for name in names:
            if name in rows:
                return rows[name], f"{source} package {name}"
    return None, None


@check("audit.versions.container_toolkit")
def container_toolkit(ctx: Context) -> Verdict:
    sections = _sections(ctx)
    sec = _section(sections, "nvidia-ctk")
    if sec.present:
        return _verdict(ctx, "container_toolkit", first_version(sec.text) or sec.text[-80:],
                        "NVIDIA Container Toolkit", "nvidia-ctk --version", {"rc": sec.rc})
    version, source = _package_version(sections, "nvidia-container-toolkit")
    if version:
        return _verdict(ctx, "container_toolkit", version, "NVIDIA Container Toolkit", source or "")
    raise Skip("NVIDIA Container Toolkit is not installed (no nvidia-ctk, no nvidia-container-toolkit package)")


@check("audit.versions.runc")
def runc(ctx: Context) -> Verdict:
    sections = _sections(ctx)
    sec = _section(sections, "runc")
    if sec.present:
        return _verdict(ctx, "runc", first_version(sec.text) or sec.text[-80:], "runc", "runc --version",
                        {"rc": sec.rc})
    version, source = _package_version(sections, "runc")
    if version:
        return _verdict(ctx, "runc", version, "runc", source or "")
    raise Skip("runc is not installed (no runc binary in PATH, no runc package)")


@check("audit.versions.docker")
def docker(ctx: Context) -> Verdict:
    sections = _sections(ctx)
    cli, daemon = _section(sections, "docker"), _section(sections, "dockerd")
    if cli.present and cli.rc == 0 and cli.text.strip():
        return _verdict(ctx, "docker_engine", cli.text.strip().splitlines()[-1], "Docker Engine",
                        "docker version --format {{.Server.Version}}")
    why = cli.text.strip().splitlines()[-1] if cli.present and cli.text.strip() else None
    evidence = {"daemon_unreachable": why}
    if daemon.present:
        # The engine is installed but did not answer (stopped, or this user may not use its socket):
        # the binary's version is what runs when it starts.
        return _verdict(ctx, "docker_engine", first_version(daemon.text) or daemon.text[-80:],
                        "Docker Engine (installed dockerd)", "dockerd --version", evidence)
    version, source = _package_version(sections, "docker-ce")
    if version:
        return _verdict(ctx, "docker_engine", version, "Docker Engine", source or "", evidence)
    if not cli.present:
        raise Skip("Docker is not installed (no docker CLI, no dockerd, no docker-ce package)")
    if why and "permission denied" in why.lower():
        return Verdict("warn", f"a Docker daemon exists but this user cannot ask its version ({why}); "
                       f"not a pass", None, evidence=evidence)
    raise Skip(f"only the Docker client is installed; no engine runs or is installed on this node ({why})")


@check("audit.versions.nic_firmware")
def nic_firmware(ctx: Context) -> Verdict:
    table = _table(ctx)
    today = _today(ctx)
    rows = ib_devices(_section(_sections(ctx), "ib").text)
    adapters = [r for r in rows if r["hca_type"].upper().startswith("MT") or r["device"].startswith("mlx")]
    if not adapters:
        others = ", ".join(r["device"] for r in rows) or "none"
        raise Skip(f"no ConnectX/BlueField adapter in /sys/class/infiniband (other RDMA devices: {others})")
    per_device = {}
    for row in adapters:
        result = table.assess("nic_firmware", row["fw_ver"] or None, today)
        per_device[row["device"]] = {**result.evidence(), "hca_type": row["hca_type"], "board_id": row["board_id"]}
    states = {d: e["state"] for d, e in per_device.items()}
    evidence = {"devices": per_device, "read_from": "/sys/class/infiniband/*/fw_ver"}
    comp = table.component("nic_firmware")
    expected = {"advisory": comp.get("advisory"), "url": comp.get("url"), "source": table.origin,
                "table_generated": table.generated.isoformat() if table.generated else None}
    firmware = sorted({r["fw_ver"] for r in adapters})

    def named(state: str) -> str:
        return ", ".join(f"{d} {per_device[d].get('observed')} ({per_device[d].get('reason')})"
                         for d, s in states.items() if s == state)

    state = _graded(states.values())
    if state == "fail":
        return Verdict("fail", f"vulnerable adapter firmware: {named('fail')} ({comp.get('advisory')})",
                       firmware, expected=expected, evidence=evidence)
    if state == "grace":
        return Verdict("warn", f"GRACE PERIOD, not a pass: {named('grace')}", firmware, expected=expected,
                       evidence=evidence)
    if state == "unknown":
        return Verdict("warn", f"firmware version unknown, not a pass: {named('unknown')}", firmware,
                       expected=expected, evidence=evidence)
    return Verdict("pass", f"{len(adapters)} adapter(s) at or above their train's minimum: {', '.join(firmware)}",
                   firmware, expected=expected, evidence=evidence)


@check("audit.versions.kernel_pending")
def kernel_pending(ctx: Context) -> Verdict:
    sections = _sections(ctx)
    running = _section(sections, "uname").text.strip()
    if not running or not baselines.version_key(running):
        raise HarnessError(f"`uname -r` printed no kernel release: {running[:80]!r}")
    installed = installed_kernels(ctx.parsed(PROBE)["sections"])
    flavour = kernel_flavour(running)
    same = {rel: src for rel, src in installed.items() if kernel_flavour(rel) == flavour}
    evidence = {"running": running, "flavour": flavour, "installed": installed}
    if not installed:
        return Verdict("warn", f"kernel {running} is not from any installed kernel package or /boot image "
                       f"(supplied outside the OS: direct boot or hypervisor); whether it is current cannot be "
                       f"checked here, not a pass", running, evidence=evidence)
    newest = max(same, key=baselines.version_key) if same else None
    evidence["newest_installed"] = newest
    if newest and baselines.version_key(newest) > baselines.version_key(running):
        return Verdict("warn", f"reboot pending: kernel {newest} is installed ({same[newest]}) but {running} is "
                       f"running, so the newer kernel's fixes are not in effect", running, evidence=evidence)
    if running not in installed:
        return Verdict("warn", f"the running kernel {running} is no longer installed (installed: "
                       f"{', '.join(sorted(installed, key=baselines.version_key))}): reboot pending", running,
                       evidence=evidence)
    return Verdict("pass", f"kernel {running} is the newest installed {flavour or 'kernel'}", running,
                   evidence=evidence)


@check("audit.versions.kernel_advisories")
def kernel_advisories(ctx: Context) -> Verdict:
    sections = _sections(ctx)
    running = _section(sections, "uname").text.strip()
    osr = os_release(_section(sections, "os-release").text)
    if not running:
        raise HarnessError("`uname -r` printed no kernel release")
    if not osr.get("ID"):
        raise HarnessError("/etc/os-release is missing or names no ID: the distribution is unknown")
    table = _table(ctx)
    result = table.assess_distro_kernel(osr["ID"], osr.get("VERSION_ID", ""), running, _today(ctx))
    if result is None:
        raise Skip(f"no kernel advisory in the table applies to {osr.get('PRETTY_NAME', osr['ID'])} with "
                   f"kernel {running}")
    return _word(table, result, "kernel", "uname -r, /etc/os-release", {"os": osr.get("PRETTY_NAME")})


def _probe_section(ctx: Context, probe_name: str, name: str) -> Section:
    """A version tool another probe runs, read like one of the versions probe's sections."""
    probe = ctx.raw(probe_name)
    if probe.get("missing"):
        return Section(name, False, None, "")
    text = str(probe.get("stdout") or "").strip("\n") or str(probe.get("stderr") or "").strip("\n")
    return Section(name, True, probe.get("rc"), text)


@check("audit.versions.dcgm")
def dcgm(ctx: Context) -> Verdict:
    sec = _probe_section(ctx, DCGMI_PROBE, "dcgmi")
    if not sec.present:
        raise Skip("DCGM is not installed (no dcgmi)")
    versions = dcgm_versions(sec.text)
    if not versions:
        return _verdict(ctx, "dcgm", sec.text[-80:] or None, "DCGM", "dcgmi -v", {"rc": sec.rc})
    # Grade the older of client and host engine: a stale nv-hostengine keeps running after an upgrade.
    oldest = min(versions.values(), key=lambda v: (security_table.parse_version(v) or
                                                   security_table.Version((0,))).key())
    return _verdict(ctx, "dcgm", oldest, "DCGM", "dcgmi -v", {"versions": versions})


@check("audit.versions.dcgm_exporter")
def dcgm_exporter(ctx: Context) -> Verdict:
    sec = _section(_sections(ctx), "dcgm-exporter")
    if not sec.present:
        raise Skip("DCGM Exporter is not installed on the node (no dcgm-exporter binary)")
    return _verdict(ctx, "dcgm_exporter", exporter_version(sec.text) or sec.text[-80:] or None,
                    "DCGM Exporter", "dcgm-exporter --version", {"output": sec.text[-200:]})


@check("audit.versions.virtio_net_bluefield")
def virtio_net_bluefield(ctx: Context) -> Verdict:
    sections = _sections(ctx)
    sec = _section(sections, "virtnet")
    if sec.present:
        line = re.search(r"\b(GA|LTS\d\d)\b", sec.text)
        return _verdict(ctx, "virtio_net", first_version(sec.text) or sec.text[-80:] or None,
                        "BlueField virtio-net controller", "virtnet version", {"rc": sec.rc},
                        line=line.group(1) if line else None)
    rows = ib_devices(_section(sections, "ib").text)
    bluefield = []
    for row in rows:
        family = security_table.parse_version(row["fw_ver"])
        if row["hca_type"].upper() in _BLUEFIELD_HCA or (family and family.parts[0] in _BLUEFIELD_FAMILIES):
            bluefield.append(row["device"])
    if not bluefield:
        raise Skip("no BlueField DPU on this node")
    return Verdict("warn", f"BlueField adapter(s) {', '.join(bluefield)} present but the virtio-net controller "
                   f"runs on the DPU and `virtnet` is not reachable from the host: its version is unknown, "
                   f"not a pass (the provider must attest it)", None, evidence={"bluefield": bluefield})


@check("audit.versions.hpc_sdk")
def hpc_sdk(ctx: Context) -> Verdict:
    lines = [ln.strip() for ln in _section(_sections(ctx), "hpc-sdk").text.splitlines() if ln.strip()]
    if not lines:
        raise Skip("the NVIDIA HPC SDK is not installed under /opt/nvidia/hpc_sdk")
    table = _table(ctx)
    today = _today(ctx)
    results = {path: table.assess("hpc_sdk", path.rsplit("/", 1)[-1], today) for path in lines}
    evidence = {"installed": {p: r.evidence() for p, r in results.items()}}
    state = _graded(r.state for r in results.values())
    verdict = _word(table, next(r for r in results.values() if r.state == state), "HPC SDK", "/opt/nvidia/hpc_sdk",
                    evidence)
    if len(results) > 1:
        verdict.summary += f" ({len(results)} releases installed: " \
                           f"{', '.join(p.rsplit('/', 1)[-1] for p in lines)})"
    return verdict
