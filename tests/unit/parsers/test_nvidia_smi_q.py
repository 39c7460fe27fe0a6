"""nvidia-smi -q (text) parser: every corpus report, values read by hand, same keys as the XML parser."""

from __future__ import annotations

import json

import pytest

from clustereval.parsers import ParseError, parse
from tests.conftest import corpus_files, read_corpus

TOOL = "nvidia-smi-q"
FILES = corpus_files(TOOL)
GPU_COUNT = {  # "GPU <bus id>" blocks, counted in each file
    "a10-drv535.129.03.txt": 1,
    "d-page-retirement-8x-a100-drv535.86.10-SBE60-DBE5-test-fixture-maybe-edited.txt": 8,
    "d-page-retirement-8x-a100-drv535.86.10-azure-pci-domain-00000001.txt": 8,
    "h100-hbm3-x8-drv535.161.08.txt": 8,
    "h100-hbm3-x8-drv535.183.01.txt": 8,
    "h100-sxm-x8-drv565.57.01.txt": 8,
    "h200-d-perf-clock-power-temp-right-after-40s-gemm-sw-power-cap-counter.txt": 1,
    "h200-d-performance-clock-power-ecc-rowremap-temp-drv580.159.04.txt": 1,
    "h200-single-vm-drv580.159.04-EDITED-ids.txt": 1,
    "h800-gpu0-q-i0-drv525.105.17.txt": 1,
    "rtx4090-x8-drv535.154.05.txt": 8,
    "titan-v-drv560.35.03.txt": 1,
}


def _parse(name: str) -> dict:
    return parse(TOOL, read_corpus(TOOL, name))


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_every_corpus_file(path):
    out = parse(TOOL, path.read_bytes())
    assert out["format"] == "text" and out["complete"] is True
    assert len(out["gpus"]) == GPU_COUNT[path.name]
    assert [g["index"] for g in out["gpus"]] == list(range(len(out["gpus"])))
    json.dumps(out)


def test_same_record_keys_as_the_xml_parser():
    text_gpu = _parse("h200-single-vm-drv580.159.04-EDITED-ids.txt")["gpus"][0]
    xml_gpu = parse("nvidia-smi-q-x", read_corpus("nvidia-smi-q-x",
                                                  "h200-single-vm-drv580.159.04-v13-EDITED-ids.xml"))["gpus"][0]
    assert set(text_gpu) == set(xml_gpu)
    # the two captures were taken at the same second on the same GPU: identity and static fields agree
    for key in ("name", "uuid", "bus_id", "serial", "vbios_version", "persistence_mode", "mig_mode_current",
                "memory_total_mib", "power_limit_w", "clocks_max_sm_mhz", "ecc_mode_current", "remapped_rows",
                "pcie_link_gen_current", "pcie_link_width_current", "throttle_reasons"):
        assert text_gpu[key] == xml_gpu[key], key
    assert text_gpu["ecc_errors"]["volatile"] == xml_gpu["ecc_errors"]["volatile"]


def test_h100_hgx_fabric_replays_and_hw_slowdown():
    out = _parse("h100-hbm3-x8-drv535.161.08.txt")
    assert out["driver_version"] == "535.161.08" and out["attached_gpus"] == 8
    gpu = out["gpus"][0]
    assert gpu["bus_id"] == "00000000:19:00.0"
    assert gpu["name"] == "NVIDIA H100 80GB HBM3"
    assert gpu["fabric_state"] == "Completed" and gpu["fabric_status"] == "Success"
    assert gpu["pcie_replays"] == 67
    assert out["gpus"][1]["pcie_replays"] == 63
    # HW Slowdown : Active with the nested HW Power Brake Slowdown : Active
    assert gpu["throttle_reasons"]["hw_slowdown"] is True
    assert gpu["throttle_reasons"]["hw_power_brake_slowdown"] is True
    assert gpu["throttle_reasons"]["hw_thermal_slowdown"] is False
    assert gpu["ecc_errors"]["aggregate"]["sram_threshold_exceeded"] is False
    assert gpu["remapped_rows"] == {"correctable": 0, "uncorrectable": 0, "pending": False, "failure": False}


def test_h100_replays_since_reset_120():
    assert _parse("h100-hbm3-x8-drv535.183.01.txt")["gpus"][0]["pcie_replays"] == 120


def test_a10_remapped_rows_pending():
    out = _parse("a10-drv535.129.03.txt")
    gpu = out["gpus"][0]
    assert out["cuda_version"] == "12.2"
    assert gpu["name"] == "NVIDIA A10"
    assert gpu["remapped_rows"] == {"correctable": 0, "uncorrectable": 4, "pending": True, "failure": False}


def test_page_retirement_display_only_with_edited_counts():
    out = _parse("d-page-retirement-8x-a100-drv535.86.10-SBE60-DBE5-test-fixture-maybe-edited.txt")
    first, second = out["gpus"][0], out["gpus"][1]
    assert first["bus_id"] == "00000001:00:00.0"
    assert first["retired_pages"]["single_bit_ecc"] == 60 and first["retired_pages"]["double_bit_ecc"] == 5
    assert second["retired_pages"]["double_bit_ecc"] == 61
    assert second["retired_pages"]["pending_blacklist"] is True
    assert first["name"] is None and first["memory_total_mib"] is None  # -d shows nothing else


def test_h200_after_burn_power_samples_and_sw_power_cap_counter():
    gpu = _parse("h200-d-perf-clock-power-temp-right-after-40s-gemm-sw-power-cap-counter.txt")["gpus"][0]
    assert gpu["power_draw_average_w"] == pytest.approx(342.07)
    assert gpu["power_draw_instant_w"] == pytest.approx(129.73)
    assert gpu["power_samples"]["max_w"] == pytest.approx(731.40)
    assert gpu["power_samples"]["count"] == 119
    assert gpu["throttle_reason_counters_us"]["sw_power_cap"] == 40315126
    assert gpu["throttle_reason_counters_us"]["hw_thermal_slowdown"] == 0


def test_h800_old_power_readings_and_throttle_name():
    out = _parse("h800-gpu0-q-i0-drv525.105.17.txt")
    assert out["attached_gpus"] == 8 and len(out["gpus"]) == 1  # -i 0
    gpu = out["gpus"][0]
    assert gpu["power_draw_w"] == pytest.approx(74.71)
    assert gpu["power_limit_w"] == pytest.approx(700.0)
    assert gpu["throttle_reasons_source"] == "clocks_throttle_reasons"
    assert gpu["ecc_mode_current"] == "Disabled"
    assert gpu["memory_total_mib"] == 81559


def test_rtx4090_processes():
    out = _parse("rtx4090-x8-drv535.154.05.txt")
    assert out["gpus"][0]["processes"] == [{"pid": 2010222, "type": "C", "name": "/usr/bin/python",
                                            "used_memory_mib": 6724, "gpu_instance_id": None,
                                            "compute_instance_id": None}]
    assert out["gpus"][7]["processes"][-1]["pid"] == 540189
    assert out["gpus"][7]["processes"][-1]["used_memory_mib"] == 15922


def test_titan_v_old_ecc_layout_and_three_processes():
    gpu = _parse("titan-v-drv560.35.03.txt")["gpus"][0]
    assert gpu["architecture"] == "Volta"
    assert "single_bit_total" in gpu["ecc_errors"]["volatile"]
    assert gpu["ecc_errors"]["volatile_correctable"] is None
    assert [p["pid"] for p in gpu["processes"]] == [100607, 100838, 101815]


def test_cut_in_the_middle_of_the_last_gpu_is_incomplete():
    text = read_corpus(TOOL, "h100-hbm3-x8-drv535.161.08.txt")
    cut = text[: text.index("GPU 00000000:3B:00.0") + 600]
    out = parse(TOOL, cut)
    assert out["complete"] is False
    assert len(out["gpus"]) == 2
    assert out["gpus"][0]["fabric_state"] == "Completed"


def test_single_gpu_full_report_without_processes_is_incomplete():
    text = read_corpus(TOOL, "a10-drv535.129.03.txt")
    out = parse(TOOL, text[: text.index("    Processes")])
    assert out["complete"] is False


@pytest.mark.parametrize("text, reason", [
    ("", "empty"),
    ("No devices were found\n", "not nvidia-smi -q output"),
])
def test_unusable_output(text, reason):
    with pytest.raises(ParseError, match=reason):
        parse(TOOL, text)
