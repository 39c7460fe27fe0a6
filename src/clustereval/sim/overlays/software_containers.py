"""Docker Engine, containerd and runc as a simulated node has them installed.

Settings (``software:`` in a profile, per node or cluster-wide); unset, the node has none (as the
reference): ``docker: {version, containerd, runc, nvidia_runtime}`` installs Docker's Debian packages
(docker-ce, docker-ce-cli, containerd.io) with ``/usr/bin/docker``, ``dockerd``, ``runc`` and the ``docker``
group; ``containerd`` and ``runc`` default to the build that came with that engine, ``nvidia_runtime``
(default true: ``nvidia-ctk runtime configure`` ran) adds ``nvidia`` to the daemon's runtimes.
``runc: {version, path}`` installs a runc of its own (an upstream release binary, default
``/usr/local/sbin/runc``) where Docker is absent or beside it. Versions are those the docker and runc
shims hold real output for; any other is refused, naming them.

The packages are added to the node's dpkg database (``/var/lib/dpkg/status``; this area renders after
the fleet area's drift, so both apply), where the versions audit reads them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from clustereval.sim.keys import known_mapping
from clustereval.sim.overlays._files import append_lines, shim_module, shim_text
from clustereval.sim.overlays.accounts import evaluator

DOCKER_KEYS = {"version", "containerd", "runc", "nvidia_runtime"}
RUNC_KEYS = {"version", "path"}
# containerd.io (with its runc) each engine version came with in the captures the shims hold.
ENGINE_CONTAINERD = {"24.0.7": "1.6.25", "29.7.2": "2.3.4"}
CONTAINERD_RUNC = {"1.6.25": "1.1.10", "2.3.4": "1.4.3"}
STATUS = "/var/lib/dpkg/status"
DOCKER_GROUP_GID = 989


def _known(kind: str, version: Any, table: dict[str, Any]) -> str:
    version = str(version)
    if version not in table:
        raise ValueError(f"software.{kind} {version!r} has no real output to simulate; known: {', '.join(table)}")
    return version


def installs(settings: dict[str, Any]) -> dict[str, Any]:
    """``{"docker": {...} | None, "runc": {...} | None}`` resolved from the profile (ValueError naming the key)."""
    software = settings.get("software") or {}
    out: dict[str, Any] = {"docker": None, "runc": None}
    docker = software.get("docker")
    if docker:
        known_mapping("software.docker", docker, DOCKER_KEYS, required="version")
        engines = shim_module("docker.py")
        version = _known("docker.version", docker["version"], engines.ENGINES)
        containerd = _known("docker.containerd", docker.get("containerd") or ENGINE_CONTAINERD[version],
                            engines.CONTAINERD)
        runc = _known("docker.runc", docker.get("runc") or CONTAINERD_RUNC.get(containerd, ""),
                      shim_module("runc.py").BUILDS)
        out["docker"] = {"version": version, "containerd": containerd, "runc": runc,
                         "nvidia_runtime": bool(docker.get("nvidia_runtime", True))}
    runc = software.get("runc")
    if runc:
        known_mapping("software.runc", runc, RUNC_KEYS, required="version")
        out["runc"] = {"version": _known("runc.version", runc["version"], shim_module("runc.py").BUILDS),
                       "path": str(runc.get("path") or "/usr/local/sbin/runc")}
    return out


def validate_settings(settings: dict[str, Any]) -> None:
    installs(settings)


def _stanza(package: str, version: str, summary: str, size: int) -> str:
    return (f"Package: {package}\nStatus: install ok installed\nPriority: optional\nSection: admin\n"
            f"Installed-Size: {size}\nMaintainer: Docker <support@docker.com>\nArchitecture: amd64\n"
            f"Version: {version}\nDescription: {summary}\n")


def render(settings: dict[str, Any], state: dict[str, Any], tree) -> None:
    found = installs(settings)
    docker, runc = found["docker"], found["runc"]
    if runc:
        tree.file(runc["path"], shim_text("runc.py", INSTALLED=runc["version"]), 0o755)
    if not docker:
        return
    commit = shim_module("runc.py").BUILDS[docker["runc"]][0]
    runtimes = ["io.containerd.runc.v2", "runc"] + (["nvidia"] if docker["nvidia_runtime"] else [])
    for program in ("docker", "dockerd"):
        config = {"program": program, "version": docker["version"], "containerd": docker["containerd"],
                  "runc": [docker["runc"], commit], "runtimes": runtimes}
        tree.file(f"/usr/bin/{program}", shim_text("docker.py", INSTALLED=config), 0o755)
    tree.file("/usr/bin/runc", shim_text("runc.py", INSTALLED=docker["runc"]), 0o755)
    account = evaluator(settings)
    members = account["user"] if account and "docker" in account["groups"] else ""
    append_lines(tree, "/etc/group", [f"docker:x:{DOCKER_GROUP_GID}:{members}"])
    if Path(STATUS).is_file():
        engine = f"5:{docker['version']}-1~debian.12~bookworm"
        append_lines(tree, STATUS, ["", _stanza("docker-ce", engine, "Docker: the open-source application "
                                                "container engine", 99000).rstrip("\n"),
                                    "", _stanza("docker-ce-cli", engine, "Docker CLI: the open-source "
                                                "application container engine", 39000).rstrip("\n"),
                                    "", _stanza("containerd.io", f"{docker['containerd']}-1", "An open and "
                                                "reliable container runtime", 120000).rstrip("\n")])
