"""flint query / mlxup / mlxfwmanager parser against real outputs from the shared corpus."""

from __future__ import annotations

import pytest

from clustereval.parsers import ParseError, parse
from tests.conftest import read_corpus


def _run(name):
    return parse("mlnx-fw", read_corpus("mlnx-fw", name))


def test_flint_query_cx7():
    out = _run("flint-q-cx7-fs4-28.42.1000.txt")
    assert out["format"] == "flint" and out["complete"] is True
    assert out["firmware_version"] == "28.42.1000" and out["psid"] == "MT_0000001244"
    dev = out["devices"][0]
    assert dev["image_type"] == "FS4" and dev["release_date"] == "8.8.2024"
    assert dev["base_guid"] == "e09d730300126474" and dev["base_mac_count"] == 16
    assert dev["rom_info"][0] == {"type": "UEFI", "version": "14.35.15", "cpu": "AMD64,AARCH64"}
    assert dev["rom_info"][1]["type"] == "PXE" and dev["security_attributes"] == "secure-fw"


def test_flint_after_update():
    out = _run("flint-q-cx7-after-update-28.43.1014.txt")
    assert out["firmware_version"] == "28.43.1014" and out["devices"][0]["base_mac"] == "e09d73125fc4"


def test_mlxup_update_required_then_updated():
    out = _run("mlxup-2x-cx7-update-required-then-update.txt")
    assert out["format"] == "mlxup" and len(out["devices"]) == 2
    assert out["update_performed"] is True and out["restart_needed"] is True
    dev = out["devices"][1]
    assert dev["pci_device"] == "/dev/mst/mt4129_pciconf0" and dev["base_mac"] == "e09d73126474"
    assert dev["firmware_version"] == "28.42.1000" and dev["firmware_available"] == "28.43.1014"
    assert dev["status"] == "Update required" and dev["up_to_date"] is False and dev["updated"] is True
    assert dev["versions"]["UEFI"] == {"current": "14.35.0015", "available": None}


def test_mlxfwmanager_no_matching_image():
    out = _run("mlxfwmanager-cx4lx-no-matching-image.txt")
    dev = out["devices"][0]
    assert dev["device_type"] == "ConnectX4LX" and dev["psid"] == "MT_2430110032"
    assert dev["firmware_version"] == "14.20.1010" and dev["firmware_available"] is None
    assert dev["status"] == "No matching image found"


def test_mlxup_connectx3_port_macs():
    out = _run("mlxup-cx3-vpi-up-to-date-port-macs.txt")
    dev = out["devices"][0]
    assert dev["port1_mac"] == "7cfe90bed011" and dev["port2_mac"] == "7cfe90bed012"
    assert dev["up_to_date"] is True and dev["firmware_version"] == "2.40.7000"


def test_mlxup_cut_before_status_is_incomplete():
    text = read_corpus("mlnx-fw", "mlxup-cx3-vpi-up-to-date-port-macs.txt").split("  Status")[0]
    out = parse("mlnx-fw", text)
    assert out["complete"] is False and out["devices"][0]["psid"] == "MT_1090120019"


@pytest.mark.parametrize("text", ["", "-E- Failed to open device\n", "Querying Mellanox devices firmware ...\n"])
def test_unusable_output_raises(text):
    with pytest.raises(ParseError, match="mlnx-fw"):
        parse("mlnx-fw", text)
