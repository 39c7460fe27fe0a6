"""Object storage: the node program's signing and arithmetic, the clustereval-s3bench parser on output captured from
SeaweedFS 4.48 (tests/unit/data/object_storage/), and every check's pass, warn, fail, skip and error."""

from __future__ import annotations

import calendar
import copy
import importlib.util
import json
import os
import subprocess
from pathlib import Path

import pytest

from clustereval.checks import Context, probe_catalogue
from clustereval.parsers import ParseError, parse
from clustereval.parsers.s3bench import merge, quantile
from tests.helpers import judge_many

REPO = Path(__file__).resolve().parents[2]
DATA = Path(__file__).parent / "data" / "object_storage"
SCRIPT = REPO / "roles" / "object_storage" / "files" / "clustereval_s3bench.py"
PROBE = "object_storage_bench"
ENDPOINT = "http://10.251.7.2:8333"
SUBJECT = "s3:10.251.7.2:8333/bench"
CHECKS = ["storage.object.endpoint", "storage.object.throughput", "storage.object.small_rate",
          "storage.object.list_rate", "storage.object.delete_rate", "storage.object.first_byte_latency",
          "storage.object.scaling", "storage.object.errors", "storage.object.throttling"]


def bench():
    spec = importlib.util.spec_from_file_location("clustereval_s3bench", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def captured(name: str) -> str:
    return (DATA / name).read_text()


def doc(name: str = "seaweedfs-4.48-node1-of-2.json") -> dict:
    return json.loads(captured(name))


def record(stdout: str, rc: int = 0, host: str = "node1", **fields) -> dict:
    return {"name": PROBE, "cmd": "exec python3 $CLUSTEREVAL_SCRIPT", "rc": rc, "stdout": stdout, "stderr": "",
            "parser": "clustereval-s3bench", "timeout": 360, "artifact": f"raw/{host}/object-storage-bench.json",
            **fields}


def fleet(node1: dict | str | None = None, node2: dict | str | None = None) -> dict:
    """Both nodes' kept probes: the captured SeaweedFS sweep unless given (a dict is dumped, None leaves it out)."""
    out = {}
    for host, value, default in (("node1", node1, "seaweedfs-4.48-node1-of-2.json"),
                                 ("node2", node2, "seaweedfs-4.48-node2-of-2.json")):
        if value == "absent":
            out[host] = {}
            continue
        text = captured(default) if value is None else value if isinstance(value, str) else json.dumps(value)
        out[host] = {PROBE: record(text, host=host)}
    return out


def judge(check_id: str, host_probes: dict | None = None, **options) -> list[dict]:
    ctx = Context(subject="_cluster", host_probes=fleet() if host_probes is None else host_probes,
                  options={"endpoint": ENDPOINT, "bucket": "bench", "hosts": ["node1", "node2"], **options},
                  parse_cache={})
    return judge_many(check_id, ctx)


def one(results: list[dict], **params) -> dict:
    hits = [r for r in results if all((r.get("params") or {}).get(k) == v for k, v in params.items())]
    assert len(hits) == 1, (params, [r.get("params") for r in results])
    return hits[0]


# ------------------------------------------------------------------------------------------------ node program


def test_sigv4_matches_the_aws_documented_examples():
    """docs.aws.amazon.com/AmazonS3/latest/API/sig-v4-header-based-auth.html: GET Object and ListObjects."""
    module = bench()
    signer = module.Signer("AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "", "us-east-1")
    when = calendar.timegm((2013, 5, 24, 0, 0, 0))
    got = signer.headers("GET", "examplebucket.s3.amazonaws.com", "/test.txt", [], module.EMPTY_SHA256,
                         {"Range": "bytes=0-9"}, now=when)
    assert got["authorization"] == (
        "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, "
        "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, "
        "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41")
    listed = signer.headers("GET", "examplebucket.s3.amazonaws.com", "/", [("max-keys", "2"), ("prefix", "J")],
                            module.EMPTY_SHA256, now=when)
    assert listed["authorization"].endswith(
        "Signature=34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7")


def test_levels_shares_and_processes():
    module = bench()
    assert module.levels_up_to(32) == [1, 2, 4, 8, 16, 32]
    assert module.levels_up_to(24) == [1, 2, 4, 8, 16, 24]
    assert module.levels_up_to(1) == [1]
    # 5 workers over 3 nodes: 2, 2, 1; level 1 runs on the first node only
    assert [module.share(5, i, 3) for i in range(3)] == [2, 2, 1]
    assert [module.share(1, i, 3) for i in range(3)] == [1, 0, 0]
    assert sum(module.share(32, i, 7) for i in range(7)) == 32
    from clustereval.checks.object_storage import share
    assert all(share(c, i, n) == module.share(c, i, n) for c in range(1, 40) for n in range(1, 9) for i in range(n))
    groups = module.spread(20, 8)
    assert sorted(w for g in groups for w in g) == list(range(20)) and all(len(g) <= 20 for g in groups)


def test_the_scrubber_removes_every_credential_form(monkeypatch):
    module = bench()
    scrub = module.Scrubber(["AKIDEXAMPLE", 'se"cret\\key/1', ""])
    text = json.dumps({"message": 'bad AKIDEXAMPLE and se"cret\\key/1'})
    assert "AKIDEXAMPLE" not in scrub(text) and "cret" not in scrub(text)
    assert scrub("nothing secret here") == "nothing secret here"


def test_settings_come_from_the_environment_and_refuse_credentials_in_the_endpoint(monkeypatch):
    module = bench()
    for name, value in {"ENDPOINT": "https://user:pw@s3.example", "BUCKET": "b", "ACCESS_KEY": "a",
                        "SECRET_KEY": "s"}.items():
        monkeypatch.setenv(f"CLUSTEREVAL_{name}", value)
    with pytest.raises(module.ConfigError, match="must not carry credentials"):
        module.Settings()
    monkeypatch.setenv("CLUSTEREVAL_ENDPOINT", "https://s3.example:9000/")
    monkeypatch.setenv("CLUSTEREVAL_MAX_CONCURRENCY", "8")
    monkeypatch.setenv("CLUSTEREVAL_NODE_INDEX", "1")
    monkeypatch.setenv("CLUSTEREVAL_NODE_COUNT", "3")
    settings = module.Settings()
    assert settings.public()["workers"] == [0, 1, 1, 3] and settings.port == 9000
    assert "s" not in settings.public().values() and "secret" not in json.dumps(settings.public())
    monkeypatch.delenv("CLUSTEREVAL_SECRET_KEY")
    with pytest.raises(module.ConfigError, match="no credentials"):
        module.Settings()


def test_path_and_virtual_hosted_addressing(monkeypatch):
    module = bench()
    for name, value in {"ENDPOINT": "https://s3.example:9000", "BUCKET": "my-bucket", "ACCESS_KEY": "a",
                        "SECRET_KEY": "s", "ADDRESSING": "path"}.items():
        monkeypatch.setenv(f"CLUSTEREVAL_{name}", value)
    path = module.Client(module.Settings(), None)
    assert (path.host, path.host_header, path.path_base) == ("s3.example", "s3.example:9000", "/my-bucket")
    monkeypatch.setenv("CLUSTEREVAL_ADDRESSING", "virtual")
    monkeypatch.setenv("CLUSTEREVAL_ENDPOINT", "https://s3.example")
    virtual = module.Client(module.Settings(), None)
    assert (virtual.host, virtual.host_header, virtual.path_base) == ("my-bucket.s3.example", "my-bucket.s3.example",
                                                                       "")


# ------------------------------------------------------------------------------------------------ parser


def test_captured_sweep_parses_with_rates_and_histograms():
    data = parse("clustereval-s3bench", captured("seaweedfs-4.48-node1-of-2.json"))
    assert data["complete"] and data["format"] == "json" and data["warnings"] == []
    assert data["settings"]["levels"] == [1, 2, 4] and data["settings"]["workers"] == [1, 1, 2]
    assert data["settings"]["multipart"] is True and data["cleanup"]["left"] == 0
    level = data["levels"][0]
    put = level["phases"]["put_large"]
    assert put["operation"] == "put" and put["object"] == "large" and put["items"] >= put["ops"] * 3  # parts
    assert put["mb_per_s"] == pytest.approx(put["bytes"] / put["window_s"] / 1e6)
    get = level["phases"]["get_small"]
    assert get["ttfb"]["count"] == get["ops"] > 0
    p50, p99 = quantile(get["ttfb"], 0.5), quantile(get["ttfb"], 0.99)
    assert get["ttfb"]["min_s"] <= p50 <= p99 <= get["ttfb"]["max_s"]
    both = merge([get["ttfb"], get["ttfb"]])
    assert both["count"] == 2 * get["ttfb"]["count"] and quantile(both, 0.5) == pytest.approx(p50)


def test_quantile_of_a_known_histogram():
    # 100 samples: 99 at ~1 ms, one at ~1 s
    hist = {"count": 100, "sum_s": 1.1, "min_s": 0.001, "max_s": 1.0,
            "buckets": {349: 99, 698: 1}}  # 1e-6 * 1.02**349 ~ 1 ms, **698 ~ 1 s
    assert quantile(hist, 0.5) == pytest.approx(0.001, rel=0.03)
    assert quantile(hist, 0.99) == pytest.approx(0.001, rel=0.03)
    assert quantile(hist, 1.0) == pytest.approx(1.0, rel=0.03)
    assert quantile({"count": 0, "buckets": {}}, 0.5) is None


def test_failed_preflight_and_cleanup_mode_parse():
    wrong = parse("clustereval-s3bench", captured("seaweedfs-4.48-wrong-secret.json"))
    assert wrong["preflight"]["ok"] is False and wrong["preflight"]["kind"] == "auth"
    assert wrong["preflight"]["code"] == "SignatureDoesNotMatch" and wrong["levels"] == []
    refused = parse("clustereval-s3bench", captured("connection-refused.json"))
    assert refused["preflight"]["kind"] == "connect"
    cleanup = parse("clustereval-s3bench", captured("seaweedfs-4.48-cleanup.json"))
    assert cleanup["format"] == "cleanup" and cleanup["cleanup"]["left"] == 0


@pytest.mark.parametrize("text", ["", "not json", '{"tool": "something-else"}', '{"tool": "clustereval-s3bench"}',
                                  captured("seaweedfs-4.48-node1-of-2.json")[:5000]])
def test_broken_output_is_a_parse_error(text):
    with pytest.raises(ParseError):
        parse("clustereval-s3bench", text)


def test_a_histogram_whose_buckets_disagree_with_its_count_is_a_parse_error():
    data = doc()
    data["levels"][0]["phases"]["get_small"]["ttfb"]["count"] += 1
    with pytest.raises(ParseError, match="buckets hold"):
        parse("clustereval-s3bench", json.dumps(data))


def test_noise_around_the_document_is_a_warning():
    data = parse("clustereval-s3bench", "Traceback? no\n" + captured("seaweedfs-4.48-node2-of-2.json"))
    assert data["warnings"] == ["not a JSON line: Traceback? no"] and data["complete"]


# ------------------------------------------------------------------------------------------------ checks: pass


def test_the_captured_sweep_passes_every_check_with_its_variants_and_series():
    for check_id in CHECKS:
        results = judge(check_id)
        assert {r["status"] for r in results} == {"pass"}, (check_id, [r["summary"] for r in results])
        assert {r["subject"] for r in results} == {SUBJECT}
    throughput = judge("storage.object.throughput")
    assert len(throughput) == 6  # put and get at 1, 2, 4
    point = one(throughput, operation="put", concurrency=4)
    assert point["params"] == {"operation": "put", "object_size": "12MiB", "concurrency": 4}
    assert point["unit"] == "MB/s" and point["value"] > 0 and point["expected"]["min"] == 40
    assert {n["host"] for n in point["evidence"]["nodes"]} == {"node1", "node2"}
    assert point["evidence"]["workers"] == 4
    # level 1 ran on node1 alone; the sum of both nodes' rates at 4
    one_node = one(throughput, operation="put", concurrency=1)
    assert [n["host"] for n in one_node["evidence"]["nodes"]] == ["node1"]
    four = sum(n["mb_per_s"] for n in point["evidence"]["nodes"])
    assert point["value"] == pytest.approx(four, abs=0.01)
    # one series file per check, its rows attached once, every verdict filtered on its operation
    carrying = [r for r in throughput if "data" in r["series"][0]]
    assert len(carrying) == 1 and len(carrying[0]["series"][0]["data"]) == 6
    assert all(r["series"][0]["path"] == "series/_cluster/object-storage-throughput.csv" for r in throughput)
    assert one(throughput, operation="get", concurrency=2)["series"][0]["filter"] == {"operation": "get",
                                                                                     "object_size": "12MiB"}
    assert set(r["artifacts"][0] for r in throughput) == {"raw/node1/object-storage-bench.json"}
    latency = one(judge("storage.object.first_byte_latency"), object_size="4KiB", concurrency=2)
    evidence = latency["evidence"]
    assert evidence["ttfb_p50_ms"] <= evidence["ttfb_p90_ms"] <= evidence["ttfb_p99_ms"] == latency["value"]
    assert "p50" in latency["summary"] and "p99" in latency["summary"]
    endpoint = judge("storage.object.endpoint")[0]
    assert "every test object deleted" in endpoint["summary"] and endpoint["value"] > 0


# ------------------------------------------------------------------------------------------------ checks: skip


@pytest.mark.parametrize("check_id", CHECKS)
def test_no_endpoint_is_a_skip_saying_so_for_every_check(check_id):
    results = judge(check_id, {}, endpoint="", hosts=[])
    assert len(results) == 1 and results[0]["status"] == "skip" and results[0]["subject"] == "_cluster"
    assert "clustereval_object_storage_endpoint" in results[0]["summary"]


def test_scaling_measured_at_one_level_is_a_skip():
    data = doc()
    data["settings"]["levels"], data["levels"] = [1], data["levels"][:1]
    data["settings"]["workers"] = [1]
    results = judge("storage.object.scaling", {"node1": {PROBE: record(json.dumps(data))}}, hosts=["node1"])
    assert {r["status"] for r in results} == {"skip"} and "one concurrency level" in results[0]["summary"]


def test_a_baseline_without_a_limit_is_a_skip_with_the_value(monkeypatch):
    from clustereval import baselines
    from clustereval.checks import object_storage

    def none(*args, **kwargs):
        raise baselines.NoReference("no reference in baselines/object_storage.yml for this hardware (no facts)")

    monkeypatch.setattr(object_storage.baselines, "reference", none)
    result = one(judge("storage.object.small_rate"), operation="get", concurrency=1)
    assert result["status"] == "skip" and result["value"] > 0 and "no reference" in result["summary"]


def test_endpoint_refused_by_every_node_skips_the_measurements():
    refused = captured("connection-refused.json")
    results = judge("storage.object.throughput", fleet(refused, refused))
    assert len(results) == 1 and results[0]["status"] == "skip" and "connect" in results[0]["summary"]


# ------------------------------------------------------------------------------------------------ checks: warn/fail


def test_below_the_baseline_warns_then_fails():
    overrides = {"storage.object.throughput": {"warn": 1e6, "fail": 1}}
    result = one(judge("storage.object.throughput", baseline_overrides=overrides), operation="get", concurrency=4)
    assert result["status"] == "warn" and "below" in result["summary"]
    assert result["expected"]["source"].startswith("inventory override")
    overrides = {"storage.object.small_rate": {"warn": 1e6, "fail": 1e5}}
    result = one(judge("storage.object.small_rate", baseline_overrides=overrides), operation="put", concurrency=2)
    assert result["status"] == "fail"
    for check_id in ("storage.object.list_rate", "storage.object.delete_rate"):
        assert {r["status"] for r in judge(check_id, baseline_overrides={check_id: {"warn": 1e6, "fail": 1}})} == {
            "warn"}


def test_a_slow_first_byte_warns_and_fails():
    data = doc()
    hist = data["levels"][2]["phases"]["get_small"]["ttfb"]
    hist["buckets"] = {"745": hist["count"]}  # every first byte ~2.5 s
    hist["max_s"], hist["min_s"] = 2.6, 2.4
    results = judge("storage.object.first_byte_latency", fleet(data))
    slow = one(results, object_size="4KiB", concurrency=4)
    assert slow["status"] == "fail" and slow["value"] > 2000 and "above" in slow["summary"]
    warn = judge("storage.object.first_byte_latency", fleet(data),
                 baseline_overrides={"storage.object.first_byte_latency": {"warn": 1, "fail": 1e6}})
    assert one(warn, object_size="4KiB", concurrency=1)["status"] == "warn"


def scaled(factor_at_top: float) -> dict:
    """Both nodes' sweeps with every phase at the highest level slowed by ``factor_at_top`` (its window stretched)."""
    out = {}
    for host, name in (("node1", "seaweedfs-4.48-node1-of-2.json"), ("node2", "seaweedfs-4.48-node2-of-2.json")):
        data = doc(name)
        for phase in data["levels"][-1]["phases"].values():
            phase["ended"] = phase["started"] + (phase["ended"] - phase["started"]) / factor_at_top
        out[host] = {PROBE: record(json.dumps(data), host=host)}
    return out


def test_throughput_falling_as_concurrency_grows_warns_then_fails():
    falling = judge("storage.object.scaling", scaled(0.2))
    put = one(falling, operation="put", object_size="12MiB")
    assert put["status"] == "fail" and put["summary"].startswith("throughput falls as concurrency grows")
    assert put["value"] < 0.5 and put["evidence"]["at_most"]["concurrency"] == 4
    assert "data" in falling[0]["series"][0] and falling[0]["series"][0]["path"].endswith("object-storage-scaling.csv")
    warned = judge("storage.object.scaling", scaled(0.2),
                   baseline_overrides={"storage.object.scaling": {"warn": 0.99, "fail": 0.0}})
    assert {r["status"] for r in warned} == {"warn"}


def with_errors(kind: str, count: int, status: int, code: str) -> dict:
    data = doc()
    errors = data["levels"][2]["phases"]["put_small"]["errors"]
    errors["requests"] += count
    errors["failed"] += count
    errors[kind] += count
    errors["samples"] = [{"op": "put_small", "status": status, "code": code, "message": "x"}]
    return data


def test_server_errors_fail_and_throttling_is_counted_apart():
    broken = judge("storage.object.errors", fleet(with_errors("server", 50, 500, "InternalError")))
    put = one(broken, operation="put", object_size="4KiB")
    assert put["status"] == "fail" and put["value"] > 1 and "500 InternalError" in put["summary"]
    assert put["evidence"]["by_concurrency"] == {"4": {"server": 50}}
    assert one(judge("storage.object.throttling", fleet(with_errors("server", 50, 500, "InternalError"))),
               operation="put", object_size="4KiB")["status"] == "pass"
    one_error = judge("storage.object.errors", fleet(with_errors("network", 1, 0, "")))
    assert one(one_error, operation="put", object_size="4KiB")["status"] == "warn"
    slow_down = with_errors("throttled", 60, 503, "SlowDown")
    throttled = one(judge("storage.object.throttling", fleet(slow_down)), operation="put", object_size="4KiB")
    assert throttled["status"] == "warn" and "throttled" in throttled["summary"] and "SlowDown" in throttled["summary"]
    errors = judge("storage.object.errors", fleet(slow_down))
    assert one(errors, operation="put", object_size="4KiB")["status"] == "pass"
    heavy = one(judge("storage.object.throttling", fleet(with_errors("throttled", 5000, 503, "SlowDown"))),
                operation="put", object_size="4KiB")
    assert heavy["status"] == "fail"


def test_a_level_where_no_request_succeeded_fails():
    data = doc()
    phase = data["levels"][0]["phases"]["get_large"]  # concurrency 1: node1 alone
    phase["ops"], phase["bytes"] = 0, 0
    phase["ttfb"] = {"count": 0, "sum_s": 0.0, "min_s": None, "max_s": None, "buckets": {}}
    phase["errors"].update(requests=9, failed=9, server=9, samples=[{"op": "get_large", "status": 503,
                                                                      "code": "ServiceUnavailable"}])
    result = one(judge("storage.object.throughput", fleet(data)), operation="get", concurrency=1)
    assert result["status"] == "fail" and "no request succeeded" in result["summary"]
    latency = one(judge("storage.object.first_byte_latency", fleet(data)), object_size="12MiB", concurrency=1)
    assert latency["status"] == "fail"


def test_unreachable_endpoint_fails_and_leftovers_warn():
    refused = judge("storage.object.endpoint", fleet(None, captured("connection-refused.json")))[0]
    assert refused["status"] == "fail" and "node2: connect" in refused["summary"]
    data = doc()
    data["cleanup"].update(left=3, errors=3, samples=["delete: 403 AccessDenied"])
    left = judge("storage.object.endpoint", fleet(data))[0]
    assert left["status"] == "warn" and "test objects may remain under clustereval/" in left["summary"]
    slow = judge("storage.object.endpoint", baseline_overrides={"storage.object.endpoint": {"warn": 0.001}})[0]
    assert slow["status"] == "warn"


# ------------------------------------------------------------------------------------------------ checks: error


def test_wrong_credentials_are_the_harness_settings_not_the_cluster():
    wrong = captured("seaweedfs-4.48-wrong-secret.json")
    result = judge("storage.object.endpoint", fleet(wrong, wrong))[0]
    assert result["status"] == "error" and "SignatureDoesNotMatch" in result["summary"]


@pytest.mark.parametrize("broken", [
    record("", rc=2, stderr="clustereval_s3bench: no bucket: CLUSTEREVAL_BUCKET is empty"),
    record('{"tool": "clustereval-s3bench", "version": 1, "settings": 3}'),
    record("", timed_out=True),
])
def test_a_node_whose_benchmark_broke_makes_its_share_an_error(broken):
    host_probes = fleet()
    host_probes["node2"] = {PROBE: broken}
    throughput = judge("storage.object.throughput", host_probes)
    assert one(throughput, operation="put", concurrency=1)["status"] == "pass"  # node1 alone at level 1
    four = one(throughput, operation="put", concurrency=4)
    assert four["status"] == "error" and "only 2 of 4 workers ran" in four["summary"] and "node2" in four["summary"]
    assert judge("storage.object.endpoint", host_probes)[0]["status"] == "error"
    assert {r["status"] for r in judge("storage.object.scaling", host_probes)} == {"error"}


def test_a_node_that_kept_nothing_and_loads_that_did_not_overlap_are_errors():
    missing = judge("storage.object.small_rate", fleet(None, "absent"))
    assert one(missing, operation="get", concurrency=2)["status"] == "error"
    apart = doc("seaweedfs-4.48-node2-of-2.json")
    for level in apart["levels"]:
        for phase in level["phases"].values():
            if phase["started"] is not None:
                phase["started"] += 3600
                phase["ended"] += 3600
    results = judge("storage.object.throughput", fleet(None, apart))
    assert one(results, operation="get", concurrency=4)["status"] == "error"
    assert "overlapped only 0%" in one(results, operation="get", concurrency=4)["summary"]
    assert one(results, operation="get", concurrency=1)["status"] == "pass"


def test_no_node_kept_anything_is_an_error():
    results = judge("storage.object.throughput", fleet("absent", "absent"))
    assert results[0]["status"] == "error" and "no node measured" in results[0]["summary"]


def test_a_stopped_sweep_reports_its_levels_and_errors_the_rest():
    data = doc()
    data["levels"] = data["levels"][:1]
    data.update(done=False, fatal="MemoryError: ")
    other = copy.deepcopy(doc("seaweedfs-4.48-node2-of-2.json"))
    results = judge("storage.object.throughput", fleet(data, other))
    assert one(results, operation="put", concurrency=1)["status"] == "pass"
    assert "MemoryError" in one(results, operation="put", concurrency=2)["summary"]


@pytest.mark.parametrize("probe", ["object_storage_bench", "object_storage_endurance"])
def test_the_probe_cleanup_removes_the_benchmarks_private_directory_and_nothing_else(tmp_path, probe):
    """After a Ctrl-C the role's removal task never runs: the probe's cleanup (run by the probe runner when the
    collection is cut short) removes the clustereval-s3.* directory; a script elsewhere keeps its directory."""
    cleanup = probe_catalogue.load()[probe]["cleanup"]
    private, other = tmp_path / "clustereval-s3.ab12cd", tmp_path / "elsewhere"
    for folder in (private, other):
        folder.mkdir()
    (other / "clustereval_s3bench.py").write_text("raise SystemExit(0)\n")
    for script in (private / "clustereval_s3bench.py", other / "clustereval_s3bench.py"):
        subprocess.run(["/bin/sh", "-c", cleanup], env={**os.environ, "CLUSTEREVAL_SCRIPT": str(script)},
                       check=False, timeout=30)
    assert not private.exists() and (other / "clustereval_s3bench.py").exists()
