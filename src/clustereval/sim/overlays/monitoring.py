"""Kernel log file and CPU frequency governors of a simulated node.

* ``/var/log/kern.log``: the node's Xid lines (profile fault ``xid``) as rsyslog writes them on Debian
  12 (RFC 3339 timestamp, host, ``kernel:``, the ring-buffer line), only when the node has Xid faults
  or an ``xid_during_run`` fault (then possibly empty: an ``nvidia-smi`` loop on the node appends the Xid
  to it mid-run, in :func:`kern_log_line`'s format; the file is the node's own overlay file, writable
  inside its mount namespace only); ``dmesg`` and ``journalctl`` stay the real tools reading the real
  (shared) kernel.
* ``/sys/devices/system/cpu/cpuN/cpufreq/{scaling_governor,scaling_driver}`` for every CPU of the host,
  ``performance`` under ``intel_pstate`` as on tuned HGX H100 nodes.

Faults: ``cpu_governor`` (str, e.g. ``powersave``), ``cpufreq_driver`` (str, e.g. ``acpi-cpufreq``).
"""

from __future__ import annotations

import os
from typing import Any

FAULTS = {"cpu_governor", "cpufreq_driver"}


def kern_log_line(stamp: str, host: str, line: str) -> str:
    """One kernel message as Debian 12's rsyslog writes it to /var/log/kern.log (RSYSLOG_FileFormat):
    ``2026-11-30T00:20:00.123456+00:00 node3 kernel: [ 1234.500000] NVRM: Xid ...``. The nvidia-smi shim
    writes the same format (it cannot import this module); tests/unit/test_sim_telemetry.py holds them
    together."""
    return f"{stamp} {host} kernel: {line}\n"


def render(settings: dict[str, Any], state: dict[str, Any], tree) -> None:
    faults = settings.get("faults") or {}
    node = state.get("node", "node")
    xid = state.get("xid") or []
    own_log = (state.get("telemetry") or {}).get("kern_log")
    if xid or own_log:
        tree.file(own_log or "/var/log/kern.log", "".join(
            kern_log_line(f"2026-11-30T00:{20 + k // 60:02d}:{k % 60:02d}.{123456 + k:06d}+00:00", node, line)
            for k, line in enumerate(xid)), 0o640)
    governor = str(faults.get("cpu_governor") or "performance")
    driver = str(faults.get("cpufreq_driver") or "intel_pstate")
    for cpu in range(os.cpu_count() or 1):
        base = f"/sys/devices/system/cpu/cpu{cpu}/cpufreq"
        tree.file(f"{base}/scaling_governor", governor + "\n")
        tree.file(f"{base}/scaling_driver", driver + "\n", 0o444)
