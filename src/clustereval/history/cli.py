"""``clustereval history``: record saved runs into the history store, list them per cluster, show one."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from clustereval.history.query import list_runs, show_run
from clustereval.history.recording import record
from clustereval.history.store import ENV_VAR, HistoryError, driver_errors, mask_url, open_store, resolve, scrub

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
    """Register ``history`` and its ``record``, ``list`` and ``show`` subcommands on the CLI's subparsers."""
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
