"""Simulated ``runc --version`` (``-v``) of one installed build, as the real binary prints it; nothing
else of runc is simulated. The simulation installs this file as ``/usr/bin/runc`` with ``INSTALLED``
set to the version. Standard library only."""

import sys

# runc version -> (commit, OCI runtime spec, Go, libseccomp), read off real `runc --version` output:
# 1.1.10 as Docker's containerd.io 1.6.25 package ships it (linked against the system libseccomp:
# Debian 12's 2.5.4), the others the static release binaries from GitHub.
BUILDS = {
    "1.1.10": ("v1.1.10-0-g18a0cb0", "1.0.2-dev", "go1.20.10", "2.5.4"),
    "1.1.12": ("v1.1.12-0-g51d5e946", "1.0.2-dev", "go1.20.13", "2.5.4"),
    "1.4.2": ("v1.4.2-0-gc241c0bb", "1.3.0", "go1.25.8", "2.6.0"),
    "1.4.3": ("v1.4.3-0-gbb14dabeb", "1.3.0", "go1.25.11", "2.6.0"),
}
INSTALLED = None


def banner(version):
    commit, spec, go, seccomp = BUILDS[version]
    return f"runc version {version}\ncommit: {commit}\nspec: {spec}\ngo: {go}\nlibseccomp: {seccomp}\n"


def main(argv):
    if INSTALLED not in BUILDS:
        sys.stderr.write("runc: the simulation installed no runc here\n")
        return 127
    if argv[:1] in (["--version"], ["-v"]):
        sys.stdout.write(banner(INSTALLED))
        return 0
    sys.stderr.write("runc: only --version is available on the simulated node\n")
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
