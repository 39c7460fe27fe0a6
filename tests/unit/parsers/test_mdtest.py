"""Tests for the mdtest parser against the real outputs in the corpus."""

from __future__ import annotations

import json

import pytest

from clustereval.parsers import ParseError, parse
from tests.conftest import corpus_files, read_corpus

# files whose capture has no '-- finished at' line, and the garbled one
INCOMPLETE = {"mdtest-3.4.0dev-tablefs-statvfs-error-warning-directory-ops.txt",
              "mdtest-n10-2ranks-summary-rate.txt",
              "mdtest-4.0.0rc1-beegfs-32tasks-GARBLED-cmdline-quote-space-lines.txt"}


@pytest.mark.parametrize("path", corpus_files("mdtest"), ids=lambda p: p.name)
def test_every_corpus_file(path):
    out = parse("mdtest", path.read_bytes())
    json.dumps(out)
    assert out["complete"] is (path.name not in INCOMPLETE)
    assert out["rate_rows"]


def _rates(name):
    return {r["key"]: r for r in parse("mdtest", read_corpus("mdtest", name))["rate_rows"]}


def test_mdtest_1_9_3_colon_format_three_iterations():
    out = parse("mdtest", read_corpus("mdtest", "mdtest-1.9.3-beegfs-3iter-colon-format-used-inodes-nan.txt"))
    assert out["version"] == "mdtest-1.9.3" and out["iterations"] == 3 and out["files"] == 1404928
    rates = {r["key"]: r for r in out["rate_rows"]}
    assert rates["file_creation"]["max_ops_per_s"] == 439.763
    assert rates["file_creation"]["stddev_ops_per_s"] == 14.357
    assert rates["file_stat"]["mean_ops_per_s"] == 2947.822
    assert rates["tree_removal"]["min_ops_per_s"] == 84.924


def test_mdtest_3_4_daos_create_only():
    out = parse("mdtest", read_corpus("mdtest", "mdtest-3.4.0dev-daos-dfuse-10tasks-file-create.txt"))
    assert (out["tasks"], out["nodes"], out["nodemap"]) == (10, 3, "1001001001")
    assert out["rates_mean_ops_per_s"]["file_creation"] == 2943.686
    assert out["rates_mean_ops_per_s"]["file_stat"] == 0


def test_mdtest_4_0_without_colon_column():
    rates = _rates("mdtest-4.0.0-daos-dfuse-10tasks-2nodes-create-only.txt")
    assert rates["file_creation"]["mean_ops_per_s"] == 2568.636
    assert rates["tree_creation"]["max_ops_per_s"] == 496.015


def test_statvfs_warning_is_reported():
    name = "mdtest-3.4.0dev-tablefs-statvfs-error-warning-directory-ops.txt"
    out = parse("mdtest", read_corpus("mdtest", name))
    assert any("statvfs" in w for w in out["warnings"])
    assert {r["key"]: r for r in out["rate_rows"]}["directory_stat"]["mean_ops_per_s"] == 26156.989


def test_garbled_command_line():
    name = "mdtest-4.0.0rc1-beegfs-32tasks-GARBLED-cmdline-quote-space-lines.txt"
    out = parse("mdtest", read_corpus("mdtest", name))
    assert any("unbalanced quotes" in w for w in out["warnings"])
    assert out["tasks"] == 32 and out["files"] == 1638400000
    assert {r["key"]: r for r in out["rate_rows"]}["file_stat"]["mean_ops_per_s"] == 355963.122


def test_summary_only_excerpt():
    rates = _rates("mdtest-n10-2ranks-summary-rate.txt")
    assert rates["directory_rename"]["mean_ops_per_s"] == 24125.994
    assert len(rates) == 10


def test_cut_before_summary_is_an_error():
    text = read_corpus("mdtest", "mdtest-4.0.0-daos-dfuse-10tasks-2nodes-create-only.txt")
    with pytest.raises(ParseError, match="ends before the SUMMARY"):
        parse("mdtest", text[: text.index("SUMMARY")])
