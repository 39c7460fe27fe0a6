"""Audit checks, the node's operating system: its root filesystem (type, size, how full).

Reads the ``os_root_filesystem`` probe (``checks/probes/core.yml``): ``key=value`` lines built from
util-linux ``findmnt -n -r -b -o SOURCE,FSTYPE,SIZE,USED,AVAIL,OPTIONS -M /`` (2.27+; sizes are
``statvfs``'s bytes), the filesystem under an overlay root's upper layer, and the NVIDIA GPUs on the PCI bus.
"""

from __future__ import annotations

from clustereval import baselines
from clustereval.checks import Context, HarnessError, Skip, Verdict, check
from clustereval.parsers.probe_key_values import first

PROBE = "os_root_filesystem"
# Filesystems held in RAM: what is written to them takes the node's memory (rootfs: the initramfs's ramfs).
RAM_FSTYPES = {"tmpfs", "ramfs", "rootfs"}
GIB = 2**30


def used_pct(used: int, avail: int) -> int:
    """df's Use%: used over what non-root users may have (used + available), rounded up."""
    total = used + avail
    return -(-used * 100 // total) if total else 100


@check("audit.os.root_filesystem")
def root_filesystem(ctx: Context) -> Verdict:
    values = ctx.parsed(PROBE).get("values") or {}
    if first(values, "missing"):
        raise Skip(f"findmnt is not installed on {ctx.subject}: the root filesystem is not assessed")
    if first(values, "end") != "ok":
        raise HarnessError("the root filesystem probe ended early (no end=ok line)")
    fstype, source = first(values, "fstype"), first(values, "source")
    sizes = [first(values, key) for key in ("size_bytes", "used_bytes", "avail_bytes")]
    if not fstype or not all(size.isdigit() for size in sizes):
        raise HarnessError(f"findmnt printed no readable row for / (rc {first(values, 'findmnt_rc', '?')}): "
                           f"{first(values, 'findmnt_output')[:160]!r}")
    size, used, avail = (int(size) for size in sizes)
    upper = first(values, "upper_fstype")
    counted = first(values, "nvidia_pci_gpus")
    gpus = int(counted) if counted.isdigit() else 0
    in_ram = fstype in RAM_FSTYPES or (fstype == "overlay" and upper in RAM_FSTYPES)
    kind = f"overlay on {upper}" if fstype == "overlay" and upper else fstype
    evidence = {"source": source, "fstype": fstype, "upper_fstype": upper or None, "size_bytes": size,
                "used_bytes": used, "avail_bytes": avail, "nvidia_gpus": gpus, "ram_backed": in_ram}
    used_lim = ctx.limit("os", "audit.os.root_filesystem.used_pct")
    if size == 0:  # a ramfs has no size: it grows until the node's memory is gone
        if not in_ram:
            raise HarnessError(f"findmnt reports a size of 0 bytes for / ({fstype} on {source})")
        return Verdict("warn", f"/ is {kind} on {source} with no size limit: everything written to it takes "
                       "the node's memory, and it is gone at reboot", None, unit="%", expected=used_lim.expected(),
                       evidence=evidence)
    pct, gib = used_pct(used, avail), size / GIB
    evidence["used_pct"], evidence["size_gib"] = pct, round(gib, 1)
    where = f"/ ({kind} on {source}, {gib:.0f} GiB, {pct}% used)"
    levels, problems = [], []
    full = baselines.grade(pct, used_lim)
    if full != "pass":
        levels.append(full)
        problems.append(f"{pct}% full (limit {used_lim.fail if full == 'fail' else used_lim.warn}%): a full root "
                        "stops logging, package updates, container pulls and the daemons that write state there")
    size_lim = ctx.limit("os", "audit.os.root_filesystem.size_gib")
    evidence["size_limit"] = size_lim.expected()
    if gpus and baselines.grade(gib, size_lim) != "pass":
        levels.append(baselines.grade(gib, size_lim))
        problems.append(f"only {gib:.0f} GiB on a node with {gpus} GPU{'s' if gpus > 1 else ''} (below "
                        f"{size_lim.warn} GiB): container images, pip/conda caches and /tmp land there")
    if in_ram:
        levels.append("warn")
        problems.append("RAM-backed (a stateless image): everything written to / takes the node's memory "
                        "from jobs, and it is gone at reboot")
    level = "fail" if "fail" in levels else ("warn" if levels else "pass")
    summary = f"{where}: " + "; ".join(problems) if problems else where
    return Verdict(level, summary, pct, unit="%", expected=used_lim.expected(), evidence=evidence)
