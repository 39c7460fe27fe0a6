"""Acceptance and monthly SLA reviews from a real SQLite history store filled by recording synthetic run directories
(run.json, facts/<host>.json, results.jsonl as a run writes them): availability, incidents, the NVL72 rack rule, the
cluster rule, fault drills against their targets, changes since the last review, SLA files and the CLI."""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from clustereval import facts, history, results
from clustereval.history import review as review_mod
from clustereval.history import sla as sla_mod

H100 = "NVIDIA H100 80GB HBM3"
GB200 = "NVIDIA GB200"
REACH, STATE, GEMM = "harness.node.reachable", "audit.slurm.node_state", "burnin.gemm.sustained"
DETECT, RETURN, REBOOT = "fault.inject.detection", "fault.inject.return", "fault.reboot.recovery"
DAY = 86400.0
JAN = {"since": datetime(2026, 1, 1, tzinfo=UTC), "until": datetime(2026, 2, 1, tzinfo=UTC)}
NOW = datetime(2026, 3, 15, tzinfo=UTC)


def res(run_id: str, check: str, subject: str, status: str = "pass", value: Any = None, **extra: Any
        ) -> dict[str, Any]:
    from clustereval.checks import catalogue

    meta = catalogue.entry(check)
    return {"run_id": run_id, "check": check, "phase": meta["phase"], "domain": meta["domain"], "subject": subject,
            "status": status, "severity": meta["severity"], "value": value, "unit": None, "expected": {},
            "summary": extra.pop("summary", f"{check} {status} on {subject}"), "artifacts": [],
            "started": "2026-01-01T00:00:00Z", **extra}


def make_run(base: Path, run_id: str, started: str, hosts: list[str], *, down: tuple[str, ...] = (),
             unreachable: tuple[str, ...] = (), errors: tuple[str, ...] = (), domain: dict[str, str] | None = None,
             gpu_model: str = H100, cluster: str = "alpha", extra: list[dict[str, Any]] | None = None) -> Path:
    """A run directory as a run leaves it: a node Slurm has drained (``down``), one that did not answer
    (``unreachable``: no facts, a failed reachability check), one where nothing could run (``errors``)."""
    run_dir = base / run_id
    run_dir.mkdir(parents=True)
    (run_dir / "run.json").write_text(json.dumps({"run_id": run_id, "started": started, "inventory": {
        "hosts": hosts, "cluster": cluster}, "versions": {"clustereval": "0.1.0"}}))
    lines = []
    for host in hosts:
        if host not in unreachable:
            facts.write(run_dir, host, {**dict.fromkeys(facts.HARDWARE_KEYS), "gpu_model": gpu_model, "gpu_count": 8,
                                        "nvlink_domain": (domain or {}).get(host), "driver_version": "570.1"})
        if host in unreachable:
            lines += [res(run_id, REACH, host, "fail", summary=f"{host} is unreachable: ssh timed out"),
                      res(run_id, STATE, host, "error", summary="no probe output")]
        elif host in errors:
            lines += [res(run_id, REACH, host, "error", summary="collection crashed"),
                      res(run_id, STATE, host, "error", summary="no probe output"),
                      res(run_id, GEMM, f"{host}/gpu0", "error", summary="no output")]
        else:
            drained = host in down
            lines += [res(run_id, REACH, host, "pass", 1.0, unit="s"),
                      res(run_id, STATE, host, "fail" if drained else "pass", "drained" if drained else "idle",
                          summary=f"Slurm has {host} drained (reason: Xid 79)" if drained else "idle")]
    results.append(run_dir, lines + (extra or []))
    return run_dir


def record(tmp_path: Path, db: str, runs: list[tuple[str, str, dict[str, Any]]], hosts: list[str],
           **common: Any) -> None:
    with history.open_store(db) as store:
        for run_id, started, options in runs:
            history.record(store, make_run(tmp_path / "runs", run_id, started, hosts, **{**common, **options}))


def sla_file(tmp_path: Path, name: str = "sla.yml", **changes: Any) -> Path:
    """The default SLA definitions with ``changes`` ({"rack.size": 4}; None removes a key) written to a file."""
    data = yaml.safe_load(sla_mod.default_text())
    for dotted, value in changes.items():
        *parents, last = dotted.split(".")
        node = data
        for part in parents:
            node = node[part]
        if value is None:
            node.pop(last)
        else:
            node[last] = value
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data))
    return path


def build(db: str, cluster: str = "alpha", sla: sla_mod.Sla | None = None, **options: Any) -> dict[str, Any]:
    with history.open_store(db) as store:
        return history.build_review(store, cluster, sla=sla, now=NOW, **options)


def term(review: dict[str, Any], name: str) -> dict[str, Any]:
    return next(t for t in review["terms"] if t["term"] == name)


def cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="clustereval")
    history.add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.func(args)


@pytest.fixture
def db(tmp_path: Path) -> str:
    return str(tmp_path / "store" / "history.sqlite")


HOSTS4 = ["n1", "n2", "n3", "n4"]


def test_node_down_interval_availability_incident_and_markdown(tmp_path: Path, db: str) -> None:
    record(tmp_path, db, [("r0", "2026-01-01T00:00:00Z", {}), ("r1", "2026-01-11T00:00:00Z", {"down": ("n3",)}),
                          ("r2", "2026-01-21T00:00:00Z", {})], HOSTS4)
    review = build(db, kind="monthly", **JAN)
    assert review["window"] == {"since": "2026-01-01T00:00:00Z", "until": "2026-02-01T00:00:00Z", "seconds": 31 * DAY}
    n3 = next(n for n in review["nodes"] if n["subject"] == "n3")
    assert n3["down_s"] == 10 * DAY and n3["availability"] == pytest.approx(21 / 31) and n3["samples"] == 3
    assert review["availability"]["node"]["availability"] == pytest.approx(114 / 124)
    [incident] = review["incidents"]["node"]
    assert (incident["subject"], incident["start"], incident["end"], incident["ongoing"]) == (
        "n3", "2026-01-11T00:00:00Z", "2026-01-21T00:00:00Z", False)
    assert incident["duration_s"] == 10 * DAY
    assert incident["evidence"] == [{"run_id": "r1", "check": STATE, "status": "fail",
                                     "summary": "Slurm has n3 drained (reason: Xid 79)"}]
    node = term(review, "node availability")
    assert node["verdict"] == "breached" and "91.935 %" in node["reason"]
    # no rack membership (no nvlink_domain, no racks in the SLA): said, never met
    rack = term(review, "rack availability")
    assert rack["verdict"] == "not measured" and "no rack membership" in rack["reason"]
    # the default cluster rule (down below 90 % of nodes up): 3 of 4 up is a cluster down for those 10 days
    assert review["availability"]["cluster"]["availability"] == pytest.approx(21 / 31)
    assert review["verdict"] == "breached" and review["exit"] == 1
    text = history.render_markdown(review)
    for needle in ("# Monthly SLA review: alpha", "**Verdict: BREACHED**", "91.935 %", "67.742 %", "n3",
                   "audit.slurm.node_state fail in r1: Slurm has n3 drained (reason: Xid 79)", "10.0 d"):
        assert needle in text, needle
    assert json.loads(history.render_json(review))["incident_counts"] == {"node": 1, "rack": 0, "cluster": 1}


def test_nvl_rack_rule_two_of_eighteen_up_three_down(tmp_path: Path, db: str) -> None:
    hosts = [f"gb-r1-n{i:02d}" for i in range(1, 19)]
    domain = dict.fromkeys(hosts, "8f1c2d3e-4b5a-6978-8a9b-0c1d2e3f4a5b")
    record(tmp_path, db, [("r0", "2026-01-01T00:00:00Z", {}),
                          ("r1", "2026-01-05T00:00:00Z", {"down": tuple(hosts[:2])}),
                          ("r2", "2026-01-09T00:00:00Z", {"down": tuple(hosts[:3])}),
                          ("r3", "2026-01-10T00:00:00Z", {})], hosts, domain=domain, gpu_model=GB200, cluster="nvl")
    sla = sla_mod.load_sla(sla_file(tmp_path, **{"cluster.down_when_nodes_up_below": 50.0}))
    review = build(db, "nvl", sla, kind="acceptance", since=JAN["since"], until=datetime(2026, 1, 11, tzinfo=UTC))
    [rack] = review["racks"]
    assert rack["subject"] == "8f1c2d3e-4b5a-6978-8a9b-0c1d2e3f4a5b" and len(rack["members"]) == 18
    assert rack["down_s"] == 1 * DAY and rack["availability"] == pytest.approx(9 / 10)  # only the day with 3 down
    [incident] = review["incidents"]["rack"]
    assert incident["start"] == "2026-01-09T00:00:00Z" and incident["end"] == "2026-01-10T00:00:00Z"
    assert incident["evidence"] == [{"nodes_down": hosts[:3], "of": 18}]
    assert review["availability"]["rack"]["source"] == "the nvlink_domain fact of the hosts"
    assert term(review, "rack availability")["verdict"] == "breached"
    assert review["incident_counts"]["cluster"] == 0  # 15 of 18 up is above the 50 % rule
    assert "3 of 18 nodes down (gb-r1-n01, gb-r1-n02, gb-r1-n03)" in history.render_markdown(review)
    # the same rule from host names, and a threshold of 2: the day with 2 down is a rack down as well
    sla = sla_mod.load_sla(sla_file(tmp_path, "sla2.yml", **{"rack.host_pattern": r"^(gb-r\d+)-n\d+$",
                                                              "rack.down_when_nodes_down_at_least": 2,
                                                              "cluster.down_when_nodes_up_below": 50.0}))
    review = build(db, "nvl", sla, kind="acceptance", since=JAN["since"], until=datetime(2026, 1, 11, tzinfo=UTC))
    assert review["racks"][0]["subject"] == "gb-r1" and review["racks"][0]["down_s"] == 5 * DAY


def test_cluster_rule_and_planned_maintenance(tmp_path: Path, db: str) -> None:
    record(tmp_path, db, [("r0", "2026-01-01T00:00:00Z", {}),
                          ("r1", "2026-01-02T00:00:00Z", {"down": ("n1", "n2")}),
                          ("r2", "2026-01-03T00:00:00Z", {"down": ("n1",)}),
                          ("r3", "2026-01-04T00:00:00Z", {})], HOSTS4)
    until = datetime(2026, 1, 5, tzinfo=UTC)
    sla = sla_mod.load_sla(sla_file(tmp_path, **{"cluster.down_when_nodes_up_below": 60.0}))
    review = build(db, sla=sla, kind="acceptance", since=JAN["since"], until=until)
    assert review["availability"]["cluster"]["down_s"] == DAY  # 2 of 4 up < 60 %; 3 of 4 is not
    [incident] = review["incidents"]["cluster"]
    assert incident["start"] == "2026-01-02T00:00:00Z" and incident["evidence"][0]["nodes_up"] == 2
    assert term(review, "cluster availability")["measured"] == pytest.approx(0.75)
    # n1's day down on 2026-01-03 was planned: not counted, neither against the node nor the cluster
    sla = sla_mod.load_sla(sla_file(tmp_path, "m.yml", maintenance=[
        {"start": "2026-01-02T00:00:00Z", "end": "2026-01-04T00:00:00Z", "hosts": ["n1"], "reason": "CHG-1"}],
        **{"cluster.down_when_nodes_up_below": 60.0}))
    review = build(db, sla=sla, kind="acceptance", since=JAN["since"], until=until)
    n1 = next(n for n in review["nodes"] if n["subject"] == "n1")
    assert (n1["down_s"], n1["maintenance_s"], n1["availability"]) == (0.0, 2 * DAY, 1.0)
    assert review["availability"]["cluster"]["down_s"] == 0.0  # 2 of 3 counted nodes up
    assert "CHG-1" in history.render_markdown(review)


def test_ongoing_incident_unreachable_and_every_result_error(tmp_path: Path, db: str) -> None:
    record(tmp_path, db, [("r0", "2026-01-01T00:00:00Z", {}),
                          ("r1", "2026-01-21T00:00:00Z", {"unreachable": ("n2",), "errors": ("n4",)})], HOSTS4)
    review = build(db, kind="monthly", **JAN)
    incidents = {i["subject"]: i for i in review["incidents"]["node"]}
    assert sorted(incidents) == ["n2", "n4"]
    assert incidents["n2"]["ongoing"] and incidents["n2"]["end"] is None
    assert incidents["n2"]["duration_s"] == 11 * DAY
    assert incidents["n2"]["evidence"][0]["check"] == REACH and "unreachable" in incidents["n2"]["evidence"][0][
        "summary"]
    assert incidents["n4"]["evidence"][0]["check"] == "(every result)"
    assert "| node | n2 | 2026-01-21T00:00:00Z | ongoing |" in history.render_markdown(review)
    # an SLA that does not count a node with nothing but errors as down
    sla = sla_mod.load_sla(sla_file(tmp_path, **{"node.down_when.every_result_error": False}))
    assert [i["subject"] for i in build(db, sla=sla, kind="monthly", **JAN)["incidents"]["node"]] == ["n2"]


def test_one_run_in_the_window_is_not_enough(tmp_path: Path, db: str) -> None:
    record(tmp_path, db, [("r0", "2026-01-15T00:00:00Z", {})], HOSTS4)
    review = build(db, kind="monthly", **JAN)
    for name in ("node availability", "cluster availability"):
        found = term(review, name)
        assert found["verdict"] == "not measured" and "only 1 run(s) in the window" in found["reason"]
        assert found["measured"] == 1.0  # the figure is shown, it is not called met
    assert review["availability"]["cluster"]["coverage"] == pytest.approx(17 / 31)  # nothing before 15 January
    assert any("too few to support" in note for note in review["notes"])
    assert review["verdict"] == "not measured" and review["exit"] == 1
    text = history.render_markdown(review)
    assert "no earlier run: the time before the first run is unobserved" in text and "54.8 %" in text


def drill(run_id: str, check: str, host: str, value: float | None, status: str = "pass", **extra: Any) -> dict:
    params = extra.pop("params", {"method": "dcgm", "xid": 79})
    return res(run_id, check, host, status, value, unit="s", **({"params": params} if params else {}), **extra)


def test_drills_meet_breach_and_an_undetected_fault(tmp_path: Path, db: str) -> None:
    extra = [drill("r1", DETECT, "n1", 45.0), drill("r1", RETURN, "n1", 1500.0),
             drill("r1", REBOOT, "n2", 400.0, params=None)]
    record(tmp_path, db, [("r0", "2026-01-01T00:00:00Z", {}), ("r1", "2026-01-02T00:00:00Z", {"extra": extra})],
           HOSTS4)
    review = build(db, kind="acceptance")
    assert [term(review, c)["verdict"] for c in (DETECT, RETURN, REBOOT)] == ["met", "met", "met"]
    detection = review["drills"][DETECT]["drills"][0]
    assert (detection["warn_s"], detection["fail_s"], detection["outcome"]) == (60, 120, "pass")  # baselines hgx
    assert "baselines/fault.yml#hgx" in detection["target_source"]
    # a second cluster: one slow detection, one fault nothing detected (a fail without a time), one interrupted
    extra = [drill("s1", DETECT, "n1", 45.0), drill("s1", DETECT, "n2", 200.0, "fail"),
             drill("s1", DETECT, "n3", None, "fail", summary="Xid 79 injected on n3; nothing took the node out"),
             drill("s1", DETECT, "n4", None, "error", summary="drill interrupted")]
    record(tmp_path, db, [("s0", "2026-01-01T00:00:00Z", {}), ("s1", "2026-01-02T00:00:00Z", {"extra": extra})],
           HOSTS4, cluster="beta")
    review = build(db, "beta", kind="acceptance")
    found = term(review, DETECT)
    assert found["verdict"] == "breached" and "2 of 4 drill(s) beyond the target (1 never happened)" in found["reason"]
    assert review["drills"][DETECT]["outcomes"] == {"pass": 1, "warn": 0, "fail": 2, "error": 1, "n/a": 0}
    assert (review["drills"][DETECT]["worst_s"], review["drills"][DETECT]["median_s"]) == (200.0, 122.5)
    assert term(review, REBOOT)["verdict"] == "not measured"  # no reboot drill ran: required in acceptance
    # the contract's own target: 300 s makes the slow one a pass; the undetected fault stays a breach
    sla = sla_mod.load_sla(sla_file(tmp_path, **{"drills.targets": {DETECT: {"warn": 100, "fail": 300},
                                                                     RETURN: "baselines", REBOOT: "baselines"}}))
    review = build(db, "beta", sla, kind="acceptance")
    assert [d["outcome"] for d in review["drills"][DETECT]["drills"]] == ["pass", "warn", "fail", "error"]
    assert term(review, DETECT)["verdict"] == "breached"
    assert "| fault.inject.detection | n3 |" in history.render_markdown(review)


def test_nvl72_return_has_no_target(tmp_path: Path, db: str) -> None:
    extra = [drill("r1", RETURN, "n1", 5000.0)]
    record(tmp_path, db, [("r0", "2026-01-01T00:00:00Z", {}), ("r1", "2026-01-02T00:00:00Z", {"extra": extra})],
           HOSTS4, gpu_model=GB200)
    found = term(build(db, kind="acceptance"), RETURN)
    assert found["verdict"] == "not applicable" and "nvl72" in found["reason"]


def test_changes_since_the_last_review(tmp_path: Path, db: str) -> None:
    def gemm(run_id: str, value: float, status: str = "pass") -> dict[str, Any]:
        return res(run_id, GEMM, "n1", status, value, unit="TFLOPS", expected={"direction": "higher"})

    record(tmp_path, db, [
        ("j0", "2026-01-01T00:00:00Z", {"extra": [gemm("j0", 100.0)]}),
        ("j1", "2026-01-20T00:00:00Z", {"down": ("n3",), "extra": [gemm("j1", 100.0)]}),
        ("f0", "2026-02-05T00:00:00Z", {"extra": [gemm("f0", 99.0)]}),
        ("f1", "2026-02-20T00:00:00Z", {"down": ("n4",), "extra": [gemm("f1", 80.0)]})], HOSTS4)
    review = build(db, kind="monthly", since=datetime(2026, 2, 1, tzinfo=UTC))
    assert review["window"]["until"] == "2026-03-01T00:00:00Z"
    last = review["since_last_review"]
    assert last["window"] == {"since": "2026-01-01T00:00:00Z", "until": "2026-02-01T00:00:00Z"} and last["runs"] == 2
    # n3 (and with it the cluster: 3 of 4 up is below the 90 % rule) was down when January ended, up in February
    assert last["incidents"]["resolved"] == [{"level": "cluster", "subject": "_cluster"},
                                             {"level": "node", "subject": "n3"}]
    assert sorted((i["level"], i["subject"], i["ongoing"]) for i in last["incidents"]["new"]) == [
        ("cluster", "_cluster", True), ("node", "n4", True)]
    changed = last["results"]
    assert (changed["from_run"], changed["to_run"]) == ("j1", "f1")
    assert [(r["subject"], r["from"], r["to"]) for r in changed["worse"]] == [("n4", "pass", "fail")]
    assert [(r["subject"], r["from"], r["to"]) for r in changed["better"]] == [("n3", "fail", "pass")]
    assert [(r["check"], round(r["change"], 2)) for r in changed["regressed"]] == [(GEMM, -0.2)]
    jan = last["availability"]["node"]["before"]
    assert jan == pytest.approx(1 - 12 / (4 * 31)) and last["availability"]["node"]["delta"] is not None
    text = history.render_markdown(review)
    assert "2 new, 2 resolved (cluster _cluster, node n3), 0 still open" in text and "-20.0 %" in text
    # an explicit previous window with no run in it: nothing to compare, and said
    review = build(db, kind="monthly", since=datetime(2026, 2, 1, tzinfo=UTC),
                   previous=(datetime(2025, 6, 1, tzinfo=UTC), datetime(2025, 7, 1, tzinfo=UTC)))
    assert review["since_last_review"]["results"]["compared"] is False
    assert "no run in the previous window to compare" in history.render_markdown(review)


def test_bad_sla_files_are_one_sentence(tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.yml"
    garbage.write_text("node: [unclosed\n")
    cases = {
        garbage: "is not YAML",
        sla_file(tmp_path, "a.yml", **{"rack.size": None}): "rack.size is missing",
        sla_file(tmp_path, "b.yml", **{"node.availability_target": 150}): "between 0 and 100, not 150",
        sla_file(tmp_path, "c.yml", **{"rack.host_pattern": "gb-r("}): "rack.host_pattern is no regular expression",
        sla_file(tmp_path, "d.yml", **{"drills.targets": {DETECT: "fast"}}): "drills.targets.fault.inject.detection",
        sla_file(tmp_path, "e.yml", maintenance=[{"start": "soon", "end": "later"}]): "maintenance[0].start",
        sla_file(tmp_path, "f.yml", source=""): "source must say where",
        sla_file(tmp_path, "g.yml", **{"node.down_when.checks": {"audit.slurm.node_stat": ["fail"]}}): "no check",
        tmp_path / "absent.yml": "cannot be read",
    }
    (tmp_path / "list.yml").write_text("- 1\n")
    cases[tmp_path / "list.yml"] = "holds no mapping"
    for path, needle in cases.items():
        with pytest.raises(sla_mod.SlaError) as caught:
            sla_mod.load_sla(path)
        message = str(caught.value)
        assert needle in message and str(path) in message and "\n" not in message, message
        assert isinstance(caught.value, ValueError) and isinstance(caught.value, history.HistoryError)


def test_cli_exit_codes_out_files_and_errors(tmp_path: Path, db: str, capsys: pytest.CaptureFixture[str]) -> None:
    record(tmp_path, db, [("r0", "2026-01-01T00:00:00Z", {}), ("r1", "2026-01-11T00:00:00Z", {}),
                          ("r2", "2026-01-21T00:00:00Z", {})], HOSTS4)
    # availability only (no rack in this fleet, drills not required): every term met -> 0
    met = sla_file(tmp_path, "met.yml", **{"rack.required_in": [], "drills.required_in": []})
    base = ["history", "review", "--cluster", "alpha", "--store", db, "--sla", str(met)]
    assert cli([*base, "--kind", "acceptance"]) == 0
    out = capsys.readouterr().out
    assert "**Verdict: MET**" in out and "| node availability | ≥ 99.5 % | 100 % (coverage 100 %) | met |" in out
    # a month with no run: availability not measured -> 1
    assert cli([*base, "--kind", "monthly", "--since", "2025-06-01", "--format", "json"]) == 1
    assert json.loads(capsys.readouterr().out)["verdict"] == "not measured"
    # a drained node breaches the node target -> 1; --out writes both files atomically and says the verdict
    with history.open_store(db) as store:
        history.record(store, make_run(tmp_path / "runs", "r3", "2026-01-25T00:00:00Z", HOSTS4, down=("n1",)))
    out_dir = tmp_path / "reviews"
    assert cli([*base, "--kind", "monthly", "--since", "2026-01-01", "--out", str(out_dir)]) == 1
    printed = capsys.readouterr().out
    written = sorted(p.name for p in out_dir.iterdir())
    assert written == ["review-alpha-monthly-2026-01-01T00_00_00Z_2026-02-01T00_00_00Z.json",
                       "review-alpha-monthly-2026-01-01T00_00_00Z_2026-02-01T00_00_00Z.md"]
    assert "monthly review of alpha: breached (node availability breached" in printed
    assert json.loads((out_dir / written[0]).read_text())["terms"][0]["verdict"] == "breached"
    # usage and store errors -> 2, one line
    for argv, needle in ((["history", "review", "--cluster", "nope", "--db", db], "holds no run of cluster 'nope'"),
                         ([*base, "--since", "last tuesday"], "no ISO-8601 date"),
                         ([*base, "--since", "2026-02-01", "--until", "2026-01-01"], "ends"),
                         (["history", "review", "--db", db], "needs --cluster"),
                         ([*base[:-1], str(tmp_path / "absent.yml")], "cannot be read")):
        assert cli(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.startswith("clustereval: history: ") and needle in err and err.count("\n") == 1, err
    assert cli(["history", "review", "--print-sla"]) == 0
    assert "down_when_nodes_down_at_least: 3" in capsys.readouterr().out


def test_the_default_sla_is_the_documented_one() -> None:
    sla = sla_mod.load_sla()
    assert (sla.node_target, sla.rack_size, sla.rack_down_at, sla.rack_fact) == (0.995, 18, 3, "nvlink_domain")
    assert set(sla.drill_targets) == {DETECT, RETURN, REBOOT} and sla.required["drills"] == ("acceptance",)
    assert sla.down_checks == {REACH: ("fail",), STATE: ("fail",)} and sla.every_result_error
    assert review_mod.previous_window("monthly", datetime(2026, 3, 1, tzinfo=UTC), datetime(2026, 4, 1, tzinfo=UTC)
                                      ) == (datetime(2026, 2, 1, tzinfo=UTC), datetime(2026, 3, 1, tzinfo=UTC))
