"""dcgmi parser: every corpus file, plus hand-written fixtures for layouts the corpus lacks."""

from __future__ import annotations

import json

import pytest

from clustereval.parsers import ParseError, parse
from tests.conftest import corpus_files, read_corpus

TOOL = "dcgmi"


@pytest.mark.parametrize("path", corpus_files(TOOL), ids=lambda p: p.name)
def test_every_corpus_file_parses_to_json_serialisable_result(path):
    out = parse(TOOL, path.read_bytes())
    assert out["tool"] == TOOL
    json.dumps(out)


def test_discovery_h800_dcgm318():
    out = parse(TOOL, read_corpus(TOOL, "discovery-l-h800-x8-dcgm3.1.8.txt"))
    assert out["format"] == "discovery"
    assert out["complete"] is True
    assert out["gpu_count"] == 8
    assert len(out["gpus"]) == 8
    first, last = out["gpus"][0], out["gpus"][7]
    assert first == {"id": 0, "name": "NVIDIA H800", "bus_id": "00000000:18:00.0",
                     "uuid": "GPU-34bf77d1-c686-6821-79a8-32d326c5039c"}
    assert last["bus_id"] == "00000000:E2:00.0"
    assert last["uuid"] == "GPU-474d838c-171f-d249-4f45-bbc01a8eb74a"
    assert out["nvswitches"] == [] and out["nvswitch_count"] == 0
    assert out["cpus"] is None  # DCGM 3.1.8 prints no CPU section


def test_discovery_l4_with_empty_nvswitch_connectx_cpu_sections():
    out = parse(TOOL, read_corpus(TOOL, "discovery-l-4x-l4-aws-empty-nvswitch-connectx-cpu-sections.txt"))
    assert out["gpu_count"] == 4
    assert [g["name"] for g in out["gpus"]] == ["NVIDIA L4"] * 4
    assert out["gpus"][1]["bus_id"] == "00000000:3A:00.0"
    assert out["nvswitches"] == [] and out["connectx"] == [] and out["cpus"] == []
    assert out["cpu_count"] == 0 and out["connectx_count"] == 0
    assert out["complete"] is True and out["warnings"] == []


def test_discovery_cut_short_is_incomplete_but_keeps_rows():
    text = read_corpus(TOOL, "discovery-l-h800-x8-dcgm3.1.8.txt")
    cut = text[: text.index("| 3      |")]
    out = parse(TOOL, cut)
    assert out["complete"] is False
    assert out["gpu_count"] == 8
    assert [g["id"] for g in out["gpus"]] == [0, 1, 2]
    assert any("announced" in w for w in out["warnings"])


def test_diag_r2_a100_all_pass_with_empty_stress_section():
    name = "diag-r2-dcgm-3.3.3-p4de-a100-80gb-8gpu-nvlinks-expected-12-pass.txt"
    out = parse(TOOL, read_corpus(TOOL, name))
    assert out["format"] == "diag"
    assert out["complete"] is True
    assert out["dcgm_version"] == "3.3.3"
    assert out["driver_version"] == "535.104.12"
    assert out["gpu_count"] == 8 and set(out["device_ids"]) == {"20b2"}
    by_name = {t["name"]: t for t in out["tests"]}
    assert by_name["Denylist"]["result"] == "Pass"
    assert by_name["PCIe"]["category"] == "Integration" and by_name["PCIe"]["result"] == "Pass"
    assert by_name["GPU Memory"]["per_gpu"] == {str(i): "Pass" for i in range(8)}
    assert not any(t["category"] == "Stress" for t in out["tests"])
    assert out["overall"] == "Pass"


def test_diag_r3_failure_cuinit():
    name = "diag-r3-FAIL-h100-x8-dcgm3.3.8-cuinit-system-not-yet-initialized.txt"
    out = parse(TOOL, read_corpus(TOOL, name))
    assert out["overall"] == "Fail"
    # the run failed, but the table is whole (closed border): the failure is reported through
    # overall/per_gpu results, not through `complete`; the Info text dcgmi cut short is a warning
    assert out["complete"] is True
    assert any("Persistence Mode" in w and "cut" in w for w in out["warnings"])
    assert out["dcgm_version"] == "3.3.8"
    by_name = {t["name"]: t for t in out["tests"]}
    memory = by_name["GPU Memory"]
    assert memory["result"] == "Fail" and memory["per_gpu"]["7"] == "Fail"
    assert [w["gpu"] for w in memory["warnings"]] == list(range(8))
    assert "system not yet initialized" in memory["warnings"][0]["text"]
    # the wrapped text is re-joined exactly, including the word split across lines
    assert "Reset GPU. Restart DCGM." in memory["warnings"][0]["text"]
    assert by_name["Persistence Mode"]["result"] == "Pass"
    assert by_name["Persistence Mode"]["info"][0].startswith("Persistence mode for GPU 0 is disabled. Enable")
    assert by_name["PCIe"]["result"] == "Skip"
    assert by_name["EUD Test"]["result"] == "Skip"
    assert out["per_gpu_overall"]["0"] == "Fail"


def test_diag_srun_duplicated_tables_collapse():
    out = parse(TOOL, read_corpus(TOOL, "diag-r3-rtx-pro-6000-bw-x2-dcgm3.3.9-srun-duplicated.txt"))
    assert out["copies"] == 2
    assert any("identical" in w for w in out["warnings"])
    assert out["gpu_count"] == 2 and out["driver_version"] == "570.172.08"
    names = [t["name"] for t in out["tests"]]
    assert names.count("Targeted Stress") == 1
    assert {t["name"]: t["result"] for t in out["tests"]}["Targeted Power"] == "Skip"
    assert out["overall"] == "Pass"  # Deployment passed; everything else skipped


def test_diag_json_with_stray_prefix_and_null_entries():
    out = parse(TOOL, read_corpus(TOOL, "diag-j-dcgm3.1.0-8gpu-warning-prefix-null-entries.txt"))
    assert out["format"] == "diag-json"
    assert out["dcgm_version"] == "3.1.0"
    assert out["overall"] == "Pass"
    assert any("THIS SHOULD NOT HAPPEN" in w for w in out["warnings"])
    assert any("null" in w for w in out["warnings"])
    by_name = {t["name"]: t for t in out["tests"]}
    assert by_name["Inforom"]["per_gpu"] == {str(i): "Pass" for i in range(8)}
    assert by_name["software"]["category"] == "Custom"
    assert out["gpu_count"] == 8


def test_diag_json_cut_off_is_parse_error():
    text = read_corpus(TOOL, "diag-j-dcgm3.1.0-8gpu-warning-prefix-null-entries.txt")
    with pytest.raises(ParseError, match="cut off"):
        parse(TOOL, text[: len(text) // 2])


def test_diag_table_cut_short_is_incomplete():
    text = read_corpus(TOOL, "diag-r2-dcgm-3.3.3-p4de-a100-80gb-8gpu-nvlinks-expected-12-pass.txt")
    cut = text[: text.index("| PCIe")]
    out = parse(TOOL, cut)
    assert out["complete"] is False
    assert {t["name"] for t in out["tests"]} >= {"Denylist", "Inforom"}


def test_health_healthy_minimal():
    out = parse(TOOL, read_corpus(TOOL, "health-c-healthy-4x-l4-aws-minimal-report.txt"))
    assert out["format"] == "health"
    assert out["overall"] == "Healthy" and out["healthy"] is True
    assert out["entities"] == [] and out["complete"] is True


# Layout of the example in the DCGM user guide ("dcgmi health -g 1 -c"), typed by hand.
HEALTH_WARNING = """Health Monitor Report
+----------------------------------------------------------------------------+
| Group 1          | Overall Health: Warning                                 |
+==================+=========================================================+
| GPU ID: 0        | Warning                                                 |
|                  | PCIe system: Warning - Detected more than 8 PCIe        |
|                  | replays per minute for GPU 0: 13                        |
+------------------+---------------------------------------------------------+
| GPU ID: 1        | Warning                                                 |
|                  | InfoROM system: Warning - A corrupt InfoROM has been    |
|                  | detected in GPU 1.                                      |
+------------------+---------------------------------------------------------+
"""


def test_health_warning_per_gpu_and_subsystem():
    out = parse(TOOL, HEALTH_WARNING)
    assert out["overall"] == "Warning" and out["healthy"] is False
    assert out["group"] == 1
    assert [e["id"] for e in out["entities"]] == [0, 1]
    pcie = out["entities"][0]["incidents"][0]
    assert pcie["system"] == "PCIe" and pcie["health"] == "Warning"
    assert pcie["message"] == "Detected more than 8 PCIe replays per minute for GPU 0: 13"
    assert out["subsystems"] == {"pcie": "Warning", "inforom": "Warning"}
    assert out["complete"] is True


def test_nvlink_text_gpu1():
    out = parse(TOOL, read_corpus(TOOL, "nvlink-e-h800-gpu1-text.txt"))
    assert out["format"] == "nvlink" and out["gpu"] == 1
    assert out["link_count"] == 8
    assert out["links"][7] == {"link": 7, "crc_flit_errors": 0, "crc_data_errors": 0,
                               "replay_errors": 0, "recovery_errors": 0}
    assert out["total_errors"] == 0 and out["links_with_errors"] == []


def test_nvlink_json_gpu0():
    out = parse(TOOL, read_corpus(TOOL, "nvlink-e-j-h800.json"))
    assert out["format"] == "nvlink-json" and out["gpu"] == 0
    assert [link["link"] for link in out["links"]] == list(range(8))
    assert out["links"][0]["replay_errors"] == 0


def test_nvlink_text_counts_nonzero_errors():
    text = read_corpus(TOOL, "nvlink-e-h800-gpu1-text.txt").replace(
        "| -> Replay Error             | 0  ", "| -> Replay Error             | 42 ", 1)
    out = parse(TOOL, text)
    assert out["total_errors"] == 42 and out["links_with_errors"] == [0]


def test_version():
    out = parse(TOOL, read_corpus(TOOL, "dcgmi-v-version-3.1.8.txt"))
    assert out["format"] == "version"
    assert out["version"] == "3.1.8" and out["hostengine_version"] == "3.1.8"
    assert out["branch"] == "rel_dcgm_3_1"
    assert out["commit_id"] == "c36ef145e4e71092fc106a80566758b1faf6115e"


@pytest.mark.parametrize("text", ["", "   \n", "hello world\n", "Successfully ran diagnostic for group.\n",
                                  "{\"body\": ", "\x00\x01garbage"])
def test_unusable_input_raises_parse_error(text):
    with pytest.raises(ParseError):
        parse(TOOL, text)
