"""The user-facing software stack of a simulated node: NCCL library, CUDA toolkits, Lmod with modulefiles,
Enroot and Apptainer, and the NCCL topology configuration.

Settings (``software:`` in a profile), healthy defaults in code: ``nccl_version`` ("2.21.5"; null for
none), ``lmod`` (true), ``enroot`` (true), ``apptainer`` (true), ``nccl_topo_file`` (null: bare metal
needs none), ``slurm_export_env_none`` (false), and the CUDA toolkits: ``cuda_toolkit`` (a mapping or a
list of them: ``version`` ("12.4" = its newest verified update, or "12.4.131"), ``path`` of nvcc (default
``/usr/local/cuda-<release>/bin/nvcc``; ``/usr/bin/nvcc`` is where Debian/Ubuntu's nvidia-cuda-toolkit
puts it), ``login_path`` (true: /etc/profile.d puts it on login shells' PATH), ``batch_path`` (default
``login_path``; where it differs, a Slurm TaskProlog fragment in /etc/slurm/task_prolog.d adds or removes
it for job steps), ``cuda_symlink`` (``/usr/local/cuda`` points at it; default for the first
``/usr/local/cuda-*`` one); ``false`` or ``[]``: no toolkit). Without it, one toolkit of
``cuda_toolkit_version`` (default 13.1, the security minimum) in /usr/local/cuda-<release>. A version
with no real banner in ``shims/nvcc.py`` is refused, naming the known ones. Docker Engine and runc
are the software_containers area's (``software.docker``, ``software.runc``).

Faults override settings: ``software_nccl_version``, ``software_enroot``, ``software_lmod``,
``software_nccl_topo_file`` (a path /etc/nccl.conf names but which is not there),
``software_slurm_export_env_none`` (login profile exports SLURM_EXPORT_ENV=NONE, so batch steps lose the
login PATH) and ``software_enroot_import`` (``enroot import`` fails: ``rate_limited``, also ``fail`` or
true, is Docker Hub's HTTP 429; ``unauthorized``, ``unreachable`` or ``no_space``; the enroot shim reads
it from ``/etc/clustereval-sim/enroot.json``).

Tools are placed as files of the node's own overlay (``/usr/local``, ``/opt``) so nodes can differ;
their code is the standalone shims in ``sim/shims/`` (enroot, apptainer, lmod, nvcc).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from clustereval.sim.keys import known_mapping
from clustereval.sim.overlays._files import shim_module, shim_text, symlink

FAULTS = {"software_nccl_version", "software_enroot", "software_lmod", "software_nccl_topo_file",
          "software_slurm_export_env_none", "software_enroot_import"}
ENROOT_IMPORT_FAULTS = {"rate_limited", "unauthorized", "unreachable", "no_space"}
SOFTWARE_KEYS = {"nccl_version", "lmod", "enroot", "apptainer", "nccl_topo_file", "slurm_export_env_none",
                 "cuda_toolkit_version", "cuda_toolkit", "docker", "runc", "nsight_compute"}
# The standalone Nsight Compute installer's default location (the audit looks there and in the toolkit's bin).
NSIGHT_COMPUTE_DIR = "/opt/nvidia/nsight-compute"
TOOLKIT_KEYS = {"version", "path", "login_path", "batch_path", "cuda_symlink"}
# Directories every PATH of the node holds (the sshd SetEnv PATH): a toolkit there is on the login and
# the batch PATH whatever a profile says.
SYSTEM_BIN = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")
DEFAULT_TOOLKIT = "13.1"  # the security minimum (baselines/security_minimums.yml)
# Site-wide Slurm TaskProlog fragments (run for every task; `export`/`unset` lines change its environment).
TASK_PROLOG_DIR = "/etc/slurm/task_prolog.d"


def _setting(settings: dict[str, Any], key: str, default: Any) -> Any:
    faults = settings.get("faults") or {}
    if f"software_{key}" in faults:
        return faults[f"software_{key}"]
    return (settings.get("software") or {}).get(key, default)


def toolkits(settings: dict[str, Any]) -> list[dict[str, Any]]:
    """The CUDA toolkits the node has installed, each ``{version, release, path, bin, login_path, batch_path,
    cuda_symlink}``: ``software.cuda_toolkit`` (one mapping or a list; ``[]``/``false``: none), else one
    toolkit of ``software.cuda_toolkit_version`` in ``/usr/local/cuda-<release>``. Raises ValueError naming
    the key for an unknown key or a version without a verified banner."""
    given = _setting(settings, "cuda_toolkit", None)
    if given is None:
        given = [{"version": _setting(settings, "cuda_toolkit_version", DEFAULT_TOOLKIT)}]
    elif given is False:
        given = []
    elif isinstance(given, dict):
        given = [given]
    if not isinstance(given, list):
        raise ValueError("software.cuda_toolkit must be a mapping, a list of mappings or false")
    banners = shim_module("nvcc.py")
    out = []
    for k, entry in enumerate(given):
        where = f"software.cuda_toolkit[{k}]"
        known_mapping(where, entry, TOOLKIT_KEYS, required="version")
        version = banners.resolve(entry["version"])
        if version is None:
            raise ValueError(f"{where}.version {entry['version']!r} has no verified nvcc banner; known: "
                             f"{', '.join(sorted(banners.BANNERS, key=banners._key))} (or their major.minor)")
        release = version.rsplit(".", 1)[0]
        path = str(entry.get("path") or f"/usr/local/cuda-{release}/bin/nvcc")
        if not path.startswith("/") or not path.endswith("/nvcc"):
            raise ValueError(f"{where}.path {path!r} must be an absolute path ending in /nvcc")
        bin_dir = path.rsplit("/", 1)[0]
        login = bool(entry.get("login_path", True))
        batch = bool(entry.get("batch_path", login))
        if bin_dir in SYSTEM_BIN and not (login and batch):
            raise ValueError(f"{where}: {bin_dir} is on every PATH of the node; login_path/batch_path "
                             "cannot be false for it")
        home = bin_dir.removesuffix("/bin")
        out.append({"version": version, "release": release, "path": path, "bin": bin_dir,
                    "login_path": login, "batch_path": batch,
                    "cuda_symlink": bool(entry.get("cuda_symlink", k == 0 and home.startswith("/usr/local/cuda-")))})
    if sum(t["cuda_symlink"] for t in out) > 1:
        raise ValueError("software.cuda_toolkit: only one toolkit can be /usr/local/cuda (cuda_symlink)")
    return out


def nsight_compute(settings: dict[str, Any]) -> str | None:
    """The version of the standalone Nsight Compute ``software.nsight_compute: {version}`` installs, or None;
    one without a real ``ncu --version`` banner in ``shims/ncu.py`` is refused, naming the known ones."""
    given = _setting(settings, "nsight_compute", None)
    if not given:
        return None
    if not isinstance(given, dict) or set(given) != {"version"}:
        raise ValueError("software.nsight_compute must be a mapping with the one key version")
    known = shim_module("ncu.py").BANNERS
    version = str(given["version"])
    if version not in known:
        raise ValueError(f"software.nsight_compute.version {version!r} has no verified ncu banner; known: "
                         f"{', '.join(known)}")
    return version


def validate_settings(settings: dict[str, Any]) -> None:
    """Refuse unknown ``software:`` keys and toolkits the simulation cannot print faithfully."""
    known_mapping("software", settings.get("software") or {}, SOFTWARE_KEYS)
    toolkits(settings)
    nsight_compute(settings)


def _path_prolog(tools: list[dict[str, Any]]) -> str:
    """A TaskProlog fragment giving batch steps the PATH the profile says where it differs from the login
    shell's (which a step inherits from srun)."""
    lines = ["#!/bin/sh", "# CUDA toolkits on the batch PATH that the login PATH lacks, and the reverse.",
             'p=":$PATH:"']
    for tool in tools:
        if tool["batch_path"] and not tool["login_path"]:
            lines.append(f'case $p in *":{tool["bin"]}:"*) ;; *) p=":{tool["bin"]}$p";; esac')
        elif tool["login_path"] and not tool["batch_path"]:
            lines.append(f'while case $p in *":{tool["bin"]}:"*) true;; *) false;; esac; do '
                         f'p="${{p%%:{tool["bin"]}:*}}:${{p#*:{tool["bin"]}:}}"; done')
    lines += ['p=${p#:}; echo "export PATH=${p%:}"', ""]
    return "\n".join(lines)


def render_toolkits(tools: list[dict[str, Any]], state: dict[str, Any], tree) -> list[str]:
    """Install the node's CUDA toolkits; returns the login profile lines that put them on the PATH."""
    for tool in tools:
        tree.file(tool["path"], shim_text("nvcc.py", INSTALLED=tool["version"]), 0o755)
        if tool["cuda_symlink"]:
            symlink(tree, str(state.get("node", "")), "/usr/local/cuda", tool["bin"].removesuffix("/bin"))
    # Tools of the machine the simulation runs on must not show through as the node's own.
    own = {t["bin"].removesuffix("/bin") for t in tools} | ({"/usr/local/cuda"} if any(
        t["cuda_symlink"] for t in tools) else set())
    host_toolkits = [str(p) for p in Path("/usr/local").glob("cuda*") if str(p) not in own]
    for leaked in ("/usr/local/bin/nvcc", "/usr/local/bin/docker", *host_toolkits):
        if leaked not in tree.files:
            tree.whiteout(leaked)
    if any(t["login_path"] != t["batch_path"] for t in tools):
        tree.file(f"{TASK_PROLOG_DIR}/cuda.sh", _path_prolog(tools), 0o755)
    return [f'export PATH="{t["bin"]}:$PATH"' for t in tools
            if t["login_path"] and t["bin"] not in SYSTEM_BIN]


def render(settings: dict[str, Any], state: dict[str, Any], tree) -> None:
    gpus = bool(state.get("gpus"))
    tools = toolkits(settings) if gpus else []
    nccl = _setting(settings, "nccl_version", "2.21.5")
    if gpus and nccl:
        tree.file(f"/usr/lib/x86_64-linux-gnu/libnccl.so.{nccl}", "simulated NCCL library\n")
    profile = render_toolkits(tools, state, tree)
    ncu = nsight_compute(settings) if gpus else None
    if ncu:
        tree.file(f"{NSIGHT_COMPUTE_DIR}/{ncu.rsplit('.', 1)[0]}/ncu", shim_text("ncu.py", INSTALLED=ncu), 0o755)
    if _setting(settings, "slurm_export_env_none", False):
        profile.append("export SLURM_EXPORT_ENV=NONE")
    if profile:
        tree.file("/etc/profile.d/cuda.sh", "\n".join(profile) + "\n")
    if _setting(settings, "lmod", True):
        tree.file("/opt/lmod/libexec/lmod", shim_text("lmod.py"), 0o755)
        tree.file("/etc/profile.d/z00_lmod.sh", 'export LMOD_CMD=/opt/lmod/libexec/lmod\n'
                  'export MODULEPATH=/opt/modulefiles\n'
                  'module() { eval "$($LMOD_CMD bash "$@")"; }\n')
        modulefiles = {"hpcx": "2.19"}
        if tools:
            modulefiles["cuda"] = tools[0]["release"]
        if nccl:
            modulefiles["nccl"] = str(nccl)
        for name, version in modulefiles.items():
            tree.file(f"/opt/modulefiles/{name}/{version}.lua", f'whatis("{name} {version}")\n')
    if _setting(settings, "enroot", True):
        tree.file("/usr/local/bin/enroot", shim_text("enroot.py"), 0o755)
        tree.file("/etc/enroot/enroot.conf", "ENROOT_RUNTIME_PATH /run/enroot/user-$(id -u)\n"
                  "ENROOT_CACHE_PATH /var/lib/enroot/cache/group-$(id -g)\n"
                  "ENROOT_DATA_PATH /tmp/enroot-data/user-$(id -u)\n"
                  "ENROOT_SQUASH_OPTIONS -noI -noD -noF -noX -no-duplicates\n")
        tree.file("/etc/enroot/mounts.d/10-system.fstab",
                  "/etc/hosts /etc/hosts none x-create=file,bind,ro,nosuid,nodev,noexec,private\n"
                  "/etc/nccl /etc/nccl none x-create=dir,bind,ro,nosuid,nodev,noexec,nofail,private\n")
        broken = _setting(settings, "enroot_import", None)
        if broken in (True, "fail"):
            broken = "rate_limited"
        if broken:
            if broken not in ENROOT_IMPORT_FAULTS:
                raise ValueError(f"software_enroot_import: {broken!r} is none of "
                                 f"{', '.join(sorted(ENROOT_IMPORT_FAULTS))} (or fail/true)")
            tree.file("/etc/clustereval-sim/enroot.json", json.dumps({"import": broken}) + "\n")
    if _setting(settings, "apptainer", True):
        tree.file("/usr/local/bin/apptainer", shim_text("apptainer.py"), 0o755)
    topo = _setting(settings, "nccl_topo_file", None)
    if gpus and topo:
        tree.file("/etc/nccl.conf", f"NCCL_TOPO_FILE={topo}\n")
