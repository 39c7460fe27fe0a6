"""Parser for ``nvidia-smi -q`` (the text query report), whole or with ``-d SECTION,...`` / ``-i N``.

Understands the indented ``Label : value`` report of drivers R418 to R595: the ``NVSMI LOG`` banner
(or its absence), a leading blank line, ``GPU <bus id>`` blocks, sections nested by indentation (including
values that also have children, such as ``HW Slowdown``), both "Clocks Throttle Reasons" (before R535) and
"Clocks Event Reasons", old and new ECC and power layouts, and per-process entries. Only relative
indentation counts, in columns with tabs expanded to 8, so a copy re-indented with other widths, or whose
runs of spaces became tabs, builds the same tree. ``-d`` reports carry only the sections asked for; every
other field is None.

Result keys are the same as :mod:`clustereval.parsers.nvidia_smi_q_x` (``driver_version``,
``cuda_version``, ``timestamp``, ``attached_gpus``, ``gpus`` with the record of
:func:`clustereval.parsers.nvidia_smi_shared.gpu_record`), so a check can read either tool. The text
report has no end marker: ``complete`` is False when the last GPU block lacks sections the first one
has, or a full report's last GPU never reaches its ``Processes`` section.
"""

from __future__ import annotations

import re
from typing import Any

from clustereval.parsers import register
from clustereval.parsers._common import indent_columns, result
from clustereval.parsers.errors import ParseError
from clustereval.parsers.nvidia_smi_shared import Node, gpu_record, integer, slug, text_or_none

TOOL = "nvidia-smi-q"
_KEY_VALUE = re.compile(r"^(?P<label>\S.*?)\s+:(?:\s(?P<value>.*))?$")
_GPU_HEADER = re.compile(r"^GPU\s+([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])\s*$")


def _add(parent: Node, key: str, node: Node) -> None:
    name, count = key, 2
    while name in parent.children:  # keep repeats (one per process) in order
        name = f"{key}#{count}"
        count += 1
    parent.children[name] = node


def _build_tree(lines: list[str]) -> Node:
    root = Node()
    stack: list[tuple[int, Node]] = [(-1, root)]
    for line in lines:
        if not line.strip():
            continue
        indent = indent_columns(line)
        body = line.strip()
        match = _KEY_VALUE.match(body)
        label, value = (match.group("label"), (match.group("value") or "").strip()) if match else (body, None)
        node = Node(value=value)
        while stack[-1][0] >= indent:
            stack.pop()
        _add(stack[-1][1], slug(label), node)
        stack.append((indent, node))
    return root


def _processes(node: Node | None) -> list[dict[str, Any]] | None:
    if node is None:
        return None
    procs: list[dict[str, Any]] = []
    pending: dict[str, Any] = {}
    for raw_name, value in node.leaves():
        name = raw_name.split("#")[0]
        if name in ("gpu_instance_id", "compute_instance_id"):
            if name in pending and "pid" in pending:
                procs.append(pending)
                pending = {}
            pending[name] = integer(value)
        elif name == "process_id":
            if "pid" in pending:
                procs.append(pending)
                pending = {}
            pending["pid"] = integer(value)
        elif name == "type":
            pending["type"] = text_or_none(value)
        elif name == "name":
            pending["name"] = text_or_none(value)
        elif name == "used_gpu_memory":
            pending["used_memory_mib"] = integer(value)
    if "pid" in pending:
        procs.append(pending)
    return [{"pid": p.get("pid"), "type": p.get("type"), "name": p.get("name"),
             "used_memory_mib": p.get("used_memory_mib"), "gpu_instance_id": p.get("gpu_instance_id"),
             "compute_instance_id": p.get("compute_instance_id")} for p in procs]


@register(TOOL)
def parse(text: str) -> dict[str, Any]:
    """Parse ``nvidia-smi -q`` text into driver/CUDA versions and one normalised record per GPU."""
    if not text.strip():
        raise ParseError("nvidia-smi -q: the output is empty")
    lines = text.split("\n")
    warnings: list[str] = []
    header_lines: list[str] = []
    blocks: list[tuple[str, list[str]]] = []
    for line in lines:
        match = _GPU_HEADER.match(line.strip()) if not line[:1].isspace() else None
        if match:
            blocks.append((match.group(1), []))
        elif blocks:
            blocks[-1][1].append(line)
        elif "NVSMI LOG" not in line:
            header_lines.append(line)
    top = _build_tree(header_lines)
    if not blocks:
        if top.get("driver_version") is None:
            first = text.strip().splitlines()[0][:120]
            raise ParseError(f"nvidia-smi -q: no 'GPU <bus id>' block and no Driver Version line; not "
                             f"nvidia-smi -q output (starts with {first!r})")
        warnings.append("no GPU block: the output ends after the header")

    gpus: list[dict[str, Any]] = []
    section_sets: list[set[str]] = []
    for index, (bus_id, block) in enumerate(blocks):
        tree = _build_tree(block)
        rec = gpu_record(tree, index, "text", bus_id)
        rec["processes"] = _processes(tree.child("processes"))
        rec["mig_devices"] = None  # the text report's MIG device sections are not read; use -q -x
        gpus.append(rec)
        section_sets.append({k for k in tree.children if "#" not in k})

    complete = bool(blocks)
    if len(section_sets) > 1 and not section_sets[0] <= section_sets[-1]:
        missing = sorted(section_sets[0] - section_sets[-1])
        complete = False
        warnings.append(f"the last GPU block ({blocks[-1][0]}) lacks sections the first one has "
                        f"({', '.join(missing[:5])}): the output is cut off")
    elif section_sets and "product_name" in section_sets[-1] and "processes" not in section_sets[-1]:
        complete = False
        warnings.append(f"GPU {blocks[-1][0]} never reaches its Processes section: the output is cut off")

    return result(
        TOOL, "text", complete=complete, warnings=warnings,
        timestamp=text_or_none(top.get("timestamp")),
        driver_version=text_or_none(top.get("driver_version")),
        cuda_version=text_or_none(top.get("cuda_version")),
        attached_gpus=integer(top.get("attached_gpus")),
        gpus=gpus,
    )
