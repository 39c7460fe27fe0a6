"""mamf-finder parser against every corpus file plus cut-short output."""

from __future__ import annotations

import json

import pytest

from clustereval.parsers import ParseError, parse
from tests.conftest import corpus_files, read_corpus

TOOL = "mamf-finder"
BF16 = "h100-sxm-p5-bf16-3375-shapes-full.txt"


@pytest.mark.parametrize("path", corpus_files(TOOL), ids=lambda p: p.name)
def test_every_corpus_file_parses(path):
    out = parse(TOOL, path.read_bytes())
    assert out["tool"] == TOOL and out["max_tflops"] is not None
    json.dumps(out)


def test_h100_bf16_full_sweep():
    out = parse(TOOL, read_corpus(TOOL, BF16))
    assert out["complete"] is True and out["interrupted"] is False
    assert out["max_tflops"] == 785.5 and out["best_shape"] == "4096x3072x13312"
    assert out["mean_tflops"] == 761.0 and out["best"]["mean"]["shape"] == "2048x2048x15360"
    assert out["median_tflops"] == 765.5
    assert out["shapes_tried"] == 3375 and len(out["rows"]) == 3375
    assert out["rows"][0] == {"index": 1, "shape": "1024x1024x1024", "m": 1024, "n": 1024, "k": 1024,
                              "mean_tflops": 134.8, "median_tflops": 134.9, "max_tflops": 140.1}
    assert out["dtype"] == "torch.bfloat16" and out["device_name"] == "NVIDIA H100 80GB HBM3"
    assert out["torch_version"] == "2.5.1+cu121" and out["cuda_version"] == "12.1"
    assert out["elapsed"] == "0:16:02" and out["started"] == "2025-01-05 06:20:47"


def test_h100_fp8_full_sweep():
    out = parse(TOOL, read_corpus(TOOL, "h100-sxm-p5-fp8-e4m3fn-3375-shapes-full.txt"))
    assert out["dtype"] == "torch.float8_e4m3fn"
    assert out["max_tflops"] == 1344.9 and out["best_shape"] == "15360x3072x4096"
    assert out["best"]["max"]["m"] == 15360 and out["best"]["max"]["k"] == 4096
    assert out["elapsed"] == "0:09:47"


def test_interrupted_gfx1151_summary_is_partial():
    out = parse(TOOL, read_corpus(TOOL, "gfx1151-strix-halo-bf16-INTERRUPTED-ctrl-c-summary.txt"))
    assert out["complete"] is False and out["interrupted"] is True
    assert out["max_tflops"] == 22.9 and out["best_shape"] == "3072x3072x1024"
    assert out["geomean_tflops"] == 16.5 and out["geomean_shapes"] == 879 and out["shapes_tried"] == 879
    assert out["hip_version"] == "6.5.25172-b42a9c664" and out["cuda_version"] is None
    assert out["device"]["gcnArchName"] == "gfx1151"


def test_cut_before_summary_uses_rows():
    text = read_corpus(TOOL, BF16)
    out = parse(TOOL, text[: text.index("    16 |")])
    assert out["complete"] is False and len(out["rows"]) == 15
    assert out["max_tflops"] == 401.2 and out["best_shape"] == "1024x1024x15360"


def test_warmup_only_raises():
    text = read_corpus(TOOL, BF16)
    with pytest.raises(ParseError, match="warm-up"):
        parse(TOOL, text[: text.index("     1 |")])
    with pytest.raises(ParseError):
        parse(TOOL, "")
