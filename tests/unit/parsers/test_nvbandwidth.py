"""nvbandwidth parser against every corpus file plus cut-short output."""

from __future__ import annotations

import json

import pytest

from clustereval.parsers import ParseError, parse
from tests.conftest import corpus_files, read_corpus

TOOL = "nvbandwidth"
B300 = "b300-x7-v0.10.0-drv610.57.04-cuda13.3-ce-tests-with-cov.txt"


@pytest.mark.parametrize("path", corpus_files(TOOL), ids=lambda p: p.name)
def test_every_corpus_file_parses(path):
    out = parse(TOOL, path.read_bytes())
    assert out["tool"] == TOOL and out["tests"]
    json.dumps(out)


def test_b300_v010_sums_cov_and_na_diagonal():
    out = parse(TOOL, read_corpus(TOOL, B300))
    assert out["complete"] is True
    assert out["version"] == "v0.10.0" and out["driver_version"] == "610.57.04"
    assert out["cuda_runtime_version"] == "13.3 (13030)"
    h2d = out["tests"]["host_to_device_memcpy_ce"]
    assert h2d["sum_gbps"] == 389.15 and h2d["coefficient_of_variation"] == 0.0
    assert h2d["columns"] == list(range(7)) and h2d["values"][0][0] == 55.59
    read = out["tests"]["device_to_device_memcpy_read_ce"]
    assert read["values"][0][0] is None  # N/A diagonal
    assert read["values"][0][1] == 764.71
    assert {"row": 0, "column": 1, "value_gbps": 764.71} in read["pairs"]
    assert read["sum_gbps"] == 32140.19
    bidir = out["tests"]["device_to_device_bidirectional_memcpy_read_ce"]
    assert [m["submatrix"] for m in bidir["matrices"]] == ["Read1", "Read2", "Total"]
    assert bidir["sum_gbps"] == 63869.90  # the Total sub-matrix SUM
    assert bidir["sums"]["device_to_device_bidirectional_memcpy_read_ce_read1"] == 31945.78
    assert bidir["values"][0][1] == 1521.22  # pairs/values come from the Total matrix
    assert out["test_names"][-1] == "device_to_device_bidirectional_memcpy_write_ce"


def test_h800_v02_all_tests():
    out = parse(TOOL, read_corpus(TOOL, "h800-x8-v0.2-drv525-all-tests.txt"))
    assert out["version"] == "v0.2" and out["git_version"] == "42e94d2"
    assert len(out["devices"]) == 8 and out["devices"][0]["name"] == "NVIDIA H800"
    assert out["tests"]["host_to_device_memcpy_ce"]["sum_gbps"] == 442.52
    assert out["tests"]["one_to_all_read_sm"]["sum_gbps"] == 1222.39
    assert out["tests"]["one_to_all_write_sm"]["values"][0][4] == 165.73
    assert out["complete"] is True


def test_gh200_waived_and_latency_in_ns():
    text = read_corpus(TOOL, "gh200-v0.6-drv550-superbench-fixture.txt")
    out = parse(TOOL, text)
    assert out["waived"] == text.count("Waived:")
    assert out["devices"] == [{"index": 0, "name": "NVIDIA GH200 480GB", "bus_id": "00000009:01:00"}]
    latency = out["tests"]["host_device_latency_sm"]
    assert latency["kind"] == "latency" and latency["unit"] == "ns" and latency["sum_ns"] == 772.58
    assert "sum_gbps" not in latency
    assert out["tests"]["host_to_device_memcpy_ce"]["sum_gbps"] == 1985.60


def test_readme_excerpts_without_sum_are_incomplete_but_keep_the_matrix():
    out = parse(TOOL, read_corpus(TOOL, "official-readme-d2d-write-ce-8gpu-matrix.txt"))
    assert out["complete"] is False and any("SUM" in w for w in out["warnings"])
    matrix = out["tests"]["device_to_device_memcpy_write_ce"]
    assert matrix["values"][6][0] == 274.89 and matrix["values"][0][0] == 0.0
    out = parse(TOOL, read_corpus(TOOL, "official-readme-h2d-ce-pcie-gen4-8gpu.txt"))
    assert out["tests"]["host_to_device_memcpy_ce"]["values"][0][4] == 26.19


def test_cut_inside_a_matrix_row_is_incomplete():
    text = read_corpus(TOOL, B300)
    cut = text[: text.index("765.52") + 3]
    out = parse(TOOL, cut)
    assert out["complete"] is False
    assert out["tests"]["host_to_device_memcpy_ce"]["sum_gbps"] == 389.15


def test_banner_only_and_empty_raise():
    with pytest.raises(ParseError, match="only the version banner"):
        parse(TOOL, "nvbandwidth Version: v0.6\nBuilt from Git version: v0.6\n")
    with pytest.raises(ParseError):
        parse(TOOL, "")
