"""The user-facing software stack of a simulated node: NCCL library, CUDA toolkit on the login PATH,
Lmod with modulefiles, Enroot and Apptainer, and the NCCL topology configuration.

Settings (``software:`` in a profile), healthy defaults in code: ``nccl_version`` ("2.21.5"; null for
none), ``lmod`` (true), ``enroot`` (true), ``apptainer`` (true), ``nccl_topo_file`` (null: bare metal
needs none), ``slurm_export_env_none`` (false). Faults override them: ``software_nccl_version``,
``software_enroot``, ``software_lmod``, ``software_nccl_topo_file`` (a path /etc/nccl.conf names but
which is not there), ``software_slurm_export_env_none`` (login profile exports
SLURM_EXPORT_ENV=NONE, so batch steps lose the login PATH) and ``software_enroot_import`` (``enroot
import`` fails: ``rate_limited``, also ``fail`` or true, is Docker Hub's HTTP 429; ``unauthorized``,
``unreachable`` or ``no_space``; the enroot shim reads it from ``/etc/clustereval-sim/enroot.json``).

Tools are placed as files of the node's own overlay (``/usr/local``, ``/opt``) so nodes can differ;
their code is the standalone shims in ``sim/shims/`` (enroot, apptainer, lmod) and the CUDA toolkit's
``nvcc`` shim.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

FAULTS = {"software_nccl_version", "software_enroot", "software_lmod", "software_nccl_topo_file",
          "software_slurm_export_env_none", "software_enroot_import"}
ENROOT_IMPORT_FAULTS = {"rate_limited", "unauthorized", "unreachable", "no_space"}
SHIM_DIR = Path(__file__).resolve().parent.parent / "shims"
CUDA_HOME = "/usr/local/cuda-{cuda}"


def _setting(settings: dict[str, Any], key: str, default: Any) -> Any:
    faults = settings.get("faults") or {}
    if f"software_{key}" in faults:
        return faults[f"software_{key}"]
    return (settings.get("software") or {}).get(key, default)


def _shim(name: str) -> str:
    body = (SHIM_DIR / name).read_text()
    if body.startswith("#!"):
        body = body.split("\n", 1)[1]
    return "#!/usr/bin/python3 -IS\n" + body  # standard library only: no site-packages to scan


def render(settings: dict[str, Any], state: dict[str, Any], tree) -> None:
    gpus = bool(state.get("gpus"))
    # The toolkit is not the driver's CUDA cap: a profile names it apart (default: the security minimum).
    cuda = str(_setting(settings, "cuda_toolkit_version", "13.1"))
    nccl = _setting(settings, "nccl_version", "2.21.5")
    if gpus and nccl:
        tree.file(f"/usr/lib/x86_64-linux-gnu/libnccl.so.{nccl}", "simulated NCCL library\n")
    profile = []
    if gpus:
        home = CUDA_HOME.format(cuda=cuda)
        tree.file(f"{home}/bin/nvcc", _shim("nvcc.py"), 0o755)
    # Tools of the machine the simulation runs on must not show through as the node's own.
    own_home = CUDA_HOME.format(cuda=cuda) if gpus else None
    host_toolkits = [str(p) for p in Path("/usr/local").glob("cuda*") if str(p) != own_home]
    for leaked in ("/usr/local/bin/nvcc", "/usr/local/bin/docker", *host_toolkits):
        tree.whiteout(leaked)
        profile.append(f'export PATH="{home}/bin:$PATH"')
    if _setting(settings, "slurm_export_env_none", False):
        profile.append("export SLURM_EXPORT_ENV=NONE")
    if profile:
        tree.file("/etc/profile.d/cuda.sh", "\n".join(profile) + "\n")
    if _setting(settings, "lmod", True):
        tree.file("/opt/lmod/libexec/lmod", _shim("lmod.py"), 0o755)
        tree.file("/etc/profile.d/z00_lmod.sh", 'export LMOD_CMD=/opt/lmod/libexec/lmod\n'
                  'export MODULEPATH=/opt/modulefiles\n'
                  'module() { eval "$($LMOD_CMD bash "$@")"; }\n')
        modulefiles = {"cuda": cuda, "hpcx": "2.19"}
        if nccl:
            modulefiles["nccl"] = str(nccl)
        for name, version in modulefiles.items():
            tree.file(f"/opt/modulefiles/{name}/{version}.lua", f'whatis("{name} {version}")\n')
    if _setting(settings, "enroot", True):
        tree.file("/usr/local/bin/enroot", _shim("enroot.py"), 0o755)
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
        tree.file("/usr/local/bin/apptainer", _shim("apptainer.py"), 0o755)
    topo = _setting(settings, "nccl_topo_file", None)
    if gpus and topo:
        tree.file("/etc/nccl.conf", f"NCCL_TOPO_FILE={topo}\n")
