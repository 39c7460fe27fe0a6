"""kernel-gpu-events: the Xids of kernel-xid and the amdgpu RAS events of kernel-amd-ras from one kernel log,
on the real captures of both (and on a log that interleaves them, as a node's kern.log may)."""

from __future__ import annotations

import pytest

from clustereval import parsers
from tests.conftest import read_corpus

AMD = "amdgpu-mi50-ue-athub-umc-gpu-reset-failed-abridged.log"
XID = "journalctl-xid79-fallen-off-bus-german-locale.log"


def test_an_nvidia_log_reads_as_kernel_xid_reads_it():
    text = read_corpus("kernel-xid", XID)
    ours, theirs = parsers.parse("kernel-gpu-events", text), parsers.parse("kernel-xid", text)
    assert ours["events"] == theirs["events"] and ours["xid_count"] == theirs["xid_count"] >= 1
    assert ours["amdgpu_count"] == 0 and ours["tool"] == "kernel-gpu-events"


def test_an_amdgpu_log_gives_its_ras_events_and_resets():
    result = parsers.parse("kernel-gpu-events", read_corpus("kernel-amd-ras", AMD))
    amd = [e for e in result["events"] if e["kind"] == "amdgpu"]
    assert result["xid_count"] == 0 and result["amdgpu_count"] == len(amd) > 0
    kinds = [e["ras"] for e in amd]
    assert "ue" in kinds and "ce" in kinds and "reset_failed" in kinds
    ue = next(e for e in amd if e["ras"] == "ue" and e.get("block") == "umc")
    assert ue["pci"] == "0000:08:00.0" and ue["count"] == 1


def test_both_vendors_in_one_log():
    text = read_corpus("kernel-xid", XID) + read_corpus("kernel-amd-ras", AMD)
    result = parsers.parse("kernel-gpu-events", text)
    assert {e["kind"] for e in result["events"]} >= {"xid", "amdgpu"}


def test_empty_text_is_a_parse_error():
    with pytest.raises(parsers.ParseError):
        parsers.get("kernel-gpu-events")("")
