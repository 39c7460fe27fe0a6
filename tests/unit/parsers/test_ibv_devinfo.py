"""ibv_devinfo parser against real outputs from the shared corpus and a hand-written -v excerpt."""

from __future__ import annotations

import json

import pytest

from clustereval.parsers import ParseError, parse
from tests.conftest import corpus_files, read_corpus

FILES = [p.name for p in corpus_files("ibv_devinfo")]
GARBLED = "connectx6-hdr100-rst-codeblock-first-line-indented-GARBLED.txt"


def _run(name):
    return parse("ibv_devinfo", read_corpus("ibv_devinfo", name))


@pytest.mark.parametrize("name", FILES)
def test_every_file_gives_hcas(name):
    out = _run(name)
    json.dumps(out)
    assert out["hcas"] and out["ports"]
    assert out["complete"] is (name != GARBLED)


def test_two_hcas_ib_and_ethernet():
    out = _run("azure-vm-cx6-vf-ib-plus-cx4lx-vf-ethernet-two-hcas.txt")
    ib, eth = out["hcas"]
    assert ib["name"] == "mlx5_0" and ib["fw_ver"] == "20.31.1014" and ib["vendor_part_id"] == 4124
    assert ib["board_id"] == "MT_0000000223" and ib["ports"][0]["port_lid"] == 383
    assert ib["ports"][0]["state"] == "PORT_ACTIVE" and ib["ports"][0]["state_code"] == 4
    assert eth["hw_ver"] == "0x80" and eth["board_id"] == "MSF0010110035"
    assert eth["ports"][0]["link_layer"] == "Ethernet" and eth["ports"][0]["active_mtu"] == 1024


def test_legacy_device_ports_format():
    out = _run("legacy-mlnx-ofed4-device-ports-format-mixed-cx4lx-cx5-cx6-spaces-excerpt.txt")
    assert [h["name"] for h in out["hcas"]] == ["mlx5_5", "mlx5_7", "mlx5_0", "mlx5_2", "mlx5_4"]
    assert out["inactive_ports"] == ["mlx5_7/1", "mlx5_0/1", "mlx5_4/1"]
    assert out["hcas"][1]["vendor_part_id"] == 4120 and out["hcas"][1]["fw_ver"] == "16.27.1016"


def test_soft_roce_without_board_id():
    out = _run("soft-roce-rxe0-no-board-id.txt")
    hca = out["hcas"][0]
    assert hca["name"] == "rxe0" and hca["board_id"] is None and hca["vendor_id"] == "0xffffff"
    assert hca["fw_ver"] == "0.0.0"


def test_garbled_reindented_capture_is_incomplete_but_read():
    out = _run(GARBLED)
    assert out["hcas"][0]["fw_ver"] == "20.35.1012" and out["ports"][0]["port_lid"] == 762
    assert any("indented" in w for w in out["warnings"])


VERBOSE = (
    "hca_id:\tmlx5_0\n"
    "\ttransport:\t\t\tInfiniBand (0)\n"
    "\tfw_ver:\t\t\t\t28.39.1002\n"
    "\tphys_port_cnt:\t\t\t1\n"
    "\tdevice_cap_flags:\t\t0x21361c36\n"
    "\t\t\t\t\tBAD_PKEY_CNTR\n"
    "\t\t\t\t\tBAD_QKEY_CNTR\n"
    "\t\tport:\t1\n"
    "\t\t\tstate:\t\t\tPORT_ACTIVE (4)\n"
    "\t\t\tactive_width:\t\t4X (2)\n"
    "\t\t\tactive_speed:\t\t100.0 Gbps (128)\n"
    "\t\t\tphys_state:\t\tLINK_UP (5)\n"
    "\t\t\tGID[  0]:\t\tfe80:0000:0000:0000:a088:c203:00e3:142a, RoCE v1\n"
)


def test_verbose_rate_flags_and_gids():
    out = parse("ibv_devinfo", VERBOSE)
    assert out["format"] == "verbose"
    port = out["ports"][0]
    assert port["rate_gbitps"] == 400 and port["phys_state"] == "LINK_UP"
    assert port["gids"] == [{"index": 0, "gid": "fe80:0000:0000:0000:a088:c203:00e3:142a", "type": "RoCE v1"}]
    assert out["hcas"][0]["flags"]["device_cap_flags"] == ["BAD_PKEY_CNTR", "BAD_QKEY_CNTR"]


@pytest.mark.parametrize("text", ["", "No IB devices found\n", "junk junk\n"])
def test_no_device_raises(text):
    with pytest.raises(ParseError, match="ibv_devinfo"):
        parse("ibv_devinfo", text)
