"""rocm-smi parser: JSON, Concise Info and -a output from the corpus."""

from __future__ import annotations

import json

import pytest

from clustereval.parsers import ParseError, parse
from tests.conftest import corpus_files, read_corpus

TOOL = "rocm-smi"


@pytest.mark.parametrize("path", corpus_files(TOOL), ids=lambda p: p.name)
def test_every_corpus_file_parses(path):
    out = parse(TOOL, path.read_bytes())
    assert out["tool"] == TOOL and out["gpus"] and out["complete"] is True
    json.dumps(out)


def test_json_mi100_rocm602():
    out = parse(TOOL, read_corpus(TOOL, "mi100-x4-rocm602.json"))
    assert out["format"] == "json" and out["gpu_count"] == 4 and out["driver_version"] == "6.3.6"
    gpu = out["gpus"][0]
    assert gpu["device_id"] == "0x738c" and gpu["vbios"] == "113-D3431401-101"
    assert gpu["temp_junction_c"] == 55.0 and gpu["power_w"] == 36.0 and gpu["power_cap_w"] == 290.0
    assert gpu["sclk_mhz"] == 300 and gpu["mclk_mhz"] == 1200
    link = next(p for p in out["topology"] if (p["a"], p["b"]) == (0, 1))
    assert link == {"a": 0, "b": 1, "weight": 40, "hops": 2, "link_type": "PCIE"}


def test_json_mi100_x6_process_entry():
    out = parse(TOOL, read_corpus(TOOL, "mi100-x6-rocm571.json"))
    assert out["gpu_count"] == 6 and out["driver_version"] == "6.2.4"
    assert out["processes"] == {"PID104225": "mlir-cpu-runner, 0, 0, 0, 0"}


def test_json_key_spellings_rocm430_and_612():
    old = parse(TOOL, read_corpus(TOOL, "rx6700xt-rocm430.json"))["gpus"][0]
    new = parse(TOOL, read_corpus(TOOL, "rx6700xt-rocm612.json"))["gpus"][0]
    assert old["name"] == "0x1002"  # ROCm 4.3 prints the raw vendor id as the card series
    assert new["name"] == "Navi 22 [Radeon RX 6700/6700 XT / 6800M]"
    assert new["vram_use_pct"] == 12.0 and old["device_id"] == new["device_id"] == "0x73df"


def test_concise_mi300x_x4():
    out = parse(TOOL, read_corpus(TOOL, "rocm-smi-concise-mi300x-x4.txt"))
    assert out["format"] == "concise" and out["gpu_count"] == 4
    gpu3 = out["gpus"][3]
    assert gpu3["name"] == "AMD Instinct MI300X" and gpu3["device_id"] == "0x74a1"
    assert gpu3["temp_junction_c"] == 38.0 and gpu3["power_w"] == 137.0 and gpu3["power_cap_w"] == 750.0
    assert gpu3["sclk_mhz"] == 131 and gpu3["mclk_mhz"] == 900
    assert gpu3["memory_partition"] == "NPS1" and gpu3["compute_partition"] == "SPX"


def test_concise_mi355x_nbsp_and_tabs():
    out = parse(TOOL, read_corpus(TOOL, "rocm-smi-concise-mi355x-x8-under-load-TRAILING-TABS-plus-amdsmi-version.txt"))
    assert out["gpu_count"] == 8 and out["rocm_version"] == "7.1.2"
    assert out["amdsmi_version"] == "24.6.2+2b02a07"
    gpu7 = out["gpus"][7]
    assert gpu7["node"] == 6 and gpu7["power_w"] == 1317.0 and gpu7["gpu_use_pct"] == 100.0
    assert gpu7["vram_use_pct"] == 98.0 and gpu7["sclk_mhz"] == 2374


def test_all_mi300x():
    out = parse(TOOL, read_corpus(TOOL, "rocm-smi-a-mi300x-x4-drv6.7.0.txt"))
    assert out["format"] == "all" and out["driver_version"] == "6.7.0" and out["gpu_count"] == 4
    assert out["gpus"][1]["unique_id"] == "0xb4fa34630e85d42a"
    assert out["gpus"][3]["temp_junction_c"] == 39.0
    assert out["gpus"][0]["vbios"] == "113-MI3SRIOV-001"


def test_cut_short_outputs():
    text = read_corpus(TOOL, "rocm-smi-concise-mi300x-x4.txt")
    out = parse(TOOL, text[: text.index("2       [")])
    assert out["complete"] is False and out["gpu_count"] == 2
    with pytest.raises(ParseError, match="cut off"):
        parse(TOOL, read_corpus(TOOL, "mi100-x4-rocm602.json")[:500])
    with pytest.raises(ParseError):
        parse(TOOL, "")
