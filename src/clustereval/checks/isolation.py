"""Finding the bad node (or link) from pairwise measurements: pure functions, no I/O.

The role measures every node in a 2-node collective (round one: :func:`plan_pairs`), then re-pairs the
nodes of each failing pair with nodes that passed (round two: :func:`replan`), and :func:`culprits`
reads every pair measured so far. This is the two-pass strategy of Google's cluster-health-scanner
(peers.md, "pairwise NCCL ... re-pairs failed nodes to find the bad one"). The rules:

* a node in no passing pair that failed with a node that passes elsewhere, or with two partners, is
  **bad** (two bad nodes are both named; the failing pairs they are in are explained by them);
* a failing pair whose two nodes each also passed with someone else is a **bad link** between them (the
  path, a switch port, a cable: neither node alone);
* a failing pair with a node never measured elsewhere is **unresolved**: round two is what resolves it.

Exposed to the role through a filter, so the same code schedules round two and judges it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

Pair = tuple[str, str]


def _pair(a: str, b: str) -> Pair:
    return (a, b) if a <= b else (b, a)


def plan_pairs(nodes: Sequence[str]) -> list[Pair]:
    """Round one: disjoint pairs covering every node (neighbours in sorted order). An odd node out is
    paired with the first node, so every node is measured once at least."""
    ordered = sorted(dict.fromkeys(nodes))
    pairs = [_pair(ordered[i], ordered[i + 1]) for i in range(0, len(ordered) - 1, 2)]
    if len(ordered) % 2 and len(ordered) > 1:
        pairs.append(_pair(ordered[-1], ordered[0]))
    return pairs


def replan(failing_pairs: Iterable[Sequence[str]], good_nodes: Iterable[str]) -> list[Pair]:
    """Round two: each node of each failing pair measured with a different known-good node (so a pair that
    fails again names its node, and one that passes clears it). Known-good nodes are used in turn;
    without any, the failing nodes are crossed with each other (a node bad with every partner stands out)."""
    good = sorted(dict.fromkeys(good_nodes))
    suspects = sorted({n for pair in failing_pairs for n in pair} - set(good))
    planned: list[Pair] = []
    failing = {_pair(*p) for p in failing_pairs}
    if good:
        for i, node in enumerate(suspects):
            # never its failing partner again (a good node may have failed with it: a bad link)
            fresh = [g for g in good[i % len(good):] + good[:i % len(good)] if _pair(node, g) not in failing]
            if fresh:
                planned.append(_pair(node, fresh[0]))
        return list(dict.fromkeys(planned))
    for i, a in enumerate(suspects):
        for b in suspects[i + 1:]:
            if _pair(a, b) not in failing:
                planned.append(_pair(a, b))
    return planned


def culprits(results: dict[Pair, bool] | Iterable[tuple[Sequence[str], bool]]) -> dict[str, Any]:
    """What the pairs measured say: ``{"bad_nodes", "bad_links", "unresolved", "good_nodes"}`` (sorted
    lists; links as pairs). ``results`` maps a pair of nodes to True (passed) or False (failed); a pair
    measured several times counts as failing when any measurement failed."""
    items = results.items() if isinstance(results, dict) else results
    outcome: dict[Pair, bool] = {}
    for pair, passed in items:
        key = _pair(*pair)
        outcome[key] = outcome.get(key, True) and bool(passed)
    passing = {n for pair, ok in outcome.items() if ok for n in pair}
    failing = [pair for pair, ok in outcome.items() if not ok]
    partners: dict[str, set[str]] = {}
    for a, b in failing:
        partners.setdefault(a, set()).add(b)
        partners.setdefault(b, set()).add(a)
    # Never passing is not enough: a node seen once, with a partner also seen once, may be the good end of
    # a bad pair. It is bad when it failed with a partner that passes elsewhere, or with two partners.
    bad = sorted(n for n, others in partners.items()
                 if n not in passing and (len(others) > 1 or others & passing))
    links, unresolved = [], []
    for a, b in sorted(failing):
        if a in bad or b in bad:
            continue  # explained by a bad node
        measured_elsewhere = all(any(n in p and p != (a, b) for p in outcome) for n in (a, b))
        (links if measured_elsewhere else unresolved).append((a, b))
    return {"bad_nodes": bad, "bad_links": links, "unresolved": unresolved, "good_nodes": sorted(passing - set(bad))}
