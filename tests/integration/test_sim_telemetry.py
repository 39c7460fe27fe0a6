"""A telemetry sampler's view of the simulated cluster over real SSH: ``nvidia-smi --query-gpu ... -lms 1000``
on node3 of ``telemetry-faults`` while ``tail -F`` follows its kernel log. The loop sees GPU 1 throttle at
3 s and GPU 2 fall off the bus at 5 s; the Xid reaches node3's own /var/log/kern.log (never the host's)
and /sim/kmsg, and Slurm's health check drains node3 with reason "XID 79".
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from clustereval import parsers
from clustereval.sim import cluster
from tests.integration.simrun import REQUIRES_SIM, read_inventory, simulated_cluster, ssh

pytestmark = REQUIRES_SIM

FIELDS = ("timestamp,index,pci.bus_id,temperature.gpu,temperature.memory,power.draw,power.limit,"
          "clocks.current.sm,clocks.current.memory,utilization.gpu,clocks_event_reasons.active,"
          "ecc.errors.corrected.volatile.total,ecc.errors.uncorrected.volatile.total")
SAMPLER = (
    "rm -f /sim/scratch/kern.tail; "
    "tail -F -n 0 /var/log/kern.log > /sim/scratch/kern.tail 2>/dev/null & TAIL=$!; sleep 0.3; "
    f"timeout 8 nvidia-smi --query-gpu={FIELDS} --format=csv -lms 1000; echo \"loop-rc=$?\"; "
    "sleep 0.5; kill $TAIL; echo ---kern.log---; cat /sim/scratch/kern.tail"
)
DRAIN_TIMEOUT_S = 40  # HealthCheckInterval is 30 s in the simulated cluster


def fingerprint(path: Path) -> tuple[int, int] | None:
    return (path.stat().st_size, path.stat().st_mtime_ns) if path.exists() else None


def test_sampler_on_node3_sees_the_throttle_and_the_xid_and_slurm_drains_it(tmp_path):
    host_log = Path("/var/log/kern.log")
    host_before = fingerprint(host_log)
    with simulated_cluster(tmp_path / "sim", 3, "telemetry-faults") as sim:
        hosts, _ = read_inventory(sim)
        status = cluster.status(sim)
        assert status["nodes"]["node3"]["slurm_state"] == "idle"
        assert ssh(sim, hosts["node3"], "cat /var/log/kern.log").stdout == ""

        out = ssh(sim, hosts["node3"], SAMPLER)
        assert out.returncode == 0, out.stderr
        csv, kern = out.stdout.split("---kern.log---\n")
        assert csv.rstrip().endswith("loop-rc=124")  # ran until timeout killed it
        result = parsers.parse("nvidia-smi-query-loop", csv.rsplit("loop-rc=", 1)[0])
        assert result["complete"] and result["warnings"] == []
        rows = result["rows"]
        assert len(rows) >= 7 * 8 and result["gpu_indices"] == list(range(8))
        gpu1 = [r for r in rows if r["index"] == 1]
        assert gpu1[0]["clocks_event_reasons.active"] == 0 and gpu1[0]["clocks.current.sm"] == 1980
        assert gpu1[-1]["throttle_reasons_active"] == ["hw_slowdown"] and gpu1[-1]["clocks.current.sm"] == 900
        gpu2 = [r for r in rows if r["index"] == 2]
        assert gpu2[0]["temperature.gpu"] is not None and gpu2[-1]["temperature.gpu"] is None

        # the sampler's tail saw the driver's lines, once, in rsyslog's format
        assert kern.count("NVRM: Xid") == 1
        xid = parsers.parse("kernel-xid", kern)
        assert xid["counts_by_code"] == {"79": 1} and xid["events"][0]["host"] == "node3"
        assert xid["events"][0]["pci"] == "0000:4c:00"
        kmsg = ssh(sim, hosts["node3"], "cat /sim/kmsg").stdout
        assert kmsg.count("NVRM: Xid (PCI:0000:4c:00): 79, pid=1824, name=python, GPU has fallen off the bus.") == 1

        # only node3's kernel log changed: not node1's view, not the host's file
        assert "NVRM" not in ssh(sim, hosts["node1"], "cat /var/log/kern.log 2>/dev/null; cat /sim/kmsg").stdout
        assert fingerprint(host_log) == host_before

        # Slurm's HealthCheckProgram (every 30 s) reads node3's /sim/kmsg and drains it
        env = {**os.environ, "SLURM_CONF": status["slurm_conf"]}
        deadline = time.monotonic() + DRAIN_TIMEOUT_S
        state = ""
        while time.monotonic() < deadline:
            state = subprocess.run(["sinfo", "-h", "-N", "-n", "node3", "-o", "%t|%E"], env=env,
                                   capture_output=True, text=True, timeout=20).stdout.strip()
            if state.startswith("drain"):
                break
            time.sleep(1)
        assert state == "drain|XID 79", state
        others = cluster.status(sim)["nodes"]
        assert others["node1"]["slurm_state"] == "idle" and others["node2"]["slurm_state"] == "idle"
    assert fingerprint(host_log) == host_before


@pytest.fixture(autouse=True)
def _no_host_kern_log_left_behind():
    host_log = Path("/var/log/kern.log")
    existed = host_log.exists()
    yield
    assert host_log.exists() == existed
