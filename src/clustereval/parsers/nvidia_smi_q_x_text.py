"""What ``nvidia-smi -q -x`` text tells before (or without) the XML parser: pure readers of the raw text.

The ``nvidia-smi-q-x`` parser reads the whole document; a few checks need facts even from a report that
is cut short, garbled or not XML at all (an NVML error message), and the NVLink ``<fabric>`` block the
parser does not expose (driver 535+, GB200/GB300 multi-node NVLink):

* :func:`driver_versions` - every ``<driver_version>`` value (cut reports still carry it near the top);
* :func:`lists_gpus` - whether the report has a ``<gpu ...>`` element at all;
* :func:`gpu_fabric` - per GPU ``state``, ``status``, ``cliqueId`` and ``clusterUuid`` of ``<fabric>``
  (``N/A`` for a tag the block lacks).
"""

from __future__ import annotations

import re

_DRIVER = re.compile(r"<driver_version>\s*([^<]*?)\s*</driver_version>")
_FABRIC = re.compile(r"<fabric>(.*?)</fabric>", re.S)
FABRIC_TAGS = ("state", "status", "cliqueId", "clusterUuid")


def driver_versions(text: str) -> list[str]:
    """The distinct driver versions the text names, sorted."""
    return sorted(set(_DRIVER.findall(text)))


def lists_gpus(text: str) -> bool:
    return "<gpu " in text


def gpu_fabric(text: str) -> list[dict[str, str]]:
    gpus = []
    for block in _FABRIC.findall(text):
        entry = {}
        for tag in FABRIC_TAGS:
            match = re.search(rf"<{tag}>\s*([^<]*?)\s*</{tag}>", block)
            entry[tag] = match.group(1) if match else "N/A"
        gpus.append(entry)
    return gpus
