"""When two probes see one fact differently: which reading a check believes, why, and the words saying so.

A node answers the same question through several interfaces (the CUDA toolkit a non-login shell finds and the
one a login shell finds; the GPUs the driver lists and the GPUs Slurm declares). Where they disagree, a check
must not quietly pick one: its summary names both readings and the one its verdict rests on, and its evidence
keeps every reading (``agreement``) so the report can show it.
"""

from __future__ import annotations

import json
from typing import Any


def reconcile(what: str, seen: dict[str, Any], believed: str, why: str) -> tuple[str, dict[str, Any]]:
    """``(note, evidence)`` for the readings ``seen`` (``{source: value}``, None where a source saw nothing).

    The note is empty when the readings agree; otherwise it says what each source saw, which one the verdict
    believes (``believed``, a key of ``seen``) and ``why``.
    """
    if believed not in seen:
        raise ValueError(f"believed source {believed!r} is not one of the readings {sorted(seen)}")
    readings = {source: value for source, value in seen.items() if value is not None}
    evidence: dict[str, Any] = {"seen": seen, "believed": believed}
    if len({json.dumps(v, sort_keys=True, default=str) for v in readings.values()}) <= 1:
        return "", evidence
    evidence["why"] = why
    others = ", ".join(f"{source} sees {value}" for source, value in readings.items() if source != believed)
    return (f"{what} seen differently: {others}, while {believed} sees {seen[believed]}; "
            f"believed: {believed} ({why})"), evidence
