"""The burn-in's view of the simulated cluster's GPUs over real SSH (profile ``burnin-faults``, 3 nodes):
``nvidia-smi --query-gpu ... -lms 1000`` on a node kept busy by real CPU work reads its GPUs as under a
sustained GEMM (power at the cap, SwPowerCap, SM clock down from 1980 MHz), learnt from the node's own
cgroup CPU time, while an idle node sampled at the same time reads idle; and the faults during a run
(node2 GPU 5 hot and thermally throttled, node3 GPU 2's corrected ECC errors growing, GPU 6 drifting).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from clustereval import parsers
from tests.integration.simrun import REQUIRES_SIM, read_inventory, simulated_cluster, ssh

pytestmark = REQUIRES_SIM

FIELDS = ("timestamp,index,temperature.gpu,power.draw,power.limit,clocks.current.sm,utilization.gpu,"
          "clocks_event_reasons.active,ecc.errors.corrected.volatile.total")
# three busy processes: the node's share of this (shared, small) machine stays well over half a core
BUSY = ("for i in 1 2 3; do python3 -c 'while True: pass' & done; sleep 1; "
        f"timeout 9 nvidia-smi --query-gpu={FIELDS} --format=csv -lms 1000; kill $(jobs -p)")
IDLE = f"sleep 1; timeout 7 nvidia-smi --query-gpu={FIELDS} --format=csv -lms 1000"


def rows_of(out) -> dict[int, list[dict]]:
    assert out.returncode in (0, 124), out.stderr
    result = parsers.parse("nvidia-smi-query-loop", out.stdout)
    assert result["complete"] and result["warnings"] == []
    per_gpu: dict[int, list[dict]] = {}
    for row in result["rows"]:
        per_gpu.setdefault(row["index"], []).append(row)
    assert len(per_gpu) == 8 and all(len(r) >= 6 for r in per_gpu.values())
    return per_gpu


def test_busy_nodes_read_loaded_idle_ones_idle_and_the_burnin_faults_show(tmp_path):
    with simulated_cluster(tmp_path / "sim", 3, "burnin-faults") as sim:
        hosts, _ = read_inventory(sim)
        with ThreadPoolExecutor(2) as pool:
            busy1, idle3 = pool.map(lambda job: ssh(sim, hosts[job[0]], job[1]), [("node1", BUSY), ("node3", IDLE)])
        busy2 = ssh(sim, hosts["node2"], BUSY)

    node1, node3, node2 = rows_of(busy1), rows_of(idle3), rows_of(busy2)
    for gpu in range(8):
        loaded = node1[gpu][2:]  # the first sample has no interval to measure load over
        # on a crowded test machine the busy processes may get under half a core now and then: such a
        # sample reads busy but under the cap; a capped one reads as a real GPU under a GEMM
        assert all(r["utilization.gpu"] > 0 and r["power.draw"] > 150 for r in loaded), loaded
        capped = [r for r in loaded if r["throttle_reasons_active"] == ["sw_power_cap"]]
        assert capped, loaded
        assert all(r["utilization.gpu"] == 100 and r["power.limit"] - 3 <= r["power.draw"] <= r["power.limit"]
                   and 1485 <= r["clocks.current.sm"] <= 1620 for r in capped), capped
        assert loaded[-1]["temperature.gpu"] > node1[gpu][0]["temperature.gpu"], "it warms under load"
        if gpu != 6:
            assert all(r["clocks_event_reasons.active"] == 0 and r["utilization.gpu"] == 0
                       and r["clocks.current.sm"] == 1980 and r["power.draw"] < 150 for r in node3[gpu]), node3[gpu]
    # node3 (idle): GPU 2's corrected errors grow from 2 s, GPU 6's clock sags with no reason
    ecc = [r["ecc.errors.corrected.volatile.total"] for r in node3[2]]
    assert ecc[0] == 0 and ecc == sorted(ecc) and ecc[-1] >= 6
    assert node3[6][-1]["clocks.current.sm"] == 1200 and node3[6][-1]["clocks_event_reasons.active"] == 0
    # node2 (busy, 9 samples): GPU 5 hot from 3 s, 92 C by 7 s: HW thermal slowdown on top of the power cap
    hot = node2[5][-1]
    assert hot["temperature.gpu"] == 92 and hot["clocks.current.sm"] == 990
    assert "hw_thermal_slowdown" in hot["throttle_reasons_active"] and hot["utilization.gpu"] > 0
    assert "hw_thermal_slowdown" not in node2[4][-1]["throttle_reasons_active"]
