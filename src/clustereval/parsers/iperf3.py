"""Parser for iperf3 (3.1-3.18) client output, JSON (``-J``) and the default text report, TCP and UDP.

JSON: ``start`` (version, hosts, test_start), ``intervals`` and ``end`` (``sum_sent``/``sum_received``
for TCP, ``sum`` with jitter and loss for UDP, ``sum_*_bidir_reverse`` for ``--bidir``, cpu utilisation,
congestion control). Junk before the opening brace (a TTY's ``^C`` echo) is skipped with a warning.
A document carrying
iperf3's own ``"error"`` key is understood: it gives ``complete: False`` with the error and whatever figures
were measured before it.

Text: the interval table (``Bitrate`` or the older ``Bandwidth`` header, ``Retr``/``Cwnd`` columns, UDP
``Jitter``/``Lost/Total``), ``(omitted)`` rows, ``[SUM]`` rows, the sender/receiver summary and
``iperf Done.``; ``iperf3: error - ...`` lines.

Rates are normalised to ``_gbitps`` (iperf3 bit rates are decimal: 1 Mbit = 10^6 bits); byte counts as
printed in text use iperf3's binary prefixes (1 MByte = 2^20 bytes).
"""

from __future__ import annotations

import json
import re
from typing import Any

from clustereval.parsers import register
from clustereval.parsers._common import result, to_float, to_int
from clustereval.parsers.errors import ParseError

_BIT_PREFIX = {"": 1.0, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}
_BYTE_PREFIX = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}
_ROW = re.compile(
    r"^\[\s*(?P<id>\d+|SUM)\]\s*(?:\[(?P<dir>[A-Z-]+)\]\s*)?(?P<start>[\d.]+)-\s*(?P<end>[\d.]+)\s+sec\s+"
    r"(?P<xfer>[\d.]+)\s+(?P<xunit>[KMGT]?)Bytes\s+(?P<rate>[\d.]+)\s+(?P<runit>[KMGT]?)bits/sec"
    r"(?P<rest>.*)$"
)
_UDP_TAIL = re.compile(r"(?P<jitter>[\d.]+)\s+ms\s+(?P<lost>-?\d+)/(?P<total>\d+)\s+\((?P<pct>[-\d.e+]+)%\)")
_CONNECT = re.compile(r"^Connecting to host (\S+?),? port (\d+)")
_LOCAL = re.compile(r"^\[\s*\d+\]\s+local (\S+) port (\d+) connected (?:to|with) (\S+) port (\d+)")


def _gbit(bits_per_second: Any) -> float | None:
    value = to_float(str(bits_per_second)) if bits_per_second is not None else None
    return None if value is None else value / 1e9


def _summary(block: Any) -> dict[str, Any] | None:
    """One ``end`` sum block with the rate in Gbit/s and UDP loss figures when present."""
    if not isinstance(block, dict) or not block:
        return None
    out: dict[str, Any] = {
        "seconds": to_float(str(block.get("seconds"))) if block.get("seconds") is not None else None,
        "bytes": to_int(str(block.get("bytes"))) if block.get("bytes") is not None else None,
        "gbitps": _gbit(block.get("bits_per_second")),
        "bits_per_second": block.get("bits_per_second"),
    }
    for key in ("retransmits", "jitter_ms", "lost_packets", "packets", "lost_percent", "out_of_order"):
        if key in block:
            out[key] = block[key]
    return out


def _parse_json(text: str, start: int) -> dict[str, Any]:
    warnings: list[str] = []
    if start > 0:
        junk = text[:start].strip()[:40]
        warnings.append(f"ignored {start} character(s) before the JSON document: {junk!r}")
    try:
        doc, end = json.JSONDecoder().raw_decode(text, start)
    except (ValueError, RecursionError) as exc:
        raise ParseError(f"iperf3: the -J output is not valid JSON (cut off or corrupted): {exc}") from None
    if text[end:].strip():
        warnings.append("ignored text after the JSON document")
    if not isinstance(doc, dict):
        raise ParseError("iperf3: the JSON document is not an object; not iperf3 -J output")
    if not any(k in doc for k in ("start", "end", "intervals", "error")):
        raise ParseError("iperf3: JSON without start/intervals/end/error keys; not iperf3 -J output")
    start_block = doc.get("start") if isinstance(doc.get("start"), dict) else {}
    test = start_block.get("test_start") if isinstance(start_block.get("test_start"), dict) else {}
    connected = start_block.get("connected") if isinstance(start_block.get("connected"), list) else []
    first = connected[0] if connected and isinstance(connected[0], dict) else {}
    end = doc.get("end") if isinstance(doc.get("end"), dict) else {}
    sent = _summary(end.get("sum_sent"))
    received = _summary(end.get("sum_received"))
    udp_sum = _summary(end.get("sum"))
    protocol = test.get("protocol")
    intervals: list[dict[str, Any]] = []
    raw_intervals = doc.get("intervals") if isinstance(doc.get("intervals"), list) else []
    for item in raw_intervals:
        block = item.get("sum") if isinstance(item, dict) else None
        if not isinstance(block, dict):
            continue
        intervals.append({
            "start": block.get("start"), "end": block.get("end"), "bytes": block.get("bytes"),
            "gbitps": _gbit(block.get("bits_per_second")), "retransmits": block.get("retransmits"),
            "omitted": bool(block.get("omitted", False)),
        })
    cpu = end.get("cpu_utilization_percent") if isinstance(end.get("cpu_utilization_percent"), dict) else {}
    error = doc.get("error") if isinstance(doc.get("error"), str) else None
    loss_block = udp_sum or received or {}
    figures = sent or received or udp_sum
    if error is None and figures is None:
        warnings.append("no end summary: the run stopped before iperf3 printed its totals")
    return result(
        "iperf3", "json",
        complete=error is None and figures is not None,
        warnings=warnings,
        version=start_block.get("version"),
        system_info=start_block.get("system_info"),
        protocol=protocol,
        num_streams=test.get("num_streams"),
        duration_s=test.get("duration"),
        reverse=bool(test.get("reverse")) if "reverse" in test else None,
        local_host=first.get("local_host"),
        remote_host=first.get("remote_host"),
        remote_port=first.get("remote_port"),
        sum_sent=sent,
        sum_received=received,
        sum=udp_sum,
        sum_sent_bidir_reverse=_summary(end.get("sum_sent_bidir_reverse")),
        sum_received_bidir_reverse=_summary(end.get("sum_received_bidir_reverse")),
        sent_gbitps=(sent or udp_sum or {}).get("gbitps"),
        received_gbitps=(received or {}).get("gbitps"),
        retransmits=(sent or {}).get("retransmits"),
        jitter_ms=loss_block.get("jitter_ms"),
        lost_packets=loss_block.get("lost_packets"),
        lost_percent=loss_block.get("lost_percent"),
        intervals=intervals,
        cpu_host_total_pct=cpu.get("host_total"),
        cpu_remote_total_pct=cpu.get("remote_total"),
        sender_congestion=end.get("sender_tcp_congestion"),
        receiver_congestion=end.get("receiver_tcp_congestion"),
        error=error,
    )


def _parse_text(text: str) -> dict[str, Any]:
    warnings: list[str] = []
    intervals: list[dict[str, Any]] = []
    summaries: dict[str, dict[str, Any]] = {}
    errors: list[str] = []
    protocol = None
    remote_host = remote_port = local_host = None
    done = False
    stream_ids: set[str] = set()
    for raw in text.split("\n"):
        line = raw.strip()
        if not line:
            continue
        match = _ROW.match(line)
        if match:
            rest = match.group("rest")
            rate = to_float(match.group("rate"))
            row: dict[str, Any] = {
                "id": match.group("id"),
                "start": to_float(match.group("start")), "end": to_float(match.group("end")),
                "bytes": int((to_float(match.group("xfer")) or 0) * _BYTE_PREFIX[match.group("xunit")]),
                "gbitps": None if rate is None else rate * _BIT_PREFIX[match.group("runit")] / 1e9,
                "bitrate": f"{match.group('rate')} {match.group('runit')}bits/sec",
                "omitted": "(omitted)" in rest,
            }
            tokens = rest.replace("(omitted)", "").split()
            udp = _UDP_TAIL.search(rest)
            if udp:
                protocol = "UDP"
                row.update(jitter_ms=to_float(udp.group("jitter")), lost_packets=to_int(udp.group("lost")),
                           packets=to_int(udp.group("total")), lost_percent=to_float(udp.group("pct")))
            elif tokens and to_int(tokens[0]) is not None:
                if protocol == "UDP":
                    row["datagrams"] = to_int(tokens[0])
                else:
                    protocol = "TCP"
                    row["retransmits"] = to_int(tokens[0])
            role = next((t for t in ("sender", "receiver") if tokens and tokens[-1] == t), None)
            if match.group("id") != "SUM":
                stream_ids.add(match.group("id"))
            if role:
                row["role"] = role
                # a [SUM] line is the total over parallel streams and wins over any single stream
                if match.group("id") == "SUM" or role not in summaries or summaries[role]["id"] != "SUM":
                    summaries[role] = row
            else:
                intervals.append(row)
            continue
        if line.startswith("iperf Done"):
            done = True
            continue
        if "error" in line.lower() and line.lower().startswith("iperf"):
            errors.append(line)
            continue
        match = _CONNECT.match(line)
        if match:
            remote_host, remote_port = match.group(1), to_int(match.group(2))
            continue
        match = _LOCAL.match(line)
        if match:
            local_host = match.group(1)
            continue
        if line.startswith("[ ID]") or set(line) <= {"-", " "}:
            if "Jitter" in line or "Datagrams" in line:
                protocol = "UDP"
            continue
        if line.startswith(("Reverse mode", "Accepted connection", "Server listening", "Starting Test",
                            "Test Complete", "Test Completed")):
            continue
        warnings.append(f"unrecognised line: {line[:160]}")
    if not intervals and not summaries:
        preview = text.strip()[:60]
        reason = errors[0] if errors else f"no interval or summary rows in the output (it begins {preview!r})"
        raise ParseError(f"iperf3: no result found: {reason}")
    sender = summaries.get("sender")
    receiver = summaries.get("receiver")
    return result(
        "iperf3", "text",
        complete=bool(sender or receiver) and not errors,
        warnings=warnings,
        protocol=protocol,
        num_streams=len(stream_ids) or None,
        local_host=local_host,
        remote_host=remote_host,
        remote_port=remote_port,
        intervals=intervals,
        sum_sent=sender,
        sum_received=receiver,
        sent_gbitps=(sender or {}).get("gbitps"),
        received_gbitps=(receiver or {}).get("gbitps"),
        retransmits=(sender or {}).get("retransmits"),
        jitter_ms=(receiver or sender or {}).get("jitter_ms"),
        lost_packets=(receiver or sender or {}).get("lost_packets"),
        lost_percent=(receiver or sender or {}).get("lost_percent"),
        done=done,
        error=errors[0] if errors else None,
    )


@register("iperf3")
def parse(text: str) -> dict[str, Any]:
    """Parse iperf3 output; JSON (``-J``) or text is detected from the content."""
    if not text or not text.strip():
        raise ParseError("iperf3: the output is empty")
    brace = text.find("{")
    head = text[:brace] if brace >= 0 else text
    if brace >= 0 and len(head.strip()) <= 16 and "sec" not in head:
        return _parse_json(text, brace)
    return _parse_text(text)
