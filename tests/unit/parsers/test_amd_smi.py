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
