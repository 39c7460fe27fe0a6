"""nvidia-smi --query-gpu CSV parser (registered as nvidia-smi-query-loop and nvidia-smi-query)."""

from __future__ import annotations

import json

import pytest

from clustereval.parsers import ParseError, get, parse
from tests.conftest import read_corpus

LOOP = ("nvidia-smi-query-loop", "h200-query-lms1000-idle-burn-idle-clock-event-reasons.csv")
ONE_SHOT = ("nvidia-smi", "h200-query-gpu-csv-drv580.159.04-EDITED-ids.csv")
WATCH = ("nvidia-smi", "query-gpu-csv-b300-x7-under-watch-header.txt")


def test_both_tool_names_use_the_same_parser():
    assert get("nvidia-smi-query") is get("nvidia-smi-query-loop")


def test_loop_over_idle_burn_idle():
    out = parse("nvidia-smi-query-loop", read_corpus(*LOOP))
    assert out["complete"] is True and out["format"] == "csv"
    assert out["columns"][4] == "power.draw [W]"
    assert out["units"]["power.draw"] == "W"
    assert len(out["rows"]) == 49  # 50 lines, one header
    first = out["rows"][0]
    assert first["timestamp"] == "2026/11/30 00:19:14.021"
    assert first["power.draw"] == pytest.approx(123.85)
    assert first["clocks.current.sm"] == 480
    assert first["clocks_event_reasons.active"] == 1  # 0x0000000000000001: GPU idle
    sw_cap = [r for r in out["rows"] if r["clocks_event_reasons.active"] == 4]
    assert len(sw_cap) == 41
    assert all(r["clocks_event_reasons.sw_power_cap"] == "Active" for r in sw_cap)
    assert all(r["throttle_reasons_active"] == ["sw_power_cap"] for r in sw_cap)
    assert first["throttle_reasons_active"] == ["gpu_idle"]
    assert out["summary"]["0"]["power.draw"]["max"] == pytest.approx(693.60)
    assert out["gpu_indices"] == [0]
    json.dumps(out)


def test_one_shot_with_identity_fields_kept_as_strings():
    out = parse("nvidia-smi-query", read_corpus(*ONE_SHOT))
    row = out["rows"][0]
    assert row["name"] == "NVIDIA H200"
    assert row["driver_version"] == "580.159.04"
    assert row["vbios_version"] == "96.00.A5.00.1A"
    assert row["pci.bus_id"] == "00000000:00:06.0"
    assert row["memory.total"] == 143771 and out["units"]["memory.total"] == "MiB"
    assert row["power.limit"] == pytest.approx(700.0)
    assert row["persistence_mode"] == "Enabled"
    assert row["ecc.errors.uncorrected.volatile.total"] == 0


def test_watch_banner_is_skipped():
    out = parse("nvidia-smi-query", read_corpus(*WATCH))
    assert [r["index"] for r in out["rows"]] == [0, 1, 2, 3, 4, 5, 6]
    assert out["rows"][1]["power.draw"] == pytest.approx(185.25)
    assert out["rows"][4]["temperature.gpu"] == 42
    assert out["units"]["utilization.gpu"] == "%"


def test_noheader_nounits_and_not_available_values():
    text = "0, 81559, [N/A], 45\n1, 81559, [Not Supported], 47\n"
    out = parse("nvidia-smi-query", text)
    assert out["columns"] is None
    assert out["rows"][0] == {"column_0": 0, "column_1": 81559, "column_2": None, "column_3": 45}
    assert out["rows"][1]["column_2"] is None
    assert out["warnings"]


def test_nounits_with_header_keeps_unit_from_header():
    text = "index, memory.used [MiB], power.draw [W]\n0, 1024, 350.12\n"
    row = parse("nvidia-smi-query", text)["rows"][0]
    assert row == {"index": 0, "memory.used": 1024, "power.draw": pytest.approx(350.12)}


def test_last_line_cut_short_is_incomplete():
    text = read_corpus(*LOOP)
    cut = text[: text.rindex(", Not Active, 0")]
    out = parse("nvidia-smi-query-loop", cut)
    assert out["complete"] is False
    assert len(out["rows"]) == 48


@pytest.mark.parametrize("text, reason", [
    ("", "empty"),
    ('Field "bogus.field" is not a valid field to query.\n', "only an error"),
    ("index, power.draw [W]\n", "header but no value"),
    ("No devices were found\n", "only an error"),
])
def test_unusable_output(text, reason):
    with pytest.raises(ParseError, match=reason):
        parse("nvidia-smi-query", text)


def test_reason_mask_with_several_and_unknown_bits():
    text = "index, clocks_throttle_reasons.active\n0, 0x0000000000000044\n1, 0x0000000000001000\n"
    rows = parse("nvidia-smi-query", text)["rows"]
    assert rows[0]["throttle_reasons_active"] == ["hw_thermal_slowdown", "sw_power_cap"]
    assert rows[1]["throttle_reasons_active"] == ["bit_0x1000"]
