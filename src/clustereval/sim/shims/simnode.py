"""What the shims share: where the node's private /sim is, reading its JSON files without failing on a missing
or torn one, reading a sysfs attribute, an AMD node's state, UTF-8 output, and the node's load as the GPU
loops of nvidia-smi and amd-smi read it (the simulated GPUs cannot run the node's work, so a loop reads "load"
from the CPU time the node's processes consume between samples: the node's cgroup v2 cpu.stat, else /proc/stat).
Imported by name: the launcher puts the shim directory first on sys.path."""

from __future__ import annotations

import json
import math
import os
import sys
import time

# Load: CPU cores' worth of the node's processes (less the loop's own) under which the node is idle (its
# daemons, an ssh session) and at which it counts as fully loaded (one busy core: the burn-in's CPU GEMM).
LOAD_IDLE_CORES = 0.2
LOAD_FULL_CORES = 1.0
LOAD_WINDOW_S = 1.0
HEAT_TAU_S = 20.0  # how fast a loaded GPU warms to its steady temperature


def sim_root() -> str:
    return os.environ.get("SIMNODE_ROOT") or "/sim"


def read_json(path: str, default):
    try:
        with open(path) as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return default


def node_view() -> dict:
    """``/sim/system.json``: the node's own machine (sim/overlays/system.py), ``{}`` when it has none."""
    return read_json(os.path.join(sim_root(), "system.json"), {})


def read_attr(path: str, default: str = "") -> str:
    """A sysfs attribute's value (stripped), ``default`` when it cannot be read."""
    try:
        with open(path) as fh:
            return fh.read().strip()
    except OSError:
        return default


def amd_state() -> dict | None:
    """``/sim/node.json``'s ``amd`` section (sim/amd.py): None on a node without AMD GPUs."""
    return read_json(os.path.join(sim_root(), "node.json"), {}).get("amd")


def write_utf8(text: str) -> None:
    """Write to stdout as UTF-8 whatever the locale (the AMD tools print the degree sign in C and POSIX too)."""
    sys.stdout.buffer.write(text.encode("utf-8"))


def node_cgroup(node_name):
    """``(cpu.stat path)`` of the node's own cgroup v2 when this process is in it (the sim puts each node's
    processes in ``.../clustereval-<cluster>/<node>``), else None."""
    try:
        with open("/proc/self/cgroup") as fh:
            paths = [line.rstrip("\n")[3:] for line in fh if line.startswith("0::")]
        with open("/proc/self/mountinfo") as fh:
            mounts = [line.split() for line in fh if " - cgroup2 " in line]
    except OSError:
        return None
    if not paths or not mounts or os.path.basename(paths[0]) != node_name:
        return None
    path = mounts[0][4] + paths[0] + "/cpu.stat"
    return path if os.path.exists(path) else None


class CpuMeter:
    """Cores' worth of CPU the node's processes used over the last LOAD_WINDOW_S (real seconds; since the
    loop started, before that), this process excluded: a window over several short samples, so that one
    interval in which a busy process got no CPU (a crowded machine) does not read as idle."""

    def __init__(self, node_name):
        self.cgroup = os.environ.get("SIMNODE_CPU_STAT") or node_cgroup(node_name)
        self.ticks = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
        self.readings = [self.read()]

    def used_s(self):
        """CPU seconds used so far: by the node's cgroup, else by the whole machine (/proc/stat)."""
        try:
            if self.cgroup:
                with open(self.cgroup) as fh:
                    usage = dict(line.split() for line in fh if line.strip())
                return int(usage["usage_usec"]) / 1e6
            with open("/proc/stat") as fh:
                cpu = [int(v) for v in fh.readline().split()[1:]]
            # user nice system idle iowait irq softirq steal: all but idle and iowait is busy time
            return (sum(cpu[:8]) - cpu[3] - cpu[4]) / self.ticks
        except (OSError, ValueError, KeyError, IndexError):
            return None

    def read(self):
        own = os.times()
        return time.monotonic(), self.used_s(), own.user + own.system

    def cores(self):
        now = self.read()
        self.readings.append(now)
        while len(self.readings) > 2 and self.readings[1][0] <= now[0] - LOAD_WINDOW_S:
            self.readings.pop(0)
        then = self.readings[0]
        if then[1] is None or now[1] is None or now[0] <= then[0]:
            return 0.0
        return max(0.0, (now[1] - then[1]) - (now[2] - then[2])) / (now[0] - then[0])


def load_of(cores):
    """0 (idle) to 1 (fully loaded) from the cores' worth of CPU the node used."""
    return 0.0 if cores < LOAD_IDLE_CORES else min(1.0, cores / LOAD_FULL_CORES)


def heat_step(heat, load, dt):
    """The GPU's warmth (0 idle to 1 steady under full load) after ``dt`` seconds at ``load``."""
    return heat + (load - heat) * (1 - math.exp(-max(0.0, dt) / HEAT_TAU_S))
