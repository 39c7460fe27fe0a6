"""``clustereval compare RUN_A RUN_B [RUN_C ...]``: what changed between saved runs, check by check.

Two providers, two dates, before and after a fix: every check and variant of the baseline (the first run) is held
against the same one in each later run and called **worse**, **better**, **unchanged** (within the noise
threshold), **new**, **gone**, or **changed** (a value without a direction that is not equal). A status change
decides on its own (pass -> fail is worse whatever the value did); with the status unchanged, the value decides by
the result's ``expected.direction``. Runs on different hosts are compared per check across subjects (median value,
worst status). See ``docs/compare.md``.

The core, :func:`compare_runs`, is a pure function of already-loaded results; :func:`load_run` reads a run directory
the way the scorer does, and :func:`add_parser` registers the subcommand.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any, NamedTuple

from clustereval import plan
from clustereval import results as results_mod
from clustereval.report import format_value, one_line, subject_label
from clustereval.report.markdown import cell
from clustereval.scoring import read_run_info

DEFAULT_NOISE = 0.05
BY_CHOICES = ("auto", "subject", "check")
# ``auto`` compares per subject when the runs share at least this share of the smaller run's hosts: a re-run
# limited to a few nodes still matches host by host, two providers' fleets never do.
SHARED_HOSTS = 0.5
KINDS = ("worse", "better", "new", "gone", "changed", "unchanged")
DIRECTIONS = ("higher", "lower")
# Listing order: status regressions, value regressions, new, gone, changed without a direction, improvements.
_GROUPS = (("worse", "status"), ("worse", "value"), ("new", None), ("gone", None), ("changed", "value"),
           ("better", "status"), ("better", "value"), ("unchanged", None))

Side = dict[str, Any]
_HELP = "what changed between saved runs, check by check (the first run is the baseline)"


class RunDirError(ValueError):
    """A run directory that cannot be compared (missing, or without ``results.jsonl``); the message is one line."""


class LoadedRun(NamedTuple):
    """A run directory as :func:`compare_runs` needs it."""

    results: list[dict[str, Any]]  # the latest result per identity, as the scorer keeps them
    warnings: list[str]  # lines left out of results.jsonl, a missing or unreadable run.json
    info: dict[str, Any]  # run id, start, end, inventory and host count from run.json


def load_run(run_dir: str | Path) -> LoadedRun:
    """Read a run directory exactly as ``scoring.score_run`` does (``results.load``, ``plan.current``,
    ``results.latest``). Raises :class:`RunDirError` when it does not exist or holds no ``results.jsonl``."""
    path = Path(run_dir)
    if not path.is_dir():
        raise RunDirError(f"{path} is not a directory" if path.exists() else f"{path} does not exist")
    if not (path / results_mod.RESULTS_FILE).is_file():
        raise RunDirError(f"{path} is not a run directory (no {results_mod.RESULTS_FILE})")
    loaded, warnings = results_mod.load(path)
    info, info_warnings = read_run_info(path)
    inventory = info.get("inventory") if isinstance(info.get("inventory"), dict) else {}
    summary = {
        "dir": str(path),
        "run_id": info.get("run_id"),
        "started": info.get("started"),
        "ended": info.get("ended"),
        "inventory": ", ".join(map(str, inventory.get("inventory_sources") or [])) or None,
        "hosts": len(inventory.get("hosts") or []) or None,
    }
    return LoadedRun(results_mod.latest(plan.current(loaded, info)), warnings + info_warnings, summary)


def _number(value: Any) -> float | None:
    """``value`` as a finite number, or None (text, flags, lists, None)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def _direction(results: Iterable[dict[str, Any]]) -> str | None:
    """The first ``expected.direction`` (higher or lower is better) among ``results``."""
    for result in results:
        expected = result.get("expected")
        if isinstance(expected, dict) and expected.get("direction") in DIRECTIONS:
            return str(expected["direction"])
    return None


def _per_subject(results: list[dict[str, Any]]) -> dict[tuple[str, ...], Side]:
    """One side per result identity (check, subject, params)."""
    return {results_mod.identity(r): {"check": str(r.get("check")), "label": subject_label(r),
                                      "subject": str(r.get("subject")), "params": r.get("params") or {},
                                      "status": str(r.get("status")), "value": r.get("value"), "unit": r.get("unit"),
                                      "direction": _direction([r])}
            for r in results}


def _per_check(results: list[dict[str, Any]]) -> dict[tuple[str, ...], Side]:
    """One side per check and variant (params) across subjects: median value, worst status, counts per status and
    the worst subject."""
    groups: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    for result in results:
        groups.setdefault((str(result.get("check")), results_mod.params_key(result.get("params"))), []).append(result)
    return {key: _aggregate(sorted(members, key=lambda r: str(r.get("subject")))) for key, members in groups.items()}


def _aggregate(members: list[dict[str, Any]]) -> Side:
    direction = _direction(members)
    numbers = [n for n in (_number(m.get("value")) for m in members) if n is not None]
    if numbers:
        value: Any = statistics.median(numbers)
    else:  # text values: the one value all subjects share, else the distinct ones
        distinct = sorted({one_line(m["value"]) for m in members if m.get("value") not in (None, "")})
        value = distinct[0] if len(distinct) == 1 else distinct or None

    def badness(result: dict[str, Any]) -> tuple[int, float]:
        number = _number(result.get("value"))
        lean = -math.inf if number is None or direction is None else (-number if direction == "higher" else number)
        return results_mod.rank(result.get("status")), lean

    worst = max(members, key=badness)
    params = members[0].get("params") or {}
    label = results_mod.params_label(params)
    return {"check": str(members[0].get("check")), "params": params,
            "label": "all subjects" + (f" · {label}" if label else ""),
            "status": results_mod.worst(m.get("status") for m in members), "value": value,
            "unit": next((m["unit"] for m in members if m.get("unit")), None), "direction": direction,
            "subjects": len(members), "worst_subject": str(worst.get("subject")),
            "counts": {s: n for s in results_mod.STATUSES if (n := sum(m.get("status") == s for m in members))}}


def relative_change(a: Any, b: Any) -> float | None:
    """(b - a) / |a| for two numbers; None when either is not a number or a is 0 and b is not (no ratio exists)."""
    na, nb = _number(a), _number(b)
    if na is None or nb is None or (na == 0 and nb != 0):
        return None
    return 0.0 if na == nb else (nb - na) / abs(na)


def classify(a: Side | None, b: Side | None, noise: float = DEFAULT_NOISE) -> tuple[str, str | None]:
    """(kind, reason) of one check and variant from baseline side ``a`` to side ``b``: kind one of :data:`KINDS`,
    reason ``status`` (the status moved: it decides alone), ``value`` or None."""
    if a is None:
        return "new", None
    if b is None:
        return "gone", None
    moved = results_mod.rank(b["status"]) - results_mod.rank(a["status"])
    if moved:
        return ("worse" if moved > 0 else "better"), "status"
    na, nb = _number(a["value"]), _number(b["value"])
    if na is None or nb is None:
        same = results_mod.dumps(a["value"], sort_keys=True) == results_mod.dumps(b["value"], sort_keys=True)
        return ("unchanged", None) if same else ("changed", "value")
    rel = relative_change(na, nb)
    if na == nb or (rel is not None and abs(rel) < noise):
        return "unchanged", None
    direction = b["direction"] or a["direction"]
    if direction is None:
        return "changed", "value"
    return ("better" if (nb > na) == (direction == "higher") else "worse"), "value"


def choose_by(runs: list[list[dict[str, Any]]]) -> tuple[str, str]:
    """(``subject`` or ``check``, why): per subject when every run shares most hosts with the baseline."""
    hosts = [{h for r in run for h in results_mod.subject_hosts(r.get("subject"))} for run in runs]
    fewest: tuple[float, int, int] | None = None
    for other in hosts[1:]:
        smaller = min(len(hosts[0]), len(other))
        if smaller:  # a run without host results matches on cluster-wide and named subjects as they are
            shared = len(hosts[0] & other)
            fewest = min(fewest or (math.inf, 0, 0), (shared / smaller, shared, smaller))
    if fewest is None:
        return "subject", "the runs hold no per-host results"
    share, shared, smaller = fewest
    text = f"the runs share {shared} of {smaller} hosts"
    if share >= SHARED_HOSTS:
        return "subject", text
    return "check", f"{text}, so each check and variant is aggregated across subjects (median value, worst status)"


def _entry(a: Side | None, b: Side | None, noise: float) -> dict[str, Any]:
    kind, reason = classify(a, b, noise)
    some = b or a or {}
    public = ("status", "value", "unit", "subject", "subjects", "worst_subject", "counts")
    return {"change": kind, "reason": reason, "check": some["check"], "label": some["label"],
            "params": some["params"], "direction": (b or {}).get("direction") or (a or {}).get("direction"),
            "a": {k: a[k] for k in public if k in a} if a else None,
            "b": {k: b[k] for k in public if k in b} if b else None,
            "relative_change": relative_change(a["value"], b["value"]) if a and b else None}


def _order(entry: dict[str, Any]) -> tuple[Any, ...]:
    """Worst changes first; within a group the biggest status jump, then the biggest relative change."""
    a, b = entry["a"], entry["b"]
    jump = abs(results_mod.rank(b["status"]) - results_mod.rank(a["status"])) if a and b else 0
    rel = entry["relative_change"]
    magnitude = abs(rel) if rel is not None else (math.inf if a and b and entry["reason"] == "value" else 0.0)
    present = (b or a)["status"]
    return (_GROUPS.index((entry["change"], entry["reason"])), -jump, -magnitude,
            results_mod.worst_first(present), entry["check"], entry["label"])


def summary_line(counts: dict[str, int], noise: float) -> str:
    """'2 worse, 1 better, 1 new, 0 gone, 5 unchanged (noise 5%)'; changed values without a direction when any."""
    text = ", ".join(f"{counts[k]} {k}" for k in ("worse", "better", "new", "gone", "unchanged"))
    if counts["changed"]:
        text += f", {counts['changed']} changed without a direction"
    return f"{text} (noise {noise * 100:g}%)"


def compare_runs(runs: list[list[dict[str, Any]]], names: list[str], noise: float = DEFAULT_NOISE,
                 by: str = "subject", infos: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """Compare each run with the first (the baseline). ``runs`` hold the latest results of each run
    (:func:`load_run`), ``names`` name them, ``by`` is ``subject`` (identity: check, subject, params), ``check``
    (per check and params across subjects) or ``auto`` (:func:`choose_by`); ``infos`` (run.json summaries) are
    passed through. Every change, unchanged ones included, is in ``comparisons[i].changes``, worst first."""
    if len(runs) < 2 or len(names) != len(runs):
        raise ValueError(f"compare needs two runs or more, each with a name (got {len(runs)} runs, {len(names)} names)")
    if not (isinstance(noise, int | float) and math.isfinite(noise) and noise >= 0):
        raise ValueError(f"noise must be a non-negative number (a fraction: 0.05 is 5%), got {noise!r}")
    if by not in BY_CHOICES:
        raise ValueError(f"by must be one of {', '.join(BY_CHOICES)}, got {by!r}")
    used, why = choose_by(runs) if by == "auto" else (by, "as asked")
    index = _per_subject if used == "subject" else _per_check
    baseline = index(runs[0])
    comparisons = []
    for name, run in zip(names[1:], runs[1:], strict=True):
        other = index(run)
        keys = list(baseline) + [key for key in other if key not in baseline]
        changes = sorted((_entry(baseline.get(key), other.get(key), noise) for key in keys), key=_order)
        counts = {kind: sum(c["change"] == kind for c in changes) for kind in KINDS}
        comparisons.append({"run": name, "baseline": names[0], "counts": counts,
                            "summary": summary_line(counts, noise), "changes": changes})
    return {"baseline": names[0], "by": used, "by_reason": why, "noise": noise,
            "runs": [{"name": n, **(info or {})} for n, info in zip(names, infos or [{}] * len(names), strict=True)],
            "comparisons": comparisons}


# Rendering -------------------------------------------------------------------------------------------------------

def _letter(index: int) -> str:
    return chr(ord("A") + index) if index < 26 else f"R{index + 1}"


def _run_line(run: dict[str, Any]) -> str:
    parts = [f"run {run['run_id']}" if run.get("run_id") else "", f"started {run['started']}" if run.get("started")
             else "", f"inventory {run['inventory']}" if run.get("inventory") else "",
             f"{run['hosts']} hosts" if run.get("hosts") else ""]
    details = ", ".join(p for p in parts if p)
    return one_line(run["name"] + (f" ({details})" if details else ""))


def _value(side: dict[str, Any] | None) -> str:
    return (format_value(side) or "—") if side else "—"


def _rows(comparison: dict[str, Any], by: str, show_all: bool) -> list[list[str]]:
    rows = []
    for change in comparison["changes"]:
        if change["change"] == "unchanged" and not show_all:
            continue
        a, b, rel = change["a"], change["b"], change["relative_change"]
        if rel is not None:
            delta = f"{rel:+.1%}"
        else:
            delta = "from 0" if a and b and _number(a["value"]) == 0 and _number(b["value"]) is not None else ""
        row = [change["change"], change["check"], change["label"], _value(a), _value(b), delta,
               f"{a['status'] if a else '—'} -> {b['status'] if b else '—'}"]
        if by == "check":
            side = b or a
            counts = ", ".join(f"{n} {s}" for s, n in side["counts"].items())
            row.append(f"{side['worst_subject']} ({counts})")
        rows.append([one_line(c) for c in row])
    return rows


def _headers(view: dict[str, Any], other: int) -> list[str]:
    headers = ["change", "check", "subject", "A", _letter(other), "Δ", "status"]
    return [*headers, "worst subject"] if view["by"] == "check" else headers


def _preamble(view: dict[str, Any]) -> list[str]:
    lines = [f"Compared by {view['by']}: {view['by_reason']}. Noise {view['noise'] * 100:g}%."]
    if len(view["runs"]) > 2:
        lines.append("Each run is compared with the baseline, A.")
    lines += [f"{_letter(i)}{' (baseline)' if i == 0 else ''}: {_run_line(run)}" for i, run in enumerate(view["runs"])]
    return lines


def render_text(view: dict[str, Any], show_all: bool = False) -> str:
    """A table per compared run: worst changes first, unchanged ones counted (listed with ``show_all``)."""
    lines = _preamble(view)
    for i, comparison in enumerate(view["comparisons"], 1):
        lines += ["", f"{_letter(i)} against A: {comparison['summary']}"]
        rows = _rows(comparison, view["by"], show_all)
        if not rows:
            continue
        table = [_headers(view, i), *rows]
        widths = [max(len(row[col]) for row in table) for col in range(len(table[0]))]
        lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in table]
    return "\n".join(lines) + "\n"


def render_markdown(view: dict[str, Any], show_all: bool = False) -> str:
    """The same as :func:`render_text` as Markdown, for a ticket."""
    lines = ["# Run comparison", "", *(f"- {cell(line)}" for line in _preamble(view))]
    for i, comparison in enumerate(view["comparisons"], 1):
        lines += ["", f"## {_letter(i)} against A", "", f"**{cell(comparison['summary'])}**"]
        rows = _rows(comparison, view["by"], show_all)
        if rows:
            headers = _headers(view, i)
            lines += ["", "| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
            lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def render_json(view: dict[str, Any], show_all: bool = False) -> str:
    """The comparison as strict JSON; unchanged entries only with ``show_all`` (their count is always there)."""
    if not show_all:
        view = {**view, "comparisons": [{**c, "changes": [e for e in c["changes"] if e["change"] != "unchanged"]}
                                        for c in view["comparisons"]]}
    return results_mod.dumps(view, indent=2) + "\n"


# Command line ----------------------------------------------------------------------------------------------------

def _noise(text: str) -> float:
    """``--noise``: a fraction (0.03) or a percentage (3%)."""
    try:
        value = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number (give 0.03 or 3%)") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be a non-negative number (give 0.03 or 3%)")
    return value


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dirs", nargs="+", metavar="RUN", help="run directories; the first is the baseline")
    parser.add_argument("--noise", type=_noise, default=DEFAULT_NOISE,
                        help="relative change below which a value is unchanged: 0.03 or 3%% (default 5%%)")
    parser.add_argument("--by", choices=BY_CHOICES, default="auto",
                        help="match results per subject, per check across subjects, or choose (default: subject "
                             "when the runs share most hosts)")
    parser.add_argument("--all", action="store_true", dest="show_all", help="list unchanged results too")
    output = parser.add_mutually_exclusive_group()
    output.add_argument("--json", action="store_true", help="machine-readable output")
    output.add_argument("--markdown", action="store_true", help="Markdown, for a ticket")
    parser.add_argument("--fail-on-worse", action="store_true", help="exit 3 when anything got worse")


def cmd_compare(args: argparse.Namespace) -> int:
    """The ``compare`` subcommand: 0, 2 for a run that cannot be read, 3 with ``--fail-on-worse`` and a regression."""
    from clustereval.cli import GATE_FAILED  # here, not at import: cli registers this module's parser

    if len(args.run_dirs) < 2:
        print("clustereval: compare needs two run directories or more (the first is the baseline)", file=sys.stderr)
        return 2
    loaded = []
    for run_dir in args.run_dirs:
        try:
            loaded.append(load_run(run_dir))
        except RunDirError as exc:
            print(f"clustereval: {exc}", file=sys.stderr)
            return 2
        for warning in loaded[-1].warnings:
            print(f"clustereval: {run_dir}: {warning}", file=sys.stderr)
    view = compare_runs([run.results for run in loaded], list(args.run_dirs), args.noise, args.by,
                        [run.info for run in loaded])
    render = render_json if args.json else render_markdown if args.markdown else render_text
    sys.stdout.write(render(view, args.show_all))
    worse = sum(c["counts"]["worse"] for c in view["comparisons"])
    if args.fail_on_worse and worse:
        print(f"clustereval: exit {GATE_FAILED}: {worse} result{'s' if worse != 1 else ''} worse than the baseline "
              "(--fail-on-worse)", file=sys.stderr)
        return GATE_FAILED
    return 0


def add_parser(subparsers: Any) -> None:
    """Register ``compare`` on the main CLI's subparsers; it sets ``func(args) -> exit status``."""
    parser = subparsers.add_parser("compare", help=_HELP, description=_HELP)
    _arguments(parser)
    parser.set_defaults(func=cmd_compare)


def main(argv: list[str] | None = None) -> int:
    """``clustereval compare`` on its own: ``argv`` are the subcommand's arguments."""
    parser = argparse.ArgumentParser(prog="clustereval compare", description=_HELP)
    _arguments(parser)
    return cmd_compare(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
