"""Scheduler audit checks: Slurm commands, accounting, node shape, spool disk, controller placement."""

from __future__ import annotations

import pytest

from clustereval.checks.audit_scheduler import seconds
from tests.conftest import read_corpus
from tests.helpers import judge, probe


def run(check_id: str, probes: dict, **options) -> dict:
    """The check judged on node1, the Slurm node these probe outputs describe (the health and monitoring
    tests judge the same node)."""
    return judge(check_id, probes, subject="node1", **options)


def config(**settings: str) -> dict:
    """A `scontrol show config` of our own, in Slurm 22.05's layout."""
    base = {"AccountingStorageType": "accounting_storage/none", "JobAcctGatherType": "jobacct_gather/none",
            "ClusterName": "c1", "DefMemPerNode": "UNLIMITED", "HealthCheckInterval": "300 sec",
            "HealthCheckProgram": "/usr/sbin/nhc", "MessageTimeout": "10 sec", "Prolog": "(null)",
            "PrologSlurmctld": "(null)", "ReturnToService": "1", "SelectTypeParameters": "CR_CORE",
            "SlurmctldHost[0]": "ctl1(10.0.0.1)", "SlurmdSpoolDir": "/var/spool/slurmd", "SLURM_VERSION": "22.05.8"}
    base.update(settings)
    body = "".join(f"{key:<29}= {value}\n" for key, value in base.items())
    text = f"Configuration data as of 2026-11-30T00:00:00\n{body}\nSlurmctld(primary) at ctl1 is UP\n"
    return probe("scheduler_slurm_config", text, parser="slurm", cmd="scontrol show config")


def commands(**rcs: int) -> dict:
    out = []
    for name in ("sinfo", "squeue", "scontrol", "srun", "sbatch", "salloc", "sacct"):
        rc = rcs.get(name, 0)
        if rc == 127:
            out.append(f"## cmd={name} rc=127 missing=yes")
            continue
        out.append(f"## cmd={name} rc={rc}")
        if rc:
            out.append(f"{name}: error: Unable to contact slurm controller (connect failure)")
        elif name == "sacct":
            out.append("       4711")
        else:
            out.append("slurm 22.05.8")
    return probe("scheduler_commands", "\n".join(out) + "\n", cmd="run sinfo ...")


def node(cpus: int = 2, mem: int = 23000, name: str = "node1", gres: str = "(null)") -> dict:
    text = (f"NodeName={name} Arch=x86_64 CoresPerSocket=1\n   CPUAlloc=0 CPUEfctv={cpus} CPUTot={cpus} "
            f"CPULoad=0.01\n   AvailableFeatures=(null)\n   Gres={gres}\n"
            f"   NodeAddr=10.0.0.11 NodeHostName={name} Version=22.05.8\n"
            f"   RealMemory={mem} AllocMem=0 FreeMem=20000 Sockets=1 Boards=1\n   State=IDLE ThreadsPerCore=1\n"
            f"   Partitions=gpu\n")
    return probe("slurm_node", text, parser="slurm", cmd="scontrol show node node1")


def partitions(job_defaults: str = "(null)", name: str = "gpu", **fields: str) -> dict:
    """`scontrol show partition` in Slurm 22.05's layout (captured from the simulated cluster's slurmctld)."""
    mem = fields.get("memory", "DefMemPerNode=UNLIMITED")
    text = (f"PartitionName={name}\n   AllowGroups=ALL AllowAccounts=ALL AllowQos=ALL\n   AllocNodes=ALL Default=YES "
            "QoS=N/A\n   DefaultTime=NONE DisableRootJobs=NO ExclusiveUser=NO GraceTime=0 Hidden=NO\n"
            "   MaxNodes=UNLIMITED MaxTime=UNLIMITED MinNodes=0 LLN=NO MaxCPUsPerNode=UNLIMITED\n   Nodes=node[1-2]\n"
            "   PriorityJobFactor=1 PriorityTier=1 RootOnly=NO ReqResv=NO OverSubscribe=NO\n"
            "   OverTimeLimit=NONE PreemptMode=OFF\n   State=UP TotalCPUs=4 TotalNodes=2 SelectTypeParameters=NONE\n"
            f"   JobDefaults={job_defaults}\n   {mem} MaxMemPerNode=UNLIMITED\n"
            "   TRES=cpu=4,mem=45798M,node=2,billing=4\n\n")
    return probe("scheduler_partitions", text, parser="slurm", cmd="scontrol show partition")


def findmnt(target: str, fstype: str, source: str) -> str:
    return ('{\n   "filesystems": [\n      {\n         "target": "' + target + '",\n         "source": "' + source
            + '",\n         "fstype": "' + fstype + '"\n      }\n   ]\n}')


def hardware(nproc: int = 2, mem_kb: int = 24684092, spool_target: str = "/", used: int = 22,
             host: str = "node1", root_type: str = "ext4") -> dict:
    text = (f"hostname: {host}.cluster.local\nhostname_short: {host}\nnproc: {nproc}\n"
            f"MemTotal:       {mem_kb} kB\nThread(s) per core:  1\nCore(s) per socket:  2\nSocket(s):  1\n"
            f"spool: /var/spool/slurmd\n## findmnt root\n{findmnt('/', root_type, '/dev/vda')}\n## findmnt spool\n"
            f"{findmnt(spool_target, 'xfs' if spool_target != '/' else root_type, '/dev/nvme0n1p1')}\n"
            f"## df spool\n/dev/nvme0n1p1  264212084 23054792  83336120      {used}% {spool_target}\n")
    return probe("scheduler_node_hardware", text, cmd="echo hostname ...")


class TestHelpers:
    @pytest.mark.parametrize(("text", "value"), [("300 sec", 300), ("10", 10), ("5 min", 300), ("junk", None)])
    def test_seconds(self, text, value):
        assert seconds(text) == value


class TestCommands:
    def test_pass_when_every_command_answers(self):
        result = run("audit.scheduler.commands", commands())
        assert result["status"] == "pass" and result["value"] == 6

    def test_fail_names_the_command_that_cannot_reach_the_controller(self):
        result = run("audit.scheduler.commands", commands(squeue=1))
        assert result["status"] == "fail" and "squeue" in result["summary"]
        assert "Unable to contact slurm controller" in result["summary"]

    def test_warn_when_a_client_command_is_not_installed(self):
        result = run("audit.scheduler.commands", commands(salloc=127))
        assert result["status"] == "warn" and "salloc" in result["summary"]

    def test_skip_when_slurm_is_not_installed(self):
        result = run("audit.scheduler.commands", probe("scheduler_commands", "", rc=127, missing=True, tool="sinfo"))
        assert result["status"] == "skip"

    def test_error_on_empty_output(self):
        assert run("audit.scheduler.commands", probe("scheduler_commands", "\n"))["status"] == "error"


class TestAccounting:
    def test_warn_without_accounting_storage(self):
        result = run("audit.scheduler.accounting", {**config(), **commands(sacct=1)})
        assert result["status"] == "warn" and "accounting_storage/none" in result["summary"]

    def test_pass_with_slurmdbd_and_working_sacct(self):
        result = run("audit.scheduler.accounting", {**config(AccountingStorageType="accounting_storage/slurmdbd",
                                                             JobAcctGatherType="jobacct_gather/cgroup"), **commands()})
        assert result["status"] == "pass"

    def test_pass_on_the_real_config_of_the_corpus(self):
        # The corpus cluster (Slurm 23.02.2) uses slurmdbd and jobacct_gather/cgroup.
        text = read_corpus("slurm", "scontrol-show-config.txt")
        result = run("audit.scheduler.accounting", {**probe("scheduler_slurm_config", text, parser="slurm"),
                                                    **commands()})
        assert result["status"] == "pass" and "slurmdbd" in result["summary"]

    def test_fail_when_slurmdbd_is_configured_but_sacct_fails(self):
        result = run("audit.scheduler.accounting", {**config(AccountingStorageType="accounting_storage/slurmdbd"),
                                                    **commands(sacct=1)})
        assert result["status"] == "fail"

    def test_skip_when_the_node_has_no_slurm_configuration(self):
        failed = probe("scheduler_slurm_config", "", rc=1, parser="slurm")
        failed["scheduler_slurm_config"]["stderr"] = "scontrol: fatal: Could not establish a configuration source"
        assert run("audit.scheduler.accounting", {**failed, **commands()})["status"] == "skip"

    def test_error_when_the_config_is_garbage(self):
        bad = probe("scheduler_slurm_config", "\x00\x01 not slurm at all", parser="slurm")
        assert run("audit.scheduler.accounting", {**bad, **commands()})["status"] == "error"


class TestResourceLimits:
    def test_pass_when_slurm_matches_the_hardware(self):
        result = run("audit.scheduler.resource_limits", {**config(), **node(2, 23000), **hardware(), **partitions()})
        assert result["status"] == "pass", result["summary"]
        assert result["evidence"]["mem_total_mb"] == 24105

    def test_fail_when_slurm_declares_more_cpus_than_the_node_has(self):
        result = run("audit.scheduler.resource_limits", {**config(), **node(8, 16000), **hardware(), **partitions()})
        assert result["status"] == "fail" and "8 CPUs but the node has 2" in result["summary"]

    def test_fail_when_realmemory_exceeds_memtotal(self):
        result = run("audit.scheduler.resource_limits", {**config(), **node(2, 30000), **hardware(), **partitions()})
        assert result["status"] == "fail" and "exceeds" in result["summary"]

    def test_warn_on_unallocatable_memory_and_missing_default(self):
        result = run("audit.scheduler.resource_limits",
                     {**config(SelectTypeParameters="CR_Core_Memory"), **node(2, 18000), **hardware(), **partitions()})
        assert result["status"] == "warn"
        assert "75%" in result["summary"] and "DefMemPerCPU" in result["summary"]

    def test_warn_when_a_gpu_node_has_no_cpu_default(self):
        result = run("audit.scheduler.resource_limits",
                     {**config(), **node(2, 23000, gres="gpu:h100:8"), **hardware(), **partitions()})
        assert result["status"] == "warn", result["summary"]
        assert "no DefCpuPerGPU (partition gpu, nor in slurm.conf)" in result["summary"]
        assert "one CPU per task" in result["summary"] and result["evidence"]["gpus"] == 8

    def test_the_partitions_default_overrides_the_cluster_and_passes(self):
        result = run("audit.scheduler.resource_limits",
                     {**config(JobDefaults="DefCpuPerGPU=1"), **node(2, 23000, gres="gpu:h100:8"), **hardware(),
                      **partitions("DefCpuPerGPU=2,DefMemPerGPU=2000")})
        assert result["status"] == "pass", result["summary"]
        assert "GPU jobs get DefCpuPerGPU=2 unless they ask" in result["summary"]
        assert result["evidence"]["defaults"]["partitions"]["gpu"]["DefMemPerGPU"] == "2000"
        assert result["evidence"]["defaults"]["cluster"] == {"DefCpuPerGPU": "1"}

    def test_the_cluster_default_applies_to_a_partition_without_its_own(self):
        result = run("audit.scheduler.resource_limits",
                     {**config(JobDefaults="DefCpuPerGPU=1"), **node(2, 23000, gres="gpu:h100:8"), **hardware(),
                      **partitions()})
        assert result["status"] == "pass" and "DefCpuPerGPU=1" in result["summary"]

    def test_a_cpu_node_needs_no_gpu_default(self):
        result = run("audit.scheduler.resource_limits", {**config(), **node(2, 23000), **hardware(), **partitions()})
        assert result["status"] == "pass" and "DefCpuPerGPU" not in result["summary"]

    def test_a_partition_listing_that_fails_is_reported_as_the_probe_failing(self):
        broken = probe("scheduler_partitions", "", rc=1, parser="slurm")
        result = run("audit.scheduler.resource_limits", {**config(), **node(), **hardware(), **broken})
        assert result["status"] == "fail" and "scheduler_partitions" in result["summary"]

    def test_skip_when_the_node_is_not_in_slurm(self):
        missing = probe("slurm_node", "Node node1 not found", rc=1, parser="slurm")
        assert run("audit.scheduler.resource_limits", {**config(), **missing, **hardware()})["status"] == "skip"

    def test_error_when_meminfo_is_unreadable(self):
        broken = probe("scheduler_node_hardware", "hostname: node1\n")
        assert run("audit.scheduler.resource_limits", {**config(), **node(), **broken})["status"] == "error"


class TestSpoolDisk:
    def test_warn_on_the_root_filesystem(self):
        result = run("audit.scheduler.spool_disk", {**config(), **hardware()})
        assert result["status"] == "warn" and "root filesystem" in result["summary"]

    def test_warn_names_a_container_overlay_root(self):
        result = run("audit.scheduler.spool_disk", {**config(), **hardware(root_type="overlay")})
        assert result["status"] == "warn" and "overlay" in result["summary"]

    def test_pass_on_its_own_filesystem(self):
        result = run("audit.scheduler.spool_disk", {**config(), **hardware(spool_target="/var/spool/slurmd")})
        assert result["status"] == "pass" and "xfs" in result["summary"]

    def test_fail_when_nearly_full(self):
        result = run("audit.scheduler.spool_disk", {**config(), **hardware(spool_target="/var/spool/slurmd",
                                                                           used=97)})
        assert result["status"] == "fail" and "97%" in result["summary"]

    def test_skip_without_slurm(self):
        result = run("audit.scheduler.spool_disk", {**probe("scheduler_slurm_config", "", rc=127, missing=True),
                                                    **hardware()})
        assert result["status"] == "skip"

    def test_error_without_findmnt_output(self):
        text = "hostname: n\nhostname_short: n\nnproc: 2\nMemTotal: 1000 kB\nspool: /var/spool/slurmd\n"
        assert run("audit.scheduler.spool_disk", {**config(), **probe("scheduler_node_hardware", text)})[
            "status"] == "error"


class TestControllerColocated:
    def test_pass_when_the_controller_is_elsewhere(self):
        result = run("audit.scheduler.controller_colocated", {**config(), **hardware(), **node()})
        assert result["status"] == "pass" and "ctl1" in result["summary"]

    def test_fail_when_the_only_controller_is_this_node(self):
        result = run("audit.scheduler.controller_colocated",
                     {**config(**{"SlurmctldHost[0]": "node1"}), **hardware(), **node()})
        assert result["status"] == "fail"

    def test_warn_when_a_backup_runs_elsewhere(self):
        result = run("audit.scheduler.controller_colocated",
                     {**config(**{"SlurmctldHost[0]": "node1(10.0.0.11)", "SlurmctldHost[1]": "ctl2"}),
                      **hardware(), **node()})
        assert result["status"] == "warn" and "ctl2" in result["summary"]

    def test_skip_and_error(self):
        assert run("audit.scheduler.controller_colocated",
                   {**probe("scheduler_slurm_config", "", rc=127, missing=True), **hardware()})["status"] == "skip"
        no_ctl = config(**{"SlurmctldHost[0]": "(null)"})
        assert run("audit.scheduler.controller_colocated", {**no_ctl, **hardware()})["status"] == "error"
