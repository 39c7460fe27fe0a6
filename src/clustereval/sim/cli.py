"""``clustereval sim up|down|status``: the simulated cluster from the command line.

The coordinator's CLI calls :func:`add_subparser`; ``python -m clustereval.sim.cli up --nodes 2 --dir D``
works on its own too.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from clustereval.sim import cluster
from clustereval.sim.profile import ProfileError, available_profiles


def _print_status(info: dict[str, Any]) -> None:
    ctl = info.get("controller", {})
    print(f"simulated cluster in {info['directory']}: "
          f"{'running' if info.get('running') else 'not running'} (profile {info.get('profile')})")
    if ctl.get("alive"):
        where = f" (inside {ctl['on_node']})" if ctl.get("on_node") else ""
        print(f"  slurmctld on {ctl.get('address') or '127.0.0.1'}:{ctl.get('port')}{where}, "
              f"SLURM_CONF={info.get('slurm_conf')}")
    for name, node in info.get("nodes", {}).items():
        sshd = "up" if node["sshd_alive"] else "down"
        slurmd = "up" if node["slurmd_alive"] else "down"
        reason = f" ({node['slurm_reason']})" if node.get("slurm_reason") not in (None, "", "none") else ""
        shared = f"  shared fs at {node['shared_fs']}" if node.get("shared_fs") else ""
        print(f"  {name:<8} {node['address']:<16} sshd {sshd:<5} slurmd {slurmd:<5} "
              f"slurm {node['slurm_state']}{reason}{shared}")
    shared_fs = info.get("shared_fs") or {}
    if shared_fs.get("error"):
        print(f"  no shared filesystem: {shared_fs['error']}")
    elif shared_fs:
        kind = shared_fs.get("type", "sshfs")
        server = "glusterd" if kind == "glusterfs" else "sshd"
        print(f"  storage  {shared_fs['server']:<16} {server} {'up' if shared_fs.get('server_alive') else 'down':<5} "
              f"exports {shared_fs['export']} ({kind})")
        if shared_fs.get("note"):
            print(f"  storage  {shared_fs['note']}")
    kubectl = info.get("kubectl")
    if kubectl:  # what a process on the host needs to run the cluster's kubectl
        print(f"  kubectl  PATH={kubectl['path_prepend']}:$PATH "
              f"CLUSTEREVAL_SIM_K8S_API={kubectl['CLUSTEREVAL_SIM_K8S_API']}")


def cmd_up(args: argparse.Namespace) -> int:
    try:
        info = cluster.up(args.dir, args.nodes, args.profile)
    except (cluster.SimError, ProfileError) as exc:
        print(f"sim up failed: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(info, indent=2))
    else:
        _print_status(info)
    print(f"inventory: {info['inventory']}")
    return 0


def cmd_down(args: argparse.Namespace) -> int:
    result = cluster.down(args.dir)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"stopped {len(result['stopped'])} processes of the simulated cluster in {result['directory']}")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    info = cluster.status(args.dir)
    if args.json:
        print(json.dumps(info, indent=2))
    else:
        _print_status(info)
    return 0 if info.get("running") else 3


def _add_commands(sim_sub: Any) -> None:
    up = sim_sub.add_parser("up", help="start a simulated cluster (stops one already recorded in --dir)")
    up.add_argument("--nodes", type=int, default=4, help="number of nodes (default 4)")
    up.add_argument("--profile", default="reference",
                    help=f"packaged profile ({', '.join(available_profiles())}) or path to a YAML file")
    up.add_argument("--dir", required=True, help="directory for the cluster's state, logs and inventory.ini")
    up.add_argument("--json", action="store_true", help="print the status as JSON")
    up.set_defaults(func=cmd_up)
    down = sim_sub.add_parser("down", help="stop everything the simulated cluster in --dir started")
    down.add_argument("--dir", required=True)
    down.add_argument("--json", action="store_true")
    down.set_defaults(func=cmd_down)
    status = sim_sub.add_parser("status", help="show nodes, daemons and Slurm states")
    status.add_argument("--dir", required=True)
    status.add_argument("--json", action="store_true")
    status.set_defaults(func=cmd_status)


def add_subparser(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``sim`` with ``up``/``down``/``status`` to the main CLI; each sets ``func(args) -> exit code``."""
    sim = subparsers.add_parser("sim", help="simulated GPU cluster for tests and demos")
    _add_commands(sim.add_subparsers(dest="sim_command", required=True))
    return sim


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m clustereval.sim.cli", description=__doc__)
    _add_commands(parser.add_subparsers(dest="sim_command", required=True))
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
