"""What each audit probe costs on one node: CPU seconds, processes started and wall time.

Usage: python benchmarks/probe_cost.py --dir SIM_DIR [--node node1] [--phase audit]
  SIM_DIR is a running simulated cluster (`clustereval sim up --dir SIM_DIR`); any inventory host works
  the same way (--inventory, --node). The probes run one after the other over one SSH session, with the
  environment the audit role gives them, so the figures do not mix; the process count is the kernel's
  fork counter, so other activity on the machine adds noise.
Prints one line per probe, most expensive first, and the totals.
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
from pathlib import Path

from clustereval.checks import probe_catalogue

REMOTE = r"""
import json, os, resource, subprocess, sys, time
def forks():
    with open("/proc/stat") as fh:
        return int(next(l for l in fh if l.startswith("processes")).split()[1])
for probe in json.load(sys.stdin):
    before, f0, t0 = resource.getrusage(resource.RUSAGE_CHILDREN), forks(), time.monotonic()
    try:
        rc = subprocess.run(["/bin/sh", "-c", probe["cmd"]], capture_output=True,
                            timeout=probe.get("timeout", 60)).returncode
    except subprocess.TimeoutExpired:
        rc = "timeout"
    after, f1, t1 = resource.getrusage(resource.RUSAGE_CHILDREN), forks(), time.monotonic()
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    print(json.dumps([probe["name"], round(cpu, 3), f1 - f0, round(t1 - t0, 3), rc]), flush=True)
"""


def inventory_hosts(path: Path) -> tuple[dict[str, str], dict[str, str]]:
    """``({name: address}, group vars)`` of a simulated cluster's inventory.ini."""
    hosts, group_vars, in_vars = {}, {}, False
    for line in path.read_text().splitlines():
        line = line.strip()
        if line.startswith("["):
            in_vars = line.endswith(":vars]")
        elif line and not line.startswith("#"):
            if in_vars:
                key, _, value = line.partition("=")
                group_vars[key] = value.strip("'")
            else:
                name, *pairs = shlex.split(line)
                hosts[name] = dict(p.split("=", 1) for p in pairs).get("ansible_host", name)
    return hosts, group_vars


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dir", required=True, help="simulated cluster directory (holds inventory.ini)")
    parser.add_argument("--node", default=None, help="inventory host to measure (default: the first)")
    parser.add_argument("--phase", default="audit")
    args = parser.parse_args()
    hosts, group_vars = inventory_hosts(Path(args.dir) / "inventory.ini")
    names = list(hosts)
    node = args.node or names[0]
    peer = hosts[names[(names.index(node) + 1) % len(names)]]
    env = f"CLUSTEREVAL_SLURM_NODE={node} CLUSTEREVAL_PEER_HOST={peer} CLUSTEREVAL_ALLOW_ACTIONS=1"
    ssh = ["ssh", "-i", group_vars["ansible_ssh_private_key_file"], *shlex.split(group_vars.get(
        "ansible_ssh_common_args", "")), f"{group_vars.get('ansible_user', 'root')}@{hosts[node]}",
        f"{env} /usr/bin/python3 -c {shlex.quote(REMOTE)}"]
    probes = probe_catalogue.for_phase(args.phase)
    proc = subprocess.run(ssh, input=json.dumps(probes), capture_output=True, text=True)
    if proc.returncode != 0:
        print(proc.stderr[-2000:], file=sys.stderr)
        return 1
    rows = sorted((json.loads(line) for line in proc.stdout.splitlines()), key=lambda r: -r[1])
    for name, cpu, forks, wall, rc in rows:
        print(f"{name:28s} cpu {cpu:6.3f} s  processes {forks:4d}  wall {wall:6.3f} s  rc {rc}")
    print(f"{'total':28s} cpu {sum(r[1] for r in rows):6.3f} s  processes {sum(r[2] for r in rows):4d}  "
          f"wall {sum(r[3] for r in rows):6.3f} s  ({len(rows)} probes on {node})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
