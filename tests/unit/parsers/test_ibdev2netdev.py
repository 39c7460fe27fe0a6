"""ibdev2netdev parser against real outputs (plain and -v) from the shared corpus."""

from __future__ import annotations

import pytest

from clustereval.parsers import ParseError, parse
from tests.conftest import corpus_files, read_corpus

FILES = [p.name for p in corpus_files("ibdev2netdev")]


def _run(name):
    return parse("ibdev2netdev", read_corpus("ibdev2netdev", name))


@pytest.mark.parametrize("name", FILES)
def test_every_file_maps_devices(name):
    out = _run(name)
    assert out["mappings"] and out["complete"] is True and out["warnings"] == []


def test_single_port_pod():
    out = _run("network-operator-mofed-pod-single-port.txt")
    assert out["mappings"] == [{"device": "mlx5_0", "port": 1, "netdev": "ens64np1", "link": "Up", "up": True}]


def test_roce_twins_up_and_down():
    out = _run("dgx-spark-gb10-cx7-roce-twins.txt")
    assert out["up"] == ["enp1s0f1np1", "enP2p1s0f1np1"]
    assert out["netdev_by_device"]["roceP2p1s0f0/1"] == "enP2p1s0f0np0"


def test_verbose_sriov_vfs_and_active_port_with_down_netdev():
    out = _run("ibdev2netdev-v-connectx4-ib-sriov-vfs-MT4116-NA.txt")
    assert out["format"] == "verbose" and len(out["mappings"]) == 6
    pf1 = out["mappings"][1]
    assert pf1["device"] == "mlx5_1" and pf1["port_active"] is True and pf1["up"] is False
    assert pf1["firmware_version"] == "12.23.1020" and pf1["mt"] == "MT4115"
    vf = out["mappings"][-1]
    assert vf["device"] == "mlx5_5" and vf["mt"] == "MT4116" and vf["board"] is None and vf["description"] is None
    assert vf["pci"] == "02:00.2" and vf["port_state"] == "DOWN"


def test_verbose_long_padded_description():
    out = _run("ibdev2netdev-v-mixed-socket-direct-long-padded-description.txt")
    sd = next(m for m in out["mappings"] if m["device"] == "mlx5_5")
    assert sd["description"].endswith("single-port QSFP56, Socket Direct")
    assert sd["firmware_version"] == "20.30.1004" and sd["netdev"] == "ib0" and sd["board"] == "MCX654105A-HCAT"


def test_empty_output_raises():
    with pytest.raises(ParseError, match="ibdev2netdev"):
        parse("ibdev2netdev", "")
