"""Parser for the burn-in's error-counter sampler (``__clustereval_burnin_counters_cmd``, tool
``burnin-counters``).

The contract (this docstring is the specification): the sampler prints, every interval,

* ``=== sample <ISO timestamp>``, then
* ``ib <device> <port> <counter> <value>``: one per ``/sys/class/infiniband/*/ports/*/counters/*err*`` file;
* ``--- nvlink`` followed by the verbatim output of ``nvidia-smi nvlink -e`` (parsed with the
  ``nvidia-smi-nvlink`` parser), up to the next ``===`` line;
* ``=== absent <reason>`` once when the node has neither.

Returns ``rows`` (``{timestamp, source, device, counter, value}``, source ``ib`` or ``nvlink``; an NVLink
device is ``gpu<i>/link<l>``) and ``absent`` (the reasons). Raises :class:`ParseError` when nothing the
contract knows is in the text.
"""

from __future__ import annotations

from typing import Any

from clustereval.parsers import nvidia_smi_nvlink, register
from clustereval.parsers._common import result, to_int
from clustereval.parsers.errors import ParseError


def _nvlink_rows(block: list[str], stamp: str | None, warnings: list[str]) -> list[dict[str, Any]]:
    text = "\n".join(block).strip()
    if not text:
        return []
    try:
        parsed = nvidia_smi_nvlink.parse(text + "\n")
    except ParseError as exc:
        warnings.append(f"nvlink block not understood: {exc}")
        return []
    rows = []
    for gpu in parsed.get("gpus") or []:
        for link, counters in sorted((gpu.get("counters") or {}).items()):
            for counter, value in counters.items():
                if "error" in counter.lower() or "replay" in counter.lower() or "recovery" in counter.lower():
                    rows.append({"timestamp": stamp, "source": "nvlink", "device": f"gpu{gpu.get('index')}/link{link}",
                                 "counter": counter, "value": value})
    return rows


@register("burnin-counters")
def parse(text: str) -> dict[str, Any]:
    if not text or not text.strip():
        raise ParseError("burnin-counters: the output is empty")
    rows: list[dict[str, Any]] = []
    warnings: list[str] = []
    absent: list[str] = []
    stamp: str | None = None
    block: list[str] | None = None
    known = False
    for line in [*text.splitlines(), "=== end"]:
        if line.startswith("==="):
            if block is not None:
                rows += _nvlink_rows(block, stamp, warnings)
                block = None
            word, _, rest = line[3:].strip().partition(" ")
            if word == "sample":
                stamp, known = rest.strip(), True
            elif word == "absent":
                absent.append(rest.strip())
                known = True
        elif block is not None:
            block.append(line)
        elif line.startswith("--- nvlink"):
            block, known = [], True
        elif line.startswith("ib "):
            parts = line.split()
            value = to_int(parts[-1]) if len(parts) == 5 else None
            if value is None:
                warnings.append(f"ib counter line not understood: {line[:160]}")
                continue
            rows.append({"timestamp": stamp, "source": "ib", "device": f"{parts[1]}/{parts[2]}", "counter": parts[3],
                         "value": value})
            known = True
        elif line.strip():
            warnings.append(f"line the contract does not know: {line[:160]}")
    if not known:
        raise ParseError("burnin-counters: no sample, counter or absent line in the output")
    return result("burnin-counters", "text", complete=True, warnings=warnings, rows=rows, absent=absent)
