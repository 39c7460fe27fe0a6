"""Parser for the training probes (``torchtitan_train`` on one node, ``torchtitan_train_nodes`` over several;
``checks/probes/training.yml``): the probe's own lines, then torchtitan's log.

The probe prints, before torchtitan starts:

* ``clustereval-skip: <why>`` when the run cannot start for a reason the cluster is not blamed for (no
  torchtitan for the configured Python, no job file, no CUDA GPU, no launcher), and exits 0;
* ``clustereval-error: <why>`` when the harness could not start it (the launcher reached fewer nodes than asked);
* ``clustereval-node: <host> key=value ...`` once per node for a run over nodes (what each node has:
  ``torchtitan``, ``config``, ``gpus``);
* ``clustereval-launch: key=value ...`` just before torchtitan starts (``nodes``, ``gpus_per_node``,
  ``world_size``, ``launcher``, ``endpoint``).

Result: ``skip``, ``error`` (the reasons, or None), ``nodes`` (one dict per preflight line), ``launch``
(numbers as ints), ``log`` (``parsers/torchtitan.py``'s result, or None when no step was logged, with
``log_error`` saying why), ``failures`` / ``distributed_failures`` (the log's failure lines, also when it
logged no step) and ``tail`` (its last lines).
"""

from __future__ import annotations

from typing import Any

from clustereval.parsers import register, torchtitan
from clustereval.parsers._common import result
from clustereval.parsers.errors import ParseError

TOOL = "probe-training"
MARKS = ("clustereval-skip: ", "clustereval-error: ", "clustereval-node: ", "clustereval-launch: ")


def key_values(text: str) -> dict[str, Any]:
    """``nodes=2 launcher=mpirun`` as ``{"nodes": 2, "launcher": "mpirun"}`` (whole numbers as ints)."""
    out: dict[str, Any] = {}
    for word in text.split():
        key, sep, value = word.partition("=")
        if sep:
            out[key] = int(value) if value.isdigit() else value
    return out


@register(TOOL)
def parse(text: str) -> dict[str, Any]:
    if not text or not text.strip():
        raise ParseError("the training probe printed nothing")
    skip = error = None
    nodes: list[dict[str, Any]] = []
    launch: dict[str, Any] = {}
    log_lines: list[str] = []
    for line in text.split("\n"):
        if line.startswith(MARKS[0]):
            skip = line[len(MARKS[0]):].strip()
        elif line.startswith(MARKS[1]):
            error = line[len(MARKS[1]):].strip()
        elif line.startswith(MARKS[2]):
            host, _, rest = line[len(MARKS[2]):].strip().partition(" ")
            nodes.append({"host": host, **key_values(rest)})
        elif line.startswith(MARKS[3]):
            launch = key_values(line[len(MARKS[3]):])
        else:
            log_lines.append(line)
    log_text = "\n".join(log_lines)
    log = log_error = None
    if log_text.strip():
        try:
            log = torchtitan.parse(log_text)
        except ParseError as exc:
            log_error = str(exc)
    else:
        log_error = "torchtitan printed nothing"
    failures, distributed = ((log["failures"], log["distributed_failures"]) if log
                             else torchtitan.failure_lines(log_text))
    tail = [line[:300] for line in log_lines if line.strip()][-5:]
    return result(TOOL, "text", complete=bool(log and log["complete"]), skip=skip, error=error, nodes=nodes,
                  launch=launch, log=log, log_error=log_error, failures=failures, distributed_failures=distributed,
                  tail=tail)
