"""On an AMD node the nccl-tests shim is rccl-tests: the rccl-tests layout line for line against the corpus
captures (ROCm/rccl-tests develop, RCCL 2.26.x / ROCm 7.0), RCCL's version banner, figures from the profile's
fabric, and the nccl_* faults, read back by the project's parser."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import time
from pathlib import Path

import pytest

from clustereval.parsers import parse
from clustereval.sim.cluster import SHIMS
from clustereval.sim.profile import load_profile, render_node
from tests.conftest import read_corpus
from tests.unit.test_sim_fabric_shims import launchers, make_node, run

TOOLS = [t for t, m in SHIMS.items() if m == "nccl_tests.py"]
A7809B3 = "all_reduce_perf-mi300x-x8-k8s-rccltests-a7809b3.txt"     # 8 ranks x 1 GPU, NCCL_DEBUG unset
D5272CD1 = "all_reduce_perf-2node-mi355x-pollara400-rccl2.26.6.txt"  # 2 x 8 ranks, NCCL_DEBUG=Version, -N 2
OCI = "all_reduce_perf-mi355x-8gpu-pollara-truncated.txt"            # trailing blanks kept as printed


@pytest.fixture(scope="module")
def bindir(tmp_path_factory) -> Path:
    return launchers(tmp_path_factory.mktemp("bin"), TOOLS)


def faulty_profile(tmp: Path, faults: str) -> Path:
    path = tmp / "amd-nccl-fault.yml"
    path.write_text(f"extends: amd-mi300x\nnodes:\n  node1:\n    faults:\n{faults}")
    return path


def launch(bindir: Path, roots: list[Path], per_node: int, *argv: str, env: dict | None = None,
           job: str = "41") -> tuple[list[str], list[int]]:
    """One job of ``per_node`` tasks on each node (srun's environment), every task's stdout and status."""
    procs = []
    ntasks = len(roots) * per_node
    for n, root in enumerate(roots):
        for local in range(per_node):
            task = {"SLURM_JOB_ID": job, "SLURM_STEP_ID": "0", "SLURM_PROCID": str(n * per_node + local),
                    "SLURM_NTASKS": str(ntasks), "SLURM_LOCALID": str(local), "SIMNODE_NCCL_BOOTSTRAP_TIMEOUT_S": "10"}
            procs.append(subprocess.Popen([str(bindir / argv[0]), *argv[1:]], stdout=subprocess.PIPE, text=True,
                                          env={"PATH": os.environ["PATH"], "SIMNODE_ROOT": str(root), **task,
                                               **(env or {})}))
    outs = [p.communicate(timeout=60)[0] for p in procs]
    return outs, [p.returncode for p in procs]


def mask(line: str) -> str:
    """A header line with what differs from host to host masked: pids, host names, PCI addresses, device names
    (empty in the MI355X capture), build strings and paths. Trailing blanks go too: the Markdown captures lost
    theirs (the OCI capture keeps them; compared separately)."""
    line = re.sub(r"Pid\s+\d+ on\s+\S+ device\s+\d+ \[[0-9a-f:]+\].*", "Pid P on H device D [BDF]", line)
    line = re.sub(r"^(rccl-tests: Version |RCCL version : |HIP version  : |ROCm version : |Hostname     : |"
                  r"Librccl path : ).*", r"\1V", line)
    return line.rstrip()


def header(lines: list[str], first: str) -> list[str]:
    """From the line starting with ``first`` through the ``(B)`` units line and, with -N, ``# Testing 1 cycle.``"""
    start = next(i for i, line in enumerate(lines) if line.startswith(first))
    end = next(i for i, line in enumerate(lines) if line.startswith("#        (B)"))
    if end + 1 < len(lines) and lines[end + 1].startswith("# Testing"):
        end += 1
    return lines[start:end + 1]


def columns(line: str) -> list[int]:
    return [m.end() for m in re.finditer(r"\S+", line)]


def rows(lines: list[str]) -> list[str]:
    return [line for line in lines if re.match(r"^ +\d+ +\d+ +\w+ ", line)]


def test_eight_mi300x_ranks_print_the_a7809b3_layout(bindir, tmp_path):
    root = make_node(tmp_path, "amd-mi300x", "node1")
    outs, codes = launch(bindir, [root], 8, "all_reduce_perf", "-b", "8", "-e", "8G", "-f", "2", "-g", "1")
    assert codes == [0] * 8 and outs[1:] == [""] * 7  # only rank 0 prints, as with mpirun -np 8
    ours = outs[0].splitlines()
    real = read_corpus("rccl-tests", A7809B3).splitlines()
    assert ours[0] == "# Collective test starting: all_reduce_perf"  # the capture's <snip> took that line
    assert [mask(line) for line in header(ours, "# nThread")] == [mask(line) for line in header(real, "# nThread")]
    # same 31 sizes, every column ending where rccl-tests ends it (times %7.0f/%7.1f/%7.2f, #wrong %5g)
    assert len(rows(ours)) == len(rows(real)) == 31
    for mine, theirs in zip(rows(ours), rows(real), strict=True):
        assert columns(mine) == columns(theirs), (mine, theirs)
    footer = ours[ours.index(rows(ours)[-1]) + 1:]
    assert [re.sub(r"[\d.]+$", "X", line.rstrip()) for line in footer[:4]] == \
        [re.sub(r"[\d.]+$", "X", line.rstrip()) for line in real[-4:]]
    assert footer[4:] == ["# Collective test concluded: all_reduce_perf"]

    parsed = parse("nccl-tests", outs[0])
    assert parsed["complete"] and parsed["concluded"] and parsed["collective"] == "all_reduce_perf"
    assert parsed["nranks"] == 8 and parsed["tests_version"] == "develop:a7809b3"
    assert parsed["params"]["warmup_iters"] == 5 and parsed["params"]["ngpus"] == 1
    assert {d["name"] for d in parsed["devices"]} == {"AMD Instinct MI300X"}
    assert len({d["pid"] for d in parsed["devices"]}) == 8 and parsed["hosts"] == [socket.gethostname()]
    assert [d["bus_id"] for d in parsed["devices"]] == [f"0000:{b}:00" for b in
                                                        ("05", "26", "46", "65", "85", "a6", "c6", "e5")]
    assert parsed["rccl_version"] is None  # NCCL_DEBUG unset: RCCL prints no banner (neither does the capture)
    assert parsed["wrong_total"] == 0 and parsed["out_of_bounds"] == 0 and parsed["out_of_bounds_ok"]


def test_mi300x_versions_plateau_and_trailing_blanks(bindir, tmp_path):
    root = make_node(tmp_path, "amd-mi300x", "node1")
    state = render_node(load_profile("amd-mi300x"), "node1")
    proc = run(bindir, root, "all_reduce_perf", "-b", "8", "-e", "8G", "-f", "2", "-g", "8", env={"NCCL_DEBUG": "WARN"})
    assert proc.returncode == 0, proc.stderr
    parsed = parse("nccl-tests", proc.stdout)
    assert parsed["complete"] and parsed["nranks"] == 8 and len(parsed["rows"]) == 31
    assert parsed["rccl_version"] == "2.26.6-HEAD:6ade506"  # the RCCL 2.26.6 build string of the corpus
    assert parsed["hip_version"] == "7.0.51831-a3e329ad8"
    assert parsed["rocm_version"].startswith(f"{state['amd']['rocm_version']}.0-")
    plateau = state["fabric"]["nvlink_busbw_gbps"]
    assert 0.95 * plateau < parsed["max_busbw_gbps"] < 1.05 * plateau
    assert parsed["rows"][0]["busbw_gbps"] < 1  # latency-bound
    row = parsed["rows"][-1]
    assert row["busbw_gbps"] == pytest.approx(row["algbw_gbps"] * 2 * 7 / 8, rel=0.01)
    ours = proc.stdout.splitlines()
    assert f"Hostname     : {socket.gethostname()}" in ours
    assert f"Librccl path : /opt/rocm-{state['amd']['rocm_version']}/lib/librccl.so.1" in ours
    # the OCI capture kept the blanks rccl-tests prints after "in-place", after the units line, after the average
    real = read_corpus("rccl-tests", OCI).splitlines()
    assert header(ours, "#  ")[-3:] == real[1:4]
    assert ours[-5:-3] == real[-5:-3]
    assert re.fullmatch(r"# Avg bus bandwidth    : [\d.]+ ", ours[-3]) and re.fullmatch(r"# Avg.* ", real[-3])
    assert ours[-2:] == real[-2:]


def test_two_mi355x_nodes_print_the_rccl_2_26_6_layout(bindir, tmp_path):
    roots = [make_node(tmp_path, "amd-mi355x", node) for node in ("node1", "node2")]
    outs, codes = launch(bindir, roots, 1, "all_reduce_perf", "-b", "8", "-e", "16G", "-f", "2", "-g", "8", "-n",
                         "20", "-N", "2", env={"NCCL_DEBUG": "Version"})
    assert codes == [0, 0] and outs[1] == ""
    ours = outs[0].splitlines()
    real = read_corpus("rccl-tests", D5272CD1).splitlines()
    assert [mask(line) for line in header(ours, "rccl-tests:")] == \
        [mask(line) for line in header(real, "rccl-tests:")]
    assert ours.count("# Testing 2 cycle.") == 1
    parsed = parse("nccl-tests", outs[0])
    assert parsed["complete"] and parsed["nranks"] == 16 and parsed["rccl_version"].startswith("2.26.6-HEAD:")
    assert {d["name"] for d in parsed["devices"]} == {"AMD Instinct MI355X"}
    assert len(parsed["rows"]) == 2 * 32  # two cycles of 8 B .. 16 GiB
    # across nodes the rails pace the ring: 8 x 400 Gb/s x 0.96 < the 410 GB/s over XGMI
    assert 340 < parsed["max_busbw_gbps"] < 395


def test_single_mi355x_node_plateaus_near_its_xgmi_figure(bindir, tmp_path):
    root = make_node(tmp_path, "amd-mi355x", "node1")
    plateau = render_node(load_profile("amd-mi355x"), "node1")["fabric"]["nvlink_busbw_gbps"]
    for tool, factor in (("all_reduce_perf", 2 * 7 / 8), ("alltoall_perf", 7 / 8)):
        proc = run(bindir, root, tool, "-b", "1M", "-e", "16G", "-f", "4", "-g", "8")
        parsed = parse("nccl-tests", proc.stdout)
        assert proc.returncode == 0 and parsed["complete"] and parsed["nranks"] == 8
        row = parsed["rows"][-1]
        assert row["busbw_gbps"] == pytest.approx(row["algbw_gbps"] * factor, rel=0.02)
    assert parsed["rows"][-1]["in_place_wrong"] is None  # alltoall in place: N/A, as in the OCI capture
    assert 0.8 * plateau < parsed["max_busbw_gbps"] < plateau  # alltoall runs at 0.9 of the plateau
    parsed = parse("nccl-tests", run(bindir, root, "all_reduce_perf", "-b", "1G", "-e", "16G", "-f", "2", "-g",
                                     "8").stdout)
    assert 0.95 * plateau < parsed["max_busbw_gbps"] < 1.05 * plateau


def test_rccl_all_gather_hang_at_32k_stops_the_table_there(bindir, tmp_path):
    profile = faulty_profile(tmp_path, "      nccl_hang: {collective: all_gather, size: 32768}\n")
    root = make_node(tmp_path, profile, "node1")
    proc = subprocess.Popen([str(bindir / "all_gather_perf"), "-b", "8", "-e", "1M", "-f", "2", "-g", "8"],
                            stdout=subprocess.PIPE, text=True, env={"SIMNODE_ROOT": str(root)})
    time.sleep(1.5)
    assert proc.poll() is None  # hung, like the NVIDIA one: until the launcher kills it
    proc.kill()
    text = proc.communicate()[0]
    assert "rccl-tests: Version" in text and "# Avg bus bandwidth" not in text
    parsed = parse("nccl-tests", text)
    assert not parsed["complete"] and parsed["rows"][-1]["size_bytes"] == 16384
    done = run(bindir, root, "all_reduce_perf", "-b", "8", "-e", "1M", "-f", "2", "-g", "8")
    assert done.returncode == 0 and parse("nccl-tests", done.stdout)["complete"]  # only all_gather hangs


def test_wrong_results_fail_the_run_and_min_bw(bindir, tmp_path):
    profile = faulty_profile(tmp_path, "      nccl_wrong: {collective: reduce_scatter, sizes: [2M, 4M]}\n")
    root = make_node(tmp_path, profile, "node1")
    proc = run(bindir, root, "reduce_scatter_perf", "-b", "1M", "-e", "8M", "-f", "2", "-g", "8")
    parsed = parse("nccl-tests", proc.stdout)
    assert proc.returncode == 1 and parsed["rows_with_wrong"] == 2 and parsed["rows"][0]["wrong"] == 0
    assert "# Out of bounds values : 4 FAILED" in proc.stdout.splitlines()
    assert parsed["out_of_bounds"] == 4 and parsed["out_of_bounds_ok"] is False
    args = ("all_reduce_perf", "-b", "1G", "-e", "1G", "-g", "8")
    low = run(bindir, root, *args, env={"NCCL_TESTS_MIN_BW": "100"})
    high = run(bindir, root, *args, env={"NCCL_TESTS_MIN_BW": "1000"})
    assert low.returncode == 0 and re.search(r"^# Avg bus bandwidth    : [\d.]+ OK$", low.stdout, re.M)
    assert high.returncode == 1 and re.search(r"^# Avg bus bandwidth    : [\d.]+ FAILED$", high.stdout, re.M)
    unchecked = run(bindir, root, "reduce_scatter_perf", "-b", "1M", "-e", "8M", "-f", "2", "-g", "8", "-c", "0")
    assert unchecked.returncode == 0 and "# Errors with asterisks" not in unchecked.stdout
    assert parse("nccl-tests", unchecked.stdout)["rows"][0]["wrong"] is None


def test_nccl_debug_info_and_environment_on_amd(bindir, tmp_path):
    roots = [make_node(tmp_path, "amd-mi300x", node) for node in ("node1", "node2")]
    outs, codes = launch(bindir, roots, 1, "all_reduce_perf", "-b", "1G", "-e", "1G", "-g", "8",
                         env={"NCCL_DEBUG": "INFO"}, job="42")
    assert codes == [0, 0]
    lines = outs[0].splitlines()
    banner = next(i for i, line in enumerate(lines) if " NCCL INFO RCCL version : 2.26.6-HEAD:" in line)
    assert lines[banner + 1].startswith("HIP version  : 7.0.51831-")  # RCCL's banner: one INFO message
    assert re.match(r"^\S+:\d+:\d+ \[0\] NCCL INFO ROCr version 1\.18$", lines[banner - 2])
    assert "RCCL version" not in outs[1] and " NCCL INFO ncclCommInitRank " in outs[1]  # rank 0 only
    assert "NCCL INFO NET/IB : Using [0]mlx5_0:1/IB" in outs[0] and "via NET/IB/0/GDRDMA" in outs[0]
    parsed = parse("nccl-tests", outs[0])
    assert parsed["complete"] and parsed["nranks"] == 16 and parsed["nccl_log_lines"] > 5
    assert parsed["hip_version"] == "7.0.51831-a3e329ad8"
    assert parsed["rccl_version"].startswith("2.26.6-HEAD:")  # read from the INFO message of the banner
    root = roots[0]
    args = ("all_reduce_perf", "-b", "1G", "-e", "1G", "-g", "8")
    healthy = parse("nccl-tests", run(bindir, root, *args).stdout)["max_busbw_gbps"]
    nics = parse("nccl-tests", run(bindir, root, *args, env={"NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1",
                                                             "NCCL_IB_HCA": "=mlx5_0"}).stdout)["max_busbw_gbps"]
    assert nics < 60 < 300 < healthy
    dmabuf = run(bindir, root, *args, env={"NCCL_DEBUG": "INFO", "NCCL_DMABUF_ENABLE": "1"}).stdout
    assert "NCCL INFO DMA_BUF Support Enabled" in dmabuf and "Dmabuf feature disabled" not in dmabuf


def test_hip_devices_are_the_logical_gpus(bindir, tmp_path):
    cpx = make_node(tmp_path, "amd-faults", "node4")  # CPX: 8 HIP devices per MI300X
    parsed = parse("nccl-tests", run(bindir, cpx, "all_reduce_perf", "-b", "1M", "-e", "1M", "-g", "64").stdout)
    assert parsed["complete"] and parsed["nranks"] == 64
    assert [d["bus_id"] for d in parsed["devices"][7:9]] == ["0000:05:00", "0000:26:00"]
    proc = run(bindir, cpx, "all_reduce_perf", "-g", "65")
    assert proc.returncode != 0 and "Invalid number of GPUs: 65 requested but only 64 were found." in proc.stderr
    lost = make_node(tmp_path, "amd-faults", "node2")  # a GPU gone: 7 left
    proc = run(bindir, lost, "all_reduce_perf", "-g", "8")
    assert proc.returncode != 0 and "only 7 were found" in proc.stderr
