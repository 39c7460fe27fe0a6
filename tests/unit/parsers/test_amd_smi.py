"""amd-smi parser: list/metric blocks, monitor tables and topology tables from the corpus."""

from __future__ import annotations

import json

import pytest

from clustereval.parsers import ParseError, parse
from tests.conftest import corpus_files, read_corpus

TOOL = "amd-smi"


@pytest.mark.parametrize("path", corpus_files(TOOL), ids=lambda p: p.name)
def test_every_corpus_file_parses(path):
    out = parse(TOOL, path.read_bytes())
    assert out["tool"] == TOOL
    json.dumps(out)


def test_list_blocks():
    out = parse(TOOL, read_corpus(TOOL, "list-kfd-id-node-id-redacted-uuid.txt"))
    assert out["format"] == "keyvalue" and out["gpu_count"] == 2
    assert out["gpus"][1] == {"gpu": 1, "bdf": "0000:26:00.0", "uuid": "<redacted>", "kfd_id": 59881,
                              "node_id": 2, "partition_id": 0}


def test_metric_throttle_nested_section():
    out = parse(TOOL, read_corpus(TOOL, "metric-throttle-mi300x-amdsmi-6.3-changelog.txt"))
    assert out["complete"] is False  # the published excerpt ends with the author's '...'
    throttle = out["gpus"][1]["throttle"]
    assert throttle["socket_thermal_accumulated"] == 18010
    assert throttle["ppt_violation_status"] == "NOT ACTIVE"
    assert throttle["ppt_violation_activity_pct"] == 0


def test_monitor_32_logical_gpus():
    out = parse(TOOL, read_corpus(TOOL, "monitor-p-t-v-32-gpus-mi300x-cpx.txt"))
    assert out["format"] == "monitor" and out["gpu_count"] == 32 and out["complete"] is True
    assert out["gpus"][4] == {"gpu": 4, "power_w": 221, "gpu_temp_c": 50, "mem_temp_c": 42,
                              "vram_used_mb": 283, "vram_total_mb": 196300}


def test_monitor_q_with_process_table():
    out = parse(TOOL, read_corpus(TOOL, "monitor-q-with-process-table-radeon.txt"))
    (gpu,) = out["gpus"]
    assert gpu["gpu_temp_c"] == 103 and gpu["gfx_util_pct"] == 99 and gpu["gfx_clock_mhz"] == 1920
    assert gpu["enc_util"] is None and gpu["pcie_bw_mbitps"] is None  # N/A
    assert gpu["vram_total_mb"] == 16335
    (proc,) = out["processes"]
    assert proc["name"] == "rvs" and proc["pid"] == 1564865


def test_violation_table_with_elision_is_partial():
    out = parse(TOOL, read_corpus(TOOL, "monitor-violation-32-partitions.txt"))
    assert out["complete"] is False and out["gpu_count"] == 16
    assert out["gpus"][15]["hbm_tviol_pct"] == 0


def test_topology_tables():
    out = parse(TOOL, read_corpus(TOOL, "topology-cndz-mi300x-8gpu.txt"))
    assert out["format"] == "topology" and out["complete"] is True and out["warnings"] == []
    assert set(out["tables"]) == {"cache_coherancy", "atomics", "dma", "bi_directional"}
    assert out["tables"]["cache_coherancy"]["0000:0c:00.0"]["0000:38:00.0"] == "NC"
    assert out["tables"]["atomics"]["0000:af:00.0"]["0000:22:00.0"] == "N/A"
    assert out["tables"]["dma"]["0000:df:00.0"]["0000:bf:00.0"] == "F"
    assert len(out["bdfs"]) == 8


def test_unknown_and_empty_raise():
    with pytest.raises(ParseError):
        parse(TOOL, "")
    with pytest.raises(ParseError):
        parse(TOOL, "amd-smi: command not found\n")


# ------------------------------------------------------------------ monitor: 26.x default set and watch mode
# Rows laid out the way amdsmi_cli prints them (amdsmi_commands.py monitor(): header names right-justified to the
# column widths; amdsmi_logger.py _convert_json_to_tabular: values right-justified to the same widths; the default
# set's VRAM_USAGE is f"{used:5.1f}/{total:5.1f} GB".rjust(16)).
DEFAULT_26 = ("GPU  POWER   GPU_T   MEM_T   GFX_CLK   GFX%   MEM%   ENC%   DEC%      VRAM_USAGE\n"
              "  0  133 W   36 °C   44 °C   131 MHz    0 %    0 %    N/A    0 %    0.3/192.0 GB\n"
              "  1   33 W   41 °C   46 °C  2100 MHz   99 %   13 %    N/A    0 %    0.5/ 24.0 GB\n")


def watch_text(stamps: list[int], gpus: int = 2) -> str:
    """``amd-smi monitor -p -t -w 1`` as handle_watch prints it: the banner, then per interval the TIMESTAMP table
    and print("\\n")'s two blank lines."""
    out = "'CTRL' + 'C' to stop watching output:\n"
    for stamp in stamps:
        out += "TIMESTAMP".rjust(10) + "  GPU" + "POWER".rjust(7) + "PWR_CAP".rjust(9) + "GPU_T".rjust(8) + \
            "MEM_T".rjust(8) + "\n"
        for gpu in range(gpus):
            out += (str(stamp).rjust(10) + "  " + str(gpu).rjust(3) + f"{200 + gpu} W".rjust(7) + "750 W".rjust(9)
                    + f"{50 + gpu} °C".rjust(8) + "N/A".rjust(8) + "\n")
        out += "\n\n"
    return out


def test_monitor_default_set_fraction_cells():
    out = parse(TOOL, DEFAULT_26)
    assert out["format"] == "monitor" and out["gpu_count"] == 2 and out["warnings"] == []
    assert out["gpus"][0]["vram_used_gb"] == 0.3 and out["gpus"][0]["vram_total_gb"] == 192.0
    assert out["gpus"][1]["vram_used_gb"] == 0.5 and out["gpus"][1]["vram_total_gb"] == 24.0
    assert out["gpus"][1]["gfx_clk_mhz"] == 2100 and out["gpus"][1]["gfx%_pct"] == 99 and out["gpus"][0]["enc%"] is None


def test_monitor_watch_mode():
    out = parse(TOOL, watch_text([1764460801, 1764460802, 1764460803]))
    assert out["format"] == "monitor-watch" and out["samples"] == 3 and out["gpu_count"] == 2
    assert len(out["rows"]) == 6 and out["warnings"] == [] and out["complete"] is True
    assert out["rows"][3] == {"timestamp": 1764460802, "gpu": 1, "power_w": 201, "pwr_cap_w": 750, "gpu_t_c": 51,
                              "mem_t": None}
    assert [g["timestamp"] for g in out["gpus"]] == [1764460803, 1764460803]


def test_monitor_watch_banner_only_is_a_parse_error():
    with pytest.raises(ParseError):
        parse(TOOL, "'CTRL' + 'C' to stop watching output:\n")


def test_monitor_watch_from_the_shim(tmp_path):
    from tests.unit.test_sim_amd_shims import amd_root, ok, shim
    text = ok(shim(amd_root(tmp_path), "amd-smi", "monitor", "-p", "-t", "-u", "-m", "-e", "-w", "1", "-i", "2"))
    out = parse(TOOL, text)
    assert out["format"] == "monitor-watch" and out["samples"] == 2 and out["gpu_count"] == 8 and not out["warnings"]
    assert out["rows"][8]["gpu"] == 0 and out["rows"][8]["mem_clock_mhz"] == 900 and out["rows"][8]["double_ecc"] == 0


# ------------------------------------------------------------------ gpu-telemetry-loop: one parser, both vendors
LOOP = "gpu-telemetry-loop"


def test_telemetry_loop_reads_amd_watch_rows_under_nvidia_names():
    out = parse(LOOP, watch_text([1764460801, 1764460802]))
    assert out["vendor"] == "amd" and out["gpu_indices"] == [0, 1] and len(out["rows"]) == 4
    row = out["rows"][1]
    assert row["timestamp"] == "2025/11/30 00:00:01.000" and row["timestamp_epoch_s"] == 1764460801
    assert row["index"] == 1 and row["temperature.gpu"] == 51 and row["temperature.memory"] is None
    assert row["power.draw"] == 201 and row["power.limit"] == 750 and row["pci.bus_id"] is None
    assert row["clocks.current.sm"] is None and row["throttle_reasons_active"] is None and row["sampler"] == "amd-smi"
    assert out["summary"]["1"]["power.draw"] == {"min": 201, "max": 201, "count": 2, "mean": 201.0}


def test_telemetry_loop_on_the_amd_corpus():
    radeon = parse(LOOP, read_corpus(TOOL, "monitor-q-with-process-table-radeon.txt"))["rows"][0]
    assert radeon["temperature.gpu"] == 103 and radeon["utilization.gpu"] == 99
    assert radeon["clocks.current.sm"] == 1920 and radeon["clocks.current.memory"] == 1000
    assert radeon["ecc.errors.uncorrected.volatile.total"] == 0 and radeon["power.limit"] is None
    violation = parse(LOOP, read_corpus(TOOL, "monitor-violation-32-partitions.txt"))
    assert violation["complete"] is False and violation["rows"][0]["throttle_reasons_active"] == []
    assert violation["rows"][0]["throttle_reasons_source"] == "amd-smi --violation"
    hot = parse(LOOP, "GPU     PVIOL     TVIOL  PHOT_TVIOL  VR_TVIOL  HBM_TVIOL\n"
                      "  0      12 %       3 %         0 %       0 %        0 %\n")
    assert hot["rows"][0]["throttle_reasons_active"] == ["sw_power_cap", "sw_thermal_slowdown"]


def test_telemetry_loop_chunk_without_its_header_gives_no_rows():
    out = parse(LOOP, "'CTRL' + 'C' to stop watching output:\n1764460801    5  134 W    750 W   35 °C\n")
    assert out["rows"] == [] and out["complete"] is False and out["warnings"]


def test_telemetry_loop_hands_nvidia_csv_over_unchanged():
    text = read_corpus("nvidia-smi-query-loop", "h200-query-lms1000-idle-burn-idle-clock-event-reasons.csv")
    assert parse(LOOP, text) == parse("nvidia-smi-query-loop", text)
    with pytest.raises(ParseError):
        parse(LOOP, "")
