"""nccl-tests / rccl-tests parser: real outputs from the shared corpus and hand-written edge cases."""

from __future__ import annotations

import json

import pytest

from clustereval.parsers import ParseError, parse
from tests.conftest import corpus_files, read_corpus

NCCL_FILES = [p.name for p in corpus_files("nccl-tests")]
RCCL_FILES = [p.name for p in corpus_files("rccl-tests")]


def _nccl(name):
    return parse("nccl-tests", read_corpus("nccl-tests", name))


def _rccl(name):
    return parse("rccl-tests", read_corpus("rccl-tests", name))


FAILURES = {"all_reduce_perf-FAIL-cuda-system-not-yet-initialized-h100-no-fabricmanager.txt"}


@pytest.mark.parametrize("name", NCCL_FILES)
def test_every_nccl_corpus_file_parses_to_json(name):
    out = _nccl(name)
    json.dumps(out)
    assert out["tool"] == "nccl-tests"
    if name in FAILURES:
        assert out["complete"] is False and out["rows"] == []
    else:
        assert out["rows"], name
        assert all(r["size_bytes"] >= 0 and r["type"] for r in out["rows"])


@pytest.mark.parametrize("name", RCCL_FILES)
def test_every_rccl_corpus_file_parses_to_json(name):
    out = _rccl(name)
    json.dumps(out)
    assert out["tool"] == "rccl-tests"
    assert out["rows"]


def test_old_format_error_column_all_reduce():
    out = _nccl("all_reduce_perf-a100-sxm4-40gb-x8-old-format-error-col.txt")
    assert out["complete"] is True
    assert out["error_column"] == "error"
    assert out["avg_busbw_gbps"] == pytest.approx(68.4048)
    assert out["out_of_bounds"] == 0 and out["out_of_bounds_ok"] is True
    assert out["nranks"] == 8
    assert out["devices"][0]["name"] == "A100-SXM4-40GB" and out["devices"][0]["bus_id"] == "0x00"
    last = out["rows"][-1]
    assert last["size_bytes"] == 8589934592 and last["count"] == 2147483648
    assert last["type"] == "float" and last["redop"] == "sum" and last["root"] is None
    assert last["time_us"] == 63896 and last["algbw_gbps"] == pytest.approx(134.44)
    assert last["busbw_gbps"] == pytest.approx(235.26) and last["error"] is None and last["wrong"] is None
    assert last["in_place_busbw_gbps"] == pytest.approx(235.03)
    assert out["max_busbw_gbps"] == pytest.approx(235.26)
    # the NCCL INFO line before the first row is recognised, not reported as garbage
    assert out["warnings"] == []


def test_old_format_float_errors():
    out = _nccl("all_reduce_perf-old-format-4x-dgx-a100-slurm-1M-4G-avg-113.txt")
    first = out["rows"][0]
    assert first["size_bytes"] == 1048576 and first["error"] == pytest.approx(7e-07)
    assert out["avg_busbw_gbps"] == pytest.approx(113.289)
    assert out["max_busbw_gbps"] == pytest.approx(191.56)
    assert len(out["rows"]) == 13


def test_old_alltoall_blank_redop_cells():
    out = _nccl("alltoall_perf-a100-sxm4-40gb-x8-old-format.txt")
    assert all(r["redop"] is None for r in out["rows"])
    assert out["rows"][0]["time_us"] == pytest.approx(1.63)
    assert out["rows"][0]["in_place_time_us"] == pytest.approx(1.38)


def test_old_all_gather_without_redop_column():
    out = _nccl("all_gather_perf-a100-sxm4-40gb-x8-old-format.txt")
    assert "redop" not in out["columns"]
    assert out["avg_busbw_gbps"] == pytest.approx(58.2651)
    row = next(r for r in out["rows"] if r["size_bytes"] == 8589934592)
    assert row["busbw_gbps"] == pytest.approx(223.39) and row["in_place_busbw_gbps"] == pytest.approx(230.07)


def test_crlf_wide_type_padding_and_trailing_blank():
    out = _nccl("all_reduce_perf-old-format-2x-dgx-a100-k8s-8x-hdr-extra-type-padding-trailing-blank.txt")
    assert out["complete"] is True
    assert out["rows"][0]["size_bytes"] == 8 and out["rows"][0]["error"] == pytest.approx(2e-07)
    assert out["rows"][-1]["busbw_gbps"] == pytest.approx(188.53)
    assert out["avg_busbw_gbps"] == pytest.approx(53.7098)


def test_new_format_two_nodes_sixteen_ranks():
    out = _nccl("all_reduce_perf-2node-16x-h100-gcp-a3mega-tcpxo.txt")
    assert out["error_column"] == "#wrong"
    assert out["nranks"] == 16
    assert out["hosts"] == ["ztan-mig-235z", "ztan-mig-gq73"]
    rank8 = out["devices"][8]
    assert rank8 == {"rank": 8, "group": 0, "pid": 6733, "host": "ztan-mig-gq73", "device": 0,
                     "bus_id": "0000:04:00", "name": "NVIDIA H100 80GB HBM3"}
    assert out["params"]["min_bytes"] == 8 and out["params"]["max_bytes"] == 8589934592
    assert out["params"]["iters"] == 20 and out["params"]["warmup_iters"] == 5
    assert out["rows"][0]["root"] == -1 and out["rows"][0]["wrong"] == 0
    assert out["max_busbw_gbps"] == pytest.approx(338.82)
    assert out["avg_busbw_gbps"] == pytest.approx(70.742)
    assert out["wrong_total"] == 0 and out["rows_with_wrong"] == 0


def test_interleaved_nccl_debug_lines():
    out = _nccl("all_reduce_perf-2node-rtx-pro-6000-efa-nccl-debug-info.txt")
    assert out["collective"] == "all_reduce_perf" and out["concluded"] is True
    assert out["nccl_version"] == "2.29.2+cuda12.8"
    assert out["nranks"] == 2
    assert len(out["rows"]) == 28
    last = out["rows"][-1]
    assert last["size_bytes"] == 1073741824 and last["busbw_gbps"] == pytest.approx(12.37)
    assert out["avg_busbw_gbps"] == pytest.approx(4.26966)
    assert out["nccl_log_lines"] > 100
    assert out["warnings"] == []


def test_failure_before_table_is_partial_with_reason():
    out = _nccl("all_reduce_perf-FAIL-cuda-system-not-yet-initialized-h100-no-fabricmanager.txt")
    assert out["complete"] is False
    assert any("system not yet initialized" in f for f in out["failures"])
    assert out["params"]["ngpus"] == 8


def test_alltoall_in_place_wrong_is_na():
    out = _nccl("alltoall_perf-gb300-single-node-4gpu-nvl72.txt")
    assert out["nccl_version"] == "2.28.7+cuda13.0"
    assert out["collective"] == "alltoall_perf"
    row = out["rows"][-1]
    assert row["size_bytes"] == 17179869184 and row["redop"] == "none"
    assert row["wrong"] == 0 and row["in_place_wrong"] is None
    assert row["in_place_busbw_gbps"] == pytest.approx(680.70)
    assert out["avg_busbw_gbps"] == pytest.approx(381.478)


def test_elided_rank_list_counts_highest_rank():
    out = _nccl("all_reduce_perf-gb300-32nodes-128gpu-2racks-mnnvl-elided.txt")
    assert out["nranks"] == 128
    assert out["max_busbw_gbps"] == pytest.approx(739.99)


def test_mpirun_tag_output_prefix():
    out = _nccl("all_reduce_perf-mpirun-tag-output-1-0-stdout-prefix-eks-p5-elided.txt")
    assert out["complete"] is True
    assert out["avg_busbw_gbps"] == pytest.approx(52.9753)
    assert out["rows"][-1]["busbw_gbps"] == pytest.approx(437.79)


@pytest.mark.parametrize("name,rows,peak", [
    ("all_reduce_perf-srun-l-rank-prefix-0-2x-p4de-efa-8B-2G.txt", 29, 78.33),
    ("all_reduce_perf-srun-l-rank-prefix-0-2x-p5-efa-8B-16G.txt", 32, 487.26),
])
def test_srun_prefixed_table_without_footer_is_incomplete(name, rows, peak):
    out = _nccl(name)
    assert out["complete"] is False
    assert len(out["rows"]) == rows
    assert out["max_busbw_gbps"] == pytest.approx(peak)
    assert out["avg_busbw_gbps"] is None


def test_rccl_header_versions_and_truncated_run():
    out = _rccl("all_reduce_perf-2node-mi355x-pollara400-rccl2.26.6.txt")
    assert out["complete"] is False  # no Out-of-bounds / Avg footer in the capture
    assert out["rccl_version"] == "2.26.6-HEAD:6ade506"
    assert out["rocm_version"] == "7.0.1.0-42-9428210"
    assert out["tests_version"] == "develop:5272cd1"
    assert out["nranks"] == 16
    assert out["devices"][0]["name"] is None and out["devices"][0]["bus_id"] == "0000:75:00"
    assert out["rows"][-1]["busbw_gbps"] == pytest.approx(369.04)


def test_rccl_old_rank_format():
    out = _rccl("all_reduce_perf-mi300x-x8-slurm-old-rank-format-448c4c7.txt")
    assert out["complete"] is True
    assert out["nranks"] == 16
    assert out["devices"][15]["host"] == "gpu-56" and out["devices"][15]["bus_id"] == "0000:e5:00.0"
    assert out["rccl_version"] == "2.22.3-HEAD:7d8d67c"
    assert out["avg_busbw_gbps"] == pytest.approx(92.3318)
    assert out["max_busbw_gbps"] == pytest.approx(357.46)


def test_rccl_grep_excerpt_keeps_sections():
    out = _rccl("all_reduce_perf-mi325x-1-2-4-8-nodes-grep-excerpt.txt")
    assert out["complete"] is False
    assert [r["section"] for r in out["rows"]][::3] == ["1-node", "2-node", "4-node", "8-node"]
    eight = [r for r in out["rows"] if r["section"] == "8-node"]
    assert eight[-1]["busbw_gbps"] == pytest.approx(350.84)


def test_rccl_alltoall_with_rows_cut_out_is_partial():
    # SOURCES.md marks this excerpt truncated: its author cut the small sizes out.
    out = _rccl("alltoall_perf-mi355x-8gpu-truncated-no-concluded-line.txt")
    assert out["complete"] is False and out["concluded"] is False
    assert any("removed" in w for w in out["warnings"])
    assert out["avg_busbw_gbps"] == pytest.approx(133.643)


HEADER = """\
# nThread 1 nGpus 8 minBytes 8 maxBytes 1024 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 \
validation: 1 graph: 0
#
# Using devices
#  Rank  0 Group  0 Pid   1000 on      node1 device  0 [0000:18:00] NVIDIA H100 80GB HBM3
#  Rank  1 Group  0 Pid   1001 on      node1 device  1 [0000:2a:00] NVIDIA H100 80GB HBM3
#
#                                                              out-of-place                       in-place
""" + (
    "#       size         count      type   redop    root     time   algbw   busbw #wrong"
    "     time   algbw   busbw #wrong\n"
    "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)"
    "            (us)  (GB/s)  (GB/s)\n"
)
ROW_8 = ("           8             2     float     sum      -1    10.00    0.00    0.00      0"
         "    10.00    0.00    0.00      0\n")
ROW_16 = ("          16             4     float     sum      -1    11.00    0.00    0.00      3"
          "    11.00    0.00    0.00      0\n")
FOOTER = "# Out of bounds values : 3 FAILED\n# Avg bus bandwidth    : 0.001 \n#\n"


def test_run_dying_midway_keeps_rows():
    warn = "node1:1000:1000 [0] NCCL WARN NET/IB : Got completion with error 12\n"
    out = parse("nccl-tests", HEADER + ROW_8 + warn)
    assert out["complete"] is False
    assert len(out["rows"]) == 1
    assert out["nccl_warnings"] and "Got completion with error" in out["nccl_warnings"][0]


def test_nonzero_wrong_counts_and_failed_out_of_bounds():
    out = parse("nccl-tests", HEADER + ROW_8 + ROW_16 + FOOTER)
    assert out["complete"] is True
    assert out["rows"][1]["wrong"] == 3
    assert out["wrong_total"] == 3 and out["rows_with_wrong"] == 1
    assert out["out_of_bounds"] == 3 and out["out_of_bounds_ok"] is False


def test_half_printed_row_is_not_a_row():
    out = parse("nccl-tests", HEADER + ROW_8 + ROW_16[:40] + "\n")
    assert len(out["rows"]) == 1 and out["complete"] is False
    assert out["warnings"]


def test_two_processes_each_printing_a_table():
    out = parse("nccl-tests", HEADER + ROW_8 + FOOTER + HEADER + ROW_8 + FOOTER)
    assert [r["run"] for r in out["rows"]] == [0, 1]
    assert len(out["avg_busbw_gbps_all"]) == 2
    assert any("result tables" in w for w in out["warnings"])


@pytest.mark.parametrize("text", ["", "   \n", "hello world\n",
                                  "node:1:1 [0] NCCL INFO Bootstrap : Using eth0\n", HEADER])
def test_no_table_raises_parse_error(text):
    with pytest.raises(ParseError, match="nccl-tests"):
        parse("nccl-tests", text)


@pytest.mark.parametrize("cut", [0, 100, 500, 900, 1400, 2000, 3000])
def test_truncation_never_raises_anything_else(cut):
    text = read_corpus("nccl-tests", "all_reduce_perf-2node-16x-h100-gcp-a3mega-tcpxo.txt")[:cut]
    try:
        out = parse("nccl-tests", text)
    except ParseError:
        return
    assert out["complete"] is False
