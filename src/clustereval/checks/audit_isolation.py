"""Audit checks of tenant isolation (audit.isolation.*, domain security).

Evidence is local and read-only (``checks/probes/isolation.yml``): device nodes and their modes, sysfs
and SMBIOS entry *names*, ``systemd-detect-virt --vm`` (systemd 247+), ``ss -Hltn`` (iproute2), plus the
GPU stack probes (``lspci -D -nn -vvv``, ``nvidia-smi topo -m``, ``/proc/driver/nvidia/params``). No probe
contacts a BMC, Redfish host interface, DPU or any other address: reachability is judged from the paths
that exist, never from traffic. A missing tool (ipmitool) is never taken as proof of safety.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Any

from clustereval import baselines
from clustereval.checks import Context, HarnessError, Skip, Verdict, check
from clustereval.checks.audit_gpustack import (
    TOPO,
    driver_params,
    iommu_groups,
    is_vm_guest,
    node_facts,
    pci_inventory,
    privileged,
    require_any_gpu,
    require_gpu,
)
from clustereval.parsers.probe_key_values import first

NODE = "isolation_node"
LISTEN = "isolation_listen"
KVM_TYPES = ("kvm", "qemu")

# Backends that hold cluster-wide (other tenants') data or control GPUs: never on a tenant-facing address.
BACKEND_PORTS = {9090: "Prometheus", 3000: "Grafana", 3100: "Loki", 9093: "Alertmanager", 8428: "VictoriaMetrics",
                 8086: "InfluxDB", 9200: "Elasticsearch/OpenSearch", 5601: "Kibana", 9091: "Pushgateway",
                 5555: "DCGM host engine (nv-hostengine)", 4317: "OpenTelemetry collector (OTLP)"}
# Per-node exporters: normal to scrape, but they show this node's (possibly another tenant's) workload.
EXPORTER_PORTS = {9100: "node_exporter", 9400: "dcgm-exporter", 9500: "ipmi_exporter"}


def _octal_other_rw(mode: str) -> bool:
    """Whether a ``stat -c %a`` mode lets every user read and write (the 'other' digit is 6 or 7)."""
    return bool(mode) and mode[-1] in "67"


def _virt(facts: dict[str, list[str]]) -> tuple[bool | None, str]:
    return is_vm_guest(facts), first(facts, "virt_vm") or "unknown"


@check("audit.isolation.bmc_inband")
def bmc_inband(ctx: Context) -> Verdict:
    facts = node_facts(ctx, NODE)
    devices = [line.split() for line in facts.get("ipmi_dev") or []]
    modules = set(facts.get("module") or [])
    smbios = facts.get("smbios") or []
    host_if_nics = [line.split()[0] for line in facts.get("netdev") or []
                    if len(line.split()) > 1 and line.split()[1] in ("cdc_ether", "rndis_host")]
    link_local = []
    for line in facts.get("inet") or []:
        parts = line.split()
        if len(parts) == 2 and parts[0] != "lo":
            try:
                if ipaddress.ip_interface(parts[1]).ip.is_link_local:
                    link_local.append(f"{parts[0]} {parts[1]}")
            except ValueError:
                continue
    root = privileged(facts)
    evidence: dict[str, Any] = {
        "ipmi_devices": [" ".join(d) for d in devices], "ipmi_modules": sorted(m for m in modules if "ipmi" in m),
        "smbios_ipmi_record": any(s.startswith("38-") for s in smbios),
        "smbios_redfish_host_interface": any(s.startswith("42-") for s in smbios),
        "usb_host_interface_nics": host_if_nics, "link_local_ipv4": link_local, "root_or_sudo": root,
        "contacted": "nothing (read-only evidence)"}
    usable = [d[0] for d in devices if len(d) >= 3 and d[2] == "rw"]
    if usable:
        who = "root/sudo" if root else "an unprivileged user"
        return Verdict("fail", f"the BMC is reachable in-band: {', '.join(usable)} opens for {who} "
                       "(ipmitool -I open can change BMC users, network and firmware)", len(usable), evidence=evidence)
    if link_local and (host_if_nics or evidence["smbios_redfish_host_interface"]):
        return Verdict("fail", f"Redfish host interface up ({', '.join(link_local)}): the BMC is on a network "
                       "the tenant can reach (not contacted)", len(link_local), evidence=evidence)
    declared = evidence["smbios_ipmi_record"] or bool(evidence["ipmi_modules"]) or bool(devices)
    guest, virt = _virt(facts)
    if declared and root:
        return Verdict("warn", "the firmware declares a BMC (SMBIOS type 38 / ipmi modules) and the tenant has root: "
                       "it can load ipmi_devintf and reach the BMC unless in-band IPMI is disabled in the BMC",
                       evidence=evidence)
    if declared:
        return Verdict("pass", "a BMC exists but its device nodes are closed to this user and no host interface is "
                       "up", 0, evidence=evidence)
    if guest:
        raise Skip(f"{virt} virtual machine with no IPMI device or record: the BMC belongs to the host")
    if link_local:
        return Verdict("warn", f"link-local IPv4 address on {', '.join(link_local)}: possibly a BMC host "
                       "interface (not contacted)", evidence=evidence)
    return Verdict("pass", "no in-band path to a BMC: no /dev/ipmi*, no ipmi driver, no SMBIOS IPMI record, "
                   "no host interface", 0, evidence=evidence)


@check("audit.isolation.januscape")
def januscape(ctx: Context) -> Verdict:
    facts = node_facts(ctx, NODE)
    guest, virt = _virt(facts)
    flags = set(first(facts, "cpu_flags").split())
    nested = [v.strip() for v in facts.get("kvm_nested") or []]
    dev_kvm = first(facts, "dev_kvm")
    evidence = {"virt": virt, "cpu_virt_flags": sorted(flags & {"vmx", "svm"}), "kvm_nested": nested,
                "dev_kvm_mode": dev_kvm or None}
    if guest is None:
        return Verdict("warn", "could not tell whether this node is a VM (systemd-detect-virt printed nothing)",
                       evidence=evidence)
    if not guest:
        raise Skip("bare-metal node: Januscape concerns KVM guests that can run nested VMs")
    if virt not in KVM_TYPES:
        raise Skip(f"{virt} guest: Januscape concerns KVM/QEMU hosts")
    prerequisites = {"vmx/svm in the guest CPU": bool(flags & {"vmx", "svm"}), "/dev/kvm": bool(dev_kvm),
                     "nested=Y": any(v in ("Y", "1") for v in nested)}
    evidence["prerequisites"] = prerequisites
    if not all(prerequisites.values()):
        absent = [name for name, ok in prerequisites.items() if not ok]
        return Verdict("pass", f"KVM guest without nested virtualization ({', '.join(absent)} absent)",
                       evidence=evidence)
    if _octal_other_rw(dev_kvm):
        return Verdict("fail", f"nested KVM open to every user in this guest (/dev/kvm mode {dev_kvm}): any tenant "
                       "process can reach the host's nested-virtualization code", evidence=evidence)
    return Verdict("warn", "nested KVM available in this guest: safe only on a patched host (not provable from "
                   "inside the guest)", evidence=evidence)


@check("audit.isolation.vmscape")
def vmscape(ctx: Context) -> Verdict:
    facts = node_facts(ctx, NODE)
    guest, virt = _virt(facts)
    arch = first(facts, "arch")
    state = first(facts, "vmscape", "absent")
    evidence = {"virt": virt, "arch": arch, "sysfs_vmscape": state, "dev_kvm": bool(first(facts, "dev_kvm"))}
    if arch not in ("x86_64", "i686"):
        raise Skip(f"{arch or 'unknown'} CPU: VMSCAPE affects x86 branch predictors")
    if guest is None:
        return Verdict("warn", "could not tell whether this node is a VM", evidence=evidence)
    if state.startswith("Not affected"):
        return Verdict("pass", "the kernel reports this CPU not affected by VMSCAPE", evidence=evidence)
    if not guest:
        if not evidence["dev_kvm"]:
            raise Skip("bare-metal node without KVM: it hosts no guests VMSCAPE could attack from")
        if state.startswith("Vulnerable"):
            return Verdict("fail", f"KVM host kernel unmitigated against VMSCAPE ({state})", evidence=evidence)
        if state.startswith("Mitigation"):
            return Verdict("pass", f"KVM host kernel mitigates VMSCAPE ({state})", evidence=evidence)
        return Verdict("warn", "KVM-capable host whose kernel does not report VMSCAPE status (pre-6.17 without "
                       "the backport)", evidence=evidence)
    if virt not in KVM_TYPES:
        raise Skip(f"{virt} guest: VMSCAPE targets KVM/QEMU hosts")
    return Verdict("warn", f"KVM guest on an affected CPU ({state}): the host's mitigation cannot be proven from "
                   "inside; ask the provider for the host kernel", evidence=evidence)


@check("audit.isolation.qemu_virtio_serial")
def qemu_virtio_serial(ctx: Context) -> Verdict:
    facts = node_facts(ctx, NODE)
    guest, virt = _virt(facts)
    ports = [line.split() for line in facts.get("virtio_port") or []]
    agent = [p for p in ports if p and p[0].startswith("org.qemu.guest_agent")]
    evidence = {"virt": virt, "virtio_ports": [" ".join(p) for p in ports]}
    if guest is None:
        return Verdict("warn", "could not tell whether this node is a VM", evidence=evidence)
    if not guest or virt not in KVM_TYPES:
        raise Skip("not a KVM/QEMU guest: no QEMU virtio-serial channel to the host")
    if not agent:
        return Verdict("pass", "no QEMU guest-agent channel in this guest", evidence=evidence)
    open_to_all = [p[0] for p in agent if len(p) > 1 and _octal_other_rw(p[1])]
    if open_to_all:
        return Verdict("fail", f"QEMU guest-agent channel writable by every user ({', '.join(open_to_all)}): "
                       "unprivileged processes talk to the host's QEMU", evidence=evidence)
    return Verdict("warn", "QEMU guest-agent channel present (root-only): safe only with a patched host QEMU",
                   evidence=evidence)


@check("audit.isolation.pcie_passthrough")
def pcie_passthrough(ctx: Context) -> Verdict:
    inv = require_any_gpu(ctx)
    facts = node_facts(ctx, "gpustack_node")
    guest, virt = _virt(facts)
    gpus = {d["address"] for d in inv["accelerators"]} if inv else set()
    evidence: dict[str, Any] = {"virt": virt}
    if guest is None:
        return Verdict("warn", "could not tell whether this node is a VM", evidence=evidence)
    if guest:
        return Verdict("warn", f"{virt} guest with passed-through GPUs: IOMMU grouping and ACS on the host cannot be "
                       "verified from inside (ask the provider for the host's group layout)", evidence=evidence)
    vm_host = "vfio_pci" in (facts.get("module") or []) or any(d.get("driver") == "vfio-pci" for d in
                                                                (inv["accelerators"] if inv else []))
    if not vm_host:
        raise Skip("bare-metal node without vfio-pci: its GPUs are not passed through to VMs")
    groups = iommu_groups(facts)
    if not groups:
        return Verdict("fail", "VM host with vfio-pci but no IOMMU groups: passed-through GPUs are not DMA-isolated",
                       evidence=evidence)
    endpoints = {d["address"] for d in inv["devices"] if d["class"] != "PCI bridge"} if inv else set()
    shared = {}
    for number, group in groups.items():
        members = set(group["devices"])
        if members & gpus and len(members & endpoints) > 1:
            shared[number] = sorted(members & endpoints)
    evidence["shared_groups"] = shared
    if shared:
        return Verdict("fail", f"{len(shared)} IOMMU group(s) hold a GPU together with other devices: they cannot "
                       "be assigned to different tenants", len(shared), evidence=evidence)
    return Verdict("pass", f"every GPU of this VM host has an IOMMU group of its own ({len(gpus)} GPUs)", 0,
                   evidence=evidence)


@check("audit.isolation.nvlink_boundary")
def nvlink_boundary(ctx: Context) -> Verdict:
    require_gpu(ctx)
    topo = ctx.parsed(TOPO)
    if not topo.get("complete", True):
        raise HarnessError(f"nvidia-smi topo -m output incomplete: {'; '.join(topo.get('warnings') or [])[:200]}")
    gpus = topo.get("gpus") or []
    bonds = topo.get("nvlink_bonds") or {}
    linked = {g for g, peers in bonds.items() if peers}
    if not linked:
        raise Skip("no NVLink between this node's GPUs: no NVLink boundary to police")
    params = driver_params(ctx)
    imex0 = (params or {}).get("params", {}).get("CreateImexChannel0")
    pairs = {(a, b) for a in gpus for b in gpus if a < b}
    linked_pairs = {(a, b) for a, peers in bonds.items() for b in peers if a < b} | \
                   {(b, a) for a, peers in bonds.items() for b in peers if b < a}
    evidence = {"gpus": len(gpus), "nvlinked_gpus": sorted(linked), "CreateImexChannel0": imex0}
    if imex0 == 1:
        return Verdict("fail", "IMEX channel 0 is created for every user (NVreg_CreateImexChannel0=1): any process "
                       "in the NVLink domain can import memory other jobs export", evidence=evidence)
    if imex0 is None:
        return Verdict("warn", "NVLink present but CreateImexChannel0 could not be read from the driver parameters",
                       evidence=evidence)
    if pairs - linked_pairs:
        return Verdict("warn", f"NVLink joins only some GPU pairs ({len(linked_pairs)} of {len(pairs)}): a fabric "
                       "partition splits the node, and its tenant boundary is the provider's to attest",
                       evidence=evidence)
    return Verdict("pass", f"NVLink domain is this node's {len(gpus)} GPUs (all-to-all), IMEX channel 0 not open "
                   "to all", evidence=evidence)


def _loopback(host: str) -> bool:
    if host in ("localhost",):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@check("audit.isolation.observability")
def observability(ctx: Context) -> Verdict:
    data = ctx.parsed(LISTEN)
    if not data["understood"]:
        text = str(ctx.probe(LISTEN).get("stdout") or "")
        raise HarnessError(f"`ss -Hltn` output not understood: {text.strip()[:120]!r}")
    listening = [(row["host"], row["port"]) for row in data["sockets"] if row["port"] is not None]
    socks = [(h, p) for h, p in listening if not _loopback(h)]
    backends = sorted({f"{BACKEND_PORTS[p]} on {h or '*'}:{p}" for h, p in socks if p in BACKEND_PORTS})
    exporters = sorted({f"{EXPORTER_PORTS[p]} on {h or '*'}:{p}" for h, p in socks if p in EXPORTER_PORTS})
    evidence = {"backends": backends, "exporters": exporters, "listening_sockets": len(listening)}
    if backends:
        return Verdict("fail", f"observability backend(s) listening on a tenant-reachable address: "
                       f"{'; '.join(backends)}", len(backends), evidence=evidence)
    if exporters:
        return Verdict("warn", f"per-node exporters open on the node network ({'; '.join(exporters)}): other tenants "
                       "can read this node's workload telemetry", 0, evidence=evidence)
    return Verdict("pass", "no observability backend or exporter listens on a non-loopback address", 0,
                   evidence=evidence)


@check("audit.isolation.dpu_rshim")
def dpu_rshim(ctx: Context) -> Verdict:
    facts = node_facts(ctx, NODE)
    try:
        bluefield = [d["address"] + " " + d["description"] for d in pci_inventory(ctx)["bluefield"]]
    except Skip:
        bluefield = []
    rshim = facts.get("rshim") or []
    tmfifo = [line.split()[0] for line in facts.get("netdev") or [] if line.startswith("tmfifo_net")]
    module = "rshim" in (facts.get("module") or [])
    evidence = {"bluefield": bluefield, "rshim_devices": rshim, "tmfifo_netdevs": tmfifo, "rshim_module": module}
    if not (bluefield or rshim or tmfifo or module):
        raise Skip("no BlueField DPU on this node")
    if rshim or tmfifo:
        return Verdict("fail", f"the DPU's control plane is reachable from the host: {', '.join(rshim + tmfifo)} "
                       "(console, boot stream, firmware)", len(rshim + tmfifo), evidence=evidence)
    if module:
        return Verdict("warn", "rshim driver loaded though no RShim device is visible: the host may claim the DPU's "
                       "RShim when it appears", evidence=evidence)
    return Verdict("pass", f"{len(bluefield)} BlueField function(s), no host RShim path", 0, evidence=evidence)


@check("audit.isolation.ib_tenant")
def ib_tenant(ctx: Context) -> Verdict:
    facts = node_facts(ctx, NODE)
    ports = []
    for line in facts.get("ib_port") or []:
        parts = line.split()
        if len(parts) >= 2:
            pkeys = [k.lower() for k in (parts[2].split(",") if len(parts) > 2 else []) if k]
            ports.append({"port": parts[0], "link_layer": parts[1], "pkeys": pkeys})
    ib = [p for p in ports if p["link_layer"] == "InfiniBand"]
    if not ib:
        raise Skip("no native InfiniBand port (RoCE, Ethernet or none): P_Key isolation does not apply")
    umad = [line.split() for line in facts.get("umad") or []]
    open_umad = [u[0] for u in umad if len(u) > 1 and _octal_other_rw(u[1])]
    evidence = {"ports": ib, "umad_open_to_all": open_umad}
    if open_umad:
        return Verdict("fail", f"MAD access open to every user ({', '.join(open_umad)}): unprivileged processes can "
                       "query and, without M_Keys, reconfigure the subnet", len(open_umad), evidence=evidence)
    unreadable = [p["port"] for p in ib if not p["pkeys"]]
    if unreadable:
        return Verdict("warn", f"P_Key table unreadable on {', '.join(unreadable)}", evidence=evidence)
    default_full = [p["port"] for p in ib if p["pkeys"] == ["0xffff"]]
    if default_full:
        return Verdict("warn", f"{len(default_full)} port(s) only in the default partition as full members (0xffff): "
                       "every HCA on the fabric is reachable; fine only if the whole fabric is this tenant's",
                       len(default_full), evidence=evidence)
    return Verdict("pass", f"{len(ib)} InfiniBand port(s) in a tenant partition "
                   f"({', '.join(sorted({k for p in ib for k in p['pkeys']}))})", 0, evidence=evidence)


@check("audit.isolation.hbm_numa")
def hbm_numa(ctx: Context) -> Verdict:
    facts = node_facts(ctx, NODE)
    if first(facts, "arch") != "aarch64":
        raise Skip(f"{first(facts, 'arch') or 'unknown'} node: HBM-as-NUMA concerns Grace (aarch64) superchips")
    require_gpu(ctx)
    nodes = []
    for line in facts.get("numa") or []:
        match = re.match(r"(node\d+) cpus=(\S*) kb=(\d+)", line)
        if match:
            nodes.append({"node": match.group(1), "cpus": match.group(2), "gib": int(match.group(3)) / 2**20})
    if not nodes:
        raise HarnessError("no NUMA node information in /sys/devices/system/node")
    cpu_less = [n for n in nodes if not n["cpus"] and n["gib"] > 0]
    exposed = round(sum(n["gib"] for n in cpu_less), 1)
    lim = ctx.limit("isolation", "audit.isolation.hbm_numa")
    status = baselines.grade(exposed, lim)
    evidence = {"numa_nodes": nodes, "cpu_less_nodes": [n["node"] for n in cpu_less]}
    # "NUMA nodes 2, 3" (sysfs calls them node2, node3, which reads like the cluster's node names).
    named = "NUMA node" + ("s " if len(cpu_less) > 1 else " ") + ", ".join(n["node"][4:] for n in cpu_less)
    summary = {"pass": "no CPU-less NUMA memory: GPU HBM is not onlined as system memory",
               "warn": f"{exposed} GiB of CPU-less NUMA memory ({named})",
               "fail": f"{exposed} GiB of GPU HBM onlined as system NUMA memory "
                       f"({named}): the OS can place any process's pages there"}
    return Verdict(status, summary[status], exposed, expected=lim.expected(), evidence=evidence)
