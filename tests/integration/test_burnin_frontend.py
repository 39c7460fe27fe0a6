"""The front-end mesh under load (role burnin, tasks/frontend.yml) on the simulated cluster, for seconds
(SIM_BENCHMARK_VARS): the burn-in's GEMMs on every node's CPU and its all-to-all through mpirun as a session,
real ping and iperf3 between both ordered pairs meanwhile, and nothing left on the nodes.

Needs root and Debian's slurm-wlm, munge, openssh-server and OpenMPI (``make install``).
"""

from __future__ import annotations

import shutil

import pytest

from tests.integration.simrun import REQUIRES_SIM, load_result_list, run_playbook, simulated_cluster

pytestmark = [*REQUIRES_SIM, pytest.mark.skipif(shutil.which("mpirun") is None, reason="mpirun is not installed"),
              pytest.mark.skipif(shutil.which("iperf3") is None, reason="iperf3 is not installed")]


def test_front_end_mesh_under_load_over_two_nodes(tmp_path):
    run_dir = tmp_path / "run"
    with simulated_cluster(tmp_path / "sim", 2, "reference") as sim:
        proc = run_playbook(sim / "inventory.ini", "-e", "clustereval_phases=reliability",
                            "--tags", "burnin.frontend", "-e", f"clustereval_out={run_dir}", timeout=300)
        left = [str(p) for p in sim.rglob("clustereval-burnin-*")]
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert left == [], "the mesh under load left the burn-in programs behind"
    items = load_result_list(run_dir)
    for check_id in ("burnin.frontend.loss", "burnin.frontend.rtt", "burnin.frontend.bandwidth"):
        found = {r["subject"]: r for r in items if r["check"] == check_id}
        assert set(found) == {"node1->node2", "node2->node1"}, (check_id, found)
        for result in found.values():
            assert result["params"]["load"] == "burnin" and result["summary"].startswith("under load: ")
            assert result["status"] in ("pass", "warn", "fail"), result["summary"]
    # the load really ran while the mesh was measured: the session kept the GEMM stream of every node
    for node in ("node1", "node2"):
        assert '"event": "window"' in (run_dir / "raw" / node / "burnin-frontend-load" / "gemm.out").read_text()
    assert '"event": "start"' in (run_dir / "raw" / "node1" / "burnin-frontend-load" / "collective.out").read_text()
    assert (run_dir / "raw" / "node1" / "burnin-frontend-iperf3-to-node2.json").exists()  # kept under its own name
    assert not [r for r in items if r["check"].startswith("burnin.gemm")], "only the selected checks are judged"


def test_nothing_starts_when_no_front_end_check_is_selected(tmp_path):
    run_dir = tmp_path / "run"
    with simulated_cluster(tmp_path / "sim", 2, "reference") as sim:
        proc = run_playbook(sim / "inventory.ini", "-e", "clustereval_phases=reliability",
                            "--tags", "burnin.frontend.none", "-e", f"clustereval_out={run_dir}", timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert not list(run_dir.rglob("burnin-frontend-*")), "the mesh under load started with none of its checks"


def test_the_network_load_alone_runs_no_gemm_and_every_result_says_so(tmp_path):
    run_dir = tmp_path / "run"
    with simulated_cluster(tmp_path / "sim", 2, "reference") as sim:
        proc = run_playbook(sim / "inventory.ini", "-e", "clustereval_phases=reliability", "-e",
                            "clustereval_burnin_load=network", "--tags", "burnin.frontend.loss",
                            "-e", f"clustereval_out={run_dir}", timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert not (run_dir / "raw" / "node1" / "burnin-frontend-load" / "gemm.out").exists()
    assert '"event": "window"' in (run_dir / "raw" / "node1" / "burnin-frontend-load" / "collective.out").read_text()
    found = [r for r in load_result_list(run_dir) if r["check"] == "burnin.frontend.loss"]
    assert len(found) == 2 and all(r["status"] in ("warn", "fail") for r in found), [r["summary"] for r in found]
    assert all(r["summary"].endswith("clustereval_burnin_load=network)") for r in found), found[0]["summary"]
