"""HPL parser against every corpus file plus cut-short and failed-residual output."""

from __future__ import annotations

import json

import pytest

from clustereval.parsers import ParseError, parse
from tests.conftest import corpus_files, read_corpus

TOOL = "hpl"
CPU = "hpl-2.3-cpu-n384000-p1q2-passed.txt"
NVIDIA = "hpl-nvidia-1.0.0-2x-rtx4090-xeon-system-test-progress.txt"


@pytest.mark.parametrize("path", corpus_files(TOOL), ids=lambda p: p.name)
def test_every_corpus_file_parses(path):
    out = parse(TOOL, path.read_bytes())
    assert out["tool"] == TOOL and out["rows"]
    json.dumps(out)


def test_hpl23_cpu_run():
    out = parse(TOOL, read_corpus(TOOL, CPU))
    assert out["complete"] is True and out["hpl_version"] == "2.3"
    (row,) = out["rows"]
    assert row == {"tv": "WR0XR8C48", "n": 384000, "nb": 384, "p": 1, "q": 2, "time_s": 4645.37,
                   "gflops": 8126.1, "residual": 4.12139792e-03, "residual_passed": True}
    assert out["all_residuals_passed"] is True and out["best_gflops"] == 8126.1
    assert out["threshold"] == 16.0
    assert out["parameters"]["n"] == 384000 and out["parameters"]["pfact"] == "Crout"
    assert out["tests_passed"] == 1 and out["tests_failed"] == 0


def test_hpl_nvidia_system_test():
    out = parse(TOOL, read_corpus(TOOL, NVIDIA))
    assert out["variant"] == "HPL-NVIDIA 1.0.0" and out["hpl_version"] == "2.1"
    (row,) = out["rows"]
    assert (row["n"], row["nb"], row["p"], row["q"]) == (72000, 288, 1, 2)
    assert row["gflops"] == 2238.0 and row["time_s"] == 111.21 and row["residual"] == 0.0029328
    assert out["gpu_warnings"][0]["bus_id"] == "0000:c3:00.0" and out["gpu_warnings"][0]["rank"] == 1


def test_clock_warning_tail_excerpt():
    out = parse(TOOL, read_corpus(TOOL, "hpl-nvidia-2x-rtx6000ada-CLOCK-WARNINGS-tail-excerpt.txt"))
    assert out["rows"][0]["gflops"] == 567.2 and out["rows"][0]["residual_passed"] is True
    clocks = {w["clock_mhz"] for w in out["gpu_warnings"]}
    assert clocks == {626}
    assert {w["bus_id"] for w in out["gpu_warnings"]} == {"0000:41:00.0", "0000:61:00.0"}


def test_failed_residual_and_missing_end():
    text = read_corpus(TOOL, CPU).replace("...... PASSED", "...... FAILED")
    out = parse(TOOL, text[: text.index("Finished")])
    assert out["rows"][0]["residual_passed"] is False and out["all_residuals_passed"] is False
    assert out["complete"] is False


def test_cut_before_residual_is_incomplete():
    text = read_corpus(TOOL, NVIDIA)
    out = parse(TOOL, text[: text.index("||Ax-b||_oo/(eps")])
    assert out["complete"] is False and out["rows"][0]["residual_passed"] is None


def test_cut_before_result_row_raises():
    text = read_corpus(TOOL, CPU)
    with pytest.raises(ParseError, match="no result row"):
        parse(TOOL, text[: text.index("Column=000001920")])
    with pytest.raises(ParseError):
        parse(TOOL, "")
