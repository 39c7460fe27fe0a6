"""nccl-tests (``all_reduce_perf``, ``all_gather_perf``, ``reduce_scatter_perf``, ``alltoall_perf``,
``sendrecv_perf``) for a simulated node, in the nccl-tests 2.17 layout (``common.cu``/``util.cu``).

One process per launcher task, as the real binaries: under Open MPI's ``mpirun`` (``OMPI_COMM_WORLD_*``,
``PMIX_NAMESPACE``), Slurm's ``srun`` (``SLURM_PROCID``, ``SLURM_NTASKS``, ``SLURM_JOB_ID``.``SLURM_STEP_ID``)
or bare. The processes of one job meet in ``D/run/nccl/<job key>/`` (D: the simulated cluster's directory,
found from ``/sim/provider.json``): each writes its rank file (host, pid, GPUs, its node's ``fabric`` from
``/sim/node.json``, its NCCL environment); rank 0 prints the table from every participating node's figures
(only rank 0 prints rows, like the real tool), then every rank exits. A rank that never arrives makes the
others fail after ``SIMNODE_NCCL_BOOTSTRAP_TIMEOUT_S`` (default 60 s) with the error NCCL gives.

Environment honoured like NCCL: ``NCCL_P2P_DISABLE``, ``NCCL_SHM_DISABLE``, ``NCCL_NVLS_ENABLE``,
``NCCL_IB_HCA``, ``NCCL_DEBUG=INFO``. Standard library only; never imports clustereval.

On an AMD node (``amd`` in node.json) the binaries are rccl-tests: the same run over the node's HIP devices
(``amd.gpus``: one per logical GPU, so 64 in CPX mode) and ``fabric`` figures (``nvlink_busbw_gbps`` is the
XGMI plateau), printed in the rccl-tests layout of the sibling module ``rccl_layout`` (RCCL's version banner
under ``NCCL_DEBUG=VERSION``/``WARN``/``INFO``, warm-up default 5, ``-N`` cycles, failed validation counted in
``# Out of bounds values`` and the exit status, ``NCCL_TESTS_MIN_BW``).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import sys
import time

import rccl_layout
from simnode import read_json, sim_root

COLLECTIVES = {
    # name: (redop printed, count divided by nranks, busbw factor(n), efficiency single node, multi node)
    "all_reduce": ("sum", False, lambda n: 2.0 * (n - 1) / n, 1.0, 1.0),
    "all_gather": (None, True, lambda n: (n - 1) / n, 0.95, 0.95),
    "reduce_scatter": ("sum", True, lambda n: (n - 1) / n, 0.95, 0.95),
    "alltoall": (None, True, lambda n: (n - 1) / n, 0.9, 0.6),
    "sendrecv": ("sum", False, lambda n: 1.0, 0.75, 1.0),
}
TYPES = {"int8": 1, "char": 1, "uint8": 1, "int32": 4, "int": 4, "uint32": 4, "int64": 8, "uint64": 8,
         "half": 2, "float16": 2, "float": 4, "float32": 4, "double": 8, "float64": 8, "bfloat16": 2,
         "f8e4m3": 1, "f8e5m2": 1}
OPS = ("sum", "prod", "max", "min", "avg", "mulsum")
# options that take a value (nccl-tests' getopt_long string "t:g:b:e:i:f:n:m:w:N:p:c:o:d:r:z:y:T:hG:C:a:R:x:M:u:")
WITH_VALUE = set("tgbeifnmwNpcodrzyTGCaRxMuIJS")
LONG = {"nthreads": "t", "ngpus": "g", "minbytes": "b", "maxbytes": "e", "stepbytes": "i", "stepfactor": "f",
        "iters": "n", "agg_iters": "m", "warmup_iters": "w", "parallel_init": "p", "check": "c", "op": "o",
        "datatype": "d", "root": "r", "blocking": "z", "stream_null": "y", "timeout": "T", "cudagraph": "G",
        "report_cputime": "C", "average": "a", "local_register": "R", "report_timestamps": "S",
        "output_file": "J", "memory": "M"}


def usage(prog: str) -> str:
    return (f"USAGE: {prog} \n\t[-t,--nthreads <num threads>] \n\t[-g,--ngpus <gpus per thread>] \n\t"
            "[-b,--minbytes <min size in bytes>] \n\t[-e,--maxbytes <max size in bytes>] \n\t"
            "[-i,--stepbytes <increment size>] \n\t[-f,--stepfactor <increment factor>] \n\t"
            "[-n,--iters <iteration count>] \n\t[-m,--agg_iters <aggregated iteration count>] \n\t"
            "[-w,--warmup_iters <warmup iteration count>] \n\t[-c,--check <check iteration count>] \n\t"
            "[-o,--op <sum/prod/min/max/avg/mulsum/all>] \n\t[-d,--datatype <nccltype/all>] \n\t"
            "[-r,--root <root>] \n\t[-z,--blocking <0/1>] \n\t[-G,--cudagraph <num graph launches>] \n\t"
            "[-h,--help]\n")


def parse_size(text: str) -> int:
    text = text.strip()
    units = {"K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}
    if text and text[-1].upper() in units:
        return int(float(text[:-1]) * units[text[-1].upper()])
    return int(float(text))


def parse_args(argv: list[str], warmup: str = "1") -> dict:
    opts = {"t": "1", "g": "1", "b": str(32 * 1024 * 1024), "e": str(32 * 1024 * 1024), "i": str(1024 * 1024),
            "f": "1", "n": "20", "m": "1", "w": warmup, "c": "1", "o": "sum", "d": "float", "r": "0", "G": "0"}
    k = 0
    while k < len(argv):
        arg = argv[k]
        key = value = None
        if arg.startswith("--"):
            name, _, inline = arg[2:].partition("=")
            key = LONG.get(name)
            if key is None:
                return {"error": f"{arg}"}
            value = inline or None
        elif arg.startswith("-") and len(arg) > 1:
            key, value = arg[1], arg[2:] or None
        else:  # the real getopt permutes and ignores operands
            k += 1
            continue
        if key == "h":
            return {"help": True}
        if key in WITH_VALUE and value is None:
            k += 1
            if k >= len(argv):
                return {"error": arg}
            value = argv[k]
        opts[key] = value if value is not None else "1"
        k += 1
    return opts


def get_float_str(value: float, width: int) -> str:
    """nccl-tests' getFloatStr: two decimals while they fit, then fewer, then exponent notation."""
    power = 0
    val = 1
    while value >= val:
        power += 1
        val *= 10
    if power < width - 2:
        return f"{value:{width}.2f}"
    if power < width - 1:
        return f"{value:{width}.1f}"
    if power < width + 1:
        return f"{value:{width}.0f}"
    return f"{value:{width}.1e}"


def fmt_g(value: float) -> str:
    return f"{value:g}"


# ------------------------------------------------------------------------------------------ node and job


def cluster_dir() -> str:
    provider = read_json(os.path.join(sim_root(), "provider.json"), {})
    gt = provider.get("ground_truth")
    if gt:
        return os.path.dirname(os.path.dirname(os.path.dirname(gt)))
    return os.path.join(sim_root(), "run")


def job() -> dict:
    """(key, rank, nprocs, local rank) from the launcher's environment."""
    env = os.environ
    if "OMPI_COMM_WORLD_RANK" in env:
        ns = env.get("PMIX_NAMESPACE") or env.get("OMPI_MCA_ess_base_jobid") or env.get("OMPI_MCA_orte_hnp_uri", "")
        return {"key": "ompi-" + hashlib.sha1(ns.encode()).hexdigest()[:16], "rank": int(env["OMPI_COMM_WORLD_RANK"]),
                "nprocs": int(env.get("OMPI_COMM_WORLD_SIZE", "1")),
                "local": int(env.get("OMPI_COMM_WORLD_LOCAL_RANK", "0"))}
    if "PMI_RANK" in env and "PMI_SIZE" in env:
        return {"key": "pmi-" + hashlib.sha1(env.get("PMI_KVSNAME", env.get("PMI_PORT", "")).encode()).hexdigest()[:16],
                "rank": int(env["PMI_RANK"]), "nprocs": int(env["PMI_SIZE"]),
                "local": int(env.get("MPI_LOCALRANKID", "0"))}
    if "SLURM_PROCID" in env and "SLURM_JOB_ID" in env and "SLURM_STEP_ID" in env:
        return {"key": f"slurm-{env['SLURM_JOB_ID']}.{env['SLURM_STEP_ID']}", "rank": int(env["SLURM_PROCID"]),
                "nprocs": int(env.get("SLURM_STEP_NUM_TASKS") or env.get("SLURM_NTASKS") or "1"),
                "local": int(env.get("SLURM_LOCALID", "0"))}
    return {"key": None, "rank": 0, "nprocs": 1, "local": 0}


def nccl_env() -> dict:
    return {k: v for k, v in os.environ.items() if k.startswith("NCCL_")}


def hca_filter(spec: str | None, rails: list[dict]) -> list[dict]:
    """NCCL_IB_HCA: ``mlx5_0,mlx5_1``, ``=mlx5_0`` (exact), ``^mlx5_3`` (exclude), ``mlx5_0:1`` (port)."""
    if not spec:
        return rails
    exclude = spec.startswith("^")
    spec = spec.lstrip("^")
    exact = spec.startswith("=")
    names = [s.split(":")[0] for s in spec.lstrip("=").split(",") if s]

    def hit(name: str) -> bool:
        return any(name == n if exact else name.startswith(n) for n in names)

    return [r for r in rails if hit(r["name"]) != exclude]


def jitter(*parts) -> float:
    h = int(hashlib.sha256("/".join(map(str, parts)).encode()).hexdigest()[:8], 16)
    return 1.0 + ((h % 2001) - 1000) / 1000 * 0.015


# ------------------------------------------------------------------------------------------ the model


def node_bandwidth(member: dict, collective: str, multi: bool) -> tuple[float, float]:
    """(busbw plateau GB/s, latency us) this node allows for the collective."""
    fab = member["fabric"]
    env = member["env"]
    eff_single, eff_multi = COLLECTIVES[collective][3], COLLECTIVES[collective][4]
    rails = [r for r in hca_filter(env.get("NCCL_IB_HCA"), fab.get("rails") or []) if r.get("up", True)]
    if rails:
        slowest = min(r["rate_gbps"] * r["factor"] for r in rails)
        net = len(rails) * slowest / 8.0 * float(fab.get("rail_efficiency", 0.96))
    else:
        net = 12.5 * 0.8  # no RDMA device: NCCL falls back to its socket transport
    nvlink = float(fab.get("nvlink_busbw_gbps", 480)) * float(fab.get("nvlink_factor", 1.0))
    nvls = float(fab.get("nvls_busbw_gbps", 0) or 0) * float(fab.get("nvlink_factor", 1.0))
    if nvls and env.get("NCCL_NVLS_ENABLE", "1") != "0" and collective in ("all_reduce", "all_gather",
                                                                            "reduce_scatter"):
        nvlink = max(nvlink, nvls)
    p2p_off = env.get("NCCL_P2P_DISABLE") == "1"
    shm_off = env.get("NCCL_SHM_DISABLE") == "1"
    if p2p_off and shm_off:
        intra = net
    elif p2p_off:
        intra = float(fab.get("shm_busbw_gbps", 24))
    else:
        intra = nvlink
    straggler = fab.get("straggler_gpu")
    if straggler and straggler["gpu"] in member["devices"]:
        slow = 1.0 - (1.0 - straggler["factor"]) * 0.3
        intra *= slow
        net *= slow
    if collective == "sendrecv" and multi:
        net = net / max(len(fab.get("rails") or [1]), 1)
    if multi:
        bw = min(intra, net) * eff_multi
        lat = float(fab.get("net_latency_us", 28))
    else:
        bw = intra * eff_single
        lat = float(fab.get("latency_us", 12))
    return bw, lat


def sizes(opts: dict) -> list[int]:
    lo, hi = parse_size(opts["b"]), parse_size(opts["e"])
    factor, step = int(float(opts["f"])), parse_size(opts["i"])
    out, size = [], lo
    while size <= hi and len(out) < 10000:
        out.append(size)
        size = size * factor if factor > 1 else size + step
        if size == 0:
            break
    return out


# ------------------------------------------------------------------------------------------ output


def out(line: str = "") -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def info(host: str, pid: int, rank_dev: int, message: str) -> None:
    out(f"{host}:{pid}:{pid} [{rank_dev}] NCCL INFO {message}")


def debug_lines(me: dict, nranks: int, nnodes: int) -> None:
    if os.environ.get("NCCL_DEBUG", "").upper() not in ("INFO", "TRACE"):
        return
    fab, host, pid = me["fabric"], me["host"], me["pid"]
    version, cuda = fab.get("nccl_version", "2.27.7"), me.get("cuda_version", "13.0")
    addr = me.get("address", "127.0.0.1")
    rails = [r for r in hca_filter(me["env"].get("NCCL_IB_HCA"), fab.get("rails") or []) if r.get("up", True)]
    for dev in me["devices"][:1]:
        info(host, pid, dev, f"Bootstrap: Using lo:{addr}<0>")
        info(host, pid, dev, f"cudaDriverVersion {int(float(cuda) * 1000)}")
        info(host, pid, dev, f"NCCL version {version}+cuda{cuda}")
        if fab.get("nccl_faults", {}).get("jagged"):
            info(host, pid, dev, "NET/Plugin: Could not find: libnccl-net.so. Using internal net plugin.")
        else:
            info(host, pid, dev, "NET/Plugin: Loaded net plugin NCCL RDMA Plugin v10 (v10)")
        if rails:
            listing = " ".join(f"[{k}]{r['name']}:1/IB" for k, r in enumerate(rails))
            info(host, pid, dev, f"NET/IB : Using {listing} [RO]; OOB lo:{addr}<0>")
            info(host, pid, dev, "Using network IB")
        else:
            info(host, pid, dev, f"NET/Socket : Using [0]lo:{addr}<0>")
            info(host, pid, dev, "Using network Socket")
    for k, dev in enumerate(me["devices"]):
        rank = me["first_rank"] + k
        bus = me["buses"][k]
        info(host, pid, dev, f"ncclCommInitRank comm 0x{0x55d0c0000000 + rank * 0x1000:x} rank {rank} "
                             f"nranks {nranks} cudaDev {dev} nvmlDev {dev} busId {bus.lower()}000 "
                             f"commId 0x{me['comm_id']} - Init COMPLETE")
    if nnodes > 1 and me["env"].get("NCCL_NET_GDR_LEVEL") != "LOC" and fab.get("gpudirect", True):
        info(host, pid, me["devices"][0], "Channel 00/0 : 0[0] -> 8[0] [send] via NET/IB/0/GDRDMA")


def active_rails(me: dict) -> list[dict]:
    fab = me["fabric"]
    return [r for r in hca_filter(me["env"].get("NCCL_IB_HCA"), fab.get("rails") or []) if r.get("up", True)]


def run_cycles(opts: dict) -> int:
    """rccl-tests' ``-N`` (cycles, each printed under ``# Testing N cycle.``); 0 (forever) is run once."""
    try:
        return max(int(opts.get("N", "1")), 1)
    except ValueError:
        return 1


def rccl_header(me: dict, members: list[dict], nranks: int, nnodes: int, ver: dict) -> None:
    """Rank 0 on an AMD node: the rank lines, RCCL's INFO lines or version banner, the table header."""
    for m in members:
        for k, dev in enumerate(m["devices"]):
            out(rccl_layout.rank_line(m["first_rank"] + k, m["pid"], m["host"], dev, m["bdfs"][k], m["names"][k]))
    for line in rccl_layout.debug_lines(me, nranks, nnodes, active_rails(me), ver, with_banner=True):
        out(line)
    if rccl_layout.debug_level() in ("VERSION", "WARN"):
        for line in rccl_layout.banner(me["host"], ver):
            out(line)
    for line in rccl_layout.table_header():
        out(line)


def fail(host: str, pid: int, text: str, line: int = 1005) -> int:
    out(f"{host}: Test NCCL failure common.cu:{line} '{text}'")
    out(f" .. {host} pid {pid}: Test failure common.cu:891")
    return 3


def rendezvous(base: str, me: dict, nprocs: int, timeout: float) -> list[dict] | None:
    os.makedirs(base, exist_ok=True)
    path = os.path.join(base, f"rank{me['proc']}.json")
    tmp = path + f".{os.getpid()}"
    with open(tmp, "w") as fh:
        json.dump(me, fh)
    os.replace(tmp, path)
    deadline = time.monotonic() + timeout
    while True:
        members = [read_json(os.path.join(base, f"rank{p}.json"), None) for p in range(nprocs)]
        if all(members):
            return members
        if time.monotonic() > deadline:
            return None
        time.sleep(0.02)


def main(argv: list[str]) -> int:
    prog = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "all_reduce_perf"
    collective = prog.removesuffix("_perf")
    if collective not in COLLECTIVES:
        collective = "all_reduce"
    node = read_json(os.path.join(sim_root(), "node.json"), {})
    amd = node.get("amd") or None
    opts = parse_args(argv, warmup="5" if amd else "1")  # rccl-tests warms up 5 times by default
    if opts.get("help"):
        out(usage(prog))
        return 0
    if "error" in opts:
        sys.stderr.write(f"{prog}: unrecognized option '{opts['error']}'\n")
        out(usage(prog))
        return 1
    fab = node.get("fabric") or {}
    host = socket.gethostname()
    pid = os.getpid()
    nthreads, ngpus = int(opts["t"]), int(opts["g"])
    j = job()
    gpus = (amd.get("gpus") or []) if amd else node.get("gpus") or []  # HIP devices: one per partition
    ver = rccl_layout.versions(amd, fab) if amd else {}
    first_dev = j["local"] * nthreads * ngpus
    count = nthreads * ngpus
    version = str(fab.get("nccl_version", "2.27.7"))
    vparts = [int(x) for x in [*version.split("."), "0", "0"][:3]]
    vcode = vparts[0] * 10000 + vparts[1] * 100 + vparts[2]
    is_root = j["rank"] == 0
    dtype = opts["d"]
    wordsize = TYPES.get(dtype, 4)
    redop, per_rank, factor_of, _, _ = COLLECTIVES[collective]
    op = opts["o"] if redop else "none"
    check = int(opts["c"]) > 0
    size_list = sizes(opts)
    step = f"{int(float(opts['f']))}(factor)" if int(float(opts["f"])) > 1 else f"{parse_size(opts['i'])}(bytes)"
    params = (f"# nThread {nthreads} nGpus {ngpus} minBytes {parse_size(opts['b'])} maxBytes "
              f"{parse_size(opts['e'])} step: {step} warmup iters: {opts['w']} iters: {opts['n']} agg iters: "
              f"{opts['m']} validation: {1 if check else 0} graph: {opts['G']}")
    if is_root and amd:
        for line in rccl_layout.head(prog, params, opts, ver["tests"]):
            out(line)
    elif is_root:
        out(f"# nccl-tests version {fab.get('nccl_tests_version', '2.17.6')} nccl-headers={vcode} "
            f"nccl-library={vcode}")
        out(f"# Collective test starting: {prog}")
        out(params)
        if opts.get("z", "0") != "0":
            out("# Blocking Enabled: wait for completion and barrier after each collective ")
        out("#")
        out("# Using devices")
    if first_dev + count > len(gpus):
        sys.stderr.write(f"Invalid number of GPUs: {first_dev + count} requested but only {len(gpus)} were found.\n"
                         "Please check the number of processes and GPUs per process.\n")
        out(f"{host}: Test failure common.cu:1127")
        out(f" .. {host} pid {pid}: Test failure common.cu:891")
        return 2
    devices = list(range(first_dev, first_dev + count))
    comm_seed = j["key"] or f"bare-{pid}"
    if amd:
        fields = [rccl_layout.device_fields(gpus[d]) for d in devices]
        buses, names = [f[0] for f in fields], [f[2] for f in fields]
    else:
        buses, names = [gpus[d]["pci_bus"] for d in devices], [gpus[d]["name"] for d in devices]
    me = {"proc": j["rank"], "host": host, "pid": pid, "node": node.get("node", host), "devices": devices,
          "buses": buses, "names": names,
          "fabric": fab, "env": nccl_env(), "first_rank": j["rank"] * count,
          "cuda_version": node.get("cuda_version", "13.0"),
          "address": os.environ.get("SSH_CONNECTION", "").split()[2] if len(
              os.environ.get("SSH_CONNECTION", "").split()) > 2 else "127.0.0.1",
          "comm_id": hashlib.sha1(comm_seed.encode()).hexdigest()[:16]}
    if amd:
        me.update(bdfs=[f[1] for f in fields], peer_memory=amd.get("peer_memory", "dma_buf"))
    base = None
    if j["nprocs"] > 1:
        base = os.path.join(cluster_dir(), "run", "nccl", j["key"])
        stale = read_json(os.path.join(base, f"rank{j['rank']}.json"), None)
        if stale and time.time() - os.path.getmtime(os.path.join(base, f"rank{j['rank']}.json")) > 600:
            shutil.rmtree(base, ignore_errors=True)
        timeout = float(os.environ.get("SIMNODE_NCCL_BOOTSTRAP_TIMEOUT_S", "60"))
        members = rendezvous(base, me, j["nprocs"], timeout)
        if members is None:
            if os.environ.get("NCCL_DEBUG", "").upper() in ("INFO", "WARN", "TRACE"):
                out(f"{host}:{pid}:{pid} [{devices[0]}] NCCL WARN Bootstrap : timeout waiting for "
                    f"{j['nprocs']} ranks to connect")
            return fail(host, pid, "remote process exited or there was a network error / ")
    else:
        members = [me]
    nranks = sum(len(m["devices"]) for m in members)
    nnodes = len({m["node"] for m in members})
    multi = nnodes > 1
    if not is_root:
        if amd:
            for line in rccl_layout.debug_lines(me, nranks, nnodes, active_rails(me), ver, with_banner=False):
                out(line)
        else:
            debug_lines(me, nranks, nnodes)
        # wait for rank 0 to finish (or hang with it), then leave together
        while base and not os.path.exists(os.path.join(base, "done")):
            time.sleep(0.05)
        with open(os.path.join(base, f"exit{j['rank']}"), "w"):
            pass
        return 0
    if amd:
        rccl_header(me, members, nranks, nnodes, ver)
    else:
        for m in members:
            for k, dev in enumerate(m["devices"]):
                out(f"#  Rank {m['first_rank'] + k:2d} Group {0:2d} Pid {m['pid']:6d} on {m['host']:>10s} device "
                    f"{dev:2d} [0000:{m['buses'][k].lower()}:00] {m['names'][k]}")
        debug_lines(me, nranks, nnodes)
        out(f"NCCL version {version}+cuda{node.get('cuda_version', '13.0')}")
        out("#")
        out(f"# {'':>10s}  {'':>12s}  {'':>8s}  {'':>6s}  {'':>6s}           out-of-place                       "
            "in-place          ")
        out(f"# {'size':>10s}  {'count':>12s}  {'type':>8s}  {'redop':>6s}  {'root':>6s}  {'time':>7s}  "
            f"{'algbw':>6s}  {'busbw':>6s}  {'#wrong':>6s}  {'time':>7s}  {'algbw':>6s}  {'busbw':>6s}  "
            f"{'#wrong':>6s} ")
        out(f"# {'(B)':>10s}  {'(elements)':>12s}  {'':>8s}  {'':>6s}  {'':>6s}  {'(us)':>7s}  {'(GB/s)':>6s}  "
            f"{'(GB/s)':>6s}  {'':>6s}  {'(us)':>7s}  {'(GB/s)':>6s}  {'(GB/s)':>6s}  {'':>6s} ")
    bws = [node_bandwidth(m, collective, multi) for m in members]
    plateau, lat = min(b[0] for b in bws), max(b[1] for b in bws)
    faults = {}
    for m in members:  # a fault on any participating node shows in the collective
        for kind, spec in (m["fabric"].get("nccl_faults") or {}).items():
            if spec.get("collective", collective) in (collective, prog):
                faults.setdefault(kind, spec)
    factor = factor_of(nranks) if nranks > 1 else 1.0
    root = int(opts["r"]) if collective in ("broadcast", "reduce") else -1
    nodes_key = ",".join(sorted({m["node"] for m in members}))
    total_bw = []
    cycles, errors = (run_cycles(opts), 0) if amd else (1, 0)
    for cycle in range(cycles):
        if cycles > 1:
            out(f"# Testing {cycle + 1} cycle.")
        for index, size in enumerate(size_list):
            count_el = size // wordsize // nranks if per_rank else size // wordsize
            shown = count_el * wordsize * (nranks if per_rank else 1)
            hang = faults.get("hang")
            if hang and shown >= parse_size(str(hang.get("size", 0))):
                while True:  # the collective never completes: blocks until the launcher kills it
                    time.sleep(3600)
            cells = []
            for inplace in (False, True):
                bw = plateau
                jag = faults.get("jagged")
                if jag and shown >= parse_size(str(jag.get("from_bytes", 0))) and index % 2 == 1:
                    bw *= float(jag.get("factor", 0.5))
                t = lat + (shown * factor) / (bw * 1e3) if shown else lat * 0.35
                t *= jitter(nodes_key, collective, shown, inplace, nranks, *([cycle] if cycle else []))
                algbw = shown / (t * 1e3)
                busbw = algbw * factor
                total_bw.append(busbw)
                wrong = 0
                spec = faults.get("wrong")
                if spec:
                    listed = [parse_size(str(s)) for s in spec.get("sizes") or []]
                    if (shown in listed) if listed else shown >= parse_size(str(spec.get("from_bytes", 0))):
                        wrong = int(spec.get("count", max(count_el // 7, 1)))
                unchecked = not check or (inplace and collective == "alltoall")
                if amd:
                    cells.append(rccl_layout.cell(t, algbw, busbw, None if unchecked else wrong))
                    errors += len(members) if wrong and not unchecked else 0  # each process counts its own
                elif unchecked:
                    cells.append(f"  {get_float_str(t, 7):>7s}  {get_float_str(algbw, 6):>6s}  "
                                 f"{get_float_str(busbw, 6):>6s}    N/A")
                else:
                    cells.append(f"  {get_float_str(t, 7):>7s}  {get_float_str(algbw, 6):>6s}  "
                                 f"{get_float_str(busbw, 6):>6s}  {fmt_g(wrong):>6s}")
            out(f"{shown:12d}  {count_el:12d}  {dtype:>8s}  {op:>6s}  {root:6d}" + "".join(cells))
    avg = sum(total_bw) / len(total_bw) if total_bw else 0.0
    status = 0
    if amd:
        lines, failed = rccl_layout.footer(prog, check, errors, avg)
        for line in lines:
            out(line)
        status = 1 if failed else 0  # rccl-tests exits EXIT_FAILURE
    else:
        out(f"# {'Out of bounds values':<20s} : 0 OK")
        out(f"# {'Avg bus bandwidth':<20s} : {fmt_g(avg)} ")
        out("#")
        out(f"# Collective test concluded: {prog}")
    if base:
        with open(os.path.join(base, "done"), "w"):
            pass
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not all(
                os.path.exists(os.path.join(base, f"exit{p}")) for p in range(1, j["nprocs"])):
            time.sleep(0.02)
        shutil.rmtree(base, ignore_errors=True)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
