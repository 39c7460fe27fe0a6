"""Parser for ``mamf-finder.py`` (stas00/ml-engineering, "benchmark version: 2", 2024-2025).

Reads the header (command line, dtype, device properties, torch/CUDA/HIP versions), every per-shape line
(``  12 |  381.3(mean)  381.5(median)  387.7(max) @ 1024x1024x12288 | best: ...``) and the final summary
(``Tried N shapes => the best outcomes were:`` with mean/median/max TFLOPS and shape, ``geomean``,
``Elapsed time``). A run stopped with Ctrl-C still prints the summary of the shapes tried; it is
reported with ``interrupted: true`` and ``complete: false`` because the sweep did not finish.
"""

from __future__ import annotations

import re
from typing import Any

from clustereval.parsers import register
from clustereval.parsers._common import result, to_float
from clustereval.parsers.errors import ParseError

TOOL = "mamf-finder"

_ROW = re.compile(r"^\s*(\d+)\s*\|\s*([\d.]+)\(mean\)\s+([\d.]+)\(median\)\s+([\d.]+)\(max\)\s*@\s*"
                  r"(\d+)x(\d+)x(\d+)")
_BEST = re.compile(r"^(mean|median|max):\s*([\d.]+)\s*TFLOPS\s*@\s*(\d+)x(\d+)x(\d+)")
_TRIED = re.compile(r"^Tried\s+(\d+)\s+shapes")
_GEOMEAN = re.compile(r"^geomean:\s*([\d.]+)\s*TFLOPS for (\d+) shapes(?: in range: (.*))?$")
_DEVICE = re.compile(r"_CudaDeviceProperties\((.*)\)")


def _shape(m: str, n: str, k: str) -> dict[str, Any]:
    return {"shape": f"{m}x{n}x{k}", "m": int(m), "n": int(n), "k": int(k)}


@register("mamf-finder")
def parse(text: str) -> dict[str, Any]:
    """Maximum achievable matmul TFLOPS, the best shape and every measured shape."""
    if not text or not text.strip():
        raise ParseError("mamf-finder: the output is empty")
    rows: list[dict[str, Any]] = []
    best: dict[str, dict[str, Any]] = {}
    warnings: list[str] = []
    header: dict[str, Any] = {"dtype": None, "device_name": None, "torch_version": None, "cuda_version": None,
                              "hip_version": None, "benchmark_version": None, "command_line": None,
                              "started": None, "elapsed": None}
    device: dict[str, str] = {}
    tried = geomean = geomean_shapes = shape_range = None
    interrupted = False
    expect_command = False
    for raw in text.split("\n"):
        line = raw.strip()
        if not line:
            continue
        if expect_command:
            header["command_line"] = line
            expect_command = False
            continue
        row = _ROW.match(line)
        if row:
            rows.append({"index": int(row.group(1)), **_shape(row.group(5), row.group(6), row.group(7)),
                         "mean_tflops": to_float(row.group(2)), "median_tflops": to_float(row.group(3)),
                         "max_tflops": to_float(row.group(4))})
            continue
        found = _BEST.match(line)
        if found:
            best[found.group(1)] = {"tflops": to_float(found.group(2)),
                                    **_shape(found.group(3), found.group(4), found.group(5))}
            continue
        if _TRIED.match(line):
            tried = int(_TRIED.match(line).group(1))
            continue
        geo = _GEOMEAN.match(line)
        if geo:
            geomean, geomean_shapes, shape_range = to_float(geo.group(1)), int(geo.group(2)), geo.group(3)
            continue
        if "^C" in line or "KeyboardInterrupt" in line:
            interrupted = True
            continue
        dev = _DEVICE.search(line)
        if dev:
            for key, value in re.findall(r"(\w+)=('[^']*'|[^,]*)", dev.group(1)):
                device[key] = value.strip("'")
            header["device_name"] = device.get("name")
            continue
        if line.startswith("** Dtype:"):
            header["dtype"] = line.split(":", 1)[1].strip()
        elif line.startswith("** Command line:"):
            expect_command = True
        elif line.startswith("Benchmark started on"):
            header["started"] = line[len("Benchmark started on"):].strip()
        elif line.startswith("Elapsed time:"):
            header["elapsed"] = line.split(":", 1)[1].strip()
        elif line.startswith("benchmark version:"):
            header["benchmark_version"] = line.split(":", 1)[1].strip()
        elif line.startswith("torch="):
            header["torch_version"] = line.split("=", 1)[1].strip()
        elif re.match(r"^(hip|cuda)=", line):
            for key, value in re.findall(r"(hip|cuda)=([^,\s]+)", line):
                header[f"{key}_version"] = None if value == "None" else value

    if not rows and not best:
        raise ParseError("mamf-finder: no per-shape results and no 'best outcomes' summary found"
                         + (" (the run stopped during warm-up)" if "warmup" in text or "Warming up" in text
                            else ""))
    summary = bool(best)
    if not summary:
        warnings.append("no 'Tried N shapes => the best outcomes' summary: the run was cut short; "
                        "figures are taken from the per-shape lines")
        for stat in ("mean", "median", "max"):
            top = max(rows, key=lambda r, s=stat: r[f"{s}_tflops"] or 0.0)
            best[stat] = {"tflops": top[f"{stat}_tflops"],
                          **{key: top[key] for key in ("shape", "m", "n", "k")}}
    if interrupted:
        warnings.append("the sweep was interrupted (Ctrl-C); the summary covers only the shapes tried")
    if tried is not None and rows and tried != len(rows):
        warnings.append(f"summary says {tried} shapes but {len(rows)} per-shape lines were read")
    top = best.get("max") or {}
    return result(TOOL, "text", complete=summary and not interrupted, warnings=warnings, **header,
                  device=device or None, max_tflops=top.get("tflops"), best_shape=top.get("shape"),
                  best=best, mean_tflops=best.get("mean", {}).get("tflops"),
                  median_tflops=best.get("median", {}).get("tflops"), geomean_tflops=geomean,
                  geomean_shapes=geomean_shapes, shape_range=shape_range, shapes_tried=tried,
                  interrupted=interrupted, rows=rows, tflops_unit="TFLOPS")
