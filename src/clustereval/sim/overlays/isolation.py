"""Tenant-isolation evidence of a simulated node: InfiniBand partition keys and the DPU's host RShim netdev.

Healthy default: every InfiniBand rail in a tenant partition (P_Key 0x8001 full member, default partition
limited 0x7fff), no RShim path. Faults: ``ib_default_pkey_only`` (only the default full-member key 0xffff),
``bluefield_rshim_exposed`` (``tmfifo_net0``, the host side of a BlueField RShim; the gpustack overlay puts
the DPU on the PCI bus). BMC device nodes (/dev/ipmi0) and umad nodes cannot be made in the overlays;
the nodes show none, as a VM or a locked-down bare-metal node would.
"""

from __future__ import annotations

from typing import Any

# InfiniBand partition keys are rendered by the fabric area (fault ``ib_default_pkey_only`` there).


def render(settings: dict[str, Any], state: dict[str, Any], tree) -> None:
    faults = settings.get("faults") or {}
    if faults.get("bluefield_rshim_exposed"):
        tree.file("/sys/class/net/tmfifo_net0/address", "00:1a:ca:ff:ff:02\n")
