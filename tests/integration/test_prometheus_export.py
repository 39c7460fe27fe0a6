"""The Prometheus export against the real daemons: node_exporter's textfile collector reads what
``write_textfile`` writes, and a Pushgateway takes what ``push`` sends, under the grouping it was given.

Needs Debian's prometheus-node-exporter and prometheus-pushgateway (``make install``); both listen on loopback
ports of their own and are stopped by the fixtures.
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from clustereval.report import prometheus as prom
from tests.unit.test_prometheus import HOSTILE, MIXED, make_view, result

NODE_EXPORTER = Path("/usr/bin/prometheus-node-exporter")
PUSHGATEWAY = Path("/usr/bin/prometheus-pushgateway")
READY_TIMEOUT_S = 30

pytestmark = pytest.mark.integration


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        return response.read().decode("utf-8")


@contextlib.contextmanager
def daemon(argv: list[str], port: int, log: Path) -> Iterator[subprocess.Popen]:
    """Run ``argv`` until the block ends, once its /metrics answers on ``port``; stopped by its PID."""
    with open(log, "wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while True:
            if proc.poll() is not None:
                pytest.fail(f"{argv[0]} exited with {proc.returncode}: {log.read_text(errors='replace')[-2000:]}")
            try:
                scrape(port)
                break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail(f"{argv[0]} did not answer on 127.0.0.1:{port} in {READY_TIMEOUT_S} s")
                time.sleep(0.1)
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


@pytest.fixture
def node_exporter(tmp_path) -> Iterator[tuple[int, Path]]:
    if not NODE_EXPORTER.exists():
        pytest.skip(f"{NODE_EXPORTER} is missing (apt-get install prometheus-node-exporter)")
    port, folder = free_port(), tmp_path / "textfile"
    folder.mkdir()
    argv = [str(NODE_EXPORTER), f"--web.listen-address=127.0.0.1:{port}", "--collector.disable-defaults",
            "--collector.textfile", f"--collector.textfile.directory={folder}"]
    with daemon(argv, port, tmp_path / "node_exporter.log"):
        yield port, folder


@pytest.fixture
def pushgateway(tmp_path) -> Iterator[int]:
    if not PUSHGATEWAY.exists():
        pytest.skip(f"{PUSHGATEWAY} is missing (apt-get install prometheus-pushgateway)")
    port = free_port()
    # Debian's build persists to /var/lib/prometheus/pushgateway.data by default: every test would see the groups
    # of the tests before it (and leave its own behind)
    argv = [str(PUSHGATEWAY), f"--web.listen-address=127.0.0.1:{port}",
            f"--persistence.file={tmp_path / 'pushgateway.data'}"]
    with daemon(argv, port, tmp_path / "pushgateway.log"):
        yield port


def parsed(text: str) -> dict:
    return {family.name: family for family in text_string_to_metric_families(text)}


def test_textfile_collector_reads_the_run(tmp_path, node_exporter):
    port, folder = node_exporter
    hostile = result("audit.gpu.inventory", HOSTILE, "fail", value=3, unit="GPUs", summary="3 of 8 GPUs found")
    view = make_view(tmp_path, [*MIXED, hostile])
    path = prom.write_textfile(view, folder)
    families = parsed(scrape(port))

    assert families["node_textfile_scrape_error"].samples[0].value == 0
    mtimes = {s.labels["file"] for s in families["node_textfile_mtime_seconds"].samples}
    assert mtimes & {str(path), path.name}
    written = set(parsed(path.read_text(encoding="utf-8")))
    assert written <= set(families), f"node_exporter dropped {written - set(families)}"
    (score,) = families["clustereval_score"].samples
    assert score.value == pytest.approx(view["score"]["score"]) and score.labels["cluster"] == "lab-a"
    subjects = {s.labels["subject"] for s in families["clustereval_result_value"].samples}
    assert HOSTILE.replace("\x00", "\\x00") in subjects  # our escaping survives node_exporter's re-encoding

    # A rewrite replaces the file whole: the collector sees the new run, never a mix, and no temporary file.
    prom.write_textfile(make_view(tmp_path / "second", MIXED[:2]), folder)
    again = parsed(scrape(port))
    assert again["node_textfile_scrape_error"].samples[0].value == 0
    assert {s.labels["status"]: s.value for s in again["clustereval_results"].samples}["fail"] == 0
    assert [p.name for p in folder.iterdir()] == [path.name]


def test_pushgateway_keeps_the_group(tmp_path, pushgateway):
    view = make_view(tmp_path, MIXED)
    grouping = {"cluster": "lab-a", "run": "2026/01 run"}
    target = prom.push(prom.render(view), f"http://127.0.0.1:{pushgateway}", grouping=grouping)
    assert target.endswith("/metrics/job/clustereval/cluster/lab-a/run@base64/MjAyNi8wMSBydW4=")

    families = parsed(scrape(pushgateway))
    (score,) = [s for s in families["clustereval_score"].samples if s.labels.get("run") == "2026/01 run"]
    assert score.labels["job"] == "clustereval" and score.labels["cluster"] == "lab-a"
    assert score.value == pytest.approx(view["score"]["score"])
    statuses = {s.labels["status"]: s.value for s in families["clustereval_results"].samples}
    assert statuses == {"pass": 2, "warn": 1, "fail": 1, "skip": 1, "error": 1}
    assert any(s.labels.get("job") == "clustereval" for s in families["push_time_seconds"].samples)


def test_pushgateway_refusal_is_a_clear_error(pushgateway):
    with pytest.raises(prom.ExportError, match="refused the push: HTTP 400") as caught:
        prom.push("this is no metric\n", f"http://user:hunter2@127.0.0.1:{pushgateway}", grouping={"cluster": "x"})
    assert "hunter2" not in str(caught.value)


def test_report_command_exports_to_the_collector_and_the_gateway(tmp_path, node_exporter, pushgateway, capsys):
    """``clustereval report RUN --textfile-dir --pushgateway``: the run's metrics.prom reaches both daemons; the
    gate still decides the exit status (the run has a fail), and a password in the gateway URL is never printed."""
    from clustereval import cli

    port, folder = node_exporter
    run_dir = make_view(tmp_path, MIXED)["run_dir"]
    rc = cli.main(["report", str(run_dir), "--textfile-dir", str(folder), "--textfile-name", "lab-a.prom",
                   "--pushgateway", f"http://ops:s3cret@127.0.0.1:{pushgateway}"])
    out = capsys.readouterr()
    assert rc == cli.GATE_FAILED, out
    assert (run_dir / "metrics.prom").read_text(encoding="utf-8") == (folder / "lab-a.prom").read_text(encoding="utf-8")
    collected = parsed(scrape(port))
    assert collected["node_textfile_scrape_error"].samples[0].value == 0
    assert collected["clustereval_score"].samples[0].labels["cluster"] == "lab-a"
    pushed = parsed(scrape(pushgateway))
    scores = pushed["clustereval_score"].samples
    assert [(s.labels["job"], s.labels["cluster"]) for s in scores] == [("clustereval", "lab-a")], scores
    assert "/metrics/job/clustereval/cluster/lab-a" in out.out
    assert "s3cret" not in out.out + out.err


def test_report_command_says_which_export_failed_and_keeps_the_reports(tmp_path, capsys):
    """An export that cannot happen exits 2 with one line each; the run directory's reports are all written."""
    from clustereval import cli

    run_dir = make_view(tmp_path, MIXED[:1])["run_dir"]
    rc = cli.main(["report", str(run_dir), "--textfile-dir", str(tmp_path / "absent"),
                   "--pushgateway", f"http://127.0.0.1:{free_port()}"])
    err = capsys.readouterr().err
    assert rc == 2
    assert "textfile export failed: textfile directory" in err and "does not exist" in err
    assert "Pushgateway export failed: cannot reach Pushgateway" in err
    for name in ("report.md", "junit.xml", "report.html", "metrics.prom", "score.json"):
        assert (run_dir / name).is_file(), name
