"""nvidia-smi -q -x parser: every corpus document, values read by hand from the files, safety, truncation."""

from __future__ import annotations

import json

import pytest

from clustereval.parsers import ParseError, get, parse
from tests.conftest import corpus_files, read_corpus

TOOL = "nvidia-smi-q-x"
FILES = corpus_files(TOOL)


def _parse(name: str) -> dict:
    return parse(TOOL, read_corpus(TOOL, name))


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_every_corpus_file_parses_to_json_with_one_gpu(path):
    out = parse(TOOL, path.read_bytes())
    assert out["tool"] == TOOL and out["format"] == "xml"
    assert out["complete"] is True
    assert len(out["gpus"]) == 1  # every corpus document holds exactly one <gpu> element
    assert out["gpus"][0]["index"] == 0
    assert out["gpus"][0]["uuid"].startswith("GPU-")
    json.dumps(out)


def test_a100_v12_headline_fields():
    out = _parse("a100-sxm4-80gb-x4-drv535-v12.xml")
    assert out["dtd"] == "nvsmi_device_v12.dtd"
    assert out["driver_version"] == "535.54.03"
    assert out["cuda_version"] == "12.2"
    assert out["timestamp"] == "Fri Aug  4 11:44:30 2023"
    assert out["attached_gpus"] == 4  # the file lists one of the four GPUs
    gpu = out["gpus"][0]
    assert gpu["name"] == "NVIDIA A100-SXM4-80GB"
    assert gpu["uuid"] == "GPU-513536b6-7d19-9063-b049-1e69664bb298"
    assert gpu["bus_id"] == "00000000:01:00.0"
    assert gpu["serial"] == "1650522003820"
    assert gpu["vbios_version"] == "92.00.36.00.02"
    assert gpu["persistence_mode"] is False
    assert gpu["mig_mode_current"] == "Enabled"
    assert len(gpu["mig_devices"]) == 4
    assert gpu["memory_total_mib"] == 81920
    assert gpu["memory_used_mib"] == 50
    assert gpu["temperature_c"] == 27
    assert gpu["memory_temperature_c"] == 44
    assert gpu["power_draw_w"] == pytest.approx(67.03)
    assert gpu["power_limit_w"] == pytest.approx(500.0)
    assert gpu["clocks_sm_mhz"] == 1275
    assert gpu["clocks_max_sm_mhz"] == 1410
    assert gpu["ecc_mode_current"] == "Enabled"
    assert gpu["ecc_errors"]["volatile_uncorrectable"] == 0
    assert gpu["ecc_errors"]["aggregate_correctable"] == 0
    assert gpu["remapped_rows"] is None  # <remapped_rows>N/A</remapped_rows>
    assert gpu["retired_pages"]["single_bit_ecc"] is None
    assert gpu["throttle_reasons_source"] == "clocks_event_reasons"
    assert gpu["throttle_reasons"]["sw_power_cap"] is False
    assert gpu["fabric_state"] is None and gpu["fabric_status"] is None
    assert gpu["pcie_link_gen_current"] == 4
    assert gpu["pcie_link_width_current"] == 16
    assert gpu["pcie_replays"] == 0
    assert gpu["utilization_gpu_pct"] is None  # N/A in MIG mode
    assert gpu["reset_required"] is False


def test_t4_v11_old_power_and_throttle_layout_with_processes():
    out = _parse("tesla-t4-drv515-v11.xml")
    gpu = out["gpus"][0]
    assert out["driver_version"] == "515.105.01"
    assert gpu["name"] == "Tesla T4"
    assert gpu["bus_id"] == "00000000:00:1E.0"
    assert gpu["power_draw_w"] == pytest.approx(26.78)
    assert gpu["power_limit_w"] == pytest.approx(70.0)
    assert gpu["throttle_reasons_source"] == "clocks_throttle_reasons"
    assert gpu["retired_pages"] == {"single_bit_ecc": 0, "double_bit_ecc": 0,
                                    "pending_blacklist": False, "pending_retirement": False}
    assert gpu["pcie_link_gen_current"] == 3
    assert gpu["pcie_link_width_current"] == 8
    assert gpu["pcie_link_width_max"] == 16
    assert [(p["pid"], p["type"], p["name"], p["used_memory_mib"]) for p in gpu["processes"]] == [
        (675, "G", "/usr/lib/xorg/Xorg", 22), (5762, "C", "python", 1005)]


def test_h200_v13_after_load_average_and_instant_power():
    out = _parse("h200-single-vm-drv580.159.04-after-gemm-load-EDITED-ids.xml")
    gpu = out["gpus"][0]
    assert out["timestamp"] == "Mon Nov 30 00:16:46 2026"
    assert out["driver_version"] == "580.159.04" and out["cuda_version"] == "13.0"
    assert gpu["name"] == "NVIDIA H200"
    assert gpu["power_draw_average_w"] == pytest.approx(123.84)
    assert gpu["power_draw_instant_w"] == pytest.approx(126.39)
    assert gpu["power_draw_w"] == pytest.approx(123.84)
    assert gpu["temperature_c"] == 35
    assert gpu["utilization_gpu_pct"] == 15
    assert gpu["throttle_reason_counters_us"]["sw_power_cap"] == 2659704
    assert gpu["remapped_rows"] == {"correctable": 0, "uncorrectable": 0, "pending": False, "failure": False}
    assert gpu["ecc_errors"]["aggregate"]["sram_threshold_exceeded"] is False


def test_h200_idle_is_idle_throttled():
    gpu = _parse("h200-single-vm-drv580.159.04-v13-EDITED-ids.xml")["gpus"][0]
    assert gpu["throttle_reasons"]["gpu_idle"] is True
    assert gpu["throttle_reasons_active"] == ["gpu_idle"]
    assert gpu["persistence_mode"] is True
    assert gpu["memory_total_mib"] == 143771
    assert gpu["mig_mode_current"] == "Disabled"
    assert gpu["pcie_link_gen_current"] == 5


def test_gtx_1660_without_doctype_and_with_na_ecc():
    out = _parse("gtx-1660-ti-drv418-nodtd.xml")
    assert out["dtd"] is None
    assert out["driver_version"] == "418.43" and out["cuda_version"] == "10.1"
    gpu = out["gpus"][0]
    assert gpu["name"] == "Graphics Device"
    assert gpu["serial"] is None  # <serial>N/A</serial>
    assert gpu["ecc_errors"]["volatile_correctable"] is None


def test_quadro_tab_indented_old_single_double_bit_ecc_layout():
    gpu = _parse("quadro-p2000-drv525-v12-tabs.xml")["gpus"][0]
    assert gpu["name"] == "Quadro P2000"
    assert gpu["persistence_mode"] is True
    assert "single_bit_total" in gpu["ecc_errors"]["volatile"]


def test_stripped_down_document_gives_none_for_missing_fields():
    out = _parse("gtx-1070-ti-v10-partial.xml")
    assert out["driver_version"] is None and out["attached_gpus"] is None
    gpu = out["gpus"][0]
    assert gpu["name"] == "GeForce GTX 1070 Ti"
    assert gpu["memory_total_mib"] == 4096
    assert gpu["power_draw_w"] is None
    assert gpu["fan_speed_pct"] == 100


def test_rtx_4000_processes_including_c_plus_g():
    gpu = _parse("rtx-4000-sff-ada-drv595-v13.xml")["gpus"][0]
    assert gpu["ecc_mode_current"] == "Disabled"
    assert (34626, "C+G", "/usr/lib/chromium/chromium") in [(p["pid"], p["type"], p["name"])
                                                             for p in gpu["processes"]]


TWO_GPUS = """<?xml version="1.0" ?>
<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">
<nvidia_smi_log>
\t<timestamp>Tue Jan  2 10:00:00 2024</timestamp>
\t<driver_version>535.104.05</driver_version>
\t<cuda_version>12.2</cuda_version>
\t<attached_gpus>2</attached_gpus>
\t<gpu id="00000000:18:00.0">
\t\t<product_name>NVIDIA H100 80GB HBM3</product_name>
\t\t<uuid>GPU-aaaaaaaa-0000-0000-0000-000000000000</uuid>
\t\t<clocks_event_reasons>
\t\t\t<clocks_event_reason_gpu_idle>Not Active</clocks_event_reason_gpu_idle>
\t\t\t<clocks_event_reason_hw_thermal_slowdown>Active</clocks_event_reason_hw_thermal_slowdown>
\t\t</clocks_event_reasons>
\t\t<remapped_rows>
\t\t\t<remapped_row_corr>3</remapped_row_corr>
\t\t\t<remapped_row_unc>1</remapped_row_unc>
\t\t\t<remapped_row_pending>Yes</remapped_row_pending>
\t\t\t<remapped_row_failure>No</remapped_row_failure>
\t\t</remapped_rows>
\t\t<fabric>
\t\t\t<state>Completed</state>
\t\t\t<status>Success</status>
\t\t</fabric>
\t</gpu>
\t<gpu id="00000000:2A:00.0">
\t\t<product_name>NVIDIA H100 80GB HBM3</product_name>
\t\t<uuid>GPU-bbbbbbbb-0000-0000-0000-000000000000</uuid>
\t\t<fb_memory_usage>
\t\t\t<total>81559 MiB</total>
"""


def test_hand_written_remap_pending_thermal_throttle_and_fabric():
    out = parse(TOOL, TWO_GPUS + "\t\t</fb_memory_usage>\n\t</gpu>\n</nvidia_smi_log>\n")
    assert out["complete"] is True
    first, second = out["gpus"]
    assert first["throttle_reasons"] == {"gpu_idle": False, "hw_thermal_slowdown": True}
    assert first["throttle_reasons_active"] == ["hw_thermal_slowdown"]
    assert first["remapped_rows"] == {"correctable": 3, "uncorrectable": 1, "pending": True, "failure": False}
    assert (first["fabric_state"], first["fabric_status"]) == ("Completed", "Success")
    assert second["index"] == 1 and second["bus_id"] == "00000000:2A:00.0"
    assert second["memory_total_mib"] == 81559


def test_truncated_inside_second_gpu_keeps_first_gpu():
    out = parse(TOOL, TWO_GPUS)
    assert out["complete"] is False
    assert [g["bus_id"] for g in out["gpus"]] == ["00000000:18:00.0"]
    assert any("00000000:2A:00.0" in w for w in out["warnings"])


def test_truncated_inside_first_gpu_is_a_parse_error():
    text = read_corpus(TOOL, "a100-sxm4-80gb-x4-drv535-v12.xml")
    with pytest.raises(ParseError, match="no GPU was read completely"):
        parse(TOOL, text[: len(text) // 2])


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_truncation_at_many_points_never_raises_anything_but_parse_error(path):
    text = path.read_text(errors="replace")
    fn = get(TOOL)
    for cut in range(0, len(text), max(1, len(text) // 60)):
        try:
            out = fn(text[:cut])
        except ParseError:
            continue
        assert out["complete"] is False or cut >= text.rindex("</nvidia_smi_log>")


def test_entity_declarations_are_refused():
    bomb = ('<?xml version="1.0"?>\n<!DOCTYPE nvidia_smi_log [\n<!ENTITY a "aaaaaaaaaa">\n'
            '<!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">\n]>\n<nvidia_smi_log><driver_version>&b;'
            '</driver_version></nvidia_smi_log>')
    with pytest.raises(ParseError, match="ENTITY"):
        parse(TOOL, bomb)


def test_internal_dtd_subset_is_refused():
    with pytest.raises(ParseError, match="internal DTD"):
        parse(TOOL, '<?xml version="1.0"?><!DOCTYPE nvidia_smi_log [ ]><nvidia_smi_log/>')


@pytest.mark.parametrize("text, reason", [
    ("", "empty"),
    ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.", "no <nvidia_smi_log>"),
    ('<?xml version="1.0" ?>\n<other/>', "root element"),
    ('<?xml version="1.0" ?>\n<nvidia_smi_log>\n\t<driver', "ends early"),
])
def test_unusable_output_gives_a_clear_parse_error(text, reason):
    with pytest.raises(ParseError, match=reason):
        parse(TOOL, text)


def test_banner_before_document_is_ignored_with_a_warning():
    text = "Warning: persistence mode is disabled\n" + read_corpus(TOOL, "tesla-t4-drv515-v11.xml")
    out = parse(TOOL, text)
    assert out["complete"] is True and out["gpus"][0]["name"] == "Tesla T4"
    assert out["warnings"]
