"""What the network role runs for collectives and RDMA, planned as data (pure functions; the role's filters).

* :func:`nccl_runs` — the nccl-tests runs: every collective over node sets doubling from one node to the
  whole allocation, one run at the whole allocation with NVLink and shared memory disabled (so intra-node
  traffic crosses the NICs and the scale-out fabric is isolated), and one through each extra launcher.
* :func:`nccl_instances` — those runs as instances of the catalogue probe ``nccl`` (the contract of
  ``checks/collectives.py``: ``nccl@<collective>.<label>`` with the run's params).
* :func:`pair_steps` — 2-node runs of one collective for the pairs :mod:`clustereval.checks.isolation`
  plans, each launched from the pair's first node, in steps where no node is in two runs.
* :func:`second_round` — after the first round, the pairs that resolve the failing ones (judged in process
  from what the nodes kept, exactly as ``network.nccl.isolation`` judges them).
* :func:`torchdist_instances` — our torch.distributed benchmark, one run per collective over every node.
* :func:`rail_steps` and :func:`perftest_instances` — perftest per rail: every node a client to its
  neighbour on a ring, in steps where each node is in one pair; one instance per memory kind, rail and tool,
  each on its own port so a server that died cannot be mistaken for the next one.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

NVLINK_OFF = "NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_NVLS_ENABLE=0"
_SAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def world_sizes(count: int) -> list[int]:
    """1, 2, 4, ... and ``count`` itself: the node counts a scaling sweep runs."""
    sizes, size = [], 1
    while size < count:
        sizes.append(size)
        size *= 2
    return [*sizes, count] if count >= 1 else []


def nccl_runs(hosts: Sequence[str], collectives: Sequence[str], scaling: bool = True, nvlink_off: bool = True,
              launchers: Sequence[str] = ("mpirun",), nvlink_off_collectives: Sequence[str] = ("all_reduce",),
              ) -> list[dict[str, Any]]:
    """The runs, in the order they run (all launched from ``hosts[0]``, one at a time)."""
    hosts = list(dict.fromkeys(hosts))
    if not hosts or not launchers:
        return []
    first, counts = launchers[0], (world_sizes(len(hosts)) if scaling else [len(hosts)])
    runs = [{"collective": c, "nodes": hosts[:n], "label": f"n{n}", "env": "", "nvlink": True, "launcher": first}
            for n in counts for c in collectives]
    if nvlink_off:
        runs += [{"collective": c, "nodes": hosts, "label": f"n{len(hosts)}-nonvlink", "env": NVLINK_OFF,
                  "nvlink": False, "launcher": first} for c in nvlink_off_collectives if c in collectives]
    for launcher in launchers[1:]:
        runs += [{"collective": c, "nodes": hosts, "label": f"n{len(hosts)}-{launcher}", "env": "", "nvlink": True,
                  "launcher": launcher} for c in collectives[:1]]
    return runs


def _named(probe: dict[str, Any], instance: str, params: dict[str, Any], artifact: str) -> dict[str, Any]:
    """The catalogue ``probe`` as its instance ``<probe>@<instance>``: its own params and artifact file."""
    return {**probe, "name": f"{probe['name']}@{instance}", "probe": probe["name"], "params": params,
            "artifact": artifact}


def _mpi_hosts(nodes: Sequence[str], addresses: dict[str, str]) -> str:
    """mpirun's ``-H`` list: one slot (one process) per node, at the address its peers reach it."""
    return ",".join(f"{addresses.get(h) or h}:1" for h in nodes)


def _instance(probe: dict[str, Any], run: dict[str, Any], addresses: dict[str, str], slurm_names: dict[str, str],
              settings: dict[str, Any]) -> dict[str, Any]:
    env = " ".join(filter(None, [run.get("env", ""), str(settings.get("env") or "")]))
    nodes = list(run["nodes"])
    gpus = int(settings.get("gpus_per_node") or 0)
    params = {
        **{k: settings[k] for k in ("bin_dir", "min_bytes", "max_bytes", "step_factor", "iters", "warmup", "check",
                                    "launcher_args") if k in settings},
        "collective": run["collective"], "gpus_per_node": gpus, "env": env, "launcher": run["launcher"],
        "procs": len(nodes), "mpi_hosts": _mpi_hosts(nodes, addresses),
        "slurm_nodes": ",".join(slurm_names.get(h) or h for h in nodes),
        # what the checks read (not used by the command)
        "nodes": nodes, "world_size": gpus * len(nodes), "nvlink": bool(run.get("nvlink", True)),
    }
    label = _SAFE.sub("_", str(run["label"]))
    stem, dot, ext = str(probe.get("artifact") or "nccl.txt").rpartition(".")
    suffix = f"{run['collective']}-{label}"
    instance = _named(probe, f"{run['collective']}.{label}", params,
                      f"{stem}-{suffix}.{ext}" if dot else f"{ext}-{suffix}")
    if settings.get("timeout_s"):
        instance["timeout"] = float(settings["timeout_s"])
    return instance


def nccl_instances(probe: dict[str, Any], runs: list[dict[str, Any]], addresses: dict[str, str],
                   slurm_names: dict[str, str], settings: dict[str, Any]) -> list[dict[str, Any]]:
    return [_instance(probe, run, addresses, slurm_names, settings) for run in runs]


def pair_steps(probe: dict[str, Any], pairs: Sequence[Sequence[str]], collective: str, round_no: int,
               addresses: dict[str, str], slurm_names: dict[str, str],
               settings: dict[str, Any]) -> list[dict[str, list[dict[str, Any]]]]:
    """2-node runs of ``collective`` over ``pairs`` in steps of disjoint pairs (no node in two runs at once),
    each step ``{launching host: [instance]}``."""
    steps: list[tuple[set[str], dict[str, list[dict[str, Any]]]]] = []
    for a, b in pairs:
        run = {"collective": collective, "nodes": [a, b], "label": f"pair{round_no}-{a}-{b}", "env": "",
               "nvlink": True, "launcher": settings.get("launcher", "mpirun")}
        instance = _instance(probe, run, addresses, slurm_names, settings)
        instance["params"].update(isolation=True, round=round_no)
        for busy, step in steps:
            if a not in busy and b not in busy:
                busy.update((a, b))
                step[a] = [instance]
                break
        else:
            steps.append(({a, b}, {a: [instance]}))
    return [step for _, step in steps]


def torchdist_instances(probe: dict[str, Any], collectives: Sequence[str], nodes: Sequence[str],
                        addresses: dict[str, str], settings: dict[str, Any]) -> list[dict[str, Any]]:
    """One ``torchdist@<collective>`` run per collective over ``nodes`` (one process per node, mpirun)."""
    nodes = list(nodes)
    out = []
    for collective in collectives:
        params = {**settings, "collectives": collective, "procs": len(nodes),
                  "mpi_hosts": _mpi_hosts(nodes, addresses),
                  "master_addr": addresses.get(nodes[0]) or nodes[0],
                  "collective": collective, "nodes": nodes, "world_size": len(nodes), "launcher": "mpirun"}
        out.append(_named(probe, collective, params, f"torchdist-{collective}.jsonl"))
    return out


def second_round(run_dir: str, hosts: Sequence[str], options: dict[str, Any] | None = None) -> list[list[str]]:
    """The pairs that resolve round one's unresolved failing pairs (none when nothing is unresolved)."""
    from clustereval import checks, rundir
    from clustereval import facts as facts_mod
    from clustereval.checks import isolation

    kept = {h: rundir.kept_probes(run_dir, h, ["nccl@*"]) for h in hosts}
    per_host = facts_mod.load(run_dir) if Path(run_dir).is_dir() else {}
    ctx = checks.Context(subject="_cluster", host_probes=kept, host_facts=per_host, options=dict(options or {}),
                         facts=facts_mod.for_subject(per_host, "_cluster"))
    results = checks.evaluate_many("network.nccl.isolation", ctx, "plan")
    planned: list[list[str]] = []
    for result in results:
        evidence = result.get("evidence") or {}
        unresolved = evidence.get("unresolved") or []
        if unresolved:
            planned += [list(p) for p in isolation.replan(unresolved, evidence.get("good_nodes") or [])]
    return planned


def rail_steps(hosts: Sequence[str]) -> list[dict[str, str]]:
    """Steps of ``{client: server}`` covering the ring host[i] -> host[i+1], each host in one pair per step
    (a client in one step, a server in another): two steps for an even count, three for an odd one."""
    hosts = list(dict.fromkeys(hosts))
    n = len(hosts)
    if n < 2:
        return []
    ring = [(hosts[i], hosts[(i + 1) % n]) for i in range(n)]  # two nodes: both directions
    steps: list[dict[str, str]] = []
    for src, dst in ring:
        for step in steps:
            if src not in step and dst not in step and src not in step.values() and dst not in step.values():
                step[src] = dst
                break
        else:
            steps.append({src: dst})
    return steps


def perftest_plan(rails: Sequence[str], tools: Sequence[str], memories: Sequence[str]) -> list[dict[str, Any]]:
    """Every (memory, rail, tool) in the order both ends walk them, each with its port offset."""
    plan = []
    for memory in memories:
        for rail in rails:
            for tool in tools:
                plan.append({"memory": memory, "device": rail, "tool": tool, "offset": len(plan)})
    return plan


def perftest_instances(probe: dict[str, Any], client: str, server: str, plan: list[dict[str, Any]],
                       addresses: dict[str, str], settings: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    base = int(settings.get("port", 18515))
    for item in plan:
        params = {"tool": item["tool"], "device": item["device"], "port": base + item["offset"],
                  "tool_args": settings.get("tool_args", ""), "size": settings.get("size", 65536),
                  "duration": settings.get("duration", 5), "memory": item["memory"], "gpu": settings.get("gpu", 0),
                  "server": addresses.get(server, server), "src": client, "dst": server}
        artifact = f"perftest-{item['tool']}-{item['device']}-{item['memory']}-to-{_SAFE.sub('_', server)}.txt"
        out.append(_named(probe, f"{item['tool']}.{item['device']}.{item['memory']}.{client}.{server}", params,
                          artifact))
    return out


def active_rails(nics: Sequence[str] | None) -> list[str]:
    """Device names of the active RDMA ports in a node's facts (``'mlx5_0/1 infiniband 400G'``; down ports
    say ``down``), each once, in order."""
    out = []
    for entry in nics or []:
        words = str(entry).split()
        if len(words) >= 2 and "down" not in words:
            out.append(words[0].split("/", 1)[0])
    return list(dict.fromkeys(out))
