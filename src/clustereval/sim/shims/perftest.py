"""perftest (``ib_write_bw``, ``ib_read_bw``, ``ib_write_lat``, ``ib_read_lat``) for a simulated node.

Server mode (no host operand) listens on the node's own address, TCP port 18515 (``-p``), and waits for
one client; client mode connects to the server's address. The two exchange their rail (device, rate,
fault factor, GPUDirect) over that real TCP connection, as perftest exchanges its QP data out of band,
then both print perftest's report: bandwidth = min(server rail, client rail) x ``fabric.rail_efficiency``
(``faults.rail_rate_factor`` applied), latency from ``fabric.ib_lat_us``. A missing server gives the
client's ``Couldn't connect to HOST:PORT``. Standard library only; never imports clustereval.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import sys

from simnode import read_json, sim_root

DASHES = "-" * 87
TITLES = {"ib_write_bw": "RDMA_Write BW Test", "ib_read_bw": "RDMA_Read BW Test",
          "ib_write_lat": "RDMA_Write Latency Test", "ib_read_lat": "RDMA_Read Latency Test"}
WITH_VALUE = {"-p", "--port", "-d", "--ib-dev", "-i", "--ib-port", "-s", "--size", "-n", "--iters",
              "-q", "--qp", "-x", "--gid-index", "-D", "--duration", "-m", "--mtu", "-t", "--tx-depth",
              "-Q", "--cq-mod", "-I", "--inline_size", "-u", "--qp-timeout", "-S", "--sl", "-o", "--outs",
              "-r", "--rx-depth", "--use_cuda", "--use_rocm", "--source_ip", "--tclass", "--flow_label", "--mmap",
              "--rate_limit", "-w", "--limit_bw", "-y", "--limit_msgrate", "-L", "--cpu_util", "-M", "--mcg"}
FLAGS = {"-a", "--all", "-F", "--CPU-freq", "-R", "--rdma_cm", "-b", "--bidirectional", "--report_gbits",
         "-z", "--comm_rdma_cm", "-c", "--connection", "-e", "--events", "-H", "--report-histogrm",
         "-U", "--report-unsorted", "--report-both", "--run_infinitely", "-l", "--post_list", "-O", "--dualport",
         "--odp", "--use_hugepages", "-V", "--version", "-h", "--help", "--perform_warm_up",
         "--dont_xchg_versions", "-N", "--noPeak"}


def node_address(node: str) -> str:
    provider = read_json(os.path.join(sim_root(), "provider.json"), {})
    gt = provider.get("ground_truth")
    if gt:
        boot = read_json(os.path.join(os.path.dirname(gt), "boot.json"), {})
        if boot.get("address"):
            return boot["address"]
    return "0.0.0.0"


def parse(argv: list[str], prog: str) -> dict:
    opts: dict = {"host": None}
    k = 0
    while k < len(argv):
        arg = argv[k]
        name, eq, inline = arg.partition("=")
        if name in WITH_VALUE:
            if name == "--use_cuda" and not eq and (k + 1 >= len(argv) or argv[k + 1].startswith("-")):
                opts[name] = "0"
            elif eq:
                opts[name] = inline
            else:
                k += 1
                if k >= len(argv):
                    return {"error": f"{prog}: option requires an argument -- '{arg.lstrip('-')}'"}
                opts[name] = argv[k]
        elif arg in FLAGS:
            opts[arg] = True
        elif arg.startswith("-") and len(arg) > 2 and not arg.startswith("--") and arg[:2] in WITH_VALUE:
            opts[arg[:2]] = arg[2:]
        elif arg.startswith("-"):
            return {"error": f"{prog}: unrecognized option '{arg}'"}
        else:
            opts["host"] = arg
        k += 1
    return opts


def opt(opts: dict, *names, default=None):
    for n in names:
        if n in opts:
            return opts[n]
    return default


def hexid(*parts, digits: int = 6) -> str:
    return hashlib.sha256("/".join(map(str, parts)).encode()).hexdigest()[:digits]


def usage(prog: str) -> str:
    return (f"Usage:\n  {prog}            start a server and wait for connection\n"
            f"  {prog} <host>     connect to server at <host>\n")


def main(argv: list[str]) -> int:
    prog = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "ib_write_bw"
    if prog not in TITLES:
        prog = "ib_write_bw"
    is_bw = prog.endswith("_bw")
    node = read_json(os.path.join(sim_root(), "node.json"), {})
    fab = node.get("fabric") or {}
    opts = parse(argv, prog)
    if "error" in opts:
        sys.stderr.write(opts["error"] + "\n")
        sys.stdout.write(usage(prog))
        return 1
    if "-h" in opts or "--help" in opts:
        sys.stdout.write(usage(prog))
        return 0
    if "-V" in opts or "--version" in opts:
        print("Version: 6.22")
        return 0
    # perftest is built for one accelerator: without CUDA (or without GPUDirect) it has no --use_cuda option at
    # all, and only a ROCm build (an AMD node) has --use_rocm
    amd = bool(node.get("amd"))
    for flag, built in (("--use_cuda", not amd), ("--use_rocm", amd)):
        if flag in opts and not (built and fab.get("gpudirect", True)):
            sys.stderr.write(f"{prog}: unrecognized option '{flag}={opts[flag]}'\n")
            sys.stdout.write(usage(prog))
            return 1
    rails = [r for r in fab.get("rails") or [] if r.get("up", True)]
    dev = opt(opts, "-d", "--ib-dev")
    if dev is None and not rails:
        print(" No IB devices found")
        return 1
    rail = next((r for r in fab.get("rails") or [] if r["name"] == dev), None) if dev else rails[0]
    if rail is None:
        print(f" IB device {dev} not found")
        print(" Unable to find the Infiniband/RoCE device")
        return 1
    port = int(opt(opts, "-p", "--port", default=18515))
    gbits = "--report_gbits" in opts
    qps = int(opt(opts, "-q", "--qp", default=1))
    gid = opt(opts, "-x", "--gid-index")
    cuda = opt(opts, "--use_cuda")
    rocm = opt(opts, "--use_rocm")
    mine = {"rail": rail["name"], "rate": rail["rate_gbps"] * rail.get("factor", 1.0) * (1.0 if rail.get("up", True)
                                                                                        else 0.0),
            "node": node.get("node"), "pid": os.getpid()}
    server = opts["host"] is None
    if server:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            listener.bind((node_address(node.get("node", "")), port))
        except OSError:
            print(" Couldn't bind to port")  # perftest: another server holds the port
            print(" Unable to open file descriptor for socket connection Unable to init the socket connection")
            return 1
        listener.listen(1)
        print("\n************************************\n* Waiting for client to connect... *\n"
              "************************************", flush=True)
        conn, _ = listener.accept()
        peer = json.loads(conn.makefile().readline() or "{}")
        conn.sendall((json.dumps(mine) + "\n").encode())
    else:
        try:
            conn = socket.create_connection((opts["host"], port), timeout=5)
        except OSError:
            print(f"Couldn't connect to {opts['host']}:{port}")
            print("Unable to open file descriptor for socket connection Unable to init the socket connection")
            return 1
        conn.sendall((json.dumps(mine) + "\n").encode())
        peer = json.loads(conn.makefile().readline() or "{}")
    conn.close()
    if rocm is not None:  # perftest's rocm_memory.c (init_rocm, rocm_memory_allocate_buffer)
        devices = (node.get("amd") or {}).get("gpus") or []
        idx = int(rocm)
        if idx >= len(devices):
            print(f"Requested ROCm device {idx} but found only {len(devices)} device(s)")
            sys.stderr.write("Couldn't initialize ROCm device\n")
            return 1
        device = devices[idx]
        print(f"Using ROCm Device with ID: {idx}, Name: {device['market_name']}, PCI Bus ID: "
              f"0x{int(device['bdf'][5:7], 16):x}, GCN Arch: {device['gfx_version']}:sramecc+:xnack-")
        print(f"allocated 131072 bytes of GPU buffer at 0x7f{hexid(os.getpid(), digits=10)}")
    if cuda is not None:
        gpus = node.get("gpus") or []
        idx = int(cuda)
        print("initializing CUDA")
        print("Listing all CUDA devices in system:")
        for g in gpus:
            print(f"CUDA device {g['index']}: PCIe address is {g['pci_bus']}:00")
        print(f"\nPicking device No. {idx}")
        if idx < len(gpus):
            print(f"[pid = {os.getpid()}, dev = {idx}] device name = [{gpus[idx]['name']}]")
        print("creating CUDA Ctx\nmaking it the current CUDA Ctx")
        print(f"cuMemAlloc() of a 131072 bytes GPU buffer\nallocated GPU buffer address at "
              f"0000{hexid(os.getpid(), 'gpu', digits=8)}00000 pointer=0x7f{hexid(os.getpid(), digits=10)}")
    link = "Ethernet" if rail.get("link_layer") == "Ethernet" else "IB"
    print(DASHES)
    print(f"                    {TITLES[prog]}")
    print(f"Dual-port       : OFF          Device         : {rail['name']}")
    print(f"Number of qps   : {qps:<13d}Transport type : IB")
    print("Connection type : RC           Using SRQ      : OFF")
    print("PCIe relax order: ON")
    print("ibv_wr* API     : ON")
    print(f"TX depth        : {128 if is_bw else 1}")
    if is_bw:
        print("CQ Moderation   : 100")
    if "read" in prog:
        print("Outstand reads  : 16")
    print(f"Mtu             : 4096[B]\nLink type       : {link}")
    if gid is not None:
        print(f"GID index       : {gid}")
    print(f"Max inline data : {0 if is_bw or 'read' in prog else 220}[B]")
    print("rdma_cm QPs     : OFF\nData ex. method : Ethernet")
    print(DASHES)
    for q in range(qps):
        for side, who in (("local", mine), ("remote", peer)):
            print(f"{side} address: LID 0x{hexid(who.get('node'), who.get('rail'), digits=2)} "
                  f"QPN 0x{hexid(who.get('pid'), q, digits=4)} PSN 0x{hexid(who.get('pid'), q, 'psn')} "
                  f"RKey 0x{hexid(who.get('pid'), 'rkey')} VAddr 0x007f{hexid(who.get('pid'), 'va', digits=8)}000"
                  if is_bw else
                  f"{side} address: LID 0x{hexid(who.get('node'), who.get('rail'), digits=2)} "
                  f"QPN 0x{hexid(who.get('pid'), q, digits=4)} PSN 0x{hexid(who.get('pid'), q, 'psn')}")
    print(DASHES)
    line = min(mine["rate"], float(peer.get("rate", mine["rate"]))) * float(fab.get("rail_efficiency", 0.96))
    if "-a" in opts or "--all" in opts:
        sizes = [2 ** k for k in range(1, 24)]
    else:
        sizes = [int(opt(opts, "-s", "--size", default=65536 if is_bw else 2))]
    if is_bw:
        iters = int(opt(opts, "-n", "--iters", default=5000))
        unit = "Gb/sec" if gbits else "MB/sec"
        print(f"#bytes     #iterations    BW peak[{unit}]    BW average[{unit}]   MsgRate[Mpps]")
        for size in sizes:
            rate_mpps = 7.0 * min(qps, 4) if "read" not in prog else 5.0 * min(qps, 4)
            gbps = min(line, size * 8 * rate_mpps / 1e3) if line else 0.0
            peak = gbps * (1.0 + 0.0008 * (size < 8192))
            shown = (lambda g: g) if gbits else (lambda g: g * 1e9 / 8 / 0x100000)
            print(f"{size:<7d}    {iters:<10d}       {shown(peak):<7.2f}            {shown(gbps):<7.2f}"
                  f"            {gbps * 1e3 / 8 / size:<7.6f}")
    else:
        iters = int(opt(opts, "-n", "--iters", default=1000))
        base = float(fab.get("ib_lat_us", 1.9)) + (0.9 if "read" in prog else 0.0)
        print(" #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]"
              "   99% percentile[usec]   99.9% percentile[usec]")
        for size in sizes:
            typ = base + (size * 8 / (line * 1e3) if line else 0.0)
            print(f" {size:<7d} {iters:<10d}    {typ * 0.97:<7.2f}        {typ * 1.31:<7.2f}      {typ:<7.2f}"
                  f"            {typ * 1.002:<7.2f}          {0.02:<7.2f}         {typ * 1.07:<7.2f}"
                  f"                 {typ * 1.31:<7.2f}")
    print(DASHES)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
