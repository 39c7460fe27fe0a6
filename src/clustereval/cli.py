"""``clustereval``: evaluate a GPU cluster, re-render saved runs, list checks, run the simulated cluster."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import yaml

from clustereval import __version__, redact


def _extravars(pairs: list[str]) -> tuple[dict[str, object], list[str]]:
    """``-e`` as ansible-playbook takes it: KEY=VALUE pairs, and @file.yml files handed to ansible-playbook as they
    are (Ansible reads them: Vault-encrypted values stay encrypted until a task needs them)."""
    out: dict[str, object] = {}
    files: list[str] = []
    for pair in pairs:
        if pair.startswith("@"):
            path = Path(pair[1:]).expanduser()
            if not path.is_file():
                raise SystemExit(f"clustereval: -e {pair}: no such file")
            files.append(str(path.resolve()))
            continue
        if "=" not in pair:
            raise SystemExit(f"clustereval: -e expects KEY=VALUE or @file.yml, got {pair!r}")
        key, value = pair.split("=", 1)
        out[key] = value
    return out, files


def cmd_evaluate(args: argparse.Namespace) -> int:
    phases = [p.strip() for p in args.phases.split(",") if p.strip()] if args.phases is not None else None
    if phases == []:
        print(f"clustereval: --phases {args.phases!r} names no phase; give some of audit, performance, reliability",
              file=sys.stderr)
        return 2
    extravars, files = _extravars(args.extra_vars or [])
    return _run_and_report(args.inventory, _gate_of(args), args, phases=phases, out=args.out, extravars=extravars,
                           extra_files=files, tags=args.tags, skip_tags=args.skip_tags, limit=args.limit,
                           verbosity=args.verbose)


GATE_FAILED = 3  # the run was measured and reported, and it found what --fail-on / --min-tier name


def _gate_of(args: argparse.Namespace) -> tuple[str, str | None]:
    return args.fail_on, args.min_tier


def _gated(score: dict[str, object], gate_args: tuple[str, str | None], rc: int = 0) -> int:
    """The exit status for a reported run: ``rc`` when the harness failed, else GATE_FAILED with the reason on
    stderr when the run does not pass the gate, else 0."""
    from clustereval import report

    try:
        why = report.gate(score, *gate_args)
    except ValueError as exc:
        print(f"clustereval: {exc}", file=sys.stderr)
        return 2
    if why and not rc:
        print(f"clustereval: exit {GATE_FAILED}: {why} (--fail-on {gate_args[0]}"
              + (f", --min-tier {gate_args[1]}" if gate_args[1] else "") + ")", file=sys.stderr)
        return GATE_FAILED
    return rc


def _run_and_report(inventory: str, gate_args: tuple[str, str | None] = ("fail", None),
                    export: argparse.Namespace | None = None, **kwargs: object) -> int:
    """Run the playbook, then say this run's tier (never an earlier run's left in the same directory), export its
    metrics where ``export`` (the parsed export options) asks and gate the exit status on it."""
    from clustereval import report, runner

    started = time.time()
    try:
        rc, run_dir = runner.evaluate(inventory, **kwargs)  # type: ignore[arg-type]
    except FileNotFoundError as exc:
        print(f"clustereval: {exc}", file=sys.stderr)
        return 2
    if _written_since(run_dir / "results.jsonl", started) and not _written_since(run_dir / "score.json", started):
        report.render_all(run_dir)  # the playbook stopped before its end; score what was measured
    score = runner.load_score(run_dir) if _written_since(run_dir / "score.json", started) else None
    if score is not None:
        print(report.summary_line(score))
    else:
        print(f"clustereval: this run wrote no score (ansible-playbook exit status {rc}; see its output above)",
              file=sys.stderr)
    print(f"Run directory: {run_dir}")
    if score is None:
        return rc or 1
    exported = _export(export, run_dir) if export is not None else 0
    return _gated(score, gate_args, rc) or exported


class _TaggedLoader(yaml.SafeLoader):
    """Reads an Ansible variables file without decrypting it: a ``!vault`` or ``!unsafe`` value is only text."""


_TaggedLoader.add_multi_constructor("!", lambda loader, tag, node: "")


def _file_keys(path: str) -> set[str]:
    """The top-level variables an extra-vars file sets (none when it is not a YAML mapping)."""
    try:
        data = yaml.load(Path(path).read_text(encoding="utf-8"), Loader=_TaggedLoader)
    except (OSError, yaml.YAMLError):
        return set()
    return set(data) if isinstance(data, dict) else set()


def _written_since(path: Path, moment: float) -> bool:
    try:
        return path.is_file() and path.stat().st_mtime >= moment - 1
    except OSError:
        return False


def cmd_resume(args: argparse.Namespace) -> int:
    """Run what a run directory still lacks (checks with no result, or only errors; unreachable hosts), into the
    same directory, with the same inventory, phases, tags and settings."""
    from clustereval import plan, report, runinfo
    from clustereval import results as results_mod

    run_dir = Path(args.run_dir).resolve()
    try:
        info = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        why = getattr(exc, "strerror", None) or str(exc)
        print(f"clustereval: {run_dir} cannot be resumed: its run.json cannot be read ({why})", file=sys.stderr)
        return 2
    if not isinstance(info, dict) or not isinstance(info.get("plan"), dict):
        print(f"clustereval: {run_dir}/run.json records no plan (a run of an older clustereval): run it again",
              file=sys.stderr)
        return 2
    active = runinfo.active_sessions(run_dir)
    if active:
        print(f"clustereval: {run_dir} is still recording ({', '.join(active)}); stop that run first", file=sys.stderr)
        return 2
    loaded, _ = results_mod.load(run_dir)
    request = plan.resume_request(info, plan.current(loaded, info))
    if not request["to_run"]:
        report.render_all(run_dir)
        print(f"nothing to resume: every planned check of {run_dir} has a result")
        return 0
    extra = {k: v for k, v in (info.get("extra_vars") or {}).items()
             if k not in ("clustereval_out", "clustereval_resume")}
    given, files = _extravars(args.extra_vars or [])
    extra.update(given)
    # a setting a given file holds is given again, as it is (its secrets too)
    given_in_files = set().union(*(_file_keys(f) for f in files))
    extra = {k: v for k, v in extra.items() if k not in given_in_files}
    hidden = sorted(k for k, v in extra.items() if redact.REDACTED in json.dumps(v, default=str))
    if hidden:
        print(f"clustereval: the run was given secret settings ({', '.join(hidden)}) that run.json does not keep; "
              f"give them again: clustereval resume {args.run_dir} -e @secrets.yml (or an Ansible Vault file)",
              file=sys.stderr)
        return 2
    inventories = [args.inventory] if args.inventory else list((info.get("inventory") or {}).get(
        "inventory_sources") or [])
    if len(inventories) != 1:
        print("clustereval: give the inventory the run used with -i", file=sys.stderr)
        return 2
    hosts = sorted(request["only"]) or list(request["fleet"])
    print(f"resuming {run_dir}: {request['to_run']} of {request['planned']} checks to run, on "
          f"{', '.join(hosts)}; cluster-wide checks judged again over {len(request['fleet'])} hosts")
    selection = info.get("selection") or {}
    tags = [t for t in selection.get("tags") or [] if t != "all"]
    return _run_and_report(inventories[0], _gate_of(args), args, phases=list(info.get("phases") or []) or None,
                           out=str(run_dir),
                           extravars={**extra, "clustereval_resume": request}, extra_files=files,
                           tags=",".join(tags) or None,
                           skip_tags=",".join(selection.get("skip_tags") or []) or None,
                           limit=",".join(hosts), verbosity=args.verbose)


def cmd_report(args: argparse.Namespace) -> int:
    from clustereval import report

    run_dir = Path(args.run_dir)
    results_file = run_dir / "results.jsonl"
    if not results_file.exists():
        print(f"clustereval: {run_dir} is not a run directory (no results.jsonl)", file=sys.stderr)
        return 2
    if not results_file.is_file():
        print(f"clustereval: {results_file} is not a file: {run_dir} is not a run directory", file=sys.stderr)
        return 2
    for path in report.render_all(run_dir):
        print(f"wrote {path}")
    score = json.loads((run_dir / "score.json").read_text(encoding="utf-8"))
    # Lines left out (torn, or breaking the result contract) are said here as well as in the report.
    for warning in score.get("load_warnings") or []:
        print(f"clustereval: {warning}", file=sys.stderr)
    print(report.summary_line(score))
    exported = _export(args, run_dir)
    return _gated(score, _gate_of(args)) or exported


def cmd_undo(args: argparse.Namespace) -> int:
    """Revert what a run's journal says is still applied, through ``playbooks/undo.yml``."""
    import subprocess

    from clustereval import journal, runinfo, runner

    run_dir = Path(args.run_dir).resolve()
    if not run_dir.is_dir():
        print(f"clustereval: {run_dir} is not a directory", file=sys.stderr)
        return 2
    left = journal.pending(run_dir)
    if not left:
        print(f"nothing to undo: the journal of {run_dir} has no change still applied")
        return 0
    active = runinfo.active_sessions(run_dir)
    if active and not args.force:
        print(f"clustereval: {run_dir} is still recording ({', '.join(active)}); stop that run first "
              f"(or --force)", file=sys.stderr)
        return 2
    info = {}
    try:
        info = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        pass
    inventories = [args.inventory] if args.inventory else list((info.get("inventory") or {}).get(
        "inventory_sources") or [])
    if not inventories:
        print("clustereval: the run does not say which inventory it used; give it with -i", file=sys.stderr)
        return 2
    for entry in left:
        print(f"  still applied on {entry.get('host')}: {entry.get('what')} (since {entry.get('at')})")
    if args.dry_run:
        return 1
    nodes = sorted({str(e.get("host")) for e in left} - {"localhost"})
    root = runner.project_root()
    cmd = [str(Path(sys.executable).parent / "ansible-playbook"), str(root / "playbooks" / "undo.yml"),
           "-e", f"clustereval_undo_run_dir={run_dir}", "-e", f"clustereval_undo_hosts={','.join(nodes) or 'none'}"]
    for inventory in inventories:
        cmd += ["-i", str(inventory)]
    env = {**os.environ, **runner.ansible_env(root)}
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    remaining = journal.pending(run_dir)
    for entry in journal.load(run_dir):
        if entry.get("state") == "restored" and entry.get("by") == "undo":
            print(f"  undone: {entry.get('id')} ({entry.get('outcome')})")
    if remaining:
        print(f"clustereval: {len(remaining)} change(s) could not be undone:", file=sys.stderr)
        for entry in remaining:
            print(f"  {entry.get('host')}: {entry.get('what')}", file=sys.stderr)
        print(proc.stdout[-3000:] + proc.stderr[-2000:], file=sys.stderr)
        return 1
    print(f"every change the journal of {run_dir} recorded is undone")
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
    if args.failure_modes:
        modes = catalogue.failure_modes()
        if args.json:
            print(json.dumps(modes, indent=2))
            return 0
        for mode in modes:
            found = ", ".join(f"{f['check']} ({f['status']})" for f in mode["found_by"])
            print(f"{mode['id']:34s} {mode['title']}\n{'':34s} found by {found}; simulated by "
                  f"{mode['sim']['profile']} on {', '.join(mode['sim']['nodes'])}")
        return 0
    entries = [{**entry, "finds": catalogue.finds(entry["id"])} for entry in catalogue.load().values()]
    if args.json:
        print(json.dumps(entries, indent=2))
        return 0
    for entry in entries:
        print(f"{entry['id']:40s} {entry['phase']:12s} {entry['severity']:9s} {entry['title']}")
    return 0


def cmd_parse(args: argparse.Namespace) -> int:
    from clustereval import parsers
    from clustereval.results import dumps

    try:
        data = sys.stdin.buffer.read() if args.file == "-" else Path(args.file).read_bytes()
    except OSError as exc:
        print(f"clustereval: cannot read {args.file}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    try:
        print(dumps(parsers.parse(args.tool, data), indent=2))
    except parsers.ParseError as exc:
        print(f"clustereval: {exc}", file=sys.stderr)
        return 1
    return 0


def _gate_options(parser: argparse.ArgumentParser) -> None:
    """The gate CI and bring-up pipelines use: exit 3 when the reported run found what these name."""
    from clustereval.report import GATES

    parser.add_argument("--fail-on", choices=GATES, default="fail",
                        help="exit 3 when a check result failed (default), warned or failed, or never")
    parser.add_argument("--min-tier", help="exit 3 when the tier is below this one (e.g. Gold)")


def _export_options(parser: argparse.ArgumentParser) -> None:
    """Where the run's metrics (its ``metrics.prom``) go besides the run directory."""
    parser.add_argument("--textfile-dir", help="also write the metrics into this node_exporter textfile-collector "
                                               "directory (atomically)")
    parser.add_argument("--textfile-name", default="clustereval.prom",
                        help="the file name there (default clustereval.prom; one per cluster when a node exports "
                             "several)")
    parser.add_argument("--pushgateway", help="also push the metrics to this Pushgateway (http(s)://host:port; "
                                              "user:password@ becomes an Authorization header)")
    parser.add_argument("--push-job", default="clustereval", help="the Pushgateway job (default clustereval); the "
                                                                   "group is job + cluster")


def _export(args: argparse.Namespace, run_dir: Path) -> int:
    """Export ``run_dir/metrics.prom`` as ``args`` ask; 0, or 2 after saying in one line what failed."""
    from clustereval.report import METRICS_PROM, prometheus
    from clustereval.scoring.score import read_run_info

    if not (args.textfile_dir or args.pushgateway):
        return 0
    try:
        text = (run_dir / METRICS_PROM).read_text(encoding="utf-8")
    except OSError as exc:
        print(f"clustereval: no metrics to export: {run_dir / METRICS_PROM} cannot be read ({exc.strerror})",
              file=sys.stderr)
        return 2
    rc = 0
    if args.textfile_dir:
        try:
            print(f"wrote {prometheus.write_text(text, args.textfile_dir, args.textfile_name)}")
        except prometheus.ExportError as exc:
            print(f"clustereval: textfile export failed: {exc}", file=sys.stderr)
            rc = 2
    if args.pushgateway:
        info, _ = read_run_info(run_dir)
        try:
            target = prometheus.push(text, args.pushgateway, job=args.push_job,
                                     grouping={"cluster": prometheus.cluster_of({"run": info})})
            print(f"pushed to {target}")
        except prometheus.ExportError as exc:
            print(f"clustereval: Pushgateway export failed: {exc}", file=sys.stderr)
            rc = 2
    return rc


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="clustereval", description=__doc__)
    parser.add_argument("--version", action="version", version=f"clustereval {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    ev = sub.add_parser("evaluate", help="run the evaluation playbook against an inventory")
    ev.add_argument("-i", "--inventory", required=True)
    ev.add_argument("--phases", help="comma-separated: audit,performance,reliability (default: audit,performance)")
    ev.add_argument("--out", help="run directory (default: runs/<timestamp>/ in the checkout)")
    ev.add_argument("-e", "--extra-vars", action="append", help="KEY=VALUE or @vars.yml, as ansible-playbook")
    ev.add_argument("--tags", help="only these checks (ids, dotted prefixes or phases)")
    ev.add_argument("--skip-tags", help="skip these checks (ids, dotted prefixes or phases)")
    ev.add_argument("--limit", help="ansible host pattern to limit the run to")
    ev.add_argument("-v", "--verbose", action="count", default=0)
    _gate_options(ev)
    _export_options(ev)
    ev.set_defaults(func=cmd_evaluate)

    rs = sub.add_parser("resume", help="run what a run directory still lacks (missing or errored checks, "
                                       "unreachable hosts) and judge the cluster-wide checks again over the fleet")
    rs.add_argument("run_dir")
    rs.add_argument("-i", "--inventory", help="inventory (default: the one the run used)")
    rs.add_argument("-e", "--extra-vars", action="append", help="KEY=VALUE or @vars.yml: settings to give again "
                                                                "(secrets the run directory does not keep)")
    rs.add_argument("-v", "--verbose", action="count", default=0)
    _gate_options(rs)
    _export_options(rs)
    rs.set_defaults(func=cmd_resume)

    rp = sub.add_parser("report", help="re-render score and reports of a saved run (no cluster access)")
    rp.add_argument("run_dir")
    _gate_options(rp)
    _export_options(rp)
    rp.set_defaults(func=cmd_report)

    ud = sub.add_parser("undo", help="revert what a run's action journal says is still applied on the nodes")
    ud.add_argument("run_dir")
    ud.add_argument("-i", "--inventory", help="inventory (default: the one the run used)")
    ud.add_argument("--dry-run", action="store_true", help="only list what is still applied")
    ud.add_argument("--force", action="store_true", help="undo even while the run seems to be recording")
    ud.set_defaults(func=cmd_undo)

    ck = sub.add_parser("checks", help="print the check catalogue")
    ck.add_argument("--json", action="store_true")
    ck.add_argument("--coverage", action="store_true",
                    help="which of the 73 public ClusterMAX audit criteria the checks cover")
    ck.add_argument("--failure-modes", action="store_true",
                    help="the documented provider failure modes, the checks that find each and the simulated "
                         "profile that rebuilds it")
    ck.set_defaults(func=cmd_checks)

    pa = sub.add_parser("parse", help="parse a tool's saved output and print the JSON")
    pa.add_argument("tool")
    pa.add_argument("file", help="path, or - for stdin")
    pa.set_defaults(func=cmd_parse)

    from clustereval import compare, history

    compare.add_parser(sub)
    history.add_parser(sub)
    try:
        from clustereval.sim import cli as sim_cli
    except ImportError:  # the simulated cluster is optional for a user's installation
        sim_cli = None
    if sim_cli is not None:
        sim_cli.add_subparser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:  # outside a run (a run handles its own, see clustereval.run_control)
        print("clustereval: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        # A user gets a sentence and a non-zero exit, never a traceback; a developer can ask for it.
        if os.environ.get("CLUSTEREVAL_DEBUG"):
            raise
        print(f"clustereval: {args.command} failed: {type(exc).__name__}: {exc} "
              f"(CLUSTEREVAL_DEBUG=1 shows where)", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
