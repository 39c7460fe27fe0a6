"""``clustereval compare``: run directories built here with real results.jsonl lines, compared as a user would."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from clustereval import cli, compare, results
from clustereval.checks import catalogue

BANDWIDTH = "network.mesh.tcp_bandwidth"  # higher is better
TEMPERATURE = "telemetry.gpu.temperature"  # lower is better
DRIVER = "audit.gpustack.driver"  # text, no direction
SEQ_READ = "storage.fio.seq_read"


def result(check: str, subject: str, value: Any, status: str = "pass", run_id: str = "run-a",
           direction: str | None = None, unit: str | None = None, **params: Any) -> dict[str, Any]:
    entry = catalogue.load()[check]
    out: dict[str, Any] = {"run_id": run_id, "check": check, "phase": entry["phase"], "domain": entry["domain"],
                           "severity": entry["severity"], "subject": subject, "status": status, "value": value,
                           "summary": f"{check} on {subject}: {value}", "artifacts": [], "params": params}
    if unit:
        out["unit"] = unit
    if direction:
        out["expected"] = {"direction": direction, "source": "baselines/test.yml"}
    return out


def bandwidth(subject: str, gbps: float, status: str = "pass", run_id: str = "run-a") -> dict[str, Any]:
    return result(BANDWIDTH, subject, gbps, status, run_id, "higher", "Gb/s", streams=4)


def temperature(subject: str, celsius: float, status: str = "pass", run_id: str = "run-a") -> dict[str, Any]:
    return result(TEMPERATURE, subject, celsius, status, run_id, "lower", "°C")


def make_run(tmp_path: Path, name: str, lines: list[dict[str, Any]], hosts: list[str] | None = None) -> Path:
    """A run directory whose run.json names the run id of its lines."""
    run_dir = tmp_path / name
    run_id = lines[0]["run_id"] if lines else name
    run_dir.mkdir()
    info = {"run_id": run_id, "started": "2026-12-01T10:00:00Z", "ended": "2026-12-01T11:00:00Z",
            "inventory": {"hosts": hosts or [], "inventory_sources": [f"inventories/{name}.ini"]}}
    (run_dir / "run.json").write_text(json.dumps(info), encoding="utf-8")
    (run_dir / results.RESULTS_FILE).touch()
    results.append(run_dir, lines)
    return run_dir


def as_run(lines: list[dict[str, Any]], run_id: str) -> list[dict[str, Any]]:
    return [{**line, "run_id": run_id} for line in lines]


def changes_by(view: dict[str, Any], index: int = 0) -> dict[tuple[str, str], dict[str, Any]]:
    return {(c["check"], c["label"]): c for c in view["comparisons"][index]["changes"]}


def test_higher_is_better_values_beyond_noise_are_worse_or_better_and_small_moves_unchanged():
    a = [bandwidth("n1->n2", 100.0), bandwidth("n2->n1", 100.0), bandwidth("n1->n3", 100.0)]
    b = [bandwidth("n1->n2", 90.0), bandwidth("n2->n1", 96.0), bandwidth("n1->n3", 120.0)]
    changes = changes_by(compare.compare_runs([a, b], ["A", "B"]))
    worse, same, better = (changes[(BANDWIDTH, f"{s} · streams=4")] for s in ("n1->n2", "n2->n1", "n1->n3"))
    assert (worse["change"], worse["reason"], worse["relative_change"]) == ("worse", "value", pytest.approx(-0.1))
    assert same["change"] == "unchanged"
    assert (better["change"], better["relative_change"]) == ("better", pytest.approx(0.2))


def test_lower_is_better_values_turn_the_other_way():
    a = [temperature("n1/gpu0", 70.0), temperature("n1/gpu1", 70.0), temperature("n1/gpu2", 70.0)]
    b = [temperature("n1/gpu0", 80.0), temperature("n1/gpu1", 60.0), temperature("n1/gpu2", 71.0)]
    changes = changes_by(compare.compare_runs([a, b], ["A", "B"]))
    assert [changes[(TEMPERATURE, f"n1/gpu{i}")]["change"] for i in range(3)] == ["worse", "better", "unchanged"]


def test_noise_threshold_is_the_relative_change_and_can_be_narrowed():
    a, b = [bandwidth("n1->n2", 100.0)], [bandwidth("n1->n2", 96.0)]
    assert compare.compare_runs([a, b], ["A", "B"])["comparisons"][0]["counts"]["unchanged"] == 1
    narrow = compare.compare_runs([a, b], ["A", "B"], noise=0.03)["comparisons"][0]
    assert narrow["counts"]["worse"] == 1
    assert narrow["summary"] == "1 worse, 0 better, 0 new, 0 gone, 0 unchanged (noise 3%)"


def test_a_status_change_decides_whatever_the_value_did():
    a = [bandwidth("n1->n2", 100.0), temperature("n1/gpu0", 85.0, "warn")]
    b = [bandwidth("n1->n2", 130.0, "fail"), temperature("n1/gpu0", 90.0, "pass")]
    changes = changes_by(compare.compare_runs([a, b], ["A", "B"]))
    regressed = changes[(BANDWIDTH, "n1->n2 · streams=4")]
    assert (regressed["change"], regressed["reason"]) == ("worse", "status")
    assert (regressed["a"]["status"], regressed["b"]["status"]) == ("pass", "fail")
    assert changes[(TEMPERATURE, "n1/gpu0")]["change"] == "better"


def test_new_and_gone_results():
    a = [bandwidth("n1->n2", 100.0), result(SEQ_READ, "n1", 900.0, unit="MB/s")]
    b = [bandwidth("n1->n2", 100.0), temperature("n1/gpu0", 60.0)]
    view = compare.compare_runs([a, b], ["A", "B"])
    changes = changes_by(view)
    assert changes[(SEQ_READ, "n1")]["change"] == "gone" and changes[(SEQ_READ, "n1")]["b"] is None
    assert changes[(TEMPERATURE, "n1/gpu0")]["change"] == "new" and changes[(TEMPERATURE, "n1/gpu0")]["a"] is None
    assert view["comparisons"][0]["counts"] == {"worse": 0, "better": 0, "new": 1, "gone": 1, "changed": 0,
                                                "unchanged": 1}


def test_zero_none_and_text_values_do_not_crash():
    a = [bandwidth("n1->n2", 0.0), bandwidth("n2->n1", 0), result(SEQ_READ, "n1", None),
         result(DRIVER, "n1", "550.54.15"), result(DRIVER, "n2", "550.54.15"), temperature("n1/gpu0", 60.0)]
    b = [bandwidth("n1->n2", 5.0), bandwidth("n2->n1", 0), result(SEQ_READ, "n1", None),
         result(DRIVER, "n1", "570.86.10"), result(DRIVER, "n2", "550.54.15"), temperature("n1/gpu0", "n/a")]
    view = compare.compare_runs([a, b], ["A", "B"])
    changes = changes_by(view)
    from_zero = changes[(BANDWIDTH, "n1->n2 · streams=4")]
    assert (from_zero["change"], from_zero["relative_change"]) == ("better", None)
    assert changes[(BANDWIDTH, "n2->n1 · streams=4")]["change"] == "unchanged"
    assert changes[(SEQ_READ, "n1")]["change"] == "unchanged"
    assert changes[(DRIVER, "n1")]["change"] == "changed"  # no direction: equal or not
    assert changes[(DRIVER, "n2")]["change"] == "unchanged"
    assert changes[(TEMPERATURE, "n1/gpu0")]["change"] == "changed"
    assert "2 changed without a direction" in view["comparisons"][0]["summary"]
    text = compare.render_text(view)
    assert "from 0" in text


def test_by_check_aggregates_across_differently_named_hosts():
    a = [bandwidth("a1->a2", 100.0), bandwidth("a2->a1", 110.0), bandwidth("a1->a3", 120.0),
         result(DRIVER, "a1", "550"), result(DRIVER, "a2", "550")]
    b = [bandwidth("b1->b2", 60.0, "warn", "run-b"), bandwidth("b2->b1", 80.0, run_id="run-b"),
         bandwidth("b1->b3", 90.0, run_id="run-b"), result(DRIVER, "b1", "550", run_id="run-b"),
         result(DRIVER, "b2", "550", run_id="run-b")]
    view = compare.compare_runs([a, b], ["A", "B"], by="auto")
    assert view["by"] == "check" and "share 0 of 3 hosts" in view["by_reason"]
    changes = changes_by(view)
    mesh = changes[(BANDWIDTH, "all subjects · streams=4")]
    assert (mesh["change"], mesh["reason"]) == ("worse", "status")
    assert (mesh["a"]["value"], mesh["b"]["value"]) == (110.0, 80.0)  # medians
    assert mesh["b"]["worst_subject"] == "b1->b2"
    assert mesh["b"]["counts"] == {"pass": 2, "warn": 1}
    assert changes[(DRIVER, "all subjects")]["change"] == "unchanged"
    # The same runs per subject match nothing: every result is new or gone.
    per_subject = compare.compare_runs([a, b], ["A", "B"], by="subject")["comparisons"][0]["counts"]
    assert (per_subject["new"], per_subject["gone"]) == (5, 5)
    assert "worst subject" in compare.render_text(view)


def test_auto_compares_per_subject_when_the_runs_share_most_hosts():
    a = [bandwidth("n1->n2", 100.0), bandwidth("n2->n1", 100.0)]
    b = [bandwidth("n1->n2", 100.0)]  # a re-run limited to a part of the fleet
    view = compare.compare_runs([a, b], ["A", "B"], by="auto")
    assert (view["by"], view["by_reason"]) == ("subject", "the runs share 2 of 2 hosts")


def test_three_runs_are_each_compared_with_the_first():
    a, b, c = [bandwidth("n1->n2", 100.0)], [bandwidth("n1->n2", 50.0)], [bandwidth("n1->n2", 150.0)]
    view = compare.compare_runs([a, b, c], ["before", "broken", "fixed"])
    assert view["baseline"] == "before"
    assert [(x["run"], x["baseline"]) for x in view["comparisons"]] == [("broken", "before"), ("fixed", "before")]
    assert [x["counts"]["worse"] for x in view["comparisons"]] == [1, 0]
    assert [x["counts"]["better"] for x in view["comparisons"]] == [0, 1]
    text = compare.render_text(view)
    assert "Each run is compared with the baseline, A." in text
    assert "B against A: 1 worse" in text and "C against A: 0 worse, 1 better" in text


def test_text_lists_worst_changes_first_and_unchanged_only_with_all():
    a = [bandwidth("n1->n2", 100.0), bandwidth("n2->n1", 100.0), bandwidth("n1->n3", 100.0),
         bandwidth("n3->n1", 100.0), bandwidth("n2->n3", 100.0), temperature("n1/gpu0", 70.0)]
    b = [bandwidth("n1->n2", 120.0), bandwidth("n2->n1", 90.0), bandwidth("n1->n3", 50.0),
         bandwidth("n3->n1", 100.0, "fail"), bandwidth("n2->n3", 101.0), temperature("n2/gpu0", 70.0)]
    view = compare.compare_runs([a, b], ["A", "B"])
    order = [(c["change"], c["label"].split(" ")[0]) for c in view["comparisons"][0]["changes"]]
    assert order == [("worse", "n3->n1"), ("worse", "n1->n3"), ("worse", "n2->n1"), ("new", "n2/gpu0"),
                     ("gone", "n1/gpu0"), ("better", "n1->n2"), ("unchanged", "n2->n3")]
    text = compare.render_text(view)
    assert text.index("n3->n1") < text.index("n1->n3") < text.index("n2->n1") < text.index("n1->n2")
    assert "n2->n3" not in text and "1 unchanged" in text
    assert "pass -> fail" in text and "-50.0%" in text and "100 Gb/s" in text
    assert "n2->n3" in compare.render_text(view, show_all=True)


def test_cli_json_output_shape(tmp_path, capsys):
    a = make_run(tmp_path, "a", [bandwidth("n1->n2", 100.0), bandwidth("n2->n1", 100.0)], hosts=["n1", "n2"])
    b = make_run(tmp_path, "b", as_run([bandwidth("n1->n2", 80.0), bandwidth("n2->n1", 100.0)], "run-b"))
    assert compare.main([str(a), str(b), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) == {"baseline", "by", "by_reason", "noise", "runs", "comparisons"}
    assert (out["baseline"], out["by"], out["noise"]) == (str(a), "subject", 0.05)
    assert out["runs"][0] == {"name": str(a), "dir": str(a), "run_id": "run-a", "started": "2026-12-01T10:00:00Z",
                              "ended": "2026-12-01T11:00:00Z", "inventory": "inventories/a.ini", "hosts": 2}
    comparison = out["comparisons"][0]
    assert comparison["summary"] == "1 worse, 0 better, 0 new, 0 gone, 1 unchanged (noise 5%)"
    [change] = comparison["changes"]  # unchanged ones are counted, not listed
    assert change == {"change": "worse", "reason": "value", "check": BANDWIDTH, "label": "n1->n2 · streams=4",
                      "params": {"streams": 4}, "direction": "higher", "relative_change": pytest.approx(-0.2),
                      "a": {"status": "pass", "value": 100.0, "unit": "Gb/s", "subject": "n1->n2"},
                      "b": {"status": "pass", "value": 80.0, "unit": "Gb/s", "subject": "n1->n2"}}
    assert compare.main([str(a), str(b), "--json", "--all"]) == 0
    assert len(json.loads(capsys.readouterr().out)["comparisons"][0]["changes"]) == 2


def test_cli_markdown_is_a_table_for_a_ticket(tmp_path, capsys):
    a = make_run(tmp_path, "a", [result(DRIVER, "n1", "550 | old")])
    b = make_run(tmp_path, "b", as_run([result(DRIVER, "n1", "570", status="fail")], "run-b"))
    assert compare.main([str(a), str(b), "--markdown"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# Run comparison\n")
    assert "| change | check | subject | A | B | Δ | status |" in out
    assert f"| worse | {DRIVER} | n1 | 550 \\| old | 570 |  | pass -&gt; fail |" in out


def test_fail_on_worse_exits_3_only_when_something_got_worse(tmp_path, capsys):
    a = make_run(tmp_path, "a", [temperature("n1/gpu0", 60.0)])
    hotter = make_run(tmp_path, "hotter", as_run([temperature("n1/gpu0", 75.0)], "run-hot"))
    same = make_run(tmp_path, "same", as_run([temperature("n1/gpu0", 61.0)], "run-same"))
    assert compare.main([str(a), str(hotter)]) == 0
    assert compare.main([str(a), str(hotter), "--fail-on-worse"]) == cli.GATE_FAILED == 3
    assert "1 result worse than the baseline" in capsys.readouterr().err
    assert compare.main([str(a), str(same), "--fail-on-worse"]) == 0


def test_a_missing_run_or_one_without_results_exits_2_with_one_line(tmp_path, capsys):
    a = make_run(tmp_path, "a", [temperature("n1/gpu0", 60.0)])
    assert compare.main([str(a), str(tmp_path / "nope")]) == 2
    err = capsys.readouterr().err
    assert err == f"clustereval: {tmp_path / 'nope'} does not exist\n"
    (tmp_path / "empty").mkdir()
    assert compare.main([str(a), str(tmp_path / "empty")]) == 2
    assert capsys.readouterr().err == f"clustereval: {tmp_path / 'empty'} is not a run directory (no results.jsonl)\n"
    assert compare.main([str(a)]) == 2
    assert "two run directories or more" in capsys.readouterr().err


def test_a_torn_line_is_a_warning_and_the_rest_is_compared(tmp_path, capsys):
    a = make_run(tmp_path, "a", [temperature("n1/gpu0", 60.0)])
    b = make_run(tmp_path, "b", as_run([temperature("n1/gpu0", 80.0)], "run-b"))
    with open(b / results.RESULTS_FILE, "a", encoding="utf-8") as fh:
        fh.write('{"run_id": "run-b", "check": "telemetry.gpu.tem')
    assert compare.main([str(a), str(b)]) == 0
    captured = capsys.readouterr()
    assert f"clustereval: {b}: results.jsonl:2: unreadable line skipped" in captured.err
    assert "B against A: 1 worse" in captured.out


def test_bad_noise_is_refused_by_the_parser(capsys):
    with pytest.raises(SystemExit) as exc:
        compare.main(["a", "b", "--noise", "-1"])
    assert exc.value.code == 2 and "non-negative" in capsys.readouterr().err
    assert compare._noise("3%") == pytest.approx(0.03)
    with pytest.raises(ValueError, match="non-negative"):
        compare.compare_runs([[], []], ["A", "B"], noise=-0.1)


def test_add_parser_registers_the_subcommand(tmp_path, capsys):
    a = make_run(tmp_path, "a", [temperature("n1/gpu0", 60.0)])
    b = make_run(tmp_path, "b", as_run([temperature("n1/gpu0", 50.0)], "run-b"))
    parser = argparse.ArgumentParser(prog="clustereval")
    compare.add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["compare", str(a), str(b), "--by", "check", "--noise", "0.03"])
    assert args.func(args) == 0
    out = capsys.readouterr().out
    assert "Compared by check: as asked. Noise 3%." in out and "1 better" in out
