"""nvbandwidth (v0.8 layout) for a simulated node: ``-l`` lists the tests, ``-t NAME`` (repeatable) runs
some, no ``-t`` runs them all. Figures from the node's ``fabric`` in ``/sim/node.json``: host<->device from
``pcie_h2d_gbps`` (by default the GPU's PCIe generation and width: ~55 GB/s on Gen5 x16), device<->device
from ``nvlink_p2p_gbps`` x ``nvlink_factor``, ``device_local_copy`` from ``hbm_copy_gbps``; the
``straggler_gpu`` fault lowers that GPU's figures. Standard library only; never imports clustereval.
"""

from __future__ import annotations

import hashlib
import os
import sys

from simnode import read_json

# name: (kind, title)
TESTS = {
    "host_to_device_memcpy_ce": ("h2d", "memcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)"),
    "device_to_host_memcpy_ce": ("d2h", "memcpy CE CPU(row) <- GPU(column) bandwidth (GB/s)"),
    "host_to_device_bidirectional_memcpy_ce": ("h2d_bi", "memcpy CE CPU(row) <-> GPU(column) bandwidth (GB/s)"),
    "device_to_host_bidirectional_memcpy_ce": ("d2h_bi", "memcpy CE CPU(row) <-> GPU(column) bandwidth (GB/s)"),
    "device_to_device_memcpy_read_ce": ("d2d", "memcpy CE GPU(row) -> GPU(column) bandwidth (GB/s)"),
    "device_to_device_memcpy_write_ce": ("d2d", "memcpy CE GPU(row) <- GPU(column) bandwidth (GB/s)"),
    "device_to_device_bidirectional_memcpy_read_ce": ("d2d_bi", "memcpy CE GPU(row) <-> GPU(column) bandwidth (GB/s)"),
    "device_to_device_bidirectional_memcpy_write_ce": ("d2d_bi",
                                                       "memcpy CE GPU(row) <-> GPU(column) bandwidth (GB/s)"),
    "host_to_device_memcpy_sm": ("h2d", "memcpy SM CPU(row) -> GPU(column) bandwidth (GB/s)"),
    "device_to_host_memcpy_sm": ("d2h", "memcpy SM CPU(row) <- GPU(column) bandwidth (GB/s)"),
    "device_to_device_memcpy_read_sm": ("d2d", "memcpy SM GPU(row) -> GPU(column) bandwidth (GB/s)"),
    "device_to_device_memcpy_write_sm": ("d2d", "memcpy SM GPU(row) <- GPU(column) bandwidth (GB/s)"),
    "device_local_copy": ("local", "memcpy local GPU(column) bandwidth (GB/s)"),
}


def jitter(*parts) -> float:
    h = int(hashlib.sha256("/".join(map(str, parts)).encode()).hexdigest()[:8], 16)
    return 1.0 + ((h % 1001) - 500) / 500 * 0.002


def figure(kind: str, fab: dict, gpu: int, peer: int | None, node: str) -> float:
    h2d = float(fab.get("pcie_h2d_gbps") or 55.5)
    straggler = fab.get("straggler_gpu") or {}
    slow = float(straggler.get("factor", 1.0)) if straggler.get("gpu") in (gpu, peer) else 1.0
    nvl = float(fab.get("nvlink_p2p_gbps", 370)) * float(fab.get("nvlink_factor", 1.0))
    value = {"h2d": h2d, "d2h": h2d * 1.03, "h2d_bi": h2d * 0.93, "d2h_bi": h2d * 0.88, "d2d": nvl,
             "d2d_bi": nvl * 1.95, "local": float(fab.get("hbm_copy_gbps", 1550))}[kind]
    return value * slow * jitter(node, kind, gpu, peer)


def main(argv: list[str]) -> int:
    root = os.environ.get("SIMNODE_ROOT") or "/sim"
    node = read_json(os.path.join(root, "node.json"), {})
    fab = node.get("fabric") or {}
    gpus = node.get("gpus") or []
    wanted: list[str] = []
    k = 0
    while k < len(argv):
        arg = argv[k]
        if arg in ("-l", "--list"):
            for name in TESTS:
                print(name + ":")
                print(f"\t{TESTS[name][1].replace(' bandwidth (GB/s)', '')}\n")
            return 0
        if arg in ("-h", "--help"):
            print("nvbandwidth CLI:\n  -h [ --help ]          Produce help message\n  -l [ --list ]          "
                  "List available testcases\n  -t [ --testcase ] arg  Testcase(s) to run (by name or index)\n"
                  "  -v [ --verbose ]       Verbose output")
            return 0
        if arg in ("-t", "--testcase"):
            k += 1
            while k < len(argv) and not argv[k].startswith("-"):
                wanted.append(argv[k])
                k += 1
            continue
        if arg.startswith("--testcase="):
            wanted.append(arg.split("=", 1)[1])
        k += 1
    names = list(TESTS)
    chosen = []
    for w in wanted:
        if w.isdigit() and int(w) < len(names):
            chosen.append(names[int(w)])
        elif w in TESTS:
            chosen.append(w)
        else:
            print(f"ERROR: Testcase {w} not found!")
            return 1
    chosen = chosen or names
    cuda = str(node.get("cuda_version", "13.0"))
    major, minor = [*cuda.split("."), "0"][:2]
    code = int(major) * 1000 + int(minor) * 10
    print("nvbandwidth Version: v0.8\nBuilt from Git version: v0.8\n")
    print(f"CUDA Runtime Version: {code}\nCUDA Driver Version: {code}\nDriver Version: {node.get('driver_version')}\n")
    for g in gpus:
        print(f"Device {g['index']}: {g['name']} ({g['pci_bus_id'][4:].lower()[:-2]})")
    print()
    n = len(gpus)
    name = node.get("node", "")
    for test in chosen:
        kind, title = TESTS[test]
        print(f"Running {test}.")
        if kind.startswith("d2d") and n < 2:
            print(f"Waived: {test} needs at least two GPUs.\n")
            continue
        print(title)
        print("  " + "".join(f"{c:>10d}" for c in range(n)))
        total = 0.0
        if kind.startswith("d2d"):
            for r in range(n):
                cells = []
                for c in range(n):
                    if r == c:
                        cells.append(f"{'N/A':>10s}")
                    else:
                        v = figure(kind, fab, r, c, name)
                        total += v
                        cells.append(f"{v:10.2f}")
                print(f"{r:>2d}" + "".join(cells))
        else:
            values = [figure(kind, fab, g, None, name) for g in range(n)]
            total = sum(values)
            print(f"{0:>2d}" + "".join(f"{v:10.2f}" for v in values))
        print(f"\nSUM {test} {total:.2f}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
