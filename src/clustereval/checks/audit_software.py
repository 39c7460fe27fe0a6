"""Audit checks, software stack & containers: NCCL, MPI/PMIx, HPC SDK, modules, batch PATH, Pyxis,
Enroot, NCCL topology in containers, Docker, Apptainer.

The probes (``checks/probes/software.yml``) print ``key=value`` lines built from: ``ldconfig -p`` and
``libnccl.so.X.Y.Z`` file names (NCCL 2.x), ``nccl.h`` defines, Slurm 20–25 ``srun --mpi=list`` and
``srun --help``, NVIDIA HPC SDK directory layout (``Linux_x86_64/<yy.m>/compilers/bin``) and
``nvc --version`` ("nvc 24.5-0 64-bit target…"), Lmod 8 (``module --version``: "Modules based on Lua:
Version 8.7.x", ``module -t avail``) and Environment Modules 4/5 ("Modules Release 5.x"), Enroot 3
(``enroot version``: "3.5.0"), Docker 20–28 (``docker version --format``), Apptainer 1.x
("apptainer version 1.3.4"), SingularityCE/Singularity 3–4 ("singularity-ce version 4.1.2"), and the
messages of an Enroot 3 ``enroot import`` (``[INFO] …`` steps, ``[ERROR] URL … returned error code: 429 Too
Many Requests``, curl's ``curl: (6) Could not resolve host: …``, mksquashfs's summary).
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath

from clustereval import baselines
from clustereval.checks import Context, HarnessError, ProbeFailed, Skip, Verdict, check
from clustereval.parsers.probe_key_values import first
from clustereval.parsers.probe_software import enroot_version, module_names, mpi_plugins, nccl_version

LIBS_PROBE = "software_libs"
CONTAINERS_PROBE = "software_containers"
BATCH_PROBE = "software_batch_env"
IMPORT_PROBE = "software_enroot_import"
IMPORT_CHECK = "audit.software.enroot_import"
IMPORT_TIMEOUT_S = 120  # the probe's inner `timeout`
BASELINE_AREA = "software_stack"
NO_GPU = "no NVIDIA GPU on this node"
NOT_SLURM_SIGNS = ("Could not establish a configuration source", "Unable to contact slurm controller")
GPU_STACK_MODULES = ("cuda", "nccl", "hpcx", "hpc-x", "nvhpc", "openmpi", "cudnn", "nvidia-hpc-sdk")


def _data(ctx: Context, probe: str) -> dict[str, list[str]]:
    """A software probe's ``key=value`` lines as ``{key: [values…]}`` (parser ``probe-key-equals-value``)."""
    return ctx.parsed(probe)["values"]


def gpu_present(libs: dict[str, list[str]]) -> bool:
    """An NVIDIA GPU is here when the driver is loaded or the PCI bus lists an NVIDIA display device."""
    count = first(libs, "nvidia_pci_gpus", "0")
    return first(libs, "nvidia_driver") == "loaded" or (count.isdigit() and int(count) > 0)


def _require_gpu(ctx: Context) -> dict[str, list[str]]:
    libs = _data(ctx, LIBS_PROBE)
    if "nvidia_pci_gpus" not in libs:
        raise HarnessError("the software probe ended before it counted GPUs")
    if not gpu_present(libs):
        raise Skip(NO_GPU)
    return libs


def container_runtimes(containers: dict[str, list[str]]) -> list[str]:
    found = [name for name in ("enroot", "apptainer", "singularity", "docker") if f"{name}_rc" in containers]
    return found


def _containers_or_empty(ctx: Context) -> dict[str, list[str]]:
    try:
        return _data(ctx, CONTAINERS_PROBE)
    except (Skip, HarnessError, ProbeFailed):
        return {}


@check("audit.software.nccl")
def nccl(ctx: Context) -> Verdict:
    libs = _require_gpu(ctx)
    paths = libs.get("nccl_lib") or []
    versions = sorted({v for v in (nccl_version(p) for p in paths) if v}, key=baselines.version_key)
    header = ".".join(first(libs, f"nccl_h_{part}") for part in ("MAJOR", "MINOR", "PATCH"))
    evidence = {"libraries": paths, "versions": versions, "header_version": header if header != ".." else None}
    if not paths:
        runtimes = container_runtimes(_containers_or_empty(ctx))
        evidence["container_runtimes"] = runtimes
        if runtimes:
            return Verdict("warn", f"no NCCL library on the host; only containers ({', '.join(runtimes)}) can "
                           "bring one, bare-metal jobs cannot use NCCL", None, evidence=evidence)
        return Verdict("fail", "no NCCL library on this GPU node and no container runtime to bring one",
                       None, evidence=evidence)
    if not versions and header != "..":
        versions = [header]
    if not versions:
        return Verdict("warn", f"NCCL found ({', '.join(paths)}) but its version is unreadable", "unknown",
                       evidence=evidence)
    lim = ctx.limit(BASELINE_AREA, "audit.software.nccl")
    newest = versions[-1]
    status = baselines.grade(newest, lim)
    if len(versions) > 1:
        return Verdict("warn", f"several NCCL versions installed ({', '.join(versions)}): which one a job loads "
                       "depends on its library path", newest, expected=lim.expected(), evidence=evidence)
    summary = {"pass": f"NCCL {newest}", "warn": f"NCCL {newest} is older than {lim.warn}",
               "fail": f"NCCL {newest} is older than {lim.fail}"}[status]
    return Verdict(status, summary, newest, expected=lim.expected(), evidence=evidence)


@check("audit.software.mpi_pmix")
def mpi_pmix(ctx: Context) -> Verdict:
    libs = _data(ctx, LIBS_PROBE)
    lines = libs.get("mpi_list")
    if lines is None:
        raise Skip("srun is not installed on this node")
    text = " ".join(lines)
    if any(sign in text for sign in NOT_SLURM_SIGNS):
        raise Skip(f"the Slurm client on {ctx.subject} has no configuration: not a Slurm node ({text[:160]})")
    plugins = mpi_plugins(lines)
    if plugins is None:
        raise HarnessError(f"could not read `srun --mpi=list`: {text[:200]!r}")
    evidence: dict = {"mpi_plugins": plugins}
    try:
        batch = _data(ctx, BATCH_PROBE)
        evidence.update(mpirun=first(batch, "login_mpirun") or None, hpcx_dir=first(batch, "login_hpcx") or None)
    except (Skip, HarnessError, ProbeFailed) as exc:
        evidence["login_env"] = str(exc)
    no_mpirun = "mpirun" in evidence and not evidence["mpirun"]
    launcher = (f"; mpirun {evidence['mpirun']}" if evidence.get("mpirun") else
                "; no mpirun on the login PATH" if no_mpirun else "")
    if any(name.startswith("pmix") for name in plugins):
        pmix = f"srun supports PMIx ({', '.join(p for p in plugins if p.startswith('pmix'))})"
        if no_mpirun:
            # Direct launch works, but the recipes users bring (nccl-tests, HPC-X, most MPI codes) call
            # mpirun: a required piece is missing, so this is not a pass.
            return Verdict("warn", f"{pmix} but there is no mpirun on the login PATH: jobs launched with "
                           "mpirun (nccl-tests, HPC-X and most MPI recipes) fail with 'command not found'",
                           "pmix", evidence=evidence)
        return Verdict("pass", f"{pmix}{launcher}", "pmix", evidence=evidence)
    if "pmi2" in plugins:
        return Verdict("warn", f"srun offers PMI-2 but not PMIx{launcher}: Open MPI 5 and HPC-X need PMIx "
                       "for direct launch", "pmi2", evidence=evidence)
    return Verdict("fail", f"srun can launch no MPI (plugins: {', '.join(plugins) or 'none'}){launcher}", "none",
                   evidence=evidence)


@check("audit.software.hpc_sdk")
def hpc_sdk(ctx: Context) -> Verdict:
    libs = _require_gpu(ctx)  # NVIDIA's compilers: nothing to ask of a node without NVIDIA GPUs
    releases = libs.get("nvhpc_release") or []
    compilers = set(libs.get("nvhpc_compiler") or [])
    nvc = libs.get("nvhpc_nvc") or []
    evidence = {"releases": releases, "compilers": sorted(compilers), "nvc_versions": nvc}
    if not releases:
        return Verdict("warn", "NVIDIA HPC SDK not installed (no /opt/nvidia/hpc_sdk/Linux_*/<release>)", None,
                       evidence=evidence)
    newest = max(releases, key=lambda r: baselines.version_key(PurePosixPath(r).name))
    version = PurePosixPath(newest).name
    missing = [c for c in ("nvc", "nvc++", "nvfortran") if f"{newest}/compilers/bin/{c}" not in compilers]
    if missing:
        return Verdict("fail", f"HPC SDK {version} is incomplete: {', '.join(missing)} missing in {newest}",
                       version, evidence=evidence)
    if not nvc:
        return Verdict("fail", f"HPC SDK {version}: `nvc --version` printed no version (the compiler does not run)",
                       version, evidence=evidence)
    if not re.fullmatch(r"\d+\.\d+", version):
        return Verdict("warn", f"HPC SDK release directory {newest} does not name a version", "unknown",
                       evidence=evidence)
    lim = ctx.limit(BASELINE_AREA, "audit.software.hpc_sdk")
    status = baselines.grade(version, lim)
    summary = {"pass": f"HPC SDK {version} (nvc {nvc[-1]})", "warn": f"HPC SDK {version} is older than {lim.warn}",
               "fail": f"HPC SDK {version} is older than {lim.fail}"}[status]
    return Verdict(status, summary, version, expected=lim.expected(), evidence=evidence)


@check("audit.software.lmod")
def lmod(ctx: Context) -> Verdict:
    env = _data(ctx, BATCH_PROBE)
    if "login_path" not in env:
        raise HarnessError("the login-shell probe printed no PATH (the login shell did not run the script)")
    if first(env, "module_cmd") != "yes":
        return Verdict("warn", "no `module` command in a login shell (no Lmod or Environment Modules)", 0)
    version = first(env, "module_version")
    avail = env.get("module_avail") or []
    rc = first(env, "module_rc")
    evidence = {"module_version": version or None, "module_rc": rc or None, "avail": avail[:200]}
    if not rc.isdigit():
        raise HarnessError("the login-shell probe did not report `module -t avail`'s exit status")
    text = " ".join(avail)
    if rc != "0" or "Lmod has detected the following error" in text or text.startswith("ERROR"):
        return Verdict("fail", f"`module -t avail` fails in a login shell: {text[:200] or 'status ' + rc}",
                       0, evidence=evidence)
    names = module_names(avail)
    gpu = [n for n in names if n.lower().split("/")[0].startswith(GPU_STACK_MODULES)]
    evidence.update(modules=names[:200], gpu_stack_modules=gpu)
    kind = "Lmod" if "Lua" in version else ("Environment Modules" if "Modules Release" in version else "modules")
    if not gpu:
        return Verdict("warn", f"{kind} works but offers no CUDA, NCCL, HPC-X or HPC SDK module "
                       f"({len(names)} modules)", len(names), evidence=evidence)
    return Verdict("pass", f"{kind}: {', '.join(gpu[:6])}{' …' if len(gpu) > 6 else ''}", len(names),
                   evidence=evidence)


@check("audit.software.batch_path")
def batch_path(ctx: Context) -> Verdict:
    _require_gpu(ctx)
    env = _data(ctx, BATCH_PROBE)
    if "login_path" not in env:
        raise HarnessError("the login-shell probe printed no PATH (the login shell did not run the script)")
    if "batch_skipped" in env:
        raise Skip(f"the batch step was not started: {first(env, 'batch_skipped')}")
    if "batch_rc" not in env:
        raise Skip("srun is not installed on this node: no batch environment to compare")
    rc, errors = first(env, "batch_rc"), env.get("batch_err") or []
    text = " ".join(errors)
    evidence = {"login_nvcc": first(env, "login_nvcc") or None, "batch_nvcc": first(env, "batch_nvcc") or None,
                "login_mpirun": first(env, "login_mpirun") or None,
                "batch_mpirun": first(env, "batch_mpirun") or None,
                "nvcc_release": first(env, "login_nvcc_release") or None, "batch_rc": rc, "batch_err": errors[-5:]}
    if rc == "124":
        raise HarnessError("the batch step did not finish within 30 s")
    if rc != "0" or "batch_path" not in env:
        if any(sign in text for sign in NOT_SLURM_SIGNS):
            raise Skip(f"the Slurm client on {ctx.subject} has no configuration: not a Slurm node")
        raise Skip(f"a batch step could not start on this node (status {rc}): {text[:200] or 'no output'}")
    lost = [tool for tool in ("nvcc", "mpirun") if first(env, f"login_{tool}") and not first(env, f"batch_{tool}")]
    if lost:
        return Verdict("fail", f"{' and '.join(lost)} found in a login shell but not in a batch step "
                       f"(batch PATH {first(env, 'batch_path')[:160]})", "missing_in_batch", evidence=evidence)
    if not first(env, "login_nvcc"):
        return Verdict("warn", "no nvcc in a login shell or a batch step: no CUDA toolkit on the host "
                       "(only containers can build CUDA code)", "absent", evidence=evidence)
    moved = [tool for tool in ("nvcc", "mpirun")
             if first(env, f"batch_{tool}") and first(env, f"batch_{tool}") != first(env, f"login_{tool}")]
    if moved:
        return Verdict("warn", "a batch step finds another " + ", ".join(
            f"{tool} ({first(env, f'batch_{tool}')} instead of {first(env, f'login_{tool}')})" for tool in moved),
            "differs", evidence=evidence)
    release = first(env, "login_nvcc_release")
    return Verdict("pass", f"nvcc {release or '(release unread)'} at {first(env, 'login_nvcc')} in both a login "
                   "shell and a batch step", "same", evidence=evidence)


def _slurm_containers(ctx: Context) -> dict[str, list[str]]:
    data = _data(ctx, CONTAINERS_PROBE)
    if "userns_max" not in data:
        raise HarnessError("the container probe ended early (no user-namespace line)")
    return data


@check("audit.software.pyxis")
def pyxis(ctx: Context) -> Verdict:
    data = _slurm_containers(ctx)
    if first(data, "srun") != "yes":
        raise Skip("srun is not installed on this node")
    flag, plugstack = first(data, "pyxis_flag"), data.get("plugstack") or []
    evidence = {"srun_help": flag or None, "plugstack": plugstack}
    if flag:
        return Verdict("pass", "srun offers --container-image (Pyxis loaded); no container was started", "loaded",
                       evidence=evidence)
    if plugstack:
        return Verdict("fail", f"plugstack.conf names Pyxis ({plugstack[0][:120]}) but srun does not load it",
                       "broken", evidence=evidence)
    return Verdict("warn", "Pyxis is not installed: `srun --container-image` is unavailable", "absent",
                   evidence=evidence)


def userns_blocked(data: dict[str, list[str]], runtime: str) -> str | None:
    """Why ``runtime``'s rootless containers cannot start: AppArmor restricting unprivileged user namespaces
    (kernel.apparmor_restrict_unprivileged_userns=1, Ubuntu 24.04's default) with no AppArmor profile that lets
    the runtime create them (/etc/apparmor.d/<runtime>); None when nothing blocks them."""
    if first(data, "apparmor_userns") != "1":
        return None
    if any(PurePosixPath(path).name.startswith(runtime) for path in data.get("apparmor_profile") or []):
        return None
    return (f"AppArmor restricts unprivileged user namespaces (kernel.apparmor_restrict_unprivileged_userns=1) "
            f"and no /etc/apparmor.d/{runtime} profile allows {runtime} to create them: rootless containers fail "
            f"with 'Permission denied'")


@check("audit.software.enroot")
def enroot(ctx: Context) -> Verdict:
    data = _slurm_containers(ctx)
    rc, lines = first(data, "enroot_rc"), data.get("enroot_version") or []
    userns = {key: first(data, key) or None for key in ("userns_max", "userns_clone", "apparmor_userns")}
    evidence = {"enroot_rc": rc or None, "enroot_version": lines, "config": data.get("enroot_conf") or [],
                "mounts": data.get("enroot_mount") or [], **userns,
                "import": f"tried by {IMPORT_CHECK}"}
    if not rc:
        return Verdict("warn", "enroot is not installed (Pyxis containers cannot run)", None, evidence=evidence)
    if rc != "0":
        return Verdict("fail", f"`enroot version` fails (status {rc}): {' '.join(lines)[:160]}", None,
                       evidence=evidence)
    version = enroot_version(lines)
    if userns["userns_max"] == "0" or userns["userns_clone"] == "0":
        return Verdict("fail", f"enroot {version or '?'} is installed but unprivileged user namespaces are disabled "
                       f"(user.max_user_namespaces={userns['userns_max']}, "
                       f"kernel.unprivileged_userns_clone={userns['userns_clone']})", version, evidence=evidence)
    if version is None:
        return Verdict("warn", f"enroot runs but its version is unreadable: {' '.join(lines)[:120]!r}", "unknown",
                       evidence=evidence)
    if not userns["userns_max"]:
        return Verdict("warn", f"enroot {version}: could not read user.max_user_namespaces", version,
                       evidence=evidence)
    blocked = userns_blocked(data, "enroot")
    if blocked:
        return Verdict("fail", f"enroot {version} is installed, but {blocked}", version, evidence=evidence)
    return Verdict("pass", f"enroot {version}, user namespaces allowed (an image import is {IMPORT_CHECK})",
                   version, evidence=evidence)


def _size(nbytes: int) -> str:
    return f"{nbytes / 2**20:.1f} MiB" if nbytes >= 2**20 else f"{nbytes / 1024:.0f} KiB"


def import_problem(lines: list[str]) -> str | None:
    """What an ``enroot import`` failure's messages say went wrong, in a few words; None when unrecognised.

    Enroot 3.x reports a registry's HTTP error as ``[ERROR] URL <url> returned error code: 429 Too Many
    Requests``, a missing dependency as ``[ERROR] Command not found: mksquashfs``; curl's own errors
    (``curl: (6) Could not resolve host: registry-1.docker.io``) come through as curl prints them.
    """
    text = "\n".join(lines)
    http = re.search(r"returned error code: (\d{3})", text)
    if http:
        code = int(http.group(1))
        if code == 429:
            return "the registry's pull rate limit (HTTP 429): anonymous pulls are throttled"
        if code in (401, 403):
            return f"the registry refused access (HTTP {code}): credentials missing or wrong"
        if code == 404:
            return "the image is not in the registry (HTTP 404)"
        if code >= 500:
            return f"the registry failed (HTTP {code})"
        return f"the registry answered HTTP {code}"
    if re.search(r"curl: \(6\)|Could not resolve host", text):
        return "the registry is unreachable: its name does not resolve (DNS, or a proxy enroot.conf lacks)"
    if re.search(r"curl: \((7|28)\)|Failed to connect|Connection timed out|Operation timed out", text):
        return "the registry is unreachable: no connection (firewall, or a proxy enroot.conf lacks)"
    if re.search(r"curl: \((35|51|58|60|77)\)|SSL certificate problem|SSL_ERROR", text):
        return "TLS to the registry failed (a certificate the node does not trust, or an intercepting proxy)"
    if "No space left on device" in text:
        return "no space left on device"
    missing = re.search(r"Command not found: (\S+)|\b(mksquashfs|unsquashfs)\b: (?:command )?not found", text)
    if missing:
        tool = missing.group(1) or missing.group(2)
        if tool in ("mksquashfs", "unsquashfs"):
            return f"squashfs-tools are missing ({tool} not found)"
        return f"{tool}, which enroot needs, is not installed"
    if re.search(r"Operation not permitted|Permission denied|failed to set capabilities", text):
        return "permission denied (enroot+caps missing, user namespaces restricted, or an enroot path not writable)"
    if "Could not process JSON input" in text:
        return "enroot could not read the registry's answer (jq failed on it)"
    return None


@check(IMPORT_CHECK)
def enroot_import(ctx: Context) -> Verdict:
    data = _data(ctx, IMPORT_PROBE)
    if "enroot_import_skipped" in data:
        raise Skip(f"import not tried: {first(data, 'enroot_import_skipped')}")
    image = first(data, "enroot_import_image")
    if not image:
        raise HarnessError("the enroot import probe printed neither an image nor why it did not try one")
    evidence: dict = {"image": image, "workdir": first(data, "enroot_import_dir") or None}
    note = ""
    if "enroot_import_left" in data:
        evidence["left_behind"] = first(data, "enroot_import_left")
        note = f" (and the probe could not remove {evidence['left_behind']})"
    if "enroot_import_setup_error" in data:
        why = first(data, "enroot_import_setup_error")
        evidence["setup_error"] = why
        return Verdict("warn", f"import not possible: no temporary directory could be made for it: {why[:200]}",
                       None, evidence=evidence)
    rc = first(data, "enroot_import_rc")
    if not rc.isdigit():
        raise HarnessError("the enroot import probe ended before the import did (no exit status)")
    tail = [line.rstrip("\r") for line in data.get("enroot_import_out") or []]
    error = first(data, "enroot_import_error").rstrip("\r")
    seconds_text, size_text = first(data, "enroot_import_seconds"), first(data, "enroot_import_bytes").strip()
    seconds = float(seconds_text) if re.fullmatch(r"\d+\.\d+", seconds_text) else None
    size = int(size_text) if size_text.isdigit() else None
    evidence.update(rc=int(rc), seconds=seconds, squashfs=first(data, "enroot_import_sqsh") == "yes",
                    squashfs_bytes=size, error=error or None, output_tail=tail)
    took = f" in {seconds:.1f} s" if seconds is not None else ""
    command = f"`enroot import {image}`"
    if rc in ("124", "137"):
        return Verdict("warn", f"{command} did not finish within {IMPORT_TIMEOUT_S} s (stopped; last output: "
                       f"{(tail[-1] if tail else 'none')[:160]}){note}", seconds, evidence=evidence)
    if rc == "127":
        raise HarnessError(f"could not start {command}: {(tail[-1] if tail else 'not found')[:200]}")
    if "Invalid image reference" in error:
        raise HarnessError(f"clustereval_audit_enroot_image is not an image enroot can import: {error[:200]}")
    made = evidence["squashfs"] and bool(size)
    if rc == "0" and made:
        return Verdict("pass", f"enroot imported {image}{took} ({_size(size)} squashfs){note}", seconds,
                       evidence=evidence)
    if rc == "0":
        return Verdict("warn", f"{command} exited 0 but wrote no squashfs image{note}", None, evidence=evidence)
    if made and not error:
        return Verdict("warn", f"{command} wrote a {_size(size)} squashfs but exited with status {rc}: Pyxis "
                       f"treats that as a failed import{note}", None, evidence=evidence)
    line = error or (tail[-1] if tail else "no output")
    cause = import_problem([error, *tail] if error else tail)
    evidence["cause"] = cause
    return Verdict("warn", f"{command} fails (status {rc}{took})" + (f": {cause}" if cause else "") +
                   f" — {line[:200]}{note}", None, evidence=evidence)


@check("audit.software.nccl_topo_container")
def nccl_topo_container(ctx: Context) -> Verdict:
    _require_gpu(ctx)
    data = _slurm_containers(ctx)
    named = data.get("nccl_topo_conf") or []
    xml = data.get("nccl_topo_xml") or []
    readable = set(data.get("nccl_topo_readable") or [])
    mounts = data.get("enroot_mount") or []
    evidence = {"nccl_conf_topo_file": named, "etc_nccl_xml": xml, "enroot_mounts": mounts,
                "not_tried": "reading the file inside a running container"}
    absent = [path for path in named if path not in readable]
    if absent:
        return Verdict("fail", f"/etc/nccl.conf sets NCCL_TOPO_FILE={absent[0]}, which does not exist", "missing",
                       evidence=evidence)
    files = list(dict.fromkeys(named + xml))
    if not files:
        raise Skip("no NCCL topology file on this node (bare-metal nodes need none: NCCL reads the PCI "
                   "topology from sysfs)")
    if not first(data, "enroot_rc"):
        raise Skip("no enroot on this node: how containers see the topology file is not assessed")
    sources = {line.split()[0] for line in mounts if line.split()}

    def carried(path: str) -> bool:
        return any(path == src or path.startswith(src.rstrip("/") + "/") for src in sources)

    missing = [path for path in files if not carried(path)]
    if missing:
        return Verdict("warn", f"{', '.join(missing)} is not in enroot's mounts.d: containers do not see the NCCL "
                       "topology file", "not_mounted", evidence=evidence)
    return Verdict("pass", f"{', '.join(files)} mounted into enroot containers (per mounts.d; not tried in a "
                   "running container)", "mounted", evidence=evidence)


@check("audit.software.docker")
def docker(ctx: Context) -> Verdict:
    data = _slurm_containers(ctx)
    rc, lines = first(data, "docker_rc"), data.get("docker_version") or []
    runtimes = first(data, "docker_runtimes").split()
    cdi = data.get("cdi_spec") or []
    evidence = {"docker_rc": rc or None, "docker_version": lines, "runtimes": runtimes, "cdi_specs": cdi}
    if not rc:
        others = [n for n in ("enroot", "apptainer", "singularity") if f"{n}_rc" in data]
        return Verdict("warn", "docker is not installed on this worker" +
                       (f" (containers run with {', '.join(others)})" if others else ""), None, evidence=evidence)
    if rc == "124":
        raise HarnessError("`docker version` did not answer within 10 s")
    if not lines or "|" not in lines[0]:
        said = " ".join(lines)
        # The CLI printed only its complaint about the daemon's socket (Docker 24-29 wordings).
        if "permission denied" in said.lower():
            return Verdict("warn", "a Docker daemon exists but this account may not use it (not in the docker "
                           f"group?): {said[:200]}", None, evidence=evidence)
        if re.search(r"cannot connect to the docker daemon|failed to connect|is the docker daemon running", said,
                     re.IGNORECASE):
            return Verdict("warn", f"docker CLI installed but its daemon is not running: {said[:200]}", None,
                           evidence=evidence)
        raise HarnessError(f"could not read `docker version` output: {said[:160]!r}")
    client, _, server = lines[0].partition("|")
    evidence.update(client=client, server=server or None)
    if not server:
        why = " ".join(lines[1:])[:200] or f"status {rc}"
        return Verdict("warn", f"docker CLI {client} is installed but its daemon is not reachable: {why}", client,
                       evidence=evidence)
    libs = _data(ctx, LIBS_PROBE)
    if gpu_present(libs) and "nvidia" not in runtimes and not any("nvidia" in spec for spec in cdi):
        return Verdict("fail", f"docker {server} runs but has no NVIDIA runtime and no CDI spec: containers see "
                       "no GPU", server, evidence=evidence)
    return Verdict("pass", f"docker {server} (runtimes: {', '.join(runtimes) or 'none listed'})", server,
                   evidence=evidence)


@check("audit.software.apptainer")
def apptainer(ctx: Context) -> Verdict:
    data = _slurm_containers(ctx)
    found = [name for name in ("apptainer", "singularity") if f"{name}_rc" in data]
    evidence = {name: {"rc": first(data, f"{name}_rc"), "version": first(data, f"{name}_version")} for name in found}
    if not found:
        return Verdict("warn", "neither apptainer nor singularity is installed", None, evidence=evidence)
    name = found[0]
    rc, line = first(data, f"{name}_rc"), first(data, f"{name}_version")
    if rc != "0":
        return Verdict("fail", f"`{name} --version` fails (status {rc}): {line[:160]}", None, evidence=evidence)
    match = re.search(r"^(apptainer|singularity(?:-ce|-pro)?) version (\d+\.\d+\.\d+\S*)", line)
    if not match:
        return Verdict("warn", f"{name} runs but its version is unreadable: {line[:120]!r}", "unknown",
                       evidence=evidence)
    # Apptainer 1.1+ runs without its setuid starter by default: in user namespaces, like enroot.
    blocked = userns_blocked(data, name)
    evidence["apparmor_userns"] = first(data, "apparmor_userns") or None
    if blocked:
        return Verdict("fail", f"{match.group(1)} {match.group(2)} is installed, but {blocked}", match.group(2),
                       evidence=evidence)
    return Verdict("pass", f"{match.group(1)} {match.group(2)}", match.group(2), evidence=evidence)
