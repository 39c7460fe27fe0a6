"""Training checks (role training): a torchtitan pretraining run's log — did it run to its end, tokens/s per GPU
and MFU against the reference for the GPU and the model, step-to-step stability, and the loss going down.

The probe (``torchtitan_train``, ``checks/probes/training.yml``) runs torchtitan's own ``torchtitan.train`` with
the configured job file where torchtitan and a CUDA GPU exist; otherwise it prints ``clustereval-skip: <why>``
and every check is a skip saying so. The metrics come from torchtitan's own log lines (``parsers/torchtitan.py``).
"""

from __future__ import annotations

import statistics
from typing import Any

from clustereval import baselines
from clustereval.checks import Context, HarnessError, Skip, Verdict, check

PROBE = "torchtitan_train"
SKIP_MARK = "clustereval-skip: "


def _log(ctx: Context) -> dict[str, Any]:
    """The parsed training log; the probe's own skip line becomes the check's skip."""
    raw = ctx.raw(PROBE)
    for line in str(raw.get("stdout") or "").splitlines():
        if line.startswith(SKIP_MARK):
            raise Skip(line[len(SKIP_MARK):].strip())
    return ctx.parsed(PROBE) if raw.get("rc") == 0 else _failed_log(ctx, raw)


def _failed_log(ctx: Context, raw: dict[str, Any]) -> dict[str, Any]:
    """A run that exited non-zero: its log still says how far it got (the run check judges the failure)."""
    from clustereval import parsers

    try:
        data = parsers.parse("torchtitan", str(raw.get("stdout") or ""))
    except parsers.ParseError as exc:
        tail = " | ".join(str(raw.get("stdout") or raw.get("stderr") or "").strip().splitlines()[-3:])[:400]
        raise HarnessError(f"the training run exited with status {raw.get('rc')} before any step: {exc}; "
                           f"last lines: {tail}") from None
    return {**data, "complete": False, "exit_status": raw.get("rc")}


def _model(ctx: Context) -> dict[str, Any]:
    return {**ctx.facts, "model": ctx.params.get("model") or ctx.options.get("model")}


@check("training.torchtitan.run")
def run_completed(ctx: Context) -> Verdict:
    data = _log(ctx)
    summary = data["summary"]
    evidence = {"summary": summary, "warnings": data.get("warnings"), "exit_status": data.get("exit_status")}
    if not data.get("complete"):
        why = (data.get("warnings") or [f"exit status {data.get('exit_status')}"])[-1]
        return Verdict("fail", f"the training run died at step {summary['last_step']}: {why}",
                       summary["last_step"], "steps", evidence=evidence)
    if not data.get("finished"):
        return Verdict("warn", f"the training run logged {summary['steps_logged']} steps (last {summary['last_step']}) "
                       f"but not 'Training completed'", summary["last_step"], "steps", evidence=evidence)
    return Verdict("pass", f"the training run completed {summary['last_step']} steps", summary["last_step"],
                   "steps", evidence=evidence)


def _graded(ctx: Context, check_id: str, value: float | None, what: str, unit: str) -> Verdict:
    if value is None:
        raise HarnessError(f"torchtitan's log has no {what} figure after the warm-up step")
    lim = ctx.reference("training", check_id, skip_prefix=f"{what} {value:g} {unit}; ", facts=_model(ctx))
    status = baselines.grade(value, lim)
    text = f"{what} {value:,.1f} {unit} (mean after the warm-up step)"
    text += {"pass": "", "warn": f", below the expected {lim.warn:,} {unit}",
             "fail": f", below the failure level {lim.fail:,} {unit}"}[status]
    return Verdict(status, text, round(value, 3), unit, lim.expected())


@check("training.torchtitan.tps")
def tokens_per_second(ctx: Context) -> Verdict:
    return _graded(ctx, "training.torchtitan.tps", _log(ctx)["summary"]["tps_mean"], "tokens/s per GPU", "tok/s")


@check("training.torchtitan.mfu")
def model_flops_utilisation(ctx: Context) -> Verdict:
    return _graded(ctx, "training.torchtitan.mfu", _log(ctx)["summary"]["mfu_pct_mean"], "MFU", "%")


@check("training.torchtitan.stability")
def step_stability(ctx: Context) -> Verdict:
    """Spread of tokens/s over the steps after the warm-up one (coefficient of variation)."""
    steps = [s["tps"] for s in _log(ctx)["steps"][1:] if s.get("tps")]
    if len(steps) < 3:
        raise Skip(f"{len(steps)} steps with a throughput after the warm-up one: too few to judge stability")
    mean = statistics.fmean(steps)
    cv = round(statistics.pstdev(steps) / mean, 4) if mean else 0.0
    lim = ctx.limit("training", "training.torchtitan.stability")
    status = baselines.grade(cv, lim)
    text = (f"tokens/s per GPU varies {cv:.1%} from step to step over {len(steps)} steps "
            f"(min {min(steps):,.0f}, max {max(steps):,.0f})")
    if status != "pass":
        text = f"unstable step time: {text}"
    return Verdict(status, text, cv, "ratio", lim.expected(), {"tps": steps})


@check("training.torchtitan.loss")
def loss_goes_down(ctx: Context) -> Verdict:
    logged = _log(ctx)["steps"]
    # the parser keeps only finite numbers: a step whose printed loss did not read as one logged NaN or inf
    broken = [s["step"] for s in logged if s.get("loss") is None]
    if broken:
        return Verdict("fail", f"the loss is not a finite number (NaN or inf) from step {broken[0]}", None,
                       evidence={"steps": broken[:20]})
    steps = logged
    if len(steps) < 2:
        raise Skip("fewer than two steps with a loss: nothing to compare")
    first, last = steps[0]["loss"], steps[-1]["loss"]
    evidence = {"first": {"step": steps[0]["step"], "loss": first}, "last": {"step": steps[-1]["step"], "loss": last}}
    lim = ctx.limit("training", "training.torchtitan.loss")
    ratio = round(last / first, 4) if first else 1.0
    status = baselines.grade(ratio, lim)
    text = f"loss {first:g} at step {steps[0]['step']} → {last:g} at step {steps[-1]['step']} ({ratio:.2f}x)"
    if status != "pass":
        text = f"the loss does not go down: {text}"
    return Verdict(status, text, ratio, "ratio", lim.expected(), evidence)
