"""Prometheus exposition of a run (clustereval.report.prometheus) and the Grafana dashboard that reads it.

Every output is read back with prometheus_client's own parser, the way a scraper would read it.
"""

from __future__ import annotations

import base64
import json
import math
import re
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from clustereval import results as results_mod
from clustereval.report import build_view
from clustereval.report import prometheus as prom

REPO = Path(__file__).resolve().parents[2]
DASHBOARD = REPO / "extras" / "grafana" / "clustereval-dashboard.json"
RUN_ID = "run-prom"
HOSTILE = 'evil"quote\\back\nnew line \x00 end'


def result(check: str, subject: str = "node1", status: str = "pass", **extra) -> dict:
    """A check result honouring the contract, its phase, domain and severity the catalogue's."""
    from clustereval.checks import catalogue

    entry = catalogue.entry(check)
    out = {"run_id": RUN_ID, "check": check, "phase": entry["phase"], "domain": entry["domain"],
           "severity": entry["severity"], "subject": subject, "status": status,
           "summary": f"{check} on {subject}: {status}"}
    out.update(extra)
    return out


def make_view(tmp_path: Path, results: list[dict], ended: str | None = "2026-01-02T03:04:05Z",
              cluster: str = "lab-a") -> dict:
    """build_view of a run directory holding ``results`` (written with results.append)."""
    run_dir = tmp_path / "run"
    run_dir.mkdir(parents=True)
    (run_dir / "run.json").write_text(json.dumps({
        "run_id": RUN_ID, "started": "2026-01-02T03:00:00Z", "ended": ended,
        "options": {"clustereval_cluster_name": cluster}, "inventory": {"hosts": ["node1", "node2"]}}))
    results_mod.append(run_dir, results)
    return build_view(run_dir)


MIXED = [
    result("network.mesh.tcp_bandwidth", "node1->node2", value=92.5, unit="Gbit/s", params={"streams": 4}),
    result("network.mesh.tcp_bandwidth", "node2->node1", "warn", value=40.0, unit="Gbit/s", params={"streams": 4},
           summary="40 Gbit/s is below the 46 Gbit/s warn level"),
    result("audit.gpu.inventory", "node1", value=8, unit="GPUs"),
    result("audit.gpu.inventory", "node2", "fail", value=7, unit="GPUs", summary="7 of 8 GPUs found"),
    result("storage.fio.seq_read", "_cluster", "skip", summary="fio is not installed"),
    result("burnin.gpu.temperature", "node1/gpu0", "error", value=float("nan"), unit="°C",
           summary="sampler crashed"),
]


def families(text: str) -> dict:
    return {family.name: family for family in text_string_to_metric_families(text)}


def samples(text: str, name: str) -> list:
    return [s for family in text_string_to_metric_families(text) for s in family.samples if s.name == name]


def test_families_parse_and_carry_the_run(tmp_path):
    view = make_view(tmp_path, MIXED)
    text = prom.render(view)
    found = families(text)
    assert {"clustereval_run_info", "clustereval_score", "clustereval_coverage", "clustereval_tier_rank",
            "clustereval_results", "clustereval_category_score", "clustereval_category_coverage",
            "clustereval_check_results", "clustereval_check_worst_status", "clustereval_check_value",
            "clustereval_result_value", "clustereval_run_end_timestamp_seconds"} <= set(found)
    for name in found:
        assert text.count(f"# HELP {name} ") == 1 and text.count(f"# TYPE {name} gauge") == 1
    series = [(s.name, tuple(sorted(s.labels.items()))) for f in found.values() for s in f.samples]
    assert len(series) == len(set(series))
    assert all(math.isfinite(s.value) for f in found.values() for s in f.samples)
    assert all(s.labels["cluster"] == "lab-a" for f in found.values() for s in f.samples)

    score = view["score"]
    (info,) = samples(text, "clustereval_run_info")
    assert info.labels["run_id"] == RUN_ID and info.labels["tier"] == score["tier"] and info.value == 1
    assert info.labels["provisional"] == ("true" if score["provisional"] else "false")
    assert samples(text, "clustereval_score")[0].value == pytest.approx(score["score"])
    tiers = [t["name"] for t in score["rubric"]["tiers"]]
    assert samples(text, "clustereval_tier_rank")[0].value == tiers.index(score["tier"])
    counts = {s.labels["status"]: s.value for s in samples(text, "clustereval_results")}
    assert counts == {"pass": 2, "warn": 1, "fail": 1, "skip": 1, "error": 1}
    assert samples(text, "clustereval_run_end_timestamp_seconds")[0].value == 1767323045.0


def test_per_check_statuses_and_categories(tmp_path):
    text = prom.render(make_view(tmp_path, MIXED))
    worst = {s.labels["check"]: s.value for s in samples(text, "clustereval_check_worst_status")}
    assert worst == {"network.mesh.tcp_bandwidth": 2, "audit.gpu.inventory": 4, "storage.fio.seq_read": 1,
                     "burnin.gpu.temperature": 3}
    inventory = {s.labels["status"]: s.value for s in samples(text, "clustereval_check_results")
                 if s.labels["check"] == "audit.gpu.inventory"}
    assert inventory == {"pass": 1, "fail": 1, "warn": 0, "skip": 0, "error": 0}
    coverage = {s.labels["category"]: s.value for s in samples(text, "clustereval_category_coverage")}
    assert coverage["network"] == 1.0 and coverage["storage"] == 0.0 and coverage["burnin"] == 0.0
    scored = {s.labels["category"] for s in samples(text, "clustereval_category_score")}
    assert "network" in scored and "storage" not in scored  # an unmeasured category has no score, not a 0


def test_values_aggregated_and_not_passing_kept_per_host(tmp_path):
    text = prom.render(make_view(tmp_path, MIXED))
    per_host = {(s.labels["check"], s.labels["subject"]): s for s in samples(text, "clustereval_result_value")}
    # the warn and the fail; the error's NaN is no value and the passes stay in the aggregates
    assert set(per_host) == {("network.mesh.tcp_bandwidth", "node2->node1"), ("audit.gpu.inventory", "node2")}
    assert per_host[("network.mesh.tcp_bandwidth", "node2->node1")].labels["variant"] == "streams=4"
    stats = {s.labels["stat"]: s.value for s in samples(text, "clustereval_check_value")
             if s.labels["check"] == "network.mesh.tcp_bandwidth"}
    assert stats == {"min": 40.0, "median": 66.25, "max": 92.5}
    assert not [s for s in samples(text, "clustereval_check_value") if s.labels["check"] == "burnin.gpu.temperature"]


def test_fleet_scale_cap(tmp_path):
    fleet = [result("audit.gpu.inventory", f"node{i:04d}", value=8, unit="GPUs") for i in range(2000)]
    failing = [result("audit.gpu.inventory", f"bad{i}", "fail", value=i, unit="GPUs", summary="GPUs missing")
               for i in range(3)]
    view = make_view(tmp_path, [*fleet, *failing,
                                result("network.mesh.tcp_bandwidth", "node0001->node0002", "warn", value=1.5,
                                       unit="Gbit/s", summary="1.5 Gbit/s is below the warn level")])
    text = prom.render(view)
    per_host = samples(text, "clustereval_result_value")
    assert sorted(s.labels["subject"] for s in per_host) == ["bad0", "bad1", "bad2", "node0001->node0002"]
    assert samples(text, "clustereval_result_value_dropped")[0].value == 0
    subjects = {s.labels["check"]: s.value for s in samples(text, "clustereval_check_value_subjects")}
    assert subjects["audit.gpu.inventory"] == 2003
    assert len(text.splitlines()) < 200  # 2,000 passing hosts cost no series of their own

    capped = prom.render(view, max_host_series=2)
    kept = samples(capped, "clustereval_result_value")
    assert [s.labels["subject"] for s in kept] == ["bad0", "bad1"]  # the fails before the warn
    assert samples(capped, "clustereval_result_value_dropped")[0].value == 2
    assert not samples(prom.render(view, max_host_series=0), "clustereval_result_value")


def test_hostile_labels_round_trip(tmp_path):
    view = make_view(tmp_path, [result("audit.gpu.inventory", HOSTILE, "fail", value=3, unit='G"P\\U\n',
                                       summary="3 of 8 GPUs found")], cluster=HOSTILE)
    text = prom.render(view)
    (value,) = samples(text, "clustereval_result_value")
    shown = HOSTILE.replace("\x00", "\\x00")  # a control character is shown, never sent raw
    assert value.labels["subject"] == shown and value.labels["cluster"] == shown
    assert value.labels["unit"] == 'G"P\\U\n'
    assert "\x00" not in text
    assert all(line.startswith(("#", "clustereval_")) for line in text.splitlines())


def test_unrated_run_has_no_score_and_no_end_until_it_ends(tmp_path):
    text = prom.render(make_view(tmp_path, [result("storage.fio.seq_read", "_cluster", "skip",
                                                   summary="fio is not installed")], ended=None))
    found = families(text)
    assert "clustereval_score" not in found and "clustereval_run_end_timestamp_seconds" not in found
    assert "clustereval_run_start_timestamp_seconds" in found
    assert samples(text, "clustereval_coverage")[0].value == 0


def test_cluster_name_falls_back_to_the_inventory_source():
    view = {"run": {"inventory": {"inventory_sources": ["/etc/clusters/provider-x.ini"]}}}
    assert prom.cluster_of(view) == "provider-x"
    assert prom.cluster_of({"run": {}}) == "unknown"


def test_textfile_is_written_atomically(tmp_path, monkeypatch):
    view = make_view(tmp_path, MIXED)
    folder = tmp_path / "textfiles"
    folder.mkdir()
    path = prom.write_textfile(view, folder)
    assert path == folder / "clustereval.prom" and path.stat().st_mode & 0o777 == 0o644
    assert families(path.read_text(encoding="utf-8"))
    assert [p.name for p in folder.iterdir()] == ["clustereval.prom"]

    def broken_replace(src, dst):
        raise OSError(28, "No space left on device")

    smaller = make_view(tmp_path / "second", MIXED[:1])
    before = path.read_text(encoding="utf-8")
    monkeypatch.setattr(prom.os, "replace", broken_replace)
    with pytest.raises(prom.ExportError, match="No space left on device"):
        prom.write_textfile(smaller, folder)
    assert [p.name for p in folder.iterdir()] == ["clustereval.prom"] and path.read_text() == before


@pytest.mark.parametrize(("directory", "name", "message"), [
    ("missing", "clustereval.prom", "does not exist"),
    (".", "clustereval.txt", "ending in .prom"),
    (".", "../up.prom", "plain file name"),
])
def test_textfile_refuses_bad_targets(tmp_path, directory, name, message):
    with pytest.raises(prom.ExportError, match=message):
        prom.write_textfile({"score": {}, "run": {}, "results": []}, tmp_path / directory, name)


def test_push_url_escapes_and_base64_encodes():
    url = prom.push_url("http://gw:9091/", "clustereval", {"cluster": "lab a", "path": "a/b", "empty": ""})
    encoded = base64.urlsafe_b64encode(b"a/b").decode()
    assert url == f"http://gw:9091/metrics/job/clustereval/cluster/lab%20a/path@base64/{encoded}/empty@base64/="
    for bad in ("__name", "job", "1st", "a-b"):
        with pytest.raises(prom.ExportError, match="label name"):
            prom.push_url("http://gw", grouping={bad: "x"})


class _Recorder(BaseHTTPRequestHandler):
    """Answers every PUT with the status the server was given; keeps what it received."""

    def do_PUT(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.server.received.append((self.path, dict(self.headers), body.decode("utf-8")))
        self.send_response(self.server.answer)
        self.end_headers()
        self.wfile.write(b"bad metric name\n" if self.server.answer >= 400 else b"")

    def log_message(self, *args):
        pass


@pytest.fixture
def gateway():
    server = HTTPServer(("127.0.0.1", 0), _Recorder)
    server.received, server.answer = [], 200
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
    thread.join(5)


def test_push_sends_credentials_as_a_header_only(gateway):
    port = gateway.server_address[1]
    target = prom.push("clustereval_x 1\n", f"http://user:s3cr%40t@127.0.0.1:{port}", grouping={"cluster": "a"})
    assert target == f"http://127.0.0.1:{port}/metrics/job/clustereval/cluster/a" and "s3cr" not in target
    (path, headers, body) = gateway.received[0]
    assert path == "/metrics/job/clustereval/cluster/a" and body == "clustereval_x 1\n"
    assert headers["Authorization"] == "Basic " + base64.b64encode(b"user:s3cr@t").decode()
    assert headers["Content-Type"].startswith("text/plain; version=0.0.4")


def test_push_refused_is_one_clear_line(gateway):
    gateway.answer = 400
    port = gateway.server_address[1]
    with pytest.raises(prom.ExportError) as caught:
        prom.push("x 1\n", f"http://admin:hunter2@127.0.0.1:{port}")
    assert "HTTP 400" in str(caught.value) and "bad metric name" in str(caught.value)
    assert "hunter2" not in str(caught.value) and "\n" not in str(caught.value)


def test_push_unreachable_and_bad_urls(gateway):
    port = gateway.server_address[1]
    gateway.shutdown()
    gateway.server_close()
    with pytest.raises(prom.ExportError, match="cannot reach Pushgateway") as caught:
        prom.push("x 1\n", f"http://u:pw-secret@127.0.0.1:{port}", timeout_s=2)
    assert "pw-secret" not in str(caught.value)
    for bad in ("ftp://u:pw-secret@host", "http://u:pw-secret@host:notaport", "gw:9091"):
        with pytest.raises(prom.ExportError, match="must be http") as caught:
            prom.push("x 1\n", bad)
        assert "pw-secret" not in str(caught.value)


# Every metric clustereval writes starts with the prefix, and no PromQL function, keyword or label name we use does.
_PROMQL_NAME = re.compile(r"\b(clustereval_[a-zA-Z0-9_]+)\b")


def dashboard_exprs(dashboard: dict) -> list[str]:
    exprs = []
    for panel in dashboard["panels"]:
        exprs.extend(t["expr"] for t in panel.get("targets") or [] if t.get("expr"))
    for variable in dashboard["templating"]["list"]:
        query = variable.get("query")
        exprs.append(query["query"] if isinstance(query, dict) else query)
    return exprs


def test_dashboard_reads_only_what_render_emits(tmp_path):
    dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    emitted = set(families(prom.render(make_view(tmp_path, MIXED))))
    exprs = dashboard_exprs(dashboard)
    assert len([p for p in dashboard["panels"] if p.get("targets")]) >= 6
    used = {name for expr in exprs for name in _PROMQL_NAME.findall(expr)}
    assert used and used <= emitted, f"the dashboard reads series the exporter never writes: {used - emitted}"
    assert all(re.search(r'cluster=~?"\$cluster"', expr) for expr in exprs if "label_values" not in expr)
    assert [i["name"] for i in dashboard["__inputs"]] == ["DS_PROMETHEUS"]
    (cluster,) = [v for v in dashboard["templating"]["list"] if v["name"] == "cluster"]
    assert "label_values(clustereval_run_info, cluster)" in json.dumps(cluster["query"])
