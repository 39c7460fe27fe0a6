"""A run judged against history: ``judge_run`` writes what sits beyond earlier runs on the same hardware, and
scoring and the reports count such a pass as a warn, with the history as its evidence."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clustereval import history
from clustereval import results as results_mod
from clustereval.history.judging import judge_run
from clustereval.report import render_all
from clustereval.scoring import against_history
from clustereval.scoring.score import score_run
from tests.unit.test_history import B200, GEMM, H100, make_run, result

HOSTS = ("node1", "node2", "node3")


@pytest.fixture
def store(tmp_path: Path):
    """A store holding four earlier runs of three H100 hosts measuring ~700 TFLOPS."""
    with history.open_store(str(tmp_path / "store" / "history.sqlite")) as opened:
        for day in range(1, 5):
            values = {host: 700.0 + day + i for i, host in enumerate(HOSTS)}
            history.record(opened, make_run(tmp_path / "earlier", f"e{day}", started=f"2026-02-0{day}T00:00:00Z",
                                            values=values))
        yield opened


def current_run(tmp_path: Path, values: dict[str, float], gpu_model: str = H100, **extra) -> Path:
    return make_run(tmp_path / "now", "now", started="2026-03-01T00:00:00Z", values=values, gpu_model=gpu_model,
                    **extra)


def test_a_pass_far_below_its_history_counts_as_warn(tmp_path, store):
    run_dir = current_run(tmp_path, {"node1": 704.0, "node2": 520.0, "node3": 706.0})
    doc = judge_run(store, run_dir)
    assert doc["run_id"] == "now" and doc["within"] == 3  # node1, node3 and the cluster's busbw
    (deviation,) = doc["deviations"]
    assert (deviation["check"], deviation["subject"], deviation["status"]) == (GEMM, "node2", "warn")
    assert deviation["n"] == 12 and deviation["runs"] == ["e4", "e3", "e2", "e1"]
    assert "520 TFLOPS is below" in deviation["summary"]
    assert doc["not_judged"] == {}

    score = score_run(run_dir)
    assert score["counts"]["warn"] == 1 and score["history"]["deviations"] == 1
    assert [a["subject"] for a in score["history"]["applied"]] == ["node2"]
    assert any(line.startswith("Against history") and "node2" in line for line in score["explanation"])

    render_all(run_dir)
    assert "against history: 520 TFLOPS is below" in (run_dir / "report.md").read_text(encoding="utf-8")
    # the raw results stay as measured: the judgement is its own file
    stored = {r["subject"]: r for r in results_mod.load(run_dir)[0] if r["check"] == GEMM}
    assert stored["node2"]["status"] == "pass"


def test_within_history_changes_nothing_and_says_so(tmp_path, store):
    run_dir = current_run(tmp_path, {"node1": 703.0, "node2": 705.0, "node3": 707.0})
    assert judge_run(store, run_dir)["deviations"] == []
    score = score_run(run_dir)
    assert score["counts"]["warn"] == 0 and score["history"]["within"] == 4
    assert any("none beyond it" in line for line in score["explanation"])


def test_other_hardware_is_not_judged_by_h100_history(tmp_path, store):
    run_dir = current_run(tmp_path, {"node1": 300.0}, gpu_model=B200)
    doc = judge_run(store, run_dir)
    assert doc["deviations"] == [] and doc["within"] == 0
    assert doc["not_judged"] == {"fewer than 3 earlier values on this hardware": 2}


def test_a_fail_keeps_its_verdict_and_a_value_measured_again_is_not_judged_by_the_old_file(tmp_path, store):
    failing = result("now", GEMM, "node3", status="fail", value=100.0, summary="100 TFLOPS is below the 600 floor")
    run_dir = current_run(tmp_path, {"node1": 704.0, "node2": 520.0}, extra=[failing])
    doc = judge_run(store, run_dir)
    assert {d["subject"] for d in doc["deviations"]} == {"node2", "node3"}
    score = score_run(run_dir)
    assert score["counts"]["fail"] == 1 and [a["subject"] for a in score["history"]["applied"]] == ["node2"]
    # node2 measured again, now fine: the judgement of the old value does not touch the new one
    results_mod.append(run_dir, [result("now", GEMM, "node2", value=706.0)])
    assert score_run(run_dir)["history"]["applied"] == []


def test_a_judgement_of_another_run_or_garbage_is_ignored_with_a_warning(tmp_path, store):
    run_dir = current_run(tmp_path, {"node1": 704.0, "node2": 520.0, "node3": 706.0})
    judge_run(store, run_dir)
    path = run_dir / against_history.BASELINE_FILE
    doc = json.loads(path.read_text())
    path.write_text(json.dumps({**doc, "run_id": "someone-else"}))
    score = score_run(run_dir)
    assert score["history"] is None and score["counts"]["warn"] == 0
    assert any("judged run 'someone-else', not this run (now)" in w for w in score["load_warnings"])
    path.write_text('{"run_id": "now", "deviat')
    score = score_run(run_dir)
    assert score["history"] is None and any("cannot be read" in w for w in score["load_warnings"])


def test_judging_again_judges_the_static_verdicts_not_the_last_judgement(tmp_path, store):
    run_dir = current_run(tmp_path, {"node1": 704.0, "node2": 520.0, "node3": 706.0})
    first = judge_run(store, run_dir)
    second = judge_run(store, run_dir)
    assert [d["subject"] for d in second["deviations"]] == [d["subject"] for d in first["deviations"]] == ["node2"]


def test_bad_arguments_and_a_folder_that_is_no_run(tmp_path, store):
    with pytest.raises(ValueError, match="is not a run directory"):
        judge_run(store, tmp_path)
    run_dir = current_run(tmp_path, {"node1": 704.0})
    with pytest.raises(ValueError, match="k must be a positive number"):
        judge_run(store, run_dir, k=0)
    assert not (run_dir / against_history.BASELINE_FILE).exists()


def test_the_history_judge_command_judges_renders_and_says_what_it_found(tmp_path, store, capsys):
    from clustereval import cli

    run_dir = current_run(tmp_path, {"node1": 704.0, "node2": 520.0, "node3": 706.0})
    assert cli.main(["history", "judge", str(run_dir), "--store", store.url]) == 0
    out = capsys.readouterr().out
    assert "judged run now against" in out and "1 result(s) beyond their history, 3 within, 0 not judged" in out
    assert f"  {GEMM} on node2: 520 TFLOPS is below" in out and "wrote " in out
    assert "against history" in (run_dir / "report.md").read_text(encoding="utf-8")
    assert cli.main(["history", "judge", str(tmp_path / "nothing-here"), "--store", store.url]) == 2
    assert "is not a run directory" in capsys.readouterr().err
