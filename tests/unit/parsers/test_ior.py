"""Tests for the IOR parser against the real outputs in the corpus."""

from __future__ import annotations

import json

import pytest

from clustereval.parsers import ParseError, parse
from tests.conftest import corpus_files, read_corpus


@pytest.mark.parametrize("path", corpus_files("ior"), ids=lambda p: p.name)
def test_every_corpus_file(path):
    out = parse("ior", path.read_bytes())
    json.dumps(out)
    assert out["complete"] is ("GARBLED" not in path.name)
    assert {r["access"] for r in out["results"]} == {"write", "read"}


def test_ior_3_4_daos_single_shared_file():
    out = parse("ior", read_corpus("ior", "ior-3.4.0dev-daos-dfuse-30tasks-ssf-verbose.txt"))
    assert out["version"] == "IOR-3.4.0+dev"
    assert out["header"]["tasks"] == 30
    assert out["options"]["access"] == "single-shared-file"
    assert out["options"]["aggregate filesize"] == "150 GiB"
    write, read = out["results"]
    assert write["bw_mibps"] == 1299.23 and write["iops"] == 1299.84 and write["total_s"] == 118.22
    assert read["bw_mibps"] == 5429 and read["wrrd_s"] == 28.28
    assert out["max_mibps"] == {"write": 1299.23, "read": 5429.38}
    assert out["read_max_mibps"] == 5429.38
    assert out["summary"][0]["#Tasks"] == 30 and out["summary"][0]["API"] == "POSIX"


def test_ior_4_five_repetitions():
    out = parse("ior", read_corpus("ior", "ior-4.0.0rc2-fsx-lustre-16tasks-fpp-random-5reps.txt"))
    assert out["version"] == "IOR-4.0.0rc2+dev"
    writes = [r for r in out["results"] if r["access"] == "write"]
    assert [r["iter"] for r in writes] == [0, 1, 2, 3, 4]
    assert writes[3]["bw_mibps"] == 929.10
    summary = {r["operation"]: r for r in out["summary"]}
    assert summary["write"]["max_mibps"] == 973.41 and summary["write"]["min_mibps"] == 929.10
    assert summary["write"]["mean_mibps"] == 959.73 and summary["read"]["mean_mibps"] == 379.09
    assert summary["read"]["stddev_mibps"] == 21.30
    assert summary["write"]["#Tasks"] == 16 and summary["write"]["blksiz"] == 268435456
    assert out["write_mean_mibps"] == 959.73


def test_garbled_merge_conflict_is_incomplete_but_keeps_rows():
    out = parse("ior", read_corpus("ior", "ior-defaults-1task-GARBLED-git-merge-conflict-markers.txt"))
    assert out["complete"] is False
    assert out["versions"] == ["IOR-4.0.0rc2+dev", "IOR-3.3.0+dev"]
    assert any("merge-conflict" in w for w in out["warnings"])
    assert out["results"][1]["bw_mibps"] == 2041.02


def test_cut_before_summary_is_incomplete():
    text = read_corpus("ior", "ior-4.0.0rc2-fsx-lustre-16tasks-fpp-random-5reps.txt")
    out = parse("ior", text[: text.index("read      395.37")])
    assert out["complete"] is False and len(out["results"]) == 3


def test_not_ior():
    with pytest.raises(ParseError):
        parse("ior", "mpirun: command not found\n")
    with pytest.raises(ParseError, match="empty"):
        parse("ior", "")
