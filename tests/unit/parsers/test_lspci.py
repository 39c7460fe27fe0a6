"""lspci parser: real -vvv blocks (ACS bits, link status) and a -tv tree from the shared corpus."""

from __future__ import annotations

import json

import pytest

from clustereval.parsers import ParseError, parse
from tests.conftest import read_corpus


def _run(name):
    return parse("lspci", read_corpus("lspci", name))


def test_h100_hgx_acs_bits_per_bridge():
    out = _run("h100-hgx-lspci-vvv-acs-excerpt.txt")
    json.dumps(out)
    assert out["complete"] is True
    assert [d["slot"] for d in out["devices"]] == ["15:01.0", "16:00.0", "17:00.0", "19:00.0", "1a:00.0", "82:00.0"]
    root = out["devices"][0]
    assert root["class"] == "PCI bridge" and root["rev"] == "04" and root["prog_if"] == "00"
    assert root["acs_cap"]["SrcValid"] is True and root["acs_cap"]["EgressCtrl"] is False
    assert all(v is False for v in root["acs_ctl"].values()) and root["driver"] == "pcieport"
    pmc = next(d for d in out["devices"] if d["slot"] == "82:00.0")
    assert pmc["acs_ctl"] == {"SrcValid": True, "TransBlk": False, "ReqRedir": True, "CmpltRedir": True,
                              "UpstreamFwd": True, "EgressCtrl": False, "DirectTrans": False}
    assert pmc["acs_cap"]["EgressCtrl"] is True
    assert out["acs_enabled_bridges"] == ["82:00.0"]
    gpu = next(d for d in out["devices"] if d["slot"] == "19:00.0")
    assert gpu["class"] == "3D controller" and gpu["description"] == "NVIDIA Corporation Device 2330"
    assert gpu["acs_cap"] is None


def test_amd_bridge_with_elisions_is_partial():
    out = _run("amd-matisse-gpp-bridge-acs-enabled-elided-dots.txt")
    assert out["complete"] is False
    dev = out["devices"][0]
    assert dev["slot"] == "40:01.1" and dev["numa_node"] == 1
    assert dev["acs_cap"]["DirectTrans"] is True and dev["acs_ctl"]["DirectTrans"] is False
    assert dev["acs_ctl"]["ReqRedir"] is True


def test_quoted_printable_copy_is_decoded_and_partial():
    out = _run("skylake-e-root-port-acs-link-downgraded-x1-2.5GT-QUOTED-PRINTABLE-mangled.txt")
    assert out["complete"] is False and any("quoted-printable" in w for w in out["warnings"])
    dev = out["devices"][0]
    assert dev["address"] == "0000:64:00.0" and dev["rev"] == "07"
    assert dev["description"] == "Intel Corporation Sky Lake-E PCI Express Root Port A"
    assert dev["acs_ctl"]["SrcValid"] is True and dev["acs_ctl"]["EgressCtrl"] is False
    assert dev["link_cap_speed"] == "8GT/s" and dev["link_cap_width"] == 16
    assert dev["link_sta_speed"] == "2.5GT/s" and dev["link_sta_width"] == 1
    assert out["downgraded_links"] == ["64:00.0"]
    assert dev["physical_slot"] == "2" and dev["iommu_group"] == 0


def test_tree_gives_addresses_from_bridge_ranges():
    out = _run("lspci-tv-amd-rome-mi100-x2-connectx6-pmc-switch-subtree.txt")
    assert out["format"] == "tree"
    by_name = {}
    for dev in out["devices"]:
        by_name.setdefault(dev["name"], []).append(dev["slot"])
    assert by_name["Mellanox Technologies MT28908 Family [ConnectX-6]"] == ["45:00.0"]
    assert by_name["Advanced Micro Devices, Inc. [AMD/ATI] Device 738c"] == ["4a:00.0", "50:00.0"]
    assert by_name["SK hynix Device 2839"] == ["52:00.0", "53:00.0"]
    bridge = next(d for d in out["devices"] if d["slot"] == "40:01.1")
    assert bridge["secondary_bus_range"] == "43-53"


def test_numeric_ids_with_nn():
    text = ("0000:1a:00.0 Ethernet controller [0200]: Mellanox Technologies MT2910 Family [ConnectX-7] "
            "[15b3:1021]\n\tSubsystem: Mellanox Technologies Device [15b3:0041]\n"
            "\tKernel driver in use: mlx5_core\n")
    dev = parse("lspci", text)["devices"][0]
    assert dev["vendor_id"] == "15b3" and dev["device_id"] == "1021" and dev["class_id"] == "0200"
    assert dev["description"] == "Mellanox Technologies MT2910 Family [ConnectX-7]"
    assert dev["driver"] == "mlx5_core"


@pytest.mark.parametrize("text", ["", "\tControl: I/O+ Mem+\n", "pcilib: Cannot open /proc/bus/pci\n"])
def test_no_device_raises(text):
    with pytest.raises(ParseError, match="lspci"):
        parse("lspci", text)
