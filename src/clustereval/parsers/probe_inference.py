"""Parser for the inference probes (``checks/probes/inference.yml``): ``vllm_bench_sweep`` (a vLLM server on
the node) and ``vllm_bench_nodes`` (one vLLM instance over several nodes), then ``vllm bench serve`` at each
concurrency.

The probes print ``clustereval-skip: <why>`` when the serve cannot start for a reason the cluster is not blamed
for (no vLLM, no model, no GPU, no launcher), ``clustereval-error: <why>`` when the harness could not start it
(the launcher reached fewer nodes than asked), for a serve over nodes ``clustereval-node: <host> key=value ...``
per node and ``clustereval-launch: key=value ...`` (nodes, gpus_per_node, tensor_parallel, pipeline_parallel,
launcher, endpoint), then ``server-ready: S`` (seconds until ``/v1/models`` answered) or ``server-failed: <why>``,
and per concurrency ``=== concurrency N`` followed by vLLM's own result block (``parsers/vllm_bench.py``).
Result: ``skip`` and ``error`` (the reasons, or None), ``nodes``, ``launch`` (numbers as ints),
``server_ready_s``, ``server_error`` and ``runs``: per concurrency ``concurrency`` and either ``result`` (the
vllm-bench fields) or ``error`` (why that block could not be read).
"""

from __future__ import annotations

import re
from typing import Any

from clustereval.parsers import register, vllm_bench
from clustereval.parsers._common import result, to_float
from clustereval.parsers.errors import ParseError
from clustereval.parsers.probe_training import key_values as _pairs

TOOL = "probe-inference"
HEADER = re.compile(r"^=== concurrency (\d+)\s*$")


@register(TOOL)
def parse(text: str) -> dict[str, Any]:
    skip = ready = error = harness = None
    nodes: list[dict[str, Any]] = []
    launch: dict[str, Any] = {}
    runs: list[dict[str, Any]] = []
    block: list[str] | None = None
    concurrency = 0

    def close() -> None:
        if block is None:
            return
        try:
            runs.append({"concurrency": concurrency, "result": vllm_bench.parse("\n".join(block))})
        except ParseError as exc:
            runs.append({"concurrency": concurrency, "error": str(exc)})

    for line in text.splitlines():
        header = HEADER.match(line.strip())
        if header:
            close()
            block, concurrency = [], int(header[1])
        elif line.startswith("clustereval-skip: "):
            skip = line.split(": ", 1)[1].strip()
        elif line.startswith("clustereval-error: "):
            harness = line.split(": ", 1)[1].strip()
        elif line.startswith("clustereval-node: "):
            host, _, rest = line.split(": ", 1)[1].strip().partition(" ")
            nodes.append({"host": host, **_pairs(rest)})
        elif line.startswith("clustereval-launch: "):
            launch = _pairs(line.split(": ", 1)[1])
        elif line.startswith("server-ready: "):
            ready = to_float(line.split(": ", 1)[1])
        elif line.startswith("server-failed: "):
            error = line.split(": ", 1)[1].strip()
        elif block is not None:
            block.append(line)
    close()
    if skip is None and error is None and harness is None and not runs:
        raise ParseError("the inference probe printed neither a skip, a server failure nor a benchmark block")
    return result(TOOL, "text", complete=all("result" in r and r["result"]["complete"] for r in runs),
                  skip=skip, error=harness, nodes=nodes, launch=launch, server_ready_s=ready, server_error=error,
                  runs=runs)

