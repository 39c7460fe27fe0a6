"""The rccl-tests layout of the nccl-tests shim, for AMD nodes (node.json with an ``amd`` section).

rccl-tests are the nccl-tests binaries built against RCCL (same names, same options, same ``NCCL_*``
environment), printing what ROCm/rccl-tests ``develop`` prints in 2025 (RCCL 2.26.x / ROCm 7.0):

* ``# Collective test starting: <prog>``, the ``# nThread ...`` line, ``#``, ``rccl-tests: Version <branch>:<hash>``
  (where nccl-tests prints ``# nccl-tests version``), ``# Using devices`` and one line per rank
  ``#  Rank %2d Group %2d Pid %6d on %10s device %2d [%04x:%02x:%02x] %s`` (HIP device name);
* RCCL's own version banner (``showVersion`` in RCCL's init.cc, rank 0 only): five plain lines
  ``RCCL version : 2.26.6-HEAD:<hash>`` / ``HIP version  :`` / ``ROCm version :`` / ``Hostname     :`` /
  ``Librccl path :`` when ``NCCL_DEBUG`` is VERSION or WARN, one ``NCCL INFO`` line carrying the same text
  (the four continuation lines unprefixed) at INFO, ABORT or TRACE, nothing when ``NCCL_DEBUG`` is unset;
* the table header of common.cu (``#wrong`` one space after ``busbw``, trailing blanks after ``in-place`` and
  the units line), rows whose time cell is ``%7.0f``/``%7.1f``/``%7.2f`` (10000 us and 100 us cut-offs)
  and whose ``#wrong`` cell is ``%5g``;
* the footer ``# Errors with asterisks ...`` (validation on), ``# Out of bounds values : N OK|FAILED``,
  ``# Avg bus bandwidth    : %g `` (``OK``/``FAILED`` against ``NCCL_TESTS_MIN_BW``), ``#`` and
  ``# Collective test concluded: <prog>``; ``-N`` cycles above 1 print ``# Testing N cycle.`` before each.

Standard library only; never imports clustereval (nor the nccl_tests shim: it passes what is needed).
"""

from __future__ import annotations

import hashlib
import os

# Build hashes that real RCCL / HIP / ROCm builds print for a release (corpus rccl-tests captures; public
# RCCL logs), so a node at those versions prints the strings a real one does. Others get a stable made-up hash.
RCCL_HASHES = {"2.22.3": "7d8d67c", "2.26.6": "6ade506", "2.27.7": "29e1567"}
HIP_HASHES = {"6.4.43484": "123eb5128", "7.0.51831": "a3e329ad8", "7.2.26015": "fc0010cf6a"}
ROCM_BUILDS = {"6.4.2": "6.4.2.0-120-e7d83f5", "7.0.1": "7.0.1.0-42-9428210", "7.2.0": "7.2.0.0-43-fc0010cf6a"}
ROCM_BUILD_NUMBERS = {"7.0.2": 56}  # /opt/rocm/.info/version "7.0.2-56" (RVS on an MI355X node); hash unknown
# rocminfo's HSA "Runtime Version" (ROCr) of a ROCm 7.x release, as RCCL logs it
ROCR_VERSION = {"7": "1.18"}


def _hash(*parts: object, length: int = 7) -> str:
    return hashlib.sha1("/".join(map(str, parts)).encode()).hexdigest()[:length]


def debug_level() -> str:
    """NCCL_DEBUG as RCCL reads it (case-insensitive); '' when unset or unknown."""
    level = os.environ.get("NCCL_DEBUG", "").upper()
    return level if level in ("VERSION", "WARN", "INFO", "ABORT", "TRACE") else ""


def versions(amd: dict, fab: dict) -> dict:
    """The RCCL, HIP and ROCm build strings and the library path RCCL's banner prints."""
    rccl = str(amd.get("rccl_version") or fab.get("nccl_version") or "2.26.6")
    hip = str(amd.get("hip_version", "70051831"))
    if hip.isdigit():  # HIP_VERSION as an integer: major*10^7 + minor*10^5 + patch
        value = int(hip)
        hip = f"{value // 10_000_000}.{value // 100_000 % 100}.{value % 100_000}"
    rocm = str(amd.get("rocm_version", "7.0.1"))
    rocm_build = ROCM_BUILDS.get(rocm)
    if rocm_build is None:
        base = rocm if rocm.count(".") >= 3 else f"{rocm}.0"
        number = ROCM_BUILD_NUMBERS.get(rocm, int(_hash("rocm", rocm), 16) % 150 + 1)
        rocm_build = f"{base}-{number}-{_hash('rocm-build', rocm)}"
    return {
        "rccl": f"{rccl}-HEAD:{RCCL_HASHES.get(rccl) or _hash('rccl', rccl)}",
        "hip": f"{hip}-{HIP_HASHES.get(hip) or _hash('hip', hip, length=9)}",
        "rocm": rocm_build,
        "rocm_release": rocm,
        "librccl": f"/opt/rocm-{rocm}/lib/librccl.so.1",
        "tests": str(amd.get("rccl_tests_version") or "develop:a7809b3"),
    }


def head(prog: str, params: str, opts: dict, tests_version: str) -> list[str]:
    """What rank 0 prints before the rank lines."""
    lines = [f"# Collective test starting: {prog}", params]
    if opts.get("z", "0") != "0":
        lines.append("# Blocking Enabled: wait for completion and barrier after each collective ")
    if opts.get("p", "0") != "0":
        lines.append("# Parallel Init Enabled: threads call into NcclInitRank concurrently ")
    lines += ["#", f"rccl-tests: Version {tests_version}", "# Using devices"]
    return lines


def device_fields(gpu: dict) -> tuple[str, str, str]:
    """(bus number, ``dddd:bb:dd`` as rccl-tests prints the PCI address, HIP device name) of an amd.gpus entry."""
    domain, bus, rest = str(gpu.get("bdf") or "0000:00:00.0").lower().split(":")
    slot = int(rest.split(".")[0], 16)
    return bus, f"{int(domain, 16):04x}:{int(bus, 16):02x}:{slot:02x}", str(gpu.get("market_name") or "")


def rank_line(rank: int, pid: int, host: str, dev: int, bdf: str, name: str) -> str:
    return f"#  Rank {rank:2d} Group {0:2d} Pid {pid:6d} on {host:>10s} device {dev:2d} [{bdf}] {name}"


def banner(host: str, ver: dict) -> list[str]:
    """RCCL's version banner (its first line is the one an INFO prefix goes in front of)."""
    return [f"RCCL version : {ver['rccl']}", f"HIP version  : {ver['hip']}", f"ROCm version : {ver['rocm']}",
            f"{'Hostname':<12s} : {host}", f"{'Librccl path':>12s} : {ver['librccl']}"]


def debug_lines(me: dict, nranks: int, nnodes: int, rails: list[dict], ver: dict, with_banner: bool) -> list[str]:
    """RCCL's NCCL_DEBUG=INFO lines of one process (the version banner on rank 0's only)."""
    if debug_level() not in ("INFO", "ABORT", "TRACE"):
        return []
    fab, host, pid = me["fabric"], me["host"], me["pid"]
    addr = me.get("address", "127.0.0.1")

    def info(dev: int, message: str) -> str:
        return f"{host}:{pid}:{pid} [{dev}] NCCL INFO {message}"

    lines = []
    for dev in me["devices"][:1]:
        lines.append(info(dev, f"Bootstrap: Using lo:{addr}<0>"))
        rocr = ROCR_VERSION.get(ver["rocm_release"].split(".")[0])
        if rocr:
            lines.append(info(dev, f"ROCr version {rocr}"))
        if me["env"].get("NCCL_DMABUF_ENABLE") == "1" and me.get("peer_memory", "dma_buf") == "dma_buf":
            lines.append(info(dev, "DMA_BUF Support Enabled"))
        elif me["env"].get("NCCL_DMABUF_ENABLE") != "1":
            lines.append(info(dev, "Dmabuf feature disabled without NCCL_DMABUF_ENABLE=1"))
        if with_banner:
            text = banner(host, ver)
            lines += [info(dev, text[0]), *text[1:]]
        lines.append(info(dev, "NET/Plugin: Could not find: libnccl-net.so. "))
        if rails:
            listing = " ".join(f"[{k}]{r['name']}:1/IB" for k, r in enumerate(rails))
            lines.append(info(dev, f"NET/IB : Using {listing} [RO]; OOB lo:{addr}<0>"))
            lines.append(info(dev, "Using network IB"))
        else:
            lines.append(info(dev, f"NET/Socket : Using [0]lo:{addr}<0>"))
            lines.append(info(dev, "Using network Socket"))
    for k, dev in enumerate(me["devices"]):
        rank = me["first_rank"] + k
        bus = int(me["buses"][k], 16)
        lines.append(info(dev, f"ncclCommInitRank comm 0x{0x55d0c0000000 + rank * 0x1000:x} rank {rank} nranks "
                               f"{nranks} cudaDev {dev} nvmlDev {dev} busId {bus:x}000 commId 0x{me['comm_id']} "
                               f"localSize 0 used {402653184 + 2097152 * nranks} bytes on core {dev * 12} "
                               "- Init COMPLETE"))
    if nnodes > 1 and me["env"].get("NCCL_NET_GDR_LEVEL") != "LOC" and fab.get("gpudirect", True):
        lines.append(info(me["devices"][0], "Channel 00/0 : 0[0] -> 8[0] [send] via NET/IB/0/GDRDMA"))
    return lines


def table_header() -> list[str]:
    """common.cu's header with out-of-place and in-place results (trailing blanks as printed)."""
    return [
        "#",
        f"# {'':>10s}  {'':>12s}  {'':>8s}  {'':>6s}  {'':>6s}           out-of-place                       "
        "in-place          ",
        f"# {'size':>10s}  {'count':>12s}  {'type':>8s}  {'redop':>6s}  {'root':>6s}  {'time':>7s}  {'algbw':>6s}  "
        f"{'busbw':>6s} {'#wrong':>6s}  {'time':>7s}  {'algbw':>6s}  {'busbw':>6s} {'#wrong':>6s}",
        f"# {'(B)':>10s}  {'(elements)':>12s}  {'':>8s}  {'':>6s}  {'':>6s}  {'(us)':>7s}  {'(GB/s)':>6s}  "
        f"{'(GB/s)':>6s}  {'':>5s}  {'(us)':>7s}  {'(GB/s)':>6s}  {'(GB/s)':>6s}  {'':>5s}",
    ]


def cell(time_us: float, algbw: float, busbw: float, wrong: int | None) -> str:
    """One out-of-place or in-place group of a row (``wrong`` None: not validated, ``N/A``)."""
    if time_us >= 10000.0:
        shown = f"{time_us:7.0f}"
    elif time_us >= 100.0:
        shown = f"{time_us:7.1f}"
    else:
        shown = f"{time_us:7.2f}"
    err = f"{'N/A':>5s}" if wrong is None else f"{float(wrong):5g}"
    return f"  {shown:>7s}  {algbw:6.2f}  {busbw:6.2f}  {err}"


def footer(prog: str, check: bool, errors: int, avg: float) -> tuple[list[str], bool]:
    """The summary lines and whether the run fails (errors, or average under 90 % of NCCL_TESTS_MIN_BW)."""
    raw = os.environ.get("NCCL_TESTS_MIN_BW")
    try:
        min_bw = float(raw) if raw is not None else -1.0
    except ValueError:
        min_bw = 0.0  # atof of garbage
    verdict = "" if min_bw == -1 else ("FAILED" if avg < min_bw * 0.9 else "OK")
    lines = ["# Errors with asterisks indicate errors that have exceeded the maximum threshold."] if check else []
    lines += [f"# Out of bounds values : {errors} {'FAILED' if errors else 'OK'}",
              f"# Avg bus bandwidth    : {avg:g} {verdict}", "#", f"# Collective test concluded: {prog}"]
    return lines, bool(errors) or avg < min_bw * 0.9
