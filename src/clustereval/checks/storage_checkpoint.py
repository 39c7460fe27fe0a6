"""Checkpoint save and load on the shared filesystem, sharded across ranks on several nodes: torch.save (one
file per rank) and torch.distributed.checkpoint (DCP, a DTensor state dict), each saved, loaded on other nodes
and verified.

Judged once per cluster from the one ``storage_checkpoint`` probe the launching node kept (role storage,
tasks/checkpoint.yml; the probe is described in checks/probes/storage_checkpoint.yml, the program's output in
parsers/probe_checkpoint.py). One verdict per method (``params.method``, ``params.directory``) with the node
set as subject (``node1+node2``). Aggregate GB/s is judged per node taking part (``baselines/storage.yml``:
its reference is ``checkpoint_nodes``), as a cluster's aggregate grows with its nodes.

- ``fail``: a rank's save or load refused by the storage (ENOSPC, EIO, a short write, a damaged file), a
  figure below the failure level, any tensor read back different from what was saved (integrity), a run that
  hung past its time limit.
- ``skip``: no shared directory (none given, none discovered, not seen by every node), one node only, mpirun or
  the PyTorch environment missing, DCP without numpy, a load not done because the save failed.
- ``error`` (the harness, never the cluster): output cut short or unreadable, a rank lost in a collective, the
  benchmark crashing.
"""

from __future__ import annotations

from typing import Any

from clustereval import baselines, parsers
from clustereval.checks import Context, HarnessError, Skip, Verdict, check, tail_lines
from clustereval.results import set_subject

PROBE = "storage_checkpoint"
LABELS = {"torch.save": "torch.save", "dcp": "torch.distributed.checkpoint"}
SERIES_COLUMNS = ["method", "step", "rank", "host", "bytes", "seconds", "gbps", "source_rank", "source_host",
                  "same_node", "verified"]


class Report:
    """The launching node's parsed run, or why there is none."""

    def __init__(self, host: str, probe: dict[str, Any], data: dict[str, Any]):
        self.host, self.probe, self.data = host, probe, data
        self.start = data.get("start") or {}
        hosts = list(dict.fromkeys(self.start.get("hosts") or []))
        self.subject = set_subject(hosts) if hosts else host
        self.directory = self.start.get("directory")
        self.artifacts = [probe["artifact"]] if probe.get("artifact") else []

    def params(self, method: str) -> dict[str, Any]:
        return {"method": method, "directory": self.directory}

    def line(self, method: str, step: str) -> dict[str, Any] | None:
        return next((r for r in self.data["results"] if r["method"] == method and r["step"] == step), None)

    def errors(self, method: str, step: str) -> list[dict[str, Any]]:
        return [e for e in self.data["errors"] if e.get("method") == method and e.get("step") == step]

    def general_errors(self) -> list[dict[str, Any]]:
        return [e for e in self.data["errors"] if not e.get("method")]

    @property
    def where(self) -> str:
        mount = self.start.get("mount") or {}
        nodes = self.start.get("nodes")
        ranks = self.start.get("world_size")
        return (f"{self.directory} ({mount.get('fstype') or '?'} {mount.get('source') or ''})".replace(" )", ")")
                + f" from {ranks} ranks on {nodes} nodes")


def _launched(ctx: Context) -> tuple[str, dict[str, Any]]:
    wanted = str(ctx.options.get("launcher") or "")
    nodes = list(ctx.options.get("nodes") or [])
    records = {host: probes[PROBE] for host, probes in sorted(ctx.host_probes.items()) if PROBE in (probes or {})}
    if wanted and wanted not in records:
        if len(nodes) == 1:
            raise Skip(f"only one node ({nodes[0]}) takes part: loading a shard another node wrote needs two")
        raise HarnessError(f"the launching node {wanted} kept no output of the checkpoint benchmark")
    if not records:
        if not ctx.host_probes:
            raise Skip("no node was reachable to run the checkpoint benchmark")
        if len(nodes) == 1:
            raise Skip(f"only one node ({nodes[0]}) takes part: loading a shard another node wrote needs two")
        raise Skip("the checkpoint benchmark ran on no node (none of the evaluated nodes launched it)")
    host = wanted or next(iter(records))
    return host, records[host]


def _report(ctx: Context) -> Report:
    host, probe = _launched(ctx)
    ctx.extra_artifacts.extend([probe["artifact"]] if probe.get("artifact") else [])
    if probe.get("missing"):
        said = tail_lines(probe.get("stderr") or "", 1)
        raise Skip(f"the checkpoint benchmark cannot start on {host}: {said[0] if said else 'a tool is missing'}")
    if probe.get("timed_out"):
        last = tail_lines(probe.get("stdout") or "", 3) + tail_lines(probe.get("stderr") or "", 3)
        raise _Hang(host, probe, last)
    try:
        data = parsers.parse(probe.get("parser") or "probe-checkpoint", probe.get("stdout") or "")
    except parsers.ParseError as exc:
        last = tail_lines(probe.get("stderr") or "", 1)
        status = f" (exit status {probe.get('rc')}{': ' + last[0] if last else ''})" if probe.get("rc") else ""
        raise HarnessError(f"could not read the checkpoint benchmark's output on {host}: {exc}{status}") from None
    report = Report(host, probe, data)
    if data["skipped"]:
        raise Skip(f"checkpoint benchmark: {data['skipped']}")
    return report


class _Hang(Exception):
    def __init__(self, host: str, probe: dict[str, Any], last: list[str]):
        self.host, self.probe, self.last = host, probe, last
        super().__init__(f"the checkpoint benchmark launched on {host} did not finish within {probe.get('timeout')} s "
                         "(a save or load that hangs: a stuck client or server)")


def _each_method(ctx: Context, judge) -> list[Verdict]:
    """One verdict per method the run was asked for; a hang is one failure with its last lines (the methods it
    did not reach are unknown)."""
    try:
        report = _report(ctx)
    except _Hang as hang:
        nodes = list(ctx.options.get("nodes") or [])
        kept = [hang.probe["artifact"]] if hang.probe.get("artifact") else []
        return [Verdict("fail", str(hang), evidence={"last_lines": hang.last, "_artifacts": kept},
                        subject=set_subject(nodes) if len(nodes) > 1 else None)]
    verdicts = []
    for method in report.start.get("methods") or []:
        params = report.params(method)
        if method in report.data["method_skips"]:
            verdicts.append(Verdict("skip", f"{LABELS.get(method, method)}: {report.data['method_skips'][method]}",
                                    params=params, subject=report.subject))
            continue
        verdict = judge(ctx, report, method)
        verdict.params, verdict.subject = params, report.subject
        verdict.evidence.setdefault("_artifacts", report.artifacts)
        verdicts.append(verdict)
    return verdicts


def _failure(report: Report, method: str, step: str) -> Verdict | None:
    """The verdict of a step a rank failed in: the storage's refusal fails, anything else is the harness's."""
    label = LABELS.get(method, method)
    errors = report.errors(method, step)
    line = report.line(method, step)
    if not errors and line is not None and not line["failed_ranks"]:
        return None
    evidence: dict[str, Any] = {"errors": errors[:8], "failed_ranks": (line or {}).get("failed_ranks")}
    if line is not None:
        evidence["ranks"] = [{k: r.get(k) for k in ("rank", "host", "bytes", "seconds", "free_bytes") if k in r}
                             for r in line["ranks"] if r["rank"] in line["failed_ranks"]][:8]
    if not errors:
        general = report.general_errors()
        why = general[-1]["message"] if general else "no result line"
        return Verdict("error", f"{label} {step} on {report.where}: the benchmark stopped: {why}", evidence=evidence)
    storage = [e for e in errors if e["kind"] == "storage"]
    shown = (storage or errors)[0]
    who = sorted({str(e.get("host")) for e in (storage or errors)})
    text = (f"{label} {step} on {report.where} failed on {len(storage or errors)} rank(s) ({', '.join(who)}): "
            f"{shown['message']}")
    return Verdict("fail" if storage else "error", text, evidence=evidence)


def _series(method: str, step: str, line: dict[str, Any]) -> list[dict[str, Any]]:
    rows = [{"method": method, "step": step, **{k: r.get(k) for k in SERIES_COLUMNS[2:]}} for r in line["ranks"]]
    return [{"path": f"series/_cluster/storage-checkpoint-{step}.csv", "kind": "curve", "x": "rank",
             "columns": SERIES_COLUMNS, "filter": {"method": method}, "data": rows}]


def _rate(ctx: Context, report: Report, method: str, step: str) -> Verdict:
    label = LABELS.get(method, method)
    failed = _failure(report, method, step)
    if failed is not None:
        return failed
    line = report.line(method, step)
    if line is None:
        if step == "load":
            raise HarnessError(f"{label}: the benchmark saved but printed no load line")
        raise HarnessError(f"{label}: the benchmark printed no save line")
    value = float(line["gbps"]) if line["gbps"] is not None else 0.0
    nodes = int(line.get("nodes") or report.start.get("nodes") or 1)
    rates = [r["gbps"] for r in line["ranks"] if r.get("gbps") is not None]
    evidence: dict[str, Any] = {
        "bytes": line["bytes"], "seconds": line["seconds"], "nodes": nodes, "world_size": line["world_size"],
        "per_node_gbps": round(value / nodes, 4), "mount": report.start.get("mount"),
        "rank_gbps": {"min": min(rates, default=None), "max": max(rates, default=None)},
        "slowest_rank": min(line["ranks"], key=lambda r: r.get("gbps") or 0.0).get("rank"),
        "bytes_per_rank": report.start.get("bytes_per_rank"), "tensors": report.start.get("tensors")}
    facts = {**ctx.facts, "checkpoint_nodes": nodes}
    series = _series(method, step, line)
    moved = f"{line['bytes'] / 1e9:.3g} GB in {line['seconds']:.3g} s"
    try:
        lim = ctx.reference("storage", f"storage.checkpoint.{step}", facts=facts)
    except Skip as exc:
        return Verdict("skip", f"{label} {step} on {report.where}: {value:.4g} GB/s ({moved}); {exc}", round(value, 4),
                       "GB/s", evidence=evidence, series=series)
    status = baselines.grade(value, lim)
    text = f"{label} {step} on {report.where}: {value:.4g} GB/s aggregate ({moved}, {value / nodes:.3g} GB/s per node)"
    if status != "pass":
        level = lim.fail if status == "fail" else lim.warn
        which = "the failure level" if status == "fail" else "the expected"
        text += f", below {which} {level:.3g} GB/s for {nodes} nodes"
    same = [r["rank"] for r in line["ranks"] if r.get("same_node")]
    if same and status == "pass":
        status = "warn"
        text += (f"; ranks {same} read a shard written on their own node (the ranks are not placed node by node), "
                 "so their reads may have come from its page cache")
    return Verdict(status, text, round(value, 4), "GB/s", lim.expected(), evidence, series=series)


def _unsaved(report: Report, method: str, what: str) -> Verdict | None:
    """For the load and the integrity: a save the storage refused leaves nothing to judge (skip: the save check
    fails); a save the harness lost is the harness's here too (error)."""
    failed = _failure(report, method, "save")
    if failed is None:
        return None
    label = LABELS.get(method, method)
    if failed.status == "fail":
        return Verdict("skip", f"{label}: {what}, the save did not complete (storage.checkpoint.save says why)",
                       evidence=failed.evidence)
    return Verdict("error", f"{label}: {what}: {failed.summary}", evidence=failed.evidence)


@check("storage.checkpoint.save")
def checkpoint_save(ctx: Context) -> list[Verdict]:
    return _each_method(ctx, lambda c, report, method: _rate(c, report, method, "save"))


@check("storage.checkpoint.load")
def checkpoint_load(ctx: Context) -> list[Verdict]:
    def judge(c: Context, report: Report, method: str) -> Verdict:
        unsaved = _unsaved(report, method, "not loaded")
        return unsaved if unsaved is not None else _rate(c, report, method, "load")
    return _each_method(ctx, judge)


@check("storage.checkpoint.integrity")
def checkpoint_integrity(ctx: Context) -> list[Verdict]:
    def judge(c: Context, report: Report, method: str) -> Verdict:
        label = LABELS.get(method, method)
        unsaved = _unsaved(report, method, "nothing to verify")
        if unsaved is not None:
            return unsaved
        failed = _failure(report, method, "load")
        if failed is not None:
            failed.summary = failed.summary.replace(f"{label} load", f"{label}: reading back", 1)
            return failed
        line = report.line(method, "load")
        if line is None:
            raise HarnessError(f"{label}: the benchmark saved but printed no load line to verify")
        tensors = int(report.start.get("tensors") or 0)
        checked = tensors * len(line["ranks"])
        wrong = sum(len(m.get("tensors") or []) for m in line["mismatches"])
        evidence = {"mismatches": line["mismatches"][:16], "tensors_checked": checked,
                    "pairs": [{"rank": r["rank"], "host": r.get("host"), "source_rank": r.get("source_rank"),
                               "source_host": r.get("source_host")} for r in line["ranks"]][:64]}
        if wrong or not line["verified"]:
            shown = "; ".join(f"rank {m['rank']} reading rank {m.get('source_rank')}'s shard: "
                              f"{', '.join(m.get('tensors') or ['?'])}" for m in line["mismatches"][:4])
            return Verdict("fail", f"{label} on {report.where}: {wrong} of {checked} tensors read back on another "
                           f"node differ from what was saved ({shown or 'not verified'})", wrong, "tensors",
                           evidence=evidence)
        return Verdict("pass", f"{label} on {report.where}: all {checked} tensors read back on another node "
                       "byte-identical to what was saved (SHA-256)", 0, "tensors", evidence=evidence)
    return _each_method(ctx, judge)
