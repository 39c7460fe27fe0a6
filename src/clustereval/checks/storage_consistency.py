"""Storage consistency on the shared filesystem across nodes: cross-node locks (flock, POSIX fcntl), concurrent
``mkdir -p``, names with ':', and how long a written file takes to read back identical on another node.

Judged once per cluster from the one ``storage_consistency`` probe the coordinating node kept (role storage,
tasks/consistency.yml; the probe is described in checks/probes/storage_consistency.yml): its JSON report
(parser ``probe-storage-consistency``) names every shared directory tested, what each peer saw of it, and each
test's counts. A verdict per pair (``node1+node2``) for the locks and the visibility, one over every node that
took part (``node1+node2+node3``) for mkdir and names; ``params.directory`` tells the directories apart.

- ``skip``: no shared filesystem (none given, none discovered), one node only, no peer that sees the
  coordinator's directory, the probe not run because no node was reachable.
- ``error`` (the harness, never the cluster): the probe timed out, crashed or printed no report, a worker could
  not be started on a peer (SSH refused), a test ran out of its time limit, and for the locks a same-node
  control that fails too (two processes on one node not excluding each other: the test cannot be trusted).
"""

from __future__ import annotations

from typing import Any

from clustereval import baselines, parsers
from clustereval.checks import Context, HarnessError, Skip, Verdict, check
from clustereval.results import CLUSTER_SUBJECT, set_subject

PROBE = "storage_consistency"
AREA = "storage_consistency"
LOCK_LABELS = {"flock": "flock()", "posix": "POSIX fcntl() record"}
CHECK_TEST = {"storage.consistency.flock": "flock", "storage.consistency.posix_lock": "posix",
              "storage.consistency.mkdir_race": "mkdir", "storage.consistency.colon_names": "colon",
              "storage.consistency.visibility": "visibility"}


# ------------------------------------------------------------------------------------------- the report


def _report(ctx: Context) -> tuple[str, dict[str, Any]]:
    """(the coordinating node, its parsed report). Skip when no node ran the tests; HarnessError when the probe
    gave no report."""
    wanted = str(ctx.options.get("coordinator") or "")
    records = {host: probes[PROBE] for host, probes in sorted(ctx.host_probes.items()) if PROBE in (probes or {})}
    if wanted and wanted not in records:
        raise HarnessError(f"the coordinating node {wanted} kept no output of the consistency tests")
    if not records:
        if not ctx.host_probes:
            raise Skip("no node was reachable to run the consistency tests")
        raise Skip("the consistency tests ran on no node (none of the evaluated nodes was chosen to coordinate)")
    host = wanted or next(iter(records))
    probe = records[host]
    ctx.extra_artifacts.extend([probe["artifact"]] if probe.get("artifact") else [])
    if probe.get("missing"):
        raise Skip(f"python3 is not installed on {host}, which coordinates the tests")
    if probe.get("timed_out"):
        raise HarnessError(f"the consistency tests on {host} did not finish within {probe.get('timeout')} s")
    if probe.get("rc") not in (0, None):
        detail = [line for line in (probe.get("stderr") or "").splitlines() if line.strip()]
        raise HarnessError(f"the consistency tests on {host} exited with status {probe.get('rc')}: "
                           f"{detail[-1][:300] if detail else 'no message'}")
    try:
        data = parsers.parse(probe.get("parser") or "probe-storage-consistency", probe.get("stdout") or "")
    except parsers.ParseError as exc:
        raise HarnessError(f"could not read the consistency report of {host}: {exc}") from None
    return host, data


def _directories(ctx: Context, test: str) -> tuple[str, dict[str, Any], list[dict[str, Any]]]:
    host, data = _report(ctx)
    directories = data.get("directories") or []
    if not directories:
        raise Skip(f"no shared filesystem to test on {host}: {_discovery(data)}")
    if test not in (data.get("tests") or []):
        raise HarnessError(f"the consistency tests on {host} were not asked to run this test "
                           f"(ran: {', '.join(data.get('tests') or []) or 'none'})")
    return host, data, directories


def _discovery(data: dict[str, Any]) -> str:
    found = data.get("discovery") or {}
    seen = []
    for entry in found.get("candidates") or []:
        mount = entry.get("mount") or {}
        if not entry.get("exists"):
            seen.append(f"{entry.get('path')} does not exist")
        elif entry.get("skipped"):
            seen.append(f"{entry.get('path')} ({mount.get('fstype')}) is {entry['skipped']}")
        else:
            seen.append(f"{entry.get('path')} is on {mount.get('fstype') or '?'} ({mount.get('target') or '?'})")
    why = "; ".join(seen) or "nothing was looked at"
    if found.get("requested"):
        return f"the directories given are not usable ({why})"
    return (f"the account's home and /home are on no network, FUSE or cluster filesystem ({why}); set "
            "clustereval_storage_shared_dirs to the shared directories to test")


def _where(entry: dict[str, Any]) -> str:
    mount = entry.get("mount") or {}
    return f"{entry['path']} ({mount.get('fstype') or '?'} {mount.get('source') or ''})".replace(" )", ")")


def _peers(host: str, entry: dict[str, Any]) -> tuple[list[str], dict[str, dict[str, Any]]]:
    """(peers that see the coordinator's directory, {peer: what kept it out})."""
    ok, out = [], {}
    for name, peer in sorted((entry.get("peers") or {}).items()):
        if (peer or {}).get("status") == "ok":
            ok.append(name)
        else:
            out[name] = peer or {}
    return ok, out


def _left_out(host: str, entry: dict[str, Any], name: str, peer: dict[str, Any], params: dict[str, Any],
              label: str) -> Verdict:
    """The verdict for a peer the test could not include: unreachable is the harness's (error), a peer not
    seeing the coordinator's directory is not this check's finding (skip; audit.sharedfs.shared_fs has it)."""
    subject = set_subject([host, name])
    evidence = {"directory": entry["path"], "peer": peer}
    if peer.get("status") == "unreachable":
        return Verdict("error", f"{label}: could not start the test on {name} from {host}: "
                       f"{peer.get('detail') or 'no answer'} (the test needs BatchMode SSH between nodes, see "
                       "audit.access.ssh_between_nodes, or clustereval_storage_consistency_launcher=srun)",
                       evidence=evidence, params=params, subject=subject)
    mount = peer.get("mount") or {}
    there = f"{mount.get('fstype')} on {mount.get('target')}" if mount else "no such directory"
    return Verdict("skip", f"{label}: {name} does not see the directory {host} made in {entry['path']} "
                   f"({peer.get('detail') or 'not found'}; there it is {there}), so it is not the same filesystem "
                   "there (audit.sharedfs.shared_fs compares the mounts)", evidence=evidence, params=params,
                   subject=subject)


def _harness_problem(test: dict[str, Any] | None) -> str | None:
    if test is None:
        return "the test did not run"
    if test.get("not_run"):
        return f"the test did not run: {test['not_run']}"
    if test.get("harness_error"):
        return f"the test failed: {test['harness_error']}"
    return None


def _start(host: str, entry: dict[str, Any], key: str, label: str, verdicts: list[Verdict]
           ) -> tuple[dict[str, Any], dict[str, Any] | None, list[str], dict[str, dict[str, Any]]]:
    """What every test of a directory begins with: (params, the test's record, peers in, peers left out); the
    record is None, and the harness's error is in ``verdicts``, when the test did not run or failed."""
    params, test = _params(entry), (entry.get("tests") or {}).get(key)
    ok, left_out = _peers(host, entry)
    problem = _harness_problem(test)
    if problem:
        verdicts.append(Verdict("error", f"{label} on {_where(entry)}: {problem}", params=params,
                                evidence={"directory": entry["path"]}, subject=CLUSTER_SUBJECT))
        return params, None, ok, left_out
    return params, test, ok, left_out


def _and(items: list[str]) -> str:
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def _params(entry: dict[str, Any]) -> dict[str, Any]:
    return {"directory": entry["path"]}


def _only_one(host: str, entry: dict[str, Any], params: dict[str, Any], label: str) -> Verdict:
    return Verdict("skip", f"{label}: only one node ({host}) in the evaluation: no other node to test "
                   f"{entry['path']} against", evidence={"directory": entry["path"]}, params=params,
                   subject=CLUSTER_SUBJECT)


# --------------------------------------------------------------------------------------------- locks


def _counts(stats: dict[str, Any]) -> tuple[int, int, int]:
    return int(stats.get("attempts") or 0), int(stats.get("excluded") or 0), int(stats.get("not_excluded") or 0)


def _control(host: str, control: dict[str, Any], label: str) -> tuple[str | None, str | None]:
    """(status, why) when the same-node control does not let the cross-node result stand; (None, None) if it
    does. Locks that cannot be taken at all on the coordinator are the filesystem's (fail); a control in
    which two processes of one node both get the lock means the test cannot be trusted (error)."""
    if control.get("aborted") or control.get("hung"):
        return "error", f"the same-node control on {host} stopped: {control.get('aborted') or control['hung']}"
    attempts, excluded, leaked = _counts(control)
    failed = control.get("holder_failed") or {}
    if not attempts and failed:
        errors = ", ".join(f"{why} ({n}x)" for why, n in sorted(failed.items()))
        if set(failed) <= {"still locked"}:
            return "error", f"the same-node control on {host} could not take its own lock ({errors})"
        return "fail", f"{label} locks cannot be taken on {host} at all: {errors}"
    if leaked:
        return "error", (f"the same-node control failed too: a second process on {host} got the lock the first "
                         f"held in {leaked} of {attempts} attempts, so the harness could not test whether locks "
                         "exclude across nodes")
    if excluded < attempts:
        errors = ", ".join(f"{why} ({n}x)" for why, n in sorted((control.get("errors") or {}).items()))
        return "error", (f"the same-node control on {host} was refused with an error instead of EAGAIN in "
                         f"{attempts - excluded} of {attempts} attempts ({errors}): the harness could not test "
                         "whether locks exclude across nodes")
    if not attempts:
        return "error", f"the same-node control on {host} made no attempt"
    return None, None


def _lock_pair(host: str, peer: str, pair: dict[str, Any], control: dict[str, Any], entry: dict[str, Any],
               label: str, params: dict[str, Any]) -> Verdict:
    subject = set_subject([host, peer])
    evidence: dict[str, Any] = {"directory": entry["path"], "mount": entry.get("mount"), "nodes": [host, peer],
                                "peer_mount": ((entry.get("peers") or {}).get(peer) or {}).get("mount"),
                                "control": control, **{k: pair[k] for k in ("here_holds", "peer_holds") if k in pair}}
    where = _where(entry)
    status, why = _control(host, control, label)
    if status:
        return Verdict(status, f"{label} locks on {where}: {why}", evidence=evidence, params=params, subject=subject)
    c_attempts, c_excluded, _ = _counts(control)
    sides = [pair[k] for k in ("here_holds", "peer_holds") if k in pair]
    if pair.get("aborted") and not any(s.get("hung") for s in sides):
        return Verdict("error", f"{label} locks on {where}: {pair['aborted']}", evidence=evidence, params=params,
                       subject=subject)
    hung = [f"{s['hung']} while {s['holder']} held the lock" for s in sides if s.get("hung")]
    if hung:
        return Verdict("fail", f"{label} locks on {where}: {hung[0]}: a job trying a lock file hangs instead of "
                       "being told to wait", evidence=evidence, params=params, subject=subject)
    attempts = sum(_counts(s)[0] for s in sides)
    leaked = sum(_counts(s)[2] for s in sides)
    control_text = (f"two processes on {host} exclude each other ({c_excluded} of {c_attempts} attempts refused), "
                    "so the harness works")
    if leaked:
        told = "; ".join(f"{s['contender']} took the lock {s['holder']} held in {_counts(s)[2]} of "
                         f"{_counts(s)[0]} attempts" for s in sides if _counts(s)[2])
        return Verdict("fail", f"{label} locks on {where} do not exclude across nodes: {told}; {control_text}: the "
                       "locks stay on the node that took them", leaked, evidence=evidence, params=params,
                       subject=subject)
    holder_failed = {f"{s['holder']}: {why}": n for s in sides for why, n in (s.get("holder_failed") or {}).items()}
    if holder_failed:
        return Verdict("fail", f"{label} locks on {where} cannot always be taken: "
                       + ", ".join(f"{k} ({n}x)" for k, n in sorted(holder_failed.items())), leaked,
                       evidence=evidence, params=params, subject=subject)
    stuck = sum(int(s.get("not_released") or 0) for s in sides)
    if stuck:
        return Verdict("fail", f"{label} locks on {where}: a lock released on one node was still held for the other "
                       f"5 s later in {stuck} of {attempts} attempts (stale locks block jobs until they time out)",
                       leaked, evidence=evidence, params=params, subject=subject)
    if not attempts:
        return Verdict("error", f"{label} locks on {where}: no cross-node attempt was made between {host} and {peer}",
                       evidence=evidence, params=params, subject=subject)
    errors = {f"{s['contender']}: {why}": n for s in sides for why, n in (s.get("errors") or {}).items()}
    excluded = sum(_counts(s)[1] for s in sides)
    short = any(s.get("cut_short") for s in sides)
    done = f"{excluded} of {attempts} cross-node attempts refused" + (" (cut short by the time limit)" if short else "")
    if errors:
        return Verdict("warn", f"{label} locks on {where} exclude across {host} and {peer}, but some attempts were "
                       "refused with an error instead of EAGAIN: "
                       + ", ".join(f"{k} ({n}x)" for k, n in sorted(errors.items())) + f"; {done}", leaked,
                       evidence=evidence, params=params, subject=subject)
    slow = max(float(s.get("release_wait_max_s") or 0.0) for s in sides)
    if slow > 1.0:
        return Verdict("warn", f"{label} locks on {where} exclude across {host} and {peer} ({done}), but a released "
                       f"lock took up to {slow:.2g} s to be free on the other node", leaked, evidence=evidence,
                       params=params, subject=subject)
    return Verdict("pass", f"{label} locks on {where} exclude across {host} and {peer}: {done}, each taken by the "
                   f"other node at once after its release; {control_text}", leaked, evidence=evidence, params=params,
                   subject=subject)


def _locks(ctx: Context, kind: str) -> list[Verdict]:
    label = LOCK_LABELS[kind]
    host, _, directories = _directories(ctx, kind)
    verdicts = []
    for entry in directories:
        params, test, ok, left_out = _start(host, entry, kind, f"{label} locks", verdicts)
        if test is None:
            continue
        if not ok and not left_out:
            verdicts.append(_only_one(host, entry, params, f"{label} locks"))
        verdicts.extend(_left_out(host, entry, name, peer, params, f"{label} locks")
                        for name, peer in left_out.items())
        control = test.get("control") or {}
        for name in ok:
            pair = (test.get("pairs") or {}).get(name)
            if pair is None:
                status, why = _control(host, control, label)
                verdicts.append(Verdict(status or "error", f"{label} locks on {_where(entry)}: "
                                        f"{why or f'{name} was not tested'}", params=params, subject=set_subject(
                                            [host, name]), evidence={"directory": entry["path"], "control": control}))
                continue
            verdicts.append(_lock_pair(host, name, pair, control, entry, label, params))
    return verdicts


@check("storage.consistency.flock")
def flock_across_nodes(ctx: Context) -> list[Verdict]:
    return _locks(ctx, "flock")


@check("storage.consistency.posix_lock")
def posix_lock_across_nodes(ctx: Context) -> list[Verdict]:
    return _locks(ctx, "posix")


# --------------------------------------------------------------------------------------------- mkdir


@check("storage.consistency.mkdir_race")
def mkdir_race(ctx: Context) -> list[Verdict]:
    host, _, directories = _directories(ctx, "mkdir")
    verdicts = []
    for entry in directories:
        params, test, ok, left_out = _start(host, entry, "mkdir", "mkdir -p", verdicts)
        where = _where(entry)
        verdicts.extend(_left_out(host, entry, name, peer, params, "mkdir -p")
                        for name, peer in left_out.items() if peer.get("status") == "unreachable")
        if test is None:
            continue
        nodes = sorted(set(test.get("nodes") or [host, *ok]))
        subject = set_subject(nodes) if len(nodes) > 1 else CLUSTER_SUBJECT
        if len(nodes) < 2:
            verdicts.append(_only_one(host, entry, params, "mkdir -p") if not left_out else Verdict(
                "skip", f"mkdir -p on {where}: no other node sees the directory {host} made there "
                f"({', '.join(sorted(left_out))}), so only one node could take part", params=params,
                evidence={"directory": entry["path"], "left_out": left_out}, subject=CLUSTER_SUBJECT))
            continue
        evidence = {"directory": entry["path"], "mount": entry.get("mount"), "nodes": nodes,
                    **{k: test.get(k) for k in ("ranks_per_node", "rounds", "rounds_requested", "calls", "failures",
                                                "samples")}, "left_out": sorted(left_out)}
        calls = int(test.get("calls") or 0)
        failures = test.get("failures") or {}
        failed = sum(sum(per.values()) for per in failures.values())
        if test.get("worker_errors"):
            verdicts.append(Verdict("error", f"mkdir -p on {where}: a worker failed: {test['worker_errors'][0]}",
                                    evidence=evidence, params=params, subject=subject))
            continue
        if not calls:
            verdicts.append(Verdict("error", f"mkdir -p on {where}: no call was made", evidence=evidence,
                                    params=params, subject=subject))
            continue
        ranks = f"{test.get('ranks_per_node')} ranks on each of {_and(nodes)}, {test.get('rounds')} rounds"
        if failed:
            parts = [f"{kind} {sum(per.values())} ({', '.join(f'{n}: {c}' for n, c in sorted(per.items()))})"
                     for kind, per in sorted(failures.items())]
            sample = (test.get("samples") or [{}])[0].get("stderr", "")
            eexist = sum((failures.get("EEXIST") or {}).values())
            lead = (f"{eexist} of {calls} concurrent `mkdir -p` calls of one path failed with EEXIST" if eexist else
                    f"{failed} of {calls} concurrent `mkdir -p` calls of one path failed")
            verdicts.append(Verdict("fail", f"{lead} on {where} ({ranks}): {'; '.join(parts)}"
                                    + (f"; e.g. {sample[:160]}" if sample else ""), failed, evidence=evidence,
                                    params=params, subject=subject))
            continue
        short = " (cut short by the time limit)" if test.get("cut_short") else ""
        verdicts.append(Verdict("pass", f"all {calls} concurrent `mkdir -p` calls of one path on {where} succeeded "
                                f"({ranks}){short}", 0, evidence=evidence, params=params, subject=subject))
    return verdicts


# --------------------------------------------------------------------------------------------- names


@check("storage.consistency.colon_names")
def colon_names(ctx: Context) -> list[Verdict]:
    host, _, directories = _directories(ctx, "colon")
    verdicts = []
    for entry in directories:
        params, test, _, left_out = _start(host, entry, "colon", "names with ':'", verdicts)
        where = _where(entry)
        verdicts.extend(_left_out(host, entry, name, peer, params, "names with ':'")
                        for name, peer in left_out.items() if peer.get("status") == "unreachable")
        if test is None:
            continue
        names = list(test.get("names") or [])
        created = test.get("created") or {}
        read = test.get("read") or {}
        nodes = sorted(read) or [host]
        subject = set_subject(nodes) if len(nodes) > 1 else nodes[0]
        evidence = {"directory": entry["path"], "mount": entry.get("mount"), "names": names, "created": created,
                    "read": read, "left_out": sorted(left_out)}
        broken = [f"{n} ({(created.get(n) or {}).get('error') or 'not created'})" for n in names
                  if not (created.get(n) or {}).get("created")]
        problems = []
        if broken:
            problems.append(f"{host} could not create {', '.join(broken)}")
        failed = len(broken)
        for node in nodes:
            seen = read.get(node) or {}
            if seen.get("failed"):
                verdicts.append(Verdict("error", f"names with ':' on {where}: the worker on {node} failed: "
                                        f"{seen['failed']}", evidence=evidence, params=params, subject=subject))
                break
            unlisted = [n for n, r in seen.items() if not r.get("listed")]
            unread = [n for n, r in seen.items() if r.get("listed") and not r.get("read_back")]
            if unlisted:
                problems.append(f"{node} does not list {', '.join(unlisted)}")
            if unread:
                problems.append(f"{node} lists but cannot read back {', '.join(unread)}")
            failed += len(unlisted) + len(unread)
        else:
            if not names:
                verdicts.append(Verdict("error", f"names with ':' on {where}: no name was tried", evidence=evidence,
                                        params=params, subject=subject))
            elif problems:
                verdicts.append(Verdict("fail", f"names with ':' on {where}: " + "; ".join(problems), failed,
                                        evidence=evidence, params=params, subject=subject))
            else:
                on = f"listed and read back on {_and(nodes)}" if len(nodes) > 1 else \
                    f"listed and read back on {host} (the only node that took part)"
                verdicts.append(Verdict("pass", f"{len(names)} names with ':' ({', '.join(names)}) created on {where} "
                                        f"by {host}, {on}", 0, evidence=evidence, params=params, subject=subject))
    return verdicts


# --------------------------------------------------------------------------------------------- visibility


def _one_way_problem(way: dict[str, Any], step: str) -> str | None:
    got = way.get(step)
    writer, reader = way.get("writer"), way.get("reader")
    what = "a new file" if step == "new_file" else "a file rewritten in place"
    if got is None:
        return None
    if got.get("error"):
        return f"{what} could not be written on {writer}: {got['error']}"
    if got.get("seen"):
        return None
    last = got.get("last") or {}
    if not last.get("exists"):
        return f"{what} {writer} wrote never appeared on {reader} ({last.get('error') or 'not found'})"
    return (f"{reader} kept reading other bytes than the {what} {writer} wrote ({last.get('size')} bytes, sha256 "
            f"{str(last.get('sha256'))[:12]}…)")


@check("storage.consistency.visibility")
def visibility(ctx: Context) -> list[Verdict]:
    host, _, directories = _directories(ctx, "visibility")
    verdicts = []
    for entry in directories:
        params, test, ok, left_out = _start(host, entry, "visibility", "visibility", verdicts)
        where = _where(entry)
        if test is None:
            continue
        if not ok and not left_out:
            verdicts.append(_only_one(host, entry, params, "visibility"))
        verdicts.extend(_left_out(host, entry, name, peer, params, "visibility") for name, peer in left_out.items())
        limit, why_none = None, ""
        try:
            limit = ctx.reference(AREA, "storage.consistency.visibility")
        except Skip as exc:
            why_none = str(exc)
        for name in ok:
            subject = set_subject([host, name])
            pair = (test.get("pairs") or {}).get(name)
            if pair is None:
                verdicts.append(Verdict("error", f"visibility on {where}: {name} was not tested", params=params,
                                        subject=subject, evidence={"directory": entry["path"]}))
                continue
            evidence: dict[str, Any] = {"directory": entry["path"], "mount": entry.get("mount"),
                                        "bytes": test.get("bytes"), "wait_s": test.get("wait_s"), **pair}
            ways = [pair[k] for k in ("here_to_peer", "peer_to_here") if k in pair]
            problems = [p for way in ways for step in ("new_file", "rewrite") if (p := _one_way_problem(way, step))]
            times = {f"{way['writer']} -> {way['reader']} {step.replace('_', ' ')}": float(way[step]["visible_s"])
                     for way in ways for step in ("new_file", "rewrite")
                     if (way.get(step) or {}).get("visible_s") is not None}
            if problems:
                verdicts.append(Verdict("fail", f"visibility on {where}: " + "; ".join(problems) + f" within "
                                        f"{test.get('wait_s')} s", max(times.values()) if times else None, "s",
                                        limit.expected() if limit else None, evidence, params=params, subject=subject))
                continue
            if not times:
                verdicts.append(Verdict("error", f"visibility on {where}: no time was measured between {host} and "
                                        f"{name}", evidence=evidence, params=params, subject=subject))
                continue
            worst_step, value = max(times.items(), key=lambda item: item[1])
            value = round(value, 3)
            shown = ", ".join(f"{k} {v:.3g} s" for k, v in times.items())
            if limit is None:
                verdicts.append(Verdict("skip", f"visibility on {where}: read back identical after at most {value} s "
                                        f"({worst_step}); {why_none}", value, "s", evidence=evidence, params=params,
                                        subject=subject))
                continue
            status = baselines.graded(value, limit)
            if status == "pass":
                summary = (f"files written on {host} and {name} read back byte-identical on the other after at most "
                           f"{value:.3g} s ({shown})")
            else:
                summary = (f"a file written on one node read back identical on the other only after {value:.3g} s "
                           f"({worst_step}): {baselines.shortfall(value, limit, 's', digits=3)}; {shown}")
            verdicts.append(Verdict(status, f"{where}: {summary}", value, "s", limit.expected(), evidence,
                                    params=params, subject=subject))
    return verdicts
