"""Parser for AMD TransferBench 1.0x console output (ROCm 5.x era, ``OUTPUT_TO_CSV=0``).

Understands the ``Run configuration (TransferBench vX)`` table (``KEY = value : description``), ``Test N:
[bytes]`` headers, per-transfer rows ``Transfer 00: G00 -> [GPU 00:004] -> G01 | 8.410 GB/s | 127.675 ms |
LOCAL-PCIE-2`` (source, executor with its CU count, destination, bandwidth, time, link description) and the
``Aggregate Bandwidth (CPU timed)`` line. Bandwidth is GB/s as printed (``_gbps``). A test without its
aggregate line, or a configuration line whose fixed description text is corrupted, gives ``complete: False``.
"""

from __future__ import annotations

import re
from typing import Any

from clustereval.parsers import register
from clustereval.parsers._common import result, to_float, to_int
from clustereval.parsers.errors import ParseError

_VERSION = re.compile(r"TransferBench v?(\d+(?:\.\d+)*)")
_CONFIG = re.compile(r"^([A-Z][A-Z0-9_]+)\s*=\s*(.*?)\s*:\s*(.*?)\s*$")
_TEST = re.compile(r"^Test (\d+):\s*\[(\d+) bytes\]")
_TRANSFER = re.compile(
    r"^Transfer\s+(?P<idx>\d+):\s*(?P<src>\S+)\s*->\s*\[(?P<exe>[A-Z]+)\s*(?P<exe_idx>\d+):(?P<units>\d+)\]\s*->\s*"
    r"(?P<dst>\S+)\s*\|\s*(?P<bw>[\d.]+)\s*GB/s\s*\|\s*(?P<ms>[\d.]+)\s*ms\s*\|\s*(?P<link>.*?)\s*$"
)
_AGGREGATE = re.compile(
    r"^Aggregate Bandwidth(?: \((?P<timer>[^)]*)\))?\s*\|\s*(?P<bw>[\d.]+)\s*GB/s\s*\|\s*(?P<ms>[\d.]+)\s*ms"
    r"(?:\s*\|\s*Overhead:\s*(?P<ovh>[\d.]+)\s*ms)?"
)
# Descriptions TransferBench 1.0x prints verbatim for these settings; anything else means a corrupted copy.
_FIXED_DESCRIPTIONS = {
    ("USE_HIP_CALL", "0"): "Using custom kernels for GPU-executed copies",
    ("USE_MEMSET", "0"): "Performing memcopy",
    ("USE_INTERACTIVE", "0"): "Running in non-interactive mode",
    ("OUTPUT_TO_CSV", "0"): "Output to console",
    ("USE_PCIE_INDEX", "0"): "Using HIP-based GPU indexing",
}


@register("transferbench")
def parse(text: str) -> dict[str, Any]:
    """Parse TransferBench output into its configuration, tests, per-transfer and aggregate bandwidth."""
    if not text or not text.strip():
        raise ParseError("transferbench: the output is empty")
    warnings: list[str] = []
    version = None
    config: dict[str, Any] = {}
    tests: list[dict[str, Any]] = []
    test: dict[str, Any] | None = None
    corrupted = False
    for raw in text.split("\n"):
        line = raw.strip()
        if not line or set(line) <= {"="}:
            continue
        match = _VERSION.search(line)
        if match and line.startswith("Run configuration"):
            version = match.group(1)
            continue
        match = _CONFIG.match(line)
        if match:
            key, value, description = match.groups()
            config[key] = {"value": value, "description": description}
            expected = _FIXED_DESCRIPTIONS.get((key, value))
            if expected and description != expected:
                corrupted = True
                warnings.append(f"configuration line {key} reads {description!r}, expected {expected!r}")
            continue
        match = _TEST.match(line)
        if match:
            test = {"test": int(match.group(1)), "bytes": int(match.group(2)), "transfers": [],
                    "aggregate_gbps": None, "aggregate_ms": None, "overhead_ms": None, "timer": None}
            tests.append(test)
            continue
        match = _TRANSFER.match(line)
        if match and test is not None:
            test["transfers"].append({
                "index": int(match.group("idx")), "src": match.group("src"), "dst": match.group("dst"),
                "executor": f"{match.group('exe')}{match.group('exe_idx')}",
                "executor_units": to_int(match.group("units")),
                "bw_gbps": to_float(match.group("bw")), "time_ms": to_float(match.group("ms")),
                "link": match.group("link") or None,
            })
            continue
        match = _AGGREGATE.match(line)
        if match and test is not None:
            test.update(aggregate_gbps=to_float(match.group("bw")), aggregate_ms=to_float(match.group("ms")),
                        overhead_ms=to_float(match.group("ovh")), timer=match.group("timer"))
            continue
        warnings.append(f"unrecognised line: {line[:160]}")
    if not tests:
        raise ParseError("transferbench: no 'Test N: [bytes]' section with results found")
    missing = [t["test"] for t in tests if t["aggregate_gbps"] is None]
    if missing:
        warnings.append(f"no aggregate line for test(s) {missing}: the run stopped early")
    config_values = {k: v["value"] for k, v in config.items()}
    return result(
        "transferbench", "console",
        complete=not missing and not corrupted,
        warnings=warnings,
        version=version,
        config=config_values,
        config_descriptions={k: v["description"] for k, v in config.items()},
        tests=tests,
        max_aggregate_gbps=max((t["aggregate_gbps"] for t in tests if t["aggregate_gbps"] is not None),
                               default=None),
    )
