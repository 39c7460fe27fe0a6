"""Collectives: whether each nccl-tests / rccl-tests run finished, returned right values and has a sane curve.

Reads the same ``nccl@<collective>.<label>`` probes as ``checks/collectives.py`` (its docstring is the probe
contract); thresholds in ``baselines/collectives.yml``.
"""

from __future__ import annotations

from clustereval.checks import Context, Skip, Verdict, check
from clustereval.checks.collectives import (
    CURVE_FROM,
    HINTS,
    Run,
    best_rows,
    generic_hints,
    graded,
    human,
    limit_for,
    plugins,
    runs,
    subject_facts,
)
from clustereval.results import worst


def _runs(ctx: Context) -> list[Run]:
    measured = runs(ctx)
    if not measured:
        raise Skip("no collective run was kept (nccl@<collective>.<label> probes): none was launched")
    return measured


def _base(run: Run, **evidence) -> dict:
    return {"subject": run.subject, "params": run.params, "evidence": {**evidence, "_artifacts": run.artifacts}}


@check("network.nccl.correctness")
def correctness(ctx: Context) -> list[Verdict]:
    verdicts = []
    for run in _runs(ctx):
        if run.data is None:
            verdicts.append(run.verdict("correctness not checked: "))
            continue
        data, rows = run.data, run.data["rows"]
        wrong = sorted({r["size_bytes"] for r in rows
                        if (r.get("wrong") or 0) > 0 or (r.get("in_place_wrong") or 0) > 0})
        flagged = sorted({r["size_bytes"] for r in rows if r.get("flagged")})
        errors = [e for r in rows for e in (r.get("error"), r.get("in_place_error")) if e is not None]
        checked = [v for r in rows for v in (r.get("wrong"), r.get("in_place_wrong")) if v is not None]
        evidence = {"wrong_total": data.get("wrong_total"), "out_of_bounds": data.get("out_of_bounds"),
                    "wrong_sizes": wrong, "flagged_sizes": flagged}
        statuses, findings = [], []
        if wrong:
            statuses.append("fail")
            findings.append(f"{data.get('wrong_total')} wrong elements at {', '.join(human(s) for s in wrong[:8])}")
        if flagged:
            statuses.append("fail")
            findings.append(f"error cells over rccl-tests' threshold at {', '.join(human(s) for s in flagged[:8])}")
        if (data.get("out_of_bounds") or 0) > 0 or data.get("out_of_bounds_ok") is False:
            statuses.append("fail")
            findings.append(f"{data.get('out_of_bounds')} out-of-bounds values (the footer says FAILED)")
        expected = None
        if errors:
            limit = limit_for(ctx, "network.nccl.max_error", subject_facts(ctx, run), run.params)
            evidence["max_error"], expected = max(errors), limit.expected()
            statuses.append(graded(max(errors), limit))
            if statuses[-1] != "pass":
                level = limit.fail if statuses[-1] == "fail" else limit.warn
                findings.append(f"max error {max(errors):.3g} is above {level:.3g} (float rounding is ~1e-6)")
        if not errors and not checked:
            verdicts.append(Verdict("skip", f"{run.label}: no size was checked (data checking off: -c 0, or N/A "
                                    "cells)", **_base(run, **evidence)))
            continue
        status = worst(statuses)
        summary = (f"{run.label}: " + "; ".join(findings) if findings else
                   f"{run.label}: every value right at {len(best_rows(data))} sizes")
        verdicts.append(Verdict(status, summary, len(set(wrong) | set(flagged)), "sizes", expected,
                                **_base(run, **evidence)))
    return verdicts


@check("network.nccl.curve_shape")
def curve_shape(ctx: Context) -> list[Verdict]:
    verdicts = []
    for run in _runs(ctx):
        if run.data is None:
            verdicts.append(run.verdict("no curve: "))
            continue
        curve = [(s, r["busbw"]) for s, r in best_rows(run.data).items() if s >= CURVE_FROM and r["busbw"] is not None]
        if len(curve) < 3:
            verdicts.append(Verdict("skip", f"{run.label}: {len(curve)} sizes of 1 MiB or more measured; "
                                    "a shape needs 3", **_base(run)))
            continue
        best, at, dip = curve[0][1], curve[0][0], (0.0, None, None, None, None)
        for size, value in curve[1:]:
            fall = (best - value) / best * 100 if best > 0 else 0.0
            if fall > dip[0]:
                dip = (fall, at, best, size, value)
            if value > best:
                best, at = value, size
        limit = limit_for(ctx, "network.nccl.curve_shape", subject_facts(ctx, run), run.params)
        status = graded(dip[0], limit)
        evidence = {"worst_dip_pct": round(dip[0], 2), "from_size": dip[1], "from_gbps": dip[2], "to_size": dip[3],
                    "to_gbps": dip[4]}
        if status == "pass":
            summary = f"{run.label}: busbw grows with size (largest fall {dip[0]:.1f}% under the best smaller size)"
        else:
            summary = (f"{run.label}: jagged curve: busbw falls from {dip[2]:.4g} GB/s at {human(dip[1])} to "
                       f"{dip[4]:.4g} GB/s at {human(dip[3])} ({dip[0]:.0f}%); a missing or misconfigured "
                       f"network plugin (e.g. {plugins(run.vendor)}) or the library falling back to "
                       "sockets looks like this")
        verdicts.append(Verdict(status, summary, round(dip[0], 2), "%", limit.expected(), **_base(run, **evidence)))
    return verdicts


def _hints(ctx: Context, run: Run) -> list[str]:
    fabric = subject_facts(ctx, run).get("fabric_class")
    return ([HINTS[fabric]] if fabric in HINTS else []) + generic_hints(run.vendor)


@check("network.nccl.completion")
def completion(ctx: Context) -> list[Verdict]:
    verdicts = []
    for run in _runs(ctx):
        if run.data is None:
            verdict = run.verdict("")
            if verdict.status == "fail":
                verdict.evidence["hints"] = _hints(ctx, run)
                verdict.summary += "; " + "; ".join(_hints(ctx, run)[:3])
            verdicts.append(verdict)
            continue
        data, rc = run.data, run.probe.get("rc")
        rows = best_rows(data)
        evidence = {"rows": len(data["rows"]), "last_size": max(rows) if rows else None, "rc": rc,
                    "nccl_warnings": data.get("nccl_warnings", [])[:5], "failures": data.get("failures", [])[:3]}
        if not data.get("complete"):
            why = data["failures"][0] if data.get("failures") else "the output stops before its closing footer"
            status, summary = "fail", (f"{run.label}: stopped after {human(max(rows))}: {why}; "
                                       + "; ".join(_hints(ctx, run)[:2]))
            evidence["hints"] = _hints(ctx, run)
        elif rc not in (0, None):
            status, summary = "warn", f"{run.label}: results complete, but the launcher exited with status {rc}"
        elif data.get("nccl_warnings"):
            status, summary = "warn", (f"{run.label}: finished, with {len(data['nccl_warnings'])} NCCL WARN lines: "
                                       f"{data['nccl_warnings'][0][:160]}")
        else:
            status, summary = "pass", f"{run.label}: finished, {len(rows)} sizes up to {human(max(rows))}"
        verdicts.append(Verdict(status, summary, len(data["rows"]), "rows", None, **_base(run, **evidence)))
    return verdicts
