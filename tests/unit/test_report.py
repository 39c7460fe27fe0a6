"""Reports rendered from a saved run directory: report.md, junit.xml, report.html, summary_line.

The run directories are synthetic fixtures built by these tests.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from clustereval.report import clean_text, render_all, summary_line, tier_text
from clustereval.scoring import score_results

BASELINE = "baselines/h100.yml"
NASTY = 'bad <tag> & "quotes" | pipe \x00\x07\x1b[31m ]]> done'


def result(check, subject="node1", status="pass", severity="major", phase="audit", **extra):
    out = {
        "run_id": "run-42",
        "check": check,
        "phase": phase,
        "domain": check.split(".")[0],
        "subject": subject,
        "status": status,
        "severity": severity,
        "summary": f"{check} on {subject}: {status}",
        "artifacts": [f"raw/{subject}/{check}.txt"],
        "duration_s": 1.5,
    }
    out.update(extra)
    return out


RESULTS = [
    result("audit.gpustack.driver", value="550.54.15", expected={"min": "535.0", "source": BASELINE}),
    result("audit.gpustack.driver", subject="node2", status="warn", summary="driver 535.0 is at the minimum"),
    result("audit.gpu.inventory", status="fail", severity="critical", value=7, unit="GPUs", summary=NASTY),
    result(
        "storage.fio.seq_read",
        subject="_cluster",
        phase="performance",
        status="skip",
        summary="fio not installed",
    ),
    result("storage.fio.seq_write", status="error", summary="module crashed: KeyError 'opts'"),
    result(
        "harness.node.reachable",
        subject="node3",
        status="fail",
        domain="harness",
        summary="ssh: connect to host node3 port 22: No route to host",
        artifacts=[],
    ),
]
RUN_INFO = {
    "run_id": "run-42",
    "started": "2025-01-01T10:00:00Z",
    "ended": "2025-01-01T10:05:00Z",
    "phases": ["audit", "performance"],
    "inventory": {"hosts": ["node1", "node2", "node3", "node4"], "groups": {"gpu": ["node1", "node2"]}},
    "versions": {"clustereval": "0.1.0", "ansible_core": "2.19.0"},
    "options": {"destructive": False},
}


def make_run(tmp_path: Path, results=RESULTS, run_info=RUN_INFO, torn: bool = False) -> Path:
    run_dir = tmp_path / "run-42"
    (run_dir / "raw" / "node1").mkdir(parents=True)
    (run_dir / "raw" / "node1" / "audit.gpu.inventory.txt").write_text("<nvidia_smi_log/>\n")
    with open(run_dir / "results.jsonl", "w", encoding="utf-8") as fh:
        for r in results:
            fh.write(json.dumps(r) + "\n")
        if torn:
            fh.write('{"run_id": "run-42", "check": "audit.half')
    if run_info is not None:
        (run_dir / "run.json").write_text(json.dumps(run_info))
    return run_dir


@pytest.fixture
def rendered(tmp_path):
    run_dir = make_run(tmp_path)
    paths = render_all(run_dir)
    return run_dir, paths


def test_render_all_writes_every_report(rendered):
    run_dir, paths = rendered
    assert [p.name for p in paths] == ["report.md", "junit.xml", "report.html", "metrics.prom"]
    assert all(p.parent == run_dir and p.stat().st_size > 0 for p in paths)
    assert (run_dir / "score.json").exists()
    assert not [p for p in run_dir.iterdir() if p.name.startswith(".")]  # no temp files left behind


def test_junit_maps_statuses_and_is_valid_xml(rendered):
    run_dir, _ = rendered
    root = ET.parse(run_dir / "junit.xml").getroot()
    assert root.tag == "testsuites"
    assert (root.get("tests"), root.get("failures"), root.get("errors"), root.get("skipped")) == (
        "6",
        "2",
        "1",
        "1",
    )
    assert [s.get("name") for s in root.iter("testsuite")] == ["audit", "performance"]
    cases = {(c.get("classname"), c.get("name")): c for c in root.iter("testcase")}
    assert len(cases) == 6
    assert cases[("audit.gpu.inventory", "node1")].find("failure") is not None
    assert cases[("audit.gpu.inventory", "node1")].find("failure").get("type") == "critical"
    assert cases[("storage.fio.seq_write", "node1")].find("error") is not None
    skipped = cases[("storage.fio.seq_read", "_cluster")].find("skipped")
    assert skipped.get("message") == "fio not installed"
    warn = cases[("audit.gpustack.driver", "node2")]
    assert warn.find("failure") is None and warn.find("error") is None
    assert warn.find("system-out").text.startswith("WARN: driver 535.0 is at the minimum")
    passed = cases[("audit.gpustack.driver", "node1")].find("system-out").text
    assert "value: 550.54.15" in passed
    assert "expected: min 535.0 (source: baselines/h100.yml)" in passed
    assert "artifacts: raw/node1/audit.gpustack.driver.txt (missing)" in passed
    assert cases[("audit.gpustack.driver", "node1")].get("time") == "1.500"
    props = {p.get("name"): p.get("value") for p in root.iter("property")}
    assert props["unreachable"] == "node3"
    assert props["provisional"].startswith("measured=configuration; not_measured=gpu_compute,network,")


def test_junit_says_when_and_where_each_test_ran(tmp_path):
    """Per testcase: the node it is about and when the measured thing started (the judge's time without a
    measurement), in the UTC form the JUnit schema takes; per suite: the controller, the first start and the
    summed time."""
    timed = [
        result("audit.gpu.inventory", started="2025-01-01T10:00:03Z"),
        result("network.mesh.tcp_bandwidth", subject="node2->node1", phase="performance",
               started="2025-01-01T10:03:00Z",
               measured={"started": "2025-01-01T11:01:30+01:00", "ended": "2025-01-01T10:02:50Z"}),
        result("storage.fio.seq_read", subject="_cluster", phase="performance", started="not a time"),
    ]
    run_dir = make_run(tmp_path, results=timed, run_info={**RUN_INFO, "controller": "ops-bastion"})
    render_all(run_dir)
    root = ET.parse(run_dir / "junit.xml").getroot()
    cases = {c.get("classname"): c for c in root.iter("testcase")}
    assert (cases["audit.gpu.inventory"].get("hostname"), cases["audit.gpu.inventory"].get("timestamp")) == (
        "node1", "2025-01-01T10:00:03")
    mesh = cases["network.mesh.tcp_bandwidth"]
    assert (mesh.get("hostname"), mesh.get("timestamp")) == ("node2", "2025-01-01T10:01:30")
    fio = cases["storage.fio.seq_read"]
    assert fio.get("hostname") is None and fio.get("timestamp") is None  # cluster-wide, and no usable time
    suites = {s.get("name"): s for s in root.iter("testsuite")}
    assert {s.get("hostname") for s in suites.values()} == {"ops-bastion"}
    assert suites["audit"].get("timestamp") == "2025-01-01T10:00:03"
    assert suites["performance"].get("timestamp") == "2025-01-01T10:03:00"
    assert suites["performance"].get("time") == "3.000"


def test_junit_escapes_hostile_summaries(rendered):
    run_dir, _ = rendered
    root = ET.parse(run_dir / "junit.xml").getroot()
    case = next(c for c in root.iter("testcase") if c.get("classname") == "audit.gpu.inventory")
    message = case.find("failure").get("message")
    assert 'bad <tag> & "quotes" | pipe \\x00\\x07\\x1b[31m ]]> done' in message


def test_clean_text_makes_control_characters_visible():
    assert clean_text("a\x00b\tc\nd\x7f") == "a\\x00b\tc\nd\\x7f"
    assert clean_text(None) == ""


def test_markdown_explains_tier_and_points_at_artifacts(rendered):
    run_dir, _ = rendered
    md = (run_dir / "report.md").read_text()
    score = json.loads((run_dir / "score.json").read_text())
    assert f"**Tier: {tier_text(score)}**" in md
    assert "(provisional: configuration only; Silver needs gpu_compute, network)" in md  # an audit-only run
    assert "run-42" in md and "2025-01-01T10:00:00Z" in md
    assert "clustereval 0.1.0, ansible-core 2.19.0" in md
    assert "## Why this tier" in md
    assert f"before caps: {score['tier_before_caps']}" in md
    assert "critical fail (cap Bronze)" in md  # triggered, but the score is already lower
    assert "[raw/node1/audit.gpu.inventory.txt](<raw/node1/audit.gpu.inventory.txt>)" in md
    assert "[raw/node1/audit.gpustack.driver.txt](<raw/node1/audit.gpustack.driver.txt>) (missing)" in md
    assert "| Storage | 10 | not measured |" in md
    assert "fio not installed" in md and "module crashed: KeyError 'opts'" in md
    assert "min 535.0 (source: baselines/h100.yml)" in md
    # the hostile summary cannot break the table: pipes and tags escaped, control chars visible
    assert 'bad &lt;tag&gt; & "quotes" \\| pipe \\\\x00' in md


def test_markdown_lists_unreachable_nodes_before_the_explanation(rendered):
    run_dir, _ = rendered
    md = (run_dir / "report.md").read_text()
    section = md.index("## Unreachable nodes")
    assert section < md.index("## Why this tier")
    assert "| node3 | ssh: connect to host node3 port 22: No route to host |" in md
    assert "In the inventory but without any result:** node4" in md


def test_markdown_orders_checks_worst_first(rendered):
    run_dir, _ = rendered
    md = (run_dir / "report.md").read_text()
    assert md.index("(`audit.gpu.inventory`)") < md.index("(`storage.fio.seq_write`)")
    assert md.index("(`storage.fio.seq_write`)") < md.index("(`audit.gpustack.driver`)")


def test_html_is_self_contained_and_escaped(rendered):
    run_dir, _ = rendered
    page = (run_dir / "report.html").read_text()
    assert page.startswith("<!DOCTYPE html>")
    assert "<script" not in page and "http://" not in page and "https://" not in page
    assert "bad &lt;tag&gt; &amp; &quot;quotes&quot;" in page
    assert 'href="raw/node1/audit.gpu.inventory.txt"' in page
    assert "Unreachable nodes" in page


def test_rerendering_is_deterministic_and_keeps_results(rendered):
    run_dir, _ = rendered
    before = {name: (run_dir / name).read_text() for name in ("report.md", "junit.xml", "report.html")}
    results_before = (run_dir / "results.jsonl").read_text()
    render_all(run_dir)
    assert {name: (run_dir / name).read_text() for name in before} == before
    assert (run_dir / "results.jsonl").read_text() == results_before


def test_torn_results_and_missing_run_json_are_warnings(tmp_path):
    run_dir = make_run(tmp_path, run_info=None, torn=True)
    render_all(run_dir)
    md = (run_dir / "report.md").read_text()
    assert "Warnings about this run's files" in md
    assert "results.jsonl:7: unreadable line skipped" in md
    assert "run.json is missing" in md
    assert "unknown (no run.json)" in md
    root = ET.parse(run_dir / "junit.xml").getroot()
    assert root.get("tests") == "6"


def test_empty_run_renders_and_is_not_a_high_tier(tmp_path):
    run_dir = tmp_path / "empty"
    run_dir.mkdir()
    render_all(run_dir)
    md = (run_dir / "report.md").read_text()
    assert "**Tier: Participation** · unrated (nothing measured)" in md
    assert "No check results were recorded." in md
    assert ET.parse(run_dir / "junit.xml").getroot().get("tests") == "0"


def test_absolute_artifact_paths_inside_the_run_dir_become_relative(tmp_path):
    run_dir = tmp_path / "run-42"
    absolute = str((run_dir / "raw" / "node1" / "audit.gpu.inventory.txt").resolve())
    make_run(tmp_path, results=[result("audit.gpu.inventory", artifacts=[absolute])])
    render_all(run_dir)
    md = (run_dir / "report.md").read_text()
    assert "[raw/node1/audit.gpu.inventory.txt](<raw/node1/audit.gpu.inventory.txt>)" in md
    assert absolute not in md


def test_summary_line_names_counts_and_binding_caps():
    results = [result(f"{domain}.c{i}") for i in range(20) for domain in ("network", "audit")]
    results += [result("audit.fleet.gpu_consistency", subject="_cluster", status="fail", severity="critical")]
    line = summary_line(score_results(results))
    assert line.startswith("Tier: Bronze (provisional: configuration, network only; Silver needs gpu_compute) "
                           "(score "), line
    assert "/100) — 40 pass, 0 warn, 1 fail, 0 skip, 0 error; capped by: 1 critical fail" in line
    assert "(audit.fleet.gpu_consistency)" in line


def test_summary_line_for_an_empty_run_and_an_unreachable_node():
    assert summary_line(score_results([])).startswith(
        "Tier: Participation (unrated: nothing measured) — 0 pass"
    )
    unreachable = result("harness.node.reachable", subject="node3", status="fail", summary="timeout")
    line = summary_line(score_results([result("audit.a"), result("storage.b"), unreachable]))
    assert "unreachable node (node3)" in line


def write_run(tmp_path: Path, items: list[dict], run: dict) -> Path:
    (tmp_path / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in items))
    (tmp_path / "run.json").write_text(json.dumps(run))
    return tmp_path


def test_variants_pairs_gpus_series_and_measured_times_reach_every_report(tmp_path):
    from clustereval import facts

    series = {"path": "series/_cluster/mesh.csv", "kind": "timeseries", "x": "start_s", "rows": 2}
    items = [
        result("network.mesh.tcp_bandwidth", subject="node1->node2", value=9.5, params={"streams": 1}),
        result("network.mesh.tcp_bandwidth", subject="node1->node2", status="fail", value=0.1, params={"streams": 4},
               series=[series]),
        result("telemetry.kernel.xid", subject="node2/gpu3", status="fail", severity="critical",
               measured={"started": "T0", "ended": "T9", "events": [{"at": "T5", "event": "xid"}]}),
    ]
    run_dir = write_run(tmp_path, items, {"run_id": "run-42", "started": "T0", "ended": "T9"})
    (run_dir / "series/_cluster").mkdir(parents=True)
    (run_dir / "series/_cluster/mesh.csv").write_text("source,destination\nnode1,node2\n")
    for host in ("node1", "node2"):
        facts.write(run_dir, host, facts.hardware({"gpu_models": ["NVIDIA H200"], "gpu_count": 8,
                                                   "driver_version": "580.1", "cuda_version": "13.0"}))
    render_all(run_dir)
    md = (run_dir / "report.md").read_text()
    assert "node1-&gt;node2 · streams=1" in md and "node1-&gt;node2 · streams=4" in md  # variants side by side
    assert "series: [series/_cluster/mesh.csv]" in md and "T0 → T9; xid at T5" in md
    assert "| Hardware | 2 node(s): 8 × NVIDIA H200; driver 580.1 (CUDA 13.0) |" in md
    by_host = md.split("## Results by host")[1].split("## Results by check")[0]
    assert "| node1 | 1 | 0 | 1 |" in by_host and "| node2 | 1 | 0 | 2 |" in by_host  # a pair counts for both hosts
    names = [c.get("name") for c in ET.parse(run_dir / "junit.xml").getroot().iter("testcase")]
    assert "node1->node2 · streams=1" in names and "node1->node2 · streams=4" in names
    score = json.loads((run_dir / "score.json").read_text())
    assert score["counts"]["pass"] + score["counts"]["fail"] == 3
    assert any(m.get("params") == {"streams": 4} for m in score["movers"])
    html = (run_dir / "report.html").read_text()
    assert "streams=4" in html and "series/_cluster/mesh.csv" in html


def test_an_interrupted_run_says_so_in_every_report_and_on_the_terminal(tmp_path):
    run_dir = write_run(tmp_path, [result("audit.os.kernel")], {"run_id": "run-42", "started": "T0", "ended": "T1",
                                                                "interrupted": "Ctrl-C"})
    render_all(run_dir)
    assert "This run is incomplete: interrupted — Ctrl-C" in (run_dir / "report.md").read_text()
    assert "This run is incomplete" in (run_dir / "report.html").read_text()
    props = {p.get("name"): p.get("value") for p in ET.parse(run_dir / "junit.xml").getroot().iter("property")}
    assert props["incomplete"] == "interrupted — Ctrl-C"
    score = json.loads((run_dir / "score.json").read_text())
    assert summary_line(score).startswith("INTERRUPTED (Ctrl-C)") and "interrupted" in score["explanation"][0]
    (tmp_path / "b").mkdir()
    unfinished = write_run(tmp_path / "b", [result("audit.os.kernel")], {"run_id": "run-42", "started": "T0"})
    render_all(unfinished)
    assert "not finished" in (unfinished / "report.md").read_text()
