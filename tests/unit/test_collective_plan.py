"""The network role's plans for collectives and RDMA (clustereval.collective_plan): pure data in, data out."""

from __future__ import annotations

from clustereval import collective_plan as plan
from clustereval.checks import probe_catalogue

NCCL = {"name": "nccl", "cmd": "run", "artifact": "nccl.txt", "parser": "nccl-tests"}
HOSTS = ["node1", "node2", "node3", "node4", "node5"]
ADDRESSES = {h: f"10.0.0.{i}" for i, h in enumerate(HOSTS, 1)}


def test_world_sizes_double_to_the_whole_allocation():
    assert plan.world_sizes(1) == [1]
    assert plan.world_sizes(4) == [1, 2, 4]
    assert plan.world_sizes(6) == [1, 2, 4, 6]
    assert plan.world_sizes(0) == []


def test_the_runs_sweep_every_collective_then_isolate_the_fabric_and_try_each_launcher():
    runs = plan.nccl_runs(HOSTS[:4], ["all_reduce", "alltoall"], launchers=["mpirun", "srun"])
    labels = [(r["collective"], r["label"], r["launcher"]) for r in runs]
    assert labels == [("all_reduce", "n1", "mpirun"), ("alltoall", "n1", "mpirun"), ("all_reduce", "n2", "mpirun"),
                      ("alltoall", "n2", "mpirun"), ("all_reduce", "n4", "mpirun"), ("alltoall", "n4", "mpirun"),
                      ("all_reduce", "n4-nonvlink", "mpirun"), ("all_reduce", "n4-srun", "srun")]
    off = next(r for r in runs if not r["nvlink"])
    assert "NCCL_P2P_DISABLE=1" in off["env"] and "NCCL_SHM_DISABLE=1" in off["env"]
    assert [r["label"] for r in plan.nccl_runs(HOSTS[:4], ["all_reduce"], scaling=False, nvlink_off=False)] == ["n4"]
    assert plan.nccl_runs([], ["all_reduce"]) == []


def test_an_instance_carries_the_launch_and_the_variant_the_checks_read():
    runs = plan.nccl_runs(HOSTS[:2], ["all_reduce"], nvlink_off=False)
    settings = {"gpus_per_node": "8", "min_bytes": "8", "max_bytes": "16G", "env": "NCCL_IB_HCA=mlx5_0",
                "timeout_s": "600"}
    pair = plan.nccl_instances(NCCL, runs, ADDRESSES, {"node2": "gpu-002"}, settings)[-1]
    assert pair["name"] == "nccl@all_reduce.n2" and pair["probe"] == "nccl" and pair["timeout"] == 600.0
    params = pair["params"]
    assert params["mpi_hosts"] == "10.0.0.1:1,10.0.0.2:1" and params["slurm_nodes"] == "node1,gpu-002"
    assert params["world_size"] == 16 and params["procs"] == 2 and params["nodes"] == ["node1", "node2"]
    assert params["env"] == "NCCL_IB_HCA=mlx5_0" and pair["artifact"] == "nccl-all_reduce-n2.txt"
    assert probe_catalogue.with_params([pair], {})[0]["params"]["collective"] == "all_reduce"


def test_pairs_run_in_steps_where_no_node_is_in_two_runs():
    pairs = [["node1", "node2"], ["node3", "node4"], ["node1", "node5"]]
    steps = plan.pair_steps(NCCL, pairs, "all_reduce", 1, ADDRESSES, {}, {"gpus_per_node": 8})
    assert [sorted(step) for step in steps] == [["node1", "node3"], ["node1"]]
    for step in steps:
        nodes = [n for instances in step.values() for i in instances for n in i["params"]["nodes"]]
        assert len(nodes) == len(set(nodes))
    first = steps[0]["node1"][0]
    assert first["params"]["isolation"] is True and first["params"]["round"] == 1


def test_the_rail_ring_puts_every_node_in_one_pair_per_step():
    for count in (2, 3, 4, 5, 8):
        steps = plan.rail_steps(HOSTS[:count] if count <= 5 else [f"n{i}" for i in range(count)])
        measured = [(a, b) for step in steps for a, b in step.items()]
        assert len(measured) == count  # every node a client once (two nodes: both directions)
        for step in steps:
            nodes = list(step) + list(step.values())
            assert len(nodes) == len(set(nodes))
    assert plan.rail_steps(["solo"]) == []


def test_perftest_runs_walk_the_servers_order_each_on_its_own_port():
    order = plan.perftest_plan(["mlx5_0", "mlx5_1"], ["ib_write_bw", "ib_write_lat"], ["host", "cuda"])
    assert len(order) == 8 and [o["offset"] for o in order] == list(range(8))
    probe = {"name": "perftest", "cmd": "x", "artifact": "perftest.txt"}
    runs = plan.perftest_instances(probe, "node1", "node2", order, ADDRESSES, {"port": 18515})
    assert len({r["params"]["port"] for r in runs}) == 8 and runs[0]["params"]["server"] == "10.0.0.2"
    assert runs[-1]["name"] == "perftest@ib_write_lat.mlx5_1.cuda.node1.node2"
    assert len({r["artifact"] for r in runs}) == 8


def test_active_rails_come_from_the_facts_and_skip_down_ports():
    nics = ["mlx5_0/1 InfiniBand 400G", "mlx5_1/1 InfiniBand down", "mlx5_2/1 Ethernet 400G", "mlx5_0/2 IB 400G"]
    assert plan.active_rails(nics) == ["mlx5_0", "mlx5_2"]
    assert plan.active_rails(None) == []


def test_torch_distributed_runs_one_collective_each_from_the_first_node():
    probe = {"name": "torchdist", "cmd": "x", "artifact": "torchdist.jsonl"}
    runs = plan.torchdist_instances(probe, ["all_reduce", "broadcast"], HOSTS[:3], ADDRESSES, {"iters": 2})
    assert [r["name"] for r in runs] == ["torchdist@all_reduce", "torchdist@broadcast"]
    assert runs[0]["params"]["master_addr"] == "10.0.0.1" and runs[0]["params"]["procs"] == 3
    assert runs[0]["params"]["collectives"] == "all_reduce" and runs[0]["params"]["world_size"] == 3
