"""Parsers for the fabric audit probes of our own (``checks/probes/fabric.yml``).

* ``probe-fabric-rdma`` (``fabric_rdma``): Linux sysfs ``/sys/class/infiniband`` (kernel 4.x-6.x, any
  rdma-core / MLNX_OFED / DOCA-OFED) framed by ``# rdma sysfs`` and ``# end``: ``hca NAME`` lines, one
  space in for the device's files (``hca_type``, ``fw_ver``, ``pci VENDOR DEVICE``, ``netdev``, ``port N``),
  two for each port's (``state 4: ACTIVE``, ``phys_state 5: LinkUp``, ``rate 400 Gb/sec (4X NDR)``,
  ``link_layer``, ``pkeys 0xffff 0x8001``). Gives ``hcas``; a missing frame line or a line that fits
  nowhere makes it incomplete (devices read so far kept), the reason first among the warnings.
* ``probe-fabric-host`` (``fabric_host``): ``### file PATH`` (an nccl.conf), ``### env`` (``NCCL_*``
  variables), ``### imex`` (nvidia-imex state) and ``### end``. Gives ``nccl`` (``files``, ``env``,
  ``effective``) and ``imex`` (None when no complete ``### imex`` section); incomplete without the
  ``### env`` or ``### end`` line.
* ``probe-fabric-topology`` (``fabric_slurm_topology``): ``scontrol show config`` topology keys, then
  ``### topology`` (``scontrol show topology``: ``SwitchName=… Level=N … Nodes=…`` for topology/tree,
  ``BlockName=… Nodes=…`` for topology/block, Slurm 17.11-25.11) and ``### nodes N`` (sinfo's node count).
"""

from __future__ import annotations

import re
from typing import Any

from clustereval.parsers import register
from clustereval.parsers._common import result
from clustereval.parsers.slurm import expand_hostlist

# PKey table entries whose 15 low bits are zero are empty slots, not partitions.
PKEY_MASK = 0x7FFF
RDMA_HEADER, RDMA_END = "# rdma sysfs", "# end"


def _finish_port(port: dict[str, Any]) -> None:
    """Kernel formats: ``4: ACTIVE``, ``5: LinkUp``, ``400 Gb/sec (4X NDR)``, PKeys ``0xffff 0x8001``."""
    for key in ("state", "phys_state"):
        code, _, name = str(port.get(key) or "").partition(":")
        if name:
            port[f"{key}_code"] = int(code) if re.fullmatch(r"\s*[0-9]+\s*", code) else None
            port[key] = name.strip()
    rate = re.match(r"^\s*([\d.]+)\s*Gb/sec", str(port.get("rate") or ""))
    try:
        port["rate_gbps"] = float(rate.group(1)) if rate else None
    except ValueError:  # "4.0.0 Gb/sec"
        port["rate_gbps"] = None
    pkeys = []
    for token in str(port.get("pkeys") or "").split():
        try:
            pkeys.append(int(token, 16))
        except ValueError:
            continue
    port["pkeys"] = [pk for pk in pkeys if pk & PKEY_MASK]
    port["link_layer"] = port.get("link_layer") or None
    port["active"] = str(port.get("state") or "").upper() == "ACTIVE"


def _rdma_devices(lines: list[str]) -> tuple[list[dict[str, Any]], str | None]:
    """The devices of the listing's body and, when a line fits nowhere, why reading stopped there."""
    hcas: list[dict[str, Any]] = []
    hca: dict[str, Any] | None = None
    port: dict[str, Any] | None = None
    for raw in lines:
        line = raw.rstrip()
        if line.strip() == RDMA_END:
            break
        depth = len(line) - len(line.lstrip(" "))
        key, _, value = line.strip().partition(" ")
        value = value.strip()
        if depth == 0 and key == "hca":
            hca = {"name": value, "netdevs": [], "ports": []}
            hcas.append(hca)
            port = None
        elif hca is None:
            return hcas, f"line outside any device: {line[:80]!r}"
        elif depth == 1 and key == "port":
            port = {"port": int(value) if re.fullmatch(r"[0-9]+", value) else value}
            hca["ports"].append(port)
        elif depth == 1 and key == "pci":
            parts = value.split()
            hca["pci_vendor"] = parts[0].lower() if parts else None
            hca["pci_device"] = parts[1].lower() if len(parts) > 1 else None
        elif depth == 1 and key == "netdev":
            hca["netdevs"].append(value)
        elif depth == 1:
            hca[key] = value or None
        elif depth == 2 and port is not None:
            port[key] = value
        else:
            return hcas, f"unexpected line: {line[:80]!r}"
    return hcas, None


@register("probe-fabric-rdma")
def parse_rdma(text: str) -> dict[str, Any]:
    """Each device: ``name``, ``hca_type``, ``fw_ver``, ``board_id``, ``node_guid``, ``pci_vendor``,
    ``pci_device``, ``driver``, ``netdevs`` and ``ports`` (``port``, ``state``, ``state_code``,
    ``phys_state``, ``phys_state_code``, ``rate_gbps``, ``rate``, ``link_layer``, ``pkeys`` as integers,
    ``active``)."""
    lines = text.splitlines()
    problems = []
    if not lines or lines[0].strip() != RDMA_HEADER:
        problems.append(f"the RDMA sysfs listing does not start with its '{RDMA_HEADER}' header")
    if RDMA_END not in (line.strip() for line in lines):
        problems.append(f"the RDMA sysfs listing has no '{RDMA_END}' line: the output was cut short")
    hcas, stopped = _rdma_devices(lines[1:])
    if stopped:
        problems.append(stopped)
    for item in hcas:
        for port in item["ports"]:
            _finish_port(port)
    return result("probe-fabric-rdma", "rdma sysfs", complete=not problems, warnings=problems, hcas=hcas)


def _nccl_settings(text: str) -> dict[str, Any]:
    """``files`` ({path: {KEY: value}}), ``env`` ({KEY: value}) and ``effective`` (what NCCL uses: the
    environment wins over files; among files the first in NCCL's lookup order wins, as NCCL 2.x reads
    NCCL_CONF_FILE or ~/.nccl.conf before /etc/nccl.conf and never overwrites a set variable)."""
    files: dict[str, dict[str, str]] = {}
    env: dict[str, str] = {}
    target: dict[str, str] | None = None
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("### "):
            head = line[4:]
            if head.startswith("file "):
                target = files.setdefault(head[5:], {})
            elif head == "env":
                target = env
            else:
                target = None
            continue
        if target is None or not line or line.startswith("#") or "=" not in line:
            continue
        key, _, value = line.partition("=")
        target.setdefault(key.strip(), value.strip())
    effective: dict[str, dict[str, str]] = {}
    for path, values in files.items():
        for key, value in values.items():
            effective.setdefault(key, {"value": value, "source": path})
    for key, value in env.items():
        effective[key] = {"value": value, "source": "environment"}
    return {"files": files, "env": env, "effective": effective}


def _imex(text: str) -> dict[str, Any] | None:
    """The ``### imex`` section: binary, daemon, nodes_config (peer count), channels; None when absent or
    not followed by ``### end``."""
    section = text.split("### imex", 1)
    if len(section) < 2 or "### end" not in section[1]:
        return None
    out: dict[str, Any] = {}
    for line in section[1].split("### end", 1)[0].splitlines():
        key, _, value = line.strip().partition(" ")
        if key:
            out[key] = value.strip()
    binary = out.get("binary")
    peers = out.get("nodes_config")
    return {"binary": None if binary in (None, "", "none") else binary,
            "running": out.get("daemon") == "running",
            "nodes_config": int(peers) if peers and re.fullmatch(r"[0-9]+", peers) else None,
            "channels": (out.get("channels") or "").split()}


@register("probe-fabric-host")
def parse_host(text: str) -> dict[str, Any]:
    complete = "### env" in text and "### end" in text
    imex = _imex(text)
    warnings = [] if imex is not None else ["no complete '### imex' section"]
    return result("probe-fabric-host", "sections", complete=complete, warnings=warnings,
                  nccl=_nccl_settings(text), imex=imex)


@register("probe-fabric-topology")
def parse_topology(text: str) -> dict[str, Any]:
    """``plugin`` (``topology/none`` when slurm.conf sets none; None without any configuration),
    ``param``, ``switches`` (``{name, kind: switch|block, level, nodes}``), ``levels`` and ``slurm_nodes``."""
    config: dict[str, str] = {}
    switches: list[dict[str, Any]] = []
    node_count = None
    section = "config"
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("### topology"):
            section = "topology"
            continue
        if line.startswith("### nodes"):
            tail = line[len("### nodes"):].strip()
            node_count = int(tail) if re.fullmatch(r"[0-9]+", tail) else None
            continue
        if section == "config" and "=" in line:
            key, _, value = line.partition("=")
            config[key.strip()] = value.strip()
        elif section == "topology" and ("SwitchName=" in line or "BlockName=" in line):
            fields = dict(item.split("=", 1) for item in line.split() if "=" in item)
            level = fields.get("Level")
            switches.append({"name": fields.get("SwitchName") or fields.get("BlockName"),
                             "kind": "switch" if "SwitchName" in fields else "block",
                             "level": int(level) if level and re.fullmatch(r"[0-9]+", level) else 0,
                             "nodes": expand_hostlist(fields.get("Nodes", "")) if fields.get("Nodes") else []})
    plugin = config.get("TopologyPlugin")
    if plugin in (None, "", "(null)"):
        plugin = "topology/none" if config else None
    return result("probe-fabric-topology", "sections", complete=True, plugin=plugin,
                  param=config.get("TopologyParam"), switches=switches,
                  levels=(max(s["level"] for s in switches) + 1) if switches else 0, slurm_nodes=node_count)


def leaf_switch(topology: dict[str, Any], node: str | None) -> str | None:
    """The level-0 switch (or block) of ``topology`` that lists ``node``."""
    return next((s["name"] for s in topology["switches"] if node and node in s["nodes"] and s["level"] == 0), None)
