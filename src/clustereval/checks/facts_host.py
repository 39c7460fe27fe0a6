"""Facts about a node's CPU and memory (the ``facts_host`` probe), for the run's hardware facts."""

from __future__ import annotations

from typing import Any

from clustereval.checks import Context, HarnessError, ProbeFailed, Skip, facts

PROBE = "facts_host"


@facts(probes=[PROBE])
def cpu_memory_facts(ctx: Context) -> dict[str, Any]:
    out: dict[str, Any] = {"problems": {}, "artifacts": {}}
    try:
        data = ctx.parsed(PROBE)
    except (Skip, HarnessError, ProbeFailed) as exc:
        out["problems"]["host"] = str(exc)
        return out
    out.update(cpu_model=data["cpu_model"], cpu_count=data["cpus"], cpu_sockets=data["sockets"] or None,
               memory_gib=data["memory_gib"])
    out["artifacts"]["host"] = ctx.probes[PROBE].get("artifact")
    return out
