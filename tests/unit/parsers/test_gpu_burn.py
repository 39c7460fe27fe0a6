"""gpu-burn parser against every corpus file plus cut-short output."""

from __future__ import annotations

import json

import pytest

from clustereval.parsers import ParseError, parse
from tests.conftest import corpus_files, read_corpus

TOOL = "gpu-burn"


@pytest.mark.parametrize("path", corpus_files(TOOL), ids=lambda p: p.name)
def test_every_corpus_file_parses(path):
    out = parse(TOOL, path.read_bytes())
    assert out["tool"] == TOOL and out["gpus"]
    json.dumps(out)


def test_a100_x8_doubles_tensor_cores_glued_progress_lines():
    out = parse(TOOL, read_corpus(TOOL, "a100-sxm4-80gb-x8-doubles-tensor-cores-all-ok.txt"))
    assert out["complete"] is True and out["all_ok"] is True
    assert out["gpu_count"] == 8 and out["tested_gpus"] == 8
    assert out["precision"] == "doubles" and out["tensor_cores"] is True
    gpu0, gpu1 = out["gpus"][0], out["gpus"][1]
    assert gpu0["uuid"] == "GPU-b876c63f-396c-f826-5cd0-6b8409990352"
    assert gpu0["name"] == "NVIDIA A100-SXM4-80GB"
    assert gpu0["gflops"] == 16942.0 and gpu1["gflops"] == 17093.0  # last report on the last line
    assert gpu1["max_gflops"] == 17177.0
    assert gpu0["temp_c"] == 62 and gpu0["errors"] == 0 and gpu0["verdict"] == "OK" and gpu0["ok"] is True
    assert gpu0["memory_used_mb"] == 72443


def test_b300_single_progress_line_zero_gflops():
    name = "b300-sxm6-x7-600s-single-progress-line-most-gpus-0-gflops-all-ok.txt"
    out = parse(TOOL, read_corpus(TOOL, name))
    assert out["gpu_count"] == 7 and out["all_ok"] is True and out["duration_s"] == 600
    assert out["progress_percent"] == 84.5 and out["compare_file"] == "compare.fatbin"
    assert out["gpus"][1]["gflops"] == 1038.0 and out["gpus"][0]["gflops"] == 0.0
    assert out["zero_gflops_gpus"] == [0, 2, 3, 4, 5, 6]
    assert any("0 Gflop/s" in w for w in out["warnings"])
    assert [g["temp_c"] for g in out["gpus"]] == [33, 48, 43, 34, 50, 34, 46]


def test_rtx_a400_single_gpu_layout():
    out = parse(TOOL, read_corpus(TOOL, "rtx-a400-500s-floats-all-ok-sigterm.txt"))
    (gpu,) = out["gpus"]
    assert gpu["gflops"] == 1772.0 and gpu["max_gflops"] == 1784.0 and gpu["iterations"] == 814
    assert gpu["ok"] is True and out["precision"] == "floats" and out["tensor_cores"] is False
    assert out["reports"] == 10


def test_t4_faulty_with_errors():
    out = parse(TOOL, read_corpus(TOOL, "tesla-t4-500s-floats-errors-WARNING-FAULTY.txt"))
    (gpu,) = out["gpus"]
    # FAILURE in SOURCES.md means the GPU failed; the output itself is whole (verdict block printed),
    # so complete stays True and the failure is carried by ok/all_ok
    assert out["complete"] is True
    assert gpu["verdict"] == "FAULTY" and gpu["ok"] is False
    assert out["all_ok"] is False and out["faulty_gpus"] == [0]
    assert gpu["errors_last_report"] == 10159088
    assert gpu["errors"] > 30472096
    assert gpu["gflops"] == 3064.0


def test_cut_before_verdict_is_incomplete_with_rows():
    text = read_corpus(TOOL, "rtx-a400-500s-floats-all-ok-sigterm.txt")
    out = parse(TOOL, text[: text.index("Killing processes")])
    assert out["complete"] is False and out["all_ok"] is None
    assert out["gpus"][0]["gflops"] == 1772.0 and out["gpus"][0]["ok"] is None


def test_empty_and_foreign_text_raise():
    with pytest.raises(ParseError):
        parse(TOOL, "")
    with pytest.raises(ParseError):
        parse(TOOL, "bash: gpu_burn: command not found\n")
