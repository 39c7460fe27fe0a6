"""network.nccl.isolation: the node (or link) that makes 2-node collective runs slow, named.

Reads the 2-node runs among the ``nccl@<collective>.<label>`` probes (contract: ``checks/collectives.py``);
the role plans them with ``checks/isolation.plan_pairs`` and, after a first judgement, re-pairs the failing
pairs' nodes with good ones (``isolation.replan``). A pair passes when its peak busbw passes the hardware's
figure (where one matches) and is within the levels of the median pair (``baselines/collectives.yml``).
"""

from __future__ import annotations

import statistics
from typing import Any

from clustereval.checks import Context, Skip, Verdict, check, isolation
from clustereval.checks.collectives import best_rows, flag, graded, limit_for, runs, subject_facts
from clustereval.results import worst


def _peak(run) -> float | None:
    values = [r["busbw"] for r in best_rows(run.data).values() if r["busbw"] is not None]
    return max(values) if values else None


@check("network.nccl.isolation")
def pair_isolation(ctx: Context) -> list[Verdict]:
    pairs = [r for r in runs(ctx) if len(r.nodes) == 2]
    # The role marks the runs it planned for isolation; without any marked, every 2-node run counts.
    marked = [r for r in pairs if flag((r.probe.get("params") or {}).get("isolation"), False)]
    pairs = marked or pairs
    if not pairs:
        raise Skip("no 2-node collective run was kept: isolation needs pairs of nodes")
    verdicts = []
    for collective in sorted({r.params["collective"] for r in pairs}):
        group = [r for r in pairs if r.params["collective"] == collective]
        peaks = {r.name: _peak(r) for r in group if r.data is not None}
        rates = [v for v in peaks.values() if v is not None]
        outcome: list[tuple[tuple[str, str], bool]] = []
        detail: dict[str, Any] = {}
        harness = []
        for run in group:
            pair = (run.nodes[0], run.nodes[1])
            if run.data is None or peaks.get(run.name) is None:
                if run.status == "fail":  # a pair that hung or failed is a failing pair
                    outcome.append((pair, False))
                    detail[run.subject] = run.why
                else:
                    harness.append(f"{run.subject}: {run.why}")
                continue
            value, statuses = peaks[run.name], []
            try:
                statuses.append(graded(value, limit_for(ctx, "network.nccl.busbw", subject_facts(ctx, run),
                                                        {**run.params, "size": "peak"}).at("peak")))
            except Skip:
                pass
            if len(rates) >= 2:
                statuses.append(graded(value, limit_for(ctx, "network.nccl.isolation", {}, run.params, peers=rates)))
            outcome.append((pair, worst(statuses) == "pass" if statuses else True))
            detail[run.subject] = round(value, 2)
        params = {"collective": collective, "round": 2 if len(outcome) > len({n for p, _ in outcome for n in p}) // 2
                  else 1}
        if not outcome:
            status = "skip" if not harness else "error"
            verdicts.append(Verdict(status, f"{collective}: no pair measured: {'; '.join(harness[:3]) or 'none run'}",
                                    params=params))
            continue
        found = isolation.culprits(outcome)
        evidence = {**found, "pairs": detail, "harness_problems": harness,
                    "median_gbps": round(statistics.median(rates), 2) if rates else None}
        parts = []
        if found["bad_nodes"]:
            parts.append(f"bad node{'s' if len(found['bad_nodes']) > 1 else ''}: {', '.join(found['bad_nodes'])}")
        if found["bad_links"]:
            parts.append("bad link between " + ", ".join(f"{a} and {b}" for a, b in found["bad_links"]))
        if found["unresolved"]:
            parts.append("failing, culprit unresolved (re-pair with good nodes): "
                         + ", ".join(f"{a}+{b}" for a, b in found["unresolved"]))
        status = "fail" if found["bad_nodes"] or found["bad_links"] else ("warn" if found["unresolved"] else "pass")
        if harness:
            status = worst(status, "error") if status == "pass" else status
        unmeasured = f" ({len(harness)} not measured)" if harness else ""
        summary = (f"{collective}: {len(outcome)} pairs; " + "; ".join(parts) if parts else
                   f"{collective}: {len(outcome)} pairs, none slow{unmeasured}")
        verdicts.append(Verdict(status, summary, found["bad_nodes"], "nodes", None, evidence, params=params))
    return verdicts
