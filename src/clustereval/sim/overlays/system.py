"""The node's own machine: architecture, bare metal or VM, NUMA layout, sysctls, network interfaces.

Profile section ``system:`` (cluster level, overridable per node under ``nodes:``; see :data:`KEYS`):

* ``virtualization``: ``none`` (bare metal) or ``kvm``. ``systemd-detect-virt`` (a shim: the real tool asks
  the CPU's CPUID, which only the hypervisor answers), the ``hypervisor`` flag of ``/proc/cpuinfo`` and
  the SMBIOS strings of ``/sys/class/dmi/id`` (``dmi:`` overrides them) all say the same.
* ``architecture``: what ``uname -m`` prints (the uname shim); ``aarch64`` also gives ``/proc/cpuinfo`` the
  Neoverse V2 (Grace) layout.
* ``kernel_release`` / ``kernel_version``: the running kernel (``uname -r``/``-v``, ``/proc/sys/kernel/
  osrelease``, ``/proc/version``); ``host`` (default) is the machine's own. The versions area installs it
  in ``/boot`` and ``/lib/modules`` (and, with ``kernel_pending``, another one that is not booted).
* ``sysctls``: ``{kernel.perf_event_paranoid: 1, ...}``, what ``/proc/sys/...`` and ``sysctl -n`` show.
* ``numa``: ``{nodes: [{cpus: "0-71", memory_mib: 491520}, {cpus: "", memory_mib: 97280}], possible: N}``:
  ``/sys/devices/system/node`` (node dirs, ``cpulist``, ``cpumap``, ``meminfo``, ``distance`` and the
  ``online``/``possible``/``has_*`` lists); unset, the machine's own.
* ``netdevs``: the node's non-RDMA-rail interfaces (front-end, storage), each ``{name, pci, speed_mbps,
  mtu, address, link: up|no_carrier|admin_down, rdma}``; with ``rdma: mlx5_N`` the fabric area adds the
  RDMA device of that port (RoCE), whose port is ``Polling`` when the link has no carrier. The IPoIB
  netdevs of the profile's ``nics`` are added. ``/sys/class/net`` shows these and ``lo`` only (the host's
  own interfaces are hidden), and the ``ip`` shim prints ``ip link`` from that directory.
* ``spool_disk``: ``{fstype: ext4|tmpfs, size_mib: N}``: slurmd's SlurmdSpoolDir is a filesystem of its
  own in the node's mount namespace (a loop-mounted ext4 image, or a sized tmpfs); ``null`` leaves it on
  the root filesystem. Applied by the cluster (cluster.py), as are the /proc files (:func:`proc_mounts`).
* ``root_fs``: ``{fstype: ext4|xfs|tmpfs|overlay, source: /dev/nvme0n1p2, size_gib: N, used_pct: P}``: the
  root filesystem ``findmnt`` and ``df`` show (a disk's ``source`` defaults to the machine's own root
  device, the one lsblk describes to the storage probes) (shims: nothing can cover ``/proc/self/mountinfo``, and
  ``statvfs("/")`` is the machine's). ``findmnt`` runs the real tool on a copy of the mount table whose
  ``/`` is this one; both shims rewrite the size columns of ``/`` only. ``used_pct`` is df's Use% (ext4
  keeps 5% of its blocks for root, as mke2fs does). Unset: the machine's own root.
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import subprocess
from pathlib import Path
from typing import Any

from clustereval.sim.keys import known_mapping
from clustereval.sim.overlays.fabric import _guid as port_guid_of
from clustereval.sim.overlays.fabric import _pick as rail_pick

SHIMS = {"uname": "uname.py", "systemd-detect-virt": "systemd_detect_virt.py", "ip": "ip.py",
         "findmnt": "findmnt.py", "df": "df.py"}
KEYS = {"virtualization", "architecture", "kernel_release", "kernel_version", "sysctls", "numa", "dmi",
        "netdevs", "spool_disk", "root_fs"}
VIRTUALIZATIONS = ("none", "kvm")
ARCHITECTURES = ("x86_64", "aarch64")
NETDEV_KEYS = {"name", "pci", "speed_mbps", "mtu", "address", "link", "rdma"}
LINK_STATES = ("up", "no_carrier", "admin_down")
SPOOL_FSTYPES = ("ext4", "tmpfs")
ROOT_FS_KEYS = {"fstype", "source", "size_gib", "used_pct"}
# How each root filesystem type is mounted: device number, source, the superblock's options (mountinfo's
# last field; findmnt's OPTIONS joins them to the mount's own ``rw,relatime``) and the share of blocks
# kept for root (ext4's mke2fs default of 5%: df's Avail and Use% leave it out, findmnt's USE% does not).
ROOT_FS = {
    "ext4": {"majmin": None, "source": None, "options": "rw,errors=remount-ro", "reserved": 0.05},
    "xfs": {"majmin": None, "source": None, "options": "rw,attr2,inode64,logbufs=8,logbsize=32k,noquota",
            "reserved": 0.0},
    "tmpfs": {"majmin": "0:22", "source": "tmpfs", "options": "rw,size={size_kib}k,mode=755,inode64",
              "reserved": 0.0},
    "overlay": {"majmin": "0:31", "source": "overlay", "options": "rw,lowerdir=/run/rootfsbase,"
                "upperdir=/run/overlayfs,workdir=/run/ovlwork,uuid=on", "reserved": 0.0},
}
# A disk-backed root's device defaults to the machine's own root device (what lsblk, and so the storage
# probes, can describe); a named one gets the NVMe major, 259.
NAMED_DEVICE_MAJMIN = "259:2"
ROOT_BLOCK_SIZE = 4096
VIEW_FILE = "system.json"  # /sim/system.json: what the uname, systemd-detect-virt and ip shims read

# SMBIOS strings of an HGX H100 server and of a QEMU/KVM guest (what dmidecode and /sys/class/dmi/id show).
DMI = {
    "none": {"sys_vendor": "Supermicro", "product_name": "SYS-821GE-TNHR", "product_version": "0123456789",
             "product_family": "SMC X13", "board_vendor": "Supermicro", "board_name": "X13DEG-OAD",
             "board_version": "1.01", "bios_vendor": "American Megatrends International, LLC.",
             "bios_version": "2.1", "bios_date": "03/15/2024", "bios_release": "5.32", "chassis_type": "17",
             "chassis_vendor": "Supermicro"},
    "kvm": {"sys_vendor": "QEMU", "product_name": "Standard PC (Q35 + ICH9, 2009)", "product_version": "pc-q35-8.2",
            "product_family": "", "board_vendor": "", "board_name": "", "board_version": "",
            "bios_vendor": "SeaBIOS", "bios_version": "1.16.3-debian-1.16.3-2", "bios_date": "04/01/2014",
            "bios_release": "0.0", "chassis_type": "1", "chassis_vendor": "QEMU"},
}
# Neoverse V2 (Grace) as the arm64 kernel prints it in /proc/cpuinfo.
GRACE_CPU = ("BogoMIPS\t: 2000.00\nFeatures\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid "
             "asimdrdm jscvt fcma lrcpc dcpop sha3 sm3 sm4 asimddp sha512 sve asimdfhm dit uscat ilrcpc flagm ssbs sb "
             "paca pacg dcpodp sve2 sveaes svepmull svebitperm svesha3 svesm4 flagm2 frint svei8mm svebf16 i8mm bf16 "
             "dgh bti\nCPU implementer\t: 0x41\nCPU architecture: 8\nCPU variant\t: 0x0\nCPU part\t: 0xd4f\n"
             "CPU revision\t: 0\n")
ARPHRD = {"ether": 1, "infiniband": 32}
NUMA_CLASS = "/sys/devices/system/node"


def settings_of(settings: dict[str, Any]) -> dict[str, Any]:
    return settings.get("system") or {}


def validate_settings(settings: dict[str, Any]) -> None:
    """Refuse unknown keys and values of a (merged) ``system:`` section with a message naming the key."""
    where, value = "system", settings.get("system")
    if value is None:
        return
    known_mapping(where, value, KEYS)
    for key, allowed in (("virtualization", VIRTUALIZATIONS), ("architecture", ARCHITECTURES)):
        if key in value and value[key] not in allowed:
            raise ValueError(f"{where}.{key} must be one of {list(allowed)}")
    for key in ("kernel_release", "kernel_version"):
        if key in value and not (isinstance(value[key], str) and value[key].strip()):
            raise ValueError(f"{where}.{key} must be a non-empty string")
    for name, setting in (value.get("sysctls") or {}).items():
        if not re.fullmatch(r"[a-z0-9_]+(\.[a-z0-9_]+)+", str(name)) or isinstance(setting, dict | list):
            raise ValueError(f"{where}.sysctls.{name} must be a dotted sysctl name with a scalar value")
    if "dmi" in value and not isinstance(value["dmi"], dict):
        raise ValueError(f"{where}.dmi must be a mapping of /sys/class/dmi/id file names to strings")
    _validate_numa(f"{where}.numa", value.get("numa"))
    for k, dev in enumerate(value.get("netdevs") or []):
        known_mapping(f"{where}.netdevs[{k}]", dev, NETDEV_KEYS, required="name")
        if dev.get("link", "up") not in LINK_STATES:
            raise ValueError(f"{where}.netdevs[{k}].link must be one of {list(LINK_STATES)}")
    spool = value.get("spool_disk")
    if spool is not None:
        if not isinstance(spool, dict) or set(spool) - {"fstype", "size_mib"}:
            raise ValueError(f"{where}.spool_disk must be null or {{fstype: ext4|tmpfs, size_mib: N}}")
        if spool.get("fstype", "ext4") not in SPOOL_FSTYPES:
            raise ValueError(f"{where}.spool_disk.fstype must be one of {list(SPOOL_FSTYPES)}")
    _validate_root_fs(f"{where}.root_fs", value.get("root_fs"))


def _validate_root_fs(where: str, root: Any) -> None:
    if root is None:
        return
    if not isinstance(root, dict) or set(root) - ROOT_FS_KEYS:
        raise ValueError(f"{where} must be null or {{fstype: {'|'.join(ROOT_FS)}, source: DEVICE, size_gib: N, "
                         f"used_pct: P}}; known keys: {sorted(ROOT_FS_KEYS)}")
    if root.get("fstype", "ext4") not in ROOT_FS:
        raise ValueError(f"{where}.fstype must be one of {list(ROOT_FS)}")
    size, used = root.get("size_gib", 1788), root.get("used_pct", 12)
    if isinstance(size, bool) or not isinstance(size, int | float) or size <= 0:
        raise ValueError(f"{where}.size_gib must be a positive number of GiB")
    if isinstance(used, bool) or not isinstance(used, int | float) or not 0 <= used <= 100:
        raise ValueError(f"{where}.used_pct must be a percentage from 0 to 100")


def _validate_numa(where: str, numa: Any) -> None:
    if numa is None:
        return
    if not isinstance(numa, dict) or set(numa) - {"nodes", "possible"} or not numa.get("nodes"):
        raise ValueError(f"{where} must be {{nodes: [{{cpus: '0-71', memory_mib: N}}, ...], possible: N}}")
    for k, node in enumerate(numa["nodes"]):
        if not isinstance(node, dict) or set(node) - {"cpus", "memory_mib"}:
            raise ValueError(f"{where}.nodes[{k}] must be {{cpus: LIST, memory_mib: N}}")
        try:
            cpu_set(str(node.get("cpus") or ""))
        except ValueError:
            raise ValueError(f"{where}.nodes[{k}].cpus must be a CPU list like 0-71,144-215") from None
    if int(numa.get("possible", len(numa["nodes"]))) < len(numa["nodes"]):
        raise ValueError(f"{where}.possible must be at least the number of nodes")


# ------------------------------------------------------------------------------------------ what the node is


def view(settings: dict[str, Any], state: dict[str, Any]) -> dict[str, Any]:
    """``/sim/system.json``: the facts the uname, systemd-detect-virt and ip shims print."""
    system = settings_of(settings)
    host = os.uname()
    return {"virtualization": system.get("virtualization", "none"),
            "architecture": system.get("architecture", host.machine),
            "kernel_release": kernel_release(settings), "kernel_version": system.get("kernel_version", host.version),
            "netdevs": [dev["name"] for dev in netdevs(settings, state)], "root_fs": root_fs(settings)}


def machine_root(mountinfo: str = "/proc/self/mountinfo") -> tuple[str, str]:
    """(source, major:minor) of the machine's own root filesystem."""
    for line in Path(mountinfo).read_text().splitlines():
        fields = line.split(" ")
        if len(fields) > 6 and fields[4] == "/" and "-" in fields[6:]:
            return fields[fields.index("-", 6) + 2], fields[2]
    return "/dev/root", "0:0"


def root_fs(settings: dict[str, Any]) -> dict[str, Any] | None:
    """What the findmnt and df shims show for ``/`` (``system.root_fs``; None: the machine's own root): its
    mountinfo fields and a ``statvfs`` of its size, with ``used_pct`` as df's Use% (used over what
    non-root users can have)."""
    root = settings_of(settings).get("root_fs")
    if not root:
        return None
    fstype = root.get("fstype", "ext4")
    kind = ROOT_FS[fstype]
    blocks = int(float(root.get("size_gib", 1788)) * 2**30) // ROOT_BLOCK_SIZE
    reserved = int(blocks * kind["reserved"])
    used = int(float(root.get("used_pct", 12)) * (blocks - reserved) // 100)
    free = blocks - used
    source, majmin = kind["source"], kind["majmin"]
    if root.get("source"):
        source, majmin = str(root["source"]), majmin or NAMED_DEVICE_MAJMIN
    elif source is None:
        source, majmin = machine_root()
    return {"fstype": fstype, "source": source, "majmin": majmin,
            "super_options": kind["options"].format(size_kib=blocks * ROOT_BLOCK_SIZE // 1024),
            "statvfs": {"frsize": ROOT_BLOCK_SIZE, "blocks": blocks, "bfree": free, "bavail": free - reserved}}


def kernel_release(settings: dict[str, Any]) -> str:
    """The release the node runs: the profile's ``system.kernel_release``, or the machine's own."""
    release = settings_of(settings).get("kernel_release", "host")
    return os.uname().release if release == "host" else str(release)


def cpu_set(text: str) -> list[int]:
    """``0-3,8`` -> [0, 1, 2, 3, 8] (a kernel CPU/node list)."""
    out: list[int] = []
    for part in filter(None, text.replace(" ", "").split(",")):
        low, _, high = part.partition("-")
        out.extend(range(int(low), int(high or low) + 1))
    return out


def cpu_list(items: list[int]) -> str:
    """[0, 1, 2, 5] -> ``0-2,5``, the kernel's bitmap list format."""
    runs: list[str] = []
    for item in sorted(set(items)):
        if runs and item == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], item)
        else:
            runs.append((item, item))
    return ",".join(f"{a}" if a == b else f"{a}-{b}" for a, b in runs)


def cpu_mask(items: list[int], width: int) -> str:
    """The kernel's ``cpumap``: hex words of 32 bits, comma-separated, most significant first."""
    value = sum(1 << cpu for cpu in set(items))
    words = max(1, (width + 31) // 32)
    return ",".join(f"{(value >> (32 * w)) & 0xFFFFFFFF:08x}" for w in reversed(range(words)))


# ------------------------------------------------------------------------------------------ overlay files


def render(settings: dict[str, Any], state: dict[str, Any], tree) -> None:
    system = settings_of(settings)
    virt = system.get("virtualization", "none")
    for name, value in {**DMI[virt], **(system.get("dmi") or {})}.items():
        tree.file(f"/sys/class/dmi/id/{name}", f"{value}\n", 0o444)
    if system.get("numa"):
        render_numa(system["numa"], tree)
    render_netdevs(settings, state, tree)


def render_numa(numa: dict[str, Any], tree) -> None:
    nodes = numa["nodes"]
    possible = int(numa.get("possible", len(nodes)))
    cpus = [cpu_set(str(n.get("cpus") or "")) for n in nodes]
    width = max([c + 1 for group in cpus for c in group] + [1])
    for k, node in enumerate(nodes):
        base = f"{NUMA_CLASS}/node{k}"
        tree.file(f"{base}/cpulist", cpu_list(cpus[k]) + "\n", 0o444)
        tree.file(f"{base}/cpumap", cpu_mask(cpus[k], width) + "\n", 0o444)
        total = int(node.get("memory_mib", 0)) * 1024
        tree.file(f"{base}/meminfo", node_meminfo(k, total), 0o444)
        # SLIT distances: 10 to itself, 20 between CPU nodes, 80 to or from a CPU-less (GPU memory) node
        tree.file(f"{base}/distance", " ".join(
            "10" if j == k else ("20" if cpus[j] and cpus[k] else "80") for j in range(len(nodes))) + "\n", 0o444)
    with_cpu = [k for k in range(len(nodes)) if cpus[k]]
    with_memory = [k for k, n in enumerate(nodes) if int(n.get("memory_mib", 0))]
    for name, members in (("possible", range(possible)), ("online", range(len(nodes))), ("has_cpu", with_cpu),
                          ("has_memory", with_memory), ("has_normal_memory", with_memory),
                          ("has_generic_initiator", [])):
        tree.file(f"{NUMA_CLASS}/{name}", cpu_list(list(members)) + "\n", 0o444)
    if os.path.isdir(NUMA_CLASS):  # the machine's own nodes beyond the profile's are not this node's
        for entry in os.listdir(NUMA_CLASS):
            if re.fullmatch(r"node\d+", entry) and int(entry[4:]) >= len(nodes):
                tree.whiteout(f"{NUMA_CLASS}/{entry}")


def node_meminfo(node: int, total_kib: int) -> str:
    """``/sys/devices/system/node/nodeN/meminfo`` in the kernel's layout (drivers/base/node.c)."""
    free = total_kib - min(total_kib, total_kib // 50)
    rows = [("MemTotal", total_kib), ("MemFree", free), ("MemUsed", total_kib - free), ("SwapCached", 0),
            ("Active", 0), ("Inactive", 0), ("Active(anon)", 0), ("Inactive(anon)", 0), ("Active(file)", 0),
            ("Inactive(file)", 0), ("Unevictable", 0), ("Mlocked", 0), ("Dirty", 0), ("Writeback", 0),
            ("FilePages", 0), ("Mapped", 0), ("AnonPages", 0), ("Shmem", 0), ("KernelStack", 0), ("PageTables", 0),
            ("Bounce", 0), ("WritebackTmp", 0), ("KReclaimable", 0), ("Slab", 0), ("SReclaimable", 0),
            ("SUnreclaim", 0), ("AnonHugePages", 0), ("ShmemHugePages", 0), ("ShmemPmdMapped", 0),
            ("FileHugePages", 0), ("FilePmdMapped", 0)]
    text = "".join(f"Node {node} {f'{name}:':<15} {value:8d} kB\n" for name, value in rows)
    return text + "".join(f"Node {node} {name}: {0:5d}\n" for name in
                          ("HugePages_Total", "HugePages_Free", "HugePages_Surp"))


def netdevs(settings: dict[str, Any], state: dict[str, Any]) -> list[dict[str, Any]]:
    """Every interface of the node but ``lo``, resolved: the profile's ``netdevs`` and the IPoIB netdev of
    each RDMA rail (down with its port, fault ``ib_port_down``), in ifindex order."""
    faults = settings.get("faults") or {}
    out = []
    for dev in settings_of(settings).get("netdevs") or []:
        out.append({"name": str(dev["name"]), "type": "ether", "pci": dev.get("pci"),
                    "speed_mbps": int(dev.get("speed_mbps", 100000)), "mtu": int(dev.get("mtu", 9000)),
                    "address": str(dev.get("address") or _mac(state, dev["name"])), "link": dev.get("link", "up"),
                    "rdma": dev.get("rdma")})
    for index, nic in enumerate(state.get("nics") or settings.get("nics") or []):
        if not nic.get("netdev") or nic.get("link_layer", "InfiniBand") != "InfiniBand":
            continue
        down = bool(rail_pick(faults.get("ib_port_down") or [], nic["name"], index))
        bus = int(re.sub(r"\D", "", str(nic["netdev"]).split("s")[0]) or 0)  # ibp26s0: PCI bus 26
        out.append({"name": str(nic["netdev"]), "type": "infiniband", "pci": f"0000:{bus:02x}:00.0",
                    "speed_mbps": int(float(nic.get("rate_gbps", 400)) * 1000), "mtu": 4092,
                    "address": _ipoib_address(state, index), "link": "no_carrier" if down else "up",
                    "rdma": str(nic["name"])})
    return out


def _mac(state: dict[str, Any], name: str) -> str:
    digest = hashlib.sha256(f"{state.get('cluster')}/{state.get('node')}/{name}".encode()).hexdigest()
    return "b8:3f:d2:" + ":".join(digest[k:k + 2] for k in (0, 2, 4))


def _ipoib_address(state: dict[str, Any], index: int) -> str:
    # 4 bytes of flags/QPN, then the port GID (fe80::<port GUID>), as the fabric area's gids/0
    port_guid = port_guid_of(state.get("cluster"), state.get("node", "node"), index).replace(":", "")
    octets = ["00", "00", "10", "29", "fe", "80", "00", "00", "00", "00", "00", "00"]
    return ":".join(octets + [port_guid[k:k + 2] for k in range(0, 16, 2)])


def render_netdevs(settings: dict[str, Any], state: dict[str, Any], tree) -> None:
    devices = netdevs(settings, state)
    for ifindex, dev in enumerate(devices, start=2):
        base = f"/sys/class/net/{dev['name']}"
        up, carrier = dev["link"] != "admin_down", dev["link"] == "up"
        ether = dev["type"] == "ether"
        flags = 0x1002 | (0x1 if up else 0)  # IFF_MULTICAST | IFF_BROADCAST | IFF_UP
        values = {"ifindex": ifindex, "iflink": ifindex, "type": ARPHRD[dev["type"]], "mtu": dev["mtu"],
                  "address": dev["address"], "addr_len": 6 if ether else 20,
                  "broadcast": "ff:ff:ff:ff:ff:ff" if ether else
                  "00:ff:ff:ff:ff:12:40:1b:ff:ff:00:00:00:00:00:00:ff:ff:ff:ff",
                  "operstate": "up" if carrier else "down", "flags": f"0x{flags:x}", "tx_queue_len": 1000 if ether
                  else 256, "dev_id": "0x0", "dev_port": 0, "addr_assign_type": 0, "name_assign_type": 4,
                  "link_mode": 0, "carrier_changes": 1 if carrier else 2}
        if up:  # the kernel refuses to read carrier, speed and duplex (EINVAL) of an interface that is down
            values.update(carrier=int(carrier), speed=dev["speed_mbps"] if carrier else -1,
                          duplex="full" if carrier else "unknown")
        for name, value in values.items():
            tree.file(f"{base}/{name}", f"{value}\n", 0o444)
    if os.path.isdir("/sys/class/net"):  # the machine's own interfaces (its NIC, tc's ifb devices) are hidden
        for entry in os.listdir("/sys/class/net"):
            if entry != "lo" and entry not in {d["name"] for d in devices}:
                tree.whiteout(f"/sys/class/net/{entry}")


def links(settings: dict[str, Any], state: dict[str, Any]) -> dict[str, str]:
    """Symlinks the node's overlay needs (``/sys/class/net/IF/device`` -> its PCI function), applied by
    the cluster after the overlay files (the overlay tree holds regular files only)."""
    return {f"/sys/class/net/{dev['name']}/device": f"/sys/bus/pci/devices/{dev['pci']}"
            for dev in netdevs(settings, state) if dev.get("pci")}


# ------------------------------------------------------------------------------------------ /proc files


def proc_files(settings: dict[str, Any]) -> dict[str, str]:
    """``{/proc path: content}`` the node shows instead of the machine's own."""
    system = settings_of(settings)
    files = {"/proc/cpuinfo": cpuinfo(system.get("virtualization", "none"),
                                      system.get("architecture", os.uname().machine))}
    release, version = kernel_release(settings), system.get("kernel_version", os.uname().version)
    if release != os.uname().release or version != os.uname().version:
        files["/proc/sys/kernel/osrelease"] = release + "\n"
        files["/proc/sys/kernel/version"] = version + "\n"
        files["/proc/version"] = (f"Linux version {release} (builder@buildd) (gcc (GCC) 12.2.0, GNU ld (GNU "
                                  f"Binutils) 2.40) {version}\n")
    for name, value in (system.get("sysctls") or {}).items():
        files["/proc/sys/" + name.replace(".", "/")] = f"{int(value) if isinstance(value, bool) else value}\n"
    return files


def cpuinfo(virt: str, arch: str, host_text: str | None = None) -> str:
    """The node's /proc/cpuinfo: the machine's own CPUs with the ``hypervisor`` flag as ``virt`` says (x86),
    or as many Grace cores (aarch64)."""
    if host_text is None:
        host_text = Path("/proc/cpuinfo").read_text()
    if arch == "aarch64":
        count = host_text.count("\nprocessor") + host_text.startswith("processor")
        return "".join(f"processor\t: {k}\n{GRACE_CPU}\n" for k in range(max(count, 1)))
    lines = []
    for line in host_text.splitlines(keepends=True):
        if line.startswith("flags"):
            words = [w for w in line.rstrip("\n").split(" ") if w != "hypervisor"]
            if virt != "none":
                words.append("hypervisor")
            line = " ".join(words) + "\n"
        lines.append(line)
    return "".join(lines)


def proc_mounts(settings: dict[str, Any], node_dir: Path, proc_root: Path = Path("/proc")) -> list[str]:
    """Write the node's /proc files under ``node_dir/proc`` and return the shell lines (run in the node's
    mount namespace at every boot) that put them in place. procfs takes no overlay, so a file that exists
    is bind-mounted over; a directory that lacks one (``kernel.apparmor_restrict_unprivileged_userns`` on a
    kernel without Ubuntu's patch) is rebuilt: every entry it has bound into a copy that adds the node's
    files, and the copy bound over it."""
    target = node_dir / "proc"
    files = proc_files(settings)
    q = shlex.quote

    def own(path: str) -> Path:
        return target / path.removeprefix("/proc/")

    for path, content in files.items():
        own(path).parent.mkdir(parents=True, exist_ok=True)
        own(path).write_text(content)
    rebuilt = sorted({str(Path(p).parent) for p in files if not (proc_root / p.removeprefix("/proc/")).exists()
                      and (proc_root / str(Path(p).parent).removeprefix("/proc/")).is_dir()})
    lines = [f"mount --bind {q(str(own(path)))} {q(path)}" for path in sorted(files)
             if (proc_root / path.removeprefix("/proc/")).exists() and str(Path(path).parent) not in rebuilt]
    for folder in rebuilt:
        copy = node_dir / "proc-dirs" / folder.removeprefix("/proc/")
        copy.mkdir(parents=True, exist_ok=True)
        host_dir = proc_root / folder.removeprefix("/proc/")
        for entry in sorted(os.listdir(host_dir)):
            place, mine = copy / entry, own(f"{folder}/{entry}")
            source = mine if mine.exists() else host_dir / entry
            if source.is_dir():
                place.mkdir(exist_ok=True)
            elif not place.exists():
                place.write_text("")
            lines.append(f"mount --bind {q(str(source))} {q(str(place))}")
        for path in files:
            if str(Path(path).parent) == folder and not (host_dir / Path(path).name).exists():
                (copy / Path(path).name).write_text(files[path])  # the node's own sysctl: a plain file
        lines.append(f"mount --rbind {q(str(copy))} {q(folder)}")
    return lines


# ------------------------------------------------------------------------------------------ the spool disk


def spool_mounts(settings: dict[str, Any], node_dir: Path, spool: str | None) -> list[str]:
    """Make slurmd's spool directory a filesystem of its own (``system.spool_disk``): an ext4 image made
    here (kept across the node's reboots, as a disk is) loop-mounted at every boot, or a tmpfs of that size.
    Returns the shell lines for the node's boot; none when the profile leaves the spool on the root."""
    disk = settings_of(settings).get("spool_disk")
    if not disk or not spool:
        return []
    size = int(disk.get("size_mib", 256))
    q = shlex.quote
    mkdir = f"mkdir -p {q(spool)}"
    if disk.get("fstype", "ext4") == "tmpfs":
        return [mkdir, f"mount -t tmpfs -o size={size}m,mode=0755 tmpfs {q(spool)}"]
    image = node_dir / "spool-disk.img"
    if not image.exists():
        with open(image, "wb") as fh:
            fh.truncate(size * 2**20)
        subprocess.run(["mkfs.ext4", "-q", "-F", "-L", "slurmd-spool", str(image)], check=True, capture_output=True)
    return [mkdir, f"mount -o loop {q(str(image))} {q(spool)}"]
