"""torch.distributed collectives (our benchmark, parser ``torch-distributed``), judged once per cluster.

Probe ``torchdist@<collective>`` kept on the launching node; its stdout is the JSON-lines contract in
``parsers/torch_distributed.py``. Params as for nccl-tests runs (``checks/collectives.py``: nodes, world_size,
launcher, nvlink, nvls). NCCL/RCCL on GPUs is judged like nccl-tests (the same ``network.nccl.busbw``
figures); gloo on CPU has no published reference: a floor only, the device recorded.
"""

from __future__ import annotations

from clustereval.checks import Context, Skip, Verdict, check
from clustereval.checks.collectives import SIZES, Run, graded, human, limit_for, runs, subject_facts

PROBE = "torchdist"


def _runs(ctx: Context) -> list[Run]:
    measured = runs(ctx, PROBE)
    if not measured:
        raise Skip("no torch.distributed run was kept (torchdist@<collective> probes)")
    return measured


def _reparse(ctx: Context) -> list[Run]:
    # runs() parses with the record's parser; a record without one defaults to nccl-tests there.
    for _, _, _, probe in ctx.instances(PROBE):
        probe.setdefault("parser", "torch-distributed")
    return _runs(ctx)


def _variant(run: Run) -> dict:
    data = run.data or {}
    return {**run.params, "backend": data.get("backend"), "device": data.get("device")}


@check("network.torchdist.busbw")
def busbw(ctx: Context) -> list[Verdict]:
    verdicts = []
    for run in _reparse(ctx):
        if run.data is None:
            verdicts.append(run.verdict("no bus bandwidth: ", size="peak"))
            continue
        params, rows = _variant(run), {}
        for row in run.data["rows"]:
            if row["collective"] == run.params["collective"]:
                rows[row["size_bytes"]] = max(rows.get(row["size_bytes"], 0.0), float(row["busbw_gbps"]))
        if not rows:
            verdicts.append(Verdict("skip", f"{run.label}: no {run.params['collective']} result line",
                                    subject=run.subject, params={**params, "size": "peak"}))
            continue
        gpu = str(params.get("device") or "").startswith(("cuda", "gpu", "rocm")) and params.get("backend") != "gloo"
        sizes = {**SIZES, "peak": max(rows, key=rows.get)} if gpu else {"largest": max(rows)}
        series = [{"path": f"series/_cluster/torchdist-{run.params['collective']}.csv", "kind": "curve",
                   "x": "size_bytes", "filter": {"probe": run.name}}]
        for label, size in sizes.items():
            point = {**params, "size": label}
            base = {"subject": run.subject, "params": point, "series": [dict(s) for s in series]}
            if size not in rows:
                verdicts.append(Verdict("skip", f"{run.label}: {label} was not measured", **base))
                continue
            value = rows[size]
            check_id = "network.nccl.busbw" if gpu else "network.torchdist.busbw.cpu"
            try:
                limit = limit_for(ctx, check_id, subject_facts(ctx, run), point)
            except Skip as exc:
                verdicts.append(Verdict("skip", f"{run.label} {label}: {value:.4g} GB/s ({params['backend']} on "
                                        f"{params['device']}); {exc}", round(value, 4), "GB/s", **base))
                continue
            limit = limit.at(label) if gpu else limit
            status = graded(value, limit)
            level = limit.fail if status == "fail" else limit.warn
            summary = (f"{run.label} at {human(size)} ({params['backend']} on {params['device']}): {value:.4g} GB/s"
                       + ("" if status == "pass" else f", below {level:.4g} GB/s ({limit.matched})"))
            verdicts.append(Verdict(status, summary, round(value, 4), "GB/s", limit.expected(),
                                    {"_artifacts": run.artifacts}, **base))
        verdicts[-1].series[0]["data"] = [{"probe": run.name, "size_bytes": s, "busbw_gbps": v}
                                          for s, v in sorted(rows.items())]
    return verdicts


@check("network.torchdist.correctness")
def correctness(ctx: Context) -> list[Verdict]:
    verdicts = []
    for run in _reparse(ctx):
        base = {"subject": run.subject, "params": {k: v for k, v in _variant(run).items()
                                                   if k in ("collective", "backend", "device")}}
        if run.data is None:
            verdict = run.verdict("not checked: ")
            verdict.params = base["params"]
            verdicts.append(verdict)
            continue
        data = run.data
        wrong = data["wrong_sizes"]
        evidence = {"wrong_sizes": wrong, "failures": data["failures"][:3], "done": data["done"],
                    "_artifacts": run.artifacts}
        if wrong:
            status, summary = "fail", f"{run.label}: wrong values at {', '.join(human(s) for s in wrong[:8])}"
        elif not data["done"]:
            status, summary = "fail", (f"{run.label}: the benchmark stopped after {len(data['rows'])} results "
                                       "without its done line (a hang or a crash)")
        elif data["failures"]:
            status, summary = "warn", f"{run.label}: values right, but the benchmark reported: {data['failures'][0]}"
        else:
            status, summary = "pass", f"{run.label}: every value right at {len(data['rows'])} sizes"
        verdicts.append(Verdict(status, summary, len(wrong), "sizes", None, evidence, **base))
    return verdicts
