"""RDMA checks (checks/rdma.py) on real perftest captures and synthetic records."""

from __future__ import annotations

import re

from clustereval import checks
from clustereval.checks import Context
from clustereval.results import problems
from tests.conftest import corpus_files, read_corpus

BW = "ib_write_bw-roce-gid5-all-sizes-report-gbits-k8s-pods.txt"  # 92.46 Gbit/s on 100 GbE
LAT = "ib_write_lat-roce-rdmacm-dgx-spark.txt"  # 1.47 µs typical


def facts(rate="100G", cls="roce"):
    return {h: {"nics": [f"mlx5_0/1 {cls} {rate}", "mlx5_1/1 roce down"]} for h in ("n1", "n2", "n3", "n4")}


def rec(tool, src, dst, stdout, **extra):
    name = f"perftest@{tool}.mlx5_0.{src}.{dst}"
    return name, {"name": name, "cmd": tool, "rc": 0, "stdout": stdout, "stderr": "", "timed_out": False,
                  "missing": False, "artifact": f"raw/{src}/{name}.txt",
                  "params": {"tool": tool, "device": "mlx5_0", "src": src, "dst": dst, "memory": "cuda"}, **extra}


def judge(check_id, records, host_facts=None):
    host_probes: dict = {}
    for src, (name, record) in records:
        host_probes.setdefault(src, {})[name] = record
    results = checks.evaluate_many(check_id, Context(subject="_cluster", host_probes=host_probes,
                                                     host_facts=facts() if host_facts is None else host_facts), "run-1")
    for result in results:
        assert problems(result) == [], result
    return results


def bw(src, dst, scale=1.0, stdout=None, **extra):
    text = stdout if stdout is not None else read_corpus("perftest", BW)
    if scale != 1.0:
        # every bandwidth cell of the table (two-digit Gbit/s values)
        text = re.sub(r"\b\d{2}\.\d\d\b", lambda m: f"{float(m.group()) * scale:.2f}", text)
    return src, rec("ib_write_bw", src, dst, text, **extra)


def test_bandwidth_pass_warn_fail_skip_error():
    assert [r["status"] for r in judge("network.rdma.bandwidth", [bw("n1", "n2")])] == ["pass"]
    result = judge("network.rdma.bandwidth", [bw("n1", "n2")], facts("200G"))[0]
    assert result["status"] == "fail" and result["subject"] == "n1->n2" and result["params"]["device"] == "mlx5_0"
    assert judge("network.rdma.bandwidth", [bw("n1", "n2")], facts("110G"))[0]["status"] == "warn"
    assert judge("network.rdma.bandwidth", [bw("n1", "n2")], {})[0]["status"] == "skip"
    assert judge("network.rdma.bandwidth", [bw("n1", "n2", missing=True)])[0]["status"] == "skip"
    assert judge("network.rdma.bandwidth", [bw("n1", "n2", stdout="garbage\n")])[0]["status"] == "error"
    hung = judge("network.rdma.bandwidth", [bw("n1", "n2", timed_out=True, timeout=60)])[0]
    assert hung["status"] == "fail" and "hang" in hung["summary"]
    assert judge("network.rdma.bandwidth", [])[0]["status"] == "skip"


def test_latency_on_a_real_capture():
    lat = ("n1", rec("ib_write_lat", "n1", "n2", read_corpus("perftest", LAT)))
    result = judge("network.rdma.latency", [lat])[0]
    assert result["status"] == "pass" and result["value"] == 1.47 and result["unit"] == "µs"
    slow = ("n1", rec("ib_write_lat", "n1", "n2", read_corpus("perftest", LAT).replace("1.47", "9.47")))
    assert judge("network.rdma.latency", [slow])[0]["status"] == "warn"


def test_rail_isolation_names_the_slow_rail():
    ring = [bw("n1", "n2"), bw("n2", "n3", 0.5), bw("n3", "n4", 0.5), bw("n4", "n1")]
    results = {r["subject"]: r["status"] for r in judge("network.rdma.rail_isolation", ring)}
    assert results["n3/mlx5_0"] == "fail" and results["n1/mlx5_0"] == "pass"
    mild = [bw("n1", "n2"), bw("n2", "n3", 0.75), bw("n3", "n4", 0.75), bw("n4", "n1")]
    assert {r["subject"]: r["status"] for r in judge("network.rdma.rail_isolation", mild)}["n3/mlx5_0"] == "warn"
    assert judge("network.rdma.rail_isolation", [bw("n1", "n2")])[0]["status"] == "skip"


def control(stdout, **extra):
    return "n1", ("rdma_control@n1", {"name": "rdma_control@n1", "cmd": "ibv_devinfo", "rc": 0, "stdout": stdout,
                                     "stderr": "", "timed_out": False, "missing": False, **extra})


def test_control_path_every_status():
    devinfo = corpus_files("ibv_devinfo")[0].read_text(errors="replace")
    ok = f"# device mlx5_0 rc=0 seconds=0.2 timeout=10\n{devinfo}"
    assert judge("network.rdma.control_path", [control(ok)])[0]["status"] == "pass"
    slow = f"# device mlx5_0 rc=0 seconds=8 timeout=10\n{devinfo}"
    assert judge("network.rdma.control_path", [control(slow)])[0]["status"] == "warn"
    dead = ok + "# device mlx5_0 rc=124 seconds=10 timeout=10\n"
    result = judge("network.rdma.control_path", [control(dead)])[0]
    assert result["status"] == "fail" and "mlx5_0" in result["summary"]
    assert judge("network.rdma.control_path", [control("", missing=True)])[0]["status"] == "skip"
    assert judge("network.rdma.control_path", [control("nothing\n")])[0]["status"] == "error"
    assert judge("network.rdma.control_path", [control("", timed_out=True, timeout=30)])[0]["status"] == "fail"
