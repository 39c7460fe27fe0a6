"""Collective checks (checks/collectives*.py) on real nccl-tests / rccl-tests captures and synthetic records."""

from __future__ import annotations

import json
import re

import pytest

from clustereval import checks
from clustereval.checks import Context
from clustereval.results import problems
from tests.conftest import read_corpus

P5 = "all_reduce_perf-srun-l-rank-prefix-0-2x-p5-efa-8B-16G.txt"
MI300X = "all_reduce_perf-mi300x-x8-k8s-rccltests-a7809b3.txt"
OLD_ERR = "all_reduce_perf-old-format-k8s-sriov-roce-2e-07-errors-avg-7.77.txt"
FAILED = "all_reduce_perf-FAIL-cuda-system-not-yet-initialized-h100-no-fabricmanager.txt"
H100 = {"gpu_model": "NVIDIA H100 80GB HBM3", "gpu_count": 8, "fabric_class": "efa", "fabric_rate_gbps": 100,
        "fabric_ports_active": 32}
MI = {"gpu_model": "AMD Instinct MI300X", "gpu_count": 8}


def record(name, stdout, params=None, parser="rccl-tests", **extra):
    return {"name": name, "cmd": "all_reduce_perf -b 8 -e 16G -f 2 -g 1", "rc": 0, "stdout": stdout, "stderr": "",
            "timed_out": False, "missing": False, "params": params or {}, "parser": parser,
            "artifact": f"raw/n1/{name}.txt", **extra}


def unchecked_mi300x():
    """The MI300X capture with its #wrong cells N/A (data checking off)."""
    out = []
    for line in read_corpus("rccl-tests", MI300X).splitlines():
        cells = line.split()
        if len(cells) == 13 and cells[0].isdigit():
            cells[8] = cells[12] = "N/A"
            line = "  ".join(cells)
        out.append(line)
    return "\n".join(out) + "\n"


def mi300x(scale=1.0, sizes=None):
    """The MI300X rccl-tests capture with busbw (and algbw) scaled, optionally only at ``sizes``."""
    out = []
    for line in read_corpus("rccl-tests", MI300X).splitlines():
        cells = line.split()
        if len(cells) == 13 and cells[0].isdigit() and (sizes is None or int(cells[0]) in sizes):
            for i in (6, 7, 10, 11):
                cells[i] = f"{float(cells[i]) * scale:.2f}"
            line = "  ".join(cells)
        out.append(line)
    return "\n".join(out) + "\n"


def judge(check_id, host_probes, host_facts=None):
    ctx = Context(subject="_cluster", host_probes=host_probes, host_facts=host_facts or {"m1": MI})
    results = checks.evaluate_many(check_id, ctx, "run-1")
    for result in results:
        assert problems(result) == [], result
        if result["status"] == "pass":
            assert not re.search(r"below|above|jagged|wrong|hang|fail", result["summary"]), result["summary"]
    return results


def single(stdout, **extra):
    return {"m1": {"nccl@all_reduce.n1": record("nccl@all_reduce.n1", stdout, {"nodes": ["m1"], "world_size": 8,
                                                                                "launcher": "mpirun"}, **extra)}}


def by_size(results):
    return {r["params"]["size"]: r for r in results}


def test_busbw_on_a_real_mi300x_capture_passes_at_every_size_with_its_curve():
    results = by_size(judge("network.nccl.busbw", single(read_corpus("rccl-tests", MI300X))))
    statuses = {s: r["status"] for s, r in results.items()}
    assert statuses == dict.fromkeys(["64KiB", "64MiB", "1GiB", "8GiB", "peak"], "pass")
    assert results["64KiB"]["unit"] == "µs" and results["8GiB"]["value"] == pytest.approx(315.91)
    assert results["8GiB"]["expected"]["matched"] == "mi300x-8gpu" and "stas00" in results["8GiB"]["expected"]["source"]
    assert results["peak"]["subject"] == "m1" and results["peak"]["params"]["nodes"] == 1
    assert results["peak"]["series"][0]["data"] and "data" not in results["1GiB"]["series"][0]


def test_busbw_warns_and_fails_below_the_figure_and_skips_unknown_hardware():
    warn = by_size(judge("network.nccl.busbw", single(mi300x(0.88))))
    assert warn["8GiB"]["status"] == "warn" and "below" in warn["8GiB"]["summary"]
    fail = by_size(judge("network.nccl.busbw", single(mi300x(0.5))))
    assert fail["8GiB"]["status"] == "fail" and fail["peak"]["status"] == "fail"
    cpu = by_size(judge("network.nccl.busbw", single(mi300x()), {"m1": {"gpu_model": None, "cpu_model": "EPYC"}}))
    assert cpu["8GiB"]["status"] == "skip" and "gpu_model=None" in cpu["8GiB"]["summary"]


def test_busbw_multi_node_efa_capture_against_the_node_network_bandwidth():
    probes = {"n1": {"nccl@all_reduce.n2": record("nccl@all_reduce.n2", read_corpus("nccl-tests", P5),
                                                 {"nodes": "n1,n2", "launcher": "srun"}, parser="nccl-tests")}}
    results = by_size(judge("network.nccl.busbw", probes, {"n1": H100, "n2": H100}))
    assert results["8GiB"]["status"] == "pass" and results["8GiB"]["expected"]["matched"] == "multinode-efa"
    assert results["8GiB"]["subject"] == "n1+n2" and results["8GiB"]["params"]["nodes"] == 2


def test_no_run_missing_binary_failure_and_parse_error():
    assert judge("network.nccl.busbw", {"m1": {}})[0]["status"] == "skip"
    missing = judge("network.nccl.completion", single("", missing=True, rc=127))[0]
    assert missing["status"] == "skip" and "nccl-tests" in missing["summary"]
    failed = judge("network.nccl.completion", single(read_corpus("nccl-tests", FAILED), rc=1))[0]
    assert failed["status"] == "fail" and "failed before its results" in failed["summary"]
    garbage = judge("network.nccl.correctness", single("hello\n"))[0]
    assert garbage["status"] == "error"
    launcher = judge("network.nccl.completion", single("", rc=1, stderr="There are not enough slots available"))[0]
    assert launcher["status"] == "fail" and "did not start" in launcher["summary"]


def test_completion_hang_is_a_fail_with_last_lines_and_hints():
    hung = single("#  Rank  0 ...\n       8     2   float   sum  -1   30.1  0.00  0.00  0\n", timed_out=True,
                  timeout=600, on_timeout="fail")
    result = judge("network.nccl.completion", hung, {"m1": {**MI, "fabric_class": "roce"}})[0]
    assert result["status"] == "fail" and "hang" in result["summary"] and "NCCL_IB_GID_INDEX" in result["summary"]
    assert result["evidence"]["last_lines"]


def test_completion_pass_warn_and_cut_output():
    assert judge("network.nccl.completion", single(read_corpus("rccl-tests", MI300X)))[0]["status"] == "pass"
    warned = judge("network.nccl.completion", single(read_corpus("rccl-tests", MI300X), rc=1))[0]
    assert warned["status"] == "warn"
    cut = judge("network.nccl.completion", single(read_corpus("rccl-tests", MI300X).split("# Avg bus")[0]))[0]
    assert cut["status"] == "fail" and "stopped after" in cut["summary"]


def test_correctness_wrong_elements_old_error_column_and_unchecked():
    assert judge("network.nccl.correctness", single(read_corpus("rccl-tests", MI300X)))[0]["status"] == "pass"
    text = read_corpus("rccl-tests", MI300X).replace("  0    13.82", "  5    13.82", 1)
    wrong = judge("network.nccl.correctness", single(text))[0]
    assert wrong["status"] == "fail" and "64 KiB" in wrong["summary"] and wrong["value"] == 1
    old = single(read_corpus("nccl-tests", OLD_ERR), parser="nccl-tests")
    assert judge("network.nccl.correctness", old)[0]["status"] == "pass"
    bigger = single(read_corpus("nccl-tests", OLD_ERR).replace("5e-07", "5e-03"), parser="nccl-tests")
    assert judge("network.nccl.correctness", bigger)[0]["status"] == "fail"
    suspicious = single(read_corpus("nccl-tests", OLD_ERR).replace("5e-07", "2e-04"), parser="nccl-tests")
    assert judge("network.nccl.correctness", suspicious)[0]["status"] == "warn"
    unchecked = single(unchecked_mi300x())
    assert judge("network.nccl.correctness", unchecked)[0]["status"] == "skip"


def test_curve_shape_smooth_jagged_and_broken():
    assert judge("network.nccl.curve_shape", single(read_corpus("rccl-tests", MI300X)))[0]["status"] == "pass"
    dip = {1 << 30, 2 << 30}
    text = mi300x(0.8, dip)
    jagged = judge("network.nccl.curve_shape", single(text))[0]
    assert jagged["status"] == "warn" and "jagged curve" in jagged["summary"] and "aws-ofi-nccl" in jagged["summary"]
    broken = judge("network.nccl.curve_shape", single(mi300x(0.3, dip)))[0]
    assert broken["status"] == "fail"
    kept = [line for line in read_corpus("rccl-tests", MI300X).splitlines()
            if not (line.split()[:1] and line.split()[0].isdigit() and int(line.split()[0]) > 2 << 20)]
    few = judge("network.nccl.curve_shape", single("\n".join(kept) + "\n"))[0]
    assert few["status"] == "skip"


def pair(a, b, stdout):
    return record(f"nccl@all_reduce.pair-{a}-{b}", stdout, {"nodes": [a, b]})


def test_isolation_names_the_bad_node_from_pair_runs():
    base = read_corpus("rccl-tests", MI300X)
    probes = {}
    for a, b, scale in (("m1", "m2", 1.0), ("m3", "m4", 0.5), ("m1", "m3", 0.5), ("m2", "m4", 1.0)):
        name = f"nccl@all_reduce.pair-{a}-{b}"
        probes.setdefault(a, {})[name] = record(name, mi300x(scale) if scale != 1.0 else base, {"nodes": [a, b]})
    facts = {h: {"gpu_model": None} for h in ("m1", "m2", "m3", "m4")}
    result = judge("network.nccl.isolation", probes, facts)[0]
    assert result["status"] == "fail" and result["value"] == ["m3"] and "m3" in result["summary"]
    first = ("nccl@all_reduce.pair-m1-m2", "nccl@all_reduce.pair-m3-m4")
    first_round = {h: {n: r for n, r in p.items() if n in first} for h, p in probes.items()}
    first_round["m2"] = {"nccl@all_reduce.pair-m2-m5": pair("m2", "m5", base)}
    assert judge("network.nccl.isolation", first_round, facts)[0]["status"] == "warn"
    healthy = {"m1": {"nccl@all_reduce.pair-m1-m2": pair("m1", "m2", base)}}
    assert judge("network.nccl.isolation", healthy, facts)[0]["status"] == "pass"
    assert judge("network.nccl.isolation", single(base))[0]["status"] == "skip"
    broken = {"m1": {"nccl@all_reduce.pair-m1-m2": pair("m1", "m2", "junk")}}
    assert judge("network.nccl.isolation", broken, facts)[0]["status"] == "error"


def torch_lines(sizes, busbw=1.5, backend="gloo", device="cpu", correct=True, done=True, world=4):
    rows = [json.dumps({"collective": "all_reduce", "size_bytes": s, "time_s": 0.01, "algbw_gbps": busbw / 1.5,
                        "busbw_gbps": busbw, "world_size": world, "backend": backend, "device": device,
                        "correct": correct}) for s in sizes]
    return "\n".join(rows + ([json.dumps({"event": "done"})] if done else [])) + "\n"


def torch_probes(stdout, **extra):
    return {"m1": {"torchdist@all_reduce": {**record("torchdist@all_reduce", stdout, {"nodes": ["m1"]}, **extra),
                                            "parser": "torch-distributed"}}}


def test_torchdist_gloo_on_cpu_and_nccl_on_gpu():
    cpu = judge("network.torchdist.busbw", torch_probes(torch_lines([1 << 20, 1 << 26])))
    assert [r["status"] for r in cpu] == ["pass"] and cpu[0]["params"]["device"] == "cpu"
    slow = judge("network.torchdist.busbw", torch_probes(torch_lines([1 << 20], busbw=0.0005)))
    assert slow[0]["status"] == "fail"
    gpu = by_size(judge("network.torchdist.busbw", torch_probes(
        torch_lines([1 << 26, 1 << 30, 8 << 30], busbw=250.0, backend="nccl", device="cuda", world=8))))
    assert gpu["8GiB"]["status"] == "fail" and gpu["8GiB"]["expected"]["matched"] == "mi300x-8gpu"
    good = by_size(judge("network.torchdist.busbw", torch_probes(
        torch_lines([1 << 26, 1 << 30, 8 << 30], busbw=280.0, backend="nccl", device="cuda", world=8))))
    assert good["8GiB"]["status"] == "warn" and good["64MiB"]["status"] == "pass"
    assert judge("network.torchdist.busbw", torch_probes("", missing=True))[0]["status"] == "skip"
    assert judge("network.torchdist.busbw", torch_probes("nonsense\n"))[0]["status"] == "error"


def test_torchdist_correctness_every_status():
    def status(stdout, **extra):
        return judge("network.torchdist.correctness", torch_probes(stdout, **extra))[0]["status"]

    assert status(torch_lines([1 << 20])) == "pass"
    assert status(torch_lines([1 << 20], correct=False)) == "fail"
    assert status(torch_lines([1 << 20], done=False)) == "fail"
    done = '{"event": "done"}'
    caught = torch_lines([1 << 20]).replace(done, '{"event": "error", "message": "x"}\n' + done)
    assert judge("network.torchdist.correctness", torch_probes(caught))[0]["status"] == "warn"
    assert judge("network.torchdist.correctness", torch_probes("", missing=True))[0]["status"] == "skip"
    assert judge("network.torchdist.correctness", torch_probes("nonsense\n"))[0]["status"] == "error"


def test_on_amd_nodes_the_gpu_link_and_the_plugins_are_rccls():
    amd = {"m1": {**MI, "gpu_vendor": "amd"}}
    dip = {1 << 30, 2 << 30}
    jagged = judge("network.nccl.curve_shape", single(mi300x(0.8, dip)), amd)[0]
    assert jagged["status"] == "warn" and "aws-ofi-rccl" in jagged["summary"] and "nccl-rdma" not in jagged["summary"]
    off = {"m1": {"nccl@all_reduce.n1-nonvlink": record(
        "nccl@all_reduce.n1-nonvlink", read_corpus("rccl-tests", MI300X),
        {"nodes": ["m1"], "world_size": 8, "launcher": "mpirun", "nvlink": False})}}
    summaries = [r["summary"] for r in judge("network.nccl.completion", off, amd)]
    assert summaries and all("(XGMI off)" in s and "NVLink" not in s for s in summaries)
    nvidia = [r["summary"] for r in judge("network.nccl.completion", off, {"m1": {**MI, "gpu_vendor": "nvidia"}})]
    assert all("(NVLink off)" in s for s in nvidia)
