"""The simulated amd-smi / rocm-smi shims: node states rendered by the real profile code (healthy MI300X,
MI355X, a faulty MI300X node: GPU 2 missing, the XGMI link 1-4 down, CPX/NPS4, RAS errors on GPU 3), read back
through the project's parsers and compared with the layout of the real tools' captures in the corpus."""

from __future__ import annotations

import ast
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from clustereval.parsers import parse
from clustereval.sim.cluster import SHIM_LAUNCHER, SHIM_SOURCES
from clustereval.sim.profile import load_profile, render_node
from tests.conftest import read_corpus

SHIMS = Path(__file__).resolve().parents[2] / "src" / "clustereval" / "sim" / "shims"
PYTHON = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable
FAULTS = {"gpu_missing": [2], "xgmi_link_down": [[1, 4]], "amd_partition": {"compute": "CPX", "memory": "NPS4"},
          "ras_errors": [{"gpu": 3, "block": "umc", "ce": 5, "ue": 2}, {"gpu": 3, "block": "sdma", "ce": 1}]}
ITALICS = re.compile(r"\x1b\[[0-9]*m")


def amd_root(tmp_path: Path, model: str = "AMD Instinct MI300X", count: int = 8, faults: dict | None = None,
             amd: dict | None = None, idle: dict | None = None, name: str = "node1") -> Path:
    prof = load_profile("reference")
    prof["cluster"]["gpus"] = {"vendor": "amd", "model": model, "count": count, **({"idle": idle} if idle else {})}
    if amd:
        prof["cluster"]["amd"] = amd
    prof["nodes"] = {name: {"faults": faults or {}}}
    root = tmp_path / name
    root.mkdir()
    (root / "node.json").write_text(json.dumps(render_node(prof, name)))
    return root


def state(root: Path) -> dict:
    return json.loads((root / "node.json").read_text())["amd"]


def shim(root: Path, tool: str, *args: str) -> subprocess.CompletedProcess[str]:
    script = SHIMS / ("amd_smi.py" if tool == "amd-smi" else "rocm_smi.py")
    idle = root / "cpu.stat"  # an idle node's CPU time (a watch loop reads its load from it, not the machine's)
    if not idle.exists():
        idle.write_text("usage_usec 1000\nuser_usec 1000\nsystem_usec 0\n")
    env = {"PATH": os.environ.get("PATH", "/usr/bin"), "SIMNODE_ROOT": str(root), "SIMNODE_CPU_STAT": str(idle)}
    return subprocess.run([PYTHON, str(script), *args], env=env, capture_output=True, timeout=30, text=True,
                          encoding="utf-8")


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    return result.stdout


@pytest.fixture
def mi300x(tmp_path):
    return amd_root(tmp_path)


@pytest.fixture
def faulty(tmp_path):
    return amd_root(tmp_path, faults=FAULTS, name="node2")


# --------------------------------------------------------------------------------------------- conventions
def test_shims_import_only_the_standard_library_and_simnode():
    stdlib = set(sys.stdlib_module_names)
    for name in ("amd_smi.py", "rocm_smi.py"):
        tree = ast.parse((SHIMS / name).read_text())
        modules = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        modules |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
        assert modules - stdlib == {"simnode"}, name


def test_the_cluster_launcher_runs_main_with_the_arguments(tmp_path, mi300x):
    for module, args in (("amd_smi", ["version"]), ("rocm_smi", ["--showdriverversion"])):
        launcher = tmp_path / module
        launcher.write_text(SHIM_LAUNCHER.format(lib=str(SHIM_SOURCES), module=module)
                            .replace("#!/usr/bin/python3 -IS", f"#!{sys.executable} -IS"))
        launcher.chmod(0o755)
        result = subprocess.run([str(launcher), *args], capture_output=True, text=True, timeout=30,
                                env={"PATH": os.environ["PATH"], "SIMNODE_ROOT": str(mi300x)})
        assert result.returncode == 0, result.stderr
        assert "6.14.14" in result.stdout


# --------------------------------------------------------------------------------------------- amd-smi
def test_version_is_the_26_0_one_line_string(mi300x):
    amd = state(mi300x)
    expected = (f"AMDSMI Tool: {amd['amd_smi_version']} | AMDSMI Library version: {amd['amd_smi_lib_version']} | "
                f"ROCm version: {amd['rocm_version']} | amdgpu version: {amd['amdgpu_version']} | "
                "amd_hsmp version: N/A\n")
    assert ok(shim(mi300x, "amd-smi", "version")) == expected
    assert ok(shim(mi300x, "amd-smi", "version", "-g")) == expected.replace(" | amd_hsmp version: N/A", "")
    # the amdsmi_commands.py layout a 26.0.2 capture shows, field for field
    capture = ("AMDSMI Tool: 26.0.2+39589fda | AMDSMI Library version: 26.0.2 | ROCm version: 7.0.2 | "
               "amdgpu version: 6.14.14 | amd_hsmp version: N/A")
    assert re.sub(r"[\d.]+\+\w+|\d+\.\d+\.\d+", "V", expected.strip()) == re.sub(r"[\d.]+\+\w+|\d+\.\d+\.\d+",
                                                                                  "V", capture)


def test_help_is_the_argparse_banner_with_version_rocm_and_platform(mi300x):
    amd = state(mi300x)
    text = ok(shim(mi300x, "amd-smi", "--help"))
    assert text.startswith("usage: amd-smi [-h]  ...\n\nAMD System Management Interface | Version: "
                           f"{amd['amd_smi_version']} | ROCm version: {amd['rocm_version']} |\n"
                           "Platform: Linux Baremetal\n\noptions:\n")
    assert "\nAMD-SMI Commands:\n                      Descriptions:\n    version           Display version" in text
    assert "    monitor (dmon)    Monitor metrics for target devices\n" in text
    assert ok(shim(mi300x, "amd-smi", "-h")) == text


def test_list_blocks_have_the_corpus_keys_indentation_and_spacing(mi300x):
    amd = state(mi300x)
    text = ok(shim(mi300x, "amd-smi", "list"))
    parsed = parse("amd-smi", text)
    assert parsed["format"] == "keyvalue" and parsed["gpu_count"] == 8 and not parsed["warnings"]
    assert [g["bdf"] for g in parsed["gpus"]] == [g["bdf"] for g in amd["gpus"]]
    assert [g["kfd_id"] for g in parsed["gpus"]] == [g["kfd_id"] for g in amd["gpus"]]
    assert [g["node_id"] for g in parsed["gpus"]] == [2, 3, 4, 5, 6, 7, 8, 9]
    corpus = read_corpus("amd-smi", "list-kfd-id-node-id-redacted-uuid.txt")

    def shape(block: str) -> list[tuple[int, str]]:
        return [(len(ln) - len(ln.lstrip()), ln.split(":")[0].strip()) for ln in block.splitlines()]

    ours = text.split("\n\n")
    theirs = corpus.strip("\n").split("\n\n")
    assert shape(ours[0]) == shape(theirs[0]) and shape(ours[1]) == shape(theirs[1])
    assert text.endswith("PARTITION_ID: 0\n\n\n")  # print_output: a blank line after each block, then print's


def test_list_on_the_faulty_node_shows_each_cpx_partition_and_not_the_lost_gpu(faulty):
    parsed = parse("amd-smi", ok(shim(faulty, "amd-smi", "list")))
    assert parsed["gpu_count"] == 7 * 8
    assert [g["partition_id"] for g in parsed["gpus"][:9]] == [0, 1, 2, 3, 4, 5, 6, 7, 0]
    assert parsed["gpus"][1]["bdf"] == "0000:05:00.1" and parsed["gpus"][15]["bdf"] == "0000:26:00.7"
    assert not any(g["bdf"].startswith("0000:46:") for g in parsed["gpus"])
    one = ok(shim(faulty, "amd-smi", "list", "-g", "9", "-e"))
    assert one.startswith("GPU: 9\n    BDF: 0000:26:00.1\n") and one.endswith("HIP_ID: 9\n    HIP_UUID: GPU-"
                                                                            + one.rsplit("GPU-", 1)[1])
    assert one.endswith("\n\n") and not one.endswith("\n\n\n")  # a single device: no extra blank line


def test_default_view_is_the_26_0_table(mi300x, faulty):
    amd = state(mi300x)
    text = ok(shim(mi300x, "amd-smi"))
    lines = text.splitlines()
    assert all(len(line) == 80 for line in lines)
    # the fixed lines of a 26.0.2 capture (MI300X DPX node, ROCm 7.0.2)
    assert lines[0] == "+" + "-" * 78 + "+"
    assert lines[3:7] == [
        "|-------------------------------------+----------------------------------------|",
        "| BDF                        GPU-Name | Mem-Uti   Temp   UEC       Power-Usage |",
        "| GPU  HIP-ID  OAM-ID  Partition-Mode | GFX-Uti    Fan               Mem-Usage |",
        "|=====================================+========================================|"]
    assert lines[2] == "| Platform: Linux Baremetal".ljust(79) + "|"
    assert lines[1] == (f"| AMD-SMI {amd['amd_smi_version']:<21}amdgpu version: {amd['amdgpu_version']:<9}"
                        f"ROCm version: {amd['rocm_version']}").ljust(79) + "|"
    assert lines[7] == "| 0000:05:00.0    AMD Instinct MI300X | 0 %      36 °C   0           133/750 W |"
    assert lines[8] == "|   0       0       0        SPX/NPS1 | 0 %        N/A           283/196592 MB |"
    assert lines[-5:] == [
        "| Processes:                                                                   |",
        "|  GPU        PID  Process Name          GTT_MEM  VRAM_MEM  MEM_USAGE     CU % |",
        "|==============================================================================|",
        "|  No running processes found                                                  |",
        "+------------------------------------------------------------------------------+"]
    cpx = ok(shim(faulty, "amd-smi")).splitlines()
    assert cpx[8].endswith("CPX/NPS4 | 0 %        N/A            283/49148 MB |")
    # a socket's other partitions report no metrics (as the DPX capture's 0000:05:00.1 rows)
    assert cpx[10] == "| 0000:05:00.1    AMD Instinct MI300X | N/A        N/A   0                 N/A |"
    assert cpx[11] == "|   1       1     N/A             N/A | N/A        N/A            283/49148 MB |"
    assert "   2           133/750 W |" in ok(shim(faulty, "amd-smi")).split("0000:65:00.0")[1].splitlines()[0]


def test_static_sections_through_the_parser(mi300x, faulty):
    amd = state(mi300x)
    text = ok(shim(mi300x, "amd-smi", "static"))
    parsed = parse("amd-smi", text)
    assert parsed["gpu_count"] == 8 and not parsed["warnings"]
    gpu = parsed["gpus"][0]
    assert list(gpu) == ["gpu", "asic", "bus", "vbios", "limit", "driver", "vram"]  # no partition since 26.0
    assert gpu["asic"]["market_name"] == "AMD Instinct MI300X" and gpu["asic"]["device_id"] == "0x74a1"
    assert gpu["asic"]["num_compute_units"] == 304 and gpu["asic"]["target_graphics_version"] == "gfx942"
    assert gpu["bus"]["bdf"] == amd["gpus"][0]["bdf"]
    assert gpu["vbios"]["version"] == "022.040.003.041.000001" and gpu["vbios"]["build_date"] == "2023/10/24 13:48"
    assert gpu["limit"]["max_power_w"] == 750 and gpu["limit"]["slowdown_hotspot_temperature_c"] == 100
    assert gpu["limit"]["slowdown_edge_temperature"] == "N/A"  # key/value mode keeps N/A as text
    assert gpu["driver"] == {"name": "amdgpu", "version": amd["amdgpu_version"]}
    assert gpu["vram"]["size_mb"] == 196592
    assert "        MAX_POWER: 750 W\n" in text and "    VBIOS:\n        NAME: AMD MI300X_HW_SRIOV_CVS_1VF\n" in text
    short = ok(shim(faulty, "amd-smi", "static", "-a", "-b", "-V", "-d", "-v", "-p", "-l", "-g", "10"))
    assert short == ok(shim(faulty, "amd-smi", "static", "--asic", "--bus", "--vbios", "--driver", "--vram",
                            "--partition", "--limit", "--gpu", "10"))
    part = parse("amd-smi", short)["gpus"][0]
    assert part["gpu"] == 10 and part["partition"] == {"accelerator_partition": "CPX", "memory_partition": "NPS4",
                                                       "partition_id": 2}
    assert part["asic"]["num_compute_units"] == 38 and part["vram"]["size_mb"] == 196592 // 4
    every = parse("amd-smi", ok(shim(faulty, "amd-smi", "static", "-p", "-g", "all")))
    assert every["gpu_count"] == 56 and {g["partition"]["memory_partition"] for g in every["gpus"]} == {"NPS4"}


def test_metric_ecc_and_ecc_blocks_carry_the_ras_counts(faulty, mi300x):
    # GPU 3 is the third present physical GPU (2 is lost): logical devices 16..23 in CPX
    parsed = parse("amd-smi", ok(shim(faulty, "amd-smi", "metric", "--ecc", "--ecc-blocks", "-g", "15", "16")))
    before, hit = parsed["gpus"]
    assert before["ecc"]["total_correctable_count"] == 0 and before["ecc"]["total_uncorrectable_count"] == 0
    assert hit["ecc"] == {"total_correctable_count": 6, "total_uncorrectable_count": 2, "total_deferred_count": 0,
                          "cache_correctable_count": 1, "cache_uncorrectable_count": 0}
    assert hit["ecc_blocks"]["umc"] == {"correctable_count": 5, "uncorrectable_count": 2, "deferred_count": 0}
    assert hit["ecc_blocks"]["sdma"]["correctable_count"] == 1
    assert list(hit["ecc_blocks"]) == ["umc", "sdma", "gfx", "mmhub", "pcie_bif", "hdp", "xgmi_wafl"]
    short = ok(shim(faulty, "amd-smi", "metric", "-e", "-k", "-g", "15", "16"))
    assert parse("amd-smi", short)["gpus"] == parsed["gpus"]
    healthy = parse("amd-smi", ok(shim(mi300x, "amd-smi", "metric", "-k")))
    assert healthy["gpu_count"] == 8
    assert all(b["uncorrectable_count"] == 0 for g in healthy["gpus"] for b in g["ecc_blocks"].values())


def test_metric_power_and_temperature(mi300x, faulty):
    gpu = parse("amd-smi", ok(shim(mi300x, "amd-smi", "metric", "-p", "-t", "-g", "0")))["gpus"][0]
    assert gpu["power"]["socket_power_w"] == 133 and gpu["power"]["power_management"] == "ENABLED"
    assert gpu["temperature"] == {"edge": "N/A", "hotspot_c": 36, "mem_c": 44}
    first, second = parse("amd-smi", ok(shim(faulty, "amd-smi", "metric", "-p", "-t", "-g", "0", "1")))["gpus"]
    assert first["power"]["socket_power_w"] == 133  # the socket's power, not the CPX share
    assert second["power"]["socket_power"] == "N/A" and second["temperature"]["hotspot"] == "N/A"
    watched = ok(shim(mi300x, "amd-smi", "metric", "-e", "-w", "1", "-i", "1", "-g", "0", "1"))
    assert watched.startswith("'CTRL' + 'C' to stop watching output:\nGPU: 0\n    TIMESTAMP: ")
    assert watched.endswith("CACHE_UNCORRECTABLE_COUNT: 0\n\n\n\n")  # the watch flush prints one more line
    assert parse("amd-smi", watched)["gpus"][1]["ecc"]["total_uncorrectable_count"] == 0


def test_topology_default_prints_all_nine_tables_in_the_corpus_layout(mi300x):
    amd = state(mi300x)
    text = ok(shim(mi300x, "amd-smi", "topology"))
    parsed = parse("amd-smi", text)
    assert list(parsed["tables"]) == ["access", "weight", "hops", "link_type", "numa_bw", "cache_coherancy",
                                      "atomics", "dma", "bi_directional"]
    assert parsed["complete"] and not parsed["warnings"]
    bdfs = [g["bdf"] for g in amd["gpus"]]
    link = parsed["tables"]["link_type"]
    assert all(link[a][b] == ("SELF" if a == b else "XGMI") for a in bdfs for b in bdfs)
    assert parsed["tables"]["weight"][bdfs[0]][bdfs[7]] == "15" and parsed["tables"]["hops"][bdfs[0]][bdfs[7]] == "1"
    assert parsed["tables"]["numa_bw"][bdfs[1]][bdfs[2]] == "50000-50000"
    assert text.endswith("\n\n\nLegend:\n  SELF = Current GPU\n  ENABLED / DISABLED = Link is enabled or disabled\n"
                         "  N/A = Not supported\n  T/F = True / False\n  C/NC = Coherant / Non-Coherant io links\n"
                         "  64,32 = 64 bit and 32 bit atomic support\n  <BW from>-<BW to>\n")
    # the -cndz tables: same titles and the same header/row grid as the corpus capture
    cndz = ok(shim(mi300x, "amd-smi", "topology", "-c", "-n", "-d", "-z"))
    corpus = read_corpus("amd-smi", "topology-cndz-mi300x-8gpu.txt")

    def grid(txt: str) -> list[str]:
        body = txt.split("Legend:")[0]
        return [re.sub(r"[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.\d", "B", ln) for ln in body.splitlines() if ln.strip()]

    ours, theirs = grid(cndz), grid(corpus)
    assert [ln for ln in ours if ln.endswith("TABLE:")] == [ln for ln in theirs if ln.endswith("TABLE:")]
    assert {ln for ln in ours if not ln.endswith("TABLE:")} >= {ln for ln in theirs if ln.startswith(" ")}
    assert [len(ln.split()) for ln in ours] == [len(ln.split()) for ln in theirs]
    assert ok(shim(mi300x, "amd-smi", "topology", "--coherent", "--atomics", "--dma", "--bi-dir")) == cndz


def test_topology_shows_a_downed_xgmi_link_as_pcie(faulty, tmp_path):
    amd = state(faulty)
    first = {p: next(g["bdf"] for g in amd["gpus"] if g["physical_index"] == p and g["partition_id"] == 0)
             for p in amd["physical_gpus"]}
    ids = [str(next(g["index"] for g in amd["gpus"] if g["bdf"] == first[p])) for p in (0, 1, 4)]
    tables = parse("amd-smi", ok(shim(faulty, "amd-smi", "topology", "-t", "-w", "-o", "-b", "-g", *ids)))["tables"]
    assert tables["link_type"][first[1]][first[4]] == "PCIE" and tables["link_type"][first[4]][first[1]] == "PCIE"
    assert tables["link_type"][first[0]][first[4]] == "XGMI"
    # GPU 1 (bus 0x26) and GPU 4 (bus 0x85) are on different CPU sockets: GPU-CPU-CPU-GPU
    assert tables["weight"][first[1]][first[4]] == "72" and tables["hops"][first[1]][first[4]] == "3"
    assert tables["numa_bw"][first[1]][first[4]] == "N/A"
    mi355x = amd_root(tmp_path, model="AMD Instinct MI355X")
    t355 = parse("amd-smi", ok(shim(mi355x, "amd-smi", "topology", "-w", "-b")))["tables"]
    bdfs = list(t355["weight"])
    assert t355["weight"][bdfs[0]][bdfs[1]] == "0" and t355["numa_bw"][bdfs[0]][bdfs[1]] == "0-0"  # as captured


def test_monitor_columns_through_the_parser(mi300x, faulty):
    text = ok(shim(mi300x, "amd-smi", "monitor", "-p", "-t", "-u", "-m", "-v", "-e"))
    assert text.splitlines()[0] == ("GPU  POWER  PWR_CAP   GPU_T   MEM_T   GFX_CLK   GFX%   MEM%  MEM_CLOCK"
                                    "  SINGLE_ECC  DOUBLE_ECC  PCIE_REPLAY  VRAM_USED   VRAM_FREE  VRAM_TOTAL    VRAM%")
    parsed = parse("amd-smi", text)
    assert parsed["format"] == "monitor" and parsed["gpu_count"] == 8 and not parsed["warnings"]
    row = parsed["gpus"][0]
    assert row["power_w"] == 133 and row["pwr_cap_w"] == 750 and row["gpu_t_c"] == 36 and row["mem_t_c"] == 44
    assert row["gfx_clk_mhz"] == 131 and row["mem_clock_mhz"] == 900 and row["vram_used_mb"] == 283
    assert row["vram_total_mb"] == 196592 and row["single_ecc"] == 0
    corpus = read_corpus("amd-smi", "monitor-p-t-v-32-gpus-mi300x-cpx.txt").splitlines()
    # rows as the corpus prints them: the device index right-aligned in 3 columns, values right-aligned
    assert [ln[:3] for ln in text.splitlines()[1:]] == [ln[:3] for ln in corpus[1:9]]
    cpx = parse("amd-smi", ok(shim(faulty, "amd-smi", "monitor", "-p", "-t", "-v", "-e")))
    assert cpx["gpu_count"] == 56
    assert cpx["gpus"][0]["power_w"] == 133 and cpx["gpus"][1]["power"] is None
    assert cpx["gpus"][16]["double_ecc"] == 2 and cpx["gpus"][1]["vram_total_mb"] == 49148


def test_monitor_default_set_is_the_26_0_table(mi300x):
    lines = ok(shim(mi300x, "amd-smi", "monitor")).splitlines()
    assert lines[0] == "GPU  POWER   GPU_T   MEM_T   GFX_CLK   GFX%   MEM%   ENC%   DEC%      VRAM_USAGE"
    assert lines[1] == "  0  133 W   36 °C   44 °C   131 MHz    0 %    0 %    N/A    0 %    0.3/192.0 GB"
    assert len(lines) == 9


def test_monitor_watch_repeats_and_stops(mi300x):
    started = time.monotonic()
    text = ok(shim(mi300x, "amd-smi", "monitor", "-p", "-w", "1", "-i", "2", "-g", "0", "1"))
    assert time.monotonic() - started >= 1
    samples = text.split("\n\n\n")
    assert samples[0].startswith("'CTRL' + 'C' to stop watching output:\n TIMESTAMP  GPU  POWER  PWR_CAP\n")
    assert len([s for s in samples if s.strip()]) == 2 and text.endswith("\n\n\n")
    assert re.fullmatch(r"\d{10}    1  133 W    750 W", samples[1].splitlines()[2])
    env = {"PATH": os.environ.get("PATH", "/usr/bin"), "SIMNODE_ROOT": str(mi300x)}
    proc = subprocess.Popen([PYTHON, str(SHIMS / "amd_smi.py"), "monitor", "-w", "1"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert proc.stdout.readline() == b"'CTRL' + 'C' to stop watching output:\n"
        assert proc.stdout.readline().startswith(b" TIMESTAMP  GPU  POWER")  # flushed each sample
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
        assert proc.stderr.read() == b""
    finally:
        proc.kill()


def test_process_reports_no_processes(mi300x):
    text = ok(shim(mi300x, "amd-smi", "process", "-g", "0"))
    assert text == "GPU: 0\n    PROCESS_INFO: No running processes detected\n\n"


def test_errors_are_the_cli_exceptions(mi300x, tmp_path):
    bad = shim(mi300x, "amd-smi", "Bogus")
    assert bad.returncode == 1 and bad.stdout == ""
    assert bad.stderr == ("amdsmi_cli_exceptions.AmdSmiInvalidSubcommandException: AMD-SMI Command 'bogus' is "
                          "invalid. Must receive valid AMD-SMI Command first. Run 'amd-smi -h' for more info. "
                          "Error code: -10\n")
    flag = shim(mi300x, "amd-smi", "static", "--bogus")
    assert flag.returncode == 1 and flag.stderr == (
        "amdsmi_cli_exceptions.AmdSmiInvalidParameterException: Parameter '--bogus' is invalid. "
        "Run '--help' for more info. Error code: -2\n")
    gpu = shim(mi300x, "amd-smi", "list", "-g", "8")
    assert gpu.returncode == 1 and "AmdSmiDeviceNotFoundException: Can not find a device: GPU '8'" in gpu.stderr
    unsimulated = shim(mi300x, "amd-smi", "xgmi")
    assert unsimulated.returncode == 2 and "not simulated" in unsimulated.stderr
    none = amd_root(tmp_path, faults={"gpu_missing": list(range(8))}, name="empty")
    lost = shim(none, "amd-smi", "list")
    assert lost.returncode == 255 and lost.stderr.startswith("ERROR:root:Unable to detect any GPU devices")
    assert lost.stdout.startswith("AMDSMI Tool: ")


# --------------------------------------------------------------------------------------------- rocm-smi
def normalise(text: str) -> list[str]:
    """A capture or a shim output as comparable lines: no ANSI italics, no-break spaces or trailing blanks."""
    return [ITALICS.sub("", ln).replace("\xa0", " ").rstrip() for ln in text.splitlines()]


def test_concise_rocm_6_0_layout_equals_the_mi300x_captures(tmp_path):
    four = amd_root(tmp_path, count=4, amd={"rocm_version": "6.0.2"},
                    idle={"temperature_c": [35, 37, 34, 38], "power_draw_w": [133, 131, 131, 137]})
    text = ok(shim(four, "rocm-smi"))
    assert text.startswith("\n\n=") and "\x1b[3m        Name (20 chars)" in text
    ours = normalise(text)[2:]
    theirs = normalise(read_corpus("rocm-smi", "rocm-smi-concise-mi300x-x4.txt"))
    assert len(ours) == len(theirs)
    # everything but GPU 1's and 2's SCLK (132 Mhz in the capture; the profile has one idle clock for all GPUs)
    assert [ln for i, ln in enumerate(ours) if i not in (7, 9)] == [ln for i, ln in enumerate(theirs)
                                                                    if i not in (7, 9)]
    assert ours[7] == theirs[7].replace("132Mhz", "131Mhz")
    one = amd_root(tmp_path, count=1, amd={"rocm_version": "6.0.2"}, idle={"temperature_c": 41, "power_draw_w": 121},
                   name="node9")
    single = normalise(read_corpus("rocm-smi", "rocm-smi-concise-mi300x-x1.txt"))
    assert normalise(ok(shim(one, "rocm-smi")))[2:] == single
    parsed = parse("rocm-smi", text)
    assert parsed["format"] == "concise" and parsed["complete"] and parsed["gpu_count"] == 4
    assert parsed["gpus"][3]["temp_junction_c"] == 38.0 and parsed["gpus"][3]["power_w"] == 137.0
    assert {g["name"] for g in parsed["gpus"]} == {"AMD Instinct MI300X"}


def test_concise_rocm_7_layout_equals_the_mi355x_capture(tmp_path):
    loaded = amd_root(tmp_path, model="AMD Instinct MI355X",
                      idle={"temperature_c": 54, "power_draw_w": 1224, "sm_clock_mhz": 2358, "mem_clock_mhz": 2000,
                            "utilization_pct": 93, "memory_used_mib": 289100})
    text = ok(shim(loaded, "rocm-smi"))
    ours = normalise(text)[2:]
    theirs = normalise(read_corpus("rocm-smi",
                                   "rocm-smi-concise-mi355x-x8-under-load-TRAILING-TABS-plus-amdsmi-version.txt"))
    assert ours[:5] == theirs[:5]  # banners, header, subheader, rule
    assert ours[13:] == theirs[13:15]  # closing rule and End of ROCm SMI Log

    def starts(line: str) -> list[int]:
        return [m.start() for m in re.finditer(r"(?<!\S)\S", line.replace(", ", ",_"))]

    assert all(starts(a) == starts(b) for a, b in zip(ours[5:13], theirs[5:13], strict=True))
    assert ours[5].split()[2:4] == ["0x75a3,", str(state(loaded)["gpus"][0]["kfd_id"])]
    parsed = parse("rocm-smi", text)
    assert parsed["gpu_count"] == 8 and parsed["complete"]
    gpu = parsed["gpus"][0]
    assert gpu["device_id"] == "0x75a3" and gpu["node"] == 2 and gpu["memory_partition"] == "NPS1"
    assert gpu["compute_partition"] == "SPX" and gpu["power_w"] == 1224.0 and gpu["power_cap_w"] == 1400.0
    assert gpu["sclk_mhz"] == 2358 and gpu["vram_use_pct"] == 98.0 and gpu["gpu_use_pct"] == 93.0


def test_concise_on_the_faulty_node_lists_every_partition(faulty):
    parsed = parse("rocm-smi", ok(shim(faulty, "rocm-smi")))
    assert parsed["gpu_count"] == 56
    assert {(g["memory_partition"], g["compute_partition"]) for g in parsed["gpus"]} == {("NPS4", "CPX")}
    assert parsed["gpus"][0]["power_w"] == 133.0 and parsed["gpus"][1]["power_w"] is None


def test_rocm_smi_driver_version_and_partitions(faulty):
    amd = state(faulty)
    text = ok(shim(faulty, "rocm-smi", "--showdriverversion", "--showcomputepartition", "--showmemorypartition"))
    corpus = normalise(read_corpus("rocm-smi", "rocm-smi-a-mi300x-x4-drv6.7.0.txt"))
    ours = normalise(text)
    assert ours[:6] == [ln.replace("6.7.0", amd["amdgpu_version"]) for ln in corpus[:6]]
    assert ours[-1] == "================================== End of ROCm SMI Log ==================================="
    assert "GPU[55]\t\t: Compute Partition: CPX\n" in text and "GPU[0]\t\t: Memory Partition: NPS4\n" in text
    parsed = parse("rocm-smi", text)
    assert parsed["format"] == "all" and parsed["driver_version"] == amd["amdgpu_version"]
    assert parsed["gpu_count"] == 56 and parsed["gpus"][7]["compute_partition"] == "CPX"
    assert parsed["gpus"][7]["memory_partition"] == "NPS4"
    picked = parse("rocm-smi", ok(shim(faulty, "rocm-smi", "--showcomputepartition", "-d", "3", "9")))
    assert [g["index"] for g in picked["gpus"]] == [3, 9]
    as_json = ok(shim(faulty, "rocm-smi", "--showdriverversion", "--showmemorypartition", "--json"))
    doc = parse("rocm-smi", as_json)
    assert doc["format"] == "json" and doc["driver_version"] == amd["amdgpu_version"]
    assert doc["gpu_count"] == 56 and doc["gpus"][0]["memory_partition"] == "NPS4"
    assert list(json.loads(as_json))[-1] == "system"


def test_rocm_smi_json_has_no_concise_form(mi300x, tmp_path):
    refused = shim(mi300x, "rocm-smi", "--json")
    assert refused.returncode == 1
    assert refused.stdout == "NOT_SUPPORTED: Cannot print JSON/CSV output for concise output\n"
    old = amd_root(tmp_path, amd={"rocm_version": "6.0.2"}, name="node7")
    assert shim(old, "rocm-smi", "--json").stdout.startswith("ERROR: Cannot print JSON/CSV")
    assert shim(mi300x, "rocm-smi", "-a").returncode == 2
