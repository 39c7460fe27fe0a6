"""ior, mdtest and elbencho on the shared tier, run from one node across the storage hosts, judged once per cluster.

The probes (``checks/probes/storage_hpcio.yml``; role storage, tasks/hpcio.yml) run on the coordinating node and
drive every storage host: ``storage_ior@<access>`` (IOR "easy", sequential write and read, file per process or one
shared file) and ``storage_mdtest`` (many small files: create, stat, read, remove) through mpirun,
``storage_elbencho@large`` / ``@small`` in elbencho's distributed mode. Their stdout is the tool's own output,
read with the existing parsers (``parsers/ior.py``, ``mdtest.py``, ``elbencho.py``), after a
``clustereval-dir:`` line saying where it ran. One verdict per run, its subject the nodes that took part
(``node1+node2``).

- ``skip``: the tool (or mpirun) is not installed on a node, or there is no shared directory — the probe says so
  on a ``clustereval-skip:`` line; a phase the output does not hold (a capture of a create-only run).
- ``error`` (the harness, never the cluster): no output kept by the coordinator, a ``clustereval-error:`` line
  (a service it could not start), output no parser reads, a garbled capture (two IOR banners, merge-conflict
  markers, an mdtest command line with unbalanced quotes), an IOR run cut before its ``Finished`` line.
- ``fail``: the tool exited non-zero (mpirun could not reach the nodes, an I/O error), IOR printed ``ERROR``
  lines, a run hung past its timeout, or the figure is below the fail level.
- ``pass`` / ``warn``: against ``baselines/storage.yml``. Bandwidth is judged per client node (the reference is
  the node count times the per-node figure: a filesystem that does not grow with its clients falls behind),
  metadata rates over the whole run (a metadata service is shared, so the cluster's total is what jobs get).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from clustereval import baselines, parsers
from clustereval.checks import Context, HarnessError, Skip, Verdict, check, tail_lines
from clustereval.results import CLUSTER_SUBJECT, set_subject

AREA = "storage"
SKIP_MARK = "clustereval-skip: "
ERROR_MARK = "clustereval-error: "
_WHERE = re.compile(r"^clustereval-dir: fstype=(?P<fstype>\S*) source=(?P<source>\S*) path=(?P<path>.*)$", re.M)
TOOLS = {"storage_ior": "ior", "storage_mdtest": "mdtest", "storage_elbencho": "elbencho"}
NODES_FACT = "hpcio_client_nodes"


@dataclass
class Run:
    """One benchmark run kept by the coordinating node, with its parsed output (or why there is none)."""

    host: str
    name: str
    instance: str
    probe: dict[str, Any]
    nodes: list[str]
    data: dict[str, Any] | None = None
    where: dict[str, str] = field(default_factory=dict)

    @property
    def tool(self) -> str:
        return TOOLS[self.name.partition("@")[0]]

    @property
    def subject(self) -> str:
        return set_subject(self.nodes) if self.nodes else CLUSTER_SUBJECT

    @property
    def label(self) -> str:
        where = f" in {self.where['path']} ({self.where['fstype'] or '?'})" if self.where.get("path") else ""
        on = self.subject if self.nodes else "the cluster"
        variant = f" {self.instance}" if self.instance else ""
        return f"{self.tool}{variant} on {on}{where}"

    def evidence(self, **extra: Any) -> dict[str, Any]:
        out = {"directory": self.where or None, "nodes": self.nodes, "probe": self.name, **extra}
        if self.probe.get("artifact"):
            out["_artifacts"] = [self.probe["artifact"]]
        return out


def _names(value: Any) -> list[str]:
    if isinstance(value, str):
        return [n for n in (s.strip() for s in value.split(",")) if n]
    return [str(n) for n in value] if isinstance(value, list | tuple) else []


def _records(ctx: Context, template: str) -> list[Run]:
    """Every ``template`` (or ``template@...``) probe the coordinating node kept; Skip/HarnessError when none."""
    tool = TOOLS[template]
    wanted = str(ctx.options.get("coordinator") or "")
    found = []
    for host, probes in sorted(ctx.host_probes.items()):
        for name, probe in sorted((probes or {}).items()):
            base, _, instance = name.partition("@")
            if base == template and (not wanted or host == wanted):
                found.append(Run(host, name, instance, probe, _names((probe.get("params") or {}).get("names"))))
    if found:
        return found
    if wanted:
        raise HarnessError(f"the coordinating node {wanted} kept no {tool} output")
    if not ctx.host_probes:
        raise Skip(f"no node was reachable to run {tool}")
    raise Skip(f"{tool} ran on no node (none of the evaluated nodes was chosen to coordinate it)")


def _outcome(run: Run) -> Verdict | None:
    """The verdict of a run without a measurement (skip, error, fail), or None once ``run.data`` holds its output."""
    probe, stdout = run.probe, str(run.probe.get("stdout") or "")
    evidence = run.evidence()
    if probe.get("missing"):
        return Verdict("skip", f"{run.label}: `{probe.get('tool') or run.tool}` is not installed on {run.host}",
                       evidence=evidence, subject=run.subject)
    if probe.get("timed_out"):
        tail = tail_lines(stdout, 10) + tail_lines(str(probe.get("stderr") or ""), 5)
        status = "fail" if probe.get("on_timeout") == "fail" else "error"
        return Verdict(status, f"{run.label}: did not finish within {probe.get('timeout')} s (a hang of the shared "
                       "filesystem, or sizes too large for it)", evidence={**evidence, "last_lines": tail},
                       subject=run.subject)
    match = _WHERE.search(stdout)
    if match:
        run.where = match.groupdict()
        evidence = run.evidence()
    for line in stdout.splitlines():
        if line.startswith(SKIP_MARK):
            return Verdict("skip", line[len(SKIP_MARK):].strip(), evidence=evidence, subject=run.subject)
        if line.startswith(ERROR_MARK):
            return Verdict("error", f"{run.label}: {line[len(ERROR_MARK):].strip()}", evidence=evidence,
                           subject=run.subject)
    if probe.get("rc") not in (0, None):
        last = tail_lines(str(probe.get("stderr") or ""), 1) or tail_lines(stdout, 1)
        return Verdict("fail", f"{run.label}: {run.tool} exited with status {probe.get('rc')}: "
                       f"{last[0] if last else 'no output'}",
                       evidence={**evidence, "rc": probe.get("rc"), "last_lines": tail_lines(stdout, 5)},
                       subject=run.subject)
    try:
        run.data = parsers.parse(probe.get("parser") or run.tool, stdout)
    except parsers.ParseError as exc:
        return Verdict("error", f"{run.label}: could not read the {run.tool} output: {exc}", evidence=evidence,
                       subject=run.subject)
    data = run.data
    if data.get("garbled"):
        why = next((w for w in data.get("warnings") or [] if "garbled" in w), "garbled output")
        return Verdict("error", f"{run.label}: the captured {run.tool} output is garbled ({why}); its figures are "
                       "not trusted", evidence={**evidence, "warnings": data.get("warnings")}, subject=run.subject)
    if run.tool == "ior" and data.get("errors"):
        return Verdict("fail", f"{run.label}: IOR reported errors: {data['errors'][0]}",
                       evidence={**evidence, "errors": data["errors"][:5]}, subject=run.subject)
    if run.tool == "ior" and not data.get("finished") and not data.get("summary"):
        return Verdict("error", f"{run.label}: the IOR output ends before its summary and 'Finished' line (a cut "
                       "capture)", evidence={**evidence, "warnings": data.get("warnings")}, subject=run.subject)
    if run.tool == "elbencho" and not data.get("complete"):
        return Verdict("error", f"{run.label}: the elbencho output is cut short ({'; '.join(data['warnings'])})",
                       evidence={**evidence, "warnings": data.get("warnings")}, subject=run.subject)
    return None


def _client_nodes(run: Run) -> int:
    """How many client nodes the run used: what the tool printed (IOR's ``nodes``, mdtest's launch line), else the
    nodes the role gave it, else one."""
    data = run.data or {}
    printed = (data.get("options") or {}).get("nodes") if run.tool == "ior" else data.get("nodes")
    try:
        return max(1, int(str(printed).strip()))
    except (TypeError, ValueError):
        return max(1, len(run.nodes))


def _graded(ctx: Context, run: Run, check_id: str, value: float, unit: str, what: str, params: dict[str, Any],
            per_node: bool, evidence: dict[str, Any]) -> Verdict:
    nodes = _client_nodes(run)
    facts = {**ctx.facts, NODES_FACT: nodes}
    shown = f"{value:,.4g} {unit}" + (f" over {nodes} node{'s' * (nodes > 1)} ({value / nodes:,.3g} {unit} per node)"
                                      if per_node else "")
    base = {"subject": run.subject, "params": params or None, "evidence": {**run.evidence(), **evidence,
                                                                             "client_nodes": nodes}}
    try:
        lim = ctx.reference(AREA, check_id, facts=facts)
    except Skip as exc:
        return Verdict("skip", f"{run.label}: {what} {shown}; {exc}", round(value, 4), unit, **base)
    status = baselines.grade(value, lim)
    text = f"{run.label}: {what} {shown}"
    if status != "pass":
        level = lim.fail if status == "fail" else lim.warn
        each = f"{level / nodes:,.3g} {unit} per node, " if per_node else ""
        text += f", below {'the failure level ' if status == 'fail' else ''}{level:,.4g} {unit} ({each}{lim.matched})"
    return Verdict(status, text, round(value, 4), unit, lim.expected(), **base)


# ------------------------------------------------------------------------------------------------------- ior


def _ior(ctx: Context, check_id: str, op: str) -> list[Verdict]:
    verdicts = []
    for run in _records(ctx, "storage_ior"):
        outcome = _outcome(run)
        access = (run.probe.get("params") or {}).get("access") or run.instance or None
        params = {"access": access} if access else {}
        if outcome is not None:
            outcome.params = params or None
            verdicts.append(outcome)
            continue
        data = run.data or {}
        access = access or (data.get("options") or {}).get("access")
        params = {"access": access} if access else {}
        mibps = data.get(f"{op}_mean_mibps")
        if mibps is None:
            mibps = data.get(f"{op}_max_mibps")
        if not mibps:
            verdicts.append(Verdict("skip", f"{run.label}: the IOR output has no {op} result (the run did not "
                                    f"{op})", subject=run.subject, params=params or None, evidence=run.evidence()))
            continue
        rows = [r for r in data.get("summary") or [] if r.get("operation") == op]
        evidence = {"mibps": {k: rows[0].get(k) for k in ("max_mibps", "min_mibps", "mean_mibps", "stddev_mibps")}
                    if rows else {"max_mibps": mibps}, "tasks": (data.get("options") or {}).get("tasks"),
                    "transfer": (data.get("options") or {}).get("xfersize"),
                    "block": (data.get("options") or {}).get("blocksize"),
                    "repetitions": (data.get("options") or {}).get("repetitions"), "version": data.get("version")}
        verdicts.append(_graded(ctx, run, check_id, float(mibps) / 1024, "GiB/s", f"{op} bandwidth", params, True,
                                evidence))
    return verdicts


@check("storage.ior.write")
def ior_write(ctx: Context) -> list[Verdict]:
    return _ior(ctx, "storage.ior.write", "write")


@check("storage.ior.read")
def ior_read(ctx: Context) -> list[Verdict]:
    return _ior(ctx, "storage.ior.read", "read")


# ---------------------------------------------------------------------------------------------------- mdtest

MDTEST_ROWS = {"storage.mdtest.file_create": ("file_creation", "file creation"),
               "storage.mdtest.file_stat": ("file_stat", "file stat"),
               "storage.mdtest.file_read": ("file_read", "file read"),
               "storage.mdtest.file_remove": ("file_removal", "file removal")}


def _mdtest(ctx: Context, check_id: str) -> list[Verdict]:
    key, what = MDTEST_ROWS[check_id]
    verdicts = []
    for run in _records(ctx, "storage_mdtest"):
        outcome = _outcome(run)
        if outcome is not None:
            verdicts.append(outcome)
            continue
        data = run.data or {}
        rows = {row["key"]: row for row in data.get("rate_rows") or []}
        row = rows.get(key)
        if not row or not row.get("mean_ops_per_s"):
            # mdtest prints 0.000 for a phase it was not asked to run (a create-only run's stat and remove)
            verdicts.append(Verdict("skip", f"{run.label}: mdtest measured no {what} (its rate is "
                                    f"{'missing' if not row else '0: the phase did not run'})",
                                    subject=run.subject, evidence=run.evidence()))
            continue
        evidence = {"ops_per_s": {k: row.get(f"{k}_ops_per_s") for k in ("max", "min", "mean", "stddev")},
                    "tasks": data.get("tasks"), "files": data.get("files"), "iterations": data.get("iterations"),
                    "version": data.get("version"), "finished": data.get("finished"),
                    "warnings": data.get("warnings")}
        verdicts.append(_graded(ctx, run, check_id, float(row["mean_ops_per_s"]), "ops/s", f"{what} rate", {},
                                False, evidence))
    return verdicts


@check("storage.mdtest.file_create")
def mdtest_create(ctx: Context) -> list[Verdict]:
    return _mdtest(ctx, "storage.mdtest.file_create")


@check("storage.mdtest.file_stat")
def mdtest_stat(ctx: Context) -> list[Verdict]:
    return _mdtest(ctx, "storage.mdtest.file_stat")


@check("storage.mdtest.file_read")
def mdtest_read(ctx: Context) -> list[Verdict]:
    return _mdtest(ctx, "storage.mdtest.file_read")


@check("storage.mdtest.file_remove")
def mdtest_remove(ctx: Context) -> list[Verdict]:
    return _mdtest(ctx, "storage.mdtest.file_remove")


# -------------------------------------------------------------------------------------------------- elbencho

# check -> (the run's mode, elbencho's phase, the figure, unit, what it is, judged per node)
ELBENCHO = {
    "storage.elbencho.write": ("large", "WRITE", "throughput_mibps", "GiB/s", "large-file write bandwidth", True),
    "storage.elbencho.read": ("large", "READ", "throughput_mibps", "GiB/s", "large-file read bandwidth", True),
    "storage.elbencho.small_write": ("small", "WRITE", "files_per_s", "files/s", "small-file write rate", False),
    "storage.elbencho.small_read": ("small", "READ", "files_per_s", "files/s", "small-file read rate", False),
    "storage.elbencho.small_delete": ("small", "RMFILES", "files_per_s", "files/s", "small-file delete rate", False),
}


def _elbencho(ctx: Context, check_id: str) -> list[Verdict]:
    mode, phase, figure, unit, what, per_node = ELBENCHO[check_id]
    verdicts = []
    runs = [run for run in _records(ctx, "storage_elbencho")
            if ((run.probe.get("params") or {}).get("mode") or run.instance or mode) == mode]
    if not runs:
        raise Skip(f"elbencho ran no {mode}-file run (only the other mode's checks were selected)")
    for run in runs:
        outcome = _outcome(run)
        if outcome is not None:
            verdicts.append(outcome)
            continue
        phases = [p for p in (run.data or {}).get("phases") or [] if p["operation"] == phase]
        if not phases:
            verdicts.append(Verdict("skip", f"{run.label}: elbencho ran no {phase} phase", subject=run.subject,
                                    evidence=run.evidence()))
            continue
        for item in phases:
            value = (item.get("last_done") or {}).get(figure)
            params = {"dataset": item["dataset"]} if item.get("dataset") else {}
            if not value:
                verdicts.append(Verdict("skip", f"{run.label}: elbencho's {phase} phase has no "
                                        f"{figure.replace('_', ' ')} figure", subject=run.subject,
                                        params=params or None, evidence=run.evidence()))
                continue
            value = float(value) / 1024 if unit == "GiB/s" else float(value)
            evidence = {"phase": phase, "first_done": item.get("first_done"), "last_done": item.get("last_done"),
                        "warnings": (run.data or {}).get("warnings")}
            verdicts.append(_graded(ctx, run, check_id, value, unit, what, params, per_node, evidence))
    return verdicts


@check("storage.elbencho.write")
def elbencho_write(ctx: Context) -> list[Verdict]:
    return _elbencho(ctx, "storage.elbencho.write")


@check("storage.elbencho.read")
def elbencho_read(ctx: Context) -> list[Verdict]:
    return _elbencho(ctx, "storage.elbencho.read")


@check("storage.elbencho.small_write")
def elbencho_small_write(ctx: Context) -> list[Verdict]:
    return _elbencho(ctx, "storage.elbencho.small_write")


@check("storage.elbencho.small_read")
def elbencho_small_read(ctx: Context) -> list[Verdict]:
    return _elbencho(ctx, "storage.elbencho.small_read")


@check("storage.elbencho.small_delete")
def elbencho_small_delete(ctx: Context) -> list[Verdict]:
    return _elbencho(ctx, "storage.elbencho.small_delete")
