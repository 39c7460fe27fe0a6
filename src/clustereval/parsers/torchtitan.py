"""Parser for torchtitan training logs (torchtitan 2024-2026; native ``[titan]`` logger and the ezpz
``[ts][I][components/metrics:N:log]`` format).

Reads every metrics line ``step: N  loss: X  [grad_norm: G]  memory: M GiB(P%)  tps: T  tflops: F  mfu: U%``
into ``steps`` (``step``, ``loss``, ``grad_norm``, ``memory_gib``, ``memory_pct``, ``tps`` (tokens per
second per GPU, thousands separators removed), ``tflops``, ``mfu_pct``, ``timestamp`` as printed,
``rank``), and a ``summary`` (last step, final loss, means over the steps after the first (warm-up)
one, peak memory). ``complete`` is False when the log shows the run dying (watchdog, SIGTERM, Python
traceback, error-level lines, NCCL timeouts); ``finished`` says whether torchtitan logged
``Training completed``.

What else torchtitan prints that a judgement needs (``torchtitan/trainer.py``, ``components/metrics.py``,
``distributed/parallel_dims.py`` of torchtitan 0.2 and its 2026 config-registry successor):

* several ranks: ``torchrun --tee 3 --local-ranks-filter 0`` prefixes each node's first rank with its global
  rank (``[rank8]:``), so a run over nodes logs every step once per node. ``steps`` are one rank's: rank 0,
  or under pipeline parallelism (where ranks outside the last stage log the loss as -1) the lowest rank that
  logs a real loss; ``ranks`` lists the ranks that logged steps;
* ``validate step: N  loss: ...`` lines are the validator's, never training steps: under ``validation``;
* ``mfu: N/A`` (torchtitan leaves MFU out when FP8/MX quantisation is on): ``mfu_pct`` None and
  ``summary.mfu_not_reported`` True;
* ``Building device mesh with parallelism: pp=1, dp_replicate=1, dp_shard=16, cp=1, tp=1, ep=8``: ``mesh``
  (the degrees as numbers) and ``world_size`` (their product without ep/etp, which shard inside the others);
* ``Model gpt_oss 20b size: 20,914,757,184 total parameters``: ``model`` (name, flavor, parameters);
* ``Ran out of data; last step was canceled.``: ``data_exhausted`` True (the run stopped early by itself).

``failures`` lists the lines that show the run dying; ``distributed_failures`` those of them that point at
the cluster (NCCL, the rendezvous, the process-group store, a collective timeout, an ECC error) rather
than at the job's own settings.
"""

from __future__ import annotations

import re
from statistics import fmean
from typing import Any

from clustereval.parsers import register
from clustereval.parsers._common import result, to_float
from clustereval.parsers.errors import ParseError

_STEP = re.compile(r"(?<![A-Za-z])step:\s*(?P<step>\d+)\s+loss:\s*(?P<loss>\S+)")
_VALIDATE = re.compile(r"validat\w*\s+step:\s*(?P<step>\d+)\s+loss:\s*(?P<loss>\S+)", re.IGNORECASE)
_FIELDS = {
    "grad_norm": re.compile(r"grad_norm:\s*(\S+)"),
    "memory": re.compile(r"memory:\s*([\d.]+)\s*GiB\s*\(\s*([\d.]+)%\)"),
    "tps": re.compile(r"tps:\s*([\d,]+(?:\.\d+)?)"),
    "tflops": re.compile(r"tflops:\s*([\d.,]+)"),
    "mfu": re.compile(r"mfu:\s*([\d.]+)%"),
    "mfu_na": re.compile(r"mfu:\s*N/A", re.IGNORECASE),
}
_TIMESTAMP = re.compile(r"(\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[,.]\d+)?)")
_RANK = re.compile(r"\[(?:rank|default)(\d+)\]")
FAILURE = re.compile(r"Watchdog|SIGTERM|SIGKILL|Traceback \(most recent call last\)|\]\[E\]\[| - ERROR - |"
                     r"Watchdog caught collective operation timeout|ChildFailedError|CUDA out of memory|"
                     r"NCCL (?:error|timeout)", re.IGNORECASE)
# Of those, the ones a cluster causes: the fabric (NCCL, the c10d rendezvous and store), a collective that
# timed out, or the GPU itself. Anything else before the first step is the job's own settings.
DISTRIBUTED = re.compile(r"NCCL (?:error|timeout)|nccl\w*Error|Rendezvous\w*Error|DistNetworkError|DistStoreError|"
                         r"collective operation timeout|uncorrectable ECC|ECC error|"
                         r"CUDA error: (?:an illegal|unspecified launch|misaligned|uncorrectable)", re.IGNORECASE)
_MESH = re.compile(r"Building device mesh with parallelism:\s*(?P<degrees>(?:\w+=\d+[,\s]*)+)")
_MODEL = re.compile(r"Model (?P<name>\S+) (?P<flavor>\S+) size: (?P<params>[\d,]+) total parameters")
_NO_DATA = re.compile(r"Ran out of data")
# Degrees that split the world; ep and etp shard experts inside the data/tensor dimensions.
_WORLD_DIMS = ("pp", "dp_replicate", "dp_shard", "cp", "tp")


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
    row["mfu_not_reported"] = bool(_FIELDS["mfu_na"].search(line))
    stamp = _TIMESTAMP.search(line)
    row["timestamp"] = stamp.group(1) if stamp else None
    rank = _RANK.search(line)
    row["rank"] = int(rank.group(1)) if rank else None
    return row


def _mean(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return round(fmean(present), 6) if present else None


def _one_rank(steps: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[int]]:
    """The steps of one rank (see the module docstring) and every rank that logged steps."""
    ranks = sorted({s["rank"] for s in steps if s["rank"] is not None})
    if len(ranks) < 2:
        return steps, ranks
    by_rank = {r: [s for s in steps if s["rank"] == r] for r in ranks}
    real = [r for r in ranks if any(s["loss"] is not None and s["loss"] >= 0 for s in by_rank[r])]
    return by_rank[(real or ranks)[0]], ranks


def _mesh(match: re.Match[str]) -> dict[str, int]:
    return {key: int(value) for key, value in re.findall(r"(\w+)=(\d+)", match.group("degrees"))}


@register("torchtitan")
def parse(text: str) -> dict[str, Any]:
    """Parse torchtitan training log lines (see the module docstring)."""
    if not text or not text.strip():
        raise ParseError("the torchtitan log is empty")
    steps: list[dict[str, Any]] = []
    validation: list[dict[str, Any]] = []
    failures: list[str] = []
    finished = exhausted = False
    mesh: dict[str, int] = {}
    model: dict[str, Any] | None = None
    for line in text.split("\n"):
        checked = _VALIDATE.search(line)
        if checked:
            validation.append({"step": int(checked.group("step")), "loss": to_float(checked.group("loss"))})
            continue
        match = _STEP.search(line)
        if match:
            steps.append(_step(line, match))
            continue
        if "Training completed" in line:
            finished = True
        elif (found := _MESH.search(line)) and not mesh:
            mesh = _mesh(found)
        elif (named := _MODEL.search(line)) and model is None:
            model = {"name": named.group("name"), "flavor": named.group("flavor"),
                     "parameters": int(named.group("params").replace(",", ""))}
        elif _NO_DATA.search(line):
            exhausted = True
        elif FAILURE.search(line) or DISTRIBUTED.search(line):
            failures.append(line.strip()[:240])
    warnings = [f"failure in log: {f}" for f in failures]
    distributed = [f for f in failures if DISTRIBUTED.search(f)]
    world = 1
    for dim in _WORLD_DIMS:
        world *= mesh.get(dim, 1)
    extra = {"validation": validation, "mesh": mesh, "world_size": world if mesh else None, "model": model,
             "data_exhausted": exhausted, "failures": failures, "distributed_failures": distributed}
    if not steps:
        reason = f"; the log shows {failures[-1]!r}" if failures else ""
        raise ParseError(f"no torchtitan 'step: N  loss: ...' metrics line found{reason}")
    steps, ranks = _one_rank(steps)
    steady = steps[1:] if len(steps) > 1 and steps[0]["step"] == 1 else steps
    memory = [s["memory_gib"] for s in steps if s["memory_gib"] is not None]
    summary = {"steps_logged": len(steps), "last_step": steps[-1]["step"], "final_loss": steps[-1]["loss"],
               "tps_mean": _mean([s["tps"] for s in steady]),
               "tflops_mean": _mean([s["tflops"] for s in steady]),
               "mfu_pct_mean": _mean([s["mfu_pct"] for s in steady]),
               "mfu_not_reported": any(s["mfu_not_reported"] for s in steady),
               "memory_peak_gib": max(memory) if memory else None,
               "warmup_step_excluded": steady is not steps}
    return result("torchtitan", "log", complete=not failures, warnings=warnings, steps=steps, summary=summary,
                  finished=finished, ranks=ranks, **extra)


def failure_lines(text: str) -> tuple[list[str], list[str]]:
    """(lines showing the run dying, those of them pointing at the cluster) of a log with no step at all."""
    failures = [line.strip()[:240] for line in text.split("\n")
                if not _STEP.search(line) and (FAILURE.search(line) or DISTRIBUTED.search(line))]
    return failures, [f for f in failures if DISTRIBUTED.search(f)]
