"""show_gids parser against the real RoCE GID table from the shared corpus."""

from __future__ import annotations

import pytest

from clustereval.parsers import ParseError, parse
from tests.conftest import read_corpus

NAME = "show_gids-roce-9x-mlx5-v1-v2-ipv4-mapped-md-trailing-spaces.txt"


def test_gid_table():
    out = parse("show_gids", read_corpus("show_gids", NAME))
    assert out["complete"] is True and out["warnings"] == []
    assert len(out["gids"]) == 36
    assert out["devices"] == [f"mlx5_{i}" for i in range(9)]
    assert out["gids"][0] == {"device": "mlx5_0", "port": 1, "index": 0,
                              "gid": "fe80:0000:0000:0000:f820:20ff:fe28:c769", "ipv4": None,
                              "roce_version": "v1", "netdev": "eth0"}
    v2 = [g for g in out["gids"] if g["device"] == "mlx5_1" and g["roce_version"] == "v2" and g["ipv4"]]
    assert v2[0]["index"] == 3 and v2[0]["ipv4"] == "25.11.128.2" and v2[0]["netdev"] == "eth1"


def test_footer_count_mismatch_is_incomplete():
    text = "mlx5_0\t1\t0\tfe80:0000:0000:0000:f820:20ff:fe28:c769\t\t\tv1\teth0\nn_gids_found=4\n"
    out = parse("show_gids", text)
    assert out["complete"] is False and out["n_gids_found"] == 4


@pytest.mark.parametrize("text", ["", "DEV\tPORT\tINDEX\tGID\n", "hello\n"])
def test_no_rows_raises(text):
    with pytest.raises(ParseError, match="show_gids"):
        parse("show_gids", text)
