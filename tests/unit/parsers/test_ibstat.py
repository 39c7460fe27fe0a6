"""ibstat / ibstatus parser against real outputs from the shared corpus."""

from __future__ import annotations

import json

import pytest

from clustereval.parsers import ParseError, parse
from tests.conftest import corpus_files, read_corpus

FILES = [p.name for p in corpus_files("ibstat")]
INCOMPLETE = {"a100-node-mt4124-ibpanic-exit255.txt",
              "connectx6-mt4123-hdr100-rate100-rst-codeblock-first-line-indented.txt"}


def _run(name):
    return parse("ibstat", read_corpus("ibstat", name))


@pytest.mark.parametrize("name", FILES)
def test_every_file_gives_hcas_and_the_right_completeness(name):
    out = _run(name)
    json.dumps(out)
    assert out["hcas"] and out["ports"]
    assert out["complete"] is (name not in INCOMPLETE)


def test_cx7_all_active_400g():
    out = _run("h100-node-mt4129-cx7-fw28.39.1002-all-active.txt")
    assert len(out["hcas"]) == 12 and out["inactive_ports"] == []
    first = out["hcas"][0]
    assert first["name"] == "mlx5_0" and first["ca_type"] == "MT4129"
    assert first["firmware_version"] == "28.39.1002" and first["num_ports"] == 1
    assert first["ports"][0]["rate_gbitps"] == 400 and first["ports"][0]["link_layer"] == "Ethernet"
    second = out["hcas"][1]
    assert second["ca_type"] == "MT4125" and second["ports"][0]["rate_gbitps"] == 100


def test_some_ports_down():
    out = _run("h100-node-mt4129-some-ports-down.txt")
    assert out["inactive_ports"] == ["mlx5_2/1", "mlx5_7/1", "mlx5_8/1"]
    down = next(p for p in out["ports"] if p["ca"] == "mlx5_2")
    assert down["state"] == "Down" and down["physical_state"] == "Disabled" and down["rate_gbitps"] == 40
    assert down["active"] is False and down["link_up"] is False


def test_space_indented_variant():
    out = _run("h100-node-mt4129-fw28.41.1000-spaces.txt")
    assert out["hcas"][1]["ports"][0]["base_lid"] == 534
    assert out["hcas"][0]["ports"][0]["link_layer"] == "InfiniBand"


def test_ibpanic_keeps_devices_read_before_failure():
    out = _run("a100-node-mt4124-ibpanic-exit255.txt")
    assert [h["name"] for h in out["hcas"]] == [f"mlx5_{i}" for i in range(8)]
    assert "mlx5_8" in out["failures"][0]
    assert out["hcas"][7]["ports"][0]["base_lid"] == 13305


def test_reindented_document_is_flagged_but_read():
    out = _run("connectx6-mt4123-hdr100-rate100-rst-codeblock-first-line-indented.txt")
    assert out["hcas"][0]["ca_type"] == "MT4123" and out["ports"][0]["rate_gbitps"] == 100
    assert out["hcas"][0]["firmware_version"] == "20.35.1012"


def test_ibstatus_format():
    out = _run("ibstatus-a100-node-all-active.txt")
    assert out["format"] == "ibstatus"
    port = out["ports"][0]
    assert port["ca"] == "mlx5_0" and port["state"] == "ACTIVE" and port["state_code"] == 4
    assert port["physical_state"] == "LinkUp" and port["physical_state_code"] == 5
    assert port["rate_gbitps"] == 200 and port["width_speed"] == "4X HDR"
    assert port["base_lid"] == 0x33BF
    assert port["default_gid"] == "fe80:0000:0000:0000:0015:5dff:fd34:11eb"


def test_ibstatus_connectx3_second_port_polling():
    out = _run("ibstatus-connectx3-mlx4-port1-fdr10-active-port2-down-polling.txt")
    assert len(out["hcas"]) == 1 and len(out["ports"]) == 2
    assert out["ports"][0]["rate_gbitps"] == 40 and out["ports"][0]["width_speed"] == "4X FDR10"
    assert out["ports"][1]["state"] == "DOWN" and out["ports"][1]["physical_state"] == "Polling"
    assert out["inactive_ports"] == ["mlx4_0/2"]


@pytest.mark.parametrize("text", ["", "ibpanic: [1] main: stat of IB device 'mlx5_0' failed\n", "garbage\n"])
def test_no_hca_raises(text):
    with pytest.raises(ParseError, match="ibstat"):
        parse("ibstat", text)
