"""Fault drills against the simulated cluster: reboot through the BMC, /dev/kmsg, SBR with the real setpci,
DCGM injection, provider remediation, and the ground truth each leaves (needs root and slurm-wlm)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

from clustereval.sim import cluster
from tests.integration.simrun import REQUIRES_SIM, read_inventory, ssh, truth

pytestmark = [
    *REQUIRES_SIM,
    pytest.mark.skipif(shutil.which("setpci") is None, reason="setpci is not installed (apt-get install pciutils)"),
]

# node1: reboot and DCGM injection; node2: provider reboots it 2 s after a drain; node3: SBR, no remediation
PROFILE = """extends: fault-drills
cluster:
  provider:
    health_check: {interval_s: 2}
    remediation: {mode: none, spare: null}
    reboot: {shutdown_s: 0.5, down_s: 1.5, slurmd_s: 0.5}
nodes:
  node2:
    provider:
      remediation: {mode: reboot, after_s: 2}
  node3:
    provider:
      health_check: {mode: drain}
"""
XID_48 = "NVRM: Xid (PCI:0000:4c:00): 48, pid=0, name=clustereval, An uncorrectable double bit error (DBE) " \
         "has been detected on GPU."


def slurm(directory: Path, *args: str) -> str:
    env = {**os.environ, "SLURM_CONF": str(directory / "slurm" / "slurm.conf")}
    return subprocess.run(list(args), env=env, capture_output=True, text=True, timeout=20).stdout


def node_line(directory: Path, name: str) -> str:
    return slurm(directory, "scontrol", "-o", "show", "node", name)


def field(line: str, key: str) -> str:
    return next((w.split("=", 1)[1] for w in line.split() if w.startswith(key + "=")), "")


def wait(predicate, timeout: float, interval: float = 0.2) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return bool(predicate())


def port_open(address: str) -> bool:
    with socket.socket() as s:
        s.settimeout(0.3)
        return s.connect_ex((address, 22)) == 0


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    base = tmp_path_factory.mktemp("power")
    (base / "drills.yml").write_text(PROFILE)
    directory = base / "sim"
    cluster.up(directory, 3, str(base / "drills.yml"))
    hosts, _ = read_inventory(directory)
    yield directory, hosts
    cluster.down(directory)


def test_reboot_gives_a_new_boot_and_slurmd_registers_again(sim):
    directory, hosts = sim
    address = hosts["node1"]
    boot_before = ssh(directory, address, "cat /proc/sys/kernel/random/boot_id").stdout.strip()
    assert boot_before and boot_before != Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    started_before = field(node_line(directory, "node1"), "SlurmdStartTime")
    time.sleep(1.1)  # SlurmdStartTime has a one-second resolution

    out = ssh(directory, address, "systemctl reboot; echo rc=$?")
    assert out.stdout.strip() == "rc=0"
    assert wait(lambda: not port_open(address), 5, 0.05), "the node never went down"
    assert wait(lambda: port_open(address), 10, 0.1), "the node never came back"
    boot_after = ssh(directory, address, "cat /proc/sys/kernel/random/boot_id; wc -l < /sim/kmsg").stdout.split()
    assert boot_after[0] != boot_before and boot_after[1] == "0", "a reboot gives a new boot id and an empty ring"

    def registered() -> bool:
        line = node_line(directory, "node1")
        return field(line, "SlurmdStartTime") not in ("", started_before) and "IDLE" in field(line, "State")

    assert wait(registered, 15)
    run = ssh(directory, address, "srun -w node1 -N1 -n1 --gres=gpu:1 nvidia-smi -L")
    assert run.returncode == 0 and run.stdout.startswith("GPU 0: NVIDIA H100"), run.stderr
    names = [e["event"] for e in cluster.ground_truth(directory, "node1")]
    tail = names[names.index("reboot_requested"):]
    assert [n for n in tail if n in ("reboot_requested", "down", "sshd_up", "slurmd_up")] == [
        "reboot_requested", "down", "sshd_up", "slurmd_up"]
    assert truth(directory, "node1", "sshd_up")[-1]["boot_id"] == boot_after[0]
    other = ssh(directory, address, "systemctl is-active slurmd")
    assert other.returncode == 1 and "not been booted with systemd" in other.stderr


def test_dcgm_injection_fails_health_and_the_health_check_drains(sim):
    directory, hosts = sim
    out = ssh(directory, hosts["node1"], "dcgmi test --inject --gpuid 2 -f 311 -v 1")
    assert out.stdout == "Successfully injected field info.\n"
    health = ssh(directory, hosts["node1"], "dcgmi health -c").stdout
    assert "| Overall Health            | Failure" in health
    assert "Detected 1 volatile double-bit ECC error(s) in GPU 2." in health
    assert wait(lambda: field(node_line(directory, "node1"), "Reason").startswith("DCGM"), 10)
    drained = truth(directory, "node1", "drained")[-1]
    assert drained["reason"] == "DCGM health" and drained["by"] == "healthcheck"
    assert truth(directory, "node1", "fault")[-1]["source"] == "dcgm_inject"
    ssh(directory, hosts["node1"], "dcgmi test --inject --gpuid 2 --field 311 --value 0")
    assert "Overall Health            | Healthy" in ssh(directory, hosts["node1"], "dcgmi health -c").stdout


def test_kmsg_write_drains_and_remediation_reboots_and_resumes(sim):
    directory, hosts = sim
    written = time.time()
    out = ssh(directory, hosts["node2"], f"printf '<4>%s\\n' '{XID_48}' | timeout 5 tee /dev/kmsg >/dev/null")
    assert out.returncode == 0, out.stderr
    ring = ssh(directory, hosts["node2"], "tail -1 /sim/kmsg; tail -1 /var/log/kern.log").stdout.splitlines()
    assert ring[0].startswith("[") and ring[0].endswith("] " + XID_48)
    assert ring[1].endswith(" node2 kernel: " + ring[0])
    assert wait(lambda: field(node_line(directory, "node2"), "Reason") == "XID", 6)  # "Reason=XID 48 [..."
    fault = truth(directory, "node2", "fault")[-1]
    drained = truth(directory, "node2", "drained")[-1]
    assert fault["xid"] == 48 and fault["t"] >= written
    assert drained["reason"] == "XID 48" and drained["t"] - fault["t"] < 2.5 + 1
    assert any(e["t"] <= drained["t"] for e in truth(directory, "node2", "healthcheck_run"))

    def resumed() -> bool:
        return bool(truth(directory, "node2", "resumed")) and field(node_line(directory, "node2"), "State") == "IDLE"

    assert wait(resumed, 30), node_line(directory, "node2")
    reboot = truth(directory, "node2", "reboot_requested")[-1]
    assert reboot["by"] == "remediation" and reboot["t"] - drained["t"] >= 2
    assert truth(directory, "node2", "resumed")[-1]["t"] > truth(directory, "node2", "slurmd_up")[-1]["t"]


def test_secondary_bus_reset_with_real_setpci_loses_the_gpu_until_reboot(sim):
    directory, hosts = sim
    address = hosts["node3"]
    script = (
        "bus=$(nvidia-smi --query-gpu=index,pci.bus_id --format=csv,noheader | awk -F', ' '$1==1{print $2}'); "
        "dev=$(echo ${bus#0000} | tr A-Z a-z); bridge=$(basename $(dirname $(readlink -f /sys/bus/pci/devices/$dev))); "
        "orig=$(setpci -A linux-sysfs -s $bridge BRIDGE_CONTROL.w); "
        "setpci -A linux-sysfs -s $bridge BRIDGE_CONTROL.w=0x0040:0x0040; sleep 0.5; "
        "setpci -A linux-sysfs -s $bridge BRIDGE_CONTROL.w=$orig; sleep 0.2; "
        "echo $dev $bridge $orig $(setpci -A linux-sysfs -s $bridge BRIDGE_CONTROL.w)"
    )
    out = ssh(directory, address, script)
    assert out.stdout.split() == ["0000:3b:00.0", "0000:39:01.0", "0002", "0002"], out.stderr
    listed = ssh(directory, address, "nvidia-smi -L")
    assert listed.returncode == 15 and len(listed.stdout.splitlines()) == 7
    assert "Unable to determine the device handle for GPU1: 0000:3B:00.0: GPU is lost." in listed.stderr
    ring = ssh(directory, address, "tail -2 /sim/kmsg").stdout
    assert "NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus." in ring
    assert "NVRM: GPU 0000:3b:00.0: GPU has fallen off the bus." in ring
    assert "Overall Health            | Failure" in ssh(directory, address, "dcgmi health -c").stdout
    assert wait(lambda: field(node_line(directory, "node3"), "Reason") == "XID", 6)
    sbr = [e for e in truth(directory, "node3", "fault") if e["source"] == "sbr"]
    assert sbr[0]["bridge"] == "0000:39:01.0" and sbr[0]["gpus"] == [1] and sbr[0]["xid"] == 79
    # the host's own PCI devices stay out of reach: only the simulated tree is there
    assert ssh(directory, address, "ls /sys/bus/pci/devices | head -1").stdout.strip() == "0000:15:01.0"
    # only a reboot brings the GPU back
    ssh(directory, address, "reboot")
    assert wait(lambda: len(truth(directory, "node3", "slurmd_up")) >= 2, 15)
    assert ssh(directory, address, "nvidia-smi -L | wc -l").stdout.strip() == "8"


def test_down_leaves_no_process_of_the_cluster(tmp_path):
    directory = tmp_path / "short"
    cluster.up(directory, 1, "fault-drills")
    hosts, _ = read_inventory(directory)
    ssh(directory, hosts["node1"], "systemctl reboot")
    time.sleep(1.5)  # mid-reboot: the node is going down
    recorded = cluster._read_state(directory)["processes"]
    cluster.down(directory)
    assert all(not cluster.pid_alive(p["pid"], p.get("started")) for p in recorded.values())

    def cmdline(pid: int) -> str:
        try:
            return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
        except OSError:
            return ""

    assert [pid for pid in cluster._all_pids() if str(directory) in cmdline(pid)] == []
