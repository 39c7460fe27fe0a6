"""The result contract's engine pieces: ordered statuses, identity of variants, subjects beyond hosts, the
validation of params/series/measured, and appends from several processes at once."""

from __future__ import annotations

import json
import multiprocessing
import operator

import pytest

from clustereval import results
from clustereval.results import (
    Status,
    component_subject,
    identity,
    latest,
    pair_subject,
    params_key,
    params_label,
    problems,
    rank,
    set_subject,
    subject_hosts,
    worst,
    worst_first,
)


def a_result(**fields) -> dict:
    base = {"run_id": "r", "check": "network.mesh.rtt", "phase": "performance", "domain": "network",
            "subject": "n1->n2", "status": "pass", "severity": "minor", "summary": "0.04 ms"}
    return {**base, **fields}


# ------------------------------------------------------------------------------------------------ Status


def test_statuses_are_ordered_pass_skip_warn_error_fail():
    ordered = [Status.PASS, Status.SKIP, Status.WARN, Status.ERROR, Status.FAIL]
    assert [s.rank for s in ordered] == [0, 1, 2, 3, 4]
    assert sorted(reversed(ordered)) == ordered
    assert Status.SKIP > Status.PASS and Status.WARN > Status.SKIP and Status.ERROR > Status.WARN
    assert Status.FAIL > Status.ERROR and Status.FAIL >= Status.FAIL and Status.PASS <= Status.PASS
    # against plain strings, both ways round (a check's verdicts carry plain strings)
    assert Status.WARN < "fail" and not Status.ERROR < "warn"
    assert operator.gt("fail", Status.WARN) and operator.lt("pass", Status.SKIP)  # str on the left
    # still the plain string the JSON carries, usable as a key
    assert Status.FAIL == "fail" and json.dumps(Status.WARN) == '"warn"' and {Status.PASS: 1}["pass"] == 1
    assert set(results.STATUSES) == {s.value for s in Status}


def test_unknown_statuses_rank_as_an_error():
    assert rank("bogus") == rank("error") == 3 and rank(None) == 3
    assert rank(Status.SKIP) == rank("skip") == 1


def test_worst_picks_the_status_a_combined_verdict_must_carry():
    assert worst() == "pass"
    assert worst("pass", "skip") == "skip"
    assert worst("warn", "skip", "pass") == "warn"
    assert worst("warn", "error") == "error"
    assert worst("error", "fail", "warn") == "fail"
    # lists, tuples and sets are flattened; Status members come back as plain strings
    assert worst(["pass", "warn"], ("skip",), {"pass"}) == "warn"
    assert worst([Status.PASS, Status.FAIL]) == "fail" and type(worst([Status.FAIL])) is str
    assert worst([]) == "pass"
    # any iterable, not only lists: a generator or a dict's values must not rank as one unknown status
    verdicts = {"a": "pass", "b": "warn"}
    assert worst(verdicts.values()) == "warn" and worst(s for s in ("skip", "pass")) == "skip"


def test_worst_first_sorts_the_worst_status_first():
    statuses = ["pass", "fail", "skip", "warn", "error", "pass"]
    assert sorted(statuses, key=worst_first) == ["fail", "error", "warn", "skip", "pass", "pass"]


# ------------------------------------------------------------------------------------------------ identity


def test_params_key_is_canonical_and_empty_for_no_params():
    assert params_key(None) == params_key({}) == ""
    assert params_key({"b": 2, "a": [1, 2]}) == params_key({"a": [1, 2], "b": 2}) == '{"a":[1,2],"b":2}'
    assert params_key({"a": [1, 2]}) != params_key({"a": [2, 1]})  # list order is part of the variant


def test_identity_is_check_subject_and_params():
    one = a_result(params={"count": 20, "streams": 4})
    assert identity(one) == ("network.mesh.rtt", "n1->n2", '{"count":20,"streams":4}')
    assert identity(one) == identity(a_result(params={"streams": 4, "count": 20}, status="fail"))
    assert identity(one) != identity(a_result(params={"count": 10, "streams": 4}))
    assert identity(a_result()) == identity(a_result(params={}))
    assert identity(a_result()) != identity(a_result(subject="n2->n1"))


def test_latest_keeps_the_last_of_each_variant_and_every_variant():
    first = a_result(params={"count": 20}, summary="first")
    other = a_result(params={"count": 10}, summary="other variant")
    rerun = a_result(params={"count": 20}, summary="re-run", status="warn")
    reverse = a_result(subject="n2->n1", summary="reverse")
    kept = latest([first, other, rerun, reverse])
    assert [r["summary"] for r in kept] == ["re-run", "other variant", "reverse"]
    assert latest([]) == []


def test_params_label_names_the_variant_in_a_few_words():
    assert params_label({"nodes": 2, "collective": "all_reduce"}) == "collective=all_reduce, nodes=2"
    assert params_label({"hosts": ["n1", "n2"]}) == "hosts=n1,n2"
    assert params_label({}) == params_label(None) == params_label("x") == ""


# ------------------------------------------------------------------------------------------------ subjects


def test_subjects_beyond_hosts_name_their_hosts():
    assert pair_subject("n1", "n2") == "n1->n2" and pair_subject("n2", "n1") == "n2->n1"
    assert set_subject(["n4", "n1", "n2", "n1"]) == "n1+n2+n4"
    assert component_subject("node3", "gpu5") == "node3/gpu5"
    assert subject_hosts("node3") == ["node3"]
    assert subject_hosts("node3/gpu5") == ["node3"]
    assert subject_hosts(pair_subject("n1", "n2")) == ["n1", "n2"]
    assert subject_hosts(set_subject(["n4", "n1", "n2"])) == ["n1", "n2", "n4"]
    assert subject_hosts("_cluster") == [] and subject_hosts("tier:home") == [] and subject_hosts(None) == []
    assert subject_hosts("tier:home/clients") == []


def test_a_pair_or_set_of_components_names_hosts_not_components():
    # e.g. a GPU-to-GPU bandwidth inside one node, or across two nodes
    assert subject_hosts(pair_subject("n1/gpu0", "n2/gpu3")) == ["n1", "n2"]
    assert subject_hosts(pair_subject("n1/gpu0", "n1/gpu1")) == ["n1"]
    assert subject_hosts(set_subject(["n1/gpu0", "n2/gpu0"])) == ["n1", "n2"]


# ------------------------------------------------------------------------------------------------ problems


def test_a_result_honouring_the_contract_has_no_problems():
    full = a_result(params={"count": 20}, evidence={"loss_pct": 0}, artifacts=["raw/n1/ping.txt"],
                    series=[{"path": "series/_cluster/x.csv", "kind": "timeseries", "x": "t"}],
                    measured={"started": "a", "ended": "b", "events": [{"at": "a", "event": "start"}]})
    assert problems(full) == []
    assert problems(a_result()) == []


@pytest.mark.parametrize(("fields", "expected"), [
    ({"params": ["count", 20]}, "params must be a mapping"),
    ({"params": "count=20"}, "params must be a mapping"),
    ({"series": {"path": "x.csv"}}, "series must be a list"),
    ({"series": [{"kind": "curve"}]}, "series must be a list"),
    ({"series": ["series/x.csv"]}, "series must be a list"),
    ({"measured": "2024-01-01"}, "measured must be a mapping"),
    ({"measured": {"events": "start"}}, "measured must be a mapping"),
    ({"status": "ok"}, "status 'ok' is not one of"),
    ({"severity": "high"}, "severity 'high' is not one of"),
    ({"phase": "burnin"}, "phase 'burnin' is not one of"),
    ({"summary": ""}, "missing field 'summary'"),
    ({"artifacts": "raw/x"}, "artifacts must be a list"),
    ({"evidence": ["x"]}, "evidence must be a mapping"),
])
def test_each_broken_field_is_named(fields, expected):
    found = problems(a_result(**fields))
    assert any(expected in p for p in found), found


def test_a_skip_must_say_why():
    assert "a skip must say why in its summary" in problems(a_result(status="skip", summary=""))
    assert problems(a_result(status="skip", summary="not applicable")) == []


# ------------------------------------------------------------------------------------------------ append


def test_append_and_load_round_trip_and_a_torn_line_is_only_a_warning(tmp_path):
    assert results.append(tmp_path, []) == 0 and not (tmp_path / results.RESULTS_FILE).exists()
    assert results.append(tmp_path / "new", [a_result(), a_result(subject="n2->n1")]) == 2
    with open(tmp_path / "new" / results.RESULTS_FILE, "a") as fh:
        fh.write('{"check": "torn')
    loaded, warnings = results.load(tmp_path / "new")
    assert [r["subject"] for r in loaded] == ["n1->n2", "n2->n1"]
    assert len(warnings) == 1 and "unreadable line skipped" in warnings[0]
    assert results.load(tmp_path / "absent") == ([], [f"{tmp_path / 'absent' / results.RESULTS_FILE} does not exist"])


def test_load_leaves_out_and_reports_unknown_check_ids_and_lines_of_another_run(tmp_path):
    (tmp_path / "run.json").write_text(json.dumps({"run_id": "r"}))
    results.append(tmp_path, [a_result(), a_result(check="network.mesh.ping"), a_result(check=["network.mesh.rtt"]),
                              a_result(run_id="r0", status="fail", severity="critical"), a_result(subject="n2->n1")])
    loaded, warnings = results.load(tmp_path)
    assert [(r["check"], r["subject"], r["status"]) for r in loaded] == [
        ("network.mesh.rtt", "n1->n2", "pass"), ("network.mesh.rtt", "n2->n1", "pass")]
    assert warnings == [
        "results.jsonl:2: check id 'network.mesh.ping' is not in the catalogue, skipped",
        "results.jsonl:3: check id ['network.mesh.rtt'] is not in the catalogue, skipped",
        "results.jsonl:4: from another run 'r0' (this run is 'r'), skipped",
    ]
    assert results.run_id_of(tmp_path) == "r"


def test_lines_of_earlier_starts_into_the_same_run_dir_are_kept_when_run_json_lists_them(tmp_path):
    (tmp_path / "run.json").write_text(json.dumps({"run_id": "r2", "previous_run_ids": ["r0", "r1", 5]}))
    results.append(tmp_path, [a_result(run_id="r0"), a_result(run_id="r1", subject="n2->n1"),
                              a_result(run_id="r2", subject="n3->n1"), a_result(run_id="r9", subject="n4->n1")])
    loaded, warnings = results.load(tmp_path)
    assert [r["run_id"] for r in loaded] == ["r0", "r1", "r2"]
    assert warnings == ["results.jsonl:4: from another run 'r9' (this run is 'r2'), skipped"]


@pytest.mark.parametrize("run_json", [None, "{not json", '["r"]', '{"run_id": 7}', '{"run_id": ""}'])
def test_the_run_id_rule_is_skipped_without_a_run_id_in_run_json(tmp_path, run_json):
    if run_json is not None:
        (tmp_path / "run.json").write_text(run_json)
    results.append(tmp_path, [a_result(), a_result(run_id="r0", subject="n2->n1")])
    loaded, warnings = results.load(tmp_path)
    assert len(loaded) == 2 and warnings == [] and results.run_id_of(tmp_path) is None


def _writer(run_dir: str, worker: int, calls: int, per_call: int) -> None:
    padding = "x" * 20000  # each call writes more than one buffer's worth: several write(2) per call
    for call in range(calls):
        results.append(run_dir, [a_result(subject=f"w{worker}", evidence={"call": call, "i": i, "pad": padding})
                                 for i in range(per_call)])


def test_append_from_several_processes_never_interleaves_lines(tmp_path):
    workers, calls, per_call = 4, 6, 5
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_writer, args=(str(tmp_path), w, calls, per_call)) for w in range(workers)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(30)
        assert proc.exitcode == 0
    loaded, warnings = results.load(tmp_path)
    assert warnings == []
    assert len(loaded) == workers * calls * per_call
    # one call's lines stay together and in order
    lines = [(r["subject"], r["evidence"]["call"], r["evidence"]["i"]) for r in loaded]
    for start in range(0, len(lines), per_call):
        block = lines[start:start + per_call]
        assert len({(s, c) for s, c, _ in block}) == 1 and [i for _, _, i in block] == list(range(per_call))


def test_task_result_round_trip_and_a_bad_value_is_refused():
    items = [a_result(), a_result(subject="n2->n1")]
    assert results.from_task_result({results.TASK_RESULT_KEY: results.to_task_result(items)}) == items
    assert results.from_task_result({}) == []
    with pytest.raises(ValueError):
        results.from_task_result({results.TASK_RESULT_KEY: json.dumps({"not": "a list"})})
