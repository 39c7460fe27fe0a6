"""ROCm's TransferBench v1.02 (github.com/ROCm/TransferBench, tag v1.02) for a simulated AMD node, byte for byte
in the console layout of that release (``EnvVars.hpp`` / ``TransferBench.cpp``; corpus: transferbench/).

``TransferBench`` alone prints the usage, the environment variables and the detected topology (link type and hop
count per GPU pair, PCIe bus id, closest NUMA node); ``TransferBench CONFIG [N]`` prints the run configuration
(the environment variables NUM_ITERATIONS, NUM_WARMUPS, ... with their descriptions) and, for every line of the
config file (``#Transfers #CUs (SRC->EXE->DST) ...`` or the advanced ``-#Transfers (SRC EXE DST #CUs) ...``; memory
C/B host on a NUMA node, G/F GPU; executor C or G; ``##`` lines echoed), a ``Test N: [bytes]`` block with one row
per Transfer (ordered by executor, as the tool's std::map) and the CPU-timed aggregate. ``N`` takes K/M/G and 0
(the tool's range of sizes). The tool's parse errors and messages are kept, with its exit status 1; the preset
benchmarks (p2p, g2g, ...) are not simulated (stderr says so, exit 2).

Figures come from ``/sim/node.json``: the devices (``amd.gpus``, every partition of a GPU in CPX mode is one),
their XGMI links (``amd.xgmi_links_down``: such a pair is PCIE-2/PCIE-3 and goes through the host) and ``fabric``:
host links from ``pcie_h2d_gbps`` (GPU-kernel copies over Gen5 x16: ~53 GB/s to the GPU, ~54 from it),
``slow_host_link`` per device, XGMI per link from ``xgmi_p2p_gbps``, device-local copies from
``xgmi_local_copy_gbps``; a copy with few CUs is held to ``CU_GBPS`` per CU, transfers sharing a link in one test
share it. ``fabric.tools.transferbench`` selects an error mode: garbage, truncated, garbled, hang.
Standard library only; never imports clustereval.
"""

from __future__ import annotations

import hashlib
import os
import random
import re
import sys
import time

from simnode import read_json, sim_root

VERSION = "1.02"
DEFAULT_BYTES_PER_TRANSFER = 1 << 26
MEM_CPU, MEM_GPU, MEM_CPU_FINE, MEM_GPU_FINE = 0, 1, 2, 3
MEM_TYPE_STR = "CGBF"
NUM_CPUS = 2  # the node's CPU sockets / NUMA nodes (KFD topology nodes 0 and 1, sim/amd.py)
# Max shared memory (LDS) per CU by gfx target: 64 KiB on CDNA 3, 160 KiB on CDNA 4 (SHARED_MEM_BYTES default).
LDS_BYTES = {"gfx942": 65536, "gfx950": 163840}
# Modelled: what one CU's copy kernel moves (GB/s) over a link, and within its own HBM. The corpus MI100 run moved
# 8.4 GB/s with 4 CUs (2.1 per CU, fine-grained PCIe); CDNA 3 clocks and caches are higher.
CU_GBPS_REMOTE = 4.0
CU_GBPS_LOCAL = 8.0
# GPU-kernel copies against the copy-engine host figure (pcie_h2d_gbps): the GPU reading host memory (non-posted
# reads) gets a little less than writing it.
H2D_KERNEL, D2H_KERNEL = 0.955, 0.975
# Peer traffic of a pair whose XGMI link is down goes GPU -> root complex -> (socket link ->) root complex -> GPU.
PCIE_P2P_SAME_SOCKET, PCIE_P2P_CROSS_SOCKET = 0.62, 0.5
CPU_THREAD_GBPS, CPU_COPY_CAP_GBPS = 5.5, 38.0  # a CPU thread's memcpy, and a socket's copy ceiling
LAUNCH_MS = 0.006  # kernel launch to first byte, inside the GPU events


class Exit(Exception):
    def __init__(self, code: int):
        self.code = code


# While a config file runs, output is collected here (a fault mode may cut or corrupt the whole of it).
_COLLECT: list[str] | None = None


def out(text: str) -> None:
    if _COLLECT is not None:
        _COLLECT.append(text)
    else:
        sys.stdout.write(text)


def atoi(text: str | None) -> int:
    match = re.match(r"\s*([+-]?\d+)", text or "")
    return int(match.group(1)) if match else 0


def env_int(name: str, default: int) -> int:
    return atoi(os.environ[name]) if name in os.environ else default


def jitter(*parts, spread: float = 0.004) -> float:
    h = int(hashlib.sha256("/".join(map(str, parts)).encode()).hexdigest()[:8], 16)
    return 1.0 + ((h % 2001) - 1000) / 1000 * spread


# --------------------------------------------------------------------------------------------- the node
class Node:
    def __init__(self) -> None:
        state = read_json(os.path.join(sim_root(), "node.json"), {})
        self.name = state.get("node", "")
        self.amd = state.get("amd") or {}
        self.gpus = self.amd.get("gpus") or []
        self.fabric = state.get("fabric") or {}
        self.down = [sorted(p) for p in self.amd.get("xgmi_links_down") or []]
        self.mode = (self.fabric.get("tools") or {}).get("transferbench", "ok")

    def socket(self, gpu: int) -> int:
        return 0 if int(self.gpus[gpu]["bdf"].split(":")[1], 16) < 0x80 else 1

    def link(self, a: int, b: int) -> tuple[str, int]:
        """hipExtGetLinkTypeAndHopCount for two GPU devices: XGMI-1 (fully connected OAMs), PCIE through the host
        (2 hops under one socket, 3 across) for a pair whose XGMI link is down."""
        pa, pb = self.gpus[a]["physical_index"], self.gpus[b]["physical_index"]
        if pa != pb and sorted((pa, pb)) in self.down:
            return "PCIE", 3 if self.socket(a) != self.socket(b) else 2
        return "XGMI", 1

    def host_link(self, gpu: int) -> float:
        base = float(self.fabric.get("pcie_h2d_gbps") or 55.5)
        return base * float((self.fabric.get("slow_host_link") or {}).get(str(gpu), 1.0))

    def shared_mem(self) -> int:
        lds = LDS_BYTES.get(self.gpus[0]["gfx_version"], 65536) if self.gpus else 65536
        return lds


# --------------------------------------------------------------------------------------------- EnvVars.hpp
class EnvVars:
    def __init__(self, node: Node) -> None:
        max_shared = node.shared_mem()
        self.max_shared = max_shared
        self.block_bytes = env_int("BLOCK_BYTES", 256)
        self.byte_offset = env_int("BYTE_OFFSET", 0)
        self.num_cpu_per_transfer = env_int("NUM_CPU_PER_TRANSFER", 4)
        self.num_iterations = env_int("NUM_ITERATIONS", 10)
        self.num_warmups = env_int("NUM_WARMUPS", 3)
        self.output_to_csv = env_int("OUTPUT_TO_CSV", 0)
        self.sampling_factor = env_int("SAMPLING_FACTOR", 1)
        self.shared_mem_bytes = env_int("SHARED_MEM_BYTES", max_shared // 2 + 1)
        self.use_hip_call = env_int("USE_HIP_CALL", 0)
        self.use_interactive = env_int("USE_INTERACTIVE", 0)
        self.use_memset = env_int("USE_MEMSET", 0)
        self.use_pcie_indexing = env_int("USE_PCIE_INDEX", 0)
        self.use_single_stream = env_int("USE_SINGLE_STREAM", 0)
        pattern = os.environ.get("FILL_PATTERN")
        self.fill_pattern = bool(pattern)
        if pattern is not None:
            if len(pattern) % 2:
                out("[ERROR] FILL_PATTERN must contain an even-number of hex digits\n")
                raise Exit(1)
            for ch in pattern:
                if ch not in "0123456789abcdefABCDEF":
                    out(f"[ERROR] FILL_PATTERN must contain an even-number of hex digits (0-9'/a-f/A-F).  (not {ch})\n")
                    raise Exit(1)
        checks = [
            (self.byte_offset % 4, "[ERROR] BYTE_OFFSET must be set to multiple of 4"),
            (self.num_warmups < 0, "[ERROR] NUM_WARMUPS must be set to a non-negative number"),
            (self.sampling_factor < 1, "[ERROR] SAMPLING_FACTOR must be greater or equal to 1"),
            (self.num_cpu_per_transfer < 1, "[ERROR] NUM_CPU_PER_TRANSFER must be greater or equal to 1"),
            (self.shared_mem_bytes < 0 or self.shared_mem_bytes > max_shared,
             f"[ERROR] SHARED_MEM_BYTES must be between 0 and {max_shared}"),
            (self.block_bytes <= 0 or self.block_bytes % 4, "[ERROR] BLOCK_BYTES must be a positive multiple of 4"),
            (self.use_single_stream and self.use_hip_call, "[ERROR] Single stream mode cannot be used with HIP calls"),
        ]
        for bad, message in checks:
            if bad:
                out(message + "\n")
                raise Exit(1)

    @staticmethod
    def display_usage() -> None:
        out("Environment variables:\n")
        out("======================\n")
        out(" BLOCK_BYTES=B      - Each CU (except the last) receives a multiple of BLOCK_BYTES to copy\n")
        out(" BYTE_OFFSET        - Initial byte-offset for memory allocations.  Must be multiple of 4. Defaults to 0\n")
        out(" FILL_PATTERN=STR   - Fill input buffer with pattern specified in hex digits (0-9,a-f,A-F).  Must be "
            "even number of digits, (byte-level big-endian)\n")
        out(" NUM_CPU_PER_TRANSFER=C - Use C threads per Transfer for CPU-executed copies\n")
        out(" NUM_ITERATIONS=I   - Perform I timed iteration(s) per test\n")
        out(" NUM_WARMUPS=W      - Perform W untimed warmup iteration(s) per test\n")
        out(" OUTPUT_TO_CSV      - Outputs to CSV format if set\n")
        out(" SAMPLING_FACTOR=F  - Add F samples (when possible) between powers of 2 when auto-generating data sizes\n")
        out(" SHARED_MEM_BYTES=X - Use X shared mem bytes per threadblock, potentially to avoid multiple threadblocks "
            "per CU\n")
        out(" USE_HIP_CALL       - Use hipMemcpy/hipMemset instead of custom shader kernels for GPU-executed copies\n")
        out(" USE_INTERACTIVE    - Pause for user-input before starting transfer loop\n")
        out(" USE_MEMSET         - Perform a memset instead of a copy (ignores source memory)\n")
        out(" USE_PCIE_INDEX     - Index GPUs by PCIe address-ordering instead of HIP-provided indexing\n")
        out(" USE_SINGLE_STREAM  - Use single stream per device instead of per Transfer.  Cannot be used with "
            "USE_HIP_CALL\n")

    def display(self) -> None:
        if self.output_to_csv:
            return
        row = "{:<20s} = {:>12} : {}\n"
        out(f"Run configuration (TransferBench v{VERSION})\n")
        out("=====================================================\n")
        out(row.format("BLOCK_BYTES", self.block_bytes, f"Each CU gets a multiple of {self.block_bytes} bytes to copy"))
        out(row.format("BYTE_OFFSET", self.byte_offset, f"Using byte offset of {self.byte_offset}"))
        pattern = os.environ.get("FILL_PATTERN")
        out(row.format("FILL_PATTERN", "(specified)" if pattern is not None else "(unset)",
                       f"Pattern: {pattern}" if self.fill_pattern
                       else "Pseudo-random: (Element i = i modulo 383 + 31)"))
        out(row.format("NUM_CPU_PER_TRANSFER", self.num_cpu_per_transfer,
                       f"Using {self.num_cpu_per_transfer} CPU thread(s) per CPU-based-copy Transfer"))
        iters = self.num_iterations
        out(row.format("NUM_ITERATIONS", iters, f"Running {iters if iters > 0 else -iters} "
                       f"{'timed iteration(s)' if iters > 0 else 'second(s)'} per topology"))
        out(row.format("NUM_WARMUPS", self.num_warmups,
                       f"Running {self.num_warmups} warmup iteration(s) per topology"))
        out(row.format("OUTPUT_TO_CSV", self.output_to_csv, "Output to console"))
        out(row.format("SHARED_MEM_BYTES", "(specified)" if "SHARED_MEM_BYTES" in os.environ else "(unset)",
                       f"Using {self.shared_mem_bytes} shared mem per threadblock"))
        out(row.format("USE_HIP_CALL", self.use_hip_call,
                       f"Using {'HIP functions' if self.use_hip_call else 'custom kernels'} for GPU-executed copies"))
        if self.use_hip_call and not self.use_memset:
            sdma = os.environ.get("HSA_ENABLE_SDMA")
            out(row.format("HSA_ENABLE_SDMA", "(null)" if sdma is None else sdma,
                           "Using blit kernels for hipMemcpy" if sdma == "0" else "Using DMA copy engines"))
        out(row.format("USE_INTERACTIVE", self.use_interactive,
                       f"Running in {'interactive' if self.use_interactive else 'non-interactive'} mode"))
        out(row.format("USE_MEMSET", self.use_memset, f"Performing {'memset' if self.use_memset else 'memcopy'}"))
        out(row.format("USE_PCIE_INDEX", self.use_pcie_indexing,
                       f"Using {'PCIe' if self.use_pcie_indexing else 'HIP'}-based GPU indexing"))
        out(row.format("USE_SINGLE_STREAM", self.use_single_stream,
                       f"Using single stream per {'device' if self.use_single_stream else 'Transfer'}"))
        out("\n")


# --------------------------------------------------------------------------------------------- usage, topology
def display_usage(node: Node, command: str) -> None:
    out(f"TransferBench v{VERSION}\n")
    out("========================================\n")
    out(f"Usage: {command} config <N>\n")
    out("  config: Either:\n")
    out("          - Filename of configFile containing Transfers to execute (see example.cfg for format)\n")
    out("          - Name of preset benchmark:\n")
    out("              p2p    - All CPU/GPU pairs benchmark\n")
    out("              p2p_rr - All CPU/GPU pairs benchmark with remote reads\n")
    out("              g2g    - All GPU/GPU pairs benchmark\n")
    out("              g2g_rr - All GPU/GPU pairs benchmark with remote reads\n")
    out("            - 3rd optional argument will be used as # of CUs to use (uses all by default)\n")
    out("  N     : (Optional) Number of bytes to copy per Transfer.\n")
    out(f"          If not specified, defaults to {DEFAULT_BYTES_PER_TRANSFER} bytes. Must be a multiple of 4 bytes\n")
    out("          If 0 is specified, a range of Ns will be benchmarked\n")
    out("          May append a suffix ('K', 'M', 'G') for kilobytes / megabytes / gigabytes\n")
    out("\n")
    EnvVars.display_usage()


def display_topology(node: Node, csv: bool) -> None:
    n = len(node.gpus)
    if csv:
        out(f"NumCpus,{NUM_CPUS}\nNumGpus,{n}\nGPU")
        out("".join(f",GPU {j:02d}" for j in range(n)))
        out(",PCIe Bus ID,ClosestNUMA\n")
    else:
        out(f"\nDetected topology: {NUM_CPUS} CPU NUMA node(s)   {n} GPU device(s)\n")
        out("        |" + "".join(f" GPU {j:02d} |" for j in range(n)) + " PCIe Bus ID  | Closest NUMA\n")
        out("--------+" * (n + 1) + "--------------+-------------\n")
    for i in range(n):
        out(f"GPU {i:02d}," if csv else f" GPU {i:02d} |")
        for j in range(n):
            if i == j:
                out("-," if csv else "    -   |")
            else:
                kind, hops = node.link(i, j)
                out(f"{'' if csv else ' '}{kind}-{hops}{',' if csv else ' |'}")
        bdf = node.gpus[i]["bdf"]
        out(f"{bdf},{node.socket(i)}\n" if csv else f" {bdf:>11s} |  {node.socket(i)}  \n")


# --------------------------------------------------------------------------------------------- config lines
class Stream:
    """Just enough of std::istringstream's ``>>`` for ints and words."""

    def __init__(self, text: str) -> None:
        self.text, self.pos, self.failed = text, 0, False

    def word(self) -> str | None:
        if self.failed:
            return None
        match = re.compile(r"\s*(\S+)").match(self.text, self.pos)
        if not match:
            self.failed = True
            return None
        self.pos = match.end()
        return match.group(1)

    def int(self) -> int:
        if self.failed:
            return 0
        match = re.compile(r"\s*([+-]?\d+)").match(self.text, self.pos)
        if not match:
            self.failed = True
            return 0
        self.pos = match.end()
        return int(match.group(1))


def parse_mem(token: str, num_gpus: int) -> tuple[int, int]:
    match = re.match(r"\s*(\S)\s*([+-]?\d+)", token)
    if not match:
        out(f"[ERROR] Unable to parse memory type token {token} - expecting either 'B,C,G or F' followed by an index\n")
        raise Exit(1)
    char, index = match.group(1), int(match.group(2))
    if char in "CcBb":
        if index < 0 or index >= NUM_CPUS:
            out(f"[ERROR] CPU index must be between 0 and {NUM_CPUS - 1} (instead of {index})\n")
            raise Exit(1)
        return (MEM_CPU if char in "Cc" else MEM_CPU_FINE), index
    if char in "GgFf":
        if index < 0 or index >= num_gpus:
            out(f"[ERROR] GPU index must be between 0 and {num_gpus - 1} (instead of {index})\n")
            raise Exit(1)
        return (MEM_GPU if char in "Gg" else MEM_GPU_FINE), index
    out(f"[ERROR] Unrecognized memory type {token}.  Expecting either 'B', 'C' or 'G' or 'F'\n")
    raise Exit(1)


def parse_transfers(line: str, num_gpus: int) -> list[dict]:
    """ParseTransfers: the Transfers of one line, ordered as the tool's std::map of executors runs them."""
    chars = list(line)
    for i in range(1, len(chars)):
        if chars[i] in "()->":
            chars[i] = " "
    stream = Stream("".join(chars))
    count = stream.int()
    if stream.failed:
        return []
    transfers = []
    if count > 0:
        cus = stream.int()
        if cus <= 0 or stream.failed:
            out(f"Parsing error: Number of blocks to use ({cus}) must be greater than 0\n")
            raise Exit(1)
    for index in range(abs(count)):
        src, exe, dst = stream.word(), stream.word(), stream.word()
        if count < 0:
            cus = stream.int()
        if stream.failed:
            if count > 0:
                out("Parsing error: Unable to read valid Transfer triplet (possibly missing a SRC or EXE or DST)\n")
            else:
                out("Parsing error: Unable to read valid Transfer quadruple (possibly missing a SRC or EXE or DST or "
                    "#CU)\n")
            raise Exit(1)
        src_type, src_index = parse_mem(src, num_gpus)
        exe_type, exe_index = parse_mem(exe, num_gpus)
        dst_type, dst_index = parse_mem(dst, num_gpus)
        if exe_type not in (MEM_CPU, MEM_GPU):
            out(f"[ERROR] Executor must either be CPU ('C') or GPU ('G'), (from ({src}->{exe}->{dst} {cus}))\n")
            raise Exit(1)
        transfers.append({"index": index, "src": (src_type, src_index), "exe": (exe_type, exe_index),
                          "dst": (dst_type, dst_index), "cus": cus})
    order = sorted({t["exe"] for t in transfers})
    return [t for exe in order for t in transfers if t["exe"] == exe]


def is_cpu(mem: tuple[int, int]) -> bool:
    return mem[0] in (MEM_CPU, MEM_CPU_FINE)


def desc(node: Node, a: tuple[int, int], b: tuple[int, int]) -> str:
    """GetDesc: how memory a reaches b."""
    if is_cpu(a):
        return ("LOCAL" if a[1] == b[1] else "NUMA") if is_cpu(b) else "PCIE"
    if is_cpu(b):
        return "PCIE"
    if a[1] == b[1]:
        return "LOCAL"
    kind, hops = node.link(a[1], b[1])
    return f"{kind}-{hops}"


def transfer_desc(node: Node, t: dict) -> str:
    return desc(node, t["src"], t["exe"]) + "-" + desc(node, t["exe"], t["dst"])


# --------------------------------------------------------------------------------------------- the figures
def segments(node: Node, ev: EnvVars, t: dict) -> list[tuple[tuple, float]]:
    """The resources a Transfer moves its bytes through, with what each can carry alone (GB/s)."""
    exe_type, exe = t["exe"]
    used: list[tuple[tuple, float]] = []
    if exe_type == MEM_CPU:
        threads = ev.num_cpu_per_transfer
        used.append((("cpu", exe), min(threads * CPU_THREAD_GBPS, CPU_COPY_CAP_GBPS)))
        for mem, way in ((t["src"], "d2h"), (t["dst"], "h2d")):
            if not is_cpu(mem):  # a CPU reading GPU memory over PCIe crawls; writing it is write-combined
                rate = 0.9 if way == "d2h" else min(threads * 3.0, 20.0)
                used.append((("host", mem[1], way), rate * node.host_link(mem[1]) / 55.5))
            elif mem[1] != exe:
                used.append((("numa", mem[1], exe), CPU_COPY_CAP_GBPS * 0.7))
        return used
    cu_rate = CU_GBPS_REMOTE
    for mem, reading in ((t["src"], True), (t["dst"], False)):
        if is_cpu(mem):
            way = "h2d" if reading else "d2h"
            factor = H2D_KERNEL if reading else D2H_KERNEL
            used.append((("host", exe, way), node.host_link(exe) * factor))
        elif mem[1] == exe:
            used.append((("hbm", exe), float(node.fabric.get("xgmi_local_copy_gbps") or 2050.0)))
        else:
            a, b = (mem[1], exe) if reading else (exe, mem[1])
            kind, _ = node.link(a, b)
            if kind == "XGMI":
                used.append((("xgmi", a, b), float(node.fabric.get("xgmi_p2p_gbps") or 48.6)))
            else:
                share = PCIE_P2P_CROSS_SOCKET if node.socket(a) != node.socket(b) else PCIE_P2P_SAME_SOCKET
                used.append((("host", a, "d2h"), min(node.host_link(a), node.host_link(b)) * share))
                used.append((("host", b, "h2d"), min(node.host_link(a), node.host_link(b)) * share))
    if all(key[0] == "hbm" for key, _ in used):
        cu_rate = CU_GBPS_LOCAL
    used.append((("cus", exe, t["index"]), max(t["cus"], 1) * cu_rate))
    return used


def timings(node: Node, ev: EnvVars, transfers: list[dict], nbytes: int, test: int) -> list[float]:
    """Each Transfer's milliseconds: the tightest of its resources, shared by the Transfers of the test using it."""
    plans = [list(dict(segments(node, ev, t)).items()) for t in transfers]  # a resource counts once a Transfer
    users: dict[tuple, int] = {}
    for plan in plans:
        for key, _ in plan:
            users[key] = users.get(key, 0) + 1
    times = []
    for t, plan in zip(transfers, plans, strict=True):
        gbps = min(cap / users[key] for key, cap in plan)
        if ev.use_memset:
            gbps *= 1.35  # nothing to read
        gbps *= jitter(node.name, test, nbytes, t["index"], t["src"], t["exe"], t["dst"])
        times.append(nbytes / (gbps * 1e6) + LAUNCH_MS * (1.0 if t["exe"][0] == MEM_GPU else 4.0))
    return times


def test_sizes(nbytes: int, sampling: int) -> list[int]:
    if nbytes:
        if nbytes % 4:
            out(f"[ERROR] numBytesPerTransfer ({nbytes}) must be a multiple of 4\n")
            raise Exit(1)
        return [nbytes // 4]
    sizes = []
    n = 256
    while n <= 1 << 27:
        delta = max(32, n // sampling)
        cur = n
        while cur < n * 2:
            sizes.append(cur)
            cur += delta
        n *= 2
    return sizes


def fake_pointer(*parts) -> str:
    h = int(hashlib.sha256("/".join(map(str, parts)).encode()).hexdigest()[:6], 16)
    return f"0x7f{h:06x}000"


def run_test(node: Node, ev: EnvVars, transfers: list[dict], nbytes: int, test: int) -> list[str]:
    """The lines one Test prints for one size."""
    lines = [] if ev.output_to_csv else [f"Test {test}: [{nbytes} bytes]\n"]
    if ev.use_interactive:  # before the first timed iteration, and once the Transfers are done
        lines.append("Hit <Enter> to continue: ")
        sys.stdin.read(1)
        lines.append("\n")
        lines.append("Transfers complete. Hit <Enter> to continue: ")
        sys.stdin.read(1)
        lines.append("\n")
    times = timings(node, ev, transfers, nbytes, test)
    iterations = ev.num_iterations if ev.num_iterations > 0 else max(1, int(-ev.num_iterations * 1000 / max(times)))
    max_gpu = max(times)
    overhead = (0.020 + 0.0026 * max_gpu) * jitter(node.name, "overhead", test, nbytes, spread=0.15)
    total_ms = max_gpu + overhead
    total_gbps = (len(transfers) * nbytes / 1.0e6) / total_ms
    if ev.use_single_stream and not ev.output_to_csv:
        for exe in sorted({t["exe"] for t in transfers}):
            mine = [(t, ms) for t, ms in zip(transfers, times, strict=True) if t["exe"] == exe]
            exe_ms = max(ms for _, ms in mine)
            lines.append(f" Executor: {MEM_TYPE_STR[exe[0]]}PU {exe[1]:02d}        (# Transfers {len(mine):02d})| "
                         f"{len(mine) * nbytes / 1.0e9 / exe_ms * 1000.0:9.3f} GB/s | {exe_ms:8.3f} ms |\n")
            for t, ms in mine:
                units = ev.num_cpu_per_transfer if t["exe"][0] == MEM_CPU else t["cus"]
                lines.append(f"{'':28s}Transfer  {t['index']:02d} | "
                             f"{nbytes / 1.0e9 / ms * 1000.0:9.3f} GB/s | {ms:8.3f} ms | "
                             f"{MEM_TYPE_STR[t['src'][0]]}{t['src'][1]:02d} -> "
                             f"{MEM_TYPE_STR[t['exe'][0]]}{t['exe'][1]:02d}:({units:03d}) -> "
                             f"{MEM_TYPE_STR[t['dst'][0]]}{t['dst'][1]:02d}\n")
    elif ev.use_single_stream:
        for exe in sorted({t["exe"] for t in transfers}):
            mine = [ms for t, ms in zip(transfers, times, strict=True) if t["exe"] == exe]
            exe_ms = max(mine)
            lines.append(f"{test},{nbytes},ALL,{MEM_TYPE_STR[exe[0]]}{exe[1]:02d},ALL,ALL,"
                         f"{len(mine) * nbytes / 1.0e9 / exe_ms * 1000.0:.3f},{exe_ms:.3f},ALL,ALL,ALL,"
                         f"{ev.byte_offset},{ev.num_warmups},{iterations}\n")
    else:
        for t, ms in zip(transfers, times, strict=True):
            units = ev.num_cpu_per_transfer if t["exe"][0] == MEM_CPU else t["cus"]
            src = f"{MEM_TYPE_STR[t['src'][0]]}{t['src'][1]:02d}"
            exe = f"{MEM_TYPE_STR[t['exe'][0]]}{t['exe'][1]:02d}"
            dst = f"{MEM_TYPE_STR[t['dst'][0]]}{t['dst'][1]:02d}"
            gbps = nbytes / 1.0e9 / ms * 1000.0
            if ev.output_to_csv:
                lines.append(f"{test},{nbytes},{src},{exe},{dst},{units},{gbps:.3f},{ms:.3f},{transfer_desc(node, t)},"
                             f"{fake_pointer(node.name, test, t['index'], 's')},"
                             f"{fake_pointer(node.name, test, t['index'], 'd')},{ev.byte_offset},{ev.num_warmups},"
                             f"{iterations}\n")
            else:
                lines.append(f" Transfer {t['index']:02d}: {src} -> [{exe[0]}PU {t['exe'][1]:02d}:{units:03d}] -> "
                             f"{dst} | {gbps:9.3f} GB/s | {ms:8.3f} ms | {transfer_desc(node, t):<16s}\n")
    if ev.output_to_csv:
        lines.append(f"{test},{nbytes},ALL,ALL,ALL,ALL,{total_gbps:.3f},{total_ms:.3f},ALL,ALL,ALL,{ev.byte_offset},"
                     f"{ev.num_warmups},{iterations}\n")
    else:
        lines.append(f" Aggregate Bandwidth (CPU timed)         | {total_gbps:9.3f} GB/s | {total_ms:8.3f} ms | "
                     f"Overhead: {overhead:.3f} ms\n")
    return lines


# --------------------------------------------------------------------------------------------- main
def bytes_arg(text: str) -> int:
    value = atoi(text)
    unit = text[-1:] if text else ""
    scale = {"K": 1024, "k": 1024, "M": 1024 ** 2, "m": 1024 ** 2, "G": 1024 ** 3, "g": 1024 ** 3}.get(unit, 1)
    return value * scale


def faulted(node: Node, text: str) -> str:
    """The output as the node's fault mode shows it (truncated / garbled); hang and garbage are played by main."""
    if node.mode == "garbled":
        return text.replace("Using custom kernels for GPU-executed copies",
                            "Using custom kerncd els for GPU-executed copies", 1)
    if node.mode in ("truncated", "hang"):
        lines = text.splitlines(keepends=True)
        aggregates = [k for k, line in enumerate(lines) if line.startswith(" Aggregate Bandwidth")]
        if aggregates:
            # stop half-way: after the Transfer rows of the middle test, before its aggregate line
            return "".join(lines[: aggregates[(len(aggregates) - 1) // 2]])
    return text


def main(argv: list[str]) -> int:
    node = Node()
    try:
        return run(node, argv)
    except Exit as stop:
        sys.stdout.flush()
        return stop.code


def run(node: Node, argv: list[str]) -> int:
    if not node.gpus:
        sys.stderr.write("Encountered HIP error (no ROCm-capable device is detected) at line 112 in file "
                         "TransferBench.cpp\n")
        return 255
    if node.mode == "garbage":
        sys.stdout.buffer.write(random.Random(node.name + "/transferbench").randbytes(3000))
        return 0
    if not argv:
        csv = env_int("OUTPUT_TO_CSV", 0)
        if not csv:
            display_usage(node, "TransferBench")
        display_topology(node, bool(csv))
        return 0
    ev = EnvVars(node)
    nbytes = bytes_arg(argv[1]) if len(argv) > 1 else DEFAULT_BYTES_PER_TRANSFER
    sizes = test_sizes(nbytes, ev.sampling_factor)
    if argv[0] in ("p2p", "p2p_rr", "g2g", "g2g_rr"):
        sys.stderr.write(f"TransferBench (simulated): the {argv[0]} preset benchmark is not simulated\n")
        return 2
    try:
        with open(argv[0], errors="replace") as fh:
            config = fh.read()
    except OSError:
        out(f"[ERROR] Unable to open transfer configuration file: [{argv[0]}]\n")
        return 1
    global _COLLECT
    _COLLECT = printed = []
    code = 0
    try:
        ev.display()
        if ev.output_to_csv:
            out("Test,NumBytes,SrcMem,Executor,DstMem,CUs,BW(GB/s),Time(ms),"
                "TransferDesc,SrcAddr,DstAddr,ByteOffset,numWarmups,numIters\n")
        test = 0
        for raw in re.findall(r"[^\n]*\n|[^\n]+$", config):
            # fgets reads at most 2047 characters a call: a longer line is read on as the next "line"
            for line in [raw[k:k + 2047] for k in range(0, len(raw), 2047)]:
                if not ev.output_to_csv and line.startswith("##"):
                    out(line)
                transfers = parse_transfers(line, len(node.gpus))
                if not transfers:
                    continue
                test += 1
                for size in sizes:
                    for text in run_test(node, ev, transfers, size * 4, test):
                        out(text)
    except Exit as stop:
        code = stop.code
    finally:
        _COLLECT = None
    text = faulted(node, "".join(printed))
    out(text)
    sys.stdout.flush()
    if node.mode == "hang" and code == 0:
        while True:  # a copy that never completes: the tool waits on its stream until it is killed
            time.sleep(3600)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
