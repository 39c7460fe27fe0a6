"""Headline values read by eye from corpus files that no other parser test names, plus a guard that
every corpus file is named by at least one parser test (issue "P — Parsers")."""

from __future__ import annotations

from pathlib import Path

import pytest

from clustereval.parsers import parse
from tests.conftest import CORPUS, read_corpus


def _assert_rows_were_cut_out(out):
    """The author cut the smaller sizes out ('# <smaller message sizes truncated>'): a partial result."""
    assert out["complete"] is False
    assert any("removed" in warning for warning in out["warnings"])


def test_ibdev2netdev_mixed_eth_and_ipoib():
    out = parse("ibdev2netdev", read_corpus("ibdev2netdev", "mixed-eth-ib-8-devices-cx4lx-cx5-cx6-vfs.txt"))
    assert out["complete"] is True
    assert len(out["mappings"]) == 8
    ipoib = out["mappings"][5]
    assert ipoib["device"] == "mlx5_5" and ipoib["netdev"] == "ib0" and ipoib["up"] is True
    assert out["up"] == ["ens6", "ens14f0", "ib0"]
    assert out["mappings"][0]["netdev"] == "ens4f0" and out["mappings"][0]["link"] == "Down"


def test_ibstat_a100_cx6dx_ethernet_first_then_infiniband():
    out = parse("ibstat", read_corpus("ibstat", "a100-node-mt4126-cx6dx-fw22.35.2302-all-active.txt"))
    assert out["complete"] is True
    assert [h["name"] for h in out["hcas"]] == [f"mlx5_{i}" for i in range(9)]
    first, second = out["hcas"][0], out["hcas"][1]
    assert first["ca_type"] == "MT4126" and first["firmware_version"] == "22.35.2302"
    assert first["ports"][0]["link_layer"] == "Ethernet" and first["ports"][0]["rate_gbitps"] == 200
    assert second["firmware_version"] == "28.37.1014" and second["ports"][0]["link_layer"] == "InfiniBand"
    assert second["ports"][0]["base_lid"] == 1369 and second["ports"][0]["sm_lid"] == 83
    assert out["inactive_ports"] == []


def test_ibv_devinfo_cx6_tab_separated():
    out = parse("ibv_devinfo", read_corpus("ibv_devinfo", "cx6-mt28908-fw20.41.1000-ib-tabs.txt"))
    assert out["complete"] is True
    hca = out["hcas"][0]
    assert hca["name"] == "mlx5_0" and hca["fw_ver"] == "20.41.1000" and hca["vendor_part_id"] == 4123
    assert hca["board_id"] == "MT_0000000222"
    port = hca["ports"][0]
    assert port["state"] == "PORT_ACTIVE" and port["active_mtu"] == 4096 and port["port_lid"] == 35
    assert port["link_layer"] == "InfiniBand"


def test_nccl_old_format_sriov_roce_float_errors():
    name = "all_reduce_perf-old-format-k8s-sriov-roce-2e-07-errors-avg-7.77.txt"
    out = parse("nccl-tests", read_corpus("nccl-tests", name))
    assert out["complete"] is True
    assert out["avg_busbw_gbps"] == pytest.approx(7.76739)
    assert out["error_column"] == "error" and out["out_of_bounds_ok"] is True
    assert len(out["rows"]) == 29
    first, last = out["rows"][0], out["rows"][-1]
    assert first["size_bytes"] == 8 and first["time_us"] == pytest.approx(2193.5)
    assert first["error"] == pytest.approx(2e-07)
    assert last["size_bytes"] == 2147483648 and last["busbw_gbps"] == pytest.approx(22.92)
    assert last["in_place_busbw_gbps"] == pytest.approx(22.85)


def test_nccl_alltoall_b300_single_8gb_row():
    out = parse("nccl-tests", read_corpus("nccl-tests", "alltoall_perf-b300-8gpu-single-node-nccl2.28.9.txt"))
    assert out["nccl_version"] == "2.28.9+cuda13.1"
    assert out["collective"] == "alltoall_perf" and out["concluded"] is True
    assert out["params"]["ngpus"] == 8
    assert out["avg_busbw_gbps"] == pytest.approx(359.21)
    (row,) = out["rows"]
    assert row["size_bytes"] == 8589934592 and row["redop"] == "none"
    assert row["algbw_gbps"] == pytest.approx(772.06) and row["busbw_gbps"] == pytest.approx(675.55)
    _assert_rows_were_cut_out(out)


def test_nccl_reduce_scatter_a100_old_format():
    out = parse("nccl-tests", read_corpus("nccl-tests", "reduce_scatter_perf-a100-sxm4-40gb-x8-old-format.txt"))
    assert out["complete"] is True
    assert out["nranks"] == 8 and out["devices"][7]["name"] == "A100-SXM4-40GB"
    assert out["avg_busbw_gbps"] == pytest.approx(60.168)
    assert len(out["rows"]) == 34  # five 0-byte rows, then 32 B .. 8 GiB
    last = out["rows"][-1]
    assert last["size_bytes"] == 8589934592 and last["time_us"] == pytest.approx(32464)
    assert last["busbw_gbps"] == pytest.approx(231.52) and last["in_place_busbw_gbps"] == pytest.approx(231.25)


def test_nvidia_smi_q_x_a10g_v11():
    out = parse("nvidia-smi-q-x", read_corpus("nvidia-smi-q-x", "a10g-drv515-v11.xml"))
    assert out["complete"] is True
    assert out["driver_version"] == "515.105.01" and out["cuda_version"] == "11.7"
    (gpu,) = out["gpus"]
    assert gpu["name"] == "NVIDIA A10G" and gpu["bus_id"] == "00000000:00:1E.0"
    assert gpu["temperature_c"] == 17 and gpu["power_draw_w"] == pytest.approx(25.58)
    assert gpu["power_limit_w"] == pytest.approx(300.0) and gpu["memory_total_mib"] == 23028
    # the idle A10G had trained its link down to Gen1 x8
    assert gpu["pcie_link_gen_current"] == 1 and gpu["pcie_link_width_current"] == 8


def test_nvidia_smi_q_x_rtx_3080_v13():
    out = parse("nvidia-smi-q-x", read_corpus("nvidia-smi-q-x", "rtx-3080-drv595-v13.xml"))
    assert out["complete"] is True
    assert out["driver_version"] == "595.58.03" and out["cuda_version"] == "13.2"
    (gpu,) = out["gpus"]
    assert gpu["name"] == "NVIDIA GeForce RTX 3080" and gpu["temperature_c"] == 27
    # v13 has no <power_draw>: average and instant readings are separate elements
    assert gpu["power_draw_average_w"] == pytest.approx(139.62)
    assert gpu["power_draw_instant_w"] == pytest.approx(142.33)
    assert gpu["power_limit_w"] == pytest.approx(320.0) and gpu["power_limit_max_w"] == pytest.approx(336.0)
    assert gpu["memory_used_mib"] == 9184 and gpu["utilization_gpu_pct"] == 65


def test_perftest_ib_write_bw_loopback_8m():
    out = parse("perftest", read_corpus("perftest", "ib_write_bw-loopback-ib0-8M.txt"))
    assert out["complete"] is True
    assert out["test"] == "RDMA_Write BW Test" and out["device"] == "ib0" and out["mtu_bytes"] == 4096
    # server and client print the same row; it must be kept once
    (row,) = out["rows"]
    assert row["size_bytes"] == 8388608 and row["iterations"] == 20000
    assert row["bw_peak"] == pytest.approx(24056.74) and row["bw_avg"] == pytest.approx(24056.72)
    assert row["bw_unit"] == "MB/sec" and row["msg_rate_mpps"] == pytest.approx(0.003007)


def test_rccl_mi300x_k8s_pod():
    out = parse("rccl-tests", read_corpus("rccl-tests", "all_reduce_perf-mi300x-x8-k8s-rccltests-a7809b3.txt"))
    assert out["complete"] is True
    assert out["tests_version"] == "develop:a7809b3"
    assert out["nranks"] == 8 and out["devices"][7]["bus_id"] == "0000:e5:00"
    assert out["devices"][0]["name"] == "AMD Instinct MI300X"
    assert out["avg_busbw_gbps"] == pytest.approx(110.464)
    last = out["rows"][-1]
    assert last["size_bytes"] == 8589934592 and last["busbw_gbps"] == pytest.approx(315.69)
    assert out["max_busbw_gbps"] == pytest.approx(315.91)  # the in-place cell of the last row


def test_rccl_mi355x_pollara_truncated():
    out = parse("rccl-tests", read_corpus("rccl-tests", "all_reduce_perf-mi355x-8gpu-pollara-truncated.txt"))
    assert [r["size_bytes"] for r in out["rows"]] == [8589934592, 17179869184]
    assert out["rows"][0]["busbw_gbps"] == pytest.approx(407.79)
    assert out["rows"][1]["busbw_gbps"] == pytest.approx(408.80)
    assert out["avg_busbw_gbps"] == pytest.approx(169.455)
    assert out["collective"] == "all_reduce_perf" and out["concluded"] is True
    _assert_rows_were_cut_out(out)


def test_rocm_smi_json_mi50_vega20():
    out = parse("rocm-smi", read_corpus("rocm-smi", "mi50-32gb-vega20-drv5917.json"))
    assert out["complete"] is True
    assert out["driver_version"] == "5.9.17"
    (gpu,) = out["gpus"]
    assert gpu["name"] == "Radeon Instinct MI50 32GB" and gpu["device_id"] == "0x66a1"
    assert gpu["temp_edge_c"] == pytest.approx(36.0) and gpu["temp_junction_c"] == pytest.approx(38.0)
    assert gpu["power_w"] == pytest.approx(26.0) and gpu["power_cap_w"] == pytest.approx(225.0)
    assert gpu["vram_total_bytes"] == 34342961152


def test_rocm_smi_concise_single_mi300x():
    out = parse("rocm-smi", read_corpus("rocm-smi", "rocm-smi-concise-mi300x-x1.txt"))
    assert out["complete"] is True and out["gpu_count"] == 1
    (gpu,) = out["gpus"]
    assert gpu["name"] == "AMD Instinct MI300X" and gpu["device_id"] == "0x74a1"
    assert gpu["temp_junction_c"] == pytest.approx(41.0) and gpu["power_w"] == pytest.approx(121.0)
    assert gpu["power_cap_w"] == pytest.approx(750.0)
    assert gpu["memory_partition"] == "NPS1" and gpu["compute_partition"] == "SPX"


def test_every_corpus_file_is_named_in_a_parser_test():
    if not CORPUS.is_dir():
        pytest.skip(f"corpus {CORPUS} not available (set CLUSTEREVAL_CORPUS)")
    test_text = "".join(p.read_text(encoding="utf-8") for p in Path(__file__).parent.glob("test_*.py"))
    corpus_files = sorted(p for tool in CORPUS.iterdir() if tool.is_dir() for p in tool.rglob("*") if p.is_file())
    assert corpus_files, f"no tool output found under {CORPUS}"
    # a quoted name, so that one file name being the tail of another cannot satisfy the check
    unnamed = [str(p.relative_to(CORPUS)) for p in corpus_files
               if f'"{p.name}"' not in test_text and f"'{p.name}'" not in test_text]
    assert unnamed == [], f"corpus files no parser test names: {unnamed}"
