"""Tests for the nvidia-smi nvlink parser against the shared corpus and hand-written fixtures."""

from __future__ import annotations

import json

import pytest

from clustereval.parsers import ParseError, parse
from tests.conftest import corpus_files, read_corpus

TOOL = "nvidia-smi-nvlink"

# `nvidia-smi nvlink -s` on a GPU with some links down: the driver prints "<inactive>" for them.
PARTLY_INACTIVE = (
    "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-00000000-0000-0000-0000-000000000000)\n"
    "\t Link 0: 26.562 GB/s\n"
    "\t Link 1: <inactive>\n"
    "\t Link 2: 26.562 GB/s\n")

# `nvidia-smi nvlink -c`: capabilities per link.
CAPABILITIES = (
    "GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-00000000-0000-0000-0000-000000000001)\n"
    "\t Link 0, P2P is supported: true\n"
    "\t Link 0, Access to system memory supported: true\n"
    "\t Link 0, SLI is supported: false\n")

# `nvidia-smi nvlink -e`: error counters per link.
ERRORS = (
    "GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-00000000-0000-0000-0000-000000000001)\n"
    "\t Link 0: Replay Errors: 0\n"
    "\t Link 0: Recovery Errors: 2\n"
    "\t Link 0: CRC Errors: 0\n")


@pytest.mark.parametrize("path", corpus_files(TOOL), ids=lambda p: p.name)
def test_every_corpus_file_parses_to_json(path):
    out = parse(TOOL, path.read_bytes())
    json.dumps(out)
    assert out["tool"] == TOOL


def test_a100_eight_gpus_twelve_links_25_gbps():
    out = parse(TOOL, read_corpus(TOOL, "a100-sxm4-80gb-x8-nvlink-s.txt"))
    assert out["complete"] is True and out["warnings"] == []
    assert [g["index"] for g in out["gpus"]] == list(range(8))
    gpu0 = out["gpus"][0]
    assert gpu0["name"] == "NVIDIA A100-SXM4-80GB"
    assert gpu0["uuid"] == "GPU-5269b708-678a-b1a8-60f0-c90406537486"
    assert len(gpu0["links"]) == 12 and gpu0["active_links"] == list(range(12))
    assert gpu0["links"][11]["speed_gbps"] == 25.0 and gpu0["links"][11]["speed_raw"] == "25 GB/s"
    assert out["link_speed_gbps"] == 25.0 and out["inactive_link_count"] == 0


def test_single_gpu_tab_space_indent():
    out = parse(TOOL, read_corpus(TOOL, "a100-sxm4-80gb-gpu7-12-links-25GBs-tab-space-indent.txt"))
    (gpu,) = out["gpus"]
    assert gpu["index"] == 7 and len(gpu["links"]) == 12 and gpu["total_speed_gbps"] == 300.0


def test_rtx3090_bridge_fractional_speed_and_redacted_uuid():
    out = parse(TOOL, read_corpus(TOOL, "rtx3090-x2-nvlink-bridge-s-uuid-redacted.txt"))
    assert [len(g["links"]) for g in out["gpus"]] == [4, 4]
    assert out["link_speed_gbps"] == 14.062
    assert out["gpus"][1]["name"] == "NVIDIA GeForce RTX 3090"


def test_elided_gpus_are_reported():
    out = parse(TOOL, read_corpus(TOOL, "h800-x8-nvlink-status-elided.txt"))
    assert [g["index"] for g in out["gpus"]] == [0, 1, 7]
    assert out["link_speed_gbps"] == 26.562
    assert any("'...'" in w for w in out["warnings"])
    assert any("not consecutive" in w for w in out["warnings"])


def test_empty_output_means_no_nvlink():
    out = parse(TOOL, read_corpus(TOOL, "a10-no-nvlink-empty.txt"))
    assert out["format"] == "empty" and out["gpus"] == [] and out["complete"] is True


def test_failure_all_links_inactive_is_partial():
    out = parse(TOOL, read_corpus(TOOL, "a100-gpu6-FAIL-all-links-inactive-NVML-message.txt"))
    assert out["complete"] is False
    (gpu,) = out["gpus"]
    assert gpu["index"] == 6 and gpu["all_links_inactive"] is True and gpu["links"] == []
    assert "all links are inactive" in gpu["nvml_error"]
    assert out["gpus_all_links_inactive"] == [6]


def test_inactive_links_are_listed():
    out = parse(TOOL, PARTLY_INACTIVE)
    gpu = out["gpus"][0]
    assert gpu["active_links"] == [0, 2] and gpu["inactive_links"] == [1]
    assert gpu["links"][1]["speed_gbps"] is None and gpu["total_speed_gbps"] == pytest.approx(53.124)
    assert out["inactive_link_count"] == 1


def test_capabilities_and_error_counters():
    caps = parse(TOOL, CAPABILITIES)
    assert caps["format"] == "capabilities"
    assert caps["gpus"][0]["capabilities"]["0"] == {
        "p2p_is_supported": True, "access_to_system_memory_supported": True, "sli_is_supported": False}
    errors = parse(TOOL, ERRORS)
    assert errors["format"] == "counters"
    assert errors["gpus"][0]["counters"]["0"] == {"replay_errors": 0, "recovery_errors": 2, "crc_errors": 0}


def test_repeated_gpu_is_reported():
    out = parse(TOOL, PARTLY_INACTIVE + PARTLY_INACTIVE)
    assert len(out["gpus"]) == 2
    assert any("more than once" in w for w in out["warnings"])


def test_text_without_gpu_header_raises():
    with pytest.raises(ParseError):
        parse(TOOL, "Link 0: 25 GB/s\n")
