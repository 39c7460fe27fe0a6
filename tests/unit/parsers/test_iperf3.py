"""iperf3 parser: real -J and text outputs from the shared corpus plus hand-written UDP and failure cases."""

from __future__ import annotations

import json
import re

import pytest

from clustereval.parsers import ParseError, parse
from tests.conftest import read_corpus


def _run(name):
    return parse("iperf3", read_corpus("iperf3", name))


def test_json_tcp_with_omitted_intervals_and_retransmits():
    out = _run("iperf3-3.9-J-tcp-10s-omit3-retransmits-crlf.json")
    json.dumps(out)
    assert out["format"] == "json" and out["complete"] is True
    assert out["version"] == "iperf 3.9" and out["protocol"] == "TCP"
    assert out["remote_host"] == "150.239.69.43" and out["remote_port"] == 5100
    assert out["sent_gbitps"] == pytest.approx(128974796.41008143 / 1e9)
    assert out["received_gbitps"] == pytest.approx(129638594.98907341 / 1e9)
    assert out["retransmits"] == 296
    assert out["sum_sent"]["bytes"] == 161218560
    assert out["intervals"][0]["omitted"] is True
    assert out["intervals"][0]["gbitps"] == pytest.approx(74182986.305327252 / 1e9)
    assert out["sender_congestion"] == "cubic"


def test_json_bytes_limited_run():
    out = _run("iperf3-3.9-J-tcp-bytes-limited-10K-cross-cloud-eks.json")
    assert out["complete"] is True
    assert out["sum_received"]["bytes"] == 14080
    assert out["cpu_host_total_pct"] == pytest.approx(40.00415196180195)
    assert out["local_host"] == "192.168.34.180"


def test_json_error_without_measurement_is_incomplete():
    out = _run("iperf3-3.6-J-error-control-socket-closed-empty-intervals-crlf.json")
    assert out["complete"] is False
    assert out["error"] == "error - control socket has closed unexpectedly"
    assert out["intervals"] == [] and out["sent_gbitps"] is None
    assert out["version"] == "iperf 3.6"


def test_json_interrupted_with_caret_c_prefix_keeps_figures():
    out = _run("iperf3-3.6-J-interrupted-leading-ctrl-c-byte-error-interrupt-crlf.json")
    assert out["complete"] is False
    assert out["error"] == "interrupt - the client has terminated"
    assert out["sum_received"]["bytes"] == 0
    assert out["sent_gbitps"] == pytest.approx(160287232.32821622 / 1e9)
    assert any("^C" in w for w in out["warnings"])


def test_text_tcp_sender_receiver():
    out = _run("iperf3-text-tcp-10s-omit3-retr-cwnd-sender-receiver-crlf.txt")
    assert out["format"] == "text" and out["complete"] is True and out["done"] is True
    assert out["remote_host"] == "34.142.72.41" and out["remote_port"] == 5200
    assert out["sent_gbitps"] == pytest.approx(0.106) and out["received_gbitps"] == pytest.approx(0.106)
    assert out["retransmits"] == 9
    assert out["sum_sent"]["bytes"] == 126 * 1024**2
    assert len(out["intervals"]) == 13
    assert sum(i["omitted"] for i in out["intervals"]) == 3
    after_omit = [i for i in out["intervals"] if not i["omitted"]]
    assert after_omit[5]["start"] == 5.0 and after_omit[5]["retransmits"] == 9


def test_garbled_file_with_only_escape_echo_raises():
    with pytest.raises(ParseError, match="iperf3"):
        _run("GARBLED-result-file-only-ansi-up-arrow-escape.txt")


UDP_JSON = {
    "start": {"version": "iperf 3.12", "connected": [{"remote_host": "10.0.0.2", "remote_port": 5201}],
              "test_start": {"protocol": "UDP", "num_streams": 1, "duration": 10, "reverse": 0}},
    "intervals": [],
    "end": {"sum": {"start": 0, "end": 10, "seconds": 10, "bytes": 1310720, "bits_per_second": 1048576,
                    "jitter_ms": 0.012, "lost_packets": 3, "packets": 906, "lost_percent": 0.33,
                    "sender": True}},
}

UDP_TEXT = """\
Connecting to host 10.0.0.2, port 5201
[  5] local 10.0.0.1 port 40001 connected to 10.0.0.2 port 5201
[ ID] Interval           Transfer     Bitrate         Total Datagrams
[  5]   0.00-1.00   sec   129 KBytes  1.05 Mbits/sec  91
- - - - - - - - - - - - - - - - - - - - - - - - -
[ ID] Interval           Transfer     Bitrate         Jitter    Lost/Total Datagrams
[  5]   0.00-10.00  sec  1.25 MBytes  1.05 Mbits/sec  0.000 ms  0/906 (0%)  sender
[  5]   0.00-10.04  sec  1.25 MBytes  1.04 Mbits/sec  0.012 ms  3/906 (0.33%)  receiver

iperf Done.
"""


def test_udp_json_loss_and_jitter():
    out = parse("iperf3", json.dumps(UDP_JSON))
    assert out["protocol"] == "UDP" and out["complete"] is True
    assert out["jitter_ms"] == 0.012 and out["lost_percent"] == 0.33 and out["lost_packets"] == 3
    assert out["sent_gbitps"] == pytest.approx(0.001048576)


def test_udp_text_loss_and_jitter():
    out = parse("iperf3", UDP_TEXT)
    assert out["protocol"] == "UDP" and out["complete"] is True
    assert out["intervals"][0]["datagrams"] == 91 and "retransmits" not in out["intervals"][0]
    assert out["jitter_ms"] == pytest.approx(0.012) and out["lost_packets"] == 3
    assert out["lost_percent"] == pytest.approx(0.33)
    assert out["received_gbitps"] == pytest.approx(0.00104)


def test_text_client_error_line():
    with pytest.raises(ParseError, match="unable to connect"):
        parse("iperf3", "iperf3: error - unable to connect to server: Connection refused\n")


def test_text_run_cut_before_summary_is_incomplete():
    out = parse("iperf3", UDP_TEXT.split("- - -")[0])
    assert out["complete"] is False and len(out["intervals"]) == 1


@pytest.mark.parametrize("text", ["", "{", '{"start": {', "[1, 2]", '{"foo": 1}', "{" * 5000])
def test_broken_json_raises_parse_error(text):
    with pytest.raises(ParseError):
        parse("iperf3", text)


def test_an_overflowing_number_is_none_never_infinity():
    # A swapped-in 1e309 decodes to inf in Python; parse() output must stay strict JSON (None instead).
    text = read_corpus("iperf3", "iperf3-3.9-J-tcp-10s-omit3-retransmits-crlf.json")
    broken = re.sub(r'"remote_port":(\s*)\d+', r'"remote_port":\g<1>1e309', text, count=1)
    assert broken != text
    json.dumps(parse("iperf3", broken), allow_nan=False)
