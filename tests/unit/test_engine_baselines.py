"""Expected values matched on facts and params (``baselines.reference``), grading, and the hardware facts they
are matched on (``clustereval.facts``)."""

from __future__ import annotations

import json

import pytest

from clustereval import baselines, facts
from clustereval.baselines import Limit, NoReference, candidates, grade, reference, value_matches

AREA = {
    "source": "the area's source",
    "references": [
        {"id": "any", "match": {}, "limits": {
            "t.bw": {"direction": "higher", "unit": "GB/s", "warn": 10, "fail": 5},
            "t.lat": {"direction": "lower", "unit": "us", "warn": 3.0, "fail": 10.0},
            "t.peers": {"direction": "higher", "unit": "GB/s", "reference": "peers_median", "warn": "0.6x",
                        "fail": "0.35x"},
            "t.top": {"reference": "peers_max", "warn": "0.9x"}}},
        {"id": "h100", "match": {"gpu_model": "*H100*"}, "source": "H100 figures",
         "limits": {"t.bw": {"direction": "higher", "unit": "GB/s", "reference": 400, "warn": "0.93x",
                             "fail": "0.8x"}}},
        {"id": "h100-8gpu-ib",
         "match": {"gpu_model": ["*H100*", "*H200*"], "gpu_count": 8, "fabric_class": "infiniband"},
         "limits": {"t.bw": {"reference": {"fact": "fabric_rate_gbps", "scale": 0.125}, "warn": "0.9x", "fail": "0.5x",
                             "unit": "GB/s"}}},
        {"id": "big-messages", "match": {"params": {"bytes": ">=1048576", "collective": ["all_reduce", "all_gather"]}},
         "limits": {"t.bw": {"reference": 300, "warn": "0.9x", "fail": "0.7x"}}},
        {"id": "curve", "match": {"gpu_model": "*B200*"},
         "limits": {"t.bw": {"reference": 100, "warn": "0.9x", "fail": "0.5x",
                             "points": {1024: {"reference": 10}, "1048576": {"warn": 95}, "8": {"fail": "0.2x"}}}}},
        {"id": "versions", "match": {},
         "limits": {"t.driver": {"kind": "version", "warn": "550.54.15", "fail": "535"}}},
    ],
}


@pytest.fixture
def area(monkeypatch):
    monkeypatch.setattr(baselines, "_area", lambda name: AREA)
    return "t"


# ------------------------------------------------------------------------------------------------ matching


@pytest.mark.parametrize(("wanted", "actual", "holds"), [
    ("*H100*", "NVIDIA H100 80GB HBM3", True),
    ("*h100*", "NVIDIA H100 80GB HBM3", True),  # globs are case-insensitive
    ("*H100*", "NVIDIA H200", False),
    (["*H100*", "*H200*"], "NVIDIA H200", True),
    ([], "NVIDIA H200", False),
    (">=400", 400, True), (">=400", "400", True), (">400", 400, False), ("<=1.5", 1.5, True),
    ("<2", 1, True), ("==8", 8.0, True), ("!=8", 4, True), (">= 400", 200, False),
    (">=400", "fast", False), (">=400", None, False),
    (8, 8, True), (8, "8", True), (8, 4, False), ("infiniband", "InfiniBand", True),
    (None, None, True), ("x", None, False),
])
def test_value_matches_globs_lists_comparisons_and_equality(wanted, actual, holds):
    assert value_matches(wanted, actual) is holds


def test_the_most_specific_match_comes_first(area):
    h100 = {"gpu_model": "NVIDIA H100 80GB HBM3", "gpu_count": 8, "fabric_class": "infiniband",
            "fabric_rate_gbps": 400}
    assert [e["id"] for e in candidates(area, "t.bw", h100)] == ["h100-8gpu-ib", "h100", "any"]
    assert [e["id"] for e in candidates(area, "t.bw", {**h100, "gpu_count": 4})] == ["h100", "any"]
    params = {"bytes": 4194304, "collective": "all_reduce"}
    assert [e["id"] for e in candidates(area, "t.bw", {}, params)] == ["big-messages", "any"]
    assert [e["id"] for e in candidates(area, "t.bw", {}, {**params, "bytes": 1024})] == ["any"]
    assert [e["id"] for e in candidates(area, "t.bw", {}, {"bytes": 4194304})] == ["any"]  # a param missing
    assert candidates(area, "t.nothing", h100) == []


def test_relative_levels_and_a_reference_from_a_fact(area):
    lim = reference(area, "t.bw", {"gpu_model": "NVIDIA H100 PCIe"})
    assert (lim.reference, lim.warn, lim.fail, lim.matched) == (400.0, 372.0, 320.0, "h100")
    assert lim.basis == "reference value"
    assert lim.source == "baselines/t.yml#h100 (H100 figures)"
    assert lim.expected() == {"min": 372.0, "fail_min": 320.0, "direction": "higher", "unit": "GB/s",
                              "source": "baselines/t.yml#h100 (H100 figures)", "reference": 400.0,
                              "basis": "reference value", "matched": "h100"}
    fabric = {"gpu_model": "NVIDIA H200", "gpu_count": 8, "fabric_class": "infiniband", "fabric_rate_gbps": 400}
    lim = reference(area, "t.bw", fabric)
    assert (lim.reference, lim.warn, lim.fail) == (50.0, 45.0, 25.0)
    assert lim.basis == "fact fabric_rate_gbps=400 x 0.125" and lim.source.endswith("(the area's source)")
    with pytest.raises(NoReference, match="the fact fabric_rate_gbps, unknown"):
        reference(area, "t.bw", {**fabric, "fabric_rate_gbps": None})
    lim = reference(area, "t.bw", {})
    assert (lim.reference, lim.warn, lim.fail, lim.basis, lim.matched) == (None, 10, 5, None, "any")


def test_a_reference_from_the_measured_peers(area):
    lim = reference(area, "t.peers", {}, peers=[10.0, 9.0, 2.0, None, "n/a"])
    assert (lim.reference, lim.warn, lim.fail) == (9.0, 5.4, 3.15)
    assert lim.basis == "peers_median of 3 measurements"
    assert [grade(v, lim) for v in (9.0, 5.0, 2.0)] == ["pass", "warn", "fail"]
    assert reference(area, "t.top", {}, peers=[4, 8]).warn == 7.2
    with pytest.raises(NoReference, match="fewer than two were measured"):
        reference(area, "t.peers", {}, peers=[10.0])


def test_peer_values_count_as_numbers_whatever_they_came_as(area):
    # "10" < "9" as text: the median of numeric strings must be taken of numbers
    assert reference(area, "t.peers", {}, peers=["10", "9", "2"]).reference == 9.0
    assert reference(area, "t.top", {}, peers=["10", "9"]).reference == 10.0


def test_inventory_overrides_replace_fields_whatever_matched(area):
    lim = reference(area, "t.bw", {"gpu_model": "NVIDIA H100"}, overrides={"t.bw": {"warn": "0.99x"}})
    assert (lim.warn, lim.fail) == (396.0, 320.0)
    assert lim.source.startswith("inventory override of baselines/t.yml#h100")
    lim = reference(area, "t.unknown", {}, overrides={"t.unknown": {"direction": "lower", "warn": 1, "fail": 2}})
    assert (lim.direction, lim.warn, lim.fail, lim.source, lim.matched) == ("lower", 1, 2, "inventory override",
                                                                            "inventory")
    # relative levels where nothing matched have nothing to be relative to: no reference, not "no limit"
    with pytest.raises(NoReference, match="warn are relative to a reference, and there is none"):
        reference(area, "t.unknown", {}, overrides={"t.unknown": {"warn": "0.9x", "fail": 2}})
    with pytest.raises(NoReference, match="warn and fail are relative"):
        reference(area, "t.unknown", {}, overrides={"t.unknown": {"warn": "0.9x", "fail": "0.5x"}})
    with pytest.raises(ValueError, match="direction must be 'higher' or 'lower'"):
        reference(area, "t.bw", {}, overrides={"t.bw": {"direction": "up"}})


def test_no_reference_says_what_was_looked_for(area):
    with pytest.raises(NoReference) as exc:
        reference(area, "t.unknown", {"gpu_model": "NVIDIA A100", "gpu_count": 8})
    assert "no reference in baselines/t.yml" in str(exc.value) and "gpu_model=NVIDIA A100" in str(exc.value)
    assert issubclass(NoReference, LookupError)


def test_per_point_limits_of_a_curve(area):
    lim = reference(area, "t.bw", {"gpu_model": "NVIDIA B200"})
    assert (lim.reference, lim.warn, lim.fail) == (100.0, 90.0, 50.0)
    small = lim.at(1024)  # its own reference: the relative levels are taken of it, not of the curve's
    assert (small.reference, small.warn, small.fail, small.points) == (10.0, 9.0, 5.0, {})
    assert lim.at("1024") == small  # points are named as text or numbers alike
    big = lim.at(1048576)  # an absolute level of its own, the other level relative to the curve's reference
    assert (big.reference, big.warn, big.fail) == (100.0, 95, 50.0)
    tiny = lim.at(8)
    assert (tiny.warn, tiny.fail) == (90.0, 20.0)
    assert lim.at(65536) is lim  # a point the reference does not list keeps the curve's levels
    assert [grade(v, small) for v in (9.5, 6, 4)] == ["pass", "warn", "fail"]


# ------------------------------------------------------------------------------------------------ grading


def test_grade_honours_direction_kind_and_missing_levels(area):
    higher = reference(area, "t.bw", {})
    assert [grade(v, higher) for v in (10, 9.99, 5, 4.99)] == ["pass", "warn", "warn", "fail"]
    lower = reference(area, "t.lat", {})
    assert [grade(v, lower) for v in (3.0, 3.01, 10.0, 10.5)] == ["pass", "warn", "warn", "fail"]
    versions = reference(area, "t.driver", {})
    assert [grade(v, versions) for v in ("560.28.03", "550.54.15", "550.40.07", "535.183.01", "530.30")] == [
        "pass", "pass", "warn", "warn", "fail"]
    open_ended = Limit(check="x", direction="higher", warn=None, fail=None, unit="", kind="number", source="s")
    assert grade(0, open_ended) == "pass"
    assert lower.expected()["max"] == 3.0 and lower.expected()["fail_max"] == 10.0


def test_limits_by_class_and_an_area_of_references_only(monkeypatch):
    areas = {"c": {"default_class": "small", "classes": {"small": {"t.x": {"direction": "lower", "warn": 1,
                                                                         "fail": 2, "unit": "s"}}}},
             "r": AREA}
    monkeypatch.setattr(baselines, "_area", lambda name: areas[name])
    lim = baselines.limit("c", "t.x", None, {"t.x": {"warn": 1.5}})
    assert (lim.direction, lim.warn, lim.fail, lim.source) == ("lower", 1.5, 2, "inventory override of "
                                                                                 "baselines/c.yml#small")
    with pytest.raises(KeyError, match="has no class 'big'; known: small"):
        baselines.limit("c", "t.x", "big")
    with pytest.raises(KeyError, match=r"has no limit for t\.y"):
        baselines.limit("c", "t.y")
    with pytest.raises(KeyError, match=r"baselines/r\.yml has no class 'small'; known: none"):
        baselines.limit("r", "t.bw", "small")


def test_the_packaged_network_and_telemetry_references():
    # the figures may be tuned; what they are matched on and how they are built may not silently change
    lim = reference("network", "network.mesh.tcp_bandwidth", {"link_gbps": 100.0})
    assert (lim.reference, lim.matched, lim.direction) == (100.0, "link-rate", "higher")
    assert 0 < lim.fail < lim.warn < 100.0
    with pytest.raises(NoReference):
        reference("network", "network.mesh.tcp_bandwidth", {"link_gbps": None})
    hot = reference("telemetry", "telemetry.gpu.temperature", {"gpu_model": "NVIDIA H200"})
    assert (hot.matched, hot.direction) == ("hopper", "lower") and 60 < hot.warn < hot.fail < 100
    assert reference("telemetry", "telemetry.gpu.temperature", {"gpu_model": None}).matched == "any-gpu"


# ------------------------------------------------------------------------------------------------ facts


MERGED = {"gpu_models": ["NVIDIA H100 80GB HBM3"] * 7 + ["NVIDIA H100 PCIe"], "gpu_count": 8,
          "driver_version": "550.54.15", "cuda_version": "12.4", "kernel": "5.15.0-105-generic",
          "cpu_model": "AMD EPYC 9454", "cpu_count": 192, "cpu_sockets": 2, "memory_gib": 2015.6,
          "fabric_class": "infiniband", "fabric_rails": ["mlx5_0 infiniband 400G", "mlx5_1 infiniband 200G",
                                                         "mlx5_2 infiniband down"],
          "harness": "slurm", "not_a_hardware_key": 1}


def test_hardware_keeps_the_documented_keys():
    hw = facts.hardware(MERGED)
    assert list(hw) == list(facts.HARDWARE_KEYS)
    assert hw["gpu_model"] == "NVIDIA H100 80GB HBM3" and hw["fabric_rate_gbps"] == 400.0
    assert hw["fabric_ports_active"] == 2 and hw["nics"] == MERGED["fabric_rails"]
    empty = facts.hardware({})
    assert set(empty.values()) == {None}  # nothing known is None, never absent
    assert facts.hardware({"fabric_rails": []})["fabric_ports_active"] == 0


def test_facts_are_written_atomically_and_read_back(tmp_path):
    path = facts.write(tmp_path, "node/1", {"gpu_model": "X", "gpu_count": 8})
    facts.write(tmp_path, "n2", {"gpu_model": "Y"})
    assert path.name == "node_1.json" and not list(path.parent.glob(".*"))  # no temporary file left
    (path.parent / "broken.json").write_text("{not json")
    (path.parent / "nohost.json").write_text(json.dumps({"gpu_model": "Z"}))
    assert facts.load(tmp_path) == {"node/1": {"gpu_model": "X", "gpu_count": 8}, "n2": {"gpu_model": "Y"}}
    assert facts.load(tmp_path / "absent") == {}


def test_fleet_and_the_facts_of_each_kind_of_subject():
    hosts = {"n1": facts.hardware(MERGED), "n2": facts.hardware(MERGED),
             "n3": facts.hardware({**MERGED, "gpu_count": 4, "driver_version": "535.183.01",
                                   "fabric_rails": ["mlx5_0 infiniband 200G"]})}
    fleet = facts.fleet(hosts)
    assert fleet["hosts"] == 3 and fleet["gpu_count"] == 8 and fleet["driver_version"] == "550.54.15"
    assert fleet["differing"] == {"gpu_count": ["n3"], "driver_version": ["n3"], "fabric_rate_gbps": ["n3"],
                                  "fabric_ports_active": ["n3"], "nics": ["n3"]}
    assert facts.fleet({})["gpu_model"] is None
    assert facts.for_subject(hosts, "n3")["gpu_count"] == 4
    assert facts.for_subject(hosts, "n3/gpu2")["gpu_count"] == 4
    pair = facts.for_subject(hosts, "n1->n3")
    assert pair["gpu_count"] == 4 and pair["fabric_rate_gbps"] == 200.0  # the bottleneck of the path
    assert pair["gpu_model"] == "NVIDIA H100 80GB HBM3" and pair["driver_version"] is None  # not shared: unknown
    assert facts.for_subject(hosts, "n1+n2")["driver_version"] == "550.54.15"
    assert facts.for_subject(hosts, "_cluster")["gpu_count"] == 8 and "differing" not in facts.for_subject(
        hosts, "tier:home")
    assert facts.for_subject(hosts, "n1/gpu0->n3/gpu1")["gpu_count"] == 4
