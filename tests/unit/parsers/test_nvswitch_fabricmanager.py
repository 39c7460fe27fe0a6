"""Fabric Manager parser: logs and start-up failures from the corpus."""

from __future__ import annotations

import json

import pytest

from clustereval.parsers import ParseError, parse
from tests.conftest import corpus_files, read_corpus

TOOL = "nvswitch-fabricmanager"
LOG = "fabricmanager-log-nvswitch-nonfatal-12028.log"


@pytest.mark.parametrize("path", corpus_files(TOOL), ids=lambda p: p.name)
def test_every_corpus_file_parses(path):
    out = parse(TOOL, path.read_bytes())
    assert out["tool"] == TOOL
    json.dumps(out)


def test_log_with_nonfatal_12028_errors():
    text = read_corpus(TOOL, LOG)
    out = parse(TOOL, text)
    assert out["format"] == "log" and out["complete"] is True and out["failed"] is False
    assert out["version"] == "535.161.08" and out["topology"] == "DGX/HGX H100"
    assert out["restarts"] == text.count("Fabric Manager Log initializing at:")
    assert out["nvswitch_error_counts_by_code"] == {"12028": text.count("non-fatal error 12028")}
    first = out["nvswitch_errors"][0]
    assert first == {"timestamp": "Dec 19 2024 19:17:49", "fatal": False, "code": 12028, "fid": 0,
                     "bus_id": "00000000:83:00.0", "physical_id": 0, "port": 34}
    assert out["fatal_errors"] == 0
    switches = {s["bus_id"]: s for s in out["nvswitches"]}
    assert switches["00000000:84:00.0"]["enabled_link_mask"] == "ffffffff000000ff"
    assert switches["00000000:83:00.0"]["uuid"] == "SWX-8CDF9499-4961-23EF-5606-A2FA47356210"


def test_multicast_log():
    text = read_corpus(TOOL, "fabricmanager-log-multicast-team-inband.log")
    out = parse(TOOL, text)
    assert out["multicast_teams"]["setup"] == text.count("successfully setup multicast team")
    assert out["multicast_teams"]["released"] == text.count("successfully released multicast team")
    assert out["problems"][0]["timestamp"] == "Feb 27 2025 15:10:02"


@pytest.mark.parametrize("name, exit_code", [
    ("fm-fail-NV_WARN_NOTHING_TO_DO-b300-2gpu-session-annotated-wrapped.txt", None),
    ("fm-start-fail-595.58.03-pre-nvl5-NOTHING_TO_DO-wrapped-elided.txt", 1),
])
def test_startup_failures_are_partial(name, exit_code):
    out = parse(TOOL, read_corpus(TOOL, name))
    assert out["format"] == "startup" and out["complete"] is False and out["failed"] is True
    assert out["error_codes"] == ["NV_WARN_NOTHING_TO_DO"] and out["pre_nvl5"] is True
    assert out["exit_code"] == exit_code
    assert "NV_WARN_NOTHING_TO_DO" in out["failure_reason"]  # found although the message is wrapped


def test_unrelated_and_empty_raise():
    with pytest.raises(ParseError):
        parse(TOOL, "")
    with pytest.raises(ParseError):
        parse(TOOL, "hello\n")
