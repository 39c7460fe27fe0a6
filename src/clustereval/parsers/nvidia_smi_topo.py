"""Parser for ``nvidia-smi topo -m`` / ``--matrix`` / ``-mp`` (and the same-shaped ``topo -p2p`` matrices).

Understands the matrix printed by drivers R418 to R580: a header row of device columns (``GPU0``..,
``NIC0``.. or, on older drivers, ``mlx5_0``..) followed by the affinity columns (``CPU Affinity``, then
``NUMA Affinity`` and ``GPU NUMA ID`` on newer drivers), one row per device, then the ``Legend:`` and
``NIC Legend:`` blocks. The tool separates cells with tabs (and prints an extra empty cell before
``GPU NUMA ID``); copies through Markdown or a terminal turn the tabs into runs of spaces — both work. The
ANSI underline around the header is removed before this parser runs.

Result: ``devices`` (column order), ``gpus``, ``nics``, ``matrix`` ``{row: {column: link}}`` with the link
as printed (``X``, ``NV18``, ``PIX``, ``PXB``, ``PHB``, ``NODE``, ``SYS``, ``OK`` ...), ``nvlink_bonds``
``{gpu: {gpu: count}}`` for the ``NV#`` cells, ``affinity`` ``{row: {cpu_affinity, numa_affinity,
gpu_numa_id}}`` (strings as printed, N/A → None), ``nic_names`` (``NIC0`` → ``mlx5_0``) and ``legend``.

``complete`` is False when rows are missing (the matrix stops before its last device row) or a cell cannot
be read (a garbled copy: unknown link codes, a CPU list that is not a CPU list); ``warnings`` says which.
"""

from __future__ import annotations

import re
from typing import Any

from clustereval.parsers import register
from clustereval.parsers._common import result
from clustereval.parsers.errors import ParseError

TOOL = "nvidia-smi-topo"

_AFFINITY_LABELS = ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")
_AFFINITY_KEYS = {"CPU Affinity": "cpu_affinity", "NUMA Affinity": "numa_affinity",
                  "GPU NUMA ID": "gpu_numa_id"}
_DEVICE = re.compile(r"^(?:GPU\d+|NIC\d+|mlx\d+_\d+|[a-z][a-z0-9]*_\d+|NVS\d+|CPU\d+)$")
_LINK = re.compile(r"^(?:X|NV\d+|PIX|PXB|PHB|NODE|SYS|SOC|OK|CNS|GNS|TNS|NS|U|NS_?\w*)$")
_CPU_LIST = re.compile(r"^\d+(?:-\d+)?(?:,\d+(?:-\d+)?)*$")
_LEGEND_ENTRY = re.compile(r"^\s*(?P<code>[A-Z#]+[A-Z0-9#]*)\s*=\s*(?P<meaning>.*?)\s*$")
_NIC_ENTRY = re.compile(r"^\s*(?P<nic>NIC\d+)\s*:\s*(?P<name>\S+)\s*$")


def _header(line: str) -> tuple[list[str], list[str]] | None:
    """Device columns and affinity labels of a header row, or None when the line is not a header."""
    cells = [c for c in _cells(line) if c]
    devices: list[str] = []
    rest_start = len(cells)
    for i, cell in enumerate(cells):
        if _DEVICE.match(cell):
            devices.append(cell)
        else:
            rest_start = i
            break
    if not devices or not devices[0].startswith(("GPU", "NIC", "mlx")):
        return None
    rest = " ".join(cells[rest_start:])
    if rest and not rest.startswith(_AFFINITY_LABELS):
        return None  # a matrix row ("GPU0  X  NV4 ..."), not the header
    labels = [label for label in _AFFINITY_LABELS if label in rest]
    return devices, labels


def _cells(line: str) -> list[str]:
    """The cells of one row: tab-separated as printed (empty cells kept), else split on runs of spaces.

    Only tabs between cells count: a copy that turned its tabs into spaces may still carry a leading tab
    (``unexpand``) or a trailing one, and is then read as the space-separated copy it is.
    """
    body = line.strip()
    if "\t" in body:
        # the tool pads the self cell as " X " and leaves empty cells for NIC rows' affinity columns
        return [c.strip() for c in body.split("\t")]
    return body.split()


@register(TOOL)
def parse(text: str) -> dict[str, Any]:
    """Parse an ``nvidia-smi topo -m`` matrix into a mapping plus CPU/NUMA affinity."""
    if not text.strip():
        raise ParseError("the nvidia-smi topo output is empty")
    lines = text.split("\n")
    warnings: list[str] = []
    header_at = None
    devices: list[str] = []
    labels: list[str] = []
    for i, line in enumerate(lines):
        parsed = _header(line) if line.strip() else None
        if parsed:
            header_at, (devices, labels) = i, parsed
            break
    if header_at is None:
        raise ParseError("no topology header row (GPU0 GPU1 ... CPU Affinity) found: "
                         "this is not nvidia-smi topo -m output")

    matrix: dict[str, dict[str, str]] = {}
    affinity: dict[str, dict[str, str | None]] = {}
    bonds: dict[str, dict[str, int]] = {}
    damaged = False
    index = header_at + 1
    while index < len(lines):
        line = lines[index]
        if not line.strip() or line.strip().startswith("Legend"):
            break
        cells = _cells(line)
        name = cells[0] if cells else ""
        if not _DEVICE.match(name):
            warnings.append(f"matrix row not understood: {line.strip()[:120]!r}")
            damaged = True
            index += 1
            continue
        links = cells[1:1 + len(devices)]
        extra = [c for c in cells[1 + len(devices):] if c != ""]
        row: dict[str, str] = {}
        for col, link in zip(devices, links, strict=False):
            if not _LINK.match(link):
                warnings.append(f"{name}/{col}: link code {link!r} not understood")
                damaged = True
            row[col] = link
            bond = re.fullmatch(r"NV(\d+)", link)
            if bond:
                bonds.setdefault(name, {})[col] = int(bond.group(1))
        if len(links) < len(devices):
            warnings.append(f"row {name} has {len(links)} of {len(devices)} cells")
            damaged = True
        matrix[name] = row
        if extra or name.startswith("GPU"):
            values = dict(zip(labels, extra, strict=False))
            aff: dict[str, str | None] = {}
            for label in labels:
                value = values.get(label)
                aff[_AFFINITY_KEYS[label]] = None if value in (None, "N/A") else value
            if len(extra) > len(labels):
                warnings.append(f"row {name}: more affinity cells than affinity columns: {extra}")
            cpu = aff.get("cpu_affinity")
            if cpu is not None and not _CPU_LIST.match(cpu):
                warnings.append(f"row {name}: CPU affinity {cpu!r} is not a CPU list (garbled or cut copy?)")
                damaged = True
            affinity[name] = aff
        index += 1

    legend, nic_names = _legends(lines[index:])
    missing = [d for d in devices if d not in matrix]
    if missing:
        warnings.append(f"matrix stops early: no row for {', '.join(missing)}")
    if not legend:
        warnings.append("no Legend block after the matrix")
    orphans = [r for r in matrix if r not in devices]
    if orphans:
        warnings.append(f"rows without a matching column: {', '.join(orphans)}")
    gpus = [d for d in devices if d.startswith("GPU")]
    nics = [d for d in [*devices, *orphans] if not d.startswith("GPU")]
    return result(TOOL, "matrix", complete=not missing and not damaged, warnings=warnings,
                  devices=devices, gpus=gpus, nics=nics, affinity_columns=labels, matrix=matrix,
                  nvlink_bonds=bonds, affinity=affinity, nic_names=nic_names, legend=legend)


def _legends(lines: list[str]) -> tuple[dict[str, str], dict[str, str]]:
    legend: dict[str, str] = {}
    nic_names: dict[str, str] = {}
    for line in lines:
        nic = _NIC_ENTRY.match(line)
        if nic:
            nic_names[nic.group("nic")] = nic.group("name")
            continue
        entry = _LEGEND_ENTRY.match(line)
        if entry:
            legend[entry.group("code")] = entry.group("meaning")
    return legend, nic_names
