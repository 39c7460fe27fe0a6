"""Training checks (role training): torchtitan pretraining runs judged from torchtitan's own log — did each run
to its end, tokens/s per GPU and MFU against the reference for the GPU and the model, step-to-step stability,
the loss going down, and a run over nodes keeping the per-GPU throughput of the same model on one node.

The role runs every entry of ``clustereval_training_runs`` as a probe instance and keeps its output on the node
that ran it; these checks judge them once for the cluster from what the nodes kept (``load_probes``,
``Context.host_probes``), as the collectives are judged. The contract with the role
(``clustereval.workload_plan.training_instances``):

* **name**: ``torchtitan_train@<run>`` (kept by every node: the run on that node alone; subject the node) or
  ``torchtitan_train_nodes@<run>`` (kept by the node that launched it: the run over ``nodes``; subject the
  node set, ``node1+node2``);
* **params** (the record's): ``run``, ``model`` (what the expected figures are matched on), ``steps``,
  ``nodes`` (the hosts, a list or comma-separated);
* **record**: the probe runner's ``{rc, stdout, stderr, timed_out, timeout, params, artifact}``; stdout is the
  probe's own lines then torchtitan's log (``parsers/probe_training.py``).

``options.runs`` (the planned runs: ``name``, ``model``, ``nodes``, ``steps``, else ``options.steps``) lets a
planned run over nodes that left nothing say why (fewer than two nodes; the launching node ``options.launch_host``
kept nothing).

Every result's params are ``run``, ``model``, ``steps`` and ``nodes`` (the count). tokens/s is torchtitan's
``tps``: tokens per second per GPU (it divides a rank's tokens by the step time and by the non-data-parallel
degree), so the per-GPU figure of a run over nodes compares with one on one node; the cluster's tokens/s is
that times the world size (nodes x GPUs per node), given as evidence.

- ``skip``: the probe's own reason (no torchtitan, no job file, no CUDA GPU, no launcher: ``clustereval-skip:``),
  no reference for the GPU and model, too few steps to judge, a run over nodes on a one-node evaluation.
- ``error`` (the harness, never the cluster): the probe timed out (``clustereval_training_timeout_s``), printed
  nothing readable, the launcher reached fewer nodes than asked (``clustereval-error:``), torchtitan exited
  before any step for a reason that is not the cluster's (a wrong argument, a missing asset), the data ran out.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any

from clustereval import baselines, parsers
from clustereval import facts as facts_mod
from clustereval.checks import CLUSTER_SUBJECT, Context, Skip, Verdict, check, tail_lines
from clustereval.results import set_subject
from clustereval.workload_plan import node_names

PROBE, NODES_PROBE, AREA = "torchtitan_train", "torchtitan_train_nodes", "training"


@dataclass
class Run:
    """One training run as a node kept it: its variant, and either parsed output or why there is none."""

    name: str
    model: str
    span: str  # "1": one node on its own; "all": over every node
    nodes: list[str]
    steps: int | None
    host: str | None = None
    record: dict[str, Any] | None = None
    data: dict[str, Any] | None = None
    status: str | None = None  # set when there is no log to judge: skip, fail or error
    why: str = ""
    evidence: dict[str, Any] = field(default_factory=dict)

    @property
    def subject(self) -> str:
        return set_subject(self.nodes) if self.nodes else CLUSTER_SUBJECT

    @property
    def params(self) -> dict[str, Any]:
        given = {"run": self.name, "model": self.model, "steps": self.steps, "nodes": len(self.nodes) or None}
        return {k: v for k, v in given.items() if v is not None}

    @property
    def label(self) -> str:
        where = self.subject if self.subject != CLUSTER_SUBJECT else "every node"
        return f"{self.name} ({self.model}) on {where}"

    @property
    def artifacts(self) -> list[str]:
        return [self.record["artifact"]] if (self.record or {}).get("artifact") else []

    @property
    def log(self) -> dict[str, Any]:
        return (self.data or {}).get("log") or {}

    @property
    def world_size(self) -> int | None:
        launch = (self.data or {}).get("launch") or {}
        world = launch.get("world_size") or self.log.get("world_size")
        return int(world) if isinstance(world, int) and world > 0 else None

    def verdict(self, status: str, summary: str, value: Any = None, unit: str | None = None,
                expected: dict[str, Any] | None = None, evidence: dict[str, Any] | None = None,
                series: list[dict[str, Any]] | None = None) -> Verdict:
        return Verdict(status, f"{self.label}: {summary}", value, unit, expected,
                       {**(evidence or {}), "_artifacts": self.artifacts}, series=list(series or []),
                       params=self.params, subject=self.subject)

    def unmeasured(self) -> Verdict:
        return self.verdict(self.status or "error", self.why, evidence=self.evidence)


def _steps(value: Any) -> int | None:
    return int(value) if str(value).isdigit() else None


def _read(run: Run) -> None:
    """Parse the run's output, or say (status, why) there is no log to judge."""
    record = run.record or {}
    if record.get("timed_out"):
        run.status = "error"
        run.why = (f"did not finish within {record.get('timeout')} s (clustereval_training_timeout_s): the run was "
                   f"stopped; its log so far is kept")
        run.evidence["last_lines"] = tail_lines(record.get("stdout") or "", 10)
        return
    try:
        data = parsers.parse(record.get("parser") or "probe-training", record.get("stdout") or "")
    except parsers.ParseError as exc:
        last = tail_lines(record.get("stderr") or "", 2)
        run.status, run.why = "error", f"could not read the training probe's output: {exc}" + (
            f" (stderr: {' | '.join(last)})" if last else "")
        return
    run.data = data
    if data.get("skip"):
        run.status, run.why = "skip", data["skip"]
        return
    if data.get("error"):
        run.status, run.why = "error", data["error"]
        return
    if data.get("log") is not None:
        return
    rc = record.get("rc")
    tail = data.get("tail") or tail_lines(record.get("stderr") or "", 3)
    run.evidence.update(failures=(data.get("failures") or [])[:10], last_lines=tail)
    if rc in (0, None):
        run.status, run.why = "error", f"torchtitan logged no training step ({data.get('log_error')})"
    elif data.get("distributed_failures"):
        # Dying before the first step on the fabric (NCCL, the rendezvous) is the cluster's: a run over nodes
        # that cannot even start.
        run.status = "fail"
        run.why = f"the training run died before its first step: {data['distributed_failures'][-1]}"
    else:
        last = (data.get("failures") or tail or ["no output"])[-1]
        run.status, run.why = "error", f"the training run exited with status {rc} before any step: {last[:300]}"


def runs(ctx: Context) -> list[Run]:
    """Every training run a node kept (and every planned run over nodes that kept nothing), parsed once."""
    key = "training:runs"
    if key in ctx.parse_cache:
        return ctx.parse_cache[key]
    found: list[Run] = []
    for probe, span in ((PROBE, "1"), (NODES_PROBE, "all")):
        for host, _name, instance, record in ctx.instances(probe):
            given = dict(record.get("params") or {})
            nodes = node_names(given.get("nodes")) or [host]
            run = Run(str(given.get("run") or instance), str(given.get("model") or "?"), span, nodes,
                      _steps(given.get("steps")), host, record)
            _read(run)
            found.append(run)
    kept = {r.name for r in found if r.span == "all"}
    hosts = sorted(ctx.host_probes) or sorted(ctx.fleet)
    launcher = str(ctx.options.get("launch_host") or (hosts[0] if hosts else "") or "the first node")
    for planned in ctx.options.get("runs") or []:
        if str(planned.get("nodes", 1)).lower() != "all" or str(planned.get("name")) in kept:
            continue
        run = Run(str(planned.get("name")), str(planned.get("model") or "?"), "all",
                  list(hosts) if len(hosts) > 1 else [],
                  _steps(planned.get("steps")) or _steps(ctx.options.get("steps")))
        if len(hosts) < 2:
            run.status = "skip"
            run.why = (f"a run over nodes needs two or more nodes; this evaluation has {len(hosts)} "
                       f"({', '.join(hosts) or 'none'})")
        else:
            run.status, run.why = "error", f"{launcher}, which launches the run over nodes, kept no output of it"
        found.append(run)
    ctx.parse_cache[key] = found
    return found


def _all(ctx: Context) -> list[Run]:
    found = runs(ctx)
    if not found:
        if not ctx.host_probes:
            raise Skip("no node kept a training run (none was reachable, or no run is configured)")
        raise Skip("no training run was kept (torchtitan_train@<run> probes): none is configured")
    return found


def _facts(ctx: Context, run: Run) -> dict[str, Any]:
    return {**facts_mod.for_subject(ctx.host_facts, run.subject), "model": run.model}


def _reference(ctx: Context, run: Run, check_id: str, prefix: str) -> baselines.Limit | str:
    """The expected value for the run's GPU and model, or why there is none (the skip's summary)."""
    try:
        return baselines.reference(AREA, check_id, _facts(ctx, run), run.params,
                                   ctx.options.get("baseline_overrides"))
    except baselines.NoReference as exc:
        return f"{prefix}{exc}"


def _world(run: Run) -> dict[str, Any]:
    launch = (run.data or {}).get("launch") or {}
    return {"world_size": run.world_size, "gpus_per_node": launch.get("gpus_per_node"),
            "launcher": launch.get("launcher"), "mesh": run.log.get("mesh") or None,
            "model_logged": run.log.get("model")}


@check("training.torchtitan.run")
def run_completed(ctx: Context) -> list[Verdict]:
    verdicts = []
    for run in _all(ctx):
        if run.status:
            verdicts.append(run.unmeasured())
            continue
        log, rc = run.log, (run.record or {}).get("rc")
        summary = log["summary"]
        evidence = {"summary": summary, "warnings": log.get("warnings"), "exit_status": rc, **_world(run)}
        last = summary["last_step"]
        if not log.get("complete") or rc not in (0, None):
            why = ((log.get("distributed_failures") or log.get("failures") or [])[-1:]
                   or [f"exit status {rc}"])[0]
            verdicts.append(run.verdict("fail", f"the training run died at step {last}: {why}", last, "steps",
                                        evidence=evidence))
        elif log.get("data_exhausted"):
            verdicts.append(run.verdict("error", f"the job's data ran out at step {last} of {run.steps} "
                                        f"(torchtitan: 'Ran out of data'): the dataset of the job file is too "
                                        f"small for the run, not the cluster's doing", last, "steps",
                                        evidence=evidence))
        elif not log.get("finished"):
            verdicts.append(run.verdict("warn", f"the training run logged {summary['steps_logged']} steps (last "
                                        f"{last}) but not 'Training completed'", last, "steps", evidence=evidence))
        else:
            where = f" on {run.world_size} GPUs" if run.world_size else ""
            verdicts.append(run.verdict("pass", f"the training run completed {last} steps{where}", last, "steps",
                                        evidence=evidence))
    return verdicts


def _graded(ctx: Context, check_id: str, key: str, what: str, unit: str) -> list[Verdict]:
    verdicts = []
    for run in _all(ctx):
        if run.status:
            verdicts.append(run.unmeasured())
            continue
        summary = run.log["summary"]
        value = summary.get(key)
        if value is None and key == "mfu_pct_mean" and summary.get("mfu_not_reported"):
            verdicts.append(run.verdict("skip", "torchtitan printed no MFU ('mfu: N/A': it leaves MFU out when "
                                        "FP8 or MX quantisation is on, the BF16 peak being no measure then); "
                                        "tokens/s per GPU judges the run"))
            continue
        if value is None:
            verdicts.append(run.verdict("error", f"torchtitan's log has no {what} figure after the warm-up step"))
            continue
        lim = _reference(ctx, run, check_id, f"{what} {value:g} {unit}; ")
        if isinstance(lim, str):
            verdicts.append(run.verdict("skip", lim))
            continue
        status = baselines.grade(value, lim)
        text = f"{what} {value:,.1f} {unit} (mean after the warm-up step)"
        text += {"pass": "", "warn": f", below the expected {lim.warn:,} {unit}",
                 "fail": f", below the failure level {lim.fail:,} {unit}"}[status]
        evidence = _world(run)
        if key == "tps_mean" and run.world_size:
            evidence["cluster_tok_per_s"] = round(value * run.world_size, 1)
            text += f"; {value * run.world_size:,.0f} tok/s over {run.world_size} GPUs"
        verdicts.append(run.verdict(status, text, round(value, 3), unit, lim.expected(), evidence))
    return verdicts


@check("training.torchtitan.tps")
def tokens_per_second(ctx: Context) -> list[Verdict]:
    return _graded(ctx, "training.torchtitan.tps", "tps_mean", "tokens/s per GPU", "tok/s")


@check("training.torchtitan.mfu")
def model_flops_utilisation(ctx: Context) -> list[Verdict]:
    return _graded(ctx, "training.torchtitan.mfu", "mfu_pct_mean", "MFU", "%")


def _series(run: Run, with_data: bool) -> list[dict[str, Any]]:
    """The run's logged steps as a curve (``series/<subject>/torchtitan-<run>.csv``)."""
    ref: dict[str, Any] = {"path": f"series/{run.subject}/torchtitan-{run.name}.csv", "kind": "curve", "x": "step"}
    if with_data:
        ref["data"] = [{"step": s["step"], "loss": s.get("loss"), "tps": s.get("tps"), "mfu_pct": s.get("mfu_pct"),
                        "memory_gib": s.get("memory_gib")} for s in run.log.get("steps") or []]
    return [ref]


@check("training.torchtitan.stability")
def step_stability(ctx: Context) -> list[Verdict]:
    """Spread of tokens/s over the steps after the warm-up one (coefficient of variation)."""
    lim = ctx.limit("training", "training.torchtitan.stability")
    verdicts = []
    for run in _all(ctx):
        if run.status:
            verdicts.append(run.unmeasured())
            continue
        steps = [s["tps"] for s in run.log["steps"][1:] if s.get("tps")]
        if len(steps) < 3:
            verdicts.append(run.verdict("skip", f"{len(steps)} steps with a throughput after the warm-up one: "
                                        f"too few to judge stability"))
            continue
        mean = statistics.fmean(steps)
        cv = round(statistics.pstdev(steps) / mean, 4) if mean else 0.0
        status = baselines.grade(cv, lim)
        text = (f"tokens/s per GPU varies {cv:.1%} from step to step over {len(steps)} steps "
                f"(min {min(steps):,.0f}, max {max(steps):,.0f})")
        if status != "pass":
            text = f"unstable step time: {text}"
        verdicts.append(run.verdict(status, text, cv, "ratio", lim.expected(), {"tps": steps},
                                    series=_series(run, True)))
    return verdicts


@check("training.torchtitan.loss")
def loss_goes_down(ctx: Context) -> list[Verdict]:
    lim = ctx.limit("training", "training.torchtitan.loss")
    verdicts = []
    for run in _all(ctx):
        if run.status:
            verdicts.append(run.unmeasured())
            continue
        logged = run.log["steps"]
        # the parser keeps only finite numbers: a step whose printed loss did not read as one logged NaN or inf
        broken = [s["step"] for s in logged if s.get("loss") is None]
        if broken:
            verdicts.append(run.verdict("fail", f"the loss is not a finite number (NaN or inf) from step "
                                        f"{broken[0]}", evidence={"steps": broken[:20]}))
            continue
        if len(logged) < 2:
            verdicts.append(run.verdict("skip", "fewer than two steps with a loss: nothing to compare"))
            continue
        first, last = logged[0]["loss"], logged[-1]["loss"]
        evidence = {"first": {"step": logged[0]["step"], "loss": first},
                    "last": {"step": logged[-1]["step"], "loss": last}}
        ratio = round(last / first, 4) if first else 1.0
        status = baselines.grade(ratio, lim)
        text = f"loss {first:g} at step {logged[0]['step']} → {last:g} at step {logged[-1]['step']} ({ratio:.2f}x)"
        if status != "pass":
            text = f"the loss does not go down: {text}"
        verdicts.append(run.verdict(status, text, ratio, "ratio", lim.expected(), evidence,
                                    series=_series(run, False)))
    return verdicts


@check("training.torchtitan.scaling")
def scaling_over_nodes(ctx: Context) -> list[Verdict]:
    """A run over nodes against the same model's runs on its nodes alone: tokens/s per GPU kept across the
    fabric (FSDP's all-gathers and reduce-scatters, expert parallelism's all-to-alls leave the node)."""
    found = _all(ctx)
    lim = ctx.limit("training", "training.torchtitan.scaling")
    verdicts = []
    for run in found:
        if run.span != "all":
            continue
        if run.status:
            verdicts.append(run.unmeasured())
            continue
        value = run.log["summary"].get("tps_mean")
        if value is None:
            verdicts.append(run.verdict("error", "torchtitan's log has no tokens/s figure after the warm-up step"))
            continue
        alone = {r.subject: r.log["summary"]["tps_mean"] for r in found
                 if r.span == "1" and r.model == run.model and not r.status and r.subject in run.nodes
                 and r.log["summary"].get("tps_mean") is not None}
        if not alone:
            verdicts.append(run.verdict("skip", f"no {run.model} run on its nodes alone to compare with (add a run "
                                        f"of the model with nodes: 1)",
                                        evidence={"single_node_tps": alone}))
            continue
        reference = statistics.median(alone.values())
        ratio = round(value / reference, 4) if reference else 0.0
        status = baselines.grade(ratio, lim)
        text = (f"{value:,.0f} tokens/s per GPU over {len(run.nodes)} nodes, {ratio:.0%} of the "
                f"{reference:,.0f} of a node alone (median of {len(alone)})")
        if status != "pass":
            text = f"throughput per GPU drops across nodes: {text}"
        verdicts.append(run.verdict(status, text, ratio, "ratio", lim.expected(),
                                    {"single_node_tps": alone, "single_node_median": reference, **_world(run)}))
    if not verdicts:
        raise Skip("no training run over nodes is configured (a run with nodes: all)")
    return verdicts

