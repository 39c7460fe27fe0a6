"""kernel-amd-ras parser against the corpus files plus hand-written dmesg lines."""

from __future__ import annotations

import json

import pytest

from clustereval.parsers import ParseError, get, parse
from tests.conftest import corpus_files, read_corpus

TOOL = "kernel-amd-ras"
MI50 = "amdgpu-mi50-ue-athub-umc-gpu-reset-failed-abridged.log"


@pytest.mark.parametrize("path", corpus_files(TOOL), ids=lambda p: p.name)
def test_every_corpus_file_parses(path):
    out = parse(TOOL, path.read_bytes())
    assert out["tool"] == TOOL and out["events"]
    json.dumps(out)


def test_mi50_ue_and_failed_reset():
    out = parse(TOOL, read_corpus(TOOL, MI50))
    first = out["events"][0]
    assert first["pci"] == "0000:08:00.0" and first["kind"] == "ue"
    assert first["error_event"] == "ERREVENT_ATHUB_INTERRUPT"
    assert out["by_device"]["0000:08:00.0"]["blocks"]["umc"] == {"ce": 1, "ue": 1, "de": 0}
    assert out["uncorrectable_errors"] == 2 and out["correctable_errors"] == 1
    assert out["resets_begun"] == 1 and out["resets_failed"] == 1
    failed = next(e for e in out["events"] if e["kind"] == "reset_failed")
    assert failed["ret"] == -62
    assert out["elided_lines"] == 1 and out["warnings"]  # the author's '...' is reported


def test_mi50_clock_timestamps_kept_by_the_registered_parser():
    # parse() runs clean(), whose srun-prefix rule currently strips the leading "16:" of these
    # bare hh:mm:ss stamps (reported to the coordinator); the parser itself keeps them whole
    out = get(TOOL)(read_corpus(TOOL, MI50))
    assert out["events"][0]["timestamp"] == "16:32:32"
    assert out["events"][-1]["timestamp"] == "16:32:54"


def test_umc_count_spam():
    out = parse(TOOL, read_corpus(TOOL, "amdgpu-umc-ras-count-spam-on-rocm-smi-showrasinfo.log"))
    assert out["correctable_errors"] == 1048560 and out["uncorrectable_errors"] == 1048560
    assert set(out["by_device"]) == {"0000:0b:00.0"}


def test_dmesg_layout():
    text = "[ 1234.567890] amdgpu 0000:c1:00.0: amdgpu: 3 correctable hardware errors detected in gfx block\n"
    (event,) = parse(TOOL, text)["events"]
    assert event["timestamp"] == "1234.567890" and event["count"] == 3 and event["block"] == "gfx"


def test_empty_raises_and_unrelated_log_is_clean():
    with pytest.raises(ParseError):
        parse(TOOL, "")
    out = parse(TOOL, "[    1.000000] Linux version 6.8.0\n")
    assert out["events"] == [] and out["uncorrectable_errors"] == 0
