"""Plain nvidia-smi parser: default table (79-/89-column layouts), -L lists, CSV via the query parser."""

from __future__ import annotations

import json

import pytest

from clustereval.parsers import ParseError, parse
from tests.conftest import corpus_files, read_corpus

TOOL = "nvidia-smi"
FILES = corpus_files(TOOL)

# (file, format, complete, number of GPUs/rows) — GPU counts read from the files by eye.
EXPECTED = {
    "a100-sxm-80gb-x8-drv470.141.03-cuda11.4-md-trailing-spaces.txt": ("table", True, 8),
    "a100-sxm4-40gb-x1-drv550.144.03-computecanada.txt": ("table", True, 1),
    "a40-x10-drv550.txt": ("table", True, 10),
    "gb300-x4-drv580.105.08-oci.txt": ("table", True, 4),
    "geforce-450w-drv525-err-fan-e-process.txt": ("table", False, 1),  # stops before the Processes box
    "gh200-120gb-x4-drv590.48.01-alps.txt": ("table", True, 4),
    "h100-hbm3-x8-drv550.txt": ("table", True, 8),
    "h100-nvl-x2.txt": ("table", True, 2),
    "h100-sxm-x8-drv565-no-timestamp.txt": ("table", True, 8),
    "h200-query-gpu-csv-drv580.159.04-EDITED-ids.csv": ("csv", True, 1),
    "h200-single-vm-drv580.159.04-idle.txt": ("table", True, 1),
    "nvidia-smi-L-h100-mig-7x1g.10gb.txt": ("list", True, 1),
    "nvidia-smi-L-h100-mig-mixed.txt": ("list", True, 1),
    "query-gpu-csv-b300-x7-under-watch-header.txt": ("csv", True, 7),
    "tesla-t4-drv535.86.10-container-toolkit.txt": ("table", True, 1),
}


def _parse(name: str) -> dict:
    return parse(TOOL, read_corpus(TOOL, name))


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_every_corpus_file(path):
    fmt, complete, count = EXPECTED[path.name]
    out = parse(TOOL, path.read_bytes())
    assert out["tool"] == TOOL
    assert out["format"] == fmt
    assert out["complete"] is complete
    assert len(out["gpus"] if fmt != "csv" else out["rows"]) == count
    json.dumps(out)


def test_89_column_h100_with_timestamp():
    out = _parse("h100-hbm3-x8-drv550.txt")
    assert out["layout"] == "89-col"
    assert out["timestamp"] == "Mon Jan 20 10:18:26 2025"
    assert out["driver_version"] == "550.90.07" and out["cuda_version"] == "12.4"
    gpu = out["gpus"][4]
    assert gpu["index"] == 4
    assert gpu["name"] == "NVIDIA H100 80GB HBM3"
    assert gpu["bus_id"] == "00000000:9B:00.0"
    assert gpu["persistence_mode"] is True
    assert gpu["temperature_c"] == 27
    assert gpu["performance_state"] == "P0"
    assert gpu["power_draw_w"] == 73 and gpu["power_limit_w"] == 700
    assert gpu["memory_used_mib"] == 1 and gpu["memory_total_mib"] == 81559
    assert gpu["utilization_gpu_pct"] == 0
    assert gpu["ecc_uncorrected_volatile"] == 0
    assert gpu["compute_mode"] == "Default"
    assert gpu["mig_mode"] == "Disabled"
    assert out["processes"] == []


def test_old_79_column_layout_with_truncated_names_and_markdown_trailing_spaces():
    out = _parse("a100-sxm-80gb-x8-drv470.141.03-cuda11.4-md-trailing-spaces.txt")
    assert out["layout"] == "79-col"
    assert out["timestamp"] is None
    assert out["driver_version"] == "470.141.03" and out["cuda_version"] == "11.4"
    assert [g["name"] for g in out["gpus"]] == ["NVIDIA A100-SXM..."] * 8
    assert out["gpus"][7]["bus_id"] == "00000000:CF:00.0"
    assert out["gpus"][7]["power_draw_w"] == 62 and out["gpus"][7]["power_limit_w"] == 400
    assert out["gpus"][2]["temperature_c"] == 33


def test_err_fan_and_exclusive_process_mode():
    out = _parse("geforce-450w-drv525-err-fan-e-process.txt")
    gpu = out["gpus"][0]
    assert gpu["fan_raw"] == "ERR!" and gpu["fan_pct"] is None
    assert gpu["err_fields"] == ["fan"]
    assert gpu["compute_mode"] == "E. Process"
    assert gpu["name"] == "NVIDIA GeForce ..."
    assert gpu["performance_state"] == "P5"
    assert gpu["memory_used_mib"] == 2021 and gpu["memory_total_mib"] == 23028
    assert gpu["mig_mode"] is None
    assert out["processes"] is None
    assert any("Processes" in w for w in out["warnings"])


def test_grace_hopper_and_grace_blackwell_pci_domains():
    gh = _parse("gh200-120gb-x4-drv590.48.01-alps.txt")
    assert [g["bus_id"] for g in gh["gpus"]] == ["00000009:01:00.0", "00000019:01:00.0",
                                                  "00000029:01:00.0", "00000039:01:00.0"]
    assert gh["cuda_version"] == "13.1"
    gb = _parse("gb300-x4-drv580.105.08-oci.txt")
    assert gb["gpus"][0]["power_limit_w"] == 1400
    assert gb["gpus"][2]["memory_total_mib"] == 284208


def test_a40_fan_percent():
    gpu = _parse("a40-x10-drv550.txt")["gpus"][9]
    assert gpu["bus_id"] == "00000000:D6:00.0"
    assert gpu["fan_pct"] == 0
    assert gpu["power_draw_w"] == 16
    assert gpu["mig_mode"] is None  # N/A on A40


def test_list_with_mig_devices():
    out = _parse("nvidia-smi-L-h100-mig-mixed.txt")
    gpu = out["gpus"][0]
    assert gpu["uuid"] == "GPU-b4895dbf-9350-2524-a89b-98161ddd9fe4"
    assert [m["profile"] for m in gpu["mig_devices"]] == ["3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"]
    assert gpu["mig_devices"][1]["uuid"] == "MIG-56c30729-347f-5dd6-8da0-c3cc59e969e0"


def test_csv_is_handed_to_the_query_parser():
    out = _parse("h200-query-gpu-csv-drv580.159.04-EDITED-ids.csv")
    assert out["rows"][0]["memory.total"] == 143771


# Hand-written in the R535 79-column layout: a MIG devices box and a Processes table with rows.
WITH_PROCESSES = """\
+---------------------------------------------------------------------------------------+
| NVIDIA-SMI 535.129.03             Driver Version: 535.129.03   CUDA Version: 12.2     |
|-----------------------------------------+----------------------+----------------------+
| GPU  Name                 Persistence-M | Bus-Id        Disp.A | Volatile Uncorr. ECC |
| Fan  Temp   Perf          Pwr:Usage/Cap |         Memory-Usage | GPU-Util  Compute M. |
|                                         |                      |               MIG M. |
|=========================================+======================+======================|
|   0  NVIDIA A100-SXM4-40GB          On  | 00000000:07:00.0 Off |                    0 |
| N/A   31C    P0              45W / 400W |     87MiB / 40960MiB |     N/A      Default |
|                                         |                      |              Enabled |
+-----------------------------------------+----------------------+----------------------+
|   1  NVIDIA A100-SXM4-40GB          On  | 00000000:0F:00.0 Off |                    2 |
| N/A   30C    P0              58W / 400W |  30215MiB / 40960MiB |     98%      Default |
|                                         |                      |             Disabled |
+-----------------------------------------+----------------------+----------------------+

+---------------------------------------------------------------------------------------+
| MIG devices:                                                                          |
+------------------+--------------------------------+-----------+-----------------------+
| GPU  GI  CI  MIG |                   Memory-Usage |        Vol|      Shared           |
|      ID  ID  Dev |                     BAR1-Usage | SM     Unc| CE ENC DEC OFA JPG    |
|                  |                                |        ECC|                       |
|==================+================================+===========+=======================|
|  0    1   0   0  |              87MiB / 19968MiB  | 42      0 |  3   0    2    0    0 |
|                  |               0MiB / 32767MiB  |           |                       |
+------------------+--------------------------------+-----------+-----------------------+

+---------------------------------------------------------------------------------------+
| Processes:                                                                            |
|  GPU   GI   CI        PID   Type   Process name                            GPU Memory |
|        ID   ID                                                             Usage      |
|=======================================================================================|
|    0    1    0      41234      C   python3                                      74MiB |
|    1   N/A  N/A     51234      C   /opt/conda/bin/python                     30202MiB |
+---------------------------------------------------------------------------------------+
"""


def test_hand_written_mig_devices_processes_and_ecc_count():
    out = parse(TOOL, WITH_PROCESSES)
    assert out["complete"] is True
    first, second = out["gpus"]
    assert first["mig_mode"] == "Enabled" and first["utilization_gpu_pct"] is None
    assert second["ecc_uncorrected_volatile"] == 2
    assert second["utilization_gpu_pct"] == 98
    assert out["mig_devices"] == [{"gpu": 0, "gi": 1, "ci": 0, "mig_dev": 0,
                                   "memory_used_mib": 87, "memory_total_mib": 19968}]
    assert out["processes"] == [
        {"gpu": 0, "gi": 1, "ci": 0, "pid": 41234, "type": "C", "name": "python3", "used_memory_mib": 74},
        {"gpu": 1, "gi": None, "ci": None, "pid": 51234, "type": "C", "name": "/opt/conda/bin/python",
         "used_memory_mib": 30202}]


def test_cut_inside_the_gpu_table_keeps_rows_read():
    text = read_corpus(TOOL, "h100-hbm3-x8-drv550.txt")
    cut = text[: text.index("00000000:5D:00.0")]
    out = parse(TOOL, cut)
    assert out["complete"] is False
    assert [g["index"] for g in out["gpus"]] == [0, 1, 2]


@pytest.mark.parametrize("text, reason", [
    ("", "empty"),
    ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the "
     "latest NVIDIA driver is installed and running.\n", "couldn't communicate"),
    ("No devices were found\n", "No devices were found"),
    ("hello world\n", "not a recognised"),
])
def test_failures_give_clear_parse_errors(text, reason):
    with pytest.raises(ParseError, match=reason):
        parse(TOOL, text)
