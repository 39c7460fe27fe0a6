"""Parser for torchtitan training logs (torchtitan 2024-2026; native ``[titan]`` logger and the ezpz
``[ts][I][components/metrics:N:log]`` format).

Reads every metrics line ``step: N  loss: X  [grad_norm: G]  memory: M GiB(P%)  tps: T  tflops: F  mfu: U%``
into ``steps`` (``step``, ``loss``, ``grad_norm``, ``memory_gib``, ``memory_pct``, ``tps`` (tokens per
second per GPU, thousands separators removed), ``tflops``, ``mfu_pct``, ``timestamp`` as printed,
``rank``), and a ``summary`` (last step, final loss, means over the steps after the first (warm-up)
one, peak memory). ``complete`` is False when the log shows the run dying (watchdog, SIGTERM, Python
traceback, error-level lines, NCCL timeouts); ``finished`` says whether torchtitan logged
``Training completed``.
"""

from __future__ import annotations

import re
from statistics import fmean
from typing import Any

from clustereval.parsers import register
from clustereval.parsers._common import result, to_float
from clustereval.parsers.errors import ParseError

_STEP = re.compile(r"step:\s*(?P<step>\d+)\s+loss:\s*(?P<loss>\S+)")
_FIELDS = {
    "grad_norm": re.compile(r"grad_norm:\s*(\S+)"),
    "memory": re.compile(r"memory:\s*([\d.]+)\s*GiB\s*\(\s*([\d.]+)%\)"),
    "tps": re.compile(r"tps:\s*([\d,]+(?:\.\d+)?)"),
    "tflops": re.compile(r"tflops:\s*([\d.,]+)"),
    "mfu": re.compile(r"mfu:\s*([\d.]+)%"),
}
_TIMESTAMP = re.compile(r"(\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[,.]\d+)?)")
_RANK = re.compile(r"\[rank(\d+)\]")
_FAILURE = re.compile(r"Watchdog|SIGTERM|SIGKILL|Traceback \(most recent call last\)|\]\[E\]\[| - ERROR - |"
                      r"Watchdog caught collective operation timeout|ChildFailedError|CUDA out of memory|"
                      r"NCCL (?:error|timeout)", re.IGNORECASE)


def _step(line: str, match: re.Match[str]) -> dict[str, Any]:
    row: dict[str, Any] = {"step": int(match.group("step")), "loss": to_float(match.group("loss"))}
    grad = _FIELDS["grad_norm"].search(line)
    row["grad_norm"] = to_float(grad.group(1)) if grad else None
    memory = _FIELDS["memory"].search(line)
    row["memory_gib"] = to_float(memory.group(1)) if memory else None
    row["memory_pct"] = to_float(memory.group(2)) if memory else None
    tps = _FIELDS["tps"].search(line)
    row["tps"] = to_float(tps.group(1).replace(",", "")) if tps else None
    tflops = _FIELDS["tflops"].search(line)
    row["tflops"] = to_float(tflops.group(1).replace(",", "")) if tflops else None
    mfu = _FIELDS["mfu"].search(line)
    row["mfu_pct"] = to_float(mfu.group(1)) if mfu else None
    stamp = _TIMESTAMP.search(line)
    row["timestamp"] = stamp.group(1) if stamp else None
    rank = _RANK.search(line)
    row["rank"] = int(rank.group(1)) if rank else None
    return row


def _mean(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return round(fmean(present), 6) if present else None


@register("torchtitan")
def parse(text: str) -> dict[str, Any]:
    """Parse torchtitan training log lines (see the module docstring)."""
    if not text or not text.strip():
        raise ParseError("the torchtitan log is empty")
    steps: list[dict[str, Any]] = []
    failures: list[str] = []
    finished = False
    for line in text.split("\n"):
        match = _STEP.search(line)
        if match:
            steps.append(_step(line, match))
            continue
        if "Training completed" in line:
            finished = True
        elif _FAILURE.search(line):
            failures.append(line.strip()[:240])
    warnings = [f"failure in log: {f}" for f in failures]
    if not steps:
        reason = f"; the log shows {failures[-1]!r}" if failures else ""
        raise ParseError(f"no torchtitan 'step: N  loss: ...' metrics line found{reason}")
    steady = steps[1:] if len(steps) > 1 and steps[0]["step"] == 1 else steps
    memory = [s["memory_gib"] for s in steps if s["memory_gib"] is not None]
    summary = {"steps_logged": len(steps), "last_step": steps[-1]["step"], "final_loss": steps[-1]["loss"],
               "tps_mean": _mean([s["tps"] for s in steady]),
               "tflops_mean": _mean([s["tflops"] for s in steady]),
               "mfu_pct_mean": _mean([s["mfu_pct"] for s in steady]),
               "memory_peak_gib": max(memory) if memory else None,
               "warmup_step_excluded": steady is not steps}
    return result("torchtitan", "log", complete=not failures, warnings=warnings, steps=steps, summary=summary,
                  finished=finished)
