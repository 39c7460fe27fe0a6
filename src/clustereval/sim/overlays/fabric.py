"""``/sys/class/infiniband`` (RDMA devices and ports) and ``/etc/nccl.conf`` for simulated nodes.

Every rail of the profile's ``nics`` list becomes a device directory the way the kernel lays it out:
``hca_type``, ``fw_ver``, ``board_id``, ``node_guid``, ``device/{vendor,device}``, ``device/net/<netdev>/
operstate`` and ``ports/1/{state,phys_state,rate,link_layer,lid,sm_lid,lid_mask_count,cap_mask,pkeys/N,
gids/0}``, with the kernel's value formats (``4: ACTIVE``, ``5: LinkUp``, ``400 Gb/sec (4X NDR)``). The
``ibstat`` and ``ibdev2netdev`` shims read these files, as the real tools read sysfs.

Faults (per node):
``ib_port_down``: HCA names (or rail indices) whose port is down (``1: DOWN`` / ``3: Disabled``);
``ib_port_rate``: ``{hca or index: Gb/s}`` links trained below their rate;
``ib_pkeys``: PKeys of every port (default ``[0x8001, 0x7fff]``: a tenant partition, and the default
partition as a limited member); ``ib_default_pkey_only``: only the default partition, as full member;
``nccl_conf``: ``/etc/nccl.conf`` content, a string or ``{KEY: value}`` (default: no file).
A device the node names differently (rdma-core's ``ibp94s0`` for ``mlx5_3``) is a per-node ``nics`` list
in the profile, so every overlay area (the versions area writes firmware files per device) sees one name.
Per rail, ``fw_ver``, ``hca_type`` and ``board_id`` may be given (defaults: a ConnectX model by rate).
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

FAULTS = {"ib_port_down", "ib_port_rate", "ib_pkeys", "ib_default_pkey_only", "nccl_conf"}
# A healthy tenant's ports: full member of its own partition, limited member of the default one.
TENANT_PKEYS = [0x8001, 0x7FFF]
SHIMS = {"ibstat": "ibstat.py", "ibdev2netdev": "ibdev2netdev.py"}

# CA type, PCI device id, firmware and board id of the NIC each rate/link layer stands for.
MODELS = {400: ("MT4129", "0x1021", "28.39.1002", "MT_0000000838"),
          200: ("MT4123", "0x101b", "20.41.1000", "MT_0000000222"),
          100: ("MT4125", "0x101d", "22.39.1002", "MT_0000000359")}
SPEED_NAMES = {800: "4X XDR", 400: "4X NDR", 200: "4X HDR", 100: "4X EDR", 56: "4X FDR", 40: "4X QDR",
               25: "1X EDR", 10: "4X"}
PKEY_SLOTS = 128


def _pick(mapping_or_list: Any, name: str, index: int) -> Any:
    """A per-rail fault value addressed by HCA name or rail index."""
    if isinstance(mapping_or_list, dict):
        for key in (name, index, str(index)):
            if key in mapping_or_list:
                return mapping_or_list[key]
        return None
    if isinstance(mapping_or_list, list | tuple | set):
        return True if (name in mapping_or_list or index in mapping_or_list) else None
    return None


def _guid(*parts: object) -> str:
    digest = hashlib.sha256("/".join(map(str, parts)).encode()).hexdigest()
    return f"a088:c203:00{digest[:2]}:{digest[2:6]}"


def render(settings: dict[str, Any], state: dict[str, Any], tree) -> None:
    faults = settings.get("faults") or {}
    nics = state.get("nics") or settings.get("nics") or []
    default = [0xFFFF] if faults.get("ib_default_pkey_only") else TENANT_PKEYS
    pkeys = [int(p, 16) if isinstance(p, str) else int(p) for p in faults.get("ib_pkeys") or default]
    node = state.get("node", "node")
    for index, nic in enumerate([*nics, *storage_ports(settings)]):
        name = str(nic["name"])
        nominal = int(nic.get("rate_gbps", 400))
        rate = float(_pick(faults.get("ib_port_rate") or {}, nic["name"], index) or nominal)
        down = bool(_pick(faults.get("ib_port_down") or [], nic["name"], index)) or nic.get("down_phys_state")
        layer = str(nic.get("link_layer", "InfiniBand"))
        ca_type, pci_device, fw, board = MODELS.get(nominal, MODELS[400])
        ca_type, fw, board = (str(nic.get(k) or d) for k, d in (("hca_type", ca_type), ("fw_ver", fw),
                                                                  ("board_id", board)))
        base = f"/sys/class/infiniband/{name}"
        guid = _guid(state.get("cluster"), node, index)
        tree.file(f"{base}/hca_type", f"{ca_type}\n")
        tree.file(f"{base}/fw_ver", f"{fw}\n")
        tree.file(f"{base}/board_id", f"{board}\n")
        tree.file(f"{base}/node_guid", f"{guid}\n")
        tree.file(f"{base}/node_type", "1: CA\n")
        tree.file(f"{base}/device/vendor", "0x15b3\n")
        tree.file(f"{base}/device/device", f"{pci_device}\n")
        netdev = nic.get("netdev")
        if netdev:
            tree.file(f"{base}/device/net/{netdev}/operstate", "down\n" if down else "up\n")
        port = f"{base}/ports/1"
        speed = SPEED_NAMES.get(int(rate), "4X")
        tree.file(f"{port}/state", "1: DOWN\n" if down else "4: ACTIVE\n")
        tree.file(f"{port}/phys_state", f"{nic.get('down_phys_state') or '3: Disabled'}\n" if down else "5: LinkUp\n")
        # A port without a link reports the lowest rate it can train at, as mlx5 does (ibstat "Rate: 40").
        tree.file(f"{port}/rate", "40 Gb/sec (4X QDR)\n" if down else f"{rate:g} Gb/sec ({speed})\n")
        tree.file(f"{port}/link_layer", f"{layer}\n")
        ib = layer == "InfiniBand"
        lid = index + 1 + 16 * int(re.sub(r"\D", "", node) or 0) if ib and not down else 0
        tree.file(f"{port}/lid", f"0x{lid:x}\n")
        tree.file(f"{port}/sm_lid", "0x1\n" if ib and not down else "0x0\n")
        tree.file(f"{port}/lid_mask_count", "0\n")
        tree.file(f"{port}/cap_mask", "0xa751e848\n" if ib else "0x00010000\n")
        tree.file(f"{port}/gids/0", f"fe80:0000:0000:0000:{guid}\n")
        for slot in range(PKEY_SLOTS):
            value = pkeys[slot] if ib and slot < len(pkeys) else (0xFFFF if not ib and slot == 0 else 0)
            tree.file(f"{port}/pkeys/{slot}", f"0x{value:04x}\n")
    conf = faults.get("nccl_conf")
    if conf:
        text = conf if isinstance(conf, str) else "".join(f"{k}={v}\n" for k, v in conf.items())
        tree.file("/etc/nccl.conf", text if text.endswith("\n") else text + "\n")


def storage_ports(settings: dict[str, Any]) -> list[dict[str, Any]]:
    """RDMA devices of the node's other NICs (``system.netdevs`` entries with ``rdma: mlx5_N``: a storage or
    front-end ConnectX in Ethernet mode, RoCE), rendered like the rails but not rails: NCCL's rails are the
    ``nics`` list. A link without carrier leaves the port training (``2: Polling``), an interface taken
    down administratively ``3: Disabled``."""
    from clustereval.sim.overlays.versions import DEFAULT_FW

    ports = []
    for dev in (settings.get("system") or {}).get("netdevs") or []:
        if not dev.get("rdma"):
            continue
        link = dev.get("link", "up")
        ports.append({"name": str(dev["rdma"]), "netdev": str(dev["name"]), "link_layer": "Ethernet",
                      "rate_gbps": int(dev.get("speed_mbps", 400000)) // 1000, "fw_ver": DEFAULT_FW,
                      "down_phys_state": {"no_carrier": "2: Polling", "admin_down": "3: Disabled"}.get(link)})
    return ports
