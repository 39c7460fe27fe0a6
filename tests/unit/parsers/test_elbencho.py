"""Tests for the elbencho parser against the real outputs in the corpus."""

from __future__ import annotations

import json

import pytest

from clustereval.parsers import ParseError, parse
from tests.conftest import corpus_files, read_corpus


@pytest.mark.parametrize("path", corpus_files("elbencho"), ids=lambda p: p.name)
def test_every_corpus_file(path):
    out = parse("elbencho", path.read_bytes())
    json.dumps(out)
    assert out["complete"] is True and out["phases"]


def test_distributed_write_new_elapsed_format():
    text = read_corpus("elbencho", "distributed-3hosts-write-doc-example.txt")
    (phase,) = parse("elbencho", text)["phases"]
    assert phase["operation"] == "WRITE"
    assert phase["first_done"]["elapsed_ms"] == 123241  # 2m3.241s
    assert phase["last_done"]["elapsed_ms"] == 125755  # 2m5.755s
    assert phase["last_done"]["throughput_mibps"] == 33352
    assert phase["last_done"]["total_mib"] == 4194304


def test_large_file_sweep():
    out = parse("elbencho", read_corpus("elbencho", "sweep-large-files-56threads-nersc-2021.txt"))
    writes = [p for p in out["phases"] if p["operation"] == "WRITE"]
    assert writes[0]["dataset"].endswith("/1024x1GiB")
    assert writes[0]["last_done"]["throughput_mibps"] == 10488
    assert writes[0]["first_done"]["elapsed_ms"] == 85656
    assert writes[2]["dataset"].endswith("/256x4GiB") and writes[2]["last_done"]["iops"] == 580
    assert any("NOTE" in w for w in out["warnings"])


def test_small_file_sweep_files_and_dirs_per_second():
    text = read_corpus("elbencho", "sweep-lots-of-small-files-56threads-nersc-2021.txt")
    phases = parse("elbencho", text)["phases"]
    mkdirs = next(p for p in phases if p["operation"] == "MKDIRS")
    assert mkdirs["first_done"]["dirs_per_s"] == 21201 and mkdirs["last_done"]["total_dirs"] == 56
    write = next(p for p in phases if p["operation"] == "WRITE")
    assert write["last_done"]["files_per_s"] == 53757 and write["last_done"]["total_files"] == 1048600


def test_sweep_cut_short_is_incomplete():
    text = read_corpus("elbencho", "sweep-large-files-56threads-nersc-2021.txt")
    out = parse("elbencho", text[: text.index("===> ")])
    assert out["complete"] is False


def test_no_table_is_an_error():
    with pytest.raises(ParseError, match="no elbencho result table"):
        parse("elbencho", "OPERATION   RESULT TYPE         FIRST DONE   LAST DONE\n")
