"""Simulated ``enroot`` (NVIDIA Enroot 3.5.0), standalone (standard library only).

``enroot version`` prints the bare version on one line, as the real script does.

``enroot import [-a ARCH] [-o FILE] [--] docker://[USER@][REGISTRY#]IMAGE[:TAG]`` follows enroot's
``docker::import`` (src/docker.sh, src/common.sh, enroot.in): the reference is parsed with enroot's own
pattern (``[ERROR] Invalid image reference: URI`` otherwise), FILE defaults to ``IMAGE+TAG.sqsh`` with
``/`` made ``+``, an existing FILE is ``[ERROR] File already exists: FILE`` and a FILE whose directory is
missing ``[ERROR] No such file or directory: FILE``; every message goes to stderr, as enroot's
``common::log`` writes them, without the blank lines it adds only on a terminal. A successful import
prints the ``[INFO]`` steps of an anonymous Docker Hub pull, then mksquashfs's summary (enroot runs
``enroot-mksquashovlfs ... >&2``), writes a small file that starts with the squashfs magic at FILE and
exits 0. Sources of the text:

* the ``[INFO]`` lines: enroot's docker.sh, and real imports quoted in NVIDIA/enroot issues #44 and #70
  and in a site's documentation of ``srun enroot import`` (full output). The layer count of
  "Downloading N missing layers..." is always 2 here (one layer and the image config, as for busybox).
* mksquashfs's summary: squashfs-tools 4.5.1 run on a small tree with the sim's ENROOT_SQUASH_OPTIONS
  (``-noI -noD -noF -noX -no-duplicates``) and ``-all-root``; the counts are those of that tree, not of
  a real busybox image.
* ``[ERROR] URL https://registry-1.docker.io/v2/<image>/manifests/<tag> returned error code: 429 Too Many
  Requests`` after "Fetching image manifest": NVIDIA/enroot issue "429 rate limit" (enroot 3.3) and the
  reason phrase of 3.4.1 (issue #161, ``401 Unauthorized``).
* The ``no_space`` failure: mksquashfs 4.5.1 writing to a full filesystem ("Write failed because No space
  left on device", "FATAL ERROR: Failed to write to output filesystem", exit 1), its banner after the
  errors as stdio buffers it; enroot exits with mksquashfs's status.
* Unverified: the ``unreachable`` failure's exit status (6, curl's, passed on by ``set -e``) and that
  curl's message (``-S``) is the last line.

Node faults, from ``/etc/clustereval-sim/enroot.json`` (written by the sim's software overlay from the
profile's ``software_enroot_import`` fault; ``$CLUSTEREVAL_SIM_ENROOT`` names another file, for tests):
``{"import": "rate_limited"}`` (also ``fail``), ``"unauthorized"``, ``"unreachable"`` or ``"no_space"``.
"""

import json
import os
import re
import sys

VERSION = "3.5.0"
STATE = "/etc/clustereval-sim/enroot.json"
SQUASHFS_MAGIC = b"hsqs"

USAGE_IMPORT = """Usage: enroot import [options] [--] URI

Import a container image from a specific location.

 Schemes:
   docker://[USER@][REGISTRY#]IMAGE[:TAG]  Import a Docker image from a registry
   dockerd://IMAGE[:TAG]                   Import a Docker image from the Docker daemon
   podman://IMAGE[:TAG]                    Import a Docker image from a local podman repository

 Options:
   -a, --arch    Architecture of the image (defaults to host architecture)
   -o, --output  Name of the output image file (defaults to "URI.sqsh")
"""

USAGE = """Usage: enroot COMMAND [ARG...]

Command line utility for manipulating container sandboxes.

 Commands:
   batch  [options] [--] CONFIG [COMMAND] [ARG...]
   bundle [options] [--] IMAGE
   create [options] [--] IMAGE
   exec   [options] [--] PID COMMAND [ARG...]
   export [options] [--] NAME
   import [options] [--] URI
   list   [options]
   remove [options] [--] NAME...
   start  [options] [--] NAME|IMAGE [COMMAND] [ARG...]
   version
"""

# docker::import's reference pattern (bash ERE, translated).
REFERENCE = re.compile(r"^docker://(([A-Za-z0-9_.!~*\\'()%;:&=+$,-@]+)@)?(([^#]+)#)?([a-z0-9/._-]+)(:([A-Za-z0-9._:-]+))?$")

MKSQUASHFS = """Parallel mksquashfs: Using {cpus} processors
Creating 4.0 filesystem on {file}, block size 131072.

Exportable Squashfs 4.0 filesystem, gzip compressed, data block size 131072
\tuncompressed data, uncompressed metadata, uncompressed fragments,
\tuncompressed xattrs, uncompressed ids
\tduplicates are not removed
Filesystem size 4.00 Kbytes (0.00 Mbytes)
\t100.00% of uncompressed filesystem size (4.00 Kbytes)
Inode table size 606 bytes (0.59 Kbytes)
\t100.00% of uncompressed inode table size (606 bytes)
Directory table size 309 bytes (0.30 Kbytes)
\t100.00% of uncompressed directory table size (309 bytes)
No duplicate files removed
Number of inodes 17
Number of files 3
Number of fragments 1
Number of symbolic links 0
Number of device nodes 0
Number of fifo nodes 0
Number of socket nodes 0
Number of directories 14
Number of hard-links 4
Number of ids (unique uids + gids) 1
Number of uids 1
\troot (0)
Number of gids 1
\troot (0)
"""


def log(level, message):
    print(f"[{level}] {message}", file=sys.stderr)


def err(message):
    log("ERROR", message)
    return 1


def fault():
    try:
        with open(os.environ.get("CLUSTEREVAL_SIM_ENROOT") or STATE) as fh:
            return json.load(fh).get("import") or None
    except (OSError, ValueError):
        return None


def import_image(argv):
    """``enroot import``; the architecture option is accepted and ignored (one architecture here)."""
    options = {"arch": "", "output": ""}
    args = list(argv)
    while args:
        arg = args[0]
        name = {"-a": "arch", "--arch": "arch", "-o": "output", "--output": "output"}.get(arg)
        if name:
            if len(args) < 2 or not args[1]:
                print(USAGE_IMPORT, end="")
                return 0
            options[name] = args[1]
            args = args[2:]
        elif arg.startswith(("--arch=", "--output=")) and arg.split("=", 1)[1]:
            options[arg[2:].split("=", 1)[0]] = arg.split("=", 1)[1]
            args = args[1:]
        elif arg == "--":
            args = args[1:]
            break
        elif arg.startswith("-") and len(arg) > 1:
            print(USAGE_IMPORT, end="")
            return 0
        else:
            break
    if not args:
        print(USAGE_IMPORT, end="")
        return 0
    filename = options["output"]
    uri = args[0]
    if uri.startswith(("dockerd://", "podman://")):
        return err(f"Command not found: {'docker' if uri.startswith('dockerd') else 'podman'}")
    if not uri.startswith("docker://"):
        return err(f"Invalid argument: {uri}")
    match = REFERENCE.match(uri)
    if not match:
        return err(f"Invalid image reference: {uri}")
    user, registry, image, tag = match.group(2), match.group(4), match.group(5), match.group(7)
    if not filename:
        filename = image.replace("/", "+") + (f"+{tag}" if tag else "") + ".sqsh"
    path = os.path.abspath(filename)
    if not os.path.isdir(os.path.dirname(path)):
        return err(f"No such file or directory: {filename}")
    path = os.path.join(os.path.realpath(os.path.dirname(path)), os.path.basename(path))
    if os.path.lexists(path):
        return err(f"File already exists: {path}")
    registry = registry or "registry-1.docker.io"
    if "/" not in image and registry.endswith("docker.io"):
        image = f"library/{image}"
    manifest = f"https://{registry}/v2/{image}/manifests/{tag or 'latest'}"
    broken = fault()
    log("INFO", "Querying registry for permission grant")
    if broken == "unreachable":
        print(f"curl: (6) Could not resolve host: {registry.split(':')[0]}", file=sys.stderr)
        return 6
    log("INFO", f"Authenticating with user: {user or '<anonymous>'}")
    log("INFO", "Authentication succeeded")
    log("INFO", "Fetching image manifest list")
    log("INFO", "Fetching image manifest")
    if broken in ("rate_limited", "fail", True):
        return err(f"URL {manifest} returned error code: 429 Too Many Requests")
    if broken == "unauthorized":
        return err(f"URL {manifest} returned error code: 401 Unauthorized")
    log("INFO", "Downloading 2 missing layers...")
    log("INFO", "Extracting image layers...")
    log("INFO", "Converting whiteouts...")
    log("INFO", "Creating squashfs filesystem...")
    banner = MKSQUASHFS.format(cpus=os.cpu_count() or 1, file=path)
    if broken == "no_space":
        with open(path, "wb") as fh:
            fh.write(SQUASHFS_MAGIC)
        print("Write failed because No space left on device\nFATAL ERROR: Failed to write to output filesystem",
              file=sys.stderr)
        print("\n".join(banner.splitlines()[:2]), file=sys.stderr)
        return 1
    with open(path, "wb") as fh:
        fh.write(SQUASHFS_MAGIC + bytes(4096 - len(SQUASHFS_MAGIC)))
    print(banner, end="", file=sys.stderr)
    return 0


def main(argv):
    if argv[:1] == ["version"]:
        print(VERSION)
        return 0
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(USAGE, end="")
        return 0
    if argv[0] == "import":
        return import_image(argv[1:])
    return err(f"Command not supported by the simulated node: {argv[0]}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
