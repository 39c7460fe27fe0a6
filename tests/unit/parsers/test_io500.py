"""Tests for the IO500 parser against the real outputs in the corpus."""

from __future__ import annotations

import json

import pytest

from clustereval.parsers import ParseError, parse
from tests.conftest import corpus_files, read_corpus


@pytest.mark.parametrize("path", corpus_files("io500"), ids=lambda p: p.name)
def test_every_corpus_file(path):
    out = parse("io500", path.read_bytes())
    json.dumps(out)
    assert out["complete"] is ("snipped" not in path.name)


def _phases(out):
    return {p["name"]: p for p in out["phases"]}


def test_isc22_s3_find_invalid():
    out = parse("io500", read_corpus("io500", "io500-isc22-s3-libs3-2ranks-find-0-INVALID.txt"))
    assert out["version"] == "io500-isc22_v1 (standard)"
    phases = _phases(out)
    assert phases["ior-easy-write"]["bw_gibps"] == 0.002189 and phases["ior-easy-write"]["time_s"] == 303.523
    assert phases["find"]["invalid"] is True and phases["find"]["kiops"] == 0
    assert phases["timestamp"]["scored"] is False
    assert out["score_bandwidth_gibps"] == 0.000931 and out["score_iops_kiops"] == 0.003778
    assert out["score_total"] == 0.001875 and out["score_valid"] is False


def test_minimal_score_invalid_tag():
    out = parse("io500", read_corpus("io500", "io500-minimal-np2-score-invalid.txt"))
    assert _phases(out)["mdtest-easy-write"]["kiops"] == 103.300821
    assert out["score_valid"] is False and out["score_bw_unit"] == "GB/s"
    assert out["score_total"] == 7.096374


def test_lustre_summary_with_optional_phase():
    name = "result_summary-lustre-exascaler-10nodes-lipe-scan-rnd4K-optional-INVALID.txt"
    out = parse("io500", read_corpus("io500", name))
    phases = _phases(out)
    assert phases["find"]["kiops"] == 24346.302247
    assert phases["ior-easy-write"]["invalid"] is True and phases["ior-hard-write"]["invalid"] is False
    optional = phases["ior-rnd4K-easy-read"]
    assert optional["scored"] is False and optional["bw_gibps"] == 0.134469
    assert out["score_total"] == 17.690911 and out["score_valid"] is False


def test_result_ini_snipped():
    out = parse("io500", read_corpus("io500", "result.txt-find-section-lipe-scan-snipped.txt"))
    assert out["format"] == "result_ini" and out["complete"] is False
    assert out["sections"]["find"]["found"] == "327094"
    assert out["sections"]["find"]["score"] == "24346.302247"


def test_no_score_line_is_incomplete():
    text = read_corpus("io500", "io500-minimal-np2-score-invalid.txt")
    out = parse("io500", text[: text.index("[SCORE")])
    assert out["complete"] is False and len(out["phases"]) == 12


def test_not_io500():
    with pytest.raises(ParseError):
        parse("io500", "$ mpiexec -np 2 ./io500 config.ini\n")
