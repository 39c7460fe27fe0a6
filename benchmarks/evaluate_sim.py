"""Time the audit phase against 1, 4 and 16 simulated nodes (wall clock of ansible-playbook).

Usage: python benchmarks/evaluate_sim.py [--nodes 1,4,16] [--repeat 3]
Needs root and the Debian packages `make install` sets up. Prints one line per size and the ratio
of the largest to the smallest, which issue B bounds at 2x for 16 nodes vs 1.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from clustereval.sim import cluster, stop_on_sigterm

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def audit_once(inventory: Path, out: Path) -> float:
    env = {**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "PATH": f"{BIN}:{os.environ['PATH']}"}
    start = time.monotonic()
    proc = subprocess.run([str(BIN / "ansible-playbook"), str(REPO / "playbooks/evaluate.yml"), "-i", str(inventory),
                           "-e", "clustereval_phases=audit", "-e", f"clustereval_out={out}"],
                          capture_output=True, text=True, env=env, cwd=REPO)
    elapsed = time.monotonic() - start
    if proc.returncode != 0:
        raise SystemExit(f"audit failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-2000:]}")
    return elapsed


def main() -> int:
    stop_on_sigterm()  # a `timeout` or a cancelled job still brings the clusters down
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nodes", default="1,4,16")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    sizes = [int(n) for n in args.nodes.split(",")]
    medians: dict[int, float] = {}
    with tempfile.TemporaryDirectory(prefix="clustereval-bench-") as tmp:
        for size in sizes:
            sim = Path(tmp) / f"sim{size}"
            cluster.up(sim, size, "reference")
            try:
                audit_once(sim / "inventory.ini", Path(tmp) / f"warmup{size}")
                times = [audit_once(sim / "inventory.ini", Path(tmp) / f"run{size}-{i}") for i in range(args.repeat)]
            finally:
                cluster.down(sim)
            medians[size] = statistics.median(times)
            print(f"audit, {size:3d} node(s): median {medians[size]:.2f} s  "
                  f"(runs: {', '.join(f'{t:.2f}' for t in times)})", flush=True)
    if len(sizes) > 1:
        low, high = min(sizes), max(sizes)
        print(f"ratio {high} nodes / {low} node(s): {medians[high] / medians[low]:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
