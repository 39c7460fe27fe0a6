"""The simulated TransferBench (sim/shims/transferbench.py): node states rendered by the real profile code (healthy
MI300X and MI355X, XGMI links down, a slow host link, the tool's fault modes), read back through the project's
parser, compared line for line with the layout of the real v1.02 captures in the corpus, and driven by the
gpu_transferbench probe's own command."""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from clustereval.checks import probe_catalogue
from clustereval.parsers import ParseError, parse
from clustereval.sim import amd, cluster
from clustereval.sim.profile import ProfileError, load_profile, render_node
from tests.conftest import CORPUS, read_corpus

SHIMS = Path(__file__).resolve().parents[2] / "src" / "clustereval" / "sim" / "shims"
PYTHON = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable
CORPUS_CONFIG = "4 4 (G0->G0->G0) (G0->G0->G1) (G0->G0->G2) (G0->G0->G3)\n"  # the corpus captures' config line


def amd_root(tmp_path: Path, model: str = "AMD Instinct MI300X", count: int = 8, faults: dict | None = None,
             name: str = "node1") -> Path:
    prof = load_profile("amd-mi300x")
    prof["cluster"]["gpus"] = {**prof["cluster"]["gpus"], "model": model, "count": count}
    prof["nodes"] = {name: {"faults": faults or {}}}
    root = tmp_path / name
    root.mkdir()
    (root / "node.json").write_text(json.dumps(render_node(prof, name)))
    return root


def shim(root: Path, *args: str, env: dict | None = None, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    base = {"PATH": os.environ.get("PATH", "/usr/bin"), "SIMNODE_ROOT": str(root), "PYTHONPATH": str(SHIMS),
            **(env or {})}
    return subprocess.run([PYTHON, str(SHIMS / "transferbench.py"), *args], env=base, capture_output=True,
                          timeout=timeout, text=True, errors="replace", cwd=root)


def config(root: Path, text: str) -> str:
    path = root / "transfers.cfg"
    path.write_text(text)
    return str(path)


def mask(line: str) -> str:
    """A line with its measured numbers replaced (the layout is what must match, not the figures)."""
    return re.sub(r"[ \d]*\d\.\d{3}", lambda m: "#" * len(m.group(0)), line)


# --------------------------------------------------------------------------------------------- conventions
def test_the_shim_imports_only_the_standard_library_and_simnode():
    tree = ast.parse((SHIMS / "transferbench.py").read_text())
    modules = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    modules |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert modules - set(sys.stdlib_module_names) == {"simnode"}


def test_the_cluster_installs_it_as_transferbench_on_amd_nodes_only_and_a_profile_can_leave_it_off():
    assert cluster.SHIMS["TransferBench"] == "transferbench.py"
    assert "TransferBench" in amd.AMD_ONLY_TOOLS
    assert cluster.OPTIONAL_TOOLS["transferbench.py"] == "transferbench"


def test_the_launcher_runs_it(tmp_path):
    root = amd_root(tmp_path)
    launcher = tmp_path / "TransferBench"
    launcher.write_text(cluster.SHIM_LAUNCHER.format(lib=str(cluster.SHIM_SOURCES), module="transferbench")
                        .replace("#!/usr/bin/python3 -IS", f"#!{sys.executable} -IS"))
    launcher.chmod(0o755)
    result = subprocess.run([str(launcher)], capture_output=True, text=True, timeout=30,
                            env={"PATH": os.environ["PATH"], "SIMNODE_ROOT": str(root)})
    assert result.returncode == 0, result.stderr
    assert "Detected topology: 2 CPU NUMA node(s)   8 GPU device(s)" in result.stdout


# --------------------------------------------------------------------------------------------- the corpus layout
def test_a_pcie_only_node_prints_the_corpus_capture_line_for_line(tmp_path):
    if not (CORPUS / "transferbench").is_dir():
        pytest.skip(f"corpus {CORPUS} not available")
    real = read_corpus("transferbench", "v1.02-mi100-x4-1-to-4-gpus-fine-grain-1.txt")
    # four GPUs under one socket whose XGMI links are all down: PCIe only, as the corpus's 4 x MI100
    down = [[a, b] for a in range(4) for b in range(a + 1, 4)]
    root = amd_root(tmp_path, count=4, faults={"xgmi_link_down": down})
    result = shim(root, config(root, CORPUS_CONFIG), "1G")
    assert result.returncode == 0 and result.stderr == ""
    ours, theirs = result.stdout.split("\n"), real.split("\n")
    assert len(ours) == len(theirs)
    for mine, capture in zip(ours, theirs, strict=True):
        assert mask(mine) == mask(capture), (mine, capture)
    # the run configuration is the real tool's to the byte (MI100 and MI300X both have 64 KiB of LDS per CU)
    assert ours[:16] == theirs[:16]
    parsed, reference = parse("transferbench", result.stdout), parse("transferbench", real)
    assert parsed["complete"] and parsed["config_descriptions"] == reference["config_descriptions"]
    links = [[t["link"] for t in data["tests"][0]["transfers"]] for data in (parsed, reference)]
    assert links[0] == links[1]


def test_the_garbled_mode_corrupts_the_line_the_corpus_capture_has_corrupted(tmp_path):
    if not (CORPUS / "transferbench").is_dir():
        pytest.skip(f"corpus {CORPUS} not available")
    real = read_corpus("transferbench", "v1.02-mi100-x4-1-to-4-gpus-fine-grain-0-GARBLED-kerncd-els.txt")
    root = amd_root(tmp_path, count=4, faults={"transferbench": "garbled"})
    ours = shim(root, config(root, CORPUS_CONFIG), "1G").stdout
    assert ours.split("\n")[:16] == real.split("\n")[:16]
    parsed = parse("transferbench", ours)
    assert parsed["complete"] is False and "kerncd els" in parsed["warnings"][0]


# --------------------------------------------------------------------------------------------- figures
def test_a_healthy_mi300x_node_reads_back_through_the_parser(tmp_path):
    root = amd_root(tmp_path)
    lines = "".join(f"1 32 (C{g // 4}->G{g}->G{g})\n1 32 (G{g}->G{g}->C{g // 4})\n" for g in range(8))
    lines += "".join(f"1 32 (G{a}->G{a}->G{b})\n" for a in range(8) for b in range(8) if a != b)
    lines += "1 304 (G0->G0->G0)\n## a comment the tool echoes\n# and one it does not\n"
    result = shim(root, config(root, lines))
    assert result.returncode == 0, result.stderr
    data = parse("transferbench", result.stdout)
    # the parser keeps the echoed ``##`` line as a warning, not an error
    assert data["complete"] and data["version"] == "1.02"
    assert data["warnings"] == ["unrecognised line: ## a comment the tool echoes"]
    assert len(data["tests"]) == 16 + 56 + 1 and "## a comment the tool echoes" in result.stdout
    assert data["config"]["NUM_ITERATIONS"] == "10" and data["tests"][0]["bytes"] == 67108864
    rows = [t["transfers"][0] for t in data["tests"]]
    h2d = [r["bw_gbps"] for r in rows if r["link"] == "PCIE-LOCAL"]
    d2h = [r["bw_gbps"] for r in rows if r["link"] == "LOCAL-PCIE"]
    p2p = [r["bw_gbps"] for r in rows if r["link"] == "LOCAL-XGMI-1"]
    assert len(h2d) == len(d2h) == 8 and len(p2p) == 56
    assert all(50 < v < 55 for v in h2d + d2h) and all(47 < v < 50 for v in p2p)
    assert rows[-1]["link"] == "LOCAL-LOCAL" and rows[-1]["bw_gbps"] > 1500
    for test in data["tests"]:  # the aggregate is CPU-timed: a little below the Transfer's own figure
        assert test["aggregate_gbps"] < test["transfers"][0]["bw_gbps"] and test["overhead_ms"] > 0


def test_mi355x_links_are_faster_and_the_shared_memory_default_follows_the_lds(tmp_path):
    root = amd_root(tmp_path, model="AMD Instinct MI355X")
    data = parse("transferbench", shim(root, config(root, "1 32 (G0->G0->G1)\n")).stdout)
    assert data["tests"][0]["transfers"][0]["bw_gbps"] > 56
    assert data["config_descriptions"]["SHARED_MEM_BYTES"] == "Using 81921 shared mem per threadblock"


def test_a_pair_whose_xgmi_link_is_down_goes_over_pcie_and_a_slow_host_link_is_slow(tmp_path):
    root = amd_root(tmp_path, faults={"xgmi_link_down": [[1, 4]], "slow_host_link": {"gpu": 2, "factor": 0.45}})
    text = "1 32 (G1->G1->G4)\n1 32 (G4->G4->G1)\n1 32 (G1->G1->G2)\n1 32 (C0->G2->G2)\n1 32 (G2->G2->C0)\n"
    data = parse("transferbench", shim(root, config(root, text)).stdout)
    rows = [t["transfers"][0] for t in data["tests"]]
    assert [r["link"] for r in rows[:3]] == ["LOCAL-PCIE-3", "LOCAL-PCIE-3", "LOCAL-XGMI-1"]  # 1 and 4: two sockets
    assert rows[0]["bw_gbps"] < 0.65 * rows[2]["bw_gbps"]
    assert rows[3]["bw_gbps"] < 26 and rows[4]["bw_gbps"] < 26
    topology = shim(root).stdout
    assert re.search(r"^ GPU 01 \| XGMI-1 \|    -   \| XGMI-1 \| XGMI-1 \| PCIE-3 \|", topology, re.M)


def test_concurrent_transfers_share_a_link_and_rows_follow_the_executor_order(tmp_path):
    root = amd_root(tmp_path)
    lines = "-3 (G3 G3 G0 32) (C0 G1 G1 32) (G2 C0 C0 4)\n2 32 (G0->G0->G1) (G0->G0->G1)\n"
    out = shim(root, config(root, lines)).stdout
    data = parse("transferbench", out)
    first, second = data["tests"]
    # std::map order of executors: CPU 00, then GPU 01, GPU 03 (Transfer indices keep their config positions)
    assert [(t["index"], t["executor"]) for t in first["transfers"]] == [(2, "CPU00"), (1, "GPU01"), (0, "GPU03")]
    assert " Transfer 02: G02 -> [CPU 00:004] -> C00 |" in out
    one = parse("transferbench", shim(root, config(root, "1 32 (G0->G0->G1)\n")).stdout)["tests"][0]["transfers"][0]
    assert all(t["bw_gbps"] < 0.55 * one["bw_gbps"] for t in second["transfers"])


def test_sizes_units_and_the_range_of_sizes(tmp_path):
    root = amd_root(tmp_path)
    path = config(root, "1 32 (G0->G0->G1)\n")
    assert parse("transferbench", shim(root, path, "256K").stdout)["tests"][0]["bytes"] == 262144
    sweep = parse("transferbench", shim(root, path, "0").stdout)["tests"]
    assert [t["bytes"] for t in sweep][:3] == [1024, 2048, 4096] and sweep[-1]["bytes"] == 4 << 27
    assert sweep[0]["transfers"][0]["bw_gbps"] < 0.5 * sweep[-1]["transfers"][0]["bw_gbps"]  # launch latency
    bad = shim(root, path, "1022")
    assert bad.returncode == 1 and bad.stdout == "[ERROR] numBytesPerTransfer (1022) must be a multiple of 4\n"


def test_environment_variables_change_the_run_configuration_as_the_tool_describes_them(tmp_path):
    root = amd_root(tmp_path)
    out = shim(root, config(root, "1 8 (G0->G0->G1)\n"), env={"NUM_ITERATIONS": "-2", "NUM_WARMUPS": "1",
                                                            "USE_HIP_CALL": "1", "FILL_PATTERN": "00ff"}).stdout
    assert "NUM_ITERATIONS       =           -2 : Running 2 second(s) per topology\n" in out
    assert "NUM_WARMUPS          =            1 : Running 1 warmup iteration(s) per topology\n" in out
    assert "USE_HIP_CALL         =            1 : Using HIP functions for GPU-executed copies\n" in out
    assert "HSA_ENABLE_SDMA      =       (null) : Using DMA copy engines\n" in out
    assert "FILL_PATTERN         =  (specified) : Pattern: 00ff\n" in out
    bad = shim(root, config(root, "1 8 (G0->G0->G1)\n"), env={"BLOCK_BYTES": "3"})
    assert bad.returncode == 1 and bad.stdout == "[ERROR] BLOCK_BYTES must be a positive multiple of 4\n"


# --------------------------------------------------------------------------------------------- the tool's errors
@pytest.mark.parametrize("line, message", [
    ("1 0 (G0->G0->G1)", "Parsing error: Number of blocks to use (0) must be greater than 0"),
    ("2 4 (G0->G0->G1)", "Parsing error: Unable to read valid Transfer triplet (possibly missing a SRC or EXE or DST)"),
    ("-1 (G0 G0 G1)", "Parsing error: Unable to read valid Transfer quadruple (possibly missing a SRC or EXE or DST "
                      "or #CU)"),
    ("1 4 (G0->G9->G1)", "[ERROR] GPU index must be between 0 and 7 (instead of 9)"),
    ("1 4 (C2->G0->G1)", "[ERROR] CPU index must be between 0 and 1 (instead of 2)"),
    ("1 4 (X0->G0->G1)", "[ERROR] Unrecognized memory type X0.  Expecting either 'B', 'C' or 'G' or 'F'"),
    ("1 4 (GPU0->G0->G1)", "[ERROR] Unable to parse memory type token GPU0 - expecting either 'B,C,G or F' followed "
                           "by an index"),
    ("1 4 (G0->F0->G1)", "[ERROR] Executor must either be CPU ('C') or GPU ('G'), (from (G0->F0->G1 4))"),
])
def test_a_bad_line_stops_the_run_with_the_tools_message_after_the_tests_before_it(tmp_path, line, message):
    root = amd_root(tmp_path)
    result = shim(root, config(root, f"1 32 (G0->G0->G1)\n{line}\n1 32 (G1->G1->G0)\n"))
    assert result.returncode == 1
    assert result.stdout.endswith(message + "\n")
    assert result.stdout.count("Aggregate Bandwidth") == 1  # the line before ran, the one after never did


def test_a_missing_config_file_and_a_node_without_amd_gpus(tmp_path):
    root = amd_root(tmp_path)
    missing = shim(root, "no-such.cfg")
    assert missing.returncode == 1
    assert missing.stdout == "[ERROR] Unable to open transfer configuration file: [no-such.cfg]\n"
    nvidia = tmp_path / "nvidia"
    nvidia.mkdir()
    prof = load_profile("reference")
    (nvidia / "node.json").write_text(json.dumps(render_node(prof, "node1")))
    none = shim(nvidia)
    assert none.returncode == 255 and "no ROCm-capable device is detected" in none.stderr


def test_the_preset_benchmarks_are_not_simulated(tmp_path):
    result = shim(amd_root(tmp_path), "p2p")
    assert result.returncode == 2 and "not simulated" in result.stderr


# --------------------------------------------------------------------------------------------- fault modes
def test_garbage_truncated_and_hang(tmp_path):
    text = "".join(f"1 32 (G0->G0->G{g})\n" for g in range(1, 6))
    garbage = amd_root(tmp_path, faults={"transferbench": "garbage"}, name="node2")
    with pytest.raises(ParseError):
        parse("transferbench", shim(garbage, config(garbage, text)).stdout)
    cut = amd_root(tmp_path, faults={"transferbench": "truncated"}, name="node3")
    data = parse("transferbench", shim(cut, config(cut, text)).stdout)
    assert data["complete"] is False and [t["aggregate_gbps"] is None for t in data["tests"]][-1] is True
    assert len(data["tests"]) == 3
    hang = amd_root(tmp_path, faults={"transferbench": "hang"}, name="node4")
    with pytest.raises(subprocess.TimeoutExpired) as stuck:
        shim(hang, config(hang, text), timeout=3)
    assert b"Test 3:" in (stuck.value.stdout or b"") or "Test 3:" in str(stuck.value.stdout)


def test_a_profile_refuses_bad_transferbench_faults():
    prof = load_profile("amd-mi300x")
    for faults, words in (({"transferbench": "broken"}, "faults.transferbench must be one of"),
                          ({"slow_host_link": {"gpu": 9}}, "not one of the node's 8 GPUs"),
                          ({"slow_host_link": {"gpu": 1, "factor": 2}}, "at most 1"),
                          ({"slow_host_link": [{"gpu": 1, "speed": 2}]}, "must be {gpu: INDEX, factor: 0..1}")):
        prof["nodes"] = {"node1": {"faults": faults}}
        with pytest.raises(ProfileError, match=re.escape(words)):
            render_node(prof, "node1")


# --------------------------------------------------------------------------------------------- the probe
def test_the_probe_writes_its_config_runs_it_and_cleans_up(tmp_path):
    root = amd_root(tmp_path, faults={"xgmi_link_down": [[1, 4]]})
    bindir = tmp_path / "bin"
    bindir.mkdir()
    wrapper = bindir / "TransferBench"
    wrapper.write_text(f"#!/bin/sh\nexec {PYTHON} {SHIMS / 'transferbench.py'} \"$@\"\n")
    wrapper.chmod(0o755)
    probe = probe_catalogue.load()["gpu_transferbench"]
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = {"PATH": f"{bindir}:{os.environ['PATH']}", "SIMNODE_ROOT": str(root), "PYTHONPATH": str(SHIMS),
           "TMPDIR": str(scratch), "CLUSTEREVAL_GPUS": "8", "CLUSTEREVAL_CUS": "32", "CLUSTEREVAL_BYTES": "64M",
           "CLUSTEREVAL_PAIRS": "all", "CLUSTEREVAL_ITERATIONS": "10", "CLUSTEREVAL_WARMUPS": "3"}
    result = subprocess.run(["/bin/sh", "-c", probe["cmd"]], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    data = parse("transferbench", result.stdout)
    assert data["complete"] and len(data["tests"]) == 16 + 56
    rows = [t["transfers"][0] for t in data["tests"]]
    # host memory on each GPU's closest NUMA node: GPUs 4-7 sit under socket 1
    assert rows[8]["src"] == "C01" and rows[8]["dst"] == "G04" and rows[0]["src"] == "C00"
    assert sum(1 for r in rows if r["link"] == "LOCAL-PCIE-3") == 2
    assert list(scratch.iterdir()) == []  # the private directory is gone
    ring = subprocess.run(["/bin/sh", "-c", probe["cmd"]], env={**env, "CLUSTEREVAL_PAIRS": "ring",
                                                                "CLUSTEREVAL_GPUS": "0"},
                          capture_output=True, text=True, timeout=60)
    assert parse("transferbench", ring.stdout)["tests"].__len__() == 16 + 16
    capped = subprocess.run(["/bin/sh", "-c", probe["cmd"]], env={**env, "CLUSTEREVAL_GPUS": "9",
                                                                  "CLUSTEREVAL_PAIRS": "none"},
                            capture_output=True, text=True, timeout=60)
    assert len(parse("transferbench", capped.stdout)["tests"]) == 16
    assert "facts name 9 GPU devices, TransferBench sees 8" in capped.stderr


def test_the_probe_cleanup_removes_only_this_nodes_directories_whose_shell_is_gone(tmp_path):
    probe = probe_catalogue.load()["gpu_transferbench"]
    host = os.uname().nodename
    live = subprocess.Popen(["sleep", "30"])
    try:
        dead = tmp_path / f"clustereval-transferbench.{host}.999999999"
        running = tmp_path / f"clustereval-transferbench.{host}.{live.pid}"
        other = tmp_path / "clustereval-transferbench.another-node.999999999"
        for folder in (dead, running, other):
            folder.mkdir()
        subprocess.run(["/bin/sh", "-c", probe["cleanup"]], env={**os.environ, "TMPDIR": str(tmp_path)}, check=True,
                       timeout=30)
        assert not dead.exists() and running.exists() and other.exists()
    finally:
        live.kill()
        live.wait()
