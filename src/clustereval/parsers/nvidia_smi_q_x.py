"""Parser for ``nvidia-smi -q -x`` (the XML query report).

Understands the ``nvidia_smi_log`` document of drivers R418 to R595 (DTD ``nvsmi_device_v10`` to ``v13``,
and the DTD-less output of older drivers), indented with spaces or tabs. The document is read with the
standard library's expat parser after refusing any ``<!ENTITY`` declaration or internal DTD subset, so an
entity-expansion bomb can never be expanded; the external DTD nvidia-smi names is never fetched.

A document that stops early (a killed ``nvidia-smi`` or a cut capture) still yields every ``<gpu>`` that
was read to its end, with ``complete: False`` and a warning naming the GPU that was cut off.

Result: ``driver_version``, ``cuda_version``, ``timestamp`` (as printed), ``attached_gpus`` (as the tool
states it; ``nvidia-smi -q -x -i N`` lists fewer GPUs than attached), ``dtd`` and ``gpus`` (see
:func:`clustereval.parsers.nvidia_smi_shared.gpu_record` for the per-GPU keys; XML adds ``processes`` and
``mig_devices``).
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from typing import Any

from clustereval.parsers import register
from clustereval.parsers._common import result
from clustereval.parsers.errors import ParseError
from clustereval.parsers.nvidia_smi_shared import Node, gpu_record, integer, text_or_none

TOOL = "nvidia-smi-q-x"
_DTD = re.compile(r"<!DOCTYPE\s+\w+\s+SYSTEM\s+\"([^\"]*)\"", re.IGNORECASE)
_START = re.compile(r"<\?xml|<nvidia_smi_log\b")
_MAX_DEPTH = 40


def _to_node(elem: ET.Element, depth: int = 0) -> Node:
    text = (elem.text or "").strip()
    node = Node(value=text if text or len(elem) == 0 else None)
    if depth < _MAX_DEPTH:
        for child in elem:
            node.children.setdefault(child.tag, _to_node(child, depth + 1))
    return node


def _processes(gpu: ET.Element) -> list[dict[str, Any]]:
    out = []
    procs = gpu.find("processes")
    for info in procs.findall("process_info") if procs is not None else []:
        out.append({
            "pid": integer(info.findtext("pid")),
            "type": text_or_none(info.findtext("type")),
            "name": text_or_none(info.findtext("process_name")),
            "used_memory_mib": integer(info.findtext("used_memory")),
            "gpu_instance_id": integer(info.findtext("gpu_instance_id")),
            "compute_instance_id": integer(info.findtext("compute_instance_id")),
        })
    return out


def _mig_devices(gpu: ET.Element) -> list[dict[str, Any]]:
    out = []
    devices = gpu.find("mig_devices")
    for dev in devices.findall("mig_device") if devices is not None else []:
        out.append({
            "index": integer(dev.findtext("index")),
            "gpu_instance_id": integer(dev.findtext("gpu_instance_id")),
            "compute_instance_id": integer(dev.findtext("compute_instance_id")),
            "multiprocessor_count": integer(dev.findtext("device_attributes/shared/multiprocessor_count")),
            "memory_total_mib": integer(dev.findtext("fb_memory_usage/total")),
            "memory_used_mib": integer(dev.findtext("fb_memory_usage/used")),
        })
    return out


def _gpu(elem: ET.Element, index: int) -> dict[str, Any]:
    rec = gpu_record(_to_node(elem), index, "xml", text_or_none(elem.get("id")))
    rec["processes"] = _processes(elem)
    rec["mig_devices"] = _mig_devices(elem)
    return rec


def _refuse_unsafe(text: str) -> None:
    upper = text.upper()
    if "<!ENTITY" in upper:
        raise ParseError("nvidia-smi -q -x: the document declares XML entities (<!ENTITY); nvidia-smi never "
                         "does this, refusing to expand them")
    doctype = upper.find("<!DOCTYPE")
    if doctype >= 0:
        end = upper.find(">", doctype)
        if "[" in upper[doctype:end if end >= 0 else None]:
            raise ParseError("nvidia-smi -q -x: the document carries an internal DTD subset; nvidia-smi "
                             "never prints one, refusing to parse it")


@register(TOOL)
def parse(text: str) -> dict[str, Any]:
    """Parse ``nvidia-smi -q -x`` output into driver/CUDA versions and one normalised record per GPU."""
    if not text.strip():
        raise ParseError("nvidia-smi -q -x: the output is empty")
    start = _START.search(text)
    if start is None:
        first = text.strip().splitlines()[0][:120]
        raise ParseError(f"nvidia-smi -q -x: no <nvidia_smi_log> XML document found (output starts with "
                         f"{first!r})")
    warnings: list[str] = []
    if text[:start.start()].strip():
        warnings.append(f"ignored text before the XML document: {text[:start.start()].strip()[:120]!r}")
    body = text[start.start():]
    _refuse_unsafe(body)
    end = body.find("</nvidia_smi_log>")
    if end >= 0:
        tail = body[end + len("</nvidia_smi_log>"):].strip()
        if tail:
            warnings.append(f"ignored text after </nvidia_smi_log>: {tail[:120]!r}")
        body = body[:end + len("</nvidia_smi_log>")]
    dtd_match = _DTD.search(body[:400])

    parser = ET.XMLPullParser(events=("start", "end"))
    top: dict[str, str | None] = {}
    gpus: list[dict[str, Any]] = []
    depth = 0
    root_closed = False
    open_gpu: str | None = None
    error: str | None = None
    try:
        for line in body.splitlines(keepends=True):
            parser.feed(line)
            for event, elem in parser.read_events():
                if event == "start":
                    depth += 1
                    if depth == 1 and elem.tag != "nvidia_smi_log":
                        raise ParseError(f"nvidia-smi -q -x: root element is <{elem.tag}>, expected "
                                         "<nvidia_smi_log>")
                    if depth == 2 and elem.tag == "gpu":
                        open_gpu = elem.get("id") or f"#{len(gpus)}"
                    continue
                depth -= 1
                if depth == 1 and elem.tag == "gpu":
                    gpus.append(_gpu(elem, len(gpus)))
                    open_gpu = None
                    elem.clear()
                elif depth == 1 and len(elem) == 0:
                    top[elem.tag] = (elem.text or "").strip()
                elif depth == 0:
                    root_closed = True
                if depth > _MAX_DEPTH + 20:
                    raise ParseError("nvidia-smi -q -x: XML nested too deeply to be nvidia-smi output")
        if not root_closed:
            parser.close()
    except ET.ParseError as exc:
        error = str(exc)

    complete = root_closed and error is None
    if not complete:
        if not gpus:
            reason = error or "no closing </nvidia_smi_log>"
            where = f"inside GPU {open_gpu}" if open_gpu else "before any <gpu> element"
            raise ParseError(f"nvidia-smi -q -x: the XML document ends early ({reason}) {where}; no GPU was "
                             "read completely")
        where = f"inside GPU {open_gpu}" if open_gpu else "after the last complete element"
        warnings.append(f"XML document ends early ({error or 'no closing </nvidia_smi_log>'}), {where}; "
                        f"{len(gpus)} GPU(s) read completely")
    if complete and not gpus and "attached_gpus" not in top:
        raise ParseError("nvidia-smi -q -x: the document holds neither GPUs nor attached_gpus")

    return result(
        TOOL, "xml", complete=complete, warnings=warnings,
        dtd=dtd_match.group(1) if dtd_match else None,
        timestamp=text_or_none(top.get("timestamp")),
        driver_version=text_or_none(top.get("driver_version")),
        cuda_version=text_or_none(top.get("cuda_version")),
        attached_gpus=integer(top.get("attached_gpus")),
        gpus=gpus,
    )
