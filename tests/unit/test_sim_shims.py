"""The simulated nvidia-smi / dcgmi shims against the layout of the real tools in the corpus.

Each test renders a node state with the real profile code, writes it to a tmp dir, runs the standalone
shim script with ``/usr/bin/python3`` (as a node would) and compares with a real output of the same
driver branch.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from clustereval.sim.profile import load_profile, render_node
from tests.conftest import read_corpus

SHIMS = Path(__file__).resolve().parents[2] / "src" / "clustereval" / "sim" / "shims"
PYTHON = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable


# The capture h100-hbm3-x8-drv550.txt and the v12 XML corpus come from R535/R550 drivers: to compare
# layouts line for line, render the reference node on that driver.
CAPTURE_DRIVER = {"driver_version": "550.90.07", "cuda_version": "12.4"}


def node_root(tmp_path: Path, profile: str = "reference", node: str = "node1", **changes) -> Path:
    state = render_node(load_profile(profile), node)
    state.update(changes)
    root = tmp_path / node
    root.mkdir()
    (root / "node.json").write_text(json.dumps(state))
    return root


def shim(root: Path, tool: str, *args: str) -> subprocess.CompletedProcess[bytes]:
    script = SHIMS / ("nvidia_smi.py" if tool == "nvidia-smi" else "dcgmi.py")
    env = {"PATH": os.environ.get("PATH", "/usr/bin"), "SIMNODE_ROOT": str(root)}
    return subprocess.run([PYTHON, str(script), *args], env=env, capture_output=True, timeout=30)


def text(result: subprocess.CompletedProcess[bytes]) -> str:
    assert result.returncode == 0, result.stderr
    return result.stdout.decode()


def parser_or_skip(tool: str):
    parsers = pytest.importorskip("clustereval.parsers")
    if tool not in parsers.tools():
        pytest.skip(f"no parser for {tool} yet")
    return lambda output: parsers.parse(tool, output)


def test_shims_do_not_import_clustereval():
    for script in SHIMS.glob("*.py"):
        assert not re.search(r"^\s*(from|import)\s+clustereval", script.read_text(), re.M), script


# ----------------------------------------------------------------------------------- default table


def test_default_table_matches_the_driver_550_layout_line_for_line(tmp_path):
    real = read_corpus("nvidia-smi", "h100-hbm3-x8-drv550.txt").splitlines()
    ours = text(shim(node_root(tmp_path, **CAPTURE_DRIVER), "nvidia-smi")).splitlines()
    assert re.fullmatch(r"\w{3} \w{3} [ \d]\d \d\d:\d\d:\d\d \d{4}", ours[0])
    assert re.fullmatch(r"\w{3} \w{3} [ \d]\d \d\d:\d\d:\d\d \d{4}", real[0])
    # the reference profile describes the very node of that capture: same GPUs, same idle readings
    assert ours[1:] == real[1:]


def test_default_table_widths_hold_for_a_long_gpu_name_and_other_driver(tmp_path):
    root = node_root(tmp_path, "flawed", "node3")
    ours = text(shim(root, "nvidia-smi")).splitlines()
    real = read_corpus("nvidia-smi", "h100-hbm3-x8-drv550.txt").splitlines()
    assert "535.183.01" in ours[2] and "CUDA Version: 12.2" in ours[2]
    assert [len(line) for line in ours[1:]] == [len(line) for line in real[1:]]


def test_default_table_parses(tmp_path):
    parse = parser_or_skip("nvidia-smi")
    result = parse(text(shim(node_root(tmp_path, **CAPTURE_DRIVER), "nvidia-smi")))
    assert result["complete"] and len(result["gpus"]) == 8
    assert result["driver_version"] == "550.90.07"


# ----------------------------------------------------------------------------------- -q text


def gpu_labels(report: str) -> list[str]:
    block = report.split("\nGPU ", 1)[1].split("\n\n")[0]
    return [re.split(r"\s+:", line)[0].rstrip() for line in block.splitlines()[1:]]


def test_q_report_has_the_labels_of_a_real_h100_report_in_the_same_order(tmp_path):
    ours = text(shim(node_root(tmp_path), "nvidia-smi", "-q"))
    real = read_corpus("nvidia-smi-q", "h100-hbm3-x8-drv535.161.08.txt")
    assert gpu_labels(ours) == gpu_labels(real)
    assert ours.startswith("\n==============NVSMI LOG==============\n\n")
    colons = {line.index(" : ") for line in ours.splitlines() if " : " in line}
    real_colons = {line.index(" : ") for line in real.splitlines() if " : " in line}
    assert colons == real_colons == {41}


def test_q_report_parses(tmp_path):
    parse = parser_or_skip("nvidia-smi-q")
    result = parse(text(shim(node_root(tmp_path, "flawed", "node2"), "nvidia-smi", "-q")))
    assert result["complete"] and len(result["gpus"]) == 7


# ----------------------------------------------------------------------------------- -q -x


def top_level_tags(document: str) -> list[str]:
    root = ET.fromstring(re.sub(r"<!DOCTYPE[^>]*>", "", document))
    return [child.tag for child in root.find("gpu")]


def test_xml_is_dtd_v12_with_the_element_order_of_a_real_v12_document(tmp_path):
    ours = text(shim(node_root(tmp_path, **CAPTURE_DRIVER), "nvidia-smi", "-q", "-x"))
    real = read_corpus("nvidia-smi-q-x", "a100-sxm4-80gb-x4-drv535-v12.xml")
    assert ours.splitlines()[:3] == real.splitlines()[:3][:1] + real.splitlines()[1:3]
    # Hopper reports two sections the A100 capture lacks (the H100 -q text shows them too)
    hopper_only = {"inforom_bbx_flush", "sparse_operation_mode"}
    assert [t for t in top_level_tags(ours) if t not in hopper_only] == top_level_tags(real)
    assert "    <gpu id=\"00000000:19:00.0\">" in ours.splitlines()
    assert ours.endswith("</nvidia_smi_log>\n")


def test_xml_for_newer_drivers_uses_the_v13_form(tmp_path):
    ours = text(shim(node_root(tmp_path, driver_version="580.159.04", cuda_version="13.0"), "nvidia-smi", "-q", "-x"))
    real = read_corpus("nvidia-smi-q-x", "h200-single-vm-drv580.159.04-v13-EDITED-ids.xml")
    assert ours.splitlines()[:3] == real.splitlines()[:3]
    assert ours.splitlines()[-2:] == real.splitlines()[-2:]
    assert "\t<driver_version>580.159.04</driver_version>" in ours.splitlines()


def test_xml_parses_and_truncated_fault_is_cut(tmp_path):
    parse = parser_or_skip("nvidia-smi-q-x")
    whole = parse(text(shim(node_root(tmp_path), "nvidia-smi", "-q", "-x")))
    assert whole["complete"] and len(whole["gpus"]) == 8
    assert {g["uuid"] for g in whole["gpus"]} == {g["uuid"] for g in json.loads(
        (tmp_path / "node1" / "node.json").read_text())["gpus"]}
    cut_root = node_root(tmp_path, "flawed", "node4")
    cut = text(shim(cut_root, "nvidia-smi", "-q", "-x"))
    assert "</nvidia_smi_log>" not in cut
    with pytest.raises(ET.ParseError):
        ET.fromstring(re.sub(r"<!DOCTYPE[^>]*>", "", cut))
    assert parse(cut)["complete"] is False


# ----------------------------------------------------------------------------------- --query-gpu


def test_query_gpu_header_matches_the_real_header_for_the_same_fields(tmp_path):
    real = read_corpus("nvidia-smi", "h200-query-gpu-csv-drv580.159.04-EDITED-ids.csv").splitlines()
    # SOURCES.md: the capture asked for clocks_throttle_reasons.active, the tool renamed it in the header
    asked = real[0].replace(" [MiB]", "").replace(" [W]", "").replace(" [MHz]", "").replace(
        "clocks_event_reasons.active", "clocks_throttle_reasons.active").replace(", ", ",")
    ours = text(shim(node_root(tmp_path), "nvidia-smi", f"--query-gpu={asked}", "--format=csv")).splitlines()
    assert ours[0] == real[0]
    assert len(ours) == 1 + 8
    shape = [re.sub(r"[0-9A-Fa-f]", "9", cell) for cell in real[1].split(", ")]
    ours_shape = [re.sub(r"[0-9A-Fa-f]", "9", cell) for cell in ours[1].split(", ")]
    for column, (mine, theirs) in enumerate(zip(ours_shape, shape, strict=True)):
        if column not in (1, 5):  # GPU name and VBIOS string differ by model
            assert len(mine.split()) == len(theirs.split()), (column, mine, theirs)


def test_query_gpu_units_and_options(tmp_path):
    root = node_root(tmp_path)
    out = text(shim(root, "nvidia-smi", "--query-gpu=index,memory.total,power.limit,utilization.gpu,clocks.max.sm,"
                                         "compute_cap,serial", "--format=csv,noheader,nounits"))
    first = out.splitlines()[0].split(", ")
    assert first[:6] == ["0", "81559", "700.00", "0", "1980", "9.0"]
    assert re.fullmatch(r"\d{13}", first[6])
    header = text(shim(root, "nvidia-smi", "--query-gpu=memory.total,utilization.gpu,clocks.sm", "--format=csv"))
    assert header.splitlines()[0] == "memory.total [MiB], utilization.gpu [%], clocks.current.sm [MHz]"


def test_query_gpu_parses(tmp_path):
    parse = parser_or_skip("nvidia-smi-query")
    out = text(shim(node_root(tmp_path), "nvidia-smi", "--query-gpu=index,uuid,temperature.gpu,power.draw",
                    "--format=csv"))
    result = parse(out)
    assert result["complete"] and len(result["rows"]) == 8
    assert result["rows"][0]["power.draw"] == 72.0


def test_per_gpu_temperature_fault(tmp_path):
    root = node_root(tmp_path)
    profile = load_profile("reference")
    profile["nodes"]["node1"] = {"faults": {"gpu_temperature_c": {3: 91}}}
    state = render_node(profile, "node1")
    (root / "node.json").write_text(json.dumps(state))
    temps = text(shim(root, "nvidia-smi", "--query-gpu=temperature.gpu", "--format=csv,noheader")).split()
    assert temps[3] == "91" and temps[0] == "27"


# ----------------------------------------------------------------------------------- -L, errors, faults


def test_list_gpus_and_missing_gpu(tmp_path):
    lines = text(shim(node_root(tmp_path, "flawed", "node2"), "nvidia-smi", "-L")).splitlines()
    real_first = read_corpus("nvidia-smi", "nvidia-smi-L-h100-mig-7x1g.10gb.txt").splitlines()[0]
    pattern = r"GPU \d+: NVIDIA H100 80GB HBM3 \(UUID: GPU-[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}\)"
    assert re.fullmatch(pattern, real_first)
    assert len(lines) == 7 and all(re.fullmatch(pattern, line) for line in lines)
    assert [line.split(":")[0] for line in lines] == [f"GPU {k}" for k in range(7)]


def test_unknown_arguments_and_fields_fail_like_nvidia_smi(tmp_path):
    root = node_root(tmp_path)
    bad_option = shim(root, "nvidia-smi", "--bogus")
    assert bad_option.returncode == 2 and b"Invalid combination of input arguments" in bad_option.stdout
    bad_field = shim(root, "nvidia-smi", "--query-gpu=index,warp.speed", "--format=csv")
    assert bad_field.returncode == 2 and b'Field "warp.speed" is not a valid field to query.' in bad_field.stdout


def test_missing_and_garbage_faults(tmp_path):
    missing = shim(node_root(tmp_path, nvidia_smi="missing"), "nvidia-smi")
    assert missing.returncode == 127 and b"command not found" in missing.stderr
    (tmp_path / "node1").rename(tmp_path / "old")
    garbage = shim(node_root(tmp_path, nvidia_smi="garbage"), "nvidia-smi", "-q", "-x")
    assert garbage.returncode == 0 and len(garbage.stdout) > 1000
    with pytest.raises(UnicodeDecodeError):
        garbage.stdout.decode("utf-8")


# ----------------------------------------------------------------------------------- dcgmi


def test_dcgmi_discovery_matches_dcgm_3_1_layout(tmp_path):
    real = read_corpus("dcgmi", "discovery-l-h800-x8-dcgm3.1.8.txt").splitlines()
    ours = text(shim(node_root(tmp_path, dcgm_version="3.1.8"), "dcgmi", "discovery", "-l")).splitlines()
    assert len(ours) == len(real)
    for mine, theirs in zip(ours, real, strict=True):
        assert len(mine) == len(theirs)
        assert re.sub(r"[^|+-]", " ", mine) == re.sub(r"[^|+-]", " ", theirs) or "UUID" in mine
        assert mine.split(":")[0] == theirs.split(":")[0] or mine[:2] == "| "
    assert ours[0] == real[0] == "8 GPUs found."


def test_dcgmi_newer_layout_has_connectx_and_cpu_sections(tmp_path):
    real = read_corpus("dcgmi", "discovery-l-4x-l4-aws-empty-nvswitch-connectx-cpu-sections.txt").splitlines()
    ours = text(shim(node_root(tmp_path, "flawed", "node2"), "dcgmi", "discovery", "-l")).splitlines()
    assert ours[0] == "7 GPUs found."
    tail_start = real.index("0 NvSwitches found.")
    assert ours[ours.index("0 NvSwitches found."):] == real[tail_start:]


def test_dcgmi_parses(tmp_path):
    parse = parser_or_skip("dcgmi")
    result = parse(text(shim(node_root(tmp_path), "dcgmi", "discovery", "-l")))
    assert result["complete"] and result["gpu_count"] == 8


def test_dcgmi_health_check_is_the_real_healthy_report_byte_for_byte(tmp_path):
    ours = text(shim(node_root(tmp_path), "dcgmi", "health", "-g", "0", "-c"))
    assert ours == read_corpus("dcgmi", "health-c-healthy-4x-l4-aws-minimal-report.txt")
    parse = parser_or_skip("dcgmi")
    assert str(parse(ours)["overall"]).lower() == "healthy"
