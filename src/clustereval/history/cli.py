"""``clustereval history``: record saved runs into the history store, list them per cluster, show one, and review
a cluster against its SLA (acceptance or monthly)."""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

from clustereval.history.query import list_runs, show_run
from clustereval.history.recording import record
from clustereval.history.review import build_review, render_json
from clustereval.history.review_markdown import render_markdown
from clustereval.history.sla import default_text, load_sla, parse_time
from clustereval.history.store import ENV_VAR, HistoryError, driver_errors, mask_url, open_store, resolve, scrub
from clustereval.scoring.score import write_atomic

TABLE = (("run id", "run_id"), ("cluster", "cluster"), ("started", "started"), ("tier", "tier"), ("score", "score"),
         ("coverage", "coverage"), ("hosts", "hosts"), ("fail", "n_fail"), ("warn", "n_warn"))


def _cell(row: dict[str, Any], key: str) -> str:
    value = row.get(key)
    if value is None:
        return "-"
    if key == "score":
        return f"{value:.1f}"
    if key == "coverage":
        return f"{value:.0%}"
    if key == "tier" and row.get("provisional"):
        return f"{value} (provisional)"
    return str(value)


def format_table(runs: list[dict[str, Any]]) -> str:
    """The runs as an aligned text table, one line per run."""
    cells = [[title for title, _ in TABLE]] + [[_cell(run, key) for _, key in TABLE] for run in runs]
    widths = [max(len(line[i]) for line in cells) for i in range(len(TABLE))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip() for line in cells)


def cmd_record(args: argparse.Namespace) -> int:
    with open_store(args.db) as store:
        run = record(store, args.run_dir, cluster=args.cluster)
        print(f"recorded run {run['run_id']} of cluster {run['cluster']} ({run['hosts']} hosts, tier "
              f"{run['tier']}) in {store.url}")
    for warning in run["warnings"]:
        print(f"clustereval: {warning}", file=sys.stderr)
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    with open_store(args.db) as store:
        runs = list_runs(store, cluster=args.cluster)
        where = store.url
    if args.json:
        print(json.dumps(runs, indent=2, default=str))
        return 0
    if not runs:
        print(f"no runs recorded{' for cluster ' + args.cluster if args.cluster else ''} in {where}")
        return 0
    print(format_table(runs))
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    with open_store(args.db) as store:
        shown = show_run(store, args.run_id)
    if args.json:
        print(json.dumps(shown, indent=2, default=str))
        return 0
    run, hardware = shown["run"], shown["hardware"]
    print(format_table([run]))
    print(f"run directory: {run['run_dir']}  (clustereval {run['clustereval_version'] or 'unknown'}, ended "
          f"{run['ended'] or 'not recorded'})")
    print(f"hardware: {hardware['hosts']} hosts, GPU {hardware.get('gpu_model') or 'unknown'} × "
          f"{hardware.get('gpu_count') or '?'}, fabric {hardware.get('fabric_class') or 'unknown'}"
          + "".join(f"; {key} differs on {', '.join(hosts)}" for key, hosts in hardware["differing"].items()))
    for finding in shown["findings"]:
        print(f"  {finding['status']:5s} {finding['check_id']} on {finding['subject']}: {finding['summary']}")
    if shown["findings_total"] > len(shown["findings"]):
        print(f"  ... and {shown['findings_total'] - len(shown['findings'])} more findings")
    for warning in run["warnings"]:
        print(f"warning: {warning}")
    return 0


def _when(text: str | None) -> Any:
    return parse_time(text) if text else None


def cmd_review(args: argparse.Namespace) -> int:
    if args.print_sla:
        print(default_text(), end="")
        return 0
    if not args.cluster:
        raise HistoryError("history review needs --cluster NAME (clustereval history list shows the clusters)")
    sla = load_sla(args.sla)
    with open_store(args.db) as store:
        review = build_review(store, args.cluster, kind=args.kind, since=_when(args.since), until=_when(args.until),
                              sla=sla, previous=(_when(args.previous_since), _when(args.previous_until)))
    rendered = {"md": render_markdown, "json": render_json}
    formats = [args.format] if args.format else ["md", "json"]
    if not args.out:
        print(rendered[formats[0]](review), end="")
        return int(review["exit"])
    folder = Path(args.out)
    stem = re.sub(r"[^A-Za-z0-9._-]+", "_", f"review-{review['cluster']}-{review['kind']}-"
                                             f"{review['window']['since']}_{review['window']['until']}")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for fmt in formats:
            path = folder / f"{stem}.{fmt}"
            write_atomic(path, rendered[fmt](review))
            print(f"wrote {path}")
    except OSError as exc:
        raise HistoryError(f"the review cannot be written to {folder}: {exc.strerror or exc}") from None
    terms = ", ".join(f"{t['term']} {t['verdict']}" for t in review["terms"])
    print(f"{review['kind']} review of {review['cluster']}: {review['verdict']} ({terms})")
    return int(review["exit"])


def cmd_judge(args: argparse.Namespace) -> int:
    """Judge a run directory against the store's earlier runs on the same hardware and render its reports again."""
    from clustereval import report
    from clustereval.history.judging import judge_run

    with open_store(args.db) as store:
        try:
            doc = judge_run(store, args.run_dir, k=args.k, last=args.last)
        except ValueError as exc:
            print(f"clustereval: history: {exc}", file=sys.stderr)
            return 2
    deviations, skipped = doc["deviations"], sum(doc["not_judged"].values())
    print(f"judged run {doc['run_id']} against {doc['store']}: {len(deviations)} result(s) beyond their history, "
          f"{doc['within']} within, {skipped} not judged"
          + (f" ({'; '.join(f'{n} {why}' for why, n in doc['not_judged'].items())})" if skipped else ""))
    for deviation in deviations[:20]:
        print(f"  {deviation['check']} on {deviation['subject']}: {deviation['summary']}")
    if len(deviations) > 20:
        print(f"  … and {len(deviations) - 20} more (history-baseline.json)")
    for path in report.render_all(args.run_dir):
        print(f"wrote {path}")
    score = json.loads((Path(args.run_dir) / "score.json").read_text(encoding="utf-8"))
    print(report.summary_line(score))
    return 0


def _guarded(func: Any) -> Any:
    """A command whose store or run errors end as one line on stderr and exit status 2, never a traceback."""

    def run(args: argparse.Namespace) -> int:
        try:
            return int(func(args))
        except HistoryError as exc:
            print(f"clustereval: history: {exc}", file=sys.stderr)
            return 2
        except driver_errors() as exc:  # the store went away or refused a statement mid-way
            print(f"clustereval: history: the store {mask_url(resolve(args.db)[1])} failed: "
                  f"{scrub(str(exc).strip(), args.db)}", file=sys.stderr)
            return 2

    return run


def add_parser(subparsers: Any) -> None:
    """Register ``history`` and its ``record``, ``list``, ``show``, ``judge`` and ``review`` subcommands on the CLI's
    subparsers."""
    db_help = (f"history store: a path, sqlite:///path or postgresql://user@host/db (default: ${ENV_VAR}, else "
               "~/.local/share/clustereval/history.sqlite)")
    hist = subparsers.add_parser("history", help="keep saved runs in a history store (SQLite, or PostgreSQL for a "
                                                 "fleet) and list them per cluster")
    sub = hist.add_subparsers(dest="history_command", required=True)

    rec = sub.add_parser("record", help="record a saved run directory (again: it replaces the earlier record)")
    rec.add_argument("run_dir")
    rec.add_argument("--db", help=db_help)
    rec.add_argument("--cluster", help="cluster name when run.json names none")
    rec.set_defaults(func=_guarded(cmd_record))

    ls = sub.add_parser("list", help="the recorded runs, newest first")
    ls.add_argument("--db", help=db_help)
    ls.add_argument("--cluster", help="only this cluster's runs")
    ls.add_argument("--json", action="store_true")
    ls.set_defaults(func=_guarded(cmd_list))

    sh = sub.add_parser("show", help="one recorded run: score, hardware, worst findings")
    sh.add_argument("run_id")
    sh.add_argument("--db", help=db_help)
    sh.add_argument("--json", action="store_true")
    sh.set_defaults(func=_guarded(cmd_show))

    jd = sub.add_parser("judge", help="judge a saved run against earlier runs on the same hardware (median and "
                                      "spread) and render its reports again")
    jd.add_argument("run_dir")
    jd.add_argument("--db", "--store", dest="db", help=db_help)
    jd.add_argument("--k", type=float, default=3.0, help="how many spreads from the median is beyond (default 3)")
    jd.add_argument("--last", type=int, default=20, help="how many earlier runs to judge against (default 20)")
    jd.set_defaults(func=_guarded(cmd_judge))

    rv = sub.add_parser("review", help="acceptance or monthly SLA review of one cluster: availability, incidents, "
                                       "fault-drill times against the targets, changes since the last review")
    rv.add_argument("--cluster", help="the cluster to review (required)")
    rv.add_argument("--db", "--store", dest="db", help=db_help)
    rv.add_argument("--kind", choices=("acceptance", "monthly"), default="monthly",
                    help="monthly (default: the last calendar month) or acceptance (default: all the runs)")
    rv.add_argument("--since", help="window start, ISO date or time (UTC unless it says otherwise)")
    rv.add_argument("--until", help="window end, exclusive")
    rv.add_argument("--previous-since", help="the last review's window start (default: the window before)")
    rv.add_argument("--previous-until", help="the last review's window end")
    rv.add_argument("--sla", help="the contract's SLA definitions (YAML; start from --print-sla)")
    rv.add_argument("--print-sla", action="store_true", help="print the default SLA definitions and exit")
    rv.add_argument("--out", help="write the review here (review-<cluster>-<kind>-<window>.md/.json) instead of "
                                  "printing it")
    rv.add_argument("--format", choices=("md", "json"), help="md or json (default: md printed, both written)")
    rv.set_defaults(func=_guarded(cmd_review))
