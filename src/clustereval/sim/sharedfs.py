"""The simulated cluster's shared filesystem: GlusterFS (real cross-node locks) or SSHFS (locks that stay on
the node), mounted on every node.

A real cluster shares home directories over NFS, Lustre, GPFS, Weka...; none of those runs without kernel
modules this machine lacks, so the simulation uses filesystems that run in user space, over FUSE, each
node mounting the same storage inside its own mount namespace with the real client. Files written on one
node are read on the others over the network stack, as on any shared filesystem.

``cluster.shared_fs_type`` (cluster-wide) picks the kind:

- ``glusterfs`` (the default): a one-brick GlusterFS 10 volume ``shared`` whose brick is ``D/shared``.
  ``glusterd`` and the brick process (``glusterfsd``) run in a network namespace of their own (created by
  ``unshare``, held by glusterd's process, no name under /run/netns) whose only address, ``10.A.B.254``
  on its loopback, exists nowhere else; glusterd refuses 127.x bricks. They also have a mount namespace of
  their own with a private ``/run`` and ``D/storage/gluster/log`` over ``/var/log/glusterfs``, so nothing of
  one cluster's GlusterFS lands in the host's /run or meets another cluster's. Each node's FUSE client
  (``glusterfs -N``, filesystem type ``fuse.glusterfs``, source ``10.A.B.254:/shared``) runs in the node's
  mount namespace and that network namespace. Locks (``flock``, POSIX ``fcntl``, OFD) taken through one
  node's mount exclude the others, as on NFS with a working lock manager or Lustre with ``flock``; the volume is
  tuned for coherence (VOLUME_OPTIONS, CLIENT_OPTIONS): concurrent ``mkdir -p`` from several nodes succeeds and
  another node reads a rewritten file's new bytes at once, as on a cluster filesystem.
- ``sshfs``: a storage host (an OpenSSH ``sshd`` on ``127.A.B.254``) exports ``D/shared`` over SFTP and each
  node mounts it with ``sshfs`` (type ``fuse.sshfs``). SFTP has no locks: the kernel keeps each node's
  ``flock``/``fcntl`` locks to that node, so they exclude on one node and never across nodes — the negative
  case of a shared filesystem whose locks do not cross nodes (NFS mounted ``nolock``/``local_lock=all``).

Without the GlusterFS packages (or /dev/fuse) the cluster falls back to SSHFS and ``sim status`` says why.

``cluster.shared_fs_metadata_delay_ms`` (GlusterFS only, cluster-wide: one storage server) makes the storage a
metadata-starved one: the brick's own ``debug/delay-gen`` translator, placed above its ``posix`` storage, holds
every metadata operation (METADATA_FOPS: lookup, create, mkdir, unlink, rename, open, stat, setattr, readdir,
...) that long in the brick's I/O threads, while reads, writes and fsyncs pass at once: what a Lustre MDS or an
NFS server with a saturated metadata path looks like from the clients (file creates, stats and opens take
milliseconds each, bulk throughput stays). The clients' caches are left as they are (a stat the md-cache can
answer still does not reach the server, as with NFS's attribute cache).
Profile: ``shared_fs`` (cluster-wide, or per node) is the mount point on the nodes (default ``/home``,
where most clusters put the shared home directories; empty: no shared filesystem). Fault:
``sharedfs_missing: true`` leaves that node without the mount (it missed it at boot).
"""

from __future__ import annotations

import os
import shlex
import shutil
from pathlib import Path
from typing import Any

FAULTS = {"sharedfs_missing"}
DEFAULT_MOUNT = "/home"
STORAGE_HOST_INDEX = 254
# What findmnt shows for each kind (FSTYPE), and the default kind.
FSTYPES = {"glusterfs": "fuse.glusterfs", "sshfs": "fuse.sshfs"}
FSTYPE = FSTYPES["sshfs"]
DEFAULT_TYPE = "glusterfs"
VOLUME = "shared"
GLUSTERD_PORT = 24007
GLUSTER_CLIENT = "glusterfs"
# glusterd's CLI socket, in its private /run (a path the host never sees; the CLI enters that namespace).
GLUSTERD_SOCKET = "/run/glusterd.socket"


def mount_point(settings: dict[str, Any]) -> str | None:
    """Where this node mounts the shared filesystem, or None when it does not."""
    if (settings.get("faults") or {}).get("sharedfs_missing"):
        return None
    point = settings.get("shared_fs", DEFAULT_MOUNT)
    return str(point) if point else None


def fs_type(node_settings: list[dict[str, Any]]) -> str:
    """The kind of shared filesystem the profile asks for (``cluster.shared_fs_type``): one for the whole
    cluster. Raises ValueError naming the setting when it is unknown or differs between nodes."""
    kinds = {str(s.get("shared_fs_type", DEFAULT_TYPE)) for s in node_settings} or {DEFAULT_TYPE}
    unknown = sorted(kinds - set(FSTYPES))
    if unknown:
        raise ValueError(f"shared_fs_type must be one of {sorted(FSTYPES)}, not {unknown[0]!r}")
    if len(kinds) > 1:
        raise ValueError(f"shared_fs_type is cluster-wide (one storage for every node), not {sorted(kinds)}")
    return kinds.pop()


def unavailable(kind: str = "sshfs") -> str | None:
    """Why this machine cannot give the nodes a shared filesystem of ``kind`` (None when it can)."""
    if not os.path.exists("/dev/fuse"):
        return "/dev/fuse is missing (no FUSE in this kernel or container)"
    if kind == "glusterfs":
        for tool in ("glusterd", "gluster", GLUSTER_CLIENT, "ip"):
            if not shutil.which(tool) and not os.path.exists(f"/usr/sbin/{tool}"):
                return f"{tool} is not installed (apt-get install glusterfs-server glusterfs-client iproute2)"
        return None
    if not shutil.which("sshfs"):
        return "sshfs is not installed (apt-get install sshfs)"
    return None


def choose(kind: str) -> tuple[str | None, str | None]:
    """(the kind the cluster gets, why it is not the one asked for or why there is none). GlusterFS falls back
    to SSHFS, whose locks do not cross nodes; with neither the nodes have no shared filesystem (None)."""
    why = unavailable(kind)
    if why is None:
        return kind, None
    if kind == "glusterfs" and unavailable("sshfs") is None:
        return "sshfs", f"{kind} asked for, but {why}: sshfs instead (its locks do not cross nodes)"
    return None, why


# ------------------------------------------------------------------------------------------------- SSHFS


def server_config(address: str, host_key: Path, authorized_keys: Path, pid_file: Path) -> str:
    """sshd_config of the storage host: key logins only, SFTP in-process."""
    return "\n".join([
        f"ListenAddress {address}:22",
        f"HostKey {host_key}",
        f"PidFile {pid_file}",
        "PermitRootLogin prohibit-password",
        "PubkeyAuthentication yes",
        "PasswordAuthentication no",
        "KbdInteractiveAuthentication no",
        "UsePAM no",
        f"AuthorizedKeysFile {authorized_keys}",
        "StrictModes no",
        "Subsystem sftp internal-sftp",
        "LogLevel ERROR",
        "MaxStartups 100:30:200",
        "",
    ])


def mount_command(address: str, export: Path, point: str, key: Path) -> list[str]:
    """``sshfs`` in the foreground (so the simulation owns the process) mounting ``export`` at ``point``."""
    options = ",".join([
        f"IdentityFile={key}", "StrictHostKeyChecking=no", "UserKnownHostsFile=/dev/null", "LogLevel=ERROR",
        "BatchMode=yes", "allow_other", "default_permissions", "reconnect", "ServerAliveInterval=15",
        "ServerAliveCountMax=3",
    ])
    return ["sshfs", "-f", "-o", options, f"root@{address}:{export}", point]


# --------------------------------------------------------------------------------------------- GlusterFS


def gluster_address(block: str) -> str:
    """The storage server's address for the cluster whose loopback block is ``127.A.B``: ``10.A.B.254``, on the
    loopback of the GlusterFS network namespace only (glusterd refuses 127.x bricks)."""
    a, b = block.split(".")[1:3]
    return f"10.{a}.{b}.{STORAGE_HOST_INDEX}"


def gluster_paths(storage: Path) -> dict[str, Path]:
    """Where the GlusterFS server keeps its state under ``D/storage``."""
    base = storage / "gluster"
    return {"base": base, "workdir": base / "wd", "log": base / "log", "volfile": base / "glusterd.vol",
            "socket": Path(GLUSTERD_SOCKET), "pid": base / "glusterd.pid",
            "glusterd_log": base / "log" / "glusterd.log", "cli_log": base / "log" / "cli.log"}


def glusterd_volfile(paths: dict[str, Path], address: str) -> str:
    """glusterd's own volfile: its state under ``D/storage/gluster/wd``, listening on the namespace's address
    only, its CLI socket in its private /run."""
    return "\n".join([
        "volume management",
        "    type mgmt/glusterd",
        f"    option working-directory {paths['workdir']}",
        "    option transport-type socket",
        f"    option transport.socket.listen-port {GLUSTERD_PORT}",
        f"    option transport.socket.bind-address {address}",
        f"    option glusterd-sockfile {paths['socket']}",
        "    option ping-timeout 0",
        "    option event-threads 1",
        "    option max-port 60999",
        "end-volume",
        "",
    ])


def glusterd_command(paths: dict[str, Path], address: str) -> list[str]:
    """glusterd in the foreground in a new network and mount namespace: the loopback up with ``address``, a
    private /run (the bricks' sockets and pid files) and the log folder over /var/log/glusterfs. ``unshare``
    and ``sh`` exec into glusterd, so the PID started is glusterd's (the namespace's holder)."""
    q = shlex.quote
    script = " && ".join([
        "ip link set lo up",
        f"ip addr add {q(address)}/32 dev lo",
        "mount -t tmpfs -o mode=0755 clustereval-gluster-run /run",
        "mkdir -p /run/gluster",
        f"mount --bind {q(str(paths['log']))} /var/log/glusterfs",
        f"exec glusterd -N -f {q(str(paths['volfile']))} -p {q(str(paths['pid']))} "
        f"-l {q(str(paths['glusterd_log']))} --log-level=WARNING",
    ])
    return ["unshare", "--net", "--mount", "--propagation", "private", "--", "sh", "-c", script]


def gluster_cli(paths: dict[str, Path], glusterd_pid: int, *args: str) -> list[str]:
    """The ``gluster`` CLI run inside glusterd's namespaces, talking to it over its own socket."""
    return ["nsenter", "-t", str(glusterd_pid), "--net", "--mount", "gluster", "--mode=script",
            f"--glusterd-sock={paths['socket']}", f"--log-file={paths['cli_log']}", *args]


# A coherent shared home, as a provider tunes GlusterFS for one (its `metadata-cache` group): the clients'
# metadata caches are invalidated by the bricks' upcalls when another client changes an entry, and each node's
# kernel keeps no FUSE entry or attribute cache of its own (CLIENT_OPTIONS). Measured on GlusterFS 10.3 with two
# clients, 12 `mkdir -p` of one path each, at once: with the defaults 1-2 % of the calls fail (EEXIST: the
# directory exists but the next lookup does not find it; ESTALE bursts: a parent's stale handle), and a file
# rewritten in place is read in its old version for ~1 s on the other node; tuned like this, none of 7200 calls
# failed and the other node reads the new bytes within ~0.02 s. (The md-cache off instead cures mkdir but leaves
# a rewrite unseen for more than 30 s.)
VOLUME_OPTIONS = [("features.cache-invalidation", "on"), ("features.cache-invalidation-timeout", "600"),
                  ("performance.cache-invalidation", "on"), ("performance.md-cache-timeout", "600")]
CLIENT_OPTIONS = ["--attribute-timeout=0", "--entry-timeout=0", "--negative-timeout=0"]


# The operations a metadata server answers (GlusterFS fop names, as delay-gen's `enable` takes them); READ,
# WRITE, FSYNC, FLUSH, FSTAT and the internal locks and xattr calls are left out, so bulk data is not slowed.
METADATA_FOPS = ("lookup", "stat", "access", "create", "mknod", "mkdir", "unlink", "rmdir", "rename", "link",
                 "symlink", "readlink", "open", "opendir", "readdir", "readdirp", "setattr", "truncate", "statfs")


def metadata_delay_ms(node_settings: list[dict[str, Any]]) -> float | None:
    """The metadata delay the profile asks for (``cluster.shared_fs_metadata_delay_ms``), None for none. Raises
    ValueError naming the setting when it is not a number > 0, differs between nodes or the storage is not
    GlusterFS (the delay is the GlusterFS brick's)."""
    values = {repr(s.get("shared_fs_metadata_delay_ms")) for s in node_settings}
    if len(values) > 1:
        raise ValueError("shared_fs_metadata_delay_ms is cluster-wide (one storage server), not set per node")
    value = next((s.get("shared_fs_metadata_delay_ms") for s in node_settings), None)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 10_000:
        raise ValueError(f"shared_fs_metadata_delay_ms must be a number of milliseconds from 0 to 10000 (more "
                         f"than 0), not {value!r}")
    if fs_type(node_settings) != "glusterfs":
        raise ValueError("shared_fs_metadata_delay_ms needs shared_fs_type glusterfs (it is the brick's delay-gen)")
    return float(value)


def metadata_delay_options(delay_ms: float | None) -> list[tuple[str, str]]:
    """The volume options that hold every metadata operation ``delay_ms`` in the brick (none: no options)."""
    if not delay_ms:
        return []
    return [("debug.delay-gen", "posix"), ("delay-gen.delay-duration", str(round(delay_ms * 1000))),
            ("delay-gen.delay-percentage", "100"), ("delay-gen.enable", ",".join(METADATA_FOPS))]


def gluster_volume_commands(paths: dict[str, Path], glusterd_pid: int, address: str, brick: Path,
                            metadata_delay: float | None = None) -> list[list[str]]:
    """Create (``force``: the brick is on the root filesystem), tune (VOLUME_OPTIONS, and the metadata delay a
    profile asks for) and start the volume."""
    options = VOLUME_OPTIONS + metadata_delay_options(metadata_delay)
    return [gluster_cli(paths, glusterd_pid, "volume", "create", VOLUME, f"{address}:{brick}", "force"),
            *(gluster_cli(paths, glusterd_pid, "volume", "set", VOLUME, key, value) for key, value in options),
            gluster_cli(paths, glusterd_pid, "volume", "start", VOLUME)]


def gluster_mount_command(glusterd_pid: int, address: str, point: str, log: Path) -> list[str]:
    """The FUSE client in the foreground (the simulation owns the process) in glusterd's network namespace;
    run inside the node's mount namespace, where the mount lands. Source ``ADDRESS:/shared``."""
    return ["nsenter", f"--net=/proc/{glusterd_pid}/ns/net", GLUSTER_CLIENT, "-N", f"--volfile-server={address}",
            f"--volfile-id=/{VOLUME}", *CLIENT_OPTIONS, f"--log-file={log}", "--log-level=WARNING", point]


def net_namespace(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/net")
    except OSError:
        return None


def namespace_processes(shared: dict[str, Any] | None) -> set[int]:
    """Every live process in the GlusterFS network namespace ``shared`` (the cluster's ``state["shared_fs"]``)
    records: glusterd, its brick process and gsyncd check (daemons glusterd starts, whose PIDs nobody
    records) and the nodes' FUSE clients. Empty for SSHFS and for a cluster without a shared filesystem."""
    netns = (shared or {}).get("netns")
    if not netns:
        return set()
    own = net_namespace(os.getpid())
    if netns == own:  # never the host's own namespace, whatever the state says
        return set()
    found = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid() and net_namespace(int(entry)) == netns:
            try:
                with open(f"/proc/{entry}/stat", encoding="utf-8") as fh:
                    if fh.read().rsplit(")", 1)[1].split()[0] in ("Z", "X"):
                        continue
            except (OSError, IndexError):
                continue
            found.add(int(entry))
    return found


def mounted(pid: int, point: str, fstype: str = FSTYPE) -> bool:
    """Whether the mount namespace of process ``pid`` has a mount of type ``fstype`` at ``point``."""
    try:
        with open(f"/proc/{pid}/mounts", encoding="utf-8") as fh:
            return any(line.split()[1:3] == [point, fstype] for line in fh if len(line.split()) > 2)
    except OSError:
        return False
