"""Audit checks for the networking fabric: RDMA class and rails, port rates, NIC links, HCA naming,
NCCL settings, InfiniBand partitions, Slurm topology and multi-node NVLink (IMEX).

Evidence (probes in ``checks/probes/fabric.yml``, read by the parsers in
:mod:`clustereval.parsers.probe_fabric` and :mod:`clustereval.parsers.ip_link`):

* ``fabric_rdma``: Linux sysfs ``/sys/class/infiniband`` (kernel 4.x-6.x, any rdma-core / MLNX_OFED /
  DOCA-OFED) printed as our own ``key value`` lines, values in the kernel's formats.
* ``fabric_links``: ``ip -j -d link show`` (iproute2 4.x-6.x JSON; ``parentbus`` from 5.x).
* ``fabric_host``: NCCL configuration files and ``NCCL_*`` environment (NCCL 2.x ``KEY=VALUE`` syntax),
  and the IMEX daemon state (nvidia-imex, driver 550+).
* ``fabric_slurm_topology``: ``scontrol show config`` topology keys, ``scontrol show topology`` (tree or
  block plugins, Slurm 17.11-25.11) and the node count from ``sinfo``.
* the core ``nvidia_smi_q_x`` probe (``<fabric>`` of each GPU) and ``slurm_node`` (node features).
"""

from __future__ import annotations

import re
from collections import Counter
from functools import cache
from importlib import resources
from typing import Any

from clustereval import yamldata
from clustereval.checks import Context, HarnessError, ProbeFailed, Skip, Verdict, audit_k8s, check, facts
from clustereval.parsers.nvidia_smi_q_x_text import gpu_fabric, lists_gpus
from clustereval.parsers.probe_fabric import leaf_switch
from clustereval.results import worst

RDMA_PROBE = "fabric_rdma"
LINKS_PROBE = "fabric_links"
HOST_PROBE = "fabric_host"
TOPOLOGY_PROBE = "fabric_slurm_topology"
GPU_PROBE = "nvidia_smi_q_x"
SLURM_NODE_PROBE = "slurm_node"

# Kernel-assigned (mlx5_N, mlx4_N, bonded mlx5_bond_N), AWS EFA (efa_N, rdmapXsY), Soft-RoCE (rxeN)
# and the B300 rail names ClusterMAX accepts (roce_pN_railN).
STANDARD_HCA_NAME = re.compile(r"^(mlx[45]_(bond_)?\d+|efa_\d+|rdmap\d+s\d+(f\d+)?|rxe\d+|roce_p\d+_rail\d+)$")
# rdma-core's "predictable" names (udev NAME_FALLBACK / NAME_PCI): ibp26s0, rocep1s0f0, roceP2p1s0f1.
PREDICTABLE_HCA_NAME = re.compile(r"^(ibp|rocep|roceP|iwp)\w+$")
# Settings in a global nccl.conf that override NCCL's tuner for every job (warn) or take a transport
# away (fail).
NCCL_TUNING = ("NCCL_ALGO", "NCCL_PROTO", "NCCL_MIN_NCHANNELS", "NCCL_MAX_NCHANNELS", "NCCL_NTHREADS",
               "NCCL_BUFFSIZE", "NCCL_MIN_CTAS", "NCCL_MAX_CTAS", "NCCL_CROSS_NIC")
NCCL_DISABLING = {"NCCL_IB_DISABLE": "InfiniBand/RoCE transport disabled: inter-node traffic goes over TCP",
                  "NCCL_P2P_DISABLE": "GPU peer-to-peer (NVLink/PCIe) disabled",
                  "NCCL_NET_GDR_LEVEL": None, "NCCL_SHM_DISABLE": "shared-memory transport disabled"}
QPS_KEY = "NCCL_IB_QPS_PER_CONNECTION"
NCCL_DEFAULT_QPS = 1
DEFAULT_PKEY = 0x7FFF
FULL_MEMBER = 0x8000


@cache
def _baseline() -> dict[str, Any]:
    text = resources.files("clustereval.baselines").joinpath("fabric.yml").read_text(encoding="utf-8")
    return yamldata.load(text)


def fabric_class(hca: dict[str, Any], port: dict[str, Any]) -> str:
    """InfiniBand, RoCE, EFA, Soft-RoCE or iWARP for one port, from the device's own evidence."""
    vendor_entry = (_baseline().get("rdma_vendors") or {}).get(str(hca.get("pci_vendor") or "").lower()) or {}
    if vendor_entry.get("fabric"):
        return str(vendor_entry["fabric"])
    name, driver = str(hca.get("name") or ""), str(hca.get("driver") or "")
    if name.startswith(("efa", "rdmap")) or driver == "efa":
        return "EFA"
    if name.startswith(("rxe", "siw")) or driver in ("rdma_rxe", "siw"):
        return "Soft-RoCE"
    if name.startswith(("iwp", "irdma")) and str(port.get("link_layer")) == "Ethernet":
        return "iWARP"
    layer = str(port.get("link_layer") or "")
    if layer == "InfiniBand":
        return "InfiniBand"
    if layer == "Ethernet":
        return "RoCE"
    return layer or "unknown"


def _model(hca: dict[str, Any]) -> dict[str, Any]:
    return (_baseline().get("nic_models") or {}).get(str(hca.get("hca_type") or "")) or {}


def _in_multinode_domain(entry: dict[str, str]) -> bool:
    uuid = entry.get("clusterUuid") or "N/A"
    return uuid not in ("N/A", "") and set(uuid.replace("-", "")) != {"0"}


# --------------------------------------------------------------------------- evidence accessors

def _rdma(ctx: Context) -> list[dict[str, Any]]:
    """The RDMA devices (parser ``probe-fabric-rdma``); a listing cut short or garbled is a harness error."""
    data = ctx.parsed(RDMA_PROBE)
    if not data["complete"]:
        raise HarnessError(f"could not read the RDMA devices from sysfs: {data['warnings'][0]}")
    return data["hcas"]


def _has_gpus(ctx: Context) -> bool | None:
    """True/False when nvidia-smi told, None when it could not be read."""
    probe = ctx.probes.get(GPU_PROBE)
    if not probe or probe.get("missing"):
        return False if probe else None
    if probe.get("rc") not in (0, None) or probe.get("timed_out"):
        return None
    return lists_gpus(str(probe.get("stdout") or ""))


def _ports(hcas: list[dict[str, Any]]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    return [(hca, port) for hca in hcas for port in hca["ports"]]


def _label(hca: dict[str, Any], port: dict[str, Any]) -> str:
    return f"{hca['name']}/{port['port']}"


def _no_rdma(ctx: Context) -> Skip:
    return Skip(f"{ctx.subject} has no RDMA device (/sys/class/infiniband is empty)")


# --------------------------------------------------------------------------- node checks

@check("audit.fabric.class")
def fabric_class_check(ctx: Context) -> Verdict:
    hcas = _rdma(ctx)
    has_gpus = _has_gpus(ctx)
    if not hcas:
        if has_gpus:
            return Verdict("warn", f"GPU node {ctx.subject} has no RDMA device: multi-node NCCL traffic "
                           "would run over TCP sockets", 0, evidence={"rdma_devices": []})
        raise _no_rdma(ctx)
    groups: dict[str, list[tuple[dict[str, Any], dict[str, Any]]]] = {}
    for hca, port in _ports(hcas):
        groups.setdefault(fabric_class(hca, port), []).append((hca, port))
    evidence: dict[str, Any] = {"classes": {}, "devices": {}}
    for cls, members in groups.items():
        active = [(h, p) for h, p in members if p["active"]]
        evidence["classes"][cls] = {"ports": len(members), "active": len(active),
                                    "gbps": sum(p["rate_gbps"] or 0 for _, p in active)}
    for hca, port in _ports(hcas):
        evidence["devices"][_label(hca, port)] = {
            "class": fabric_class(hca, port), "model": _model(hca).get("name") or hca.get("hca_type"),
            "state": port.get("state"), "rate_gbps": port.get("rate_gbps"), "link_layer": port.get("link_layer")}
    hardware = {c: v for c, v in evidence["classes"].items() if c not in ("Soft-RoCE",)}
    # The GPU fabric is the class with the most bandwidth on active ports (front-end NICs rank lower).
    ranked = sorted(hardware.items(), key=lambda kv: (kv[1]["gbps"], kv[1]["ports"]), reverse=True)
    describe = "; ".join(f"{cls}: {v['active']}/{v['ports']} ports active, {v['gbps']:g} Gb/s"
                         for cls, v in ranked or evidence["classes"].items())
    if not hardware:
        return Verdict("warn", f"only software RDMA ({', '.join(evidence['classes'])}) on {ctx.subject}: no "
                       "hardware fabric for GPUDirect RDMA", 0, evidence=evidence)
    main_cls, main = ranked[0]
    evidence["fabric"] = main_cls
    if main["active"] == 0:
        return Verdict("fail", f"{ctx.subject} has RDMA devices but no active port ({describe})", 0,
                       evidence=evidence)
    return Verdict("pass", f"{main_cls} fabric, {main['active']} active port(s), {main['gbps']:g} Gb/s per node"
                   + (f" ({describe})" if len(ranked) > 1 else ""), main["gbps"], evidence=evidence)


def _expected_rates(ctx: Context) -> dict[str, Any]:
    """Inventory override of the expected rate per link layer ({infiniband: 400, ethernet: 200})."""
    override = (ctx.options.get("baseline_overrides") or {}).get("audit.fabric.port_rate") or {}
    return {str(k).lower(): v for k, v in override.items()}


@check("audit.fabric.port_rate")
def port_rate(ctx: Context) -> Verdict:
    hcas = _rdma(ctx)
    ports = _ports(hcas)
    if not ports:
        raise _no_rdma(ctx)
    override = _expected_rates(ctx)
    down, degraded, below_model, unknown = [], [], [], []
    expected_by_port: dict[str, Any] = {}
    groups: dict[tuple[str, str], list[tuple[dict[str, Any], dict[str, Any]]]] = {}
    for hca, port in ports:
        if fabric_class(hca, port) == "Soft-RoCE":
            continue
        groups.setdefault((str(hca.get("hca_type")), str(port.get("link_layer"))), []).append((hca, port))
    for (_, layer), members in groups.items():
        active_rates = [p["rate_gbps"] for _, p in members if p["active"] and p["rate_gbps"]]
        peer_best = max(active_rates) if active_rates else None
        layer_key = layer.lower()
        explicit = override.get(layer_key)
        model_rate = _model(members[0][0]).get(layer_key)
        for hca, port in members:
            label = _label(hca, port)
            target = explicit or peer_best or model_rate
            expected_by_port[label] = target
            if not port["active"]:
                down.append(f"{label} {port.get('state') or '?'}/{port.get('phys_state') or '?'}")
            elif port["rate_gbps"] is None:
                unknown.append(label)
            elif target and port["rate_gbps"] < float(target):
                degraded.append(f"{label} at {port['rate_gbps']:g} Gb/s (expected {float(target):g})")
        if not explicit and model_rate and peer_best and peer_best < float(model_rate):
            below_model.append(f"{len(members)} {_model(members[0][0]).get('name')} {layer} port(s) at "
                               f"{peer_best:g} Gb/s, below the model's {float(model_rate):g}")
    judged = sum(len(m) for m in groups.values())
    evidence = {"down": down, "degraded": degraded, "below_model_rate": below_model, "rate_unreadable": unknown,
                "expected_gbps": expected_by_port, "ports": judged}
    expected = {"min": sorted({v for v in expected_by_port.values() if v}), "unit": "Gb/s",
                "source": "inventory override" if override else "baselines/fabric.yml nic_models / peer ports"}
    bad = down + degraded
    if bad:
        return Verdict("fail", f"{len(bad)} of {judged} RDMA port(s) down or degraded: {'; '.join(bad)}",
                       judged - len(bad), expected=expected, evidence=evidence)
    if unknown:
        raise HarnessError(f"the rate of {', '.join(unknown)} could not be read from sysfs")
    if below_model:
        return Verdict("warn", f"every port active but {'; '.join(below_model)}: confirm the fabric is built for "
                       "this rate (set it in clustereval_baseline_overrides to make it the expectation)",
                       judged, expected=expected, evidence=evidence)
    if not judged:
        raise Skip(f"{ctx.subject} has only software RDMA devices (no physical port to judge)")
    rates = Counter(f"{p['rate_gbps']:g}" for members in groups.values() for _, p in members)
    return Verdict("pass", f"all {judged} RDMA port(s) active at the expected rate "
                   f"({', '.join(f'{n} × {r} Gb/s' for r, n in rates.items())})", judged,
                   expected=expected, evidence=evidence)


def _physical(link: dict[str, Any]) -> bool:
    """A NIC on a bus (PCI, virtio...), not loopback or a virtual device (bridge, veth, bond, vlan...)."""
    if link.get("link_type") == "loopback" or (link.get("linkinfo") or {}).get("info_kind"):
        return False
    return bool(link.get("parentbus"))


@check("audit.fabric.nic_link")
def nic_link(ctx: Context) -> Verdict:
    links = ctx.parsed(LINKS_PROBE)["links"]
    physical = [link for link in links if _physical(link)]
    if not physical:
        raise Skip(f"ip lists no physical network interface on {ctx.subject} (only virtual devices)")
    no_carrier, admin_down, up = [], [], []
    for link in physical:
        flags = {str(f).upper() for f in link.get("flags") or []}
        name = f"{link['ifname']} ({link.get('parentbus')} {link.get('parentdev', '')})".replace(" )", ")")
        if "UP" not in flags:
            admin_down.append(link["ifname"])
        elif "LOWER_UP" not in flags or str(link.get("operstate")).upper() in ("DOWN", "LOWERLAYERDOWN"):
            no_carrier.append(name)
        else:
            up.append(link["ifname"])
    evidence = {"up": up, "configured_without_link": no_carrier, "administratively_down": admin_down}
    if no_carrier:
        return Verdict("fail", f"{len(no_carrier)} interface(s) configured up with no link: {', '.join(no_carrier)}",
                       len(no_carrier), evidence=evidence)
    if not up:
        return Verdict("warn", f"no physical interface of {ctx.subject} is up (all administratively down: "
                       f"{', '.join(admin_down)})", 0, evidence=evidence)
    note = f"; not configured: {', '.join(admin_down)}" if admin_down else ""
    return Verdict("pass", f"{len(up)} physical interface(s) up with link{note}", 0, evidence=evidence)


@check("audit.fabric.hca_naming")
def hca_naming(ctx: Context) -> Verdict:
    hcas = _rdma(ctx)
    if not hcas:
        raise _no_rdma(ctx)
    names = [h["name"] for h in hcas]
    standard = [n for n in names if STANDARD_HCA_NAME.match(n)]
    predictable = [n for n in names if PREDICTABLE_HCA_NAME.match(n)]
    other = [n for n in names if n not in standard and n not in predictable]
    evidence = {"names": names, "standard": standard, "predictable": predictable, "other": other}
    schemes = sum(1 for group in (standard, predictable, other) if group)
    if schemes > 1:
        odd = predictable + other if len(standard) >= len(names) / 2 else standard + other
        return Verdict("fail", f"mixed HCA naming on one node ({', '.join(odd)} next to "
                       f"{', '.join(n for n in names if n not in odd)}): NCCL_IB_HCA prefixes and topology "
                       "files miss some rails", len(odd), evidence=evidence)
    if standard:
        return Verdict("pass", f"{len(names)} RDMA device(s) named {_compress(names)}", 0, evidence=evidence)
    return Verdict("warn", f"RDMA devices use non-standard names ({', '.join(names)}) rather than mlx5_N: "
                   "job scripts and NCCL_IB_HCA settings written for mlx5_N will not match", len(names),
                   evidence=evidence)


def _compress(names: list[str]) -> str:
    numbered = [re.match(r"^(.*?)(\d+)$", n) for n in names]
    if all(numbered) and len({m.group(1) for m in numbered}) == 1 and len(names) > 2:
        nums = sorted(int(m.group(2)) for m in numbered)
        if nums == list(range(nums[0], nums[0] + len(nums))):
            return f"{numbered[0].group(1)}{nums[0]}..{nums[-1]}"
    return ", ".join(names)


def _host(ctx: Context) -> dict[str, Any]:
    """The NCCL and IMEX host probe (parser ``probe-fabric-host``), whole."""
    data = ctx.parsed(HOST_PROBE)
    if not data["complete"]:
        raise HarnessError("the NCCL/IMEX host probe output is incomplete (no '### env' or '### end' line)")
    return data


def _nccl(ctx: Context) -> dict[str, Any]:
    return _host(ctx)["nccl"]


@check("audit.fabric.nccl_conf")
def nccl_conf(ctx: Context) -> Verdict:
    settings = _nccl(ctx)
    effective = settings["effective"]
    evidence = {"files": settings["files"], "env": settings["env"]}
    if not effective:
        return Verdict("pass", "no global NCCL settings (no nccl.conf, no NCCL_* in the environment): "
                       "NCCL tunes itself", 0, evidence=evidence)
    failures, warnings = [], []
    for key, reason in NCCL_DISABLING.items():
        item = effective.get(key)
        if not item:
            continue
        value = item["value"]
        if key == "NCCL_NET_GDR_LEVEL":
            if value.upper() in ("0", "LOC"):
                warnings.append(f"{key}={value} ({item['source']}): GPUDirect RDMA never used")
        elif value.strip() not in ("", "0"):
            (failures if key != "NCCL_SHM_DISABLE" else warnings).append(
                f"{key}={value} ({item['source']}): {reason}")
    hca_list = effective.get("NCCL_IB_HCA")
    if hca_list:
        try:
            present = [h["name"] for h in _rdma(ctx)]
        except (Skip, HarnessError, ProbeFailed):
            present = None
        if present is not None:
            missing = _unmatched_hcas(hca_list["value"], present)
            if missing:
                failures.append(f"NCCL_IB_HCA={hca_list['value']} ({hca_list['source']}) names "
                                f"{', '.join(missing)}, absent on this node (has {_compress(present) or 'none'})")
    for key in NCCL_TUNING:
        if key in effective:
            warnings.append(f"{key}={effective[key]['value']} ({effective[key]['source']})")
    evidence.update(failures=failures, warnings=warnings)
    if failures:
        return Verdict("fail", "; ".join(failures + warnings), len(failures) + len(warnings), evidence=evidence)
    if warnings:
        return Verdict("warn", "global NCCL overrides pin the tuner for every job: " + "; ".join(warnings),
                       len(warnings), evidence=evidence)
    return Verdict("pass", f"NCCL settings present but none overrides tuning or transports "
                   f"({', '.join(sorted(effective))})", 0, evidence=evidence)


def _unmatched_hcas(value: str, present: list[str]) -> list[str]:
    """Entries of an NCCL_IB_HCA value (``^`` exclude, ``=`` exact, ``:port`` suffixes) matching no device."""
    spec = value.strip()
    if spec.startswith("^"):
        return []  # an exclusion list cannot name a missing rail
    exact = spec.startswith("=")
    missing = []
    for item in spec.lstrip("=").split(","):
        name = item.split(":")[0].strip()
        if not name:
            continue
        hit = any(dev == name for dev in present) if exact else any(dev.startswith(name) for dev in present)
        if not hit:
            missing.append(name)
    return missing


@check("audit.fabric.ib_isolation")
def ib_isolation(ctx: Context) -> Verdict:
    hcas = _rdma(ctx)
    ib_ports = [(h, p) for h, p in _ports(hcas) if p.get("link_layer") == "InfiniBand"]
    if not hcas:
        raise _no_rdma(ctx)
    if not ib_ports:
        raise Skip("no InfiniBand port: RoCE/EFA tenant isolation is set in the switches or VPC (VLAN, VRF, "
                   "security groups) and is not visible from the host")
    full_default, partitioned, mixed, empty = [], [], [], []
    table: dict[str, list[str]] = {}
    for hca, port in ib_ports:
        label = _label(hca, port)
        keys = port["pkeys"]
        table[label] = [f"0x{pk:04x}" for pk in keys]
        tenant_full = [pk for pk in keys if pk & FULL_MEMBER and pk & DEFAULT_PKEY != DEFAULT_PKEY]
        default_full = 0xFFFF in keys
        if not keys:
            empty.append(label)
        elif default_full and tenant_full:
            mixed.append(label)
        elif default_full:
            full_default.append(label)
        else:
            partitioned.append(label)
    evidence = {"pkeys": table, "default_full_member": full_default, "tenant_and_default_full": mixed}
    if empty:
        raise HarnessError(f"no PKey could be read for {', '.join(empty)} (sysfs pkeys unreadable)")
    if mixed:
        return Verdict("fail", f"{', '.join(mixed)} hold a tenant partition but are still full members of the "
                       "default partition (0xffff): the partition isolates nothing", len(mixed), evidence=evidence)
    if full_default:
        return Verdict("warn", f"{len(full_default)} InfiniBand port(s) are full members of the default "
                       "partition (PKey 0xffff only): isolation holds only if the whole fabric is dedicated to "
                       "this tenant (usual on a dedicated cluster; not verifiable from the host)",
                       len(full_default), evidence=evidence)
    return Verdict("pass", f"{len(partitioned)} InfiniBand port(s) in tenant partition(s), at most limited "
                   "members of the default partition", 0, evidence=evidence)


@check("audit.fabric.imex")
def imex(ctx: Context) -> Verdict:
    try:
        xml_text = str(ctx.probe(GPU_PROBE).get("stdout") or "")
    except ProbeFailed as exc:
        return Verdict("warn", f"the GPUs' NVLink fabric state is unknown: {exc}", evidence={"rc": exc.probe.get("rc")})
    if not lists_gpus(xml_text):
        raise Skip(f"no NVIDIA GPU on {ctx.subject}")
    gpus = gpu_fabric(xml_text)
    domain = [g for g in gpus if _in_multinode_domain(g)]
    if not domain:
        raise Skip("the GPUs report no multi-node NVLink domain (fabric cluster UUID N/A or zero): "
                   "IMEX is not needed")
    state = ctx.parsed(HOST_PROBE)["imex"]
    if state is None:
        raise HarnessError("the host probe output has no complete '### imex' section")
    not_ready = [f"GPU {i}: {g['state']}/{g['status']}" for i, g in enumerate(gpus)
                 if _in_multinode_domain(g) and (g["state"] != "Completed" or g["status"] != "Success")]
    clusters = sorted({g["clusterUuid"] for g in domain})
    evidence = {"fabric": gpus, "cluster_uuids": clusters, "imex": state}
    problems = []
    if not_ready:
        problems.append(f"NVLink fabric registration incomplete ({'; '.join(not_ready)})")
    if not state["running"]:
        problems.append("the nvidia-imex daemon is not running" + ("" if state["binary"] else " (not installed)"))
    if not state["nodes_config"]:
        problems.append("/etc/nvidia-imex/nodes_config.cfg lists no peer node")
    if problems:
        return Verdict("fail", f"multi-node NVLink domain {clusters[0]}: " + "; ".join(problems),
                       evidence=evidence)
    if not state["channels"]:
        return Verdict("warn", "IMEX is running but no IMEX channel exists under /dev/nvidia-caps-imex-channels: "
                       "jobs cannot import memory across nodes until one is created", evidence=evidence)
    return Verdict("pass", f"multi-node NVLink domain {clusters[0]} ({len(domain)} GPU(s)); IMEX running with "
                   f"{state['nodes_config']} peer(s), channel(s) {', '.join(state['channels'])}",
                   len(state["channels"]), evidence=evidence)


# --------------------------------------------------------------------------- facts and cluster checks

RACK_FEATURE = re.compile(r"^rack[_:=-]?(\w[\w.-]*)$", re.I)


@facts(probes=[RDMA_PROBE, HOST_PROBE, SLURM_NODE_PROBE, TOPOLOGY_PROBE])
def fabric_facts(ctx: Context) -> dict[str, Any]:
    """Per-host fabric facts for the cluster checks (rails, naming, QPS, Slurm topology, rack)."""
    out: dict[str, Any] = {"problems": {}, "artifacts": {}}
    try:
        hcas = _rdma(ctx)
        ports = _ports(hcas)
        out["fabric_hcas"] = sorted(h["name"] for h in hcas)
        out["fabric_rails"] = sorted(
            f"{_label(h, p)} {fabric_class(h, p)} " + (f"{p.get('rate_gbps') or 0:g}G" if p["active"] else "down")
            for h, p in ports)
        out["fabric_firmware"] = sorted({f"{h.get('hca_type')} {h.get('fw_ver')}" for h in hcas})
        classes = Counter(fabric_class(h, p) for h, p in ports if p["active"])
        out["fabric_class"] = classes.most_common(1)[0][0] if classes else None
        out["artifacts"]["fabric_rdma"] = ctx.probes[RDMA_PROBE].get("artifact")
    except (Skip, HarnessError, ProbeFailed) as exc:
        out["problems"]["fabric_rdma"] = str(exc)
    try:
        settings = _nccl(ctx)
        item = settings["effective"].get(QPS_KEY)
        out["fabric_nccl_qps"] = item["value"] if item else str(NCCL_DEFAULT_QPS)
        out["fabric_nccl_qps_source"] = item["source"] if item else "NCCL default"
        out["artifacts"]["fabric_host"] = ctx.probes[HOST_PROBE].get("artifact")
    except (Skip, HarnessError, ProbeFailed) as exc:
        out["problems"]["fabric_nccl"] = str(exc)
    node_name = None
    try:
        node_name = ctx.parsed(SLURM_NODE_PROBE)["nodes"][0]["name"]
        features = str(ctx.parsed(SLURM_NODE_PROBE)["nodes"][0].get("features") or "")
        racks = [m.group(1) for m in map(RACK_FEATURE.match, features.split(",")) if m]
        out["fabric_rack_feature"] = racks[0] if racks else None
    except (Skip, HarnessError, ProbeFailed, KeyError, IndexError):
        pass
    try:
        topo = ctx.parsed(TOPOLOGY_PROBE)
        out.update(fabric_topology_plugin=topo["plugin"], fabric_topology_levels=topo["levels"],
                   fabric_topology_switches=len(topo["switches"]), fabric_leaf_switch=leaf_switch(topo, node_name),
                   fabric_slurm_nodes=topo["slurm_nodes"])
        out["artifacts"]["fabric_topology"] = ctx.probes[TOPOLOGY_PROBE].get("artifact")
    except (Skip, HarnessError, ProbeFailed) as exc:
        out["problems"]["fabric_topology"] = str(exc)
    return out


def _racks(ctx: Context) -> tuple[dict[str, str], str]:
    """Rack per host and where it came from: the inventory map, Slurm leaf switches, or node features."""
    inventory = ctx.options.get("rack_of") or {}
    if inventory:
        return {str(h): str(r) for h, r in inventory.items()}, "inventory rack_of"
    for key, source in (("fabric_leaf_switch", "Slurm topology leaf switch"),
                        ("fabric_rack_feature", "Slurm node feature")):
        found = {h: f[key] for h, f in ctx.fleet.items() if f and f.get(key)}
        if found:
            return found, source
    return {}, "unknown"


def _fleet_topology(ctx: Context) -> dict[str, Any]:
    reporting = {h: f for h, f in ctx.fleet.items() if f and f.get("fabric_topology_plugin")}
    if not reporting:
        problems = {h: (f or {}).get("problems", {}).get("fabric_topology") for h, f in ctx.fleet.items()}
        harness = {h: p for h, p in problems.items() if p and "not installed" not in p}
        if harness:
            detail = "; ".join(f"{h}: {p}" for h, p in harness.items())
            raise HarnessError(f"could not read the Slurm topology on any node: {detail[:400]}")
        raise Skip("no node reported a Slurm configuration (scontrol not installed)")
    plugins = Counter(f["fabric_topology_plugin"] for f in reporting.values())
    racks, rack_source = _racks(ctx)
    slurm_nodes = max((f.get("fabric_slurm_nodes") or 0) for f in reporting.values())
    levels = max((f.get("fabric_topology_levels") or 0) for f in reporting.values())
    ctx.extra_artifacts.extend(a for a in ((f.get("artifacts") or {}).get("fabric_topology")
                                           for f in reporting.values()) if a)
    return {"plugin": plugins.most_common(1)[0][0], "plugins": dict(plugins), "racks": racks,
            "rack_source": rack_source, "rack_count": len(set(racks.values())),
            "nodes": max(slurm_nodes, len(ctx.fleet)), "levels": levels}


@check("audit.fabric.topology")
def topology(ctx: Context) -> Verdict:
    topo = _fleet_topology(ctx)
    lim = ctx.limit("fabric", "audit.fabric.topology")
    evidence = {k: topo[k] for k in ("plugin", "plugins", "rack_source", "rack_count", "nodes", "levels")}
    evidence["racks"] = dict(sorted(topo["racks"].items()))
    expected = {"plugin": "topology/tree or topology/block", "when_nodes_over": lim.warn,
                "source": lim.source}
    flat = topo["plugin"] in ("topology/flat", "topology/none", "topology/default")
    if len(topo["plugins"]) > 1:
        return Verdict("warn", f"nodes disagree on TopologyPlugin ({topo['plugins']}): slurm.conf differs "
                       "between nodes", topo["rack_count"], expected=expected, evidence=evidence)
    if not flat:
        where = f", {topo['levels']} switch level(s)" if topo["levels"] else ""
        return Verdict("pass", f"Slurm schedules with {topo['plugin']}{where}", topo["rack_count"],
                       expected=expected, evidence=evidence)
    if topo["rack_count"] > 1:
        return Verdict("fail", f"the cluster spans {topo['rack_count']} racks ({topo['rack_source']}) but Slurm "
                       f"uses {topo['plugin']}: multi-node jobs are placed without regard to switches",
                       topo["rack_count"], expected=expected, evidence=evidence)
    if topo["nodes"] > float(lim.warn):
        return Verdict("warn", f"{topo['nodes']} nodes cannot share one leaf switch (over {lim.warn}) but Slurm "
                       f"uses {topo['plugin']} and the racks are unknown", topo["rack_count"],
                       expected=expected, evidence=evidence)
    racks = "one rack" if topo["rack_count"] == 1 else "racks not known"
    return Verdict("pass", f"{topo['nodes']} node(s), {racks}: {topo['plugin']} loses nothing at this size",
                   topo["rack_count"], expected=expected, evidence=evidence)


def _short(name: str) -> str:
    return str(name).split(".", 1)[0].lower()


def _k8s_hosts(fleet: list[str], nodes: list[str]) -> dict[str, str]:
    """Inventory host of each Kubernetes node: the same name, or the same short name (FQDN vs hostname)."""
    by_short: dict[str, list[str]] = {}
    for host in fleet:
        by_short.setdefault(_short(host), []).append(host)
    out = {}
    for node in nodes:
        if node in fleet:
            out[node] = node
        elif len(by_short.get(_short(node), [])) == 1:
            out[node] = by_short[_short(node)][0]
    return out


def _k8s_fabric_topology(ctx: Context) -> dict[str, Any]:
    """Racks of the nodes from the inventory ``rack_of``, else the Kubernetes node topology labels.

    The label that splits the evaluated GPU nodes (those that are inventory hosts; every GPU node when
    none maps) into the most groups is the lowest switch tier the provider labels; more than one group
    means traffic between them crosses a tier above. ``problem`` says why the labels could not be read.
    """
    topo: dict[str, Any] = {"levels": 0, "racks": {}, "rack_count": 0, "rack_source": "unknown",
                            "nodes": len(ctx.fleet), "problem": None}
    try:
        groups = audit_k8s.switch_groups(ctx)
    except (Skip, HarnessError, audit_k8s.Forbidden) as exc:
        groups = {}
        topo["problem"] = f"could not read the Kubernetes node topology labels: {exc}"
    hosts = _k8s_hosts(list(ctx.fleet), list(groups))
    judged = {n: g for n, g in groups.items() if n in hosts} or groups
    counts = {label: len({g[label] for g in judged.values() if label in g})
              for label in sorted({label for g in judged.values() for label in g})}
    label = max(counts, key=lambda k: counts[k]) if counts else None
    topo.update(nodes=max(len(ctx.fleet), len(groups)), k8s_gpu_nodes=len(groups),
                k8s_nodes_not_in_inventory=sorted(set(groups) - set(hosts)))
    inventory = ctx.options.get("rack_of") or {}
    if inventory:
        racks, source = _racks(ctx)
        topo.update(racks=racks, rack_source=source, rack_count=len(set(racks.values())), problem=None)
    elif label:
        # one group under every label: name them all (any of them would do, none is "the" rack)
        source = (f"Kubernetes node label {label}" if counts[label] > 1 else
                  f"Kubernetes node label{'s' if len(counts) > 1 else ''} {', '.join(list(counts)[:4])}")
        topo.update(racks={hosts.get(n, n): g[label] for n, g in judged.items() if label in g},
                    rack_source=source, rack_count=counts[label], label=label)
    elif groups:
        topo["rack_source"] = "no rack/block topology label on the GPU nodes"
    return topo


@check("audit.fabric.nccl_ib_qps")
def nccl_ib_qps(ctx: Context) -> Verdict:
    qps = {h: f.get("fabric_nccl_qps") for h, f in sorted(ctx.fleet.items()) if f and f.get("fabric_nccl_qps")}
    classes = Counter(f.get("fabric_class") for f in ctx.fleet.values() if f and f.get("fabric_class"))
    if not qps:
        problems = {h: (f or {}).get("problems", {}).get("fabric_nccl") for h, f in ctx.fleet.items()}
        harness = {h: p for h, p in problems.items() if p}
        if harness:
            raise HarnessError("could not read the NCCL settings: "
                               + "; ".join(f"{h}: {p}" for h, p in harness.items())[:400])
        raise Skip("no node reported its NCCL settings")
    fabric = classes.most_common(1)[0][0] if classes else None
    if fabric not in ("InfiniBand", "RoCE"):
        raise Skip(f"the fabric is {fabric or 'not RDMA'}: NCCL_IB_QPS_PER_CONNECTION applies to InfiniBand/RoCE")
    k8s = ctx.options.get("harness") == "k8s"
    if k8s:
        topo = _k8s_fabric_topology(ctx)
    else:
        try:
            topo = _fleet_topology(ctx)
        except (Skip, HarnessError):
            racks, _ = _racks(ctx)
            topo = {"levels": 0, "rack_count": len(set(racks.values())), "nodes": len(ctx.fleet)}
    threshold = ctx.limit("fabric", "audit.fabric.topology").warn
    tiers_reason = (f"{topo['levels']} switch levels in Slurm's topology" if topo["levels"] > 1 else
                    f"{topo['rack_count']} racks" if topo["rack_count"] > 1 else
                    f"{topo['nodes']} nodes (over {threshold})" if topo["nodes"] > float(threshold) else None)
    if k8s and tiers_reason and topo["rack_count"] > 1 and topo.get("label"):
        tiers_reason = f"the GPU nodes span {topo['rack_count']} values of the node label {topo['label']}"
    lim = ctx.limit("fabric", "audit.fabric.nccl_ib_qps")
    evidence = {"qps": qps, "fabric": fabric, "multi_tier": tiers_reason}
    if k8s:
        evidence["topology"] = {k: topo.get(k) for k in ("rack_source", "rack_count", "nodes", "k8s_gpu_nodes",
                                                          "k8s_nodes_not_in_inventory", "problem")}
        evidence["topology"]["racks"] = dict(sorted(topo["racks"].items()))
        if not tiers_reason and topo["problem"]:
            raise HarnessError(f"cannot tell whether the fabric is multi-tier ({topo['nodes']} node(s), "
                               f"no inventory rack_of): {topo['problem']}"[:600])
    if not tiers_reason:
        where = (f"; {topo['rack_source']}" + (": one group" if topo["rack_count"] else "")) if k8s else ""
        raise Skip(f"single-tier fabric ({topo['nodes']} nodes, one switch level{where}): one QP per connection "
                   "loses no path diversity")
    low, bad = [], []
    for host, value in qps.items():
        if not str(value).strip().isdigit():
            bad.append(f"{host} ({value})")
        elif int(value) < float(lim.warn):
            low.append(f"{host} ({value})")
    values = [int(v) for v in qps.values() if str(v).strip().isdigit()]
    if bad:
        raise HarnessError(f"unreadable {QPS_KEY} on {', '.join(bad)}")
    if low:
        pods = (" (the nodes' /etc/nccl.conf and environment; pods get NCCL's default unless their image or "
                "spec sets it)") if k8s else ""
        return Verdict("warn", f"multi-tier fabric ({tiers_reason}) but NCCL uses fewer than {lim.warn} QPs per "
                       f"connection on {', '.join(low)}{pods}", min(values), expected=lim.expected(),
                       evidence=evidence)
    pods = (f"; pods see it only if they mount /etc/nccl.conf or set {QPS_KEY} themselves" if k8s else "")
    return Verdict("pass", f"{QPS_KEY} ≥ {lim.warn} on all {len(qps)} node(s) of the multi-tier fabric "
                   f"({tiers_reason}){pods}", min(values), expected=lim.expected(), evidence=evidence)


@check("audit.fabric.fleet_consistency")
def fleet_consistency(ctx: Context) -> Verdict:
    rails = {h: f["fabric_rails"] for h, f in sorted(ctx.fleet.items()) if f and f.get("fabric_rails") is not None}
    missing = sorted(h for h in ctx.fleet if h not in rails)
    if len(rails) < 2:
        problems = {h: ((ctx.fleet.get(h) or {}).get("problems") or {}).get("fabric_rdma") for h in missing}
        harness = {h: p for h, p in problems.items() if p}
        if harness and len(rails) + len(harness) >= 2:
            raise HarnessError("could not read the RDMA devices on enough nodes to compare: "
                               + "; ".join(f"{h}: {p}" for h, p in harness.items())[:400])
        raise Skip(f"fewer than two nodes reported their RDMA devices (not assessed: {', '.join(missing) or '-'})")
    if not any(rails.values()):
        raise Skip(f"none of the {len(rails)} nodes has an RDMA device")
    for host in rails:
        artifact = ((ctx.fleet[host].get("artifacts") or {}).get("fabric_rdma"))
        if artifact:
            ctx.extra_artifacts.append(artifact)
    findings, levels = [], set()
    evidence: dict[str, Any] = {"nodes_assessed": len(rails), "not_assessed": missing}
    for key, label, level in (("fabric_rails", "RDMA rails (name, class, rate)", "fail"),
                              ("fabric_firmware", "NIC firmware", "warn")):
        values = {h: ctx.fleet[h].get(key) for h in rails}
        counted = Counter(repr(v) for v in values.values())
        majority_repr = counted.most_common(1)[0][0]
        majority = next(v for v in values.values() if repr(v) == majority_repr)
        odd = {h: v for h, v in values.items() if repr(v) != majority_repr}
        evidence[key] = {"fleet": majority, "odd_nodes": odd}
        if odd:
            diffs = []
            for host, value in odd.items():
                extra = sorted(set(value) - set(majority))
                lacking = sorted(set(majority) - set(value))
                diffs.append(f"{host} (has {', '.join(extra) or 'nothing extra'}; lacks {', '.join(lacking) or '-'})")
            findings.append(f"{label} differ: {'; '.join(diffs)}")
            levels.add(level)
    if findings:
        return Verdict(worst(levels), "; ".join(findings), len(rails), evidence=evidence)
    first = next(iter(rails.values()))
    return Verdict("pass", f"{len(rails)} nodes show the same {len(first)} RDMA port(s) and NIC firmware",
                   len(rails), evidence=evidence)
