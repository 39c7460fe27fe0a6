"""What the simulated cluster's Slurm is configured with, from the profile (docs/sim.md, ``cluster: slurm:``
and ``provider:``): the scheduler settings of slurm.conf, topology.conf from the racks, the controller's
place, and each node's own HealthCheckProgram, Prolog and Epilog.

The node programs live on the node (``/sim/etc/slurm/…``, inside its private ``/sim``), as a site installs
its own copy on every node: an audit reading them on a node reads what that node runs. Their text is the
provider's choices written out (which checks, what a failure does, how long the prolog takes), never a
description of them.
"""

from __future__ import annotations

from typing import Any

# Where slurm.conf says the node programs are; each node has its own file there (its /sim).
NODE_PROGRAM_DIR = "/sim/etc/slurm"
HEALTHCHECK_PATH = f"{NODE_PROGRAM_DIR}/healthcheck"
PROLOG_PATH = f"{NODE_PROGRAM_DIR}/prolog"
EPILOG_PATH = f"{NODE_PROGRAM_DIR}/epilog"
TASK_PROLOG_PATH = f"{NODE_PROGRAM_DIR}/task_prolog"
# The site's TaskProlog fragments on the node (software overlay: a CUDA toolkit only job steps see).
TASK_PROLOG_FRAGMENTS = "/etc/slurm/task_prolog.d"
# The words the health check program runs per profile check (NHC's naming: check_dcgmi is NHC's own).
CHECK_WORDS = {"xid": "check_nv_xid", "dcgm_health": "check_dcgmi", "gpu_count": "check_nv_gpu_count",
               "amd_ras": "check_amd_ras", "amd_gpu_count": "check_amd_gpu_count"}
COUNT_CHECKS = ("gpu_count", "amd_gpu_count")
# Profile key -> slurm.conf key of the cluster-wide timeouts (seconds); unset leaves Slurm's default.
TIMEOUTS = {"message_timeout_s": "MessageTimeout", "prolog_epilog_timeout_s": "PrologEpilogTimeout",
            "batch_start_timeout_s": "BatchStartTimeout"}
# Profile key -> Slurm's JobDefaults / partition key of the job defaults.
JOB_DEFAULTS = {"cpus_per_gpu": "DefCpuPerGPU", "mem_per_gpu_mb": "DefMemPerGPU", "mem_per_cpu_mb": "DefMemPerCPU"}
SPINE_SWITCH = "spine"
# Slurm programs bind the address their host name resolves to (the node's own, from the cluster's hosts file,
# :func:`hosts_file`) instead of every address of the machine: NoInAddrAny for slurmd, srun and slurmstepd,
# NoCtldInAddrAny for slurmctld (slurm.conf(5)). The simulated cluster then listens on its own addresses only.
NO_IN_ADDR_ANY = "NoInAddrAny"
NO_CTLD_IN_ADDR_ANY = "NoCtldInAddrAny"
# The host's slurmctld has an address of the cluster's block too (.253; the nodes are .1…, the storage host .254).
CONTROLLER_HOST_INDEX = 253


def scheduler_lines(cluster_slurm: dict[str, Any], provider: dict[str, Any], partition: str) -> list[str]:
    """slurm.conf lines of the profile's timeouts, job defaults, health check and return-to-service settings
    (the partition line is :func:`partition_line`)."""
    lines = [f"{key}={int(cluster_slurm[name])}" for name, key in TIMEOUTS.items() if name in cluster_slurm]
    lines += [f"{key}={int(value)}" for key, value in _job_defaults(cluster_slurm.get("job_defaults"))]
    hc, rem = provider["health_check"], provider["remediation"]
    lines.append(f"ReturnToService={rem['return_to_service']}")
    for name, key in (("reboot_program", "RebootProgram"), ("resume_program", "ResumeProgram"),
                      ("suspend_program", "SuspendProgram")):
        if rem.get(name):
            lines.append(f"{key}={rem[name]}")
    if hc["cluster_mode"] != "none":
        lines += [f"HealthCheckProgram={HEALTHCHECK_PATH}", f"HealthCheckInterval={hc['interval_s']}",
                  f"HealthCheckNodeState={hc['node_state']}"]
    if cluster_slurm.get("racks"):
        lines.append("TopologyPlugin=topology/tree")
    return lines


def _job_defaults(values: dict[str, Any] | None) -> list[tuple[str, Any]]:
    return [(key, values[name]) for name, key in JOB_DEFAULTS.items() if name in (values or {})]


def partition_line(name: str, cluster_slurm: dict[str, Any]) -> str:
    defaults = "".join(f" {key}={int(value)}"
                       for key, value in _job_defaults(cluster_slurm.get("partition_job_defaults")))
    return f"PartitionName={name} Nodes=ALL Default=YES MaxTime=INFINITE State=UP{defaults}"


def communication_parameters(nodes_own_addresses: bool) -> str:
    """The CommunicationParameters line. slurmctld always binds its own address; slurmd and srun only when each
    node's connections leave from its own address (``nodes_own_addresses``): slurmd connects a step's I/O back
    to the address srun's request came from, so an srun bound to its node's address needs requests from there."""
    options = [NO_IN_ADDR_ANY, NO_CTLD_IN_ADDR_ANY] if nodes_own_addresses else [NO_CTLD_IN_ADDR_ANY]
    return "CommunicationParameters=" + ",".join(options)


def controller(cluster_slurm: dict[str, Any], host: str, addresses: dict[str, str],
               host_address: str = "127.0.0.1") -> tuple[str, str, str | None]:
    """(SlurmctldHost name, its address, the compute node it runs on or None): the host (at ``host_address``) by
    default."""
    node = cluster_slurm.get("controller")
    if node:
        return node, addresses[node], node
    return host, host_address, None


def hosts_file(addresses: dict[str, str]) -> str:
    """/etc/hosts as every process of the cluster sees it (name -> address: the nodes and the controller): with
    :func:`communication_parameters` each Slurm program binds what its own host name resolves to here."""
    lines = ["# The simulated cluster's names (clustereval sim): each node's own loopback address.",
             "127.0.0.1\tlocalhost", "::1\tlocalhost ip6-localhost ip6-loopback"]
    lines += [f"{address}\t{name}" for name, address in addresses.items()]
    return "\n".join(lines) + "\n"


def topology_conf(rack_of: dict[str, str]) -> str:
    """topology.conf for topology/tree: a leaf switch per rack and a spine above them."""
    racks: dict[str, list[str]] = {}
    for node, rack in rack_of.items():
        racks.setdefault(rack, []).append(node)
    lines = [f"SwitchName={rack} Nodes={','.join(nodes)}" for rack, nodes in sorted(racks.items())]
    lines.append(f"SwitchName={SPINE_SWITCH} Switches={','.join(sorted(racks))}")
    return "\n".join(lines) + "\n"


def healthcheck_program(hc: dict[str, Any], engine: str, gres_count: int, slurm_conf: str) -> str:
    """The node's HealthCheckProgram: the provider's checks run by ``engine`` (shims/healthcheck.py), and
    either a drain on failure, or (mode ``exit_1``) a report on stdout and exit status 1, which slurmd ignores.
    slurmd runs it with almost no environment, so it names the cluster's slurm.conf for scontrol itself."""
    words = [CHECK_WORDS[c] + (f"={gres_count}" if c in COUNT_CHECKS else "") for c in hc["checks"]]
    if hc["mode"] == "none" or not words:
        return ("#!/bin/sh\n# Node health check (Slurm HealthCheckProgram), run by slurmd at start and every "
                "HealthCheckInterval.\nexit 0\n")
    run = f"/usr/bin/python3 -IS {engine}"
    if hc["mode"] == "exit_1":
        return ("#!/bin/sh\n# Node health check (Slurm HealthCheckProgram), run by slurmd at start and every "
                f"HealthCheckInterval.\nexec {run} --report {' '.join(words)}\n")
    return ("#!/bin/sh\n# Node health check (Slurm HealthCheckProgram), run by slurmd at start and every "
            "HealthCheckInterval.\n"
            f'export SLURM_CONF={slurm_conf}\n'
            'node=${SLURMD_NODENAME:-$(hostname -s)}\n'
            f'failed=$({run} {" ".join(words)}) || exit 1\n'
            '[ -n "$failed" ] || exit 0\n'
            'printf \'%s\\n\' "$failed" | while IFS= read -r reason; do\n'
            '  scontrol update nodename="$node" state=drain reason="$reason"\n'
            'done\n')


JOB_MAP_DIR = "/sim/run/dcgm-job-map"
# Prolog/Epilog as sites that tie GPU metrics to jobs run them: one file per GPU index of the job, holding
# its id, in the directory dcgm-exporter reads (--hpc-job-mapping-dir, here node-private under /sim).
PROLOG = """#!/bin/sh
# Slurm Prolog: map this job's GPUs to its id for dcgm-exporter's HPC job mapping.
DCGM_HPC_JOB_MAPPING_DIR={job_map}
{wait}[ -n "$SLURM_JOB_GPUS" ] || exit 0
mkdir -p "$DCGM_HPC_JOB_MAPPING_DIR" || exit 0
IFS=,
for gpu in $SLURM_JOB_GPUS; do echo "$SLURM_JOB_ID" > "$DCGM_HPC_JOB_MAPPING_DIR/$gpu"; done
exit 0
"""
EPILOG = """#!/bin/sh
# Slurm Epilog: the job's GPUs no longer belong to it in dcgm-exporter's HPC job mapping.
DCGM_HPC_JOB_MAPPING_DIR={job_map}
{wait}[ -n "$SLURM_JOB_GPUS" ] || exit 0
IFS=,
for gpu in $SLURM_JOB_GPUS; do rm -f "$DCGM_HPC_JOB_MAPPING_DIR/$gpu"; done
exit 0
"""


# Slurm TaskProlog, run by slurmstepd as the job's user before each task: its `export NAME=VALUE` lines set the
# task's environment. Sites keep one fragment per concern in a directory, as here.
TASK_PROLOG = f"""#!/bin/sh
# Slurm TaskProlog: every fragment of {TASK_PROLOG_FRAGMENTS} prints the task environment it changes.
for f in {TASK_PROLOG_FRAGMENTS}/*.sh; do
  [ -x "$f" ] && "$f"
done
exit 0
"""


def job_hooks(node_slurm: dict[str, Any]) -> dict[str, str]:
    """The node's Prolog, Epilog and TaskProlog texts ({path: text}); ``prolog_s``/``epilog_s`` make the first two
    take that long
    (a site's slow setup or cleanup: the script sleeps that many seconds first)."""
    out = {}
    for path, template, key in ((PROLOG_PATH, PROLOG, "prolog_s"), (EPILOG_PATH, EPILOG, "epilog_s")):
        seconds = node_slurm.get(key) or 0
        wait = f"sleep {seconds:g}  # the site's setup/cleanup takes this long\n" if seconds else ""
        out[path] = template.format(job_map=JOB_MAP_DIR, wait=wait)
    out[TASK_PROLOG_PATH] = TASK_PROLOG
    return out


def rack_of(racks: dict[str, list[str]] | None, node_racks: dict[str, str | None], nodes: list[str]) -> dict[str, str]:
    """Rack of each node of the cluster: per node ``rack:`` wins over the cluster's ``racks:`` lists."""
    out = {node: rack for rack, members in (racks or {}).items() for node in members if node in nodes}
    out.update({node: rack for node, rack in node_racks.items() if rack and node in nodes})
    return dict(sorted(out.items(), key=lambda item: nodes.index(item[0])))
