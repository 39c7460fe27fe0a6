"""Parser for the ``storage_tier_endurance`` probe (``checks/probes/storage.yml``): sustained mixed load on every
storage tier of a node, one fio JSON per interval.

Per tier the probe prints the tier discovery's lines (read with :func:`probe_storage_tiers.describe`), then per
interval ``--- interval PHASE CLIENTS INDEX INTERVAL_S``, fio's JSON and ``fio-exit: RC``. ``PHASE`` is
``seq_mixed`` (1 MiB sequential read/write) or ``rand_mixed`` (4 KiB random read/write).

Result: ``tiers``, each as the discovery describes it plus ``state`` ``measured`` (at least one interval),
``fio_failed`` (fio printed nothing readable) or the discovery's states, ``complete`` (false when the output ends
inside an interval: the intervals before it are kept), ``reason`` when cut short or not measured, and
``intervals``: one per interval with ``phase``, ``clients``, ``index``, ``interval_s``, ``t_s`` (the interval's
start from the phase's start), ``read_mbps``, ``write_mbps``, ``bw_mbps`` (their sum, 10^6 bytes/s), ``iops``
(read plus write), ``read_p99_us``, ``write_p99_us``, ``p99_us`` (the larger), ``error`` (fio's errno, 0 when
none) and ``fio_exit`` (None when fio printed no readable JSON: ``reason`` says why).
"""

from __future__ import annotations

import re
from typing import Any

from clustereval.parsers import fio, probe_storage_tiers, register
from clustereval.parsers._common import result, to_int
from clustereval.parsers.errors import ParseError

TOOL = "probe-storage-endurance"
INTERVAL = re.compile(r"^--- interval (?P<phase>[a-z_]+) (?P<clients>\d+) (?P<index>\d+) (?P<seconds>\d+)$")
MIB_TO_MB = 1.048576
P99 = "99.000000"


def _side(measured: dict[str, Any], direction: str) -> tuple[float, float, float | None]:
    side = (measured.get("jobs") or [{}])[0].get(direction) or {}
    p99 = (side.get("clat_percentiles_us") or {}).get(P99)
    return float(side.get("bw_mibps") or 0.0) * MIB_TO_MB, float(side.get("iops") or 0.0), p99


def _interval(header: re.Match[str], lines: list[str]) -> dict[str, Any]:
    seconds = int(header["seconds"])
    point: dict[str, Any] = {"phase": header["phase"], "clients": int(header["clients"]),
                             "index": int(header["index"]), "interval_s": seconds,
                             "t_s": int(header["index"]) * seconds, "fio_exit": None, "error": 0}
    exits = [line for line in lines if line.startswith("fio-exit: ")]
    point["fio_exit"] = to_int(exits[-1].split(": ", 1)[1]) if exits else None
    body = "\n".join(line for line in lines if not line.startswith("fio-exit: "))
    try:
        measured = fio.parse(body)
    except ParseError as exc:
        point["reason"] = f"fio printed no readable JSON (exit status {point['fio_exit']}): {exc}"
        return point
    (read_mbps, read_iops, read_p99), (write_mbps, write_iops, write_p99) = (_side(measured, "read"),
                                                                             _side(measured, "write"))
    job = (measured.get("jobs") or [{}])[0]
    p99s = [p for p in (read_p99, write_p99) if p is not None]
    point.update(read_mbps=round(read_mbps, 3), write_mbps=round(write_mbps, 3),
                 bw_mbps=round(read_mbps + write_mbps, 3), iops=round(read_iops + write_iops, 3),
                 read_p99_us=read_p99, write_p99_us=write_p99, p99_us=max(p99s) if p99s else None,
                 error=to_int(str(job.get("error") or 0)) or 0)
    return point


def _tier(name: str, path: str, lines: list[str]) -> dict[str, Any]:
    tier = {**probe_storage_tiers.describe(name, path, lines), "intervals": [], "complete": True}
    if tier["state"] != "mounted":
        tier["complete"] = tier["state"] != "truncated"
        return tier
    blocks: list[tuple[re.Match[str], list[str]]] = []
    for line in lines:
        header = INTERVAL.match(line.strip())
        if header:
            blocks.append((header, []))
        elif blocks:
            blocks[-1][1].append(line)
    for header, body in blocks:
        if not any(line.startswith("fio-exit: ") for line in body):
            # the last interval, cut short (Ctrl-C, the probe's timeout, a hung filesystem): the finished ones stay
            tier.update(complete=False, reason=f"the output ends inside interval {header['index']} of "
                                               f"{header['phase']} at {header['clients']} clients (cut short, "
                                               f"or fio hung)")
            break
        tier["intervals"].append(_interval(header, body))
    measured = [i for i in tier["intervals"] if "reason" not in i]
    if measured:
        tier["state"] = "measured"
    elif tier["complete"] and not blocks:
        tier.update(state="truncated", complete=False, reason="the probe's output ends before fio started")
    elif tier["complete"] or tier["intervals"]:
        tier.update(state="fio_failed", reason=next((i["reason"] for i in tier["intervals"]), None))
    else:
        tier["state"] = "truncated"
    return tier


@register(TOOL)
def parse(text: str) -> dict[str, Any]:
    tiers = [_tier(name, path, lines) for name, path, lines in probe_storage_tiers.sections(text)]
    if not tiers:
        raise ParseError("no '=== tier' section: the storage endurance probe printed nothing it measured")
    return result(TOOL, "text", complete=all(t["complete"] for t in tiers), tiers=tiers)
