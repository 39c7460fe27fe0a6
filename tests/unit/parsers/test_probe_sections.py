"""The ``## kind key=value`` sectioned probes, on what they printed on a simulated Slurm node."""

from __future__ import annotations

from clustereval.parsers import parse
from clustereval.parsers.probe_sections import sections

# scheduler_commands: sacct fails (no slurmdbd), salloc is not installed.
COMMANDS = """## cmd=sinfo rc=0
gpu*
## cmd=squeue rc=0

## cmd=scontrol rc=0
Slurmctld(primary) at vm is UP
## cmd=srun rc=0
slurm-wlm 22.05.8
## cmd=salloc rc=127 missing=yes
## cmd=sacct rc=1
Slurm accounting storage is disabled
"""
# scheduler_node_hardware: the spool shares the root filesystem.
HARDWARE = """hostname: node1
hostname_short: node1
nproc: 2
MemTotal:       24683584 kB
Thread(s) per core:                      1
Core(s) per socket:                      2
Socket(s):                               1
spool: /var/spool/slurmd
## findmnt root
{
   "filesystems": [
      {
         "target": "/",
         "source": "/dev/vda",
         "fstype": "ext4"
      }
   ]
}
## findmnt spool
{
   "filesystems": [
      {
         "target": "/",
         "source": "/dev/vda",
         "fstype": "ext4"
      }
   ]
}
## df spool
/dev/vda         264212084 23063712  83327200      22% /
"""
PROGRAMS = """## program key=HealthCheckProgram path=/etc/slurm/healthcheck.sh exists=yes executable=yes
#!/bin/sh
NODE="${SLURMD_NODENAME:-$1}"
scontrol update nodename="$NODE" state=drain reason="DCGM health"
exit 0
## program key=Prolog path=/etc/slurm/prolog.d/10-gpu.sh exists=no
## nhc path=/etc/nhc/nhc.conf
* || check_hw_cpuinfo 2 8 16
"""
KERNEL_LOG = """## source=journalctl rc=0 lines=0
## source=dmesg rc=0 lines=373
[  812.551043] NVRM: Xid (PCI:0000:19:00): 79, pid=2211, name=python3, GPU has fallen off the bus.

## source=/var/log/kern.log rc=2 lines=0
"""
LISTENERS = """## ss
LISTEN 0      5          127.18.23.2:9400  0.0.0.0:* users:(("dcgm-exporter",pid=3052,fd=3))
LISTEN 0      4096       127.18.23.2:9100  0.0.0.0:* users:(("prometheus-node",pid=3055,fd=3))
LISTEN 0      128            0.0.0.0:2024  0.0.0.0:*
LISTEN 0      128        127.18.23.1:22    0.0.0.0:* users:(("sshd",pid=3002,fd=4))
## ps
systemd
slurmd
"""
PACKAGES = "## manager=dpkg\nadduser:all\t3.134\nbash:amd64\t5.2.15-2+b8\nlibnccl2:amd64\t2.21.5-1+cuda12.4\n"


def test_sections_split_headers_kinds_args_and_values():
    parts = sections("pre\n## findmnt root\n{}\n## source=/var/log/my file.log rc=0 lines=3\nx\n")
    assert parts[0] == {"kind": "", "body": ["pre"]}
    assert parts[1]["kind"] == "findmnt" and parts[1]["args"] == ["root"]
    assert parts[2]["source"] == "/var/log/my file.log" and parts[2]["rc"] == "0" and parts[2]["body"] == ["x"]
    assert sections("## ss\n")[0] == {"kind": "ss", "body": []}


def test_scheduler_commands():
    commands = parse("probe-scheduler-commands", COMMANDS)["commands"]
    assert list(commands) == ["sinfo", "squeue", "scontrol", "srun", "salloc", "sacct"]
    assert commands["sacct"] == {"rc": 1, "missing": False, "output": "Slurm accounting storage is disabled"}
    assert commands["salloc"]["missing"] is True and commands["squeue"]["output"] == ""


def test_scheduler_hardware():
    hw = parse("probe-scheduler-hardware", HARDWARE)
    assert hw["complete"] is True and hw["nproc"] == 2 and hw["mem_total_mb"] == 24105
    assert (hw["sockets"], hw["cores_per_socket"], hw["threads_per_core"]) == (1, 2, 1)
    assert hw["mounts"]["spool"] == {"target": "/", "source": "/dev/vda", "fstype": "ext4"}
    assert hw["spool_used_pct"] == 22 and hw["spool"] == "/var/spool/slurmd" and hw["hostname_short"] == "node1"


def test_scheduler_hardware_with_unreadable_findmnt_is_incomplete():
    hw = parse("probe-scheduler-hardware", HARDWARE.replace('"filesystems": [', '"filesystems": ]', 1))
    assert hw["complete"] is False and hw["warnings"][0].startswith("findmnt printed unreadable JSON for root: ")
    assert "root" not in hw["mounts"] and hw["mounts"]["spool"]["target"] == "/"
    # an unmounted path prints no JSON at all: no mount, not an error
    assert parse("probe-scheduler-hardware", "nproc: 4\n## findmnt spool\n")["complete"] is True


def test_health_programs():
    found = parse("probe-health-programs", PROGRAMS)
    check, prolog = found["programs"]
    assert check["key"] == "HealthCheckProgram" and check["exists"] and check["executable"]
    assert 'state=drain reason="DCGM health"' in check["text"] and check["text"].startswith("#!/bin/sh")
    assert prolog == {"key": "Prolog", "path": "/etc/slurm/prolog.d/10-gpu.sh", "exists": False,
                      "executable": False, "text": ""}
    assert found["nhc_paths"] == ["/etc/nhc/nhc.conf"] and "check_hw_cpuinfo" in found["nhc_conf"]
    assert found["scontrol_failed"] is None
    assert parse("probe-health-programs", "## scontrol rc=1\n")["scontrol_failed"] == {"rc": "1"}


def test_kernel_log_sources():
    sources = parse("probe-kernel-log", KERNEL_LOG)["sources"]
    assert [(s["source"], s["rc"], s["lines"]) for s in sources] == [
        ("journalctl", 0, 0), ("dmesg", 0, 373), ("/var/log/kern.log", 2, 0)]
    assert sources[1]["xid_lines"] == ["[  812.551043] NVRM: Xid (PCI:0000:19:00): 79, pid=2211, name=python3, "
                                       "GPU has fallen off the bus."]


def test_monitoring_listeners():
    data = parse("probe-monitoring-listeners", LISTENERS)
    assert data["ports"] == [22, 2024, 9100, 9400] and data["ss_listed"] is True
    assert data["processes"] == ["dcgm-exporter", "prometheus-node", "slurmd", "sshd", "systemd"]
    assert parse("probe-monitoring-listeners", "## ss\n## ps\nsshd\n")["ss_listed"] is False


def test_fleet_packages():
    data = parse("probe-fleet-packages", PACKAGES)
    assert data["manager"] == "dpkg" and data["packages"]["libnccl2:amd64"] == "2.21.5-1+cuda12.4"
    rpm = parse("probe-fleet-packages", "## manager=rpm\nbash.x86_64\t5.1.8-9.el9\n")
    assert (rpm["manager"], rpm["packages"]) == ("rpm", {"bash.x86_64": "5.1.8-9.el9"})
    assert parse("probe-fleet-packages", "bash\t5.2\n")["manager"] is None
