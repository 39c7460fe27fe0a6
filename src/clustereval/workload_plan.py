"""What the training and inference roles run, planned as data (pure functions; the roles' filters in
``plugins/filter/workloads.py``).

* :func:`run_problems` — what is wrong with ``clustereval_training_runs`` (the role's validation refuses it).
* :func:`training_instances` — the runs as instances of the catalogue probes ``torchtitan_train`` (on each node
  alone) and ``torchtitan_train_nodes`` (over every node, launched from the first): ``<probe>@<run>``, each
  with its own parameters, artifact and timeout (the contract of ``checks/training.py``).
* :func:`launch_params` — how a run over several nodes is launched: mpirun's ``-H`` list (one slot per node, at
  the address its peers reach it), srun's ``-w`` names, the node count and the first node's address (node rank
  0, the rendezvous).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
SPANS = ("1", "all")
RUN_KEYS = {"name", "model", "nodes", "config_file", "module", "config", "extra_args", "steps", "gpus", "workdir"}
DUMP_ROOT = "/var/tmp/clustereval-torchtitan-"
_SAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def node_names(value: Any) -> list[str]:
    """A run's nodes as the probe or the role gave them: a comma-separated string or a list."""
    if isinstance(value, str):
        return [n.strip() for n in value.split(",") if n.strip()]
    return [str(n) for n in value] if isinstance(value, list | tuple) else []


def span(run: dict[str, Any]) -> str:
    """``1`` (each node on its own) or ``all`` (one run over every node) as the run gives ``nodes``."""
    return str(run.get("nodes", 1)).strip().lower()


def run_problems(runs: Any) -> list[str]:
    """Everything wrong with the runs, one sentence each (none: the runs are usable)."""
    if not isinstance(runs, list):
        return [f"clustereval_training_runs must be a list of runs, not {type(runs).__name__}"]
    problems, names = [], set()
    for index, run in enumerate(runs):
        where = f"run {index + 1}"
        if not isinstance(run, dict):
            problems.append(f"{where} is not a mapping")
            continue
        name = str(run.get("name") or "")
        where = f"run {name or index + 1}"
        if not NAME.match(name):
            problems.append(f"{where}: name must be letters, digits, '.', '_' or '-' (got {name!r})")
        elif name in names:
            problems.append(f"{where}: the name is used twice")
        names.add(name)
        if not str(run.get("model") or "").strip():
            problems.append(f"{where}: model (what the expected figures are matched on) is missing")
        if span(run) not in SPANS:
            problems.append(f"{where}: nodes must be 1 (each node on its own) or all (got {run.get('nodes')!r})")
        unknown = sorted(set(run) - RUN_KEYS)
        if unknown:
            problems.append(f"{where}: unknown keys {', '.join(unknown)} (known: {', '.join(sorted(RUN_KEYS))})")
        for key in ("config_file", "workdir"):
            value = str(run.get(key) or "")
            if value and not value.startswith("/"):
                problems.append(f"{where}: {key} must be an absolute path (got {value!r})")
        if bool(run.get("module")) != bool(run.get("config")):
            problems.append(f"{where}: module and config go together (torchtitan's config registry)")
        for key, least in (("steps", 2), ("gpus", 0)):
            if key in run and not (str(run[key]).isdigit() and int(run[key]) >= least):
                problems.append(f"{where}: {key} must be a whole number >= {least} (got {run[key]!r})")
    return problems


def launch_params(hosts: Sequence[str], addresses: dict[str, str], slurm_names: dict[str, str]) -> dict[str, Any]:
    """The launcher's view of ``hosts`` (in order; the first is node rank 0 and launches the run)."""
    hosts = list(dict.fromkeys(hosts))
    return {"procs": len(hosts), "mpi_hosts": ",".join(f"{addresses.get(h) or h}:1" for h in hosts),
            "slurm_nodes": ",".join(slurm_names.get(h) or h for h in hosts),
            "master_addr": (addresses.get(hosts[0]) or hosts[0]) if hosts else "", "nodes": hosts}


def _named(probe: dict[str, Any], run: str, params: dict[str, Any]) -> dict[str, Any]:
    stem, dot, ext = str(probe.get("artifact") or f"{probe['name']}.log").rpartition(".")
    label = _SAFE.sub("_", run)
    return {**probe, "name": f"{probe['name']}@{run}", "probe": probe["name"],
            "artifact": f"{stem}-{label}.{ext}" if dot else f"{ext}-{label}",
            "params": {**(probe.get("params") or {}), **params}}


def dump_folder(run_id: str, run: str) -> str:
    """Where torchtitan writes what it saves for one run (removed by the probe's cleanup and the role)."""
    return f"{DUMP_ROOT}{_SAFE.sub('_', str(run_id))}-{_SAFE.sub('_', run)}"


def training_instances(probe: dict[str, Any], runs: Sequence[dict[str, Any]], scope: str, hosts: Sequence[str],
                       addresses: dict[str, str] | None = None, slurm_names: dict[str, str] | None = None,
                       settings: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """The runs of ``scope`` (``node``: the ``nodes: 1`` runs, on ``hosts[0]`` alone; ``cluster``: the ``nodes:
    all`` runs over every host, none when fewer than two) as instances of ``probe``."""
    settings = dict(settings or {})
    hosts = list(dict.fromkeys(hosts))
    wanted = "1" if scope == "node" else "all"
    if not hosts or (scope == "cluster" and len(hosts) < 2):
        return []
    launch = (launch_params(hosts, addresses or {}, slurm_names or {}) if scope == "cluster"
              else {"nodes": hosts[:1]})
    out = []
    for run in runs:
        if span(run) != wanted:
            continue
        name = str(run["name"])
        params = {
            "run": name, "model": str(run["model"]), "venv": settings.get("venv") or "",
            "config_file": run.get("config_file") or "", "module": run.get("module") or "",
            "config": run.get("config") or "", "workdir": run.get("workdir") or "",
            "dump_folder": dump_folder(str(settings.get("run_id") or "run"), name),
            "steps": int(run.get("steps") or settings.get("steps") or 30),
            "gpus": int(run.get("gpus") if run.get("gpus") is not None else settings.get("gpus") or 0),
            "extra_args": run.get("extra_args") or "", **launch,
        }
        if scope == "cluster":
            params.update(launcher=settings.get("launcher") or "mpirun",
                          launcher_args=settings.get("launcher_args") or "",
                          master_port=int(settings.get("master_port") or 29400))
        instance = _named(probe, name, params)
        if settings.get("timeout_s"):
            instance["timeout"] = float(settings["timeout_s"])
        out.append(instance)
    return out
