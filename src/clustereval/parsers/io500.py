"""Parser for IO500 benchmark output (io500 releases 2019 to 2025 and the ISC22 ``io500-isc22_v1`` set).

Understands the ``[RESULT]`` lines of the console output and of ``result_summary.txt``
(``[RESULT]       ior-easy-write       10.608264 GiB/s : time 35.013 seconds [INVALID]``), the blank-tag
rows (``[      ] timestamp``, optional ``ior-rnd4K-easy-read``), the score line in both spellings
(``[SCORE ] Bandwidth 4.76 GiB/s : IOPS 65.7 kiops : TOTAL 17.69 [INVALID]`` and
``[SCORE INVALID] Bandwidth ... GB/s ...``), the ``IO500 version`` header, and the INI-like
``result.txt`` (``[find]`` sections of ``key = value``).

Each phase: ``name``, ``value``, ``unit`` as printed, ``bw_gibps`` (for GiB/s and GB/s rows; io500 computes
these in GiB/s whichever way the release spells it) or ``kiops``, ``time_s``, ``invalid``, ``scored``
(False for the blank-tag rows). Score: ``score_bandwidth_gibps``, ``score_iops_kiops``, ``score_total``,
``score_valid``. ``complete`` is False when there is no score line (or, for result.txt, when the capture
was snipped).
"""

from __future__ import annotations

import re
from typing import Any

from clustereval.parsers import register
from clustereval.parsers._common import result, to_float
from clustereval.parsers.errors import ParseError

_PHASE = re.compile(r"^\[(?P<tag>[A-Z ]*)\]\s+(?P<name>\S+)\s+(?P<value>\S+)\s+(?P<unit>\S+)\s*:\s*time\s+"
                    r"(?P<time>\S+)\s+seconds?(?P<rest>.*)$")
_SCORE = re.compile(r"^\[SCORE\s*(?P<tag>[A-Z]*)\s*\]\s+Bandwidth\s+(?P<bw>\S+)\s+(?P<bw_unit>\S+)\s*:"
                    r"\s*IOPS\s+"
                    r"(?P<iops>\S+)\s+(?P<iops_unit>\S+)\s*:\s*TOTAL\s+(?P<total>\S+)(?P<rest>.*)$")
_SECTION = re.compile(r"^\[(?P<name>[\w\-.]+)\]\s*$")


@register("io500")
def parse(text: str) -> dict[str, Any]:
    """Parse IO500 output (see the module docstring)."""
    if not text or not text.strip():
        raise ParseError("the io500 output is empty")
    warnings: list[str] = []
    phases: list[dict[str, Any]] = []
    sections: dict[str, dict[str, str]] = {}
    section: dict[str, str] | None = None
    score: dict[str, Any] = {}
    version = None
    snipped = False
    for raw in text.split("\n"):
        line = raw.strip()
        if not line:
            continue
        if line.startswith("IO500 version"):
            version = line[len("IO500 version"):].strip()
            continue
        if re.fullmatch(r"-+\s*snip\s*-+", line, re.IGNORECASE):
            snipped = True
            continue
        match = _SCORE.match(line)
        if match:
            invalid = match.group("tag") == "INVALID" or "INVALID" in match.group("rest")
            score = {"score_bandwidth_gibps": to_float(match.group("bw")),
                     "score_bw_unit": match.group("bw_unit"),
                     "score_iops_kiops": to_float(match.group("iops")),
                     "score_total": to_float(match.group("total")),
                     "score_valid": not invalid}
            continue
        match = _PHASE.match(line)
        if match:
            unit = match.group("unit")
            value = to_float(match.group("value"))
            phase = {"name": match.group("name"), "value": value, "unit": unit,
                     "bw_gibps": value if unit in ("GiB/s", "GB/s") else None,
                     "kiops": value if unit.lower() == "kiops" else None,
                     "time_s": to_float(match.group("time")), "invalid": "INVALID" in match.group("rest"),
                     "scored": match.group("tag").strip() == "RESULT"}
            phases.append(phase)
            continue
        match = _SECTION.match(line)
        if match:
            section = sections.setdefault(match.group("name"), {})
            continue
        if section is not None and "=" in line:
            key, _, value = line.partition("=")
            section[key.strip()] = value.strip()
            continue
        if line.startswith("[") or "ERROR" in line:
            warnings.append(f"line not understood: {line[:200]}")
    if not phases and not sections and not score:
        raise ParseError("no io500 [RESULT] lines, [SCORE] line or result.txt sections found: the run died "
                         "before the first phase finished, or this is not io500 output")
    if phases or score:
        complete = bool(score)
        if not score:
            warnings.append("no [SCORE] line: the run stopped before all phases finished")
        fmt = "summary"
    else:
        complete = not snipped
        fmt = "result_ini"
    if snipped:
        warnings.append("the capture was snipped ('-- snip --'): sections are missing")
        complete = False
    invalid = [p["name"] for p in phases if p["invalid"]]
    if invalid:
        warnings.append(f"phases marked [INVALID] by io500: {', '.join(invalid)}")
    return result("io500", fmt, complete=complete, warnings=warnings, version=version, phases=phases,
                  sections=sections, **score)
