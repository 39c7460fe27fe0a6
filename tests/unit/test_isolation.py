"""The pairing logic that names the bad node or link from 2-node runs (checks/isolation.py)."""

from __future__ import annotations

import pytest

from clustereval.checks.isolation import culprits, plan_pairs, replan


def measure(pairs, bad_nodes=(), bad_links=()):
    """A pair passes unless it holds a bad node or is a bad link."""
    links = {tuple(sorted(link)) for link in bad_links}
    return {p: not (set(p) & set(bad_nodes)) and tuple(sorted(p)) not in links for p in pairs}


def two_rounds(nodes, bad_nodes=(), bad_links=()):
    first = measure(plan_pairs(nodes), bad_nodes, bad_links)
    failing = [p for p, ok in first.items() if not ok]
    good = culprits(first)["good_nodes"]
    return culprits({**first, **measure(replan(failing, good), bad_nodes, bad_links)})


def test_plan_pairs_covers_every_node_once_and_the_odd_one_with_the_first():
    assert plan_pairs(["n4", "n2", "n1", "n3"]) == [("n1", "n2"), ("n3", "n4")]
    assert plan_pairs([f"n{i}" for i in range(1, 6)])[-1] == ("n1", "n5")
    assert plan_pairs(["n1"]) == []


@pytest.mark.parametrize("count", [4, 5, 8])
def test_one_bad_node_is_named(count):
    nodes = [f"n{i}" for i in range(1, count + 1)]
    found = two_rounds(nodes, bad_nodes=["n3"])
    assert found["bad_nodes"] == ["n3"] and found["bad_links"] == [] and found["unresolved"] == []


@pytest.mark.parametrize("count,bad", [(4, ["n1", "n2"]), (5, ["n2", "n5"]), (8, ["n2", "n7"])])
def test_two_bad_nodes_are_both_named(count, bad):
    nodes = [f"n{i}" for i in range(1, count + 1)]
    found = two_rounds(nodes, bad_nodes=bad)
    assert found["bad_nodes"] == sorted(bad) and found["unresolved"] == []


@pytest.mark.parametrize("count", [4, 5, 8])
def test_a_bad_link_names_the_pair_not_its_nodes(count):
    nodes = [f"n{i}" for i in range(1, count + 1)]
    found = two_rounds(nodes, bad_links=[("n1", "n2")])
    assert found["bad_nodes"] == [] and found["bad_links"] == [("n1", "n2")]


def test_after_round_one_a_failing_pair_is_unresolved_not_blamed():
    first = measure(plan_pairs(["n1", "n2", "n3", "n4"]), bad_nodes=["n3"])
    found = culprits(first)
    assert found["bad_nodes"] == [] and found["unresolved"] == [("n3", "n4")]
    assert replan([("n3", "n4")], found["good_nodes"]) == [("n1", "n3"), ("n2", "n4")]


def test_replan_without_good_nodes_crosses_the_suspects():
    assert replan([("n1", "n2"), ("n3", "n4")], []) == [("n1", "n3"), ("n1", "n4"), ("n2", "n3"), ("n2", "n4")]
