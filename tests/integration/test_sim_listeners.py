"""Every socket the simulated cluster listens on is on a loopback address of its own block (127.A.B.0/24): the
nodes' sshd, slurmd and exporters on their node's address, slurmctld on the controller's (.253 on the host, or the
address of the node the profile runs it on), the storage host on .254, and an srun job step's own listeners (srun,
slurmstepd) on the address of the node it was started on. Never 0.0.0.0, ::, 127.0.0.1 or a network address.
(``ss -ltunp``, matched to the cluster's processes: cluster.processes, what ``sim down`` stops.)
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from clustereval.sim import cluster
from tests.integration.simrun import REQUIRES_SIM, SSH_OPTS, read_inventory, simulated_cluster

# nftables gives each node's connections its own source address, without which slurmd and srun bind every address
pytestmark = [*REQUIRES_SIM, pytest.mark.skipif(shutil.which("nft") is None and not Path("/usr/sbin/nft").exists(),
                                                reason="nftables is not installed")]

STEP_S = 5
_PROCESS = re.compile(r'\("([^"]*)",pid=(\d+),')


def listeners(directory: Path) -> list[tuple[str, str, str]]:
    """(protocol, local address, program) of every TCP/UDP socket a process of the cluster listens on."""
    ours = cluster.processes(directory)
    out = subprocess.run(["ss", "-H", "-l", "-t", "-u", "-n", "-p"], capture_output=True, text=True,
                         check=True).stdout
    found = []
    for line in out.splitlines():
        fields = line.split()
        if len(fields) < 5:
            continue
        for program, pid in _PROCESS.findall(line):
            if int(pid) in ours:
                found.append((fields[0], fields[4], program))
    return sorted(set(found))


def host_of(local: str) -> str:
    """The address of ``ss``'s local column (``127.1.2.3:22``, ``[::]:22``, ``*:22``, ``0.0.0.0%lo:22``)."""
    host = local.rsplit(":", 1)[0].strip("[]")
    return host.split("%", 1)[0]


def outside_block(found: list[tuple[str, str, str]], block: str) -> list[tuple[str, str, str]]:
    network = ipaddress.ip_network(f"{block}.0/24")
    bad = []
    for entry in found:
        try:
            inside = ipaddress.ip_address(host_of(entry[1])) in network
        except ValueError:  # "*": every address
            inside = False
        if not inside:
            bad.append(entry)
    return bad


def step_running(sim: Path) -> bool:
    """Whether the cluster runs a job's first step (``squeue -s``: ``JOBID.0``)."""
    env = {**os.environ, "SLURM_CONF": str(sim / "slurm" / "slurm.conf")}
    out = subprocess.run(["squeue", "-h", "-s", "-o", "%i"], env=env, capture_output=True, text=True).stdout
    return any(step.endswith(".0") for step in out.split())


@pytest.mark.parametrize("controller", [None, "node1"])
def test_the_cluster_and_a_job_step_listen_on_their_own_addresses_only(tmp_path, controller):
    profile = "reference"
    if controller:  # slurmctld inside a compute node's namespaces (docs/sim.md, cluster.slurm.controller)
        profile = str(tmp_path / "controller-on-node.yml")
        Path(profile).write_text(f"extends: reference\ncluster:\n  slurm:\n    controller: {controller}\n")
    with simulated_cluster(tmp_path / "sim", 2, profile) as sim:
        state = json.loads((sim / "state.json").read_text())
        block, hosts = state["block"], read_inventory(sim)[0]
        assert "error" not in state["source_addresses"], state["source_addresses"]
        idle = listeners(sim)
        assert idle and not outside_block(idle, block), idle
        ctl = f"{hosts[controller] if controller else cluster.controller_address(block)}:{state['ports']['slurmctld']}"
        expected = {("tcp", ctl, "slurmctld")} | {
            ("tcp", f"{hosts[n]}:{state['ports'][n]}", "slurmd") for n in hosts} | {
            ("tcp", f"{hosts[n]}:22", "sshd") for n in hosts}
        assert expected <= set(idle), sorted(expected - set(idle))

        # a job step started on node1, as the audit starts them (over SSH, the node's own srun)
        step = subprocess.Popen(["ssh", *SSH_OPTS, "-i", str(sim / "ssh" / "id_ed25519"), f"root@{hosts['node1']}",
                                 f"srun -N2 sleep {STEP_S}"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
        try:
            deadline = time.monotonic() + STEP_S
            while not step_running(sim) and time.monotonic() < deadline:
                time.sleep(0.2)
            assert step_running(sim), "the job step never ran"
            busy = listeners(sim)
        finally:
            out, err = step.communicate(timeout=STEP_S + 20)
        assert step.returncode == 0, out + err
        assert not outside_block(busy, block), busy
        srun = {entry for entry in busy if entry[2] == "srun"}
        assert srun and {host_of(local) for _, local, _ in srun} == {hosts["node1"]}, busy
