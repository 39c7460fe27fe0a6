"""Parser for ``gpu_burn`` (wilicc/gpu-burn, 2019-2025 master builds; compare.ptx and compare.fatbin).

Reads the GPU list (``GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-...)``), the per-device setup lines
(DOUBLES/FLOATS, Tensor Cores, memory used), every progress report (single- and multi-GPU layouts,
including reports glued onto one line when the terminal's carriage returns were lost) and the final
``Tested N GPUs: GPU n: OK|FAULTY`` verdict. Per GPU: ``gflops`` is the last reported rate,
``max_gflops`` the best one, ``errors`` the sum of the per-report error counts (gpu-burn prints the
errors found since the previous report) and ``ok``/``verdict`` come from the final block.
"""

from __future__ import annotations

import re
from typing import Any

from clustereval.parsers import register
from clustereval.parsers._common import result, to_float, to_int
from clustereval.parsers.errors import ParseError

TOOL = "gpu-burn"

# More GPUs than any node carries means a corrupted number, not a machine to allocate rows for.
MAX_GPUS = 4096
_GPU = re.compile(r"^GPU (\d+): (.+?) \(UUID: ([^)]+)\)\s*$")
_INIT = re.compile(r"Initialized device (\d+) with (\d+) MB of memory \((\d+) MB available, "
                   r"using (\d+) MB of it\), using (DOUBLES|FLOATS)(, using Tensor Cores)?")
_PROGRESS = re.compile(r"(\d+(?:\.\d+)?)%\s+proc'd:")
_PROC = re.compile(r"(-?\d+)\s*\((-?[\d.]+)\s*Gflop/s\)")
_VERDICT = re.compile(r"^\s*GPU (\d+): (OK|FAULTY)\b")
_TESTED = re.compile(r"^\s*Tested (\d+) GPUs?:")
_KNOWN = re.compile(r"^(Results are \d+ bytes each|Freed memory for dev|Uninitted cublas|done$|"
                    r"cuInit returned|Killing processes|Summary at:|Using compare file:|Burning for|"
                    r"Run length|Initialized device)")


def _parse_report(chunk: str) -> dict[str, Any] | None:
    """One progress report: ``50.0%  proc'd: 2261 (7150 Gflop/s) - ... errors: 0 - 0 temps: 38 C - 36 C``."""
    head = _PROGRESS.match(chunk)
    if not head:
        return None
    body = chunk[head.end():]
    procs_part, _, rest = body.partition("errors:")
    errors_part, _, temps_part = rest.partition("temps:")
    procs = _PROC.findall(procs_part)
    errors = ([to_int(tok.replace("(WARNING!)", "").strip()) for tok in errors_part.split(" - ")]
              if rest else [])
    temps = [to_int(t) for t in re.findall(r"(-?\d+)\s*C\b", temps_part)]
    return {"percent": to_float(head.group(1)),
            "iterations": [int(p[0]) for p in procs], "gflops": [to_float(p[1]) for p in procs],
            "errors": errors, "temps_c": temps, "warning": "WARNING" in errors_part}


@register("gpu-burn")
def parse(text: str) -> dict[str, Any]:
    """Per-GPU GFLOPS, errors and OK/FAULTY verdict from gpu_burn output."""
    if not text or not text.strip():
        raise ParseError("gpu-burn: the output is empty")
    gpus: dict[int, dict[str, Any]] = {}
    reports: list[dict[str, Any]] = []
    verdicts: dict[int, str] = {}
    tested = None
    warnings: list[str] = []
    precision = tensor_cores = duration = compare_file = None
    killed = None

    def gpu(index: int) -> dict[str, Any]:
        return gpus.setdefault(index, {"index": index, "name": None, "uuid": None})

    for raw in text.split("\n"):
        line = raw.strip()
        if not line:
            continue
        match = _GPU.match(line)
        if match and not _VERDICT.match(line):
            entry = gpu(int(match.group(1)))
            entry["name"], entry["uuid"] = match.group(2).strip(), match.group(3).strip()
            continue
        for init in _INIT.finditer(line):
            entry = gpu(int(init.group(1)))
            entry.update(memory_total_mb=int(init.group(2)), memory_available_mb=int(init.group(3)),
                         memory_used_mb=int(init.group(4)))
            precision = init.group(5).lower()
            tensor_cores = bool(init.group(6))
        starts = [m.start() for m in _PROGRESS.finditer(line)]
        if starts:
            for begin, end in zip(starts, [*starts[1:], len(line)], strict=True):
                report = _parse_report(line[begin:end])
                if report:
                    reports.append(report)
            continue
        if line.startswith("Burning for"):
            duration = to_int(re.sub(r"\D", "", line.split("for", 1)[1]) or None)
        elif line.startswith("Using compare file:"):
            compare_file = line.split(":", 1)[1].strip()
        elif line.startswith("Killing processes"):
            killed = line.split(" Initialized device", 1)[0]
        tested_match = _TESTED.match(line)
        if tested_match:
            count = int(tested_match.group(1))
            if count > MAX_GPUS:
                warnings.append(f"implausible GPU count ignored: {line[:80]!r}")
            else:
                tested = count
            continue
        verdict = _VERDICT.match(line)
        if verdict and tested is not None and int(verdict.group(1)) < MAX_GPUS:
            verdicts[int(verdict.group(1))] = verdict.group(2)
            continue
        if not _KNOWN.search(line) and len(warnings) < 20:
            warnings.append(f"line not understood: {line[:160]!r}")

    if not gpus and not reports and tested is None:
        raise ParseError("gpu-burn: no GPU list, progress report or 'Tested N GPUs' verdict found")

    width = max([len(r["gflops"]) for r in reports] + [len(gpus), tested or 0])
    for index in range(width):
        gpu(index)
    for index, entry in gpus.items():
        series = [r["gflops"][index] for r in reports if index < len(r["gflops"])]
        errs = [r["errors"][index] for r in reports if index < len(r["errors"])]
        temps = [r["temps_c"][index] for r in reports if index < len(r["temps_c"])]
        iters = [r["iterations"][index] for r in reports if index < len(r["iterations"])]
        entry["gflops"] = series[-1] if series else None
        entry["max_gflops"] = max((g for g in series if g is not None), default=None)
        entry["iterations"] = iters[-1] if iters else None
        entry["errors"] = sum(e for e in errs if e is not None) if errs else None
        entry["errors_last_report"] = errs[-1] if errs else None
        entry["temp_c"] = temps[-1] if temps else None
        entry["max_temp_c"] = max((t for t in temps if t is not None), default=None)
        entry["verdict"] = verdicts.get(index)
        entry["ok"] = None if entry["verdict"] is None else entry["verdict"] == "OK"

    complete = tested is not None and len(verdicts) >= tested
    if tested is None:
        warnings.append("no 'Tested N GPUs' verdict block: the run was cut short or killed")
    elif len(verdicts) < tested:
        warnings.append(f"'Tested {tested} GPUs' but only {len(verdicts)} verdict lines follow")
    ordered = [gpus[i] for i in sorted(gpus)]
    faulty = [g["index"] for g in ordered if g["verdict"] == "FAULTY"]
    with_errors = [g["index"] for g in ordered if g["errors"]]
    all_ok = None if not complete else not faulty
    zero = [g["index"] for g in ordered if g["gflops"] == 0]
    if zero:
        warnings.append(f"GPUs {zero} reported 0 Gflop/s in the last progress report (no work done yet?)")
    return result(TOOL, "text", complete=complete, warnings=warnings,
                  gpus=ordered, gpu_count=len(ordered), tested_gpus=tested, all_ok=all_ok,
                  faulty_gpus=faulty, gpus_with_errors=with_errors, precision=precision,
                  tensor_cores=tensor_cores, duration_s=duration, compare_file=compare_file,
                  progress_percent=reports[-1]["percent"] if reports else None, reports=len(reports),
                  total_gflops=sum(g["gflops"] or 0.0 for g in ordered) if reports else None,
                  zero_gflops_gpus=zero, gflops_unit="Gflop/s", kill_line=killed)
