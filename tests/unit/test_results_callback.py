"""The results callback records what it is handed and the harness-only facts (unreachable, failed task)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

from clustereval.results import TASK_RESULT_KEY, load, problems, to_task_result
from tests.helpers import load_plugin

REPO = Path(__file__).resolve().parents[2]


def callback():
    module = load_plugin("plugins/callback/results.py", "clustereval_results_cb")
    cb = module.CallbackModule()
    cb._display = SimpleNamespace(banner=lambda *a: None, display=lambda *a: None, warning=lambda *a: None)
    return cb


def task_result(host: str, result: dict, task: str = "Collect"):
    return SimpleNamespace(_host=SimpleNamespace(get_name=lambda: host), _result=result,
                           _task=SimpleNamespace(get_name=lambda: task))


def a_result(subject: str) -> dict:
    return {"run_id": "r", "check": "audit.os.kernel", "phase": "audit", "domain": "audit", "subject": subject,
            "status": "pass", "severity": "minor", "summary": "kernel 6.1", "value": "6.1", "artifacts": []}


def test_results_before_the_run_dir_is_known_are_kept_and_written(tmp_path):
    cb = callback()
    cb.v2_runner_on_ok(task_result("n1", {TASK_RESULT_KEY: to_task_result([a_result("n1")])}))
    assert not (tmp_path / "results.jsonl").exists()
    cb.v2_runner_on_ok(task_result("localhost", {"clustereval_run_dir": str(tmp_path), "clustereval_run_id": "r"}))
    cb.v2_runner_on_ok(task_result("n2", {TASK_RESULT_KEY: to_task_result([a_result("n2")])}))
    results, warnings = load(tmp_path)
    assert [r["subject"] for r in results] == ["n1", "n2"] and warnings == []


def test_what_the_harness_saw_before_the_run_dir_was_known_carries_the_run_id(tmp_path):
    (tmp_path / "run.json").write_text(json.dumps({"run_id": "r", "started": "2026-11-30T00:00:00Z"}))
    cb = callback()
    cb.v2_runner_on_unreachable(task_result("n3", {"msg": "ssh: connect to host 127.0.9.3 port 22: refused"}))
    cb.v2_runner_on_ok(task_result("localhost", {"clustereval_run_dir": str(tmp_path), "clustereval_run_id": "r"}))
    cb.v2_runner_on_ok(task_result("n1", {TASK_RESULT_KEY: to_task_result([a_result("n1")])}))
    results, warnings = load(tmp_path)
    assert [(r["check"], r["subject"], r["run_id"]) for r in results] == [
        ("harness.node.reachable", "n3", "r"), ("audit.os.kernel", "n1", "r")]
    assert warnings == []


def test_a_run_dir_learnt_without_its_id_takes_the_id_from_run_json(tmp_path):
    (tmp_path / "run.json").write_text(json.dumps({"run_id": "r", "started": "2026-11-30T00:00:00Z"}))
    cb = callback()
    cb.v2_runner_on_failed(task_result("n1", {"msg": "MODULE FAILURE: no python3"}, task="Judge"))
    cb.v2_runner_on_ok(task_result("localhost", {"clustereval_run_dir": str(tmp_path)}))  # a session's result
    cb.v2_runner_on_failed(task_result("n2", {"msg": "MODULE FAILURE: no python3"}, task="Judge"))
    results, warnings = load(tmp_path)
    assert [(r["subject"], r["run_id"]) for r in results] == [("n1", "r"), ("n2", "r")] and warnings == []


def test_unreachable_is_recorded_once_and_a_failed_task_is_a_harness_error(tmp_path):
    cb = callback()
    cb.v2_runner_on_ok(task_result("localhost", {"clustereval_run_dir": str(tmp_path), "clustereval_run_id": "r"}))
    for _ in range(2):
        cb.v2_runner_on_unreachable(task_result("n3", {"msg": "ssh: connect to host 127.0.9.3 port 22: refused"}))
    cb.v2_runner_on_failed(task_result("n1", {"msg": "MODULE FAILURE: no python3"}, task="Judge"))
    cb.v2_runner_on_failed(task_result("n2", {"msg": "expected"}), ignore_errors=True)
    results, _ = load(tmp_path)
    assert [(r["check"], r["subject"], r["status"]) for r in results] == [
        ("harness.node.reachable", "n3", "fail"), ("harness.task.failed", "n1", "error")]
    assert "refused" in results[0]["summary"] and "no python3" in results[1]["summary"]
    assert all(problems(r) == [] for r in results)


def test_unreadable_task_results_are_a_harness_error_not_lost_silently(tmp_path):
    cb = callback()
    cb.v2_runner_on_ok(task_result("localhost", {"clustereval_run_dir": str(tmp_path), "clustereval_run_id": "r"}))
    cb.v2_runner_on_ok(task_result("n1", {TASK_RESULT_KEY: '[{"check": "audit.os.kernel"'}))
    cb.v2_runner_on_ok(task_result("n2", {TASK_RESULT_KEY: '{"not": "a list"}'}))
    results, _ = load(tmp_path)
    assert [(r["check"], r["subject"], r["status"]) for r in results] == [
        ("harness.task.failed", "n1", "error"), ("harness.task.failed", "n2", "error")]
    assert "unreadable results" in results[0]["summary"]


def test_end_of_playbook_scores_and_reports(tmp_path):
    cb = callback()
    (tmp_path / "run.json").write_text(json.dumps({"run_id": "r", "started": "2026-11-30T00:00:00Z"}))
    cb.v2_runner_on_ok(task_result("localhost", {"clustereval_run_dir": str(tmp_path), "clustereval_run_id": "r",
                                                 TASK_RESULT_KEY: to_task_result([a_result("n1")])}))
    stats = SimpleNamespace(processed={"n1": 1}, summarize=lambda host: {"ok": 3, "failures": 0})
    cb.v2_playbook_on_stats(stats)
    for name in ("score.json", "report.md", "junit.xml"):
        assert (tmp_path / name).exists(), name
    assert json.loads((tmp_path / "run.json").read_text())["ended"]
