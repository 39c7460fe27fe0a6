"""Parser for the ``versions_inventory`` probe (``checks/probes/versions.yml``) and readers of its sections.

The probe prints each tool's output in a section opened by ``### <name>`` and closed by ``### <name>
rc=N``, or one ``### <name> absent`` line for a tool that is not installed. Unlike the ``## kind k=v``
probes (:mod:`clustereval.parsers.probe_sections`) a section here is one tool's run: it has a closing
line carrying the exit status, and a section without one was cut short.

``probe-versions-inventory`` gives ``sections``: ``{name: {"present", "rc", "text"}}`` (``rc`` None when
the section was cut short). The readers below understand one section's text: ``nvcc --version`` (CUDA
11-13), ``dpkg-query -W`` / ``rpm -q`` rows, the ``/sys/class/infiniband`` walk, ``/etc/os-release``,
version strings of ``runc``/``nvidia-ctk``/``dockerd``/``virtnet`` and ``dcgm-exporter --version``
(tag ``<DCGM>-<exporter>``), and kernel releases.
"""

from __future__ import annotations

import re
from typing import Any

from clustereval.parsers import register
from clustereval.parsers._common import result

_SECTION = re.compile(r"^### (\S+)(?: (absent|rc=(\d+)))?$")


def sections(text: str) -> dict[str, dict[str, Any]]:
    """The probe's sections by name; a section with no closing ``rc=`` line (cut short) has rc None."""
    found: dict[str, dict[str, Any]] = {}
    current: str | None = None
    lines: list[str] = []

    def close(name: str, rc: int | None) -> None:
        found[name] = {"present": True, "rc": rc, "text": "\n".join(lines).strip("\n")}

    for line in text.splitlines():
        match = _SECTION.match(line)
        if not match:
            if current is not None:
                lines.append(line)
            continue
        name, marker, rc = match.groups()
        if marker == "absent":
            found[name] = {"present": False, "rc": None, "text": ""}
            current = None
        elif rc is not None and current == name:
            close(name, int(rc))
            current = None
        else:
            if current is not None:
                close(current, None)
            current, lines = name, []
    if current is not None:
        close(current, None)
    return found


@register("probe-versions-inventory")
def parse(text: str) -> dict[str, Any]:
    found = sections(text)
    cut = sorted(name for name, sec in found.items() if sec["present"] and sec["rc"] is None)
    return result("probe-versions-inventory", "sections", complete=not cut,
                  warnings=[f"section {name} has no closing rc= line (cut short)" for name in cut], sections=found)


def package_rows(text: str) -> dict[str, str]:
    """``{package: version}`` of installed packages from the probe's dpkg-query / rpm rows."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        cells = line.split("\t")
        if len(cells) >= 3 and cells[2].strip().startswith("ii"):
            out[cells[0].strip()] = cells[1].strip()
    return out


def nvcc_version(text: str) -> str | None:
    """``V13.0.88`` from ``Cuda compilation tools, release 13.0, V13.0.88`` (the release if no V-number)."""
    match = re.search(r"release (\d+\.\d+), V(\d+(?:\.\d+)+)", text)
    if match:
        return match.group(2)
    match = re.search(r"release (\d+\.\d+)", text)
    return match.group(1) if match else None


def exporter_version(text: str) -> str | None:
    """The exporter half of a ``<DCGM>-<exporter>`` tag (``4.5.3-4.8.2`` -> ``4.8.2``), else the version."""
    match = re.search(r"(\d+\.\d+\.\d+)-(\d+\.\d+\.\d+)", text)
    if match:
        return match.group(2)
    match = re.search(r"(?<![\w.])v?(\d+\.\d+\.\d+)", text)
    return match.group(1) if match else None


def first_version(text: str) -> str | None:
    """The first dotted version after the word "version" (``runc version 1.1.12``), else the first one."""
    match = re.search(r"version\s*:?\s*v?(\d+(?:\.\d+)+[^\s,]*)", text, re.IGNORECASE)
    if match:
        return match.group(1)
    match = re.search(r"(?<![\w.])v?(\d+(?:\.\d+)+[^\s,]*)", text)
    return match.group(1) if match else None


def ib_devices(text: str) -> list[dict[str, str]]:
    """Rows ``device<TAB>fw_ver<TAB>hca_type<TAB>board_id`` of the probe's /sys/class/infiniband walk."""
    rows = []
    for line in text.splitlines():
        cells = line.split("\t")
        if not cells[0].strip():
            continue
        cells += [""] * (4 - len(cells))
        rows.append({"device": cells[0].strip(), "fw_ver": cells[1].strip(), "hca_type": cells[2].strip(),
                     "board_id": cells[3].strip()})
    return rows


def os_release(text: str) -> dict[str, str]:
    """``/etc/os-release`` as ``{KEY: value}`` (quotes removed)."""
    out = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            out[key.strip()] = value.strip().strip('"')
    return out


def kernel_flavour(release: str) -> str:
    """The flavour suffix of a kernel release (``6.8.0-124-generic`` -> ``generic``; none -> "")."""
    match = re.search(r"-([A-Za-z][\w.-]*)$", release)
    return match.group(1) if match else ""


def installed_kernels(found: dict[str, dict[str, Any]]) -> dict[str, str]:
    """``{kernel release: where it was seen}`` from the dpkg, rpm and boot sections of :func:`sections`."""
    kernels: dict[str, str] = {}
    for source in ("dpkg", "rpm"):
        sec = found.get(source)
        if not sec or not sec["present"]:
            continue
        for package, version in package_rows(sec["text"]).items():
            if source == "dpkg" and package.startswith("linux-image-"):
                release = re.sub(r"-unsigned$", "", package[len("linux-image-"):])
                if release[:1].isdigit():
                    kernels.setdefault(release, f"dpkg {package} {version}")
            elif source == "rpm" and package in ("kernel", "kernel-core"):
                kernels.setdefault(version, f"rpm {package}")
    boot = found.get("boot")
    for line in (boot["text"] if boot else "").splitlines():
        release = re.sub(r"^(vmlinuz|vmlinux|Image)-", "", line.strip())
        if release and release[:1].isdigit():
            kernels.setdefault(release, f"/boot/{line.strip()}")
    return kernels
