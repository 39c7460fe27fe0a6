"""The network_route probe (checks/probes/network.yml): the route and link speed toward each mesh peer, on
output the probe's own command printed on a Debian 12 host (iproute2 6.1) with
CLUSTEREVAL_DESTINATIONS=127.0.0.1,8.8.8.8 (and, for the second capture, a name and an IPv6 address)."""

from __future__ import annotations

import os
import subprocess

import pytest

from clustereval.checks import probe_catalogue
from clustereval.parsers import ParseError, parse

TOOL = "probe-network-route"
# eth0 is a virtual NIC: its /sys/class/net/eth0/speed says -1; lo has none (cat fails: "unknown")
CAPTURED = (
    "route 127.0.0.1: local 127.0.0.1 dev lo src 127.0.0.1 uid 0 \\    cache <local> \n"
    "speed lo: unknown\n"
    "route 8.8.8.8: 8.8.8.8 via 192.0.2.1 dev eth0 src 192.0.2.2 uid 0 \\    cache \n"
    "speed eth0: -1\n"
)
# CLUSTEREVAL_DESTINATIONS=127.0.0.1,8.8.8.8,no-such-host.invalid,fd00::2
CAPTURED_MIXED = CAPTURED + (
    'route no-such-host.invalid: Error: any valid prefix is expected rather than "no-such-host.invalid".\n'
    "route fd00::2: local fd00::2 from :: dev lo table local proto kernel src fd00::2 metric 0 pref medium\n"
    "speed lo: unknown\n"
)


def test_routes_and_speeds_as_captured():
    data = parse(TOOL, CAPTURED)
    assert data["complete"] and data["warnings"] == []
    assert data["routes"] == {
        "127.0.0.1": {"device": "lo", "source": "127.0.0.1", "via": None, "local": True, "speed_mbps": None},
        "8.8.8.8": {"device": "eth0", "source": "192.0.2.2", "via": "192.0.2.1", "local": False, "speed_mbps": None},
    }


def test_a_destination_without_a_route_an_ipv6_peer_and_a_known_speed():
    data = parse(TOOL, CAPTURED_MIXED)
    assert data["complete"]
    assert data["routes"]["no-such-host.invalid"]["device"] is None
    assert "any valid prefix" in data["routes"]["no-such-host.invalid"]["error"]
    assert any("no route to no-such-host.invalid" in w for w in data["warnings"])
    assert data["routes"]["fd00::2"] == {"device": "lo", "source": "fd00::2", "via": None, "local": True,
                                         "speed_mbps": None}
    fast = parse(TOOL, CAPTURED.replace("speed eth0: -1", "speed eth0: 100000"))
    assert fast["routes"]["8.8.8.8"]["speed_mbps"] == 100000


def test_the_probe_command_itself_prints_what_the_parser_reads():
    cmd = probe_catalogue.load()["network_route"]["cmd"]
    env = {**os.environ, "CLUSTEREVAL_DESTINATIONS": "127.0.0.1"}
    proc = subprocess.run(["/bin/sh", "-c", cmd], capture_output=True, text=True, env=env, timeout=10)
    data = parse(TOOL, proc.stdout)
    assert data["complete"] and data["routes"]["127.0.0.1"]["device"] == "lo" and data["routes"]["127.0.0.1"]["local"]


@pytest.mark.parametrize("text", [CAPTURED, CAPTURED_MIXED])
def test_output_cut_anywhere_is_a_parse_error_or_incomplete(text):
    whole = parse(TOOL, text)["routes"]
    complete_cuts = []
    for cut in range(len(text) - 1):
        try:
            data = parse(TOOL, text[:cut])
        except ParseError as exc:
            assert "internal parser fault" not in str(exc)
            continue
        if data["complete"]:
            # cut between two destinations: what it says of them is what the whole output says (the check
            # knows which peers it asked for; one absent has no route to judge)
            assert data["routes"] == {d: whole[d] for d in list(whole)[:len(data["routes"])]}, repr(text[:cut])
            complete_cuts.append(cut)
    boundaries = [i + 1 for i, c in enumerate(text[:-1]) if c == "\n" and text[i + 1:].startswith("route ")]
    assert complete_cuts == boundaries  # nowhere else


def test_specific_truncations():
    speed_missing = CAPTURED.rsplit("speed", 1)[0]  # the last route's speed line never came
    data = parse(TOOL, speed_missing)
    assert not data["complete"] and data["routes"]["8.8.8.8"]["device"] == "eth0"
    assert any("no speed line for eth0" in w for w in data["warnings"])
    mid_line = CAPTURED[: CAPTURED.index("dev eth0") + 3]
    data = parse(TOOL, mid_line)
    assert not data["complete"] and data["routes"]["8.8.8.8"]["device"] is None
    with pytest.raises(ParseError, match="no 'route <destination>:' line"):
        parse(TOOL, "speed lo: unknown\n")


@pytest.mark.parametrize("garbage", ["", "\n\n", "\x00\xff" * 40, "RTNETLINK answers: Network is unreachable\n",
                                     "".join(reversed(CAPTURED)), "route : dev\n", "route x:\n"])
def test_garbled_output_is_a_parse_error(garbage):
    with pytest.raises(ParseError) as exc:
        parse(TOOL, garbage)
    assert "internal parser fault" not in str(exc.value)


def test_garbled_lines_among_good_ones_never_escape_as_another_exception():
    for position in range(0, len(CAPTURED), 5):
        mangled = CAPTURED[:position] + "\x1b[1m\ufffd dev" + CAPTURED[position + 2:]
        try:
            data = parse(TOOL, mangled)
        except ParseError as exc:
            assert "internal parser fault" not in str(exc)
            continue
        assert isinstance(data["routes"], dict) and isinstance(data["complete"], bool)
