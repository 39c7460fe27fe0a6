"""Audit check: a shared filesystem mounted at the same path on every node.

Reads util-linux ``findmnt -J -o TARGET,SOURCE,FSTYPE,OPTIONS`` (2.27+; the kernel's mount table,
children nested; parser ``findmnt-json``), keeps the mounts whose type is a network or parallel filesystem
(``baselines/sharedfs.yml``) as per-host facts, and compares them across the fleet.
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Any

from clustereval import yamldata
from clustereval.checks import Context, HarnessError, ProbeFailed, Skip, Verdict, check, facts
from clustereval.parsers.findmnt import filesystems

FINDMNT_PROBE = "sharedfs_findmnt"


@cache
def _data() -> dict[str, Any]:
    text = resources.files("clustereval.baselines").joinpath("sharedfs.yml").read_text(encoding="utf-8")
    return yamldata.load(text)


def shared_mounts(mounts: list[dict[str, Any]] | str) -> dict[str, dict[str, str]]:
    """``{target: {"fstype", "source"}}`` of the shared filesystems among findmnt's mounts, as the
    ``findmnt-json`` parser lists them (a mount before those below it), or in ``findmnt -J`` text."""
    if isinstance(mounts, str):
        mounts = filesystems(mounts)
    types = set(_data()["shared_fstypes"])
    ignored = tuple(_data().get("ignored_targets") or [])
    out: dict[str, dict[str, str]] = {}
    for item in mounts:
        target = str(item.get("target") or "")
        fstype = str(item.get("fstype") or "")
        system = any(target == p or target.startswith(p + "/") for p in ignored)
        # An automount point whose filesystem is mounted (its child, same target) keeps the real type.
        if fstype in types and not system and not (fstype == "autofs" and target in out):
            out[target] = {"fstype": fstype, "source": str(item.get("source") or "")}
    return out


@facts(probes=[FINDMNT_PROBE])
def sharedfs_facts(ctx: Context) -> dict[str, Any]:
    """``sharedfs_mounts`` for the fleet check (None with a reason under problems when unreadable)."""
    out: dict[str, Any] = {"problems": {}, "artifacts": {}}
    try:
        out["sharedfs_mounts"] = shared_mounts(ctx.parsed(FINDMNT_PROBE)["filesystems"])
    except (Skip, HarnessError, ProbeFailed) as exc:
        out["problems"]["sharedfs"] = str(exc)
    if FINDMNT_PROBE in ctx.probes:
        out["artifacts"]["sharedfs"] = ctx.probes[FINDMNT_PROBE].get("artifact")
    return out


@check("audit.sharedfs.shared_fs")
def shared_fs(ctx: Context) -> Verdict:
    mounts: dict[str, dict[str, dict[str, str]]] = {}
    not_assessed: dict[str, str] = {}
    for host, known in sorted(ctx.fleet.items()):
        if not known:
            not_assessed[host] = "unreachable"
        elif known.get("sharedfs_mounts") is None:
            not_assessed[host] = (known.get("problems") or {}).get("sharedfs") or "no findmnt facts"
        else:
            mounts[host] = known["sharedfs_mounts"]
            artifact = (known.get("artifacts") or {}).get("sharedfs")
            if artifact:
                ctx.extra_artifacts.append(artifact)
    if not mounts:
        harness = {h: why for h, why in not_assessed.items() if why != "unreachable"}
        if harness:
            detail = "; ".join(f"{h}: {why}" for h, why in harness.items())
            raise HarnessError(f"could not read the mount table of any node: {detail[:400]}")
        raise Skip("no node could be assessed (all unreachable)")
    targets = sorted({t for per_host in mounts.values() for t in per_host})
    evidence: dict[str, Any] = {"nodes_assessed": len(mounts), "not_assessed": not_assessed, "mounts": {}}
    if not targets:
        return Verdict("warn", f"no network or parallel filesystem is mounted on any of the {len(mounts)} nodes: "
                       "jobs must stage code and data to every node themselves", 0, evidence=evidence)
    missing_any, drift = [], []
    for target in targets:
        holders = {h: per_host[target] for h, per_host in mounts.items() if target in per_host}
        missing = sorted(set(mounts) - set(holders))
        variant = {h: f"{m['fstype']} {m['source']}" for h, m in holders.items()}
        kinds = sorted(set(variant.values()))
        evidence["mounts"][target] = {"on": len(holders), "missing_on": missing, "variants": kinds}
        if missing:
            missing_any.append(f"{target} ({', '.join(kinds)}) is missing on {', '.join(missing)}")
        if len(kinds) > 1:
            drift.append(f"{target} comes from different sources: " + " | ".join(
                f"{kind} on {', '.join(h for h, v in variant.items() if v == kind)}" for kind in kinds))
    note = f" ({len(not_assessed)} node(s) not assessed: {', '.join(not_assessed)})" if not_assessed else ""
    if missing_any:
        return Verdict("fail", "; ".join(missing_any + drift) + note, len(mounts), evidence=evidence)
    if drift:
        return Verdict("warn", "; ".join(drift) + note, len(mounts), evidence=evidence)
    listed = ", ".join(f"{t} ({mounts[next(iter(mounts))][t]['fstype']})" for t in targets)
    return Verdict("pass", f"{listed} mounted on all {len(mounts)} nodes" + note, len(mounts), evidence=evidence)
