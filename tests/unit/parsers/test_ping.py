"""``ping -n -q`` summaries (the network_ping probe), on output captured on a Debian 12 host (iputils 20221126)."""

from __future__ import annotations

import pytest

from clustereval.parsers import ParseError, parse

# ping -n -q -c 3 -i 0.2 127.0.0.1
LOOPBACK = """PING 127.0.0.1 (127.0.0.1) 56(84) bytes of data.

--- 127.0.0.1 ping statistics ---
3 packets transmitted, 3 received, 0% packet loss, time 408ms
rtt min/avg/max/mdev = 0.036/0.039/0.041/0.002 ms
"""
# ping -n -q -c 3 -i 0.2 -w 3 10.255.255.1 (routed to a gateway that answers "host unreachable")
UNREACHABLE = """PING 10.255.255.1 (10.255.255.1) 56(84) bytes of data.

--- 10.255.255.1 ping statistics ---
1 packets transmitted, 0 received, +1 errors, 100% packet loss, time 0ms

"""
# ping -n -q -c 3 -i 0.2 -w 2 192.0.2.99 (on the local subnet, nobody there: no reply, no error)
SILENT = """PING 192.0.2.99 (192.0.2.99) 56(84) bytes of data.

--- 192.0.2.99 ping statistics ---
10 packets transmitted, 0 received, 100% packet loss, time 1840ms

"""
# ping -n -q -c 1 -w 1 no-such-host.invalid: nothing on stdout, this on stderr (exit status 2)
UNRESOLVED_STDERR = "ping: no-such-host.invalid: Name or service not known\n"


def test_a_loopback_summary():
    data = parse("ping", LOOPBACK)
    assert data["complete"] and data["format"] == "iputils" and data["warnings"] == []
    assert (data["destination"], data["transmitted"], data["received"], data["loss_pct"]) == ("127.0.0.1", 3, 3, 0.0)
    assert (data["errors"], data["duplicates"], data["corrupted"], data["time_ms"]) == (0, 0, 0, 408)
    assert data["rtt_ms"] == {"min": 0.036, "avg": 0.039, "max": 0.041, "mdev": 0.002}


@pytest.mark.parametrize(("text", "transmitted", "errors", "time_ms"), [
    (UNREACHABLE, 1, 1, 0), (SILENT, 10, 0, 1840)])
def test_no_reply_is_complete_with_full_loss_and_no_rtt(text, transmitted, errors, time_ms):
    data = parse("ping", text)
    assert data["complete"] and data["received"] == 0 and data["loss_pct"] == 100.0 and data["rtt_ms"] is None
    assert (data["transmitted"], data["errors"], data["time_ms"]) == (transmitted, errors, time_ms)


def test_a_name_that_does_not_resolve():
    with pytest.raises(ParseError, match="no statistics block"):
        parse("ping", "")  # what the probe's stdout holds
    with pytest.raises(ParseError, match=r"ping failed: no-such-host\.invalid: Name or service not known"):
        parse("ping", UNRESOLVED_STDERR)  # stdout and stderr together


def test_partial_loss_duplicates_and_corrupted_replies():
    # the counts line as iputils prints it with every optional part (duplicates, corrupted, errors, in that order)
    text = LOOPBACK.replace("3 packets transmitted, 3 received, 0% packet loss",
                            "3 packets transmitted, 2 received, +1 duplicates, +1 corrupted, +2 errors, "
                            "33.3333% packet loss")
    data = parse("ping", text)
    assert data["complete"]
    assert (data["received"], data["duplicates"], data["corrupted"], data["errors"]) == (2, 1, 1, 2)
    assert data["loss_pct"] == 33.3333


def test_busybox_summaries():
    text = ("--- 10.0.0.2 ping statistics ---\n3 packets transmitted, 3 packets received, 1 duplicates, "
            "0% packet loss\nround-trip min/avg/max = 0.051/0.060/0.071 ms\n")
    data = parse("ping", text)
    assert data["complete"] and data["format"] == "busybox" and data["duplicates"] == 1 and data["time_ms"] is None
    assert data["rtt_ms"] == {"min": 0.051, "avg": 0.06, "max": 0.071, "mdev": None}
    lost = parse("ping", "--- 10.0.0.2 ping statistics ---\n2 packets transmitted, 0 packets received, "
                         "100% packet loss\n")
    assert lost["complete"] and lost["format"] == "busybox" and lost["loss_pct"] == 100.0


@pytest.mark.parametrize("text", [LOOPBACK, UNREACHABLE, SILENT])
def test_output_cut_anywhere_is_a_parse_error_or_incomplete(text):
    full = len(text.rstrip("\n"))
    for cut in range(full):
        try:
            data = parse("ping", text[:cut])
        except ParseError as exc:
            assert "internal parser fault" not in str(exc)
            continue
        assert not data["complete"], (cut, text[:cut])
        assert data["warnings"]


def test_specific_truncations():
    no_rtt = LOOPBACK.split("rtt")[0]
    data = parse("ping", no_rtt)
    assert not data["complete"] and data["received"] == 3 and data["rtt_ms"] is None
    assert data["warnings"] == ["replies were counted but no rtt line followed"]
    data = parse("ping", SILENT.replace(", time 1840ms", ", tim"))
    assert not data["complete"] and "cut short" in data["warnings"][0]
    with pytest.raises(ParseError):
        parse("ping", LOOPBACK.split("---")[0])  # before the statistics block


@pytest.mark.parametrize("garbage", [
    "\x00\x01\x02\xff" * 50, "rtt min/avg/max/mdev = a/b/c/d ms\n", "3 packets transmitted, x received\n",
    "--- 127.0.0.1 ping statistics ---\n", LOOPBACK.replace("\n", "\r")[:60], "".join(reversed(LOOPBACK)),
    b"\xff\xfe3 packets transmitted".decode("latin-1"),
])
def test_garbled_output_is_a_parse_error(garbage):
    with pytest.raises(ParseError) as exc:
        parse("ping", garbage)
    assert "internal parser fault" not in str(exc.value)


def test_garbled_bytes_inside_a_summary_never_escape_as_another_exception():
    for position in range(0, len(LOOPBACK), 7):
        mangled = LOOPBACK[:position] + "\ufffd\x1b[31m\t" + LOOPBACK[position + 3:]
        try:
            data = parse("ping", mangled)
        except ParseError as exc:
            assert "internal parser fault" not in str(exc)
            continue
        assert isinstance(data["complete"], bool)
        if data["complete"]:  # whatever was understood is what the output says
            assert data["transmitted"] == 3 and data["received"] == 3
