"""The torch-distributed JSON-lines contract (parsers/torch_distributed.py)."""

from __future__ import annotations

import json

import pytest

from clustereval.parsers import ParseError, parse


def line(size, correct=True, **extra):
    return json.dumps({"collective": "all_reduce", "size_bytes": size, "time_s": size / 20e9, "algbw_gbps": 10.0,
                       "busbw_gbps": 17.5, "world_size": 4, "backend": "gloo", "device": "cpu", "correct": correct,
                       **extra})


def test_complete_run():
    text = "\n".join([json.dumps({"event": "start", "iters": 5}), line(1 << 20), line(1 << 24),
                      json.dumps({"event": "done"})])
    data = parse("torch-distributed", text)
    assert data["complete"] and data["done"] and data["backend"] == "gloo" and data["device"] == "cpu"
    assert [r["size_bytes"] for r in data["rows"]] == [1 << 20, 1 << 24] and data["world_size"] == 4
    assert data["rows"][0]["time_us"] == pytest.approx((1 << 20) / 20e9 * 1e6)


def test_truncated_output_is_incomplete_with_rows_kept():
    data = parse("torch-distributed", line(1 << 20) + "\n" + line(1 << 24)[:30])
    assert not data["complete"] and len(data["rows"]) == 1 and data["warnings"]


def test_wrong_values_errors_and_noise():
    text = "\n".join(["[W socket.cpp] warning", line(1 << 20, correct=False),
                      json.dumps({"event": "error", "message": "boom"}), json.dumps({"event": "done"})])
    data = parse("torch-distributed", text)
    assert data["wrong_sizes"] == [1 << 20] and data["failures"] == ["boom"] and not data["complete"]


def test_invalid_result_lines_are_warnings_and_nothing_known_is_an_error():
    data = parse("torch-distributed", line(1, correct="yes") + "\n" + line(2) + '\n{"event": "done"}')
    assert len(data["rows"]) == 1 and "correct" in data["warnings"][0]
    with pytest.raises(ParseError):
        parse("torch-distributed", "Traceback (most recent call last):\n  RuntimeError\n")
    with pytest.raises(ParseError):
        parse("torch-distributed", "")
