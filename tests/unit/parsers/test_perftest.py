"""perftest parser against real ib_*_bw / ib_*_lat outputs from the shared corpus and hand-written cases."""

from __future__ import annotations

import json

import pytest

from clustereval.parsers import ParseError, parse
from tests.conftest import corpus_files, read_corpus

FILES = [p.name for p in corpus_files("perftest")]


def _run(name):
    return parse("perftest", read_corpus("perftest", name))


@pytest.mark.parametrize("name", FILES)
def test_every_corpus_file_gives_rows(name):
    out = _run(name)
    json.dumps(out)
    assert out["rows"] and out["complete"] is True
    assert out["kind"] in ("bw", "lat")


def test_read_bw_mb_per_sec_is_converted_to_gbit():
    out = _run("ib_read_bw-ib-mlx5_0-65536-MBsec-tabs.txt")
    assert out["test_kind"] == "read_bw" and out["test"] == "RDMA_Read BW Test"
    assert out["device"] == "mlx5_0" and out["link_type"] == "IB" and out["mtu_bytes"] == 4096
    assert out["settings"]["outstanding_reads"] == 16
    row = out["rows"][0]
    assert row["size_bytes"] == 65536 and row["iterations"] == 1000
    assert row["bw_avg"] == pytest.approx(11708.31) and row["bw_unit"] == "MB/sec"
    # perftest's MB/sec is 2^20 bytes per second
    assert row["bw_avg_gbitps"] == pytest.approx(11708.31 * 1048576 * 8 / 1e9)
    assert row["msg_rate_mpps"] == pytest.approx(0.187333)
    assert out["local_addresses"][0]["lid"] == "0x15" and out["remote_addresses"][0]["lid"] == "0x0a"


def test_roce_all_sizes_report_gbits_with_gid():
    out = _run("ib_write_bw-roce-gid5-all-sizes-report-gbits-k8s-pods.txt")
    assert out["test_kind"] == "write_bw"
    assert out["link_type"] == "Ethernet" and out["gid_index"] == 5 and out["mtu_bytes"] == 1024
    assert len(out["rows"]) == 23
    assert out["rows"][0]["size_bytes"] == 2
    last = out["rows"][-1]
    assert last["size_bytes"] == 8388608 and last["bw_avg_gbitps"] == pytest.approx(92.39)
    assert out["max_bw_avg_gbitps"] == pytest.approx(92.46)
    assert out["local_addresses"][0]["gid"] == "00:00:00:00:00:00:00:00:00:00:255:255:192:168:02:226"


def test_cpu_frequency_warning_inside_table_is_recognised():
    out = _run("ib_write_bw-roce-rdma_cm-gid3-65536-conflicting-cpu-freq-warning-in-table.txt")
    assert out["cpu_frequency_warnings"] == 1
    assert out["rdma_cm"] == "ON" and out["gid_index"] == 3
    assert out["rows"][0]["bw_peak_gbitps"] == pytest.approx(92.42)
    assert out["rows"][0]["bw_avg_gbitps"] == pytest.approx(92.40)


def test_four_qps_rdma_cm():
    out = _run("ib_write_bw-roce-rdmacm-4qp-dgx-spark-report-gbits.txt")
    assert out["qps"] == 4 and out["device"] == "rocep1s0f1"
    assert len(out["local_addresses"]) == 4 and len(out["remote_addresses"]) == 4
    assert out["rows"][0]["bw_avg_gbitps"] == pytest.approx(111.71)


def test_server_and_client_interleaved_drop_duplicate_row():
    out = _run("ib_write_bw-loopback-all-sizes-server-client.txt")
    assert len(out["rows"]) == 23
    assert [r["size_bytes"] for r in out["rows"]][:3] == [2, 4, 8]
    assert out["rows"][-1]["bw_peak"] == pytest.approx(23240.68)
    assert any("duplicate" in w for w in out["warnings"])


def test_write_latency_percentiles():
    out = _run("ib_write_lat-roce-rdmacm-dgx-spark.txt")
    assert out["test_kind"] == "write_lat" and out["kind"] == "lat"
    row = out["rows"][0]
    assert row["t_min_us"] == pytest.approx(1.42) and row["t_max_us"] == pytest.approx(1.93)
    assert row["t_typical_us"] == pytest.approx(1.47) and row["t_avg_us"] == pytest.approx(1.47)
    assert row["t_p99_us"] == pytest.approx(1.57) and row["t_p999_us"] == pytest.approx(1.93)
    assert out["settings"]["max_inline_bytes"] == 220


def test_read_latency_with_tabs_in_row():
    out = _run("ib_read_lat-infiniband-mlx5_8-sriov-pod-tabs.txt")
    row = out["rows"][0]
    assert row["t_typical_us"] == pytest.approx(1.90) and row["t_stdev_us"] == pytest.approx(0.47)
    assert row["t_p999_us"] == pytest.approx(12.20)
    assert out["settings"]["ibv_wr_api"] == "ON"
    assert out["cpu_frequency_warnings"] == 2


def test_libibverbs_warnings_are_reported():
    out = _run("ib_read_lat-roce-sriov-vf-cx5-libibverbs-warnings.txt")
    assert sum("libibverbs" in w for w in out["warnings"]) == 5
    assert out["gid_index"] == 2 and out["device"] == "mlx5_5"
    assert out["rows"][0]["t_typical_us"] == pytest.approx(6.74)


BANNER = """\
---------------------------------------------------------------------------------------
                    Send BW Test
 Dual-port       : OFF          Device         : mlx5_0
 Number of qps   : 1            Transport type : IB
 Link type       : IB
---------------------------------------------------------------------------------------
 #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]
 65536      1000             390.10             389.90             0.743663
"""


def test_run_cut_before_closing_rule_is_incomplete():
    out = parse("perftest", BANNER)
    assert out["complete"] is False and out["test_kind"] == "send_bw"
    assert out["rows"][0]["bw_avg_gbitps"] == pytest.approx(389.90)


def test_failure_after_banner_is_incomplete():
    out = parse("perftest", BANNER.split(" #bytes")[0] + " Couldn't connect to 10.0.0.2:18515\n")
    assert out["complete"] is False and out["rows"] == []
    assert out["failures"] == ["Couldn't connect to 10.0.0.2:18515"]


@pytest.mark.parametrize("text", ["", "\n\n", "random words\n",
                                  "libibverbs: Warning: couldn't stat '/sys/class/infiniband/mlx5_4'.\n"])
def test_nothing_usable_raises(text):
    with pytest.raises(ParseError, match="perftest"):
        parse("perftest", text)
