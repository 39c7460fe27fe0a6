"""Tests for the nvidia-smi dmon parser against the shared corpus and hand-written fixtures."""

from __future__ import annotations

import json

import pytest

from clustereval.parsers import ParseError, parse
from tests.conftest import corpus_files, read_corpus

TOOL = "nvidia-smi-dmon"
BURN = "h200-dmon-s-pucvmet-idle-then-bf16-gemm-burn-power-capped.txt"

# `nvidia-smi dmon -s pucet -o DT` layout: date and time columns before the GPU index, "-" for N/A.
DATE_TIME = (
    "#Date       Time        gpu   pwr gtemp mtemp    sm   mem   "
    "enc   dec  mclk  pclk sbecc dbecc   pci rxpci txpci\n"
    "#YYYYMMDD   HH:MM:SS    Idx     W     C     C     %     %   "
    "  %     %   MHz   MHz  errs  errs  errs  MB/s  MB/s\n"
    " 20210102   19:12:31      0    37    19     -     0     0   "
    "  0     0  4006   582     -     -     0     0     1\n"
    " 20210102   19:12:33      0    39    19     -     0     0   "
    "  0     0  4006  1582     -     -     0     0     0\n")


@pytest.mark.parametrize("path", corpus_files(TOOL), ids=lambda p: p.name)
def test_every_corpus_file_parses_to_json(path):
    out = parse(TOOL, path.read_bytes())
    json.dumps(out)
    assert out["tool"] == TOOL and out["samples"]


def test_burn_capture_columns_units_and_samples():
    out = parse(TOOL, read_corpus(TOOL, BURN))
    assert out["complete"] is True and out["warnings"] == []
    assert out["columns"][:4] == ["gpu", "pwr", "gtemp", "mtemp"]
    assert out["units"]["pwr"] == "W" and out["units"]["rxpci"] == "MB/s" and out["units"]["tviol"] == "bool"
    assert len(out["samples"]) == 50  # -c 50
    first = out["samples"][0]
    assert (first["gpu"], first["pwr"], first["gtemp"], first["mtemp"]) == (0, 123, 37, 39)
    assert first["pclk"] == 480


def test_burn_capture_summary_shows_power_cap_violation():
    summary = parse(TOOL, read_corpus(TOOL, BURN))["gpus"]["0"]
    assert summary["samples"] == 50
    assert summary["max"]["pviol"] == 100
    assert summary["max"]["pwr"] == 693
    assert summary["max"]["mclk"] == 3201


def test_date_time_columns_and_dashes():
    out = parse(TOOL, DATE_TIME)
    assert out["columns"][:3] == ["Date", "Time", "gpu"]
    row = out["samples"][1]
    assert row["Date"] == "20210102" and row["Time"] == "19:12:33"
    assert row["pclk"] == 1582 and row["mtemp"] is None and row["sbecc"] is None


def test_killed_dmon_last_row_cut_is_incomplete():
    text = read_corpus(TOOL, BURN).rstrip()
    cut = text[: len(text) - 40]
    out = parse(TOOL, cut)
    assert out["complete"] is False
    assert len(out["samples"]) == 49
    assert any("cut short" in w for w in out["warnings"])


def test_header_reprint_is_not_a_sample():
    lines = DATE_TIME.split("\n")
    text = "\n".join(lines[:3] + lines[:2] + lines[3:])
    out = parse(TOOL, text)
    assert len(out["samples"]) == 2 and out["complete"] is True


def test_header_only_is_incomplete():
    out = parse(TOOL, "\n".join(DATE_TIME.split("\n")[:2]))
    assert out["complete"] is False and out["samples"] == []


@pytest.mark.parametrize("text", ["", "no header here\n1 2 3\n"])
def test_empty_or_headerless_raises_parse_error(text):
    with pytest.raises(ParseError):
        parse(TOOL, text)
