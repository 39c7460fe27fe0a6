"""Slurm orchestration churn checks (checks/orchestration_slurm.py) and their parser, on the verbatim output the
orchestration_slurm probe printed against the simulated cluster's real Slurm (slurm-wlm 22.05, 2 nodes, 10 jobs:
tests/unit/data/orchestration/slurm-churn-sim-2node.txt); every status of every check."""

from __future__ import annotations

from pathlib import Path

import pytest

from clustereval import parsers
from clustereval.checks import Context
from tests.helpers import judge_many

CAPTURE = (Path(__file__).parent / "data" / "orchestration" / "slurm-churn-sim-2node.txt").read_text()
PROBE = "orchestration_slurm"
CHECKS = ("orchestration.slurm.submit_rate", "orchestration.slurm.start_latency", "orchestration.slurm.array",
          "orchestration.slurm.requeue")
OPTIONS = {"harness": "slurm", "jobs": 10, "wait_s": 60, "requeue": True}


def probes(stdout: str = CAPTURE, rc: int = 0, **fields) -> dict[str, dict]:
    return {PROBE: {"name": PROBE, "cmd": PROBE, "rc": rc, "stdout": stdout, "stderr": "", "tool": "sbatch",
                    "parser": "probe-orchestration", "artifact": f"raw/node1/{PROBE}.txt", **fields}}


def judge(check_id: str, found: dict | None = None, **options) -> list[dict]:
    ctx = Context(subject="node1", probes=probes() if found is None else found, options={**OPTIONS, **options})
    results = judge_many(check_id, ctx)
    for result in results:
        if result["status"] == "skip":
            assert result["summary"].strip()
    return results


def status(check_id: str, found: dict | None = None, **options) -> set[str]:
    return {r["status"] for r in judge(check_id, found, **options)}


def edited(old: str, new: str) -> dict[str, dict]:
    assert old in CAPTURE, old
    return probes(CAPTURE.replace(old, new))


# ------------------------------------------------------------------------------------------------ the parser

def test_the_parser_reads_the_capture():
    data = parsers.parse("probe-orchestration", CAPTURE)
    assert data["complete"] and data["warnings"] == []
    kinds = [r["record"] for r in data["records"]]
    assert kinds.count("job") == 10 + 10 + 3 and kinds[-1] == "end"
    loop = data["records"][0]
    assert loop == {"record": "submit", "kind": "loop", "jobs": 10, "failed": 0, "submit_s": 0.07, "reason": ""}
    again = next(r for r in data["records"] if r.get("kind") == "again")
    assert again["restarts"] == 1 and again["jobstate"] == "COMPLETED" and again["starttime"] == "2026-12-02T12:23:29"


def test_the_parser_keeps_what_a_cut_short_output_measured_and_rejects_no_record():
    cut = CAPTURE[:CAPTURE.index("submit kind=array")]
    data = parsers.parse("probe-orchestration", cut + "job kind=loop id=99 jobstate=COMPL")
    assert not data["complete"] and len(data["records"]) == 13
    with pytest.raises(parsers.ParseError):
        parsers.parse("probe-orchestration", "sbatch: error: Batch job submission failed\n")


# ------------------------------------------------------------------------------------------------ pass

def test_every_check_passes_on_the_simulated_cluster():
    results = {(r["check"], (r.get("params") or {}).get("stat")): r for c in CHECKS for r in judge(c)}
    assert {r["status"] for r in results.values()} == {"pass"}
    assert results["orchestration.slurm.submit_rate", None]["value"] == pytest.approx(142.857)
    latency = results["orchestration.slurm.start_latency", "p99"]
    assert latency["value"] == 1.0 and latency["series"][0]["path"] == "series/node1/orchestration-slurm-jobs.csv"
    # The table's rows come once (with p50): the loop's jobs and the array's tasks.
    assert len(results["orchestration.slurm.start_latency", "p50"]["series"][0]["data"]) == 20
    assert "data" not in latency["series"][0]
    assert results["orchestration.slurm.array", None]["value"] == pytest.approx(1.953)
    requeue = results["orchestration.slurm.requeue", None]
    assert requeue["value"] == pytest.approx(3.119) and requeue["evidence"]["requeue_begin_delay_s"] == 121


# ------------------------------------------------------------------------------------------------ warn and fail

def test_slow_figures_warn_and_fail_against_the_baselines():
    overrides = {"orchestration.slurm.submit_rate": {"warn": 200, "fail": 100},
                 "orchestration.slurm.array": {"warn": 1.5, "fail": 5}}
    assert status("orchestration.slurm.submit_rate", baseline_overrides=overrides) == {"warn"}
    assert status("orchestration.slurm.array", baseline_overrides=overrides) == {"warn"}
    overrides = {"orchestration.slurm.submit_rate": {"warn": 500, "fail": 200},
                 "orchestration.slurm.start_latency": {"warn": 0.2, "fail": 0.5},
                 "orchestration.slurm.requeue": {"warn": 1, "fail": 2}}
    for check_id in ("orchestration.slurm.submit_rate", "orchestration.slurm.start_latency",
                     "orchestration.slurm.requeue"):
        assert status(check_id, baseline_overrides=overrides) == {"fail"}, check_id


def test_a_refused_submission_fails_the_rate():
    found = edited("failed=0 submit_s=0.070 reason=",
                   "failed=2 submit_s=0.070 reason=sbatch: error: QOSMaxSubmitJobPerUserLimit")
    [result] = judge("orchestration.slurm.submit_rate", found)
    assert result["status"] == "fail" and "QOSMaxSubmitJobPerUserLimit" in result["summary"]


def test_jobs_that_never_start_fail_the_latency():
    found = edited("wait kind=loop state=done", "wait kind=loop state=timeout")
    found[PROBE]["stdout"] = found[PROBE]["stdout"].replace(
        "id=31 jobstate=COMPLETED restarts=0 exitcode=0:0 submittime=2026-12-02T12:23:19 "
        "eligibletime=2026-12-02T12:23:19 starttime=2026-12-02T12:23:20 endtime=2026-12-02T12:23:20",
        "id=31 jobstate=PENDING restarts=0 exitcode=0:0 submittime=2026-12-02T12:23:19 "
        "eligibletime=2026-12-02T12:23:19 starttime=Unknown endtime=Unknown")
    results = judge("orchestration.slurm.start_latency", found)
    assert {r["status"] for r in results} == {"fail"} and "1 of 10" in results[0]["summary"]


def test_a_refused_or_unfinished_array_fails():
    found = edited("submit kind=array jobs=10 failed=0 submit_s=0.008",
                   "submit kind=array jobs=10 failed=10 submit_s=0.008 reason=sbatch: error: Invalid job array")
    assert status("orchestration.slurm.array", found) == {"fail"}
    assert status("orchestration.slurm.array", edited("wait kind=array state=done", "wait kind=array state=timeout")) \
        == {"fail"}


def test_a_requeue_refused_or_not_rerun_fails():
    refused = CAPTURE[:CAPTURE.index("job kind=requeued")] + \
        "requeue id=42 state=refused first_s=2.117 reason=Requested operation is presently disabled\nend state=ok\n"
    [result] = judge("orchestration.slurm.requeue", probes(refused))
    assert result["status"] == "fail" and "presently disabled" in result["summary"]
    stuck = edited("requeue id=42 state=done", "requeue id=42 state=timeout")
    stuck[PROBE]["stdout"] = stuck[PROBE]["stdout"].replace("job kind=again id=42 jobstate=COMPLETED",
                                                            "job kind=again id=42 jobstate=PENDING")
    assert status("orchestration.slurm.requeue", stuck) == {"fail"}


# ------------------------------------------------------------------------------------------------ skip

@pytest.mark.parametrize("check_id", CHECKS)
def test_no_sbatch_or_another_harness_is_a_skip(check_id):
    missing = probes("", rc=127, missing=True)
    assert status(check_id, missing) == {"skip"}
    assert status(check_id, harness="k8s") == {"skip"}


def test_the_requeue_test_turned_off_is_a_skip():
    [result] = judge("orchestration.slurm.requeue", requeue=False)
    assert result["status"] == "skip" and "turned off" in result["summary"]


def test_no_reference_is_a_skip_with_the_figure(monkeypatch):
    from clustereval import baselines

    def none(*_args, **_kwargs):
        raise baselines.NoReference("no reference for orchestration.slurm.submit_rate")

    monkeypatch.setattr(baselines, "reference", none)
    [result] = judge("orchestration.slurm.submit_rate")
    assert result["status"] == "skip" and result["value"] == pytest.approx(142.857)


# ------------------------------------------------------------------------------------------------ error

@pytest.mark.parametrize("check_id", CHECKS)
def test_unreadable_or_failed_probe_output_is_a_harness_error(check_id):
    assert status(check_id, probes("bash: line 1: syntax error\n", rc=2)) == {"error"}
    assert status(check_id, probes("end state=error reason=no job name given\n", rc=2)) == {"error"}
    assert status(check_id, {}) == {"error"}  # not collected
    assert status(check_id, probes(CAPTURE, timed_out=True, timeout=300)) == {"error"}


def test_output_cut_short_errors_only_the_checks_it_did_not_reach():
    cut = probes(CAPTURE[:CAPTURE.index("submit kind=array")])
    assert status("orchestration.slurm.submit_rate", cut) == {"pass"}
    assert status("orchestration.slurm.start_latency", cut) == {"pass"}
    assert status("orchestration.slurm.array", cut) == {"error"}
    assert status("orchestration.slurm.requeue", cut) == {"error"}
