"""Network faults of simulated nodes: a slow or lossy path *to* a node, made by the real kernel.

Every simulated node has its own loopback address, so traffic to one node can be shaped apart from the
others with nftables (Debian's ``nftables`` package): one table per simulated cluster, a rule per faulty
node in the ``output`` hook matching the node's address. A rate limit drops what exceeds it (TCP then
backs off to about that rate) and ``numgen random`` drops a share of the ICMP packets (loss ping sees;
TCP to the node is only rate-limited, so SSH to it stays usable). Only traffic *to* the node is touched,
so a pair is slow one way and not the other: an asymmetric pair, as a policer or a bad transceiver on
one side makes.

Fault (per node, under ``faults:``): ``network_slow: {rate_mbytes_s: 10, loss_pct: 2}`` (either key may be
left out). ``sim down`` deletes the table.
"""

from __future__ import annotations

import shutil
import subprocess
from typing import Any

FAULTS = {"network_slow"}


class NetFaultError(RuntimeError):
    """The fault could not be made (the message says why)."""


def table_name(cluster_name: str) -> str:
    return f"clustereval_{cluster_name}"


def rules(faults_by_address: dict[str, dict[str, Any]]) -> list[str]:
    """The nft rule bodies for the nodes' ``network_slow`` faults (one or two per node)."""
    out = []
    for address, fault in sorted(faults_by_address.items()):
        rate = fault.get("rate_mbytes_s")
        loss = fault.get("loss_pct")
        if rate is not None:
            out.append(f"ip daddr {address} limit rate over {int(rate)} mbytes/second drop")
        if loss:
            out.append(f"ip daddr {address} meta l4proto icmp numgen random mod 100 < {int(loss)} drop")
    return out


def apply(cluster_name: str, faults_by_address: dict[str, dict[str, Any]]) -> list[str]:
    """Create the cluster's table with the faults' rules; returns the rules. Nothing to do: no table."""
    bodies = rules(faults_by_address)
    if not bodies:
        return []
    nft = shutil.which("nft") or "/usr/sbin/nft"
    if not shutil.which(nft):
        raise NetFaultError("the profile asks for network_slow but nft is not installed (apt-get install nftables)")
    table = table_name(cluster_name)
    remove(cluster_name)
    script = [f"add table ip {table}",
              f"add chain ip {table} output {{ type filter hook output priority 0; policy accept; }}"]
    script += [f"add rule ip {table} output {body}" for body in bodies]
    proc = subprocess.run([nft, "-f", "-"], input="\n".join(script) + "\n", capture_output=True, text=True)
    if proc.returncode != 0:
        raise NetFaultError(f"nft refused the network faults: {proc.stderr.strip()[:500]}")
    return bodies


def remove(cluster_name: str) -> None:
    """Delete the cluster's table (no error when there is none)."""
    nft = shutil.which("nft") or "/usr/sbin/nft"
    if shutil.which(nft):
        subprocess.run([nft, "delete", "table", "ip", table_name(cluster_name)], capture_output=True)
