"""TransferBench parser against the real v1.02 outputs in the shared corpus."""

from __future__ import annotations

import pytest

from clustereval.parsers import ParseError, parse
from tests.conftest import read_corpus

CLEAN = "v1.02-mi100-x4-1-to-4-gpus-fine-grain-1.txt"
GARBLED = "v1.02-mi100-x4-1-to-4-gpus-fine-grain-0-GARBLED-kerncd-els.txt"


def test_clean_run():
    out = parse("transferbench", read_corpus("transferbench", CLEAN))
    assert out["complete"] is True and out["version"] == "1.02"
    assert out["config"]["NUM_ITERATIONS"] == "10" and out["config"]["USE_HIP_CALL"] == "0"
    test = out["tests"][0]
    assert test["bytes"] == 1073741824 and len(test["transfers"]) == 4
    assert test["transfers"][1] == {"index": 1, "src": "G00", "dst": "G01", "executor": "GPU00",
                                    "executor_units": 4, "bw_gbps": 8.410, "time_ms": 127.675,
                                    "link": "LOCAL-PCIE-2"}
    assert test["aggregate_gbps"] == pytest.approx(33.538) and test["overhead_ms"] == pytest.approx(0.350)
    assert out["max_aggregate_gbps"] == pytest.approx(33.538)


def test_garbled_copy_is_read_but_incomplete():
    out = parse("transferbench", read_corpus("transferbench", GARBLED))
    assert out["complete"] is False
    assert any("USE_HIP_CALL" in w for w in out["warnings"])
    assert out["tests"][0]["aggregate_gbps"] == pytest.approx(33.518)
    assert out["tests"][0]["transfers"][0]["link"] == "LOCAL-LOCAL"


def test_run_without_aggregate_is_incomplete():
    text = read_corpus("transferbench", CLEAN).split(" Aggregate")[0]
    out = parse("transferbench", text)
    assert out["complete"] is False and len(out["tests"][0]["transfers"]) == 4


@pytest.mark.parametrize("text", ["", "Run configuration (TransferBench v1.02)\n", "hipErrorNoDevice\n"])
def test_no_results_raise(text):
    with pytest.raises(ParseError, match="transferbench"):
        parse("transferbench", text)
