"""Parser for vLLM serving benchmark results: ``vllm bench serve`` (vLLM 0.9+) and the older
``benchmarks/benchmark_serving.py`` (same block, without padding or ``Failed requests``), plus the JSON
that ``--save-result`` writes.

Reads the ``Serving Benchmark Result`` block: request counts, duration, token totals, request/token
throughput (``_rps``, ``_tok_per_s``), peak figures when printed, and for TTFT, TPOT, ITL and E2EL the
mean, median, standard deviation and every printed percentile in milliseconds (``ttft_mean_ms``,
``ttft_p99_ms``, ... and the same under ``latency_ms``). ``complete`` is False when the closing
``=====`` line is missing.
"""

from __future__ import annotations

import json
import re
from typing import Any

from clustereval.parsers import register
from clustereval.parsers._common import result, to_float
from clustereval.parsers.errors import ParseError

_FIELDS = {
    "successful requests": "successful_requests", "failed requests": "failed_requests",
    "maximum request concurrency": "max_concurrency",
    "request rate configured (rps)": "request_rate_configured_rps",
    "benchmark duration (s)": "duration_s", "total input tokens": "total_input_tokens",
    "total generated tokens": "total_generated_tokens",
    "request throughput (req/s)": "request_throughput_rps",
    "request goodput (req/s)": "request_goodput_rps",
    "output token throughput (tok/s)": "output_throughput_tok_per_s",
    "peak output token throughput (tok/s)": "peak_output_throughput_tok_per_s",
    "peak concurrent requests": "peak_concurrent_requests",
    "total token throughput (tok/s)": "total_throughput_tok_per_s",
}
_INT_FIELDS = {"successful_requests", "failed_requests", "max_concurrency", "total_input_tokens",
               "total_generated_tokens"}
_LATENCY = re.compile(r"^(Mean|Median|Std|P\d+(?:\.\d+)?)\s+(TTFT|TPOT|ITL|E2EL)\s+\(ms\):\s+(\S+)",
                      re.IGNORECASE)
_JSON_FIELDS = {"completed": "successful_requests", "failed": "failed_requests", "duration": "duration_s",
                "total_input_tokens": "total_input_tokens", "total_output_tokens": "total_generated_tokens",
                "request_throughput": "request_throughput_rps", "request_goodput": "request_goodput_rps",
                "output_throughput": "output_throughput_tok_per_s",
                "total_token_throughput": "total_throughput_tok_per_s", "max_concurrency": "max_concurrency"}


def _stat_name(stat: str) -> str:
    stat = stat.lower()
    return stat.replace(".", "_") if stat.startswith("p") else stat


def _parse_json(text: str) -> dict[str, Any]:
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ParseError(f"vLLM benchmark JSON is malformed or truncated at byte {exc.pos}: "
                         f"{exc.msg}") from None
    if not isinstance(doc, dict):
        raise ParseError("vLLM benchmark JSON is not an object")
    fields: dict[str, Any] = {}
    latency: dict[str, dict[str, float | None]] = {}
    for key, value in doc.items():
        if key in _JSON_FIELDS and isinstance(value, (int, float)) and not isinstance(value, bool):
            fields[_JSON_FIELDS[key]] = value
        match = re.fullmatch(r"(mean|median|std|p\d+(?:\.\d+)?)_(ttft|tpot|itl|e2el)_ms", key)
        if match and isinstance(value, (int, float)) and not isinstance(value, bool):
            metric, stat = match.group(2), _stat_name(match.group(1))
            latency.setdefault(metric, {})[stat] = float(value)
            fields[f"{metric}_{stat}_ms"] = float(value)
    if "request_throughput_rps" not in fields and not latency:
        raise ParseError("JSON has no request_throughput or latency fields: not a vLLM benchmark result")
    return result("vllm-bench", "json", complete=True, warnings=[], latency_ms=latency,
                  model=doc.get("model_id") if isinstance(doc.get("model_id"), str) else None, **fields)


@register("vllm-bench")
def parse(text: str) -> dict[str, Any]:
    """Parse a vLLM serving benchmark result block or its saved JSON (see the module docstring)."""
    if not text or not text.strip():
        raise ParseError("the vLLM benchmark output is empty")
    if text.strip().startswith("{"):
        return _parse_json(text.strip())
    lines = text.split("\n")
    start = next((i for i, ln in enumerate(lines) if "Serving Benchmark Result" in ln), None)
    if start is None:
        errors = [ln.strip() for ln in lines if re.search(r"Error|Traceback", ln)]
        hint = f": the output shows {errors[-1][:160]!r}" if errors else ""
        raise ParseError(f"no 'Serving Benchmark Result' block found{hint}")
    fields: dict[str, Any] = {}
    latency: dict[str, dict[str, float | None]] = {}
    warnings: list[str] = []
    closed = False
    for line in lines[start + 1:]:
        stripped = line.strip()
        if not stripped:
            continue
        if re.fullmatch(r"=+", stripped):
            closed = True
            break
        if stripped.startswith("-"):
            continue
        match = _LATENCY.match(stripped)
        if match:
            metric, stat = match.group(2).lower(), _stat_name(match.group(1))
            value = to_float(match.group(3))
            latency.setdefault(metric, {})[stat] = value
            fields[f"{metric}_{stat}_ms"] = value
            continue
        label, sep, value = stripped.rpartition(":")
        key = _FIELDS.get(re.sub(r"\s+", " ", label.strip().lower())) if sep else None
        if key is None:
            warnings.append(f"line not understood: {stripped[:160]}")
            continue
        number = to_float(value)
        whole = key in _INT_FIELDS and number is not None and number.is_integer()
        fields[key] = int(number) if whole and number is not None else number
    if not fields:
        raise ParseError("the 'Serving Benchmark Result' block is empty: the benchmark stopped before "
                         "reporting")
    if not closed:
        warnings.append("the result block has no closing '=====' line: the output is cut")
    return result("vllm-bench", "text", complete=closed, warnings=warnings, latency_ms=latency, **fields)
