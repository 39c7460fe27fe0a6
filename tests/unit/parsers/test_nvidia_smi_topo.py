"""Tests for the nvidia-smi topo -m parser against the shared corpus."""

from __future__ import annotations

import json

import pytest

from clustereval.parsers import ParseError, parse
from tests.conftest import corpus_files, read_corpus

TOOL = "nvidia-smi-topo"

# Older drivers (R418-R470) name NIC columns after the device and print only "CPU Affinity".
OLD_DRIVER_NIC_COLUMNS = (
    "\tGPU0\tGPU1\tmlx5_0\tCPU Affinity\n"
    "GPU0\t X \tNV2\tPHB\t0-19\n"
    "GPU1\tNV2\t X \tPHB\t0-19\n"
    "mlx5_0\tPHB\tPHB\t X \t\n"
    "\n"
    "Legend:\n"
    "\n"
    "  X    = Self\n"
    "  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)\n"
    "  NV#  = Connection traversing a bonded set of # NVLinks\n")


@pytest.mark.parametrize("path", corpus_files(TOOL), ids=lambda p: p.name)
def test_every_corpus_file_parses_to_json(path):
    out = parse(TOOL, path.read_bytes())
    json.dumps(out)
    assert out["tool"] == TOOL and out["matrix"]


def test_hgx_8gpu_10nic_tab_separated():
    out = parse(TOOL, read_corpus(TOOL, "topo-m-8gpu-nv18-10nic-mlx5-tabs.txt"))
    assert out["complete"] is True and out["warnings"] == []
    assert out["gpus"] == [f"GPU{i}" for i in range(8)]
    assert out["nics"] == [f"NIC{i}" for i in range(10)]
    assert out["matrix"]["GPU0"]["GPU0"] == "X"
    assert out["matrix"]["GPU0"]["GPU5"] == "NV18"
    assert out["matrix"]["GPU0"]["NIC3"] == "PIX"
    assert out["matrix"]["NIC9"]["GPU5"] == "PIX"
    assert out["matrix"]["GPU4"]["NIC0"] == "SYS"
    assert out["nvlink_bonds"]["GPU3"]["GPU7"] == 18
    assert out["affinity"]["GPU0"] == {
        "cpu_affinity": "0-63,128-191", "numa_affinity": "0", "gpu_numa_id": None}
    assert out["affinity"]["GPU7"]["cpu_affinity"] == "64-127,192-255"
    assert out["affinity"]["GPU7"]["numa_affinity"] == "1"
    assert out["nic_names"]["NIC9"] == "mlx5_9"
    assert out["legend"]["PIX"] == "Connection traversing at most a single PCIe bridge"


def test_single_gpu_vm_with_ansi_underlined_header():
    out = parse(TOOL, read_corpus(TOOL, "h200-single-gpu-vm-ansi-underline-header.txt"))
    assert out["complete"] is True
    assert out["matrix"] == {"GPU0": {"GPU0": "X"}}
    assert out["affinity"]["GPU0"]["cpu_affinity"] == "0-15"


def test_truncated_dgx_matrix_is_partial():
    out = parse(TOOL, read_corpus(TOOL, "topo-m-dgx-h100-12nic-TRUNCATED-at-NIC5.txt"))
    assert out["complete"] is False
    assert len(out["devices"]) == 20
    assert "NIC5" in out["matrix"] and "NIC6" not in out["matrix"]
    assert out["matrix"]["NIC3"]["GPU1"] == "PXB"
    assert out["affinity"]["GPU4"]["cpu_affinity"] == "56-111,168-223"
    assert any("NIC6" in w and "NIC11" in w for w in out["warnings"])


def test_rtx3090_nv4_bridge():
    out = parse(TOOL, read_corpus(TOOL, "topo-m-rtx3090-x2-nv4-bridge-legend-cut.txt"))
    assert out["matrix"]["GPU1"]["GPU0"] == "NV4"
    assert out["nvlink_bonds"] == {"GPU0": {"GPU1": 4}, "GPU1": {"GPU0": 4}}
    assert out["affinity"]["GPU1"]["cpu_affinity"] == "0-23"


def test_spaces_instead_of_tabs():
    out = parse(TOOL, read_corpus(TOOL, "topo-mp-rtx-pro-6000-x2-pix-spaces.txt"))
    assert out["complete"] is True
    assert out["matrix"]["GPU0"]["GPU1"] == "PIX"
    assert out["affinity"]["GPU1"] == {"cpu_affinity": "0-47", "numa_affinity": "0", "gpu_numa_id": None}


def test_garbled_copy_is_partial_with_reasons():
    out = parse(TOOL, read_corpus(TOOL, "topo-matrix-h800-x8-nv8-garbled-copy.txt"))
    assert out["complete"] is False
    assert out["matrix"]["GPU2"]["GPU6"] == "NV8"
    assert out["matrix"]["NIC0"]["GPU1"] == "PIX"
    assert out["nic_names"]["NIC3"] == "mlx5_3"
    assert any("'-31,64-95'" in w for w in out["warnings"])


def test_old_driver_layout_with_device_named_nic_columns():
    out = parse(TOOL, OLD_DRIVER_NIC_COLUMNS)
    assert out["complete"] is True and out["warnings"] == []
    assert out["nics"] == ["mlx5_0"]
    assert out["affinity_columns"] == ["CPU Affinity"]
    assert out["matrix"]["mlx5_0"] == {"GPU0": "PHB", "GPU1": "PHB", "mlx5_0": "X"}
    assert out["affinity"]["GPU1"] == {"cpu_affinity": "0-19"}
    assert "mlx5_0" not in out["affinity"]
    assert out["legend"]["NV#"].startswith("Connection traversing a bonded set")


def test_nic_rows_carry_no_affinity():
    out = parse(TOOL, read_corpus(TOOL, "topo-m-8gpu-nv18-10nic-mlx5-tabs.txt"))
    assert "NIC0" not in out["affinity"] and len(out["matrix"]) == 18


@pytest.mark.parametrize("text", ["", "GPU0\t X \tNV4\t0-23\t0\n", "Legend:\n\n  X    = Self\n"])
def test_no_header_raises(text):
    with pytest.raises(ParseError):
        parse(TOOL, text)
