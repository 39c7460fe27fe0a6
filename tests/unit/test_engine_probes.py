"""The engine's probe side: the probe runner's run modes and parameters (run as the judge runs it, ``python3 -c``),
the probe catalogue, what a check may read (``Context.declared``), timeouts, several verdicts per check, value
types, selection by tags, acting and destructive permissions, facts probes and the planning filters."""

from __future__ import annotations

import functools
import glob
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from ansible.errors import AnsibleFilterError

from clustereval import checks
from clustereval.checks import (
    Context,
    HarnessError,
    ProbeTimedOut,
    Skip,
    Verdict,
    catalogue,
    evaluate,
    evaluate_many,
    make_result,
    not_permitted,
    probe_catalogue,
    probes_for,
    selection,
)
from clustereval.facts import HARDWARE_PROBES
from clustereval.results import problems
from tests.helpers import RUN, load_plugin, probe

REPO = Path(__file__).resolve().parents[2]
RUNNER = (REPO / "plugins/module_utils/probe_runner.py").read_text()


@functools.cache
def old_pythons() -> list[str]:
    """Interpreters older than ours found on this machine (the nodes run their distribution's Python: RHEL 8 has
    3.6); ``CLUSTEREVAL_OLD_PYTHON`` names one more."""
    candidates = [os.environ.get("CLUSTEREVAL_OLD_PYTHON", ""), "/usr/libexec/platform-python", "/usr/bin/python3.6",
                  *sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.[6-9]*/bin/python3")))]
    found = {}
    for path in filter(os.path.isfile, candidates):
        proc = subprocess.run([path, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                              capture_output=True, text=True, timeout=30)
        if proc.returncode == 0 and tuple(map(int, proc.stdout.split("."))) < sys.version_info[:2]:
            found.setdefault(proc.stdout.strip(), path)
    return [found[v] for v in sorted(found, key=lambda v: tuple(map(int, v.split("."))))[:1]]  # the oldest


def run_probes(request: dict[str, Any], python: str = sys.executable) -> dict[str, Any]:
    proc = subprocess.run([python, "-c", RUNNER], input=json.dumps(request), capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode in (0, 2), proc.stderr
    return {"rc": proc.returncode, **json.loads(proc.stdout)}


def engine_filters():
    return load_plugin("plugins/filter/engine.py", "clustereval_engine_filters")


# A catalogue of our own, so the tests do not move when the real catalogue does.
def _entry(check_id: str, **fields: Any) -> dict[str, Any]:
    return {"id": check_id, "title": check_id, "phase": "audit", "domain": "audit", "severity": "major",
            "harnesses": ["slurm", "k8s", "standalone"], "why": "w", "fix": "f", "scope": "node", "cmax": [],
            **fields}


FAKE = {e["id"]: e for e in (
    _entry("test.engine.reads", probes=["declared_probe"], value="number", unit="ms"),
    _entry("test.engine.anything", value="text"),
    _entry("test.engine.many", probes=[], value="number", phase="performance", domain="network"),
    _entry("test.engine.slurm_only", probes=[], harnesses=["slurm"]),
    _entry("test.engine.flag", probes=[], value="flag"),
    _entry("test.engine.list", probes=[], value="list"),
    _entry("test.engine.mapping", probes=[], value="mapping"),
    _entry("test.engine.untyped", probes=[]),
    _entry("test.engine.acts", probes=[], acts=True),
    _entry("test.engine.restoring", probes=[], acts="restoring"),
    _entry("test.engine.destructive", probes=[], acts="destructive", phase="reliability"),
)}


@pytest.fixture
def fake_catalogue(monkeypatch):
    checks.registered()  # register the real checks first: the patches below must not catch them
    real = catalogue.entry
    monkeypatch.setattr(catalogue, "entry", lambda check_id: FAKE[check_id] if check_id in FAKE else real(check_id))

    def register(check_id: str):
        def deco(fn):
            monkeypatch.setitem(checks._CHECKS, check_id, fn)
            return fn
        return deco

    return register


def judged(check_id: str, ctx: Context) -> list[dict[str, Any]]:
    out = evaluate_many(check_id, ctx, RUN)
    for result in out:
        assert problems(result) == [], result
    return out


# ------------------------------------------------------------------------------------------------ runner


def test_exclusive_probes_run_one_at_a_time_after_the_parallel_ones():
    timed = "s=$(date +%s%N); sleep 0.25; e=$(date +%s%N); echo $s $e"
    request = {"parallel": 4, "probes": [
        {"name": "p1", "cmd": timed}, {"name": "x1", "cmd": timed, "runs": "exclusive"},
        {"name": "p2", "cmd": timed, "runs": "parallel"}, {"name": "x2", "cmd": timed, "runs": "exclusive"},
        {"name": "p3", "cmd": timed, "runs": "cluster"},  # the role picks the host; on the node it is parallel
    ]}
    answer = run_probes(request)
    spans = {name: tuple(int(t) for t in rec["stdout"].split()) for name, rec in answer["probes"].items()}
    parallel, exclusive = [spans[n] for n in ("p1", "p2", "p3")], [spans["x1"], spans["x2"]]
    # the parallel ones overlap each other ...
    assert max(start for start, _ in parallel) < min(end for _, end in parallel)
    # ... and every exclusive one starts after all of them ended, never beside another exclusive one
    assert min(start for start, _ in exclusive) >= max(end for _, end in parallel)
    assert spans["x2"][0] >= spans["x1"][1]
    assert answer["probes"]["x1"]["runs"] == "exclusive"  # the record keeps its mode


def test_params_reach_the_command_as_environment_never_as_command_text(tmp_path):
    marker = tmp_path / "injected"
    cmd = ('printf "%s\\n" "$CLUSTEREVAL_PEER_HOST" "$CLUSTEREVAL_FLAG" "$CLUSTEREVAL_OFF" "$CLUSTEREVAL_LIST" '
           '"$CLUSTEREVAL_MAP" "[$CLUSTEREVAL_NONE]" "${CLUSTEREVAL_NONE+defined}"')
    answer = run_probes({"probes": [
        {"name": "with", "cmd": cmd, "params": {
            "peer_host": f"n2; touch {marker}; $(touch {marker})", "flag": True, "off": False,
            "list": ["10.0.0.2", "10.0.0.3"], "map": {"b": 1, "a": 2}, "none": None}},
        {"name": "without", "cmd": 'echo "[${CLUSTEREVAL_PEER_HOST-unset}]"'},
    ]})
    lines = answer["probes"]["with"]["stdout"].splitlines()
    assert lines == [f"n2; touch {marker}; $(touch {marker})", "1", "0", "10.0.0.2,10.0.0.3", '{"a": 2, "b": 1}',
                     "[]", "defined"]
    assert not marker.exists()  # the value never became part of the command line
    assert answer["probes"]["without"]["stdout"] == "[unset]\n"  # one probe's params are not another's


@pytest.mark.parametrize("python", old_pythons() or [pytest.param(None, marks=pytest.mark.skip(
    reason="no Python older than ours here (set CLUSTEREVAL_OLD_PYTHON)"))])
def test_the_runner_runs_on_the_oldest_python_a_node_may_have(python):
    answer = run_probes({"probes": [{"name": "a", "cmd": 'echo "$CLUSTEREVAL_X"', "params": {"x": [1, 2]}},
                                    {"name": "b", "cmd": "sleep 5", "timeout": 0.2, "runs": "exclusive"}]}, python)
    assert answer["rc"] == 0 and answer["probes"]["a"]["stdout"] == "1,2\n" and answer["probes"]["b"]["timed_out"]


def test_a_request_with_a_bad_mode_or_params_runs_nothing():
    answer = run_probes({"probes": [{"name": "a", "cmd": "true", "runs": "sometimes"}]})
    assert answer["rc"] == 2 and "unknown run mode" in answer["msg"] and "probes" not in answer
    answer = run_probes({"probes": [{"name": "a", "cmd": "true", "params": ["x"]}]})
    assert answer["rc"] == 2 and "must be mappings" in answer["msg"]


def test_a_catalogue_probe_runs_with_its_params_and_its_parser_reads_it():
    [route] = probe_catalogue.for_phase("performance", timeout=10, names={"network_route"})
    [ready] = probe_catalogue.with_params([route], {"destinations": ["127.0.0.1"], "unrelated": 1})
    assert ready["params"] == {"destinations": ["127.0.0.1"]} and "accepts" not in ready
    record = run_probes({"probes": [ready]})["probes"]["network_route"]
    assert record["rc"] == 0 and record["params"] == {"destinations": ["127.0.0.1"]}
    ctx = Context(subject="n1", probes={"network_route": record})
    assert ctx.parsed("network_route")["routes"]["127.0.0.1"]["device"] == "lo"


# ------------------------------------------------------------------------------------------------ catalogue


def test_ready_keeps_what_the_runner_needs_and_says_what_the_probe_accepts():
    entry = {"name": "p", "phase": "performance", "cmd": "x", "source": "probes/x.yml", "description": "d",
             "params": ["destination", "count"], "runs": "exclusive", "on_timeout": "fail", "tool": "ping"}
    ready = probe_catalogue.ready(entry, timeout=30)
    assert ready == {"name": "p", "cmd": "x", "runs": "exclusive", "on_timeout": "fail", "tool": "ping",
                     "timeout": 30, "accepts": ["destination", "count"]}
    assert probe_catalogue.ready({**entry, "timeout": 5}, timeout=30)["timeout"] == 5  # its own wins
    assert "timeout" not in probe_catalogue.ready({"name": "q", "cmd": "y", "phase": "audit"})


def test_with_params_gives_each_probe_its_values_and_instances_keep_their_own():
    probes = [{"name": "a", "cmd": "x", "accepts": ["destination", "count"]},
              {"name": "b@n2", "cmd": "y", "accepts": ["destination", "count"], "params": {"destination": "10.0.0.2"}},
              {"name": "c", "cmd": "z"}]
    a, b, c = probe_catalogue.with_params(probes, {"destination": "default", "count": 3, "other": 9})
    assert a["params"] == {"destination": "default", "count": 3} and "accepts" not in a
    assert b["params"] == {"destination": "10.0.0.2", "count": 3}  # the instance's own value wins
    assert c == {"name": "c", "cmd": "z"}  # accepts nothing, gets nothing
    [empty] = probe_catalogue.with_params(probes[:1], None)
    assert empty["params"] == {"destination": None, "count": None}  # defined, empty: $CLUSTEREVAL_COUNT=""


def test_for_phase_selects_by_name_and_the_catalogue_modes_are_valid():
    every = probe_catalogue.for_phase("performance")
    some = probe_catalogue.for_phase("performance", names={"network_iperf3", "network_ping", "not_a_probe"})
    assert {p["name"] for p in some} == {"network_iperf3", "network_ping"} and len(every) >= len(some)
    assert probe_catalogue.for_phase("performance", names=set()) == []
    for name, entry in probe_catalogue.load().items():
        assert entry.get("runs", "parallel") in probe_catalogue.RUN_MODES, name
        assert entry.get("on_timeout", "error") in probe_catalogue.TIMEOUT_MEANINGS, name
        assert isinstance(entry.get("params", []), list), name
    iperf = probe_catalogue.load()["network_iperf3"]
    assert iperf["runs"] == "exclusive" and iperf["on_timeout"] == "fail" and "destination" in iperf["params"]


# ------------------------------------------------------------------------------------------------ declared


def test_a_check_may_read_only_the_probes_its_catalogue_entry_names(fake_catalogue):
    @fake_catalogue("test.engine.reads")
    def reads(ctx: Context) -> Verdict:
        ctx.probe("declared_probe")
        ctx.probe("other_probe")
        return Verdict("pass", "read both")

    probes = {**probe("declared_probe", "1\n"), **probe("other_probe", "2\n")}
    [result] = judged("test.engine.reads", Context(subject="n1", probes=probes))
    assert result["status"] == "error" and "'other_probe' is not among the probes" in result["summary"]
    assert "declared_probe" in result["summary"]


def test_the_shared_parse_cache_does_not_lift_the_rule(fake_catalogue):
    # The judge parses the facts probes into one cache shared by every check of the node: a check must not
    # read one it does not name through that cache (it would work in a full run and break under --tags).
    @fake_catalogue("test.engine.reads")
    def reads(ctx: Context) -> Verdict:
        return Verdict("pass", str(ctx.parsed("facts_host")["cpus"]), 1)

    probes = probe("facts_host", "cpu_model: X\ncpus: 2\nsockets: 1\nmemory_kib: 1048576\n")
    cache: dict[str, Any] = {}
    assert Context(subject="n1", probes=probes, parse_cache=cache).parsed("facts_host")["cpus"] == 2  # facts
    [result] = judged("test.engine.reads", Context(subject="n1", probes=probes, parse_cache=cache))
    assert result["status"] == "error" and "'facts_host' is not among the probes" in result["summary"]


def test_an_entry_without_probes_lets_the_check_read_any(fake_catalogue):
    @fake_catalogue("test.engine.anything")
    def anything(ctx: Context) -> Verdict:
        return Verdict("pass", "ok", ctx.probe("whatever")["stdout"].strip())

    [result] = judged("test.engine.anything", Context(subject="n1", probes=probe("whatever", "text\n")))
    assert result["status"] == "pass" and result["value"] == "text" and result["artifacts"] == ["raw/n1/whatever.txt"]


# ------------------------------------------------------------------------------------------------ outcomes


@pytest.mark.parametrize(("record", "status", "words"), [
    ({"rc": 0, "stdout": "12\n"}, "pass", "12"),
    ({"rc": 3, "stderr": "boom\n"}, "fail", "exited with status 3: boom"),
    ({"rc": 127, "missing": True, "tool": "ping"}, "skip", "`ping` is not installed on n1"),
    ({"rc": -9, "timed_out": True, "timeout": 2}, "error", "timed out after 2 s"),
    ({"rc": -9, "timed_out": True, "timeout": 2, "on_timeout": "error"}, "error", "timed out after 2 s"),
    ({"rc": -9, "timed_out": True, "timeout": 2, "on_timeout": "fail", "stdout": "step 1\nstep 2\n"},
     "fail", "did not finish within 2 s (a hang)"),
])
def test_each_probe_outcome_becomes_its_status(fake_catalogue, record, status, words):
    @fake_catalogue("test.engine.reads")
    def reads(ctx: Context) -> Verdict:
        value = float(ctx.probe("declared_probe")["stdout"])
        return Verdict("pass", f"read {value:g}", value)

    [result] = judged("test.engine.reads", Context(subject="n1", probes=probe("declared_probe", **record)))
    assert result["status"] == status and words in result["summary"], result["summary"]


def test_a_hang_is_a_fail_with_the_last_lines_as_evidence(fake_catalogue):
    # A real timed-out record from the probe runner, the way a hanging collective leaves it.
    chatty = "for i in $(seq 1 15); do echo line $i; done; echo waiting >&2; sleep 10"
    record = run_probes({"probes": [{"name": "declared_probe", "timeout": 0.5, "on_timeout": "fail", "cmd": chatty}]})
    hung = record["probes"]["declared_probe"]
    assert hung["timed_out"] and hung["on_timeout"] == "fail"

    @fake_catalogue("test.engine.reads")
    def reads(ctx: Context) -> Verdict:
        ctx.raw("declared_probe")
        return Verdict("pass", "never")

    [result] = judged("test.engine.reads", Context(subject="n1", probes={"declared_probe": hung}))
    assert result["status"] == "fail" and "(a hang)" in result["summary"]
    assert result["evidence"]["timeout_s"] == 0.5
    assert result["evidence"]["last_lines"] == [f"line {i}" for i in range(6, 16)] + ["waiting"]
    exc = ProbeTimedOut({"cmd": "c", "timeout": 1, "stdout": "x" * 400})
    assert exc.tail == ["x" * 300]


# ------------------------------------------------------------------------------------------------ several verdicts


def test_several_verdicts_each_name_their_subject_and_params(fake_catalogue):
    @fake_catalogue("test.engine.many")
    def many(ctx: Context) -> list[Verdict]:
        return [Verdict("pass", "a", 1.0, subject="n1->n2", evidence={"_artifacts": ["raw/n1/a.txt"]}),
                Verdict("fail", "b", 2, subject="n2->n1", params={"streams": 8}),
                Verdict("warn", "c", 3.5)]

    ctx = Context(subject="_cluster", params={"streams": 4}, extra_artifacts=["raw/_cluster/x.txt"])
    first, second, third = judged("test.engine.many", ctx)
    assert (first["subject"], first["params"], first["artifacts"]) == ("n1->n2", {"streams": 4}, ["raw/n1/a.txt"])
    assert "_artifacts" not in first["evidence"]
    assert (second["subject"], second["params"], second["status"]) == ("n2->n1", {"streams": 8}, "fail")
    assert (third["subject"], third["artifacts"]) == ("_cluster", ["raw/_cluster/x.txt"])
    with pytest.raises(ValueError, match="returned 3 verdicts"):
        evaluate("test.engine.many", Context(subject="_cluster"), RUN)


def test_no_verdict_is_a_skip_saying_so_or_nothing_for_a_live_check(fake_catalogue):
    @fake_catalogue("test.engine.many")
    def nothing(ctx: Context) -> None:
        return [] if ctx.options.get("as_list") else None

    for options in ({}, {"as_list": True}):
        [result] = judged("test.engine.many", Context(subject="_cluster", options=options))
        assert result["status"] == "skip" and "nothing to judge" in result["summary"]
        assert evaluate_many("test.engine.many", Context(subject="_cluster", options=options), RUN,
                             empty_ok=True) == []


def test_a_check_for_another_harness_is_skipped_and_a_crash_is_an_error(fake_catalogue):
    @fake_catalogue("test.engine.slurm_only")
    def slurm_only(ctx: Context) -> Verdict:
        raise RuntimeError("a bug in the check")

    [result] = judged("test.engine.slurm_only", Context(subject="n1", options={"harness": "k8s"},
                                                        params={"tier": "home"}))
    assert result["status"] == "skip" and "applies to slurm clusters; this one is k8s" in result["summary"]
    assert result["evidence"]["not_applicable"] and result["params"] == {"tier": "home"}
    [result] = judged("test.engine.slurm_only", Context(subject="n1", options={"harness": "slurm"}))
    assert result["status"] == "error" and "crashed: RuntimeError: a bug in the check" in result["summary"]


def test_skip_and_harness_errors_raised_by_a_check(fake_catalogue):
    @fake_catalogue("test.engine.many")
    def raising(ctx: Context) -> Verdict:
        raise (Skip("no GPU here") if ctx.options.get("skip") else HarnessError("the sampler died"))

    [skipped] = judged("test.engine.many", Context(subject="n1", options={"skip": True}))
    [errored] = judged("test.engine.many", Context(subject="n1"))
    assert (skipped["status"], skipped["summary"]) == ("skip", "no GPU here")
    assert (errored["status"], errored["summary"]) == ("error", "the sampler died")


# ------------------------------------------------------------------------------------------------ value types


@pytest.mark.parametrize(("check_id", "good", "bad"), [
    ("test.engine.reads", 1.5, "1.5"),
    ("test.engine.reads", 3, True),  # a bool is not a number, though Python says it is an int
    ("test.engine.anything", "6.1.0", 6.1),
    ("test.engine.flag", False, 0),
    ("test.engine.list", ["a"], "a"),
    ("test.engine.mapping", {"a": 1}, [("a", 1)]),
])
def test_a_value_of_the_wrong_type_is_the_checks_error(fake_catalogue, check_id, good, bad):
    def result(value: Any, status: str = "pass") -> dict[str, Any]:
        return make_result(check_id, "n1", Verdict(status, "measured", value), run_id=RUN, artifacts=[],
                           started="t", duration_s=0.0)

    assert result(good)["status"] == "pass" and result(None)["status"] == "pass"
    wrong = result(bad, "warn")
    assert wrong["status"] == "error" and "[harness: value" in wrong["summary"] and problems(wrong) == []
    assert f"where the catalogue says {FAKE[check_id]['value']}" in wrong["summary"]
    assert result(bad, "skip")["status"] == "skip"  # a skip's value is not judged
    assert catalogue.value_problem(FAKE["test.engine.untyped"], bad) is None  # no type declared


def test_make_result_fills_unit_and_params_from_the_catalogue_and_the_variant(fake_catalogue):
    made = make_result("test.engine.reads", "n1", Verdict("pass", "ok", 1.0, series=[{"path": "series/x.csv"}],
                                                          measured={"events": []}),
                       run_id=RUN, artifacts=[], started="t", duration_s=0.123456, params={"count": 3})
    assert made["unit"] == "ms" and made["params"] == {"count": 3} and made["duration_s"] == 0.1235
    assert made["series"] == [{"path": "series/x.csv"}] and made["measured"] == {"events": []}
    bare = make_result("test.engine.reads", "n1", Verdict("pass", "ok", unit="s"), run_id=RUN, artifacts=[],
                       started="t", duration_s=0, params={})
    assert bare["unit"] == "s" and "params" not in bare and "series" not in bare and "measured" not in bare


def test_every_catalogue_value_type_is_known():
    assert set(catalogue.VALUE_TYPES) == {"number", "text", "list", "mapping", "flag"}
    for check_id, entry in catalogue.load().items():
        assert entry.get("value") in (None, *catalogue.VALUE_TYPES), check_id


# ------------------------------------------------------------------------------------------------ selection


def test_tags_select_by_id_prefix_and_phase_and_skip_tags_win(fake_catalogue):
    ids = ["test.engine.reads", "test.engine.many", "test.engine.destructive"]
    assert selection(ids, [], []) == ids and selection(ids, ["all"], []) == ids
    assert selection(ids, ["test.engine.reads"], []) == ["test.engine.reads"]
    assert selection(ids, ["test.engine"], ["test.engine.many"]) == ["test.engine.reads", "test.engine.destructive"]
    assert selection(ids, ["performance"], []) == ["test.engine.many"]
    assert selection(ids, ["all"], ["reliability"]) == ["test.engine.reads", "test.engine.many"]
    assert selection(ids, ["test.eng"], []) == []  # a prefix ends at a dot
    assert selection(ids, ["test.engine.reads"], ["test"]) == []


def test_probes_for_names_what_the_node_must_run(fake_catalogue):
    wanted = probes_for(["test.engine.reads", "test.engine.many"])
    assert {"declared_probe", "facts_host", *HARDWARE_PROBES} <= wanted
    assert "other_probe" not in wanted and checks.fact_probes() <= wanted
    assert probes_for(["test.engine.reads", "test.engine.anything"]) is None  # one names none: collect all
    assert probes_for([]) == checks.fact_probes() | set(HARDWARE_PROBES)


def test_facts_probes_are_registered_with_their_function(monkeypatch):
    checks.registered()
    monkeypatch.setattr(checks, "_FACTS", list(checks._FACTS))
    monkeypatch.setattr(checks, "_FACT_PROBES", dict(checks._FACT_PROBES))
    assert "facts_host" in checks.fact_probes()

    @checks.facts(probes=("engine_test_probe",))
    def engine_facts(ctx: Context) -> dict[str, Any]:
        return {"engine_value": ctx.probe("engine_test_probe")["stdout"].strip(), "problems": {"x": "y"}}

    @checks.facts
    def broken_facts(ctx: Context) -> dict[str, Any]:
        raise KeyError("gone")

    assert "engine_test_probe" in checks.fact_probes()
    merged = checks.host_facts(Context(subject="n1", probes=probe("engine_test_probe", "42\n")))
    assert merged["engine_value"] == "42" and merged["problems"]["x"] == "y"
    assert merged["problems"][__name__] == "KeyError: 'gone'"  # one crash does not hide the others


# ------------------------------------------------------------------------------------------------ permissions


def test_restoring_checks_gate_themselves_and_destructive_ones_need_an_opt_in_and_a_target(fake_catalogue):
    assert not_permitted("test.engine.reads", {"allow_actions": False}) is None
    for acting in ("test.engine.acts", "test.engine.restoring"):
        # their probes learn allow_actions as a parameter and say "not tried": the check still judges them
        assert not_permitted(acting, {}) is None and not_permitted(acting, {"allow_actions": False}) is None
    destructive = "test.engine.destructive"
    assert "not opted in" in not_permitted(destructive, {}, "n1")
    assert "not opted in" in not_permitted(destructive, {"allow_actions": True, "destructive_targets": ["n1"]}, "n1")
    opted = {"allow_destructive": True, "destructive_targets": ["n1"]}
    assert not_permitted(destructive, opted, "n1") is None
    assert "n2 is not in clustereval_destructive_targets" in not_permitted(destructive, opted, "n2")
    # opted in without a target list: nothing is a target, whether a host is named or not
    assert "names no host" in not_permitted(destructive, {"allow_destructive": True}, "n1")
    assert "names no host" in not_permitted(destructive, {"allow_destructive": True})
    assert not_permitted(destructive, opted) is None


# ------------------------------------------------------------------------------------------------ filters


@pytest.mark.parametrize("count", [0, 1, 2, 3, 4, 5, 6, 7, 8])
def test_mesh_schedule_measures_every_ordered_pair_once(count):
    filters = engine_filters()
    hosts = [f"n{i}" for i in range(count)]
    for mode in ("matching", "serial"):
        steps = filters.mesh_schedule(hosts + hosts[:1], mode)  # a repeated host is one host
        pairs = [(a, b) for step in steps for a, b in step.items()]
        assert sorted(pairs) == sorted((a, b) for a in hosts for b in hosts if a != b), mode
        assert all(step for step in steps)
        if mode == "matching":
            for step in steps:
                busy = [h for pair in step.items() for h in pair]
                assert len(busy) == len(set(busy)), step  # no node in two pairs of one step
            if count >= 2:
                assert len(steps) == 2 * (count - 1 + count % 2)
        else:
            assert all(len(step) == 1 for step in steps)
    with pytest.raises(AnsibleFilterError, match="mode must be"):
        filters.mesh_schedule(hosts, "random")


def test_probe_instances_one_per_peer_with_its_address():
    filters = engine_filters()
    ping = {"name": "network_ping", "cmd": "ping", "accepts": ["destination", "count"], "timeout": 120}
    a, b = filters.probe_instances(ping, ["n2", "n3"], {"n2": "10.0.0.2"}, timeout=35)
    assert (a["name"], a["probe"], a["artifact"]) == ("network_ping@n2", "network_ping", "network-ping-to-n2.txt")
    assert a["params"] == {"destination": "10.0.0.2"} and b["params"] == {"destination": "n3"}
    assert a["timeout"] == 35.0 and a["accepts"] == ["destination", "count"]
    [c] = filters.probe_instances({**ping, "artifact": "route", "params": {"count": 3}}, ["n4"])
    assert c["artifact"] == "route-to-n4" and c["params"] == {"count": 3, "destination": "n4"} and c["timeout"] == 120
    # the instance's destination survives with_params, the task's count fills in
    [ready] = probe_catalogue.with_params([a], {"destination": "task", "count": 5})
    assert ready["params"] == {"destination": "10.0.0.2", "count": 5}
    assert probes_for(["network.mesh.loss"]) is not None and ready["probe"] in probes_for(["network.mesh.loss"])


def test_selected_checks_and_mesh_addresses():
    filters = engine_filters()
    mesh = ["network.mesh.rtt", "network.mesh.loss"]
    assert filters.selected_checks(mesh, None, None) == mesh
    assert filters.selected_checks(mesh, ["network.mesh.rtt"], []) == ["network.mesh.rtt"]
    assert filters.selected_checks(mesh, ["all"], ["network"]) == []
    with pytest.raises(AnsibleFilterError, match=r"not in the catalogue: network\.mesh\.nope"):
        filters.selected_checks(["network.mesh.nope"], ["all"], [])
    hostvars = {"n1": {"clustereval_network_mesh_address": "10.1.0.1", "ansible_host": "192.0.2.1"},
                "n2": {"ansible_host": "192.0.2.2"}, "n3": {}}
    assert filters.mesh_addresses(["n1", "n2", "n3"], hostvars) == {"n1": "10.1.0.1", "n2": "192.0.2.2", "n3": "n3"}
    assert set(filters.FilterModule().filters()) == {"selected_checks", "mesh_schedule", "probe_instances",
                                                     "mesh_addresses"}


ACTING = [p for p in probe_catalogue.load().values() if "allow_actions" in (p.get("params") or [])]


@pytest.mark.parametrize("definition", ACTING, ids=[p["name"] for p in ACTING])
def test_every_acting_probe_acts_only_when_actions_are_allowed_and_unset_is_not(definition, tmp_path):
    # One default for every acting probe: CLUSTEREVAL_ALLOW_ACTIONS=1 acts; unset or anything else does not.
    assert "${CLUSTEREVAL_ALLOW_ACTIONS-unset}" in definition["cmd"]
    assert "ALLOW_ACTIONS:-" not in definition["cmd"]
    for env, said in (({}, "actions were not allowed"), ({"CLUSTEREVAL_ALLOW_ACTIONS": "0"}, "switched off")):
        # no srun/kubectl/enroot on this PATH: only the guard can answer, before anything acts
        proc = subprocess.run(["bash", "-c", definition["cmd"]], capture_output=True, text=True, timeout=30,
                              cwd=tmp_path, env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), **env})
        assert said in proc.stdout, (definition["name"], env, proc.stdout[-400:], proc.stderr[-400:])
