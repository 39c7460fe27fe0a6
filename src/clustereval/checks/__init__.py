"""Deciding pass / warn / fail / skip / error: check functions over collected probe output.

A role collects raw tool output on a node ("probes": command, rc, stdout, stderr, duration) and hands
it to the ``clustereval.gpu.judge`` action, which calls :func:`evaluate` for each selected check. A
check function receives a :class:`Context` and returns a :class:`Verdict`; it raises :class:`Skip`
when the check does not apply and :class:`HarnessError` when the harness (not the cluster) failed.
:func:`evaluate` turns that into a complete check result (see ``clustereval.results``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from clustereval import baselines
from clustereval.checks import catalogue
from clustereval.parsers import ParseError, parse
from clustereval.results import CLUSTER_SUBJECT, now_iso

CheckFn = Callable[["Context"], "Verdict"]
_CHECKS: dict[str, CheckFn] = {}


class Skip(Exception):
    """The check does not apply here; the message says why."""


class HarnessError(Exception):
    """The harness could not obtain evidence (timeout, parse error, missing probe)."""


class ProbeFailed(Exception):
    """A tool ran and failed on the node (non-zero exit); usually the cluster's fault."""

    def __init__(self, probe: dict[str, Any]):
        self.probe = probe
        detail = (probe.get("stderr") or probe.get("stdout") or "").strip().splitlines()
        tail = detail[-1] if detail else "no output"
        super().__init__(f"`{probe.get('cmd')}` exited with status {probe.get('rc')}: {tail[:300]}")


class ProbeTimedOut(Exception):
    """A probe whose timeout is the cluster's fault (a collective that hangs) ran past it."""

    def __init__(self, probe: dict[str, Any]):
        self.probe = probe
        self.tail = tail_lines(probe.get("stdout") or "", 10) + tail_lines(probe.get("stderr") or "", 5)
        super().__init__(f"`{probe.get('cmd')}` did not finish within {probe.get('timeout')} s (a hang)")


def tail_lines(text: str, count: int) -> list[str]:
    """The last ``count`` non-empty lines of ``text``, each cut to 300 characters (evidence of a hang)."""
    return [line[:300] for line in text.splitlines() if line.strip()][-count:]


@dataclass
class Verdict:
    """What a check concluded. ``series`` and ``measured`` follow the result contract
    (``clustereval.results``); ``params`` and ``subject``, when set, name the variant and the subject
    the verdict is about when they differ from the context's (a per-GPU verdict of a node's session)."""

    status: str
    summary: str
    value: Any = None
    unit: str | None = None
    expected: dict[str, Any] | None = None
    evidence: dict[str, Any] = field(default_factory=dict)
    series: list[dict[str, Any]] = field(default_factory=list)
    measured: dict[str, Any] | None = None
    params: dict[str, Any] | None = None
    subject: str | None = None


@dataclass
class Context:
    """What a check function may look at: this subject's probes (or the fleet's facts) and settings."""

    subject: str
    probes: dict[str, dict[str, Any]] = field(default_factory=dict)
    fleet: dict[str, dict[str, Any]] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)
    used: list[str] = field(default_factory=list)
    extra_artifacts: list[str] = field(default_factory=list)
    # Parsed probe outputs, shared by every check judged from the same probes (parse once per node).
    parse_cache: dict[str, Any] = field(default_factory=dict)
    # The variant being judged (the result's params) and what the run learnt about the hardware.
    params: dict[str, Any] = field(default_factory=dict)
    facts: dict[str, Any] = field(default_factory=dict)
    # For cluster-wide checks: every host's hardware facts, and probes each host kept earlier in the run.
    host_facts: dict[str, dict[str, Any]] = field(default_factory=dict)
    host_probes: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    # For checks judging a session: its streams' chunks and series (clustereval.sessions.SessionView).
    session: Any = None
    # The probes the check's catalogue entry names; None lets the check read any (facts functions, tests).
    declared: frozenset[str] | None = None

    def raw(self, name: str) -> dict[str, Any]:
        """The probe ``name`` as collected, whatever its exit status (counted as evidence); raises
        HarnessError when it was not collected or timed out (a probe whose catalogue entry says a timeout
        is the cluster's fault raises :class:`ProbeTimedOut`)."""
        self._declared_or_raise(name)
        probe = self.probes.get(name)
        if probe is None:
            raise HarnessError(f"probe {name!r} was not collected on {self.subject}")
        if name not in self.used:
            self.used.append(name)
        if probe.get("timed_out"):
            if probe.get("on_timeout") == "fail":
                raise ProbeTimedOut(probe)
            raise HarnessError(f"`{probe.get('cmd')}` timed out after {probe.get('timeout')} s")
        return probe

    def instances(self, template: str) -> list[tuple[str, str, str, dict[str, Any]]]:
        """``(host, probe name, instance, record)`` for every ``<template>@<instance>`` probe a host kept (the
        runs of a mesh, a sweep or a ring read back for a cluster-wide check), hosts and names in order."""
        out = []
        for host, probes in sorted(self.host_probes.items()):
            for name, probe in sorted(probes.items()):
                base, _, instance = name.partition("@")
                if base == template and instance:
                    out.append((host, name, instance, probe))
        return out

    def _declared_or_raise(self, name: str) -> None:
        if self.declared is not None and name not in self.declared:
            # Select-before-run collects only the probes selected checks name: reading another one would
            # work in a full run and break under --tags, so it is a bug in the check (or its catalogue entry).
            raise HarnessError(f"probe {name!r} is not among the probes the check's catalogue entry names "
                               f"({', '.join(sorted(self.declared)) or 'none'})")

    def probe(self, name: str) -> dict[str, Any]:
        """The raw probe ``name``; raises Skip / HarnessError / ProbeFailed as its outcome says."""
        probe = self.raw(name)
        if probe.get("missing"):
            raise Skip(f"`{probe.get('tool') or probe.get('cmd')}` is not installed on {self.subject}")
        if probe.get("rc") not in (0, None):
            raise ProbeFailed(probe)
        return probe

    def parsed(self, name: str) -> dict[str, Any]:
        """The probe's output parsed with its tool's parser (cached); parse errors are harness errors."""
        if name in self.parse_cache:
            # The cache is shared with the facts functions and other checks: it must not lift the rule above.
            self._declared_or_raise(name)
            if name not in self.used:
                self.used.append(name)
            return self.parse_cache[name]
        probe = self.probe(name)
        tool = probe.get("parser")
        if not tool:
            raise HarnessError(f"probe {name!r} names no parser")
        try:
            data = parse(tool, probe.get("stdout", ""))
        except ParseError as exc:
            shown = probe.get("cmd") if len(str(probe.get("cmd") or "")) <= 120 else f"the {name} probe"
            raise HarnessError(f"could not parse `{shown}` output: {exc}") from None
        self.parse_cache[name] = data
        return data

    def reference(self, area: str, check: str, skip_prefix: str = "",
                  facts: dict[str, Any] | None = None) -> baselines.Limit:
        """The expected value of ``check`` for this subject's hardware (``facts``, default the context's) and
        variant (``baselines/<area>.yml``, inventory overrides first); none known for this hardware is a Skip
        saying what was looked for."""
        try:
            return baselines.reference(area, check, self.facts if facts is None else facts, self.params,
                                       self.options.get("baseline_overrides"))
        except baselines.NoReference as exc:
            raise Skip(f"{skip_prefix}{exc}") from None

    def limit(self, area: str, check: str) -> baselines.Limit:
        classes = self.options.get("hardware_classes") or {}
        return baselines.limit(area, check, classes.get(area), self.options.get("baseline_overrides"))


def check(check_id: str) -> Callable[[CheckFn], CheckFn]:
    """Register a check function for a catalogue id."""

    def deco(fn: CheckFn) -> CheckFn:
        catalogue.entry(check_id)  # a check without a catalogue entry is a programming error
        _CHECKS[check_id] = fn
        return fn

    return deco


FactsFn = Callable[["Context"], dict[str, Any]]
_FACTS: list[FactsFn] = []
_FACT_PROBES: dict[str, tuple[str, ...]] = {}
_LOADED = False


def facts(fn: FactsFn | None = None, *, probes: tuple[str, ...] | list[str] = ()) -> Any:
    """Register a function deriving small per-host facts from the probes, for cluster-scope checks and for
    the run's hardware facts. ``@facts(probes=[...])`` names the probes it reads: they are collected on
    every run whatever checks are selected (see :func:`fact_probes`).

    Each returns a flat dict; keys must be unique across functions (name them after their area).
    Put a reason under ``problems[<topic>]`` when the harness could not read something.
    """

    def register(function: FactsFn) -> FactsFn:
        _FACTS.append(function)
        _FACT_PROBES[f"{function.__module__}.{function.__name__}"] = tuple(probes)
        return function

    return register(fn) if fn is not None else register


def fact_probes() -> set[str]:
    """Every probe a facts function names (collected on every run, whatever is selected)."""
    registered()
    return {name for names in _FACT_PROBES.values() for name in names}


def host_facts(ctx: Context) -> dict[str, Any]:
    """Every registered facts function merged; one that crashes records its error under ``problems``."""
    registered()
    merged: dict[str, Any] = {"problems": {}, "artifacts": {}}
    for fn in _FACTS:
        try:
            part = fn(ctx)
        except Exception as exc:  # a bug in one area's facts must not hide the others
            merged["problems"][fn.__module__] = f"{type(exc).__name__}: {exc}"
            continue
        merged["problems"].update(part.pop("problems", {}) or {})
        merged["artifacts"].update(part.pop("artifacts", {}) or {})
        merged.update(part)
    # What roles size their launches by (ranks per node, rccl/nccl-tests -g): the devices a job addresses, the
    # NVIDIA GPUs or else the AMD HIP devices (every partition of a GPU in CPX mode is one).
    merged["gpu_devices"] = merged.get("gpu_count") or merged.get("amd_hip_devices") or 0
    return merged


def registered() -> dict[str, CheckFn]:
    """Every check function, by id (imports each module of this package once to register them)."""
    global _LOADED
    if not _LOADED:
        import importlib
        import pkgutil

        for info in pkgutil.iter_modules(__path__):
            if not info.name.startswith("_") and info.name != "catalogue":
                importlib.import_module(f"{__name__}.{info.name}")
        _LOADED = True
    return dict(_CHECKS)


def artifact_paths(ctx: Context) -> list[str]:
    paths = [ctx.probes[name]["artifact"] for name in ctx.used
             if name in ctx.probes and ctx.probes[name].get("artifact")]
    return list(dict.fromkeys(paths + ctx.extra_artifacts))


def make_result(check_id: str, subject: str, verdict: Verdict, *, run_id: str, artifacts: list[str],
                started: str, duration_s: float, params: dict[str, Any] | None = None) -> dict[str, Any]:
    meta = catalogue.entry(check_id)
    result = {
        "run_id": run_id,
        "check": check_id,
        "phase": meta["phase"],
        "domain": meta["domain"],
        "subject": verdict.subject or subject,
        "status": str(verdict.status),
        "value": verdict.value,
        "unit": verdict.unit if verdict.unit is not None else meta.get("unit"),
        "expected": verdict.expected,
        "severity": meta["severity"],
        "summary": verdict.summary,
        "evidence": verdict.evidence,
        "artifacts": artifacts,
        "started": started,
        "duration_s": round(duration_s, 4),
    }
    variant = verdict.params if verdict.params is not None else params
    if variant:
        result["params"] = variant
    if verdict.series:
        result["series"] = verdict.series
    if verdict.measured:
        result["measured"] = verdict.measured
    wrong = catalogue.value_problem(meta, verdict.value) if verdict.status in ("pass", "warn", "fail") else None
    if wrong:
        # One type per check: a verdict whose value breaks it is the check's bug, never the cluster's.
        result.update(status="error", summary=f"{verdict.summary} [harness: {wrong}]")
    return result


HARNESSES = ("slurm", "k8s", "standalone")


def detect_harness(setting: str | None, probes: dict[str, dict[str, Any]],
                   fleet: list[str] | None = None) -> str:
    """The harness a check runs under: the operator's setting, else what the evidence shows.

    ``auto`` means Slurm when ``scontrol show node`` found this node, k8s never (it must be named:
    the audit cannot tell a kubelet's node from a standalone one), otherwise standalone. For the
    cluster-wide checks, ``fleet`` holds what the nodes detected; any Slurm node makes it Slurm.
    """
    if setting and setting != "auto":
        return setting
    if fleet is not None:
        return "slurm" if "slurm" in fleet else (fleet[0] if len(fleet) == 1 else "standalone")
    slurm = probes.get("slurm_node") or {}
    if slurm.get("rc") == 0 and "NodeName=" in str(slurm.get("stdout", "")):
        return "slurm"
    return "standalone"


def evaluate(check_id: str, ctx: Context, run_id: str) -> dict[str, Any]:
    """Run one check that returns one verdict and return its complete result; never raises for
    cluster-side problems. Checks returning several verdicts are run with :func:`evaluate_many`."""
    results = evaluate_many(check_id, ctx, run_id)
    if len(results) != 1:
        raise ValueError(f"{check_id} returned {len(results)} verdicts; use evaluate_many")
    return results[0]


def evaluate_many(check_id: str, ctx: Context, run_id: str, empty_ok: bool = False) -> list[dict[str, Any]]:
    """Run one check that may return several verdicts (a list, each naming its ``subject`` and ``params``:
    one per GPU of a node, one per pair of a mesh); every verdict becomes a result. A check returning no
    verdict gives one ``skip`` saying so, or nothing with ``empty_ok`` (a live check with nothing new)."""
    fn = registered().get(check_id)
    started, t0 = now_iso(), time.monotonic()
    harness = ctx.options.get("harness")
    applies = catalogue.entry(check_id).get("harnesses") or list(HARNESSES)
    if harness in HARNESSES and harness not in applies:
        verdict = Verdict("skip", f"applies to {', '.join(applies)} clusters; this one is {harness}",
                          evidence={"not_applicable": True, "harness": harness})
        return [make_result(check_id, ctx.subject, verdict, run_id=run_id, artifacts=[], started=started,
                            duration_s=time.monotonic() - t0, params=ctx.params)]
    declared = catalogue.entry(check_id).get("probes")
    if declared is not None and ctx.declared is None:
        ctx.declared = frozenset(declared)
    outcome = run_check(check_id, fn, ctx) if fn is not None else Verdict(
        "error", f"no check function is registered for {check_id}")
    verdicts = outcome if isinstance(outcome, list) else ([] if outcome is None else [outcome])
    if not verdicts:
        if empty_ok:
            return []
        verdicts = [Verdict("skip", "nothing to judge: no subject of this check was measured")]
    artifacts, duration = artifact_paths(ctx), time.monotonic() - t0
    return [make_result(check_id, ctx.subject, verdict, run_id=run_id,
                        artifacts=verdict.evidence.pop("_artifacts", None) or artifacts,
                        started=started, duration_s=duration, params=ctx.params)
            for verdict in verdicts]


def run_check(check_id: str, fn: Callable[[Context], Any], ctx: Context) -> Any:
    """Call a check function and turn what it raised into a verdict: Skip -> skip, HarnessError -> error,
    ProbeFailed -> fail, ProbeTimedOut -> fail with the last lines as evidence, a crash -> error."""
    try:
        return fn(ctx)
    except Skip as exc:
        return Verdict("skip", str(exc))
    except HarnessError as exc:
        return Verdict("error", str(exc))
    except ProbeFailed as exc:
        return Verdict("fail", str(exc), evidence={"rc": exc.probe.get("rc")})
    except ProbeTimedOut as exc:
        return Verdict("fail", str(exc), evidence={"timeout_s": exc.probe.get("timeout"), "last_lines": exc.tail})
    except Exception as exc:  # a bug in a check is the harness's fault, never the cluster's
        return Verdict("error", f"check {check_id} crashed: {type(exc).__name__}: {exc}")


def selection(check_ids: list[str], run_tags: list[str], skip_tags: list[str]) -> list[str]:
    """The ids of ``check_ids`` the run's tags select, in order."""
    return [check_id for check_id in check_ids if selected(check_id, run_tags, skip_tags)]


def probes_for(check_ids: list[str], fleet_facts: bool = True) -> set[str] | None:
    """What a node must run for ``check_ids`` (select before running): the probes they name, the hardware
    facts' probes, and — when a cluster-wide check will compare the nodes (``fleet_facts``) — every facts
    function's probes. None when one of the checks names no probes: then everything is collected."""
    from clustereval.facts import HARDWARE_PROBES

    names = set(HARDWARE_PROBES) | (set(fact_probes()) if fleet_facts else set())
    for check_id in check_ids:
        declared = catalogue.entry(check_id).get("probes")
        if declared is None:
            return None
        names.update(declared)
    return names


def not_permitted(check_id: str, options: dict[str, Any], host: str | None = None) -> str | None:
    """Why a destructive check (``acts: destructive``) may not run here (None: it may): it needs
    ``allow_destructive`` and a ``destructive_targets`` list naming the host, never the default. Restoring
    actions (``acts: true``) are gated by their own probes, which get ``allow_actions`` as a parameter and
    report "not tried", so their checks still judge what they could read."""
    if catalogue.entry(check_id).get("acts") != "destructive":
        return None
    if not options.get("allow_destructive"):
        return "destructive test, not opted in (clustereval_allow_destructive=true and a target list enable it)"
    targets = options.get("destructive_targets") or []
    if not targets:
        return "destructive test; clustereval_destructive_targets names no host"
    if host is not None and host not in targets:
        return f"destructive test; {host} is not in clustereval_destructive_targets"
    return None


def selected(check_id: str, run_tags: list[str], skip_tags: list[str]) -> bool:
    """Whether Ansible's ``--tags`` / ``--skip-tags`` select ``check_id``.

    A tag matches a check when it is the check id, a dotted prefix of it (``audit.slurm``) or the
    check's phase (``performance``); skip tags win over run tags, and no run tag (or ``all``) runs all.
    """
    phase = catalogue.entry(check_id)["phase"]

    def matches(tag: str) -> bool:
        return tag in (check_id, phase) or check_id.startswith(tag + ".")

    if any(matches(tag) for tag in skip_tags):
        return False
    return not run_tags or "all" in run_tags or any(matches(tag) for tag in run_tags)


__all__ = ["CLUSTER_SUBJECT", "Context", "HarnessError", "ProbeFailed", "ProbeTimedOut", "Skip", "Verdict", "check",
           "evaluate", "evaluate_many", "fact_probes", "facts", "host_facts", "not_permitted", "probes_for",
           "registered", "run_check", "selected", "selection"]
