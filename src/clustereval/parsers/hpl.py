"""Parser for HPL (HPLinpack 2.1-2.3 reference output and NVIDIA's HPL-NVIDIA 1.0 / NGC hpc-benchmarks).

Reads the banner, the parameter block (``N :``, ``NB :``, ``P :``, ``Q :`` ...), the scaled-residual
threshold, every result row (``WR03L2L2  72000  288  1  2  111.21  2.238e+03``) with the residual check
that follows it (``||Ax-b||_oo/(...)= 0.0029328 ...... PASSED``), the ``Finished N tests`` summary and
``End of Tests.``. HPL-NVIDIA extras: ``!!!! WARNING:`` monitor lines (GPU clock/temperature/power/PCIe,
GPU_FP below expectation) are listed under ``gpu_warnings``; ``Prog=`` / ``Column=`` progress lines are
counted. Gflops are GFLOP/s as printed (``gflops``); time is seconds (``time_s``).
"""

from __future__ import annotations

import re
from typing import Any

from clustereval.parsers import register
from clustereval.parsers._common import result, to_float, to_int
from clustereval.parsers.errors import ParseError

TOOL = "hpl"

_ROW = re.compile(r"^(W[RC]\w+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+(?:[eE][+-]?\d+)?)\s*$")
_RESIDUAL = re.compile(r"^\|\|Ax-b\|\|_oo.*=\s*([\d.eE+-]+)\s*\.+\s*(PASSED|FAILED)\b")
_PARAM = re.compile(r"^(N|NB|PMAP|P|Q|PFACT|NBMIN|NDIV|RFACT|BCAST|DEPTH|SWAP|L1|U|EQUIL|ALIGN)\s*:\s*(.*?)\s*$")
_THRESHOLD = re.compile(r"scaled residuals are less than\s+([\d.]+)")
_EPS = re.compile(r"machine precision \(eps\) is taken to be\s+([\d.eE+-]+)")
_FINISHED = re.compile(r"^Finished\s+(\d+)\s+tests")
_COUNTS = re.compile(r"^(\d+)\s+tests\s+(completed and passed|completed and failed|skipped)")
_GPU_MONITOR = re.compile(r"GPU\s+([0-9a-fA-F:.]+)\s+Clock:\s*(\d+)\s*MHz\s+Temp:\s*(\d+)\s*C\s+Power:\s*(\d+)\s*W"
                          r"(?:\s+PCIe\s+gen\s*(\d+)\s+x(\d+))?")


@register("hpl")
def parse(text: str) -> dict[str, Any]:
    """Result rows (N, NB, P, Q, time, Gflops, residual and its check) from HPL output."""
    if not text or not text.strip():
        raise ParseError("hpl: the output is empty")
    rows: list[dict[str, Any]] = []
    params: dict[str, str] = {}
    warnings: list[str] = []
    gpu_warnings: list[dict[str, Any]] = []
    info: dict[str, Any] = {"hpl_version": None, "variant": None, "threshold": None, "eps": None}
    summary: dict[str, int | None] = {"finished": None, "passed": None, "failed": None, "skipped": None}
    ended = False
    progress = 0
    for raw in text.split("\n"):
        line = raw.strip()
        if not line:
            continue
        match = _ROW.match(line)
        if match:
            rows.append({"tv": match.group(1), "n": int(match.group(2)), "nb": int(match.group(3)),
                         "p": int(match.group(4)), "q": int(match.group(5)), "time_s": to_float(match.group(6)),
                         "gflops": to_float(match.group(7)), "residual": None, "residual_passed": None})
            continue
        match = _RESIDUAL.match(line)
        if match:
            target = next((r for r in reversed(rows) if r["residual"] is None), None)
            if target is None:
                warnings.append(f"residual check without a result row: {line[:120]!r}")
            else:
                target["residual"] = to_float(match.group(1))
                target["residual_passed"] = match.group(2) == "PASSED"
            continue
        if line.startswith(("Prog=", "Column=")):
            progress += 1
            continue
        if line.startswith("!!!! WARNING"):
            monitor = _GPU_MONITOR.search(line)
            entry: dict[str, Any] = {"message": re.sub(r"\s+", " ", line)}
            if monitor:
                entry.update(bus_id=monitor.group(1), clock_mhz=int(monitor.group(2)),
                             temp_c=int(monitor.group(3)), power_w=int(monitor.group(4)),
                             pcie_gen=to_int(monitor.group(5)), pcie_width=to_int(monitor.group(6)))
            rank = re.search(r"RANK:\s*(\d+)", line, re.IGNORECASE)
            entry["rank"] = int(rank.group(1)) if rank else None
            bus = re.search(r"GPU:?\s+([0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])", line)
            entry.setdefault("bus_id", bus.group(1) if bus else None)
            gpu_warnings.append(entry)
            continue
        match = re.match(r"^HPLinpack\s+(\S+)", line)
        if match:
            info["hpl_version"] = match.group(1)
            continue
        match = re.match(r"^(HPL-\S+)\s+(\S+)", line)
        if match:
            info["variant"] = f"{match.group(1)} {match.group(2)}"
            continue
        match = _PARAM.match(line)
        if match:
            # the explanation block ("N : The order of ...") comes first; the values used come later
            params[match.group(1)] = match.group(2)
            continue
        match = _THRESHOLD.search(line)
        if match:
            info["threshold"] = to_float(match.group(1))
            continue
        match = _EPS.search(line)
        if match:
            info["eps"] = to_float(match.group(1))
            continue
        match = _FINISHED.match(line)
        if match:
            summary["finished"] = int(match.group(1))
            continue
        match = _COUNTS.match(line)
        if match:
            key = {"completed and passed": "passed", "completed and failed": "failed", "skipped": "skipped"}
            summary[key[match.group(2)]] = int(match.group(1))
            continue
        if line.startswith("End of Tests"):
            ended = True

    if not rows:
        if "HPLinpack" in text or "HPL-" in text:
            raise ParseError("hpl: the banner is there but no result row (T/V N NB P Q Time Gflops) was "
                             "printed: the run was cut short or is still running")
        raise ParseError("hpl: no HPL banner or result row found")
    missing_residual = [r["tv"] for r in rows if r["residual_passed"] is None]
    if missing_residual:
        warnings.append(f"{len(missing_residual)} result row(s) without a residual check (cut short?)")
    if not ended:
        warnings.append("no 'End of Tests.' line: the output was cut short")
    complete = ended and not missing_residual
    checked = [r["residual_passed"] for r in rows if r["residual_passed"] is not None]
    best = max(rows, key=lambda r: r["gflops"] or 0.0)
    parameters = {key.lower(): (to_int(value) if key in ("N", "NB", "P", "Q", "NBMIN", "NDIV", "DEPTH")
                                and to_int(value) is not None else value) for key, value in params.items()}
    return result(TOOL, "nvidia" if info["variant"] else "text", complete=complete, warnings=warnings,
                  **info, parameters=parameters, rows=rows, best_gflops=best["gflops"],
                  best_row=best, all_residuals_passed=(all(checked) if checked else None),
                  tests_finished=summary["finished"], tests_passed=summary["passed"],
                  tests_failed=summary["failed"], tests_skipped=summary["skipped"],
                  gpu_warnings=gpu_warnings, progress_lines=progress, gflops_unit="Gflops")
