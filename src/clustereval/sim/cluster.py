"""Bring a simulated GPU cluster up and down on one Linux host (root, no systemd needed).

Each simulated node is an OpenSSH ``sshd`` on its own loopback address (``127.A.B.N:22``), started inside a
private UTS + mount namespace (hostname ``nodeN``; ``/sim`` bind-mounted to ``D/nodes/nodeN/root``), plus one
real ``slurmd`` entered into the same namespaces. The cluster has its own munged (own key and socket), its
own ``slurmctld`` on a free port (of the block's ``.253``, or of the node the profile runs it on), and per-node
shims for the vendor tools (``nvidia-smi``, ``dcgmi``) that read ``/sim/node.json``, rendered from a profile
(see :mod:`clustereval.sim.profile`). Everything listens on the cluster's own addresses only (see "source
addresses" below for how slurmd and srun can).

Everything started is recorded in ``D/state.json`` (PID plus start time, and each node's namespace ids) so
:func:`down` stops exactly those processes and whatever runs inside the nodes' namespaces, never anything
matched by name. Two clusters in different directories use different ports, address blocks, munge sockets
and Slurm state.
"""

from __future__ import annotations

import compileall
import contextlib
import hashlib
import importlib.util
import json
import os
import shlex
import shutil
import signal
import socket
import stat
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from clustereval.sim import amd, diskfaults, netfaults, overlays, pcisysfs, sharedfs, slurmconf
from clustereval.sim.overlays import accounts as accounts_overlay
from clustereval.sim.overlays import k8s as k8s_overlay
from clustereval.sim.overlays import software_tools
from clustereval.sim.overlays import system as system_overlay
from clustereval.sim.profile import (
    ProfileError,
    check_problems,
    load_profile,
    node_names,
    node_settings,
    provider_settings,
    render_node,
    unknown_node_problems,
)

SHIM_SOURCES = Path(__file__).resolve().parent / "shims"
SHIMS = {"nvidia-smi": "nvidia_smi.py", "dcgmi": "dcgmi.py", "dcgm-exporter": "dcgm_exporter.py",
         "systemctl": "systemctl.py", "reboot": "reboot.py", "shutdown": "shutdown.py", "poweroff": "poweroff.py",
         # fabric and performance tools (docs/sim.md "Fabric and performance tools")
         **{f"{c}_perf": "nccl_tests.py" for c in ("all_reduce", "all_gather", "reduce_scatter", "alltoall",
                                                  "sendrecv")},
         **{t: "perftest.py" for t in ("ib_write_bw", "ib_read_bw", "ib_write_lat", "ib_read_lat")},
         "nvbandwidth": "nvbandwidth.py",
         # ROCm's TransferBench (/opt/rocm/bin/TransferBench on a real node; on the node's PATH here) and AMD's
         # device metrics exporter: on AMD nodes only (amd.AMD_ONLY_TOOLS)
         "TransferBench": "transferbench.py", "amd-metrics-exporter": "amd_metrics_exporter.py"}
# Tools a profile can leave off a node (``faults: {nccl_tests: missing}``): shim module -> node.json tool key.
OPTIONAL_TOOLS = {"nccl_tests.py": "nccl_tests", "perftest.py": "perftest", "nvbandwidth.py": "nvbandwidth",
                  "transferbench.py": "transferbench"}
# Open MPI settings a site running mpirun between its nodes provides in every login environment (the nodes
# talk over loopback addresses here; the cluster key in /root/.ssh is what `plm_rsh_agent ssh` uses).
NODE_MCA_ENV = "OMPI_MCA_oob_tcp_if_include=lo OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_btl=self,vader,tcp"
# Capabilities no process of a simulated node keeps (dropped from the bounding set of its sshd and slurmd):
# a real `reboot -f` (CAP_SYS_BOOT) or raw PCI config/port access (CAP_SYS_RAWIO) must never reach the host.
NODE_DROPPED_CAPS = "-sys_boot,-sys_rawio"
GROUND_TRUTH = "ground-truth.jsonl"
# Metrics exporters every healthy GPU node runs: (program, arguments); {address} is the node's.
NODE_EXPORTER = "/usr/bin/prometheus-node-exporter"
NODE_PATH = "/sim/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
UP_TIMEOUT_S = 30.0


class SimError(RuntimeError):
    """The simulated cluster could not be brought up (the message names what and shows its log)."""


# ----------------------------------------------------------------------------------------- processes


def _proc_stat(pid: int) -> list[str] | None:
    """Fields of /proc/PID/stat after the command name (index 0 is the state letter), or None."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return raw[raw.rindex(")") + 2 :].split()


def pid_alive(pid: int | None, started: str | None = None) -> bool:
    """True if ``pid`` runs and is not a zombie (and, when given, has the recorded start time)."""
    if not pid:
        return False
    fields = _proc_stat(pid)
    if fields is None or fields[0] in ("Z", "X"):
        return False
    return started is None or fields[19] == started


def _start_time(pid: int) -> str | None:
    fields = _proc_stat(pid)
    return fields[19] if fields else None


def _namespace(pid: int, kind: str) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/{kind}")
    except OSError:
        return None


def _all_pids() -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def _descendants(roots: set[int]) -> set[int]:
    """All live descendants of ``roots`` (by parent PID)."""
    children: dict[int, list[int]] = {}
    for pid in _all_pids():
        fields = _proc_stat(pid)
        if fields and fields[0] != "Z":
            children.setdefault(int(fields[1]), []).append(pid)
    found: set[int] = set()
    stack = list(roots)
    while stack:
        for child in children.get(stack.pop(), []):
            if child not in found:
                found.add(child)
                stack.append(child)
    return found


def _in_namespaces(namespaces: list[tuple[str, str]]) -> set[int]:
    """Live processes whose (mnt, uts) namespaces are one of the simulated nodes' own."""
    wanted = set(namespaces)
    if not wanted:
        return set()
    return {
        pid
        for pid in _all_pids()
        if pid != os.getpid()
        and (_namespace(pid, "mnt"), _namespace(pid, "uts")) in wanted
        and pid_alive(pid)
    }


def _terminate(pids: set[int], grace_s: float = 3.0) -> set[int]:
    """SIGTERM, then SIGKILL what is still alive after ``grace_s``; returns the PIDs signalled."""
    signalled = set()
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGTERM)
            signalled.add(pid)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and any(pid_alive(p) for p in signalled):
        time.sleep(0.05)
    for pid in signalled:
        if pid_alive(pid):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
    _reap()
    return signalled


def _reap() -> None:
    """Collect exit statuses of daemons this process started itself, so they do not linger as zombies."""
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass


# ----------------------------------------------------------------------------------------- paths & state


def _paths(directory: Path) -> dict[str, Path]:
    return {
        "state": directory / "state.json",
        "inventory": directory / "inventory.ini",
        "ssh": directory / "ssh",
        "munge": directory / "munge",
        "slurm": directory / "slurm",
        "shims": directory / "shims",
        "nodes": directory / "nodes",
        "dev": directory / "dev",
        "shared": directory / "shared",
        "storage": directory / "storage",
        "k8s": directory / "k8s",  # live nodes and pods of the Kubernetes API, kubectl for the host (k8s/bin)
    }


def _read_state(directory: Path) -> dict[str, Any] | None:
    try:
        return json.loads((directory / "state.json").read_text())
    except (OSError, ValueError):
        return None


def _write_state(directory: Path, state: dict[str, Any]) -> None:
    tmp = directory / "state.json.tmp"
    tmp.write_text(json.dumps(state, indent=2))
    tmp.replace(directory / "state.json")


def _record(directory: Path, state: dict[str, Any], key: str, pid: int, **extra: Any) -> None:
    """Remember a started process at once, so a half-finished ``up`` can still be cleaned up."""
    state["processes"][key] = {"pid": pid, "started": _start_time(pid), **extra}
    _write_state(directory, state)


# ----------------------------------------------------------------------------------------- addresses & ports


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _address_free(address: str, port: int = 22) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((address, port))
        except OSError:
            return False
    return True


def _addresses_in_use_by_other_sims(directory: Path) -> set[str]:
    """Address blocks recorded by other simulated clusters whose controller still runs (best effort)."""
    used: set[str] = set()
    registry = Path("/tmp/clustereval-sim-blocks")
    with contextlib.suppress(OSError):
        for entry in registry.iterdir():
            try:
                info = json.loads(entry.read_text())
            except (OSError, ValueError):
                continue
            if info.get("directory") != str(directory) and pid_alive(info.get("pid"), info.get("started")):
                used.add(info["block"])
    return used


def _pick_block(directory: Path, nodes: int) -> str:
    """A ``127.A.B`` block whose ``.1``…``.N`` addresses are free, derived from the directory's hash."""
    taken = _addresses_in_use_by_other_sims(directory)
    seed = int(hashlib.sha256(str(directory).encode()).hexdigest()[:8], 16)
    for attempt in range(256):
        value = (seed + attempt * 7919) % (250 * 256)
        block = f"127.{2 + value // 256}.{value % 256}"
        if block in taken:
            continue
        if all(_address_free(f"{block}.{i}") for i in [*range(1, nodes + 1), slurmconf.CONTROLLER_HOST_INDEX]):
            return block
    raise SimError("no free loopback address block found for the simulated nodes")


def _register_block(directory: Path, state: dict[str, Any]) -> None:
    registry = Path("/tmp/clustereval-sim-blocks")
    registry.mkdir(exist_ok=True)
    name = hashlib.sha256(str(directory).encode()).hexdigest()[:16]
    ctl = state["processes"].get("slurmctld", {})
    (registry / name).write_text(
        json.dumps(
            {
                "directory": str(directory),
                "block": state["block"],
                "pid": ctl.get("pid"),
                "started": ctl.get("started"),
            }
        )
    )


# ----------------------------------------------------------------------------------------- source addresses
# The nodes share the host's network stack, where a connection to any 127.x address leaves from 127.0.0.1. Slurm
# answers the address a request came from (slurmd connects a step's I/O back to the srun that launched it), so
# with srun bound to its node's own address (NoInAddrAny) each node's connections into the cluster's block must
# leave from the node's address, as on a real cluster. Each node's processes run in a cgroup (v2) of their own,
# and the cluster's nftables table marks their new connections into the block in the output hook (where the
# socket's cgroup is known) and rewrites their source to the node's address in postrouting (SNAT).

SOURCE_TABLE_PREFIX = "clustereval_src_"
CGROUP_FS = Path("/sys/fs/cgroup")  # nft names cgroup v2 paths relative to this directory


def _cgroup2_mount() -> Path | None:
    """Where the cgroup v2 hierarchy is mounted (``/sys/fs/cgroup``; ``/sys/fs/cgroup/unified`` on a hybrid host)."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/mounts").read_text().splitlines():
            fields = line.split()
            if len(fields) > 2 and fields[2] == "cgroup2":
                return Path(fields[1])
    return None


def _host_source() -> str | None:
    """Where connections into the block from outside the nodes (the host's srun, ssh, scontrol) must leave from:
    the address the host's name resolves to, which srun on the host binds; None when that is 127.0.0.1 (where
    they leave from anyway) or the name does not resolve."""
    with contextlib.suppress(OSError):
        address = socket.gethostbyname(socket.gethostname())
        return None if address == "127.0.0.1" else address
    return None


def _source_nat_script(state: dict[str, Any], cgroups: dict[str, Path], mount: Path, host: str | None) -> str:
    """The nft script of the cluster's table: per node, mark new connections of its cgroup into the block with
    the node's address (as a number) and rewrite their source to it; the rest to ``host`` when given. nft names
    a cgroup by its path under /sys/fs/cgroup and its depth in the hierarchy (``mount``)."""
    table, block = SOURCE_TABLE_PREFIX + state["slurm_name"], f"{state['block']}.0/24"
    lines = [f"add table ip {table}",
             f"add chain ip {table} output {{ type filter hook output priority 0; policy accept; }}",
             f"add chain ip {table} postrouting {{ type nat hook postrouting priority 100; policy accept; }}"]
    for name, cgroup in cgroups.items():
        address = state["nodes"][name]["address"]
        mark = int.from_bytes(socket.inet_aton(address), "big")
        lines += [f"add rule ip {table} output ip daddr {block} ct state new socket cgroupv2 level "
                  f'{len(cgroup.relative_to(mount).parts)} "{cgroup.relative_to(CGROUP_FS)}" ct mark set {mark}',
                  f"add rule ip {table} postrouting ip daddr {block} ct mark {mark} snat to {address}"]
    if host:
        lines.append(f"add rule ip {table} postrouting ip daddr {block} ct mark 0 snat to {host}")
    return "\n".join(lines) + "\n"


def _setup_source_addresses(state: dict[str, Any]) -> dict[str, Any]:
    """Make the nodes' cgroups and the cluster's nft table; returns what ``state["source_addresses"]`` records:
    ``{"table", "cgroups": {node: path}, "host"}``, or ``{"error": why}`` where this machine cannot (then
    slurmd and srun bind every address, as without this)."""
    nft, mount = shutil.which("nft") or "/usr/sbin/nft", _cgroup2_mount()
    if not Path(nft).exists():
        return {"error": "nft is not installed (apt-get install nftables)"}
    if mount is None or not mount.is_relative_to(CGROUP_FS):
        return {"error": f"no cgroup v2 hierarchy under {CGROUP_FS}"}
    cgroups = {name: mount / f"clustereval-{state['slurm_name']}" / name for name in state["nodes"]}
    try:
        for path in cgroups.values():
            path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return {"error": f"cannot make the nodes' cgroups: {exc}"}
    host = _host_source()
    table = SOURCE_TABLE_PREFIX + state["slurm_name"]
    subprocess.run([nft, "delete", "table", "ip", table], capture_output=True)
    proc = subprocess.run([nft, "-f", "-"], input=_source_nat_script(state, cgroups, mount, host),
                          capture_output=True, text=True)
    recorded = {"table": table, "cgroups": {name: str(path) for name, path in cgroups.items()}, "host": host}
    if proc.returncode != 0:
        _remove_source_addresses(recorded)
        return {"error": f"nft refused the nodes' source addresses: {proc.stderr.strip()[:300]}"}
    if not _source_address_works(state, recorded):
        _remove_source_addresses(recorded)
        return {"error": "the nodes' source addresses did not take effect (nft matched no cgroup)"}
    return recorded


def _source_address_works(state: dict[str, Any], recorded: dict[str, Any]) -> bool:
    """Whether a process of the first node's cgroup reaches the block from that node's address: a rule can load
    and still never match (a cgroup namespace shifts the depths nft counts)."""
    name = next(iter(recorded["cgroups"]))
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        try:
            listener.bind((controller_address(state["block"]), 0))  # free until slurmctld starts
        except OSError:
            return False
        listener.listen(1)
        listener.settimeout(5)
        client = subprocess.Popen(_in_node_cgroup({"source_addresses": recorded}, name, [
            sys.executable, "-IS", "-c", _PROBE_CLIENT, *map(str, listener.getsockname())]))
        try:
            conn, peer = listener.accept()
            conn.close()
        except OSError:
            client.kill()
            return False
        finally:
            with contextlib.suppress(subprocess.TimeoutExpired):
                client.wait(5)
    return peer[0] == state["nodes"][name]["address"]


_PROBE_CLIENT = "import socket, sys; socket.create_connection((sys.argv[1], int(sys.argv[2])), 5).close()"


def _in_node_cgroup(state: dict[str, Any], name: str | None, argv: list[str]) -> list[str]:
    """``argv`` started as a process of node ``name``'s cgroup (its connections into the block then leave from
    the node's address); unchanged where the cluster has no such cgroups."""
    joined = [f"{cgroups[name]}/cgroup.procs" for key in ("source_addresses", "disk_limits")
              if name in (cgroups := (state.get(key) or {}).get("cgroups", {}))]
    if not joined:
        return argv
    # one hierarchy each (the v2 one of the source addresses, a v1 blkio one of a slow disk): a process joins both
    # sh -c SCRIPT FILE0 FILE1 ARGV...: $0, $1 are the files, shifted away before the exec
    joins = " && ".join(f'echo $$ > "${i}"' for i in range(len(joined)))
    return ["sh", "-c", f'{joins} && shift {len(joined) - 1} && exec "$@"', *joined, *argv]


def _cgroup_pids(cgroup: str | Path) -> set[int]:
    with contextlib.suppress(OSError, ValueError):
        return {int(p) for p in Path(cgroup, "cgroup.procs").read_text().split()}
    return set()


def _in_cgroups(recorded: dict[str, Any]) -> set[int]:
    """Live processes of the nodes' cgroups (what ``down`` stops besides the recorded PIDs)."""
    pids = {pid for cgroup in (recorded or {}).get("cgroups", {}).values() for pid in _cgroup_pids(cgroup)}
    return {pid for pid in pids if pid != os.getpid() and pid_alive(pid)}


def _remove_source_addresses(recorded: dict[str, Any]) -> None:
    """Delete the cluster's nft table and the nodes' cgroups, once the processes just stopped have left them."""
    nft = shutil.which("nft") or "/usr/sbin/nft"
    if recorded.get("table") and Path(nft).exists():
        subprocess.run([nft, "delete", "table", "ip", recorded["table"]], capture_output=True)
    cgroups = [Path(p) for p in recorded.get("cgroups", {}).values()]
    _wait(lambda: not any(_cgroup_pids(path) for path in cgroups), 2.0)
    for path in [*cgroups, *{p.parent for p in cgroups}]:
        with contextlib.suppress(OSError):
            path.rmdir()


# ----------------------------------------------------------------------------------------- configuration


def _run(cmd: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kwargs)


def _tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return f"(no log at {path})"


def _device_dir(directory: Path, slurm_name: str) -> Path:
    """Where the fake GPU char devices live: under D if its filesystem allows device nodes, else /dev."""
    candidate = directory / "dev"
    candidate.mkdir(exist_ok=True)
    probe = candidate / "probe"
    with contextlib.suppress(FileNotFoundError):
        probe.unlink()
    try:
        os.mknod(probe, 0o666 | stat.S_IFCHR, os.makedev(195, 255))
        probe.unlink()
        return candidate
    except OSError:
        fallback = Path("/dev") / f"clustereval-{slurm_name}"
        fallback.mkdir(exist_ok=True)
        return fallback


def _make_devices(dev_dir: Path, count: int) -> None:
    for k in range(count):
        path = dev_dir / f"nvidia{k}"
        if not path.is_char_device():
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
            os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(195, k))


def _munge_socket(directory: Path, slurm_name: str) -> Path:
    """munged's socket path; UNIX socket paths are limited to 107 bytes, so long dirs use /run."""
    path = directory / "munge" / "munge.socket"
    if len(str(path)) <= 100:
        return path
    short = Path("/run") / f"clustereval-{slurm_name}"
    short.mkdir(mode=0o700, exist_ok=True)
    return short / "munge.socket"


def _slurm_conf(directory: Path, state: dict[str, Any], nodes: list[dict[str, Any]], dev_dir: Path) -> str:
    p = _paths(directory)
    slurm = p["slurm"]
    partition = nodes[0]["state"]["slurm"]["partition"] if nodes else "gpu"
    lines = [
        f"ClusterName={state['slurm_name']}",
        "SlurmctldHost={}({})".format(*_controller(state)[:2]),
        "SlurmUser=root",
        "SlurmdUser=root",
        f"SlurmctldPort={state['ports']['slurmctld']}",
        slurmconf.communication_parameters("cgroups" in state.get("source_addresses", {})),
        "AuthType=auth/munge",
        "CredType=cred/munge",
        f"AuthInfo=socket={state['munge_socket']}",
        f"StateSaveLocation={slurm / 'state'}",
        f"SlurmdSpoolDir={slurm / 'spool' / '%n'}",
        f"SlurmctldPidFile={slurm / 'run' / 'slurmctld.pid'}",
        f"SlurmdPidFile={slurm / 'run' / 'slurmd-%n.pid'}",
        f"SlurmctldLogFile={slurm / 'log' / 'slurmctld.log'}",
        f"SlurmdLogFile={slurm / 'log' / 'slurmd-%n.log'}",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "JobAcctGatherType=jobacct_gather/none",
        "AccountingStorageType=accounting_storage/none",
        "JobCompType=jobcomp/none",
        "MpiDefault=none",
        "SchedulerType=sched/backfill",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core",
        "GresTypes=gpu",
        "SlurmdParameters=config_overrides",
        "SlurmdTimeout=30",
        "SlurmctldTimeout=30",
        "InactiveLimit=0",
        "MinJobAge=30",
        "KillWait=5",
        "Waittime=0",
        f"Prolog={slurmconf.PROLOG_PATH}",
        f"Epilog={slurmconf.EPILOG_PATH}",
        f"TaskProlog={slurmconf.TASK_PROLOG_PATH}",
        *slurmconf.scheduler_lines(state["slurm_cluster"], nodes[0]["provider"], partition),
    ]
    for node in nodes:
        s = node["state"]["slurm"]
        cores = max(1, s["cpus"] // 2)
        gres = f" Gres=gpu:{s['gres_type']}:{s['gres_count']}" if s["gres_count"] else ""
        lines.append(
            f"NodeName={node['name']} NodeHostname={node['name']} NodeAddr={node['address']} "
            f"Port={node['slurmd_port']} "
            f"CPUs={cores * 2} Boards=1 SocketsPerBoard=2 CoresPerSocket={cores} ThreadsPerCore=1 "
            f"RealMemory={s['real_memory_mb']}{gres} State=UNKNOWN"
        )
    lines.append(slurmconf.partition_line(partition, state["slurm_cluster"]))
    return "\n".join(lines) + "\n"


def _gres_conf(nodes: list[dict[str, Any]], dev_dir: Path) -> str:
    lines = ["AutoDetect=off"]
    for node in nodes:
        s = node["state"]["slurm"]
        if s["gres_count"]:
            files = (
                f"{dev_dir}/nvidia[0-{s['gres_count'] - 1}]" if s["gres_count"] > 1 else f"{dev_dir}/nvidia0"
            )
            lines.append(f"NodeName={node['name']} Name=gpu Type={s['gres_type']} File={files}")
    return "\n".join(lines) + "\n"


# The checks of the provider's node health check (shims/healthcheck.py, copied to D/slurm/healthcheck.py); each
# node's HealthCheckProgram (/sim/etc/slurm/healthcheck, sim/slurmconf.py) runs it with the checks it names and
# drains the node, or not, as the provider does. It reads /sim/kmsg, dcgmi, nvidia-smi and /sim/provider.json.
HEALTHCHECK_SOURCE = SHIM_SOURCES / "healthcheck.py"
JOB_MAP_DIR = slurmconf.JOB_MAP_DIR


def _controller(state: dict[str, Any]) -> tuple[str, str, str | None]:
    """(SlurmctldHost, its address, the compute node slurmctld runs on or None for the host)."""
    return slurmconf.controller(state["slurm_cluster"], socket.gethostname().split(".")[0],
                                {name: info["address"] for name, info in state["nodes"].items()},
                                controller_address(state["block"]))


def controller_address(block: str) -> str:
    """The host's slurmctld's own address in the cluster's block (what its host name resolves to for it)."""
    return f"{block}.{slurmconf.CONTROLLER_HOST_INDEX}"


def _write_hosts(directory: Path, state: dict[str, Any]) -> None:
    """``D/slurm/hosts``, the /etc/hosts of every node and of the host's slurmctld (bind-mounted in their mount
    namespaces): each one's host name resolves to its own address, which Slurm binds (NoInAddrAny)."""
    names = {name: info["address"] for name, info in state["nodes"].items()}
    ctl_name, ctl_address, on_node = _controller(state)
    if not on_node:  # slurmctld resolves its full name (gethostname), SlurmctldHost is the short one
        names.update(dict.fromkeys({ctl_name, socket.gethostname()}, ctl_address))
    (_paths(directory)["slurm"] / "hosts").write_text(slurmconf.hosts_file(names))


def _write_slurm_programs(directory: Path, node_list: list[dict[str, Any]]) -> None:
    """topology.conf (racks), the health check's engine, and each node's own HealthCheckProgram, Prolog and
    Epilog under its /sim (what slurm.conf names, as a site installs them on every node)."""
    p = _paths(directory)
    rack_of = _rack_of(node_list)
    if rack_of:
        (p["slurm"] / "topology.conf").write_text(slurmconf.topology_conf(rack_of))
    engine = p["slurm"] / "healthcheck.py"
    shutil.copyfile(HEALTHCHECK_SOURCE, engine)
    for node in node_list:
        root = p["nodes"] / node["name"] / "root"
        texts = slurmconf.job_hooks(node["settings"].get("slurm") or {})
        texts[slurmconf.HEALTHCHECK_PATH] = slurmconf.healthcheck_program(
            node["provider"]["health_check"], str(engine), node["state"]["slurm"]["gres_count"],
            str(p["slurm"] / "slurm.conf"))
        for path, text in texts.items():
            target = root / path.removeprefix("/sim/")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
            target.chmod(0o755)


def _rack_of(node_list: list[dict[str, Any]]) -> dict[str, str]:
    settings = node_list[0]["settings"] if node_list else {}
    return slurmconf.rack_of(settings.get("racks"), {n["name"]: n["settings"].get("rack") for n in node_list},
                             [n["name"] for n in node_list])


def _sshd_config(directory: Path, node: dict[str, Any], slurm_conf: Path) -> str:
    p = _paths(directory)
    nd = p["nodes"] / node["name"]
    return "\n".join(
        [
            f"ListenAddress {node['address']}:22",
            f"HostKey {p['ssh'] / 'ssh_host_ed25519_key'}",
            f"PidFile {nd / 'sshd.pid'}",
            "PermitRootLogin prohibit-password",
            "PubkeyAuthentication yes",
            "PasswordAuthentication no",
            "KbdInteractiveAuthentication no",
            "UsePAM no",
            f"AuthorizedKeysFile {p['ssh'] / 'authorized_keys'}",
            "StrictModes no",
            f"SetEnv SIMNODE={node['name']} SIMNODE_ROOT=/sim SLURM_CONF={slurm_conf} PATH={NODE_PATH} "
            f"{NODE_MCA_ENV}",
            "Subsystem sftp /usr/lib/openssh/sftp-server",
            "LogLevel ERROR",
            "MaxStartups 100:30:200",
            "MaxSessions 50",
            "",
        ]
    )


# What the generated inventory gives the performance roles (group_vars/gpu_nodes.yml beside inventory.ini): sizes
# for a CPU, which is what PyTorch measures here, and fabric runs short enough for a test; -e overrides any.
SIM_BENCHMARK_VARS: dict[str, Any] = {
    "clustereval_gpu_compute_warmup": 1, "clustereval_gpu_compute_iters": 3,
    "clustereval_gpu_compute_gemm_shape": "512x512x512",
    "clustereval_gpu_compute_mamf_m": [256, 512], "clustereval_gpu_compute_mamf_n": [256, 512],
    "clustereval_gpu_compute_mamf_k": [512], "clustereval_gpu_compute_gemv_shape": "4096x1024",
    "clustereval_gpu_compute_moe_models": [{"name": "tiny", "hidden": 512, "intermediate": 128, "experts": 8,
                                            "top_k": 2}],
    "clustereval_gpu_compute_moe_tokens": [16, 64], "clustereval_gpu_compute_copy_mib": 16,
    "clustereval_gpu_compute_flush_mib": 16,
    "clustereval_network_nccl_max_bytes": "1G", "clustereval_network_nccl_iters": 2,
    "clustereval_network_nccl_warmup": 1, "clustereval_network_nccl_timeout_s": 60,
    "clustereval_network_torchdist_max_bytes": 65536, "clustereval_network_torchdist_iters": 2,
    "clustereval_network_rdma_tools": ["ib_write_bw", "ib_write_lat"], "clustereval_network_rdma_memory": ["host"],
    "clustereval_network_rdma_duration_s": 1,
    "clustereval_storage_tier_clients": [1], "clustereval_storage_tier_size_mib": 8,
    "clustereval_storage_tier_runtime_s": 1,
    # storage endurance: one client, 8 MiB files, 3 s sequential then 3 s random mixed in 1 s intervals, the first
    # second the reference
    "clustereval_storage_endurance_clients": [1], "clustereval_storage_endurance_size_mib": 8,
    "clustereval_storage_endurance_seq_s": 3, "clustereval_storage_endurance_rand_s": 3,
    "clustereval_storage_endurance_interval_s": 1, "clustereval_storage_endurance_reference_s": 1,
    # datagen: two writers per node, 4 MiB blobs and 2000-row Parquet files for 3 s per tier
    "clustereval_storage_datagen_writers": 2, "clustereval_storage_datagen_blob_mib": 4,
    "clustereval_storage_datagen_parquet_rows": 2000, "clustereval_storage_datagen_parquet_columns": 8,
    "clustereval_storage_datagen_duration_s": 3, "clustereval_storage_datagen_max_gib": 1,
    # metadata: two processes per node, 300 small files and 30 directories each, no phase longer than 5 s
    "clustereval_storage_metadata_clients": 2, "clustereval_storage_metadata_files": 300,
    "clustereval_storage_metadata_dirs": 30, "clustereval_storage_metadata_phase_limit_s": 5,
    # checkpoint: one rank per node (each starts its own PyTorch: two cores), 8 MiB of 4 tensors each
    "clustereval_storage_checkpoint_ranks_per_node": 1, "clustereval_storage_checkpoint_size_mib": 8,
    "clustereval_storage_checkpoint_tensors": 4, "clustereval_storage_checkpoint_timeout_s": 300,
    # lifecycle: one warm import per tier, and no WAN transfers or model downloads (the host's uplink, not the sim's)
    "clustereval_lifecycle_import_repeats": 1, "clustereval_lifecycle_sample_hosts": 1,
    # the scratch tier alone: every tier copies the 700 MB torch environment onto itself, on every node
    "clustereval_lifecycle_tiers": [{"name": "scratch", "path": "/sim/scratch"}],
    "clustereval_lifecycle_endpoints": [], "clustereval_lifecycle_models": [],
    # burn-in and sustained collectives: seconds, not hours (PyTorch starting on three nodes of two shared cores takes
    # most of ten); a small GEMM, 64 KiB messages, polls every second
    "clustereval_burnin_duration_s": 20, "clustereval_burnin_sustained_duration_s": 10,
    "clustereval_burnin_poll_s": 1, "clustereval_burnin_gemm_size": 256, "clustereval_burnin_window_s": 1,
    "clustereval_burnin_counters_interval_s": 1, "clustereval_burnin_collective_bytes": 65536,
    "clustereval_burnin_op_timeout_s": 30,
    # front-end mesh under load: 2 s of iperf3 and 5 pings per pair
    "clustereval_burnin_frontend_duration_s": 2, "clustereval_burnin_frontend_ping_count": 5,
    # the burn-in's collective loop: one rank per node (the shim's 8 GPUs are this host's 2 cores)
    "clustereval_burnin_collective_ranks_per_node": 1,
    # object storage endurance: 6 s of the mixed load in 2 s samples, two workers, 64 KiB objects
    "clustereval_object_storage_endurance_duration_s": 6, "clustereval_object_storage_endurance_interval_s": 2,
    "clustereval_object_storage_endurance_concurrency": 2, "clustereval_object_storage_endurance_object_kib": 64,
    # Slurm orchestration churn: ten trivial jobs (and an array of ten), a minute at most for any of them to finish
    "clustereval_orchestration_slurm_jobs": 10, "clustereval_orchestration_slurm_wait_s": 60,
    # Kubernetes churn: three GPU pods in turn, seconds to be Ready or deleted (a stuck delete is found in 5 s)
    "clustereval_orchestration_k8s_rounds": 3, "clustereval_orchestration_k8s_ready_timeout_s": 30,
    "clustereval_orchestration_k8s_delete_timeout_s": 5,
    # Kubernetes sandbox batches: two that fit and one that cannot (16 pods of 40 CPUs on nodes of 222 allocatable)
    "clustereval_orchestration_k8s_sandbox_batches": [2, 4, 16], "clustereval_orchestration_k8s_sandbox_cpu": "40",
    "clustereval_orchestration_k8s_sandbox_ready_timeout_s": 8,
    "clustereval_orchestration_k8s_sandbox_delete_timeout_s": 10,
    "clustereval_orchestration_k8s_sandbox_tolerate": ["nvidia.com/gpu"],  # the simulated nodes are all GPU nodes
    "clustereval_orchestration_k8s_pvc_rounds": 3, "clustereval_orchestration_k8s_pvc_write_mib": 4,
    "clustereval_orchestration_k8s_pvc_bind_timeout_s": 20, "clustereval_orchestration_k8s_pvc_pod_timeout_s": 20,
    "clustereval_orchestration_k8s_pvc_cleanup_timeout_s": 10,
}


def _write_group_vars(directory: Path, rack_of: dict[str, str]) -> None:
    """``group_vars/gpu_nodes.yml`` beside the inventory: the small benchmark sizes, the PyTorch of the
    environment that brought the cluster up when it has one (as a site points the role at its own), and the
    profile's racks as ``clustereval_audit_rack_of`` (what topology.conf is written from, as a site's)."""
    values = dict(SIM_BENCHMARK_VARS)
    if rack_of:
        values["clustereval_audit_rack_of"] = rack_of
    if importlib.util.find_spec("torch") is not None and Path(sys.prefix, "bin", "python").exists():
        values["clustereval_gpu_compute_venv"] = sys.prefix
    folder = directory / "group_vars"
    folder.mkdir(exist_ok=True)
    (folder / "gpu_nodes.yml").write_text("---\n" + "".join(f"{k}: {json.dumps(v)}\n" for k, v in values.items()))


def login_user(nodes: list[dict[str, Any]]) -> str:
    """The user the inventory logs in as: the profile's evaluation account (overlays/accounts.py), else root."""
    account = accounts_overlay.evaluator(nodes[0]["settings"]) if nodes else None
    return account["user"] if account else "root"


def _hand_home_to_evaluator(directory: Path, node: dict[str, Any]) -> None:
    """Give the evaluation account its home directory in the node's overlay, let it reach munge's socket
    (srun as that user) and read the cluster's authorized_keys (sshd reads it as the user logging in); the
    keys, the socket itself and every other file stay root's."""
    owner = accounts_overlay.home_owner(node["settings"])
    if owner is None:
        return
    home, uid = owner
    blocked = [str(d) for d in [directory, *directory.parents] if not d.stat().st_mode & stat.S_IXOTH]
    if blocked:  # its sshd reads authorized_keys, and its /sim/bin links into D/shims, as the user
        raise SimError(f"the evaluation account cannot reach {directory}: {blocked[-1]} is closed to other "
                       "users (mode without o+x); put the cluster in a directory every user can traverse")
    gid = next((int(line.split(":")[3]) for line in Path("/etc/passwd").read_text().splitlines()
                if line.split(":")[2:3] == [str(uid)]), uid)
    top = _paths(directory)["nodes"] / node["name"] / "overlay" / home.lstrip("/")
    top.mkdir(parents=True, exist_ok=True)
    for path in [top, *top.rglob("*")]:
        os.lchown(path, uid, gid)
    _paths(directory)["munge"].chmod(0o711)
    (_paths(directory)["ssh"] / "authorized_keys").chmod(0o644)


def _host_account(nodes: list[dict[str, Any]]) -> str | None:
    """The evaluation account on the host too, where slurmctld (which runs there) resolves the users it
    signs job credentials for; returns its name when this cluster created it (``down`` removes it then).
    Its password is ``*``: no password, but not locked (sshd refuses logins to a locked account)."""
    account = accounts_overlay.evaluator(nodes[0]["settings"]) if nodes else None
    if account is None or subprocess.run(["getent", "passwd", account["user"]], capture_output=True).returncode == 0:
        return None
    _run(["useradd", "-M", "-U", "-u", str(account["uid"]), "-d", account["home"], "-s", "/bin/bash", "-p", "*",
          "-c", "clustereval evaluation account", account["user"]])
    return account["user"]


def _remove_host_account(state: dict[str, Any]) -> None:
    user = state.pop("host_account", None)
    if user:
        subprocess.run(["userdel", user], capture_output=True)


def _inventory(directory: Path, nodes: list[dict[str, Any]]) -> str:
    key = _paths(directory)["ssh"] / "id_ed25519"
    lines = ["[gpu_nodes]"]
    lines += [f"{n['name']} ansible_host={n['address']}" for n in nodes]
    lines += [
        "",
        "[gpu_nodes:vars]",
        f"ansible_user={login_user(nodes)}",
        f"ansible_ssh_private_key_file={key}",
        "ansible_python_interpreter=/usr/bin/python3",
        "ansible_ssh_common_args='-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null "
        "-o LogLevel=ERROR'",
        "clustereval_storage_scratch_dir=/sim/scratch",
        "",
    ]
    return "\n".join(lines)


# Each tool is a small launcher that imports its shim as a module: the bytecode is compiled once at `up`
# (a script run as __main__ is recompiled on every call), and -I -S skips site-packages, as the shims use
# the standard library only. Fifteen shim calls per node per audit make this the sim's main CPU cost.
# SIGPIPE is left to kill the process, as it kills the C tools (`nvidia-smi -q | head`).
SHIM_LAUNCHER = """#!/usr/bin/python3 -IS
import signal
import sys
signal.signal(signal.SIGPIPE, signal.SIG_DFL)
sys.path.insert(0, {lib!r})
from {module} import main
sys.exit(main(sys.argv[1:]))
"""


def _install_shims(directory: Path) -> None:
    """Put every shim module in the cluster's shim dir, byte-compiled, each behind its tool's launcher."""
    shim_dir = _paths(directory)["shims"]
    shim_dir.mkdir(exist_ok=True)
    for source in SHIM_SOURCES.glob("*.py"):  # a shim may import another (nvidia-smi's topo front)
        shutil.copyfile(source, shim_dir / source.name)
    for tool, source in {**SHIMS, **overlays.shims()}.items():
        target = shim_dir / tool
        target.write_text(SHIM_LAUNCHER.format(lib=str(shim_dir), module=source.removesuffix(".py")))
        target.chmod(0o755)
    compileall.compile_dir(shim_dir, maxlevels=0, quiet=1)


def _prepare_node_root(directory: Path, node: dict[str, Any]) -> None:
    """The node's private ``/sim``: node.json, kmsg, scratch and a bin dir with the shims it has."""
    root = _paths(directory)["nodes"] / node["name"] / "root"
    (root / "bin").mkdir(parents=True, exist_ok=True)
    (root / "scratch").mkdir(exist_ok=True)
    (root / "node.json").write_text(json.dumps(node["state"], indent=1))
    (root / "kmsg").write_text("".join(line + "\n" for line in node["state"]["xid"]))
    node["mounts"] = overlays.build(node["settings"], node["state"], root.parent) + _node_system(directory, node)
    nd = root.parent
    (nd / "empty").mkdir(exist_ok=True)
    if not (nd / "kmsg.fifo").exists():
        os.mkfifo(nd / "kmsg.fifo", 0o622)
    (root / "power").mkdir(exist_ok=True)
    (root / "provider.json").write_text(json.dumps(
        {**node["provider"], "node": node["name"], "slurm_conf": str(_paths(directory)["slurm"] / "slurm.conf"),
         "ground_truth": str(nd / GROUND_TRUTH)}, indent=1))
    with contextlib.suppress(FileNotFoundError):
        (nd / GROUND_TRUTH).unlink()
    fresh_boot(directory, node["name"], node["state"], booted_at=time.time() - 3600, clear_kmsg=False)
    (nd / "boot.json").write_text(json.dumps(
        {k: node[k] for k in ("name", "address", "slurmd_port", "state", "settings", "provider", "mounts")}))
    for tool in {**SHIMS, **overlays.shims()}:
        link = root / "bin" / tool
        with contextlib.suppress(FileNotFoundError):
            link.unlink()
        if tool == "nvidia-smi" and node["state"]["nvidia_smi"] == "missing":
            continue
        if tool in amd.absent_tools(node["state"]):  # the other vendor's tools
            continue
        if tool in software_tools.missing(node["settings"]):
            continue
        optional = OPTIONAL_TOOLS.get(SHIMS.get(tool, ""))
        if optional and (node["state"].get("fabric") or {}).get("tools", {}).get(optional) == "missing":
            continue
        link.symlink_to(_paths(directory)["shims"] / tool)


def _node_system(directory: Path, node: dict[str, Any]) -> list[str]:
    """The node's own machine (overlays/system.py): ``/sim/system.json`` for its uname, systemd-detect-virt and
    ip shims, the symlinks of its overlay, and the boot lines that lay its /proc files over the machine's and
    mount its spool disk at the SlurmdSpoolDir slurm.conf gives it."""
    nd = _paths(directory)["nodes"] / node["name"]
    settings, state = node["settings"], node["state"]
    (nd / "root" / system_overlay.VIEW_FILE).write_text(json.dumps(system_overlay.view(settings, state)))
    for path, target in system_overlay.links(settings, state).items():
        link = nd / "overlay" / path.lstrip("/")
        link.parent.mkdir(parents=True, exist_ok=True)
        if not link.is_symlink():
            link.symlink_to(target)
    return (system_overlay.proc_mounts(settings, nd)
            + system_overlay.spool_mounts(settings, nd, _slurmd_spool_dir(directory, node["name"])))


def _slurmd_spool_dir(directory: Path, name: str) -> str | None:
    """The node's SlurmdSpoolDir as the written slurm.conf says (``%n``/``%h`` are the node's name)."""
    with contextlib.suppress(OSError):
        for line in (_paths(directory)["slurm"] / "slurm.conf").read_text().splitlines():
            key, _, value = line.partition("=")
            if key.strip() == "SlurmdSpoolDir":
                return value.strip().replace("%n", name).replace("%h", name)
    return None


def fresh_boot(directory: Path, name: str, node_state: dict[str, Any], booted_at: float | None = None,
               clear_kmsg: bool = True) -> dict[str, Any]:
    """What a (re)boot gives a node before its first process starts: a new boot id, an empty kernel ring
    buffer (``/sim/kmsg``), an empty ``/sim/run`` (tmpfs on a real node: lost GPUs and DCGM injections are
    gone) and every PCI config space at its reset value. Returns the boot record (``D/nodes/N/boot-state.json``)."""
    nd = _paths(directory)["nodes"] / name
    root = nd / "root"
    boot = {"boot_id": str(uuid.uuid4()), "booted_at": time.time() if booted_at is None else booted_at}
    (nd / "boot_id").write_text(boot["boot_id"] + "\n")
    if clear_kmsg:
        (root / "kmsg").write_text("")
    shutil.rmtree(root / "run", ignore_errors=True)
    (root / "run").mkdir()
    with contextlib.suppress(FileNotFoundError):
        (root / "power" / "request").unlink()
    pcisysfs.build(node_state, nd / "pci")
    (nd / "boot-state.json").write_text(json.dumps(boot))
    return boot


def record_event(directory: str | Path, node: str, event: str, **fields: Any) -> None:
    """Append one ground-truth event (``{"t": time.time(), "event": …, …}``) to the node's log."""
    path = Path(directory) / "nodes" / node / GROUND_TRUTH
    line = json.dumps({"t": time.time(), "node": node, "event": event, **fields}) + "\n"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


def ground_truth(directory: str | Path, node: str) -> list[dict[str, Any]]:
    """Every event the simulation caused or observed on ``node``, oldest first (see docs/sim.md)."""
    path = Path(directory).resolve() / "nodes" / node / GROUND_TRUTH
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return []
    events = []
    for line in lines:
        with contextlib.suppress(ValueError):
            events.append(json.loads(line))
    return sorted(events, key=lambda e: e.get("t", 0))


# ----------------------------------------------------------------------------------------- public API


def _slurm_env(directory: Path) -> dict[str, str]:
    return {**os.environ, "SLURM_CONF": str(_paths(directory)["slurm"] / "slurm.conf")}


def _wait(predicate: Any, timeout: float, interval: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return predicate()


def _sinfo_states(directory: Path) -> dict[str, tuple[str, str]]:
    """``{node: (state, reason)}`` from the cluster's own ``sinfo``."""
    try:
        out = subprocess.run(
            ["sinfo", "-h", "-N", "-o", "%N|%t|%E"],
            env=_slurm_env(directory),
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return {}
    states = {}
    for line in out.splitlines():
        parts = line.split("|", 2)
        if len(parts) == 3:
            states[parts[0]] = (parts[1], parts[2])
    return states


def check_nodes(prof: dict[str, Any], nodes: int) -> None:
    """Before ``up`` acts, find every problem an ``nodes``-node cluster has with a loaded profile: overrides for
    nodes it does not have, and what rendering each node trips over that the profile's own checks cannot see
    (a GPU index or a rail the node lacks once its settings are merged); one ProfileError lists them all."""
    problems = unknown_node_problems(prof, nodes)
    for name in node_names(nodes):
        problems += check_problems(name, render_node, prof, name) + check_problems(name, provider_settings, prof, name)
    problems += check_problems("cluster.shared_fs_type", sharedfs.fs_type,
                               [node_settings(prof, name) for name in node_names(nodes)], refusal=ValueError)
    problems += check_problems("cluster.shared_fs_metadata_delay_ms", sharedfs.metadata_delay_ms,
                               [node_settings(prof, name) for name in node_names(nodes)], refusal=ValueError)
    if problems:
        raise ProfileError.listing(prof["path"], problems)


def up(directory: str | Path, nodes: int, profile: str = "reference") -> dict[str, Any]:
    """Start a simulated cluster of ``nodes`` nodes in ``directory``; returns :func:`status`.

    Whatever a previous ``up`` recorded in that directory is stopped first, so calling ``up`` twice (or
    after a crash half-way) recovers. Returns once every healthy node is ``idle`` in Slurm (drained
    and unreachable nodes as their profile says), or raises :class:`SimError` naming what did not start.
    """
    if os.geteuid() != 0:
        raise SimError("the simulated cluster needs root (namespaces, sshd, slurmd)")
    for tool in ("sshd", "slurmctld", "slurmd", "munged", "unshare", "nsenter", "ssh-keygen"):
        if not shutil.which(tool) and not Path(f"/usr/sbin/{tool}").exists():
            raise SimError(f"{tool} is not installed (apt-get install openssh-server slurm-wlm munge)")
    if nodes < 1:
        raise SimError("a simulated cluster needs at least one node")
    directory = Path(directory).resolve()
    # The whole profile is read and every node rendered before anything that may run there is touched: a bad
    # profile leaves a running cluster as it was.
    prof = load_profile(profile, nodes)
    check_nodes(prof, nodes)
    directory.mkdir(parents=True, exist_ok=True)
    down(directory)
    p = _paths(directory)
    for stale in ("slurm", "munge", "nodes", "shims", "shared", "storage", "k8s"):
        shutil.rmtree(p[stale], ignore_errors=True)
    for sub in ("state", "spool", "log", "run"):
        (p["slurm"] / sub).mkdir(parents=True, exist_ok=True)
    p["munge"].mkdir(mode=0o700)
    p["ssh"].mkdir(exist_ok=True)
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)

    slurm_name = "sim" + hashlib.sha256(str(directory).encode()).hexdigest()[:8]
    block = _pick_block(directory, nodes)
    node_list = []
    for name in node_names(nodes):
        index = int(name[4:])
        node_list.append(
            {
                "name": name,
                "address": f"{block}.{index}",
                "slurmd_port": _free_port(),
                "state": render_node(prof, name),
                "settings": node_settings(prof, name),
                "provider": provider_settings(prof, name),
            }
        )
    spares = {n["provider"]["remediation"]["spare"] for n in node_list} - {None}
    for node in node_list:
        if node["name"] in spares:  # the provider's spare waits drained until its automation resumes it
            node["state"]["slurm"].update(state="drain", reason="spare")
    state: dict[str, Any] = {
        "directory": str(directory),
        "profile": prof["name"],
        "profile_path": prof["path"],
        "slurm_name": slurm_name,
        "block": block,
        "started_at": time.time(),
        "ports": {"slurmctld": _free_port(), **{n["name"]: n["slurmd_port"] for n in node_list}},
        "munge_socket": str(_munge_socket(directory, slurm_name)),
        "slurm_cluster": _slurm_cluster(prof, node_list),
        "nodes": {
            n["name"]: {
                "address": n["address"],
                "unreachable": n["state"]["unreachable"],
                "expected_state": n["state"]["slurm"]["state"],
                "reason": n["state"]["slurm"]["reason"],
            }
            for n in node_list
        },
        "processes": {},
        "namespaces": {},
    }
    state["host_account"] = _host_account(node_list)
    _write_hosts(directory, state)
    state["source_addresses"] = _setup_source_addresses(state)  # before slurm.conf: it says what Slurm binds
    try:  # before any process of a node starts: they all inherit its disk throttle
        state["disk_limits"] = diskfaults.setup(state["slurm_name"], directory, {
            n["name"]: caps for n in node_list if (caps := diskfaults.wanted(n["settings"].get("faults") or {}))})
    except OSError as exc:
        _write_state(directory, state)
        raise SimError(f"the profile asks for a slow disk (disk_read_mbps/disk_write_mbps) and this machine "
                       f"cannot throttle one: {exc}") from None
    _write_state(directory, state)

    # ssh identity: one client key (the inventory's) and one host key for the whole cluster
    for key in ("id_ed25519", "ssh_host_ed25519_key"):
        if not (p["ssh"] / key).exists():
            _run(
                [
                    "ssh-keygen",
                    "-q",
                    "-t",
                    "ed25519",
                    "-N",
                    "",
                    "-C",
                    f"clustereval-{slurm_name}",
                    "-f",
                    str(p["ssh"] / key),
                ]
            )
    (p["ssh"] / "authorized_keys").write_text((p["ssh"] / "id_ed25519.pub").read_text())
    (p["ssh"] / "authorized_keys").chmod(0o600)

    dev_dir = _device_dir(directory, slurm_name)
    state["device_dir"] = str(dev_dir)
    _make_devices(dev_dir, max([n["state"]["slurm"]["gres_count"] for n in node_list] + [1]))
    conf = p["slurm"] / "slurm.conf"
    conf.write_text(_slurm_conf(directory, state, node_list, dev_dir))
    (p["slurm"] / "gres.conf").write_text(_gres_conf(node_list, dev_dir))
    _install_shims(directory)
    for node in node_list:
        (p["nodes"] / node["name"]).mkdir(parents=True, exist_ok=True)
        _prepare_node_root(directory, node)
        _hand_home_to_evaluator(directory, node)
    _write_slurm_programs(directory, node_list)
    p["inventory"].write_text(_inventory(directory, node_list))
    _write_group_vars(directory, _rack_of(node_list))

    # munge: own key, socket, pid, log and seed, so clusters never share credentials
    key = p["munge"] / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o400)
    munge_log = p["munge"] / "munged.log"
    proc = subprocess.Popen(
        [
            "munged",
            "--foreground",
            "--force",
            f"--socket={state['munge_socket']}",
            f"--key-file={key}",
            f"--pid-file={p['munge'] / 'munged.pid'}",
            f"--log-file={munge_log}",
            f"--seed-file={p['munge'] / 'munged.seed'}",
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=open(munge_log, "ab"),  # noqa: SIM115
        start_new_session=True,
    )
    _record(directory, state, "munged", proc.pid)
    if not _wait(lambda: Path(state["munge_socket"]).exists() or proc.poll() is not None, 10):
        pass
    if proc.poll() is not None or not Path(state["munge_socket"]).exists():
        raise SimError(f"munged did not start; log {munge_log}:\n{_tail(munge_log)}")

    # sshd per node, each in its own UTS + mount namespace
    sshd_procs = {}
    for node in node_list:
        if node["state"]["unreachable"]:
            continue
        nd = p["nodes"] / node["name"]
        (nd / "sshd_config").write_text(_sshd_config(directory, node, conf))
        sshd_procs[node["name"]] = start_sshd(directory, state, node)

    # slurmctld (clean state: a re-up must not inherit drains from the last run), on the host or, when the
    # profile puts it on a compute node, inside that node's namespaces once its sshd made them
    ctl_log = p["slurm"] / "log" / "slurmctld.log"
    env = _slurm_env(directory)
    ctl_node = _controller(state)[2]
    if ctl_node:
        await_sshd(directory, state, next(n for n in node_list if n["name"] == ctl_node), sshd_procs[ctl_node])
    ctl = start_slurmctld(directory, state, sshd_procs[ctl_node].pid if ctl_node else None, clean=True)
    _register_block(directory, state)

    for name, proc in sshd_procs.items():
        if name != ctl_node:
            await_sshd(directory, state, next(n for n in node_list if n["name"] == name), proc)
    _write_state(directory, state)

    if not _wait(
        lambda: (
            ctl.poll() is not None
            or subprocess.run(["scontrol", "ping"], env=env, capture_output=True, text=True).stdout.count(
                "UP"
            )
            > 0
        ),
        15,
        0.1,
    ):
        raise SimError(f"slurmctld did not answer; log {ctl_log}:\n{_tail(ctl_log)}")
    if ctl.poll() is not None:
        raise SimError(f"slurmctld exited ({ctl.returncode}); log {ctl_log}:\n{_tail(ctl_log)}")

    for name, proc in sshd_procs.items():
        start_slurmd(directory, state, name, proc.pid)

    for node in node_list:
        if node["name"] in sshd_procs:
            _start_exporters(directory, state, node, sshd_procs[node["name"]].pid)
    _mount_shared_fs(directory, state, node_list, {name: proc.pid for name, proc in sshd_procs.items()})
    slow = {n["address"]: n["settings"]["faults"]["network_slow"] or {} for n in node_list
            if "network_slow" in n["settings"].get("faults", {})}
    try:
        state["network_faults"] = netfaults.apply(slurm_name, slow)
    except netfaults.NetFaultError as exc:
        raise SimError(str(exc)) from None
    _write_state(directory, state)

    for node in node_list:
        s = node["state"]["slurm"]
        if not node["state"]["unreachable"] and s["state"].startswith("drain"):
            subprocess.run(
                [
                    "scontrol",
                    "update",
                    f"nodename={node['name']}",
                    "state=drain",
                    f"reason={s['reason'] or 'drained by profile'}",
                ],
                env=env,
                capture_output=True,
            )
    if any((n["settings"].get("k8s") or {}).get("enabled") for n in node_list):
        kubectl_env(directory)  # D/k8s/bin: kubectl and helm for the host
    start_power_daemon(directory, state)
    _wait_ready(directory, state, node_list)
    for name in sshd_procs:
        record_event(directory, name, "sshd_up", boot="initial")
        record_event(directory, name, "slurmd_up", boot="initial")
    return status(directory)


def boot_script(directory: Path, node: dict[str, Any]) -> str:
    """The shell line that makes a node's namespace and execs its sshd (run by ``unshare``): hostname, the
    node's /sim, its overlays, its boot id, its /dev/kmsg (a FIFO the power daemon reads), its PCI sysfs."""
    nd = _paths(directory)["nodes"] / node["name"]
    q = shlex.quote
    steps = [f"hostname {node['name']}", "mkdir -p /sim", f"mount --bind {q(str(nd / 'root'))} /sim",
             *node.get("mounts", []),
             f"mount --bind {q(str(nd / 'boot_id'))} /proc/sys/kernel/random/boot_id",
             f"{{ [ ! -e /dev/kmsg ] || mount --bind {q(str(nd / 'kmsg.fifo'))} /dev/kmsg; }}",
             f"mount --bind {q(str(nd / 'pci'))} /sys/bus/pci",
             f"{{ [ ! -d /proc/bus/pci ] || mount --bind {q(str(nd / 'empty'))} /proc/bus/pci; }}",
             _hosts_mount(directory)]
    return (" && ".join(steps) + f" && exec setpriv --bounding-set {NODE_DROPPED_CAPS} /usr/sbin/sshd -D "
            f"-f {q(str(nd / 'sshd_config'))} -E {q(str(nd / 'sshd.log'))}")


def _hosts_mount(directory: Path) -> str:
    """The shell line laying the cluster's hosts file over /etc/hosts (last: above any /etc overlay, whose own
    lines, such as the evaluator account's ``127.0.1.1 nodeK``, would make the node's name resolve elsewhere)."""
    return f"mount --bind {shlex.quote(str(_paths(directory)['slurm'] / 'hosts'))} /etc/hosts"


def start_sshd(directory: Path, state: dict[str, Any], node: dict[str, Any]) -> subprocess.Popen:
    """A fresh UTS + mount namespace for the node with its sshd (recorded as ``sshd:NODE``)."""
    nd = _paths(directory)["nodes"] / node["name"]
    proc = subprocess.Popen(
        _in_node_cgroup(state, node["name"], ["unshare", "--uts", "--mount", "--propagation", "private", "sh", "-c",
                                              boot_script(directory, node)]),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=open(nd / "sshd.log", "ab"),  # noqa: SIM115
        start_new_session=True,
    )
    _record(directory, state, f"sshd:{node['name']}", proc.pid)
    return proc


def await_sshd(directory: Path, state: dict[str, Any], node: dict[str, Any], proc: subprocess.Popen) -> None:
    """Wait until the node's sshd listens, then record its namespaces (raises SimError naming the log)."""
    name = node["name"]
    log = _paths(directory)["nodes"] / name / "sshd.log"
    if not _wait(lambda: proc.poll() is not None or not _address_free(node["address"]), 10):
        raise SimError(f"sshd of {name} did not listen on {node['address']}:22; log {log}:\n{_tail(log)}")
    if proc.poll() is not None:
        raise SimError(f"sshd of {name} exited ({proc.returncode}); log {log}:\n{_tail(log)}")
    state["namespaces"][name] = [_namespace(proc.pid, "mnt"), _namespace(proc.pid, "uts")]
    _write_state(directory, state)


def _slurm_cluster(prof: dict[str, Any], node_list: list[dict[str, Any]]) -> dict[str, Any]:
    """The profile's cluster-wide Slurm settings (``cluster.slurm``: controller, timeouts, job defaults) and the
    racks (node -> rack); a controller that is not a reachable node of this cluster is refused."""
    from clustereval.sim.profile import SLURM_CLUSTER_KEYS

    cluster_slurm = {k: v for k, v in (prof["cluster"].get("slurm") or {}).items() if k in SLURM_CLUSTER_KEYS}
    ctl = cluster_slurm.get("controller")
    names = {n["name"]: n for n in node_list}
    if ctl and (ctl not in names or names[ctl]["state"]["unreachable"]):
        raise SimError(f"profile {prof['name']}: cluster.slurm.controller {ctl} is not a reachable node of this "
                       f"{len(node_list)}-node cluster")
    return {**cluster_slurm, "racks": _rack_of(node_list)}


def start_slurmctld(directory: Path, state: dict[str, Any], ns_pid: int | None,
                    clean: bool = False) -> subprocess.Popen:
    """slurmctld (recorded as ``slurmctld``): on the host, or entered into a compute node's namespaces (``ns_pid``,
    its sshd), where its hostname is the node's, as a site running the controller on a compute node has it.
    ``clean``: without the saved state (a fresh ``up``); a restart after the node's reboot keeps it."""
    p = _paths(directory)
    log = p["slurm"] / "log" / "slurmctld.log"
    command = ["slurmctld", "-D", *(["-c"] if clean else []), "-f", str(p["slurm"] / "slurm.conf")]
    if ns_pid:
        command = _in_node_cgroup(state, _controller(state)[2], ["nsenter", "-t", str(ns_pid), "--uts", "--mount",
                                                                 *command])
    else:  # a mount namespace of its own, where the host's name resolves to the controller's address it binds
        command = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
                   f"{_hosts_mount(directory)} && exec {shlex.join(command)}"]
    proc = subprocess.Popen(
        command,
        env=_slurm_env(directory),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=open(log, "ab"),  # noqa: SIM115
        start_new_session=True,
    )
    _record(directory, state, "slurmctld", proc.pid)
    return proc


def start_slurmd(directory: Path, state: dict[str, Any], name: str, ns_pid: int) -> subprocess.Popen:
    """The node's slurmd, entered into its namespaces (recorded as ``slurmd:NODE``)."""
    p = _paths(directory)
    log = p["slurm"] / "log" / f"slurmd-{name}.log"
    proc = subprocess.Popen(
        _in_node_cgroup(state, name, ["nsenter", "-t", str(ns_pid), "--uts", "--mount", "setpriv", "--bounding-set",
                                      NODE_DROPPED_CAPS, "slurmd", "-D", "-N", name,
                                      "-f", str(p["slurm"] / "slurm.conf")]),
        env=_slurm_env(directory),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=open(log, "ab"),  # noqa: SIM115
        start_new_session=True,
    )
    _record(directory, state, f"slurmd:{name}", proc.pid)
    return proc


def start_power_daemon(directory: Path, state: dict[str, Any]) -> None:
    """The cluster's BMC and kernel-message reader (sim/power.py), recorded as ``power``."""
    log = directory / "power.log"
    ready = directory / "power.ready"
    with contextlib.suppress(FileNotFoundError):
        ready.unlink()
    proc = subprocess.Popen(
        [sys.executable, "-m", "clustereval.sim.power", str(directory)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=open(log, "ab"),  # noqa: SIM115
        start_new_session=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )
    _record(directory, state, "power", proc.pid)
    if not _wait(lambda: ready.exists() or proc.poll() is not None, 10) or proc.poll() is not None:
        raise SimError(f"the power daemon did not start; log {log}:\n{_tail(log)}")


def _start_exporters(directory: Path, state: dict[str, Any], node: dict[str, Any], ns_pid: int) -> None:
    """dcgm-exporter (NVIDIA nodes) or amd-metrics-exporter (AMD nodes; the shims) and, when installed, the real
    Prometheus node exporter, inside the node's namespaces and listening on its own address; a profile fault
    ``exporters_missing`` leaves some out."""
    missing = set(node["settings"].get("faults", {}).get("exporters_missing") or [])
    root = _paths(directory)["nodes"] / node["name"] / "root"
    commands = []
    if "dcgm-exporter" not in missing and node["state"]["gpus"] and node["state"]["nvidia_smi"] != "missing":
        commands.append(("dcgm-exporter", [str(root / "bin" / "dcgm-exporter"), "-a", f"{node['address']}:9400",
                                           "--hpc-job-mapping-dir", JOB_MAP_DIR]))
    if "amd-metrics-exporter" not in missing and node["state"].get("amd"):
        # it serves on every address, port 5000 (its default): the node's own address here (a shared network)
        commands.append(("amd-metrics-exporter", [str(root / "bin" / "amd-metrics-exporter"),
                                                  "-amd-metrics-config", "/etc/metrics/config.json"]))
    if "node-exporter" not in missing and Path(NODE_EXPORTER).exists():
        commands.append(("node-exporter", [NODE_EXPORTER, f"--web.listen-address={node['address']}:9100",
                                           "--collector.disable-defaults", "--collector.loadavg"]))
    for label, argv in commands:
        log = _paths(directory)["nodes"] / node["name"] / f"{label}.log"
        proc = subprocess.Popen(
            _in_node_cgroup(state, node["name"], ["nsenter", "-t", str(ns_pid), "--uts", "--mount", *argv]),
            env={"PATH": NODE_PATH, "SIMNODE_ROOT": "/sim", "SIMNODE_LISTEN_ADDRESS": node["address"]},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=open(log, "ab"),  # noqa: SIM115
            start_new_session=True,
        )
        _record(directory, state, f"{label}:{node['name']}", proc.pid)


def _mount_shared_fs(directory: Path, state: dict[str, Any], node_list: list[dict[str, Any]],
                     ns_pids: dict[str, int]) -> None:
    """Start the storage the profile asks for (``shared_fs_type``: GlusterFS in a network namespace of its own,
    or the SSHFS storage host) and mount its export on every node that wants it (sim/sharedfs.py)."""
    p = _paths(directory)
    wanted = {n["name"]: sharedfs.mount_point(n["settings"]) for n in node_list if n["name"] in ns_pids}
    wanted = {name: point for name, point in wanted.items() if point}
    if not wanted:
        return
    kind, why = sharedfs.choose(sharedfs.fs_type([n["settings"] for n in node_list]))
    delay = sharedfs.metadata_delay_ms([n["settings"] for n in node_list])
    if delay and kind != "glusterfs":  # a profile asking for slow metadata must not get a fast shared home
        raise SimError(f"the profile asks for a metadata-starved shared filesystem (shared_fs_metadata_delay_ms) "
                       f"and only GlusterFS makes one: {why}")
    if kind is None:
        state["shared_fs"] = {"error": why}
        _write_state(directory, state)
        return
    p["shared"].mkdir(mode=0o755)
    p["storage"].mkdir()
    address = (_start_gluster(directory, state, delay) if kind == "glusterfs"
               else _start_storage_sshd(directory, state))
    state["shared_fs"] = {**(state.get("shared_fs") or {}), "type": kind, "fstype": sharedfs.FSTYPES[kind],
                          "server": address, "export": str(p["shared"]), "mounts": wanted,
                          **({"note": why} if why else {}), **({"metadata_delay_ms": delay} if delay else {})}
    _write_state(directory, state)
    mounts = {name: start_shared_mount(directory, state, name, point, ns_pids[name])
              for name, point in wanted.items()}
    for name, proc in mounts.items():
        await_shared_mount(directory, state, name, wanted[name], proc)


def _start_storage_sshd(directory: Path, state: dict[str, Any]) -> str:
    """The SSHFS storage host: an sshd on the block's .254 serving ``D/shared`` over SFTP; returns its address."""
    p = _paths(directory)
    address = f"{state['block']}.{sharedfs.STORAGE_HOST_INDEX}"
    config = p["storage"] / "sshd_config"
    config.write_text(sharedfs.server_config(address, p["ssh"] / "ssh_host_ed25519_key",
                                             p["ssh"] / "authorized_keys", p["storage"] / "sshd.pid"))
    log = p["storage"] / "sshd.log"
    server = subprocess.Popen(["/usr/sbin/sshd", "-D", "-f", str(config), "-E", str(log)],
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=open(log, "ab"), start_new_session=True)  # noqa: SIM115
    _record(directory, state, "sshd:storage", server.pid)
    if not _wait(lambda: server.poll() is not None or not _address_free(address), 10) or server.poll() is not None:
        raise SimError(f"the storage host's sshd did not listen on {address}:22; log {log}:\n{_tail(log)}")
    return address


def _start_gluster(directory: Path, state: dict[str, Any], metadata_delay: float | None = None) -> str:
    """glusterd in a network and mount namespace of its own, then the one-brick volume on ``D/shared`` (its
    metadata operations held ``metadata_delay`` ms each when the profile asks); returns the address the nodes'
    clients reach it on (only inside that namespace). The namespace is recorded at once: ``down`` stops
    whatever runs in it (the brick process glusterd starts, the nodes' clients)."""
    p = _paths(directory)
    g = sharedfs.gluster_paths(p["storage"])
    address = sharedfs.gluster_address(state["block"])
    for folder in (g["workdir"], g["log"]):
        folder.mkdir(parents=True)
    g["volfile"].write_text(sharedfs.glusterd_volfile(g, address))
    log = g["base"] / "glusterd.out"
    server = subprocess.Popen(sharedfs.glusterd_command(g, address), stdin=subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL, stderr=open(log, "ab"),  # noqa: SIM115
                              start_new_session=True)
    _record(directory, state, "glusterd:storage", server.pid)
    host_netns = sharedfs.net_namespace(os.getpid())
    state["shared_fs"] = {"type": "glusterfs", "netns_pid": server.pid}

    def answers() -> bool:
        if server.poll() is not None:
            return True
        netns = sharedfs.net_namespace(server.pid)
        if netns and netns != host_netns and state["shared_fs"].get("netns") != netns:
            state["shared_fs"]["netns"] = netns
            _write_state(directory, state)
        return bool(state["shared_fs"].get("netns")) and subprocess.run(
            sharedfs.gluster_cli(g, server.pid, "volume", "list"), capture_output=True).returncode == 0

    if not _wait(answers, 20, 0.1) or server.poll() is not None:
        raise SimError(f"glusterd did not answer in its namespace; log {g['glusterd_log']}:\n{_tail(g['glusterd_log'])}"
                       f"\n{_tail(log)}")
    for argv in sharedfs.gluster_volume_commands(g, server.pid, address, p["shared"], metadata_delay):
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        if done.returncode != 0:
            raise SimError(f"`gluster {' '.join(argv[argv.index('--mode=script') + 3:])}` failed: "
                           f"{(done.stderr or done.stdout).strip()}; log {g['glusterd_log']}:\n"
                           f"{_tail(g['glusterd_log'])}")
    return address


def start_shared_mount(directory: Path, state: dict[str, Any], name: str, point: str,
                       ns_pid: int) -> subprocess.Popen:
    """Mount the cluster's shared filesystem at ``point`` inside the node's mount namespace (``sharedfs:NODE``):
    the GlusterFS client (in the storage's network namespace) or sshfs, in the foreground."""
    p = _paths(directory)
    shared = state["shared_fs"]
    node_log = p["nodes"] / name / f"{shared['type']}.log"
    if shared["type"] == "glusterfs":
        argv = sharedfs.gluster_mount_command(shared["netns_pid"], shared["server"], point, node_log)
    else:
        argv = sharedfs.mount_command(shared["server"], p["shared"], point, p["ssh"] / "id_ed25519")
    proc = subprocess.Popen(
        _in_node_cgroup(state, name, ["nsenter", "-t", str(ns_pid), "--mount", *argv]),
        env={"PATH": NODE_PATH}, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        stderr=open(node_log, "ab"), start_new_session=True)  # noqa: SIM115
    _record(directory, state, f"sharedfs:{name}", proc.pid, mount=point, kind=shared["type"])
    return proc


def await_shared_mount(directory: Path, state: dict[str, Any], name: str, point: str, proc: subprocess.Popen) -> None:
    shared = state["shared_fs"]
    fstype = sharedfs.FSTYPES[shared["type"]]
    if not _wait(lambda: proc.poll() is not None or sharedfs.mounted(proc.pid, point, fstype), 15) \
            or proc.poll() is not None:
        node_log = _paths(directory)["nodes"] / name / f"{shared['type']}.log"
        raise SimError(f"{shared['type']} did not mount {shared['server']}:{_paths(directory)['shared']} at {point} "
                       f"on {name}; log {node_log}:\n{_tail(node_log)}")


def _wait_ready(directory: Path, state: dict[str, Any], node_list: list[dict[str, Any]]) -> None:
    """Block until every reachable node has registered in the state its profile asks for."""

    def expected(node: dict[str, Any]) -> tuple[str, ...]:
        if node["state"]["slurm"]["state"].startswith("drain"):
            return ("drain", "drng")
        if node["state"]["xid"]:
            return ("idle", "drain")
        return ("idle",)

    waiting = [n for n in node_list if not n["state"]["unreachable"]]
    last: dict[str, tuple[str, str]] = {}

    def ready() -> bool:
        nonlocal last
        last = _sinfo_states(directory)
        return all(last.get(n["name"], ("?", ""))[0] in expected(n) for n in waiting)

    if _wait(ready, UP_TIMEOUT_S, 0.1):
        return
    slurm_dir = _paths(directory)["slurm"]
    problems = []
    for node in waiting:
        got = last.get(node["name"], ("missing", ""))[0]
        if got not in expected(node):
            problems.append(
                f"{node['name']} is {got!r} (want {'/'.join(expected(node))}); "
                f"slurmd log:\n{_tail(slurm_dir / 'log' / ('slurmd-' + node['name'] + '.log'))}"
            )
    raise SimError(
        "simulated nodes did not come up:\n"
        + "\n".join(problems)
        + f"\nslurmctld log:\n{_tail(slurm_dir / 'log' / 'slurmctld.log')}"
    )


def processes(directory: str | Path) -> dict[int, str]:
    """Every live process of the cluster in ``directory`` (PID -> what it is): what :func:`down` stops."""
    return _processes(_read_state(Path(directory).resolve()) or {})


def _processes(state: dict[str, Any]) -> dict[int, str]:
    """The recorded processes, the children of the nodes' sshd and slurmd, and whatever runs in the nodes'
    namespaces or cgroups."""
    targets: dict[int, str] = {}
    listeners = set()
    for key, proc in state.get("processes", {}).items():
        if pid_alive(proc["pid"], proc.get("started")):
            targets[proc["pid"]] = key
            if key.startswith(("sshd:", "slurmd:")):
                listeners.add(proc["pid"])
    for pid in _descendants(listeners):
        targets.setdefault(pid, "node child")
    namespaces = [tuple(ns) for ns in state.get("namespaces", {}).values() if all(ns)]
    for pid in _in_namespaces(namespaces) | _in_cgroups(state.get("source_addresses") or {}):  # type: ignore[arg-type]
        targets.setdefault(pid, "node process")
    for pid in sharedfs.namespace_processes(state.get("shared_fs")):  # GlusterFS: its brick, the nodes' clients
        targets.setdefault(pid, "storage process")
    return targets


def down(directory: str | Path) -> dict[str, Any]:
    """Stop every process the cluster in ``directory`` started (by recorded PID, node namespace and cgroup).

    Idempotent: with nothing running (or no state at all) it stops nothing and says so.
    """
    directory = Path(directory).resolve()
    state = _read_state(directory)
    if not state:
        return {"directory": str(directory), "stopped": [], "note": "no simulated cluster recorded here"}
    # the BMC first, so that no reboot starts a node again while the rest stops; then what it recorded
    power = state.get("processes", {}).get("power")
    stopped_power: set[int] = set()
    if power and pid_alive(power["pid"], power.get("started")):
        stopped_power = _terminate({power["pid"]}, grace_s=10.0)
        state = _read_state(directory) or state
    targets = _processes(state)
    signalled = _terminate(set(targets))
    # what a node started while the rest stopped (a step, an SSH session) is still in its cgroup
    stragglers = _in_cgroups(state.get("source_addresses") or {}) | _in_cgroups(state.get("disk_limits") or {})
    targets.update(dict.fromkeys(stragglers, "node process"))
    signalled |= _terminate(stragglers)
    _remove_source_addresses(state.get("source_addresses") or {})
    diskfaults.remove(state.get("disk_limits") or {})
    targets.update({pid: "power" for pid in stopped_power})
    stopped = [{"pid": pid, "what": targets[pid]} for pid in sorted(signalled | stopped_power)]
    if state.get("network_faults") and state.get("slurm_name"):
        netfaults.remove(state["slurm_name"])
        state["network_faults"] = []
    with contextlib.suppress(OSError):
        (
            Path("/tmp/clustereval-sim-blocks") / hashlib.sha256(str(directory).encode()).hexdigest()[:16]
        ).unlink()
    _remove_host_account(state)
    state["processes"] = {}
    state["namespaces"] = {}
    state["stopped_at"] = time.time()
    _write_state(directory, state)
    return {"directory": str(directory), "stopped": stopped}


K8S_API_HOST = "node1"  # whose kubeconfig (API file) the host's kubectl uses, as the audit's clustereval_k8s_api_host


def k8s_api_file(directory: str | Path, api_host: str = K8S_API_HOST) -> Path:
    """The API file of the node whose kubeconfig the host's kubectl uses (it may not exist)."""
    return _paths(Path(directory).resolve())["nodes"] / api_host / "overlay" / k8s_overlay.API_DIR.lstrip("/") \
        / "api.json"


def kubectl_env(directory: str | Path, api_host: str = K8S_API_HOST) -> dict[str, str]:
    """What a process on the host (the controller) needs to run the cluster's ``kubectl``: ``PATH`` with
    ``D/k8s/bin`` first (holding only ``kubectl`` and ``helm``, links to ``D/shims/kubectl`` and ``D/shims/helm``,
    so no other shim shadows a host tool) and ``CLUSTEREVAL_SIM_K8S_API``, the API host node's API file
    (``D/nodes/node1/overlay/etc/clustereval-sim-k8s/api.json``). Returns just those two variables: merge them over
    ``os.environ`` (``{**os.environ, **kubectl_env(D)}``). Raises SimError on a cluster without Kubernetes."""
    directory = Path(directory).resolve()
    api = k8s_api_file(directory, api_host)
    if not api.exists():
        raise SimError(f"no Kubernetes API in {directory} (node {api_host} has no {api.name}): bring the cluster up "
                       "with a profile that sets cluster: {k8s: {enabled: true}}, e.g. k8s-reference")
    bin_dir = directory / "k8s" / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    for tool in k8s_overlay.SHIMS:
        link = bin_dir / tool
        if not link.is_symlink():
            with contextlib.suppress(FileNotFoundError):
                link.unlink()
            link.symlink_to(_paths(directory)["shims"] / tool)
    return {"PATH": f"{bin_dir}:{os.environ.get('PATH', '/usr/bin:/bin')}", "CLUSTEREVAL_SIM_K8S_API": str(api)}


def status(directory: str | Path) -> dict[str, Any]:
    """Per node: address, whether its sshd and slurmd run, and its Slurm state; plus the controller's."""
    directory = Path(directory).resolve()
    state = _read_state(directory)
    if not state:
        return {"directory": str(directory), "running": False, "nodes": {}, "controller": {"alive": False}}
    procs = state.get("processes", {})

    def alive(key: str) -> bool:
        proc = procs.get(key)
        return bool(proc) and pid_alive(proc["pid"], proc.get("started"))

    controller_alive = alive("slurmctld")
    slurm_states = _sinfo_states(directory) if controller_alive else {}
    nodes = {}
    for name, info in state.get("nodes", {}).items():
        slurm_state, reason = slurm_states.get(name, ("unknown", ""))
        nodes[name] = {
            "address": info["address"],
            "unreachable_by_profile": info.get("unreachable", False),
            "sshd_alive": alive(f"sshd:{name}"),
            "slurmd_alive": alive(f"slurmd:{name}"),
            "slurm_state": slurm_state,
            "slurm_reason": reason,
            "shared_fs": procs.get(f"sharedfs:{name}", {}).get("mount") if alive(f"sharedfs:{name}") else None,
        }
    return {
        "directory": str(directory),
        "profile": state.get("profile"),
        "inventory": str(_paths(directory)["inventory"]),
        "slurm_conf": str(_paths(directory)["slurm"] / "slurm.conf"),
        "running": controller_alive,
        "controller": {
            "alive": controller_alive,
            "port": state["ports"]["slurmctld"],
            # SlurmctldHost: the host, or the compute node the profile runs slurmctld on
            **(dict(zip(("host", "address", "on_node"), _controller(state), strict=True))
               if "slurm_cluster" in state else {}),
            "munged_alive": alive("munged"),
            "power_alive": alive("power"),  # the BMC: reboots, /dev/kmsg, SBR watch, remediation
        },
        "nodes": nodes,
        # each node's connections into the block leave from its address, so slurmd and srun bind it (else "error":
        # why not; they bind every address)
        "source_addresses": state.get("source_addresses"),
        "shared_fs": {**state.get("shared_fs", {}), "server_alive": alive(
            "glusterd:storage" if state["shared_fs"].get("type") == "glusterfs" else "sshd:storage")}
        if state.get("shared_fs") else None,
        # kubectl on the host: {**os.environ, **kubectl_env(D)} (PATH with D/k8s/bin, CLUSTEREVAL_SIM_K8S_API)
        "kubectl": _kubectl_status(directory),
    }


def _kubectl_status(directory: Path) -> dict[str, str] | None:
    try:
        env = kubectl_env(directory)
    except SimError:
        return None
    return {"path_prepend": env["PATH"].split(":", 1)[0], "CLUSTEREVAL_SIM_K8S_API": env["CLUSTEREVAL_SIM_K8S_API"]}


def kill_node_sshd(directory: str | Path, node_name: str) -> list[int]:
    """Kill one node's sshd listener and its per-connection children (the node vanishes from SSH)."""
    directory = Path(directory).resolve()
    state = _read_state(directory) or {}
    proc = state.get("processes", {}).get(f"sshd:{node_name}")
    if not proc or not pid_alive(proc["pid"], proc.get("started")):
        return []
    pids = {proc["pid"]} | _descendants({proc["pid"]})
    return sorted(_terminate(pids))
