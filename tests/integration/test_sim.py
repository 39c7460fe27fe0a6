"""The simulated cluster for real: sshd per node, munge, slurmctld + slurmd (needs root and slurm-wlm)."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from clustereval.sim import cluster
from tests.integration.simrun import read_inventory, ssh

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(os.geteuid() != 0, reason="the simulated cluster needs root"),
    pytest.mark.skipif(
        shutil.which("slurmctld") is None and not Path("/usr/sbin/slurmctld").exists(),
        reason="slurmctld is not installed (apt-get install slurm-wlm munge openssh-server)",
    ),
]



def slurm(directory: Path, *args: str) -> str:
    env = {**os.environ, "SLURM_CONF": str(directory / "slurm" / "slurm.conf")}
    return subprocess.run(list(args), env=env, capture_output=True, text=True, timeout=20, check=True).stdout


@pytest.fixture
def two_clusters(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    yield a, b
    cluster.down(a)
    cluster.down(b)


def test_two_node_cluster_end_to_end_and_a_second_cluster_alongside(two_clusters):
    a, b = two_clusters
    info = cluster.up(a, 2)
    assert info["controller"]["alive"]
    assert {n: v["slurm_state"] for n, v in info["nodes"].items()} == {"node1": "idle", "node2": "idle"}

    hosts, variables = read_inventory(a)
    assert list(hosts) == ["node1", "node2"]
    assert variables["ansible_user"] == "root"
    assert variables["ansible_ssh_private_key_file"] == str(a / "ssh" / "id_ed25519")
    assert variables["clustereval_storage_scratch_dir"] == "/sim/scratch"
    assert not any("sim_dir" in key for key in variables)
    assert all(addr.startswith("127.") and addr != "127.0.0.1" for addr in hosts.values())

    for name, address in hosts.items():
        out = ssh(a, address, "hostname; nvidia-smi -L; test -d /sim/scratch && echo scratch-ok")
        assert out.returncode == 0, out.stderr
        lines = out.stdout.splitlines()
        assert lines[0] == name
        gpu_lines = [line for line in lines if line.startswith("GPU ")]
        assert len(gpu_lines) == 8 and "NVIDIA H100 80GB HBM3 (UUID: GPU-" in gpu_lines[0]
        assert lines[-1] == "scratch-ok"
    uuids = [
        ssh(a, addr, "nvidia-smi --query-gpu=uuid --format=csv,noheader").stdout.split()
        for addr in hosts.values()
    ]
    assert not set(uuids[0]) & set(uuids[1]), "two nodes must never share a GPU UUID"

    # the node's own environment talks to this cluster's Slurm
    sinfo_on_node = ssh(a, hosts["node1"], "sinfo -h -N -o '%N %t %G'")
    assert sinfo_on_node.stdout.split("\n")[:2] == ["node1 idle gpu:h100:8", "node2 idle gpu:h100:8"]
    assert sorted(slurm(a, "srun", "-N2", "hostname").split()) == ["node1", "node2"]
    assert slurm(a, "srun", "-N1", "--gres=gpu:h100:2", "printenv", "CUDA_VISIBLE_DEVICES").strip() == "0,1"

    # a second cluster at the same time: own addresses, ports and munge
    info_b = cluster.up(b, 1)
    assert info_b["nodes"]["node1"]["slurm_state"] == "idle"
    assert info_b["nodes"]["node1"]["address"] not in hosts.values()
    assert info_b["controller"]["port"] != info["controller"]["port"]
    assert slurm(b, "srun", "-N1", "hostname").strip() == "node1"
    assert cluster.status(a)["running"]

    # up again on a running dir recovers: the old processes are stopped, a fresh cluster comes up
    import json

    old_pids = [p["pid"] for p in json.loads((a / "state.json").read_text())["processes"].values()]
    again = cluster.up(a, 2)
    assert all(v["slurm_state"] == "idle" for v in again["nodes"].values())
    assert all(not cluster.pid_alive(pid) for pid in old_pids)

    recorded = json.loads((a / "state.json").read_text())["processes"]
    stopped = cluster.down(a)
    assert {entry["pid"] for entry in stopped["stopped"]} >= {p["pid"] for p in recorded.values()}
    assert all(not cluster.pid_alive(p["pid"]) for p in recorded.values())
    assert cluster.down(a)["stopped"] == []
    assert not cluster.status(a)["running"]
    assert cluster.status(b)["running"], "stopping cluster a must leave cluster b alone"


def test_flawed_profile_and_unreachable_node(tmp_path):
    profile = tmp_path / "broken.yml"
    flawed = Path(cluster.__file__).parent / "profiles" / "flawed.yml"
    profile.write_text(
        flawed.read_text().replace("  node4:\n", "  node5:\n    faults: {unreachable: true}\n  node4:\n")
    )
    directory = tmp_path / "f"
    try:
        started = time.monotonic()
        info = cluster.up(directory, 5, str(profile))
        assert time.monotonic() - started < 20
        hosts, _ = read_inventory(directory)
        assert "node5" in hosts, "an unreachable node stays in the inventory"
        assert info["nodes"]["node3"]["slurm_state"] == "drain"
        assert info["nodes"]["node3"]["slurm_reason"] == "XID 79"
        assert info["nodes"]["node1"]["slurm_state"] == "idle"
        assert not info["nodes"]["node5"]["sshd_alive"]

        node2 = ssh(directory, hosts["node2"], "nvidia-smi -L | wc -l; sinfo -h -N -n node2 -o %G")
        assert node2.stdout.split() == ["7", "gpu:h100:8"]
        node3 = ssh(directory, hosts["node3"], "nvidia-smi --query-gpu=driver_version --format=csv,noheader")
        assert set(node3.stdout.split()) == {"535.183.01"}
        node4 = ssh(directory, hosts["node4"], "nvidia-smi -q -x")
        assert node4.returncode == 0 and "</nvidia_smi_log>" not in node4.stdout
        unreachable = ssh(directory, hosts["node5"], "true")
        assert unreachable.returncode == 255
        assert "refused" in unreachable.stderr.lower()

        killed = cluster.kill_node_sshd(directory, "node1")
        assert killed
        assert ssh(directory, hosts["node1"], "true").returncode == 255
        assert not cluster.status(directory)["nodes"]["node1"]["sshd_alive"]
    finally:
        cluster.down(directory)
