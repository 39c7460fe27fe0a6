"""Parsers for the audit probes that print sysfs files as ``<path>: <value>`` lines (``grep -H`` style).

* ``probe-monitoring-cpufreq`` (``monitoring_cpufreq``): ``cpus: N`` (``nproc --all``), ``driver: NAME``
  (``scaling_driver``) and one ``/sys/devices/system/cpu/cpuN/cpufreq/scaling_governor: GOVERNOR`` per
  CPU. Gives ``cpus`` (None when unreadable), ``driver`` and ``governors`` (``{"cpu0": "performance"}``).
* ``probe-fleet-firmware`` (``fleet_firmware``): ``/sys/class/infiniband/<hca>/fw_ver: 28.39.1002`` and
  ``/sys/class/dmi/id/bios_version: 1.2.3``. Gives ``nic_firmware`` (``{hca: version}``) and ``bios``
  (None when the line is absent).
"""

from __future__ import annotations

import re
from typing import Any

from clustereval.parsers import register
from clustereval.parsers._common import result

_CPU = re.compile(r"/(cpu\d+)/")
_HCA_FW = re.compile(r"/sys/class/infiniband/([^/]+)/fw_ver$")


def _lines(text: str) -> list[tuple[str, str]]:
    """(path, value) of every line; the value is what follows the first ``": "`` (empty when none does).

    A path holds colons of its own (``0000:3b:00.0``), so only colon-space separates; a line ending in a bare
    colon is a key with an empty value whose trailing blank was trimmed away.
    """
    pairs = []
    for line in text.splitlines():
        key, sep, value = line.partition(": ")
        if not sep and key.endswith(":"):
            key = key[:-1]
        pairs.append((key, value))
    return pairs


@register("probe-monitoring-cpufreq")
def parse_cpufreq(text: str) -> dict[str, Any]:
    cpus, driver, governors = None, None, {}
    for key, value in _lines(text):
        if key == "cpus":
            cpus = int(value) if re.fullmatch(r"\s*[0-9]+\s*", value) else None
        elif key == "driver":
            driver = value.strip()
        elif key.endswith("/scaling_governor"):
            cpu = _CPU.search(key)
            governors[cpu.group(1) if cpu else key] = value.strip()
    return result("probe-monitoring-cpufreq", "path: value", complete=True, cpus=cpus, driver=driver,
                  governors=governors)


@register("probe-fleet-firmware")
def parse_firmware(text: str) -> dict[str, Any]:
    nic_firmware, bios = {}, None
    for path, value in _lines(text):
        hca = _HCA_FW.match(path)
        if hca:
            nic_firmware[hca.group(1)] = value.strip()
        elif path.endswith("/bios_version"):
            bios = value.strip()
    return result("probe-fleet-firmware", "path: value", complete=True, nic_firmware=nic_firmware, bios=bios)
