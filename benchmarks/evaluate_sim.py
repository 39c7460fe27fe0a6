"""Time the audit phase against 1, 4 and 16 simulated nodes: wall clock of ansible-playbook, and the
controller's CPU time (ansible-playbook, its forks and their ssh clients: the children's rusage; the
simulated nodes' own work runs under their sshd and is not counted).

Usage: python benchmarks/evaluate_sim.py [--nodes 1,4,16] [--repeat 3]
Needs root and the Debian packages `make install` sets up. Prints one line per size, the ratio of the
largest to the smallest (issue B bounds it at 2x for 16 nodes vs 1), and the controller's marginal CPU
seconds per host between the smallest and largest size (issue G: at most 0.3 CPU-s per host).

Measured (2-core VM, reference profile, median of 3, ansible-core 2.19): 1 node 2.93 CPU-s, 16 nodes 19.21 CPU-s,
1.09 CPU-s per additional node before issue G's changes; after them (the audit validated inside its play, the run
role imported statically, siblings' facts read untemplated, and a gc.freeze before each task that was then
withdrawn) 3.22 and 15.43 CPU-s: 0.81 per additional node; without the freeze expect about 0.9 (not re-measured).
Of that, the judge itself is 0.27 (collect-and-judge 0.22, the comparison with the siblings 0.05: a third
parsing, a quarter writing the raw artifacts); the rest is Ansible's task machinery, about 0.036 CPU-s per node
and task for a bare debug task here (fork, variables), more for tasks whose arguments are templated per node.
The ssh clients add 0.11 per node (3 connections).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from clustereval.sim import cluster, stop_on_sigterm

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def audit_once(inventory: Path, out: Path) -> tuple[float, float]:
    """(wall seconds, controller CPU seconds) of one audit."""
    cpu_before = _children_cpu_s()
    env = {**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "PATH": f"{BIN}:{os.environ['PATH']}"}
    start = time.monotonic()
    proc = subprocess.run([str(BIN / "ansible-playbook"), str(REPO / "playbooks/evaluate.yml"), "-i", str(inventory),
                           "-e", "clustereval_phases=audit", "-e", f"clustereval_out={out}"],
                          capture_output=True, text=True, env=env, cwd=REPO)
    elapsed = time.monotonic() - start
    if proc.returncode != 0:
        raise SystemExit(f"audit failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-2000:]}")
    return elapsed, _children_cpu_s() - cpu_before


def main() -> int:
    stop_on_sigterm()  # a `timeout` or a cancelled job still brings the clusters down
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nodes", default="1,4,16")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    sizes = [int(n) for n in args.nodes.split(",")]
    medians: dict[int, float] = {}
    cpu: dict[int, float] = {}
    with tempfile.TemporaryDirectory(prefix="clustereval-bench-") as tmp:
        for size in sizes:
            sim = Path(tmp) / f"sim{size}"
            cluster.up(sim, size, "reference")
            try:
                audit_once(sim / "inventory.ini", Path(tmp) / f"warmup{size}")
                runs = [audit_once(sim / "inventory.ini", Path(tmp) / f"run{size}-{i}") for i in range(args.repeat)]
            finally:
                cluster.down(sim)
            times = [wall for wall, _ in runs]
            medians[size] = statistics.median(times)
            cpu[size] = statistics.median(c for _, c in runs)
            print(f"audit, {size:3d} node(s): median {medians[size]:.2f} s, controller CPU {cpu[size]:.2f} s "
                  f"({cpu[size] / size:.2f} CPU-s per host)  (runs: {', '.join(f'{t:.2f}' for t in times)})",
                  flush=True)
    if len(sizes) > 1:
        low, high = min(sizes), max(sizes)
        print(f"ratio {high} nodes / {low} node(s): {medians[high] / medians[low]:.2f}x")
        print(f"controller CPU per additional host ({low} -> {high} nodes): "
              f"{(cpu[high] - cpu[low]) / (high - low):.3f} CPU-s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
