"""``clustereval``: evaluate a GPU cluster, re-render saved runs, list checks, run the simulated cluster."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from clustereval import __version__, yamldata


def _extravars(pairs: list[str]) -> dict[str, object]:
    out: dict[str, object] = {}
    for pair in pairs:
        if pair.startswith("@"):

            out.update(yamldata.load(Path(pair[1:]).read_text(encoding="utf-8")) or {})
            continue
        if "=" not in pair:
            raise SystemExit(f"clustereval: -e expects KEY=VALUE or @file.yml, got {pair!r}")
        key, value = pair.split("=", 1)
        out[key] = value
    return out


def cmd_evaluate(args: argparse.Namespace) -> int:
    from clustereval import report, runner

    phases = [p.strip() for p in args.phases.split(",") if p.strip()] if args.phases else None
    try:
        rc, run_dir = runner.evaluate(args.inventory, phases=phases, out=args.out,
                                      extravars=_extravars(args.extra_vars or []), tags=args.tags,
                                      skip_tags=args.skip_tags, limit=args.limit, verbosity=args.verbose)
    except FileNotFoundError as exc:
        print(f"clustereval: {exc}", file=sys.stderr)
        return 2
    score = runner.load_score(run_dir)
    if score is None and (run_dir / "results.jsonl").exists():
        report.render_all(run_dir)  # the playbook stopped before its end; score what was measured
        score = runner.load_score(run_dir)
    if score is not None:
        print(report.summary_line(score))
    print(f"Run directory: {run_dir}")
    return rc


def cmd_report(args: argparse.Namespace) -> int:
    from clustereval import report

    run_dir = Path(args.run_dir)
    if not (run_dir / "results.jsonl").exists():
        print(f"clustereval: {run_dir} is not a run directory (no results.jsonl)", file=sys.stderr)
        return 2
    for path in report.render_all(run_dir):
        print(f"wrote {path}")
    score = json.loads((run_dir / "score.json").read_text(encoding="utf-8"))
    print(report.summary_line(score))
    return 0


def cmd_checks(args: argparse.Namespace) -> int:
    from clustereval.checks import catalogue

    if args.coverage:
        report = catalogue.coverage()
        if args.json:
            print(json.dumps(report, indent=2))
            return 0
        for row in report["criteria"]:
            mark = "full" if row["checks"] and not row["missing_harnesses"] else ("part" if row["checks"] else "none")
            print(f"{row['number']:3d} {row['id']:36s} {mark:5s} {', '.join(row['checks'])}"
                  + (f"  (missing: {', '.join(row['missing_harnesses'])})" if row["checks"] and
                     row["missing_harnesses"] else ""))
        print(f"{report['fully_covered']} of {report['total']} criteria fully covered, "
              f"{report['partly_covered']} partly, {report['not_covered']} not at all")
        if report["unknown_ids"]:
            print(f"catalogue names unknown criteria: {report['unknown_ids']}")
        return 0
    entries = list(catalogue.load().values())
    if args.json:
        print(json.dumps(entries, indent=2))
        return 0
    for entry in entries:
        print(f"{entry['id']:40s} {entry['phase']:12s} {entry['severity']:9s} {entry['title']}")
    return 0


def cmd_parse(args: argparse.Namespace) -> int:
    from clustereval import parsers

    data = sys.stdin.buffer.read() if args.file == "-" else Path(args.file).read_bytes()
    try:
        print(json.dumps(parsers.parse(args.tool, data), indent=2, default=str))
    except parsers.ParseError as exc:
        print(f"clustereval: {exc}", file=sys.stderr)
        return 1
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="clustereval", description=__doc__)
    parser.add_argument("--version", action="version", version=f"clustereval {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    ev = sub.add_parser("evaluate", help="run the evaluation playbook against an inventory")
    ev.add_argument("-i", "--inventory", required=True)
    ev.add_argument("--phases", help="comma-separated: audit,performance (default: all)")
    ev.add_argument("--out", help="run directory (default: runs/<timestamp>/ in the checkout)")
    ev.add_argument("-e", "--extra-vars", action="append", help="KEY=VALUE or @vars.yml, as ansible-playbook")
    ev.add_argument("--tags", help="only these checks (ids, dotted prefixes or phases)")
    ev.add_argument("--skip-tags", help="skip these checks (ids, dotted prefixes or phases)")
    ev.add_argument("--limit", help="ansible host pattern to limit the run to")
    ev.add_argument("-v", "--verbose", action="count", default=0)
    ev.set_defaults(func=cmd_evaluate)

    rp = sub.add_parser("report", help="re-render score and reports of a saved run (no cluster access)")
    rp.add_argument("run_dir")
    rp.set_defaults(func=cmd_report)

    ck = sub.add_parser("checks", help="print the check catalogue")
    ck.add_argument("--json", action="store_true")
    ck.add_argument("--coverage", action="store_true",
                    help="which of the 73 public ClusterMAX audit criteria the checks cover")
    ck.set_defaults(func=cmd_checks)

    pa = sub.add_parser("parse", help="parse a tool's saved output and print the JSON")
    pa.add_argument("tool")
    pa.add_argument("file", help="path, or - for stdin")
    pa.set_defaults(func=cmd_parse)

    try:
        from clustereval.sim import cli as sim_cli
    except ImportError:  # the simulated cluster is optional for a user's installation
        sim_cli = None
    if sim_cli is not None:
        sim_cli.add_subparser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
