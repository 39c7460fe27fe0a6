"""Simulated Docker Engine programs of one installed version: ``docker`` (``--version``, ``version``
with or without ``--format``, ``info --format`` over ``.Runtimes``) and ``dockerd --version``, printed
as the real Linux builds print them (Docker's own Debian/Ubuntu packages).

The simulation installs this file as ``/usr/bin/docker`` and ``/usr/bin/dockerd`` with ``INSTALLED``
set to ``{"program", "version", "containerd", "runc", "runtimes"}``. No daemon runs: the CLI answers
for one as the engine does for root and members of the ``docker`` group; anyone else gets the
daemon socket's ``permission denied``. Standard library only.
"""

import grp
import os
import re
import sys

# Docker Engine version -> its build, read off real `docker version` / `docker --version` output
# (linux/amd64, Docker's packages): CLI and engine commits, API version, Go, build time.
ENGINES = {
    "24.0.7": {"cli_commit": "afdd53b", "engine_commit": "311b9ff", "api": "1.43", "min_api": "1.12",
               "go": "go1.20.10", "built": "Thu Oct 26 09:07:41 2023",
               "denied": ('permission denied while trying to connect to the Docker daemon socket at '
                          'unix:///var/run/docker.sock: Get "http://%2Fvar%2Frun%2Fdocker.sock/v1.24/version": '
                          'dial unix /var/run/docker.sock: connect: permission denied')},
    "29.7.2": {"cli_commit": "a7dcaa6", "engine_commit": "6a43e3d", "api": "1.55", "min_api": "1.40",
               "go": "go1.26.5", "built": "Wed Aug  5 18:28:53 2026",
               "denied": "permission denied while trying to connect to the docker API at unix:///var/run/docker.sock"},
}
# containerd.io version -> (as `docker version` names it, its commit), from the same captures.
CONTAINERD = {
    "1.6.25": ("1.6.25", "d8f198a4ed8892c764191ef7b3b06d8a2eeb5c7f"),
    "2.3.4": ("v2.3.4", "db8809540e1a7a9da5d518876894933ff55692ab"),
}
DOCKER_INIT = ("0.19.0", "de40ad0")
INSTALLED = None


def _field(section, name):
    return {"Version": section["version"], "APIVersion": section["api"], "GitCommit": section["commit"],
            "GoVersion": section["go"], "Os": "linux", "Arch": "amd64", "BuildTime": section["built"]}.get(name)


def _sections(cfg):
    engine = ENGINES[cfg["version"]]
    common = {"version": cfg["version"], "api": engine["api"], "go": engine["go"], "built": engine["built"]}
    return {"Client": {**common, "commit": engine["cli_commit"]},
            "Server": {**common, "commit": engine["engine_commit"]}}


def daemon_reachable():
    """Whether this user may use /var/run/docker.sock (root:docker, mode 660)."""
    if os.geteuid() == 0:
        return True
    try:
        return grp.getgrnam("docker").gr_gid in os.getgroups()
    except KeyError:
        return False


def version_text(cfg, reachable):
    engine = ENGINES[cfg["version"]]
    s = _sections(cfg)["Client"]
    out = ["Client: Docker Engine - Community", f" Version:           {s['version']}",
           f" API version:       {s['api']}", f" Go version:        {s['go']}", f" Git commit:        {s['commit']}",
           f" Built:             {s['built']}", " OS/Arch:           linux/amd64", " Context:           default"]
    if not reachable:
        return "\n".join(out) + "\n"
    containerd, commit = CONTAINERD[cfg["containerd"]]
    runc_version, runc_commit = cfg["runc"]
    out += ["", "Server: Docker Engine - Community", " Engine:", f"  Version:          {cfg['version']}",
            f"  API version:      {engine['api']} (minimum version {engine['min_api']})",
            f"  Go version:       {engine['go']}", f"  Git commit:       {engine['engine_commit']}",
            f"  Built:            {engine['built']}", "  OS/Arch:          linux/amd64", "  Experimental:     false",
            " containerd:", f"  Version:          {containerd}", f"  GitCommit:        {commit}",
            " runc:", f"  Version:          {runc_version}", f"  GitCommit:        {runc_commit}",
            " docker-init:", f"  Version:          {DOCKER_INIT[0]}", f"  GitCommit:        {DOCKER_INIT[1]}"]
    return "\n".join(out) + "\n"


def render_template(template, sections):
    """The ``{{.Client.X}}`` / ``{{.Server.X}}`` fields of a Go template (all a version probe asks for)."""
    def value(match):
        found = _field(sections[match.group(1)], match.group(2))
        return "<no value>" if found is None else found
    return re.sub(r"\{\{\s*\.(Client|Server)\.(\w+)\s*\}\}", value, template)


def _format(argv):
    for k, arg in enumerate(argv):
        if arg in ("--format", "-f") and k + 1 < len(argv):
            return argv[k + 1]
        if arg.startswith("--format="):
            return arg.split("=", 1)[1]
    return None


def docker(cfg, argv):
    engine = ENGINES[cfg["version"]]
    if argv[:1] in (["--version"], ["-v"]):
        sys.stdout.write(f"Docker version {cfg['version']}, build {engine['cli_commit']}\n")
        return 0
    reachable = daemon_reachable()
    template = _format(argv[1:])
    if argv[:1] == ["version"]:
        if template is None:
            sys.stdout.write(version_text(cfg, reachable))
        elif reachable:
            sys.stdout.write(render_template(template, _sections(cfg)) + "\n")
        if not reachable:
            sys.stderr.write(engine["denied"] + "\n")
            return 1
        return 0
    if argv[:1] == ["info"] and template is not None:
        if not reachable:
            sys.stderr.write(engine["denied"] + "\n")
            return 1
        if re.fullmatch(r"\{\{\s*range \$k, \$v := \.Runtimes\s*\}\}\{\{\s*\$k\s*\}\} \{\{\s*end\s*\}\}", template):
            sys.stdout.write("".join(f"{name} " for name in sorted(cfg["runtimes"])) + "\n")
            return 0
    sys.stderr.write(f"docker {' '.join(argv[:1])}: not available on the simulated node\n")
    return 1


def main(argv):
    cfg = INSTALLED
    if cfg is None or cfg["version"] not in ENGINES:
        sys.stderr.write("docker: the simulation installed no Docker Engine here\n")
        return 127
    if cfg["program"] == "dockerd":
        if argv[:1] in (["--version"], ["-v"]):
            sys.stdout.write(f"Docker version {cfg['version']}, build {ENGINES[cfg['version']]['engine_commit']}\n")
            return 0
        sys.stderr.write("dockerd: the simulated node runs no Docker daemon\n")
        return 1
    return docker(cfg, argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
