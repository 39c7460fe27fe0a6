"""Tests for the /proc/driver/nvidia parser against the shared corpus and hand-written fixtures."""

from __future__ import annotations

import json

import pytest

from clustereval.parsers import ParseError, parse
from tests.conftest import corpus_files, read_corpus

TOOL = "proc-driver-nvidia"

# Layout of /proc/driver/nvidia/version for the proprietary module (R535), as the driver writes it.
PROPRIETARY_VERSION = (
    "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.86.10  Wed Jul 26 23:20:03 UTC 2023\n"
    "GCC version:  gcc version 11.3.0 (Ubuntu 11.3.0-1ubuntu1~22.04.1) \n")

# /proc/driver/nvidia/gpus/<bus id>/information (tab-padded "Name: value").
GPU_INFORMATION = (
    "Model: \t\t NVIDIA H100 80GB HBM3\n"
    "IRQ:   \t\t 0\n"
    "GPU UUID: \t GPU-11111111-2222-3333-4444-555555555555\n"
    "Video BIOS: \t 96.00.74.00.01\n"
    "Bus Type: \t PCIe\n"
    "DMA Size: \t 52 bits\n"
    "DMA Mask: \t 0xfffffffffffff\n"
    "Bus Location: \t 0000:18:00.0\n"
    "Device Minor: \t 0\n"
    "GPU Excluded:\t No\n")


@pytest.mark.parametrize("path", corpus_files(TOOL), ids=lambda p: p.name)
def test_every_corpus_file_parses_to_json(path):
    out = parse(TOOL, path.read_bytes())
    json.dumps(out)
    assert out["tool"] == TOOL and out["complete"] is True and out["warnings"] == []


def test_open_kernel_module_version_file():
    out = parse(TOOL, read_corpus(TOOL, "version-drv580.159.04-open-kernel.txt"))
    assert out["format"] == "version"
    assert out["driver_version"] == "580.159.04"
    assert out["kernel_module"] == "open"
    assert out["arch"] == "x86_64"
    assert out["gcc_version"] == "15.3.0 (GCC)"


def test_params_file_values_and_audit_flags():
    out = parse(TOOL, read_corpus(TOOL, "params-drv580.159.04-h200-vm.txt"))
    assert out["format"] == "params"
    assert out["rm_profiling_admin_only"] is False  # "RmProfilingAdminOnly: 0"
    assert out["nvlink_disabled"] is True  # "NvLinkDisable: 1"
    assert out["params"]["CoherentGPUMemoryMode"] == ""
    assert out["params"]["ImexChannelCount"] == 2048
    assert out["params"]["ResmanDebugLevel"] == 4294967295


def test_proprietary_module_version_line():
    out = parse(TOOL, PROPRIETARY_VERSION)
    assert out["driver_version"] == "535.86.10"
    assert out["kernel_module"] == "proprietary"
    assert out["arch"] == "x86_64"
    assert out["gcc_version"].startswith("11.3.0")


def test_gpu_information_file():
    out = parse(TOOL, GPU_INFORMATION)
    assert out["format"] == "information"
    assert out["model"] == "NVIDIA H100 80GB HBM3"
    assert out["bus_location"] == "0000:18:00.0"
    assert out["uuid"] == "GPU-11111111-2222-3333-4444-555555555555"
    assert out["device_minor"] == 0


def test_version_file_cut_before_gcc_line_is_incomplete():
    out = parse(TOOL, PROPRIETARY_VERSION.split("\n")[0])
    assert out["driver_version"] == "535.86.10" and out["complete"] is False


def test_params_cut_before_string_values_is_incomplete():
    text = read_corpus(TOOL, "params-drv580.159.04-h200-vm.txt")
    out = parse(TOOL, text[: text.index("NvLinkDisable")])
    assert out["complete"] is False
    assert out["params"]["EnableMSI"] == 1


@pytest.mark.parametrize("text", ["", "   \n", "\x00\x01garbage without structure"])
def test_empty_or_garbage_raises_parse_error(text):
    with pytest.raises(ParseError):
        parse(TOOL, text)
