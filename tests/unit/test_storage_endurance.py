"""Storage endurance: the endurance probe's output parsed (real fio 3.33 output captured by running the probe on
this machine: tests/unit/data/storage_endurance/, whole and cut short), and every endurance check's statuses —
pass, warn, fail, skip and error — on series built to show each finding (the simulated cluster has no tier that
slows over time, so the decay is shown here)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clustereval import checks, parsers
from clustereval.checks import storage_endurance
from tests.helpers import PROBLEM_WORDS

PROBE = storage_endurance.PROBE
CAPTURE = Path(__file__).parent / "data" / "storage_endurance" / "fio-3.33-endurance-home-shm.txt"
NVME = "/scratch /dev/nvme0n1p1 xfs 3840000000000 3000000000000\ndisk: nvme0n1 nvme 0 disk"


def fio_side(mbps: float, p99_ms: float) -> dict:
    kib = mbps / 1.048576 * 1024
    return {"io_bytes": int(kib * 1024), "bw": kib, "iops": kib / 1024, "runtime": 1000, "total_ios": 10,
            "clat_ns": {"mean": p99_ms * 5e5, "percentile": {"50.000000": p99_ms * 3e5, "99.000000": p99_ms * 1e6}},
            "lat_ns": {"mean": p99_ms * 5e5}}


def interval(phase: str, index: int, mbps: float, p99_ms: float = 5.0, error: int = 0, fio_exit: int = 0,
             clients: int = 1, seconds: int = 30) -> str:
    job = {"jobname": f"{phase}.c{clients}", "error": error, "read": fio_side(mbps / 2, p99_ms),
           "write": fio_side(mbps / 2, p99_ms), "trim": fio_side(0, 0)}
    return (f"--- interval {phase} {clients} {index} {seconds}\n" + json.dumps({"fio version": "fio-3.33",
                                                                               "jobs": [job]})
            + f"\nfio-exit: {fio_exit}\n")


def tier(body: str, name: str = "scratch") -> str:
    return f"=== tier {name} /scratch\nmount: {NVME}\n{body}"


def steady(phase: str = "seq_mixed", mbps: float = 2000.0, n: int = 8, **kw) -> str:
    return "".join(interval(phase, i, mbps, **kw) for i in range(n))


def judge(check_id: str, text: str, options: dict | None = None) -> list[checks.Verdict]:
    ctx = checks.Context(subject="node1", probes={PROBE: {"name": PROBE, "rc": 0, "stdout": text,
                                                          "parser": "probe-storage-endurance"}},
                         options=options or {})
    outcome = checks.run_check(check_id, checks.registered()[check_id], ctx)
    verdicts = outcome if isinstance(outcome, list) else [outcome]
    for verdict in verdicts:
        assert not (verdict.status == "pass" and PROBLEM_WORDS.search(verdict.summary)), verdict.summary
    return verdicts


def test_captured_fio_output_gives_every_interval():
    parsed = parsers.parse("probe-storage-endurance", CAPTURE.read_text())
    assert parsed["complete"]
    tiers = {t["name"]: t for t in parsed["tiers"]}
    assert tiers["scratch"]["state"] == "same_filesystem"
    for name in ("home", "shm"):
        assert tiers[name]["state"] == "measured" and len(tiers[name]["intervals"]) == 8
        assert {(i["phase"], i["clients"]) for i in tiers[name]["intervals"]} == {
            ("seq_mixed", 1), ("rand_mixed", 1), ("seq_mixed", 2), ("rand_mixed", 2)}
        for i in tiers[name]["intervals"]:
            assert i["read_mbps"] > 0 and i["write_mbps"] > 0 and i["iops"] > 0 and i["p99_us"] > 0
            assert i["error"] == 0 and i["fio_exit"] == 0 and i["t_s"] == i["index"]
    assert tiers["shm"]["fstype"] == "tmpfs" and tiers["home"]["kind"] != "memory"


def test_captured_output_cut_short_keeps_the_finished_intervals():
    text = CAPTURE.read_text()
    cut = text[: text.index("--- interval seq_mixed 2 1 1") + 200]
    parsed = parsers.parse("probe-storage-endurance", cut)
    home = parsed["tiers"][0]
    assert not parsed["complete"] and home["state"] == "measured" and len(home["intervals"]) == 5
    assert "cut short" in home["reason"]
    errors = judge("storage.endurance.errors", cut)
    assert [v.status for v in errors] == ["error"] and "cut short" in errors[0].summary
    # what was measured is still judged
    assert any(v.status == "pass" for v in judge("storage.endurance.decay", cut, {"reference_s": 1}))


def test_output_with_no_tier_is_a_parse_error():
    with pytest.raises(parsers.ParseError):
        parsers.parse("probe-storage-endurance", "fio: command not found\n")


@pytest.mark.parametrize(("last", "status"), [(2000.0, "pass"), (1500.0, "warn"), (1100.0, "fail")])
def test_decay_against_the_first_minute(last, status):
    # first minute 2000 MB/s (intervals at 0 and 30 s), the rest falls to `last`
    text = tier(interval("seq_mixed", 0, 2000) + interval("seq_mixed", 1, 2000)
                + "".join(interval("seq_mixed", i, last) for i in range(2, 15)))
    [verdict] = judge("storage.endurance.decay", text)
    assert verdict.status == status, verdict.summary
    assert verdict.params == {"tier": "scratch", "clients": 1, "phase": "seq_mixed"}
    assert verdict.series[0]["kind"] == "timeseries" and len(verdict.series[0]["data"]) == 15
    assert verdict.series[0]["path"] == "series/node1/storage-endurance-scratch-bandwidth.csv"
    if status == "fail":
        assert verdict.value == pytest.approx(0.45) and "decays" in verdict.summary


def test_decay_skips_a_run_shorter_than_a_minute_and_without_tiers():
    [verdict] = judge("storage.endurance.decay", tier(steady(n=2)))
    assert verdict.status == "skip" and "after the first minute" in verdict.summary
    [verdict] = judge("storage.endurance.decay", "=== tier data /data\nmissing: no such directory\n")
    assert verdict.status == "skip" and "no storage tier was measured" in verdict.summary


@pytest.mark.parametrize(("last_ms", "status"), [(60.0, "pass"), (300.0, "warn"), (1500.0, "fail")])
def test_tail_latency_drift(last_ms, status):
    # a first-minute p99 of 50 ms; a 6x drift to 300 ms only warns: under the 1 s floor
    text = tier("".join(interval("rand_mixed", i, 200, p99_ms=50.0 if i < 2 else last_ms) for i in range(15)))
    [verdict] = judge("storage.endurance.tail_latency", text)
    assert verdict.status == status, verdict.summary


def test_tail_latency_skip_without_later_intervals():
    [verdict] = judge("storage.endurance.tail_latency", tier(steady(n=2)))
    assert verdict.status == "skip"


def test_errors_pass_fail_and_error():
    [verdict] = judge("storage.endurance.errors", tier(steady(n=4) + steady("rand_mixed", 200, n=4)))
    assert verdict.status == "pass" and verdict.value == 0
    [verdict] = judge("storage.endurance.errors", tier(steady(n=3) + interval("seq_mixed", 3, 0, error=5,
                                                                             fio_exit=1)))
    assert verdict.status == "fail" and "EIO (5)" in verdict.summary and "90 s in" in verdict.summary
    broken = tier(steady(n=3) + "--- interval seq_mixed 1 3 30\nfio: pid=0, err=12/file:memory.c\nfio-exit: 1\n")
    [verdict] = judge("storage.endurance.errors", broken)
    assert verdict.status == "error" and "exit status 1" in verdict.summary


def test_a_tier_where_fio_printed_nothing_readable_is_not_measured():
    text = tier("--- interval seq_mixed 1 0 30\nfio: engine libaio not loadable\nfio-exit: 1\n")
    parsed = parsers.parse("probe-storage-endurance", text)
    assert parsed["tiers"][0]["state"] == "fio_failed" and "no readable JSON" in parsed["tiers"][0]["reason"]
    [verdict] = judge("storage.endurance.errors", text)
    assert verdict.status == "error" and "fio measured nothing" in verdict.summary
    [verdict] = judge("storage.endurance.decay", text)
    assert verdict.status == "skip" and "no readable JSON" in verdict.summary


def test_the_role_catalogue_baselines_and_probe_are_wired():
    import yaml

    from clustereval import baselines
    from clustereval.checks import catalogue, probe_catalogue
    from clustereval.sim import cluster

    repo = Path(__file__).resolve().parents[2]
    ids = ["storage.endurance.decay", "storage.endurance.tail_latency", "storage.endurance.errors"]
    assert all(catalogue.entry(c)["phase"] == "reliability" and catalogue.entry(c)["probes"] == [PROBE] for c in ids)
    assert [p["name"] for p in probe_catalogue.for_phase("reliability", names={PROBE})] == [PROBE]
    assert baselines.limit("storage", "storage.endurance.decay").fail == 0.4
    defaults = yaml.safe_load((repo / "roles/storage/defaults/main.yml").read_text())
    specs = yaml.safe_load((repo / "roles/storage/meta/argument_specs.yml").read_text())["argument_specs"]["main"]
    readme = (repo / "roles/storage/README.md").read_text()
    ours = [k for k in defaults if k.startswith("clustereval_storage_endurance_")]
    assert len(ours) == 7 and defaults["clustereval_storage_endurance_seq_s"] == 450
    for name in ours:
        assert specs["options"][name]["default"] == defaults[name] and name in readme
        assert name in cluster.SIM_BENCHMARK_VARS or name.endswith("rwmixread")
