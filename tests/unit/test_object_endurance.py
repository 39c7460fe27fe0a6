"""Object storage endurance: the benchmark's ``--endurance`` lines (captured from a real two-node run against
SeaweedFS, tests/unit/data/object_storage/seaweedfs-endurance-node*-of-2.jsonl), their parser, and every check's
pass, warn, fail, skip and error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clustereval.checks import Context
from clustereval.parsers import ParseError, parse
from tests.helpers import judge_many

DATA = Path(__file__).parent / "data" / "object_storage"
PROBE = "object_storage_endurance"
PARSER = "clustereval-s3bench-endurance"
ENDPOINT = "http://10.251.7.2:8333"
CHECKS = ["storage.object.endurance.decay", "storage.object.endurance.ttfb_drift",
          "storage.object.endurance.throttled", "storage.object.endurance.errors"]


def lines(node: int = 1) -> list[dict]:
    return [json.loads(line) for line in (DATA / f"seaweedfs-endurance-node{node}-of-2.jsonl").read_text().splitlines()]


def dump(objs: list[dict]) -> str:
    return "".join(json.dumps(o) + "\n" for o in objs)


def intervals(objs: list[dict]) -> list[dict]:
    return [o for o in objs if o["kind"] == "interval" and not o.get("tail")]


def fleet(node1: list[dict] | str | None = None, node2: list[dict] | str | None = None, **fields) -> dict:
    out = {}
    for host, value, n in (("node1", node1, 1), ("node2", node2, 2)):
        if value == "absent":
            out[host] = {}
            continue
        text = value if isinstance(value, str) else dump(lines(n) if value is None else value)
        out[host] = {PROBE: {"name": PROBE, "rc": 0, "stdout": text, "stderr": "", "parser": PARSER,
                             "timeout": 400, "artifact": f"raw/{host}/object-storage-endurance.jsonl", **fields}}
    return out


def judge(check_id: str, host_probes: dict | None = None, **options) -> dict:
    ctx = Context(subject="_cluster", host_probes=fleet() if host_probes is None else host_probes,
                  options={"endpoint": ENDPOINT, "bucket": "bench", "hosts": ["node1", "node2"], **options},
                  parse_cache={})
    results = judge_many(check_id, ctx)
    assert len(results) == 1
    return results[0]


def scale(objs: list[dict], index: int, op: str, factor: float) -> None:
    """Scale one interval's bytes of ``op`` (a slower store moves fewer bytes in the same interval)."""
    for o in objs:
        if o["kind"] == "interval" and o["index"] == index and op in o["ops"]:
            o["ops"][op]["bytes"] = int(o["ops"][op]["bytes"] * factor)


def slow_ttfb(objs: list[dict], index: int, shift: int) -> None:
    """Move one interval's GET first-byte samples ``shift`` buckets up (1.02**shift slower)."""
    for o in objs:
        if o["kind"] == "interval" and o["index"] == index and "get" in o["ops"]:
            hist = o["ops"]["get"]["ttfb"]
            hist["buckets"] = {str(int(k) + shift): v for k, v in hist["buckets"].items()}
            hist["min_s"] *= 1.02 ** shift
            hist["max_s"] *= 1.02 ** shift


def fail_some(objs: list[dict], kind: str, count: int, status: int, code: str) -> None:
    o = intervals(objs)[-1]
    errors = o["ops"]["put"]["errors"]
    errors["requests"] += count
    errors["failed"] += count
    errors[kind] += count
    errors["samples"] = [{"op": "put", "status": status, "code": code, "message": "Please reduce your request rate."}]


# ------------------------------------------------------------------------------------------------ parser


def test_parser_reads_the_captured_run():
    data = parse(PARSER, dump(lines(1)))
    assert data["complete"] and data["format"] == "jsonl" and data["warnings"] == []
    assert data["settings"]["endurance_s"] == 8 and data["settings"]["interval_s"] == 2
    assert data["cleanup"]["left"] == 0 and data["workers"] == 1
    full = [i for i in data["intervals"] if not i["tail"]]
    assert len(full) == 4 and [i["index"] for i in full] == [0, 1, 2, 3]
    for interval in full:
        assert interval["ops"]["put"]["ops"] > 0 and interval["ops"]["get"]["ops"] > 0
        assert interval["mb_per_s"] > 0 and 1.9 < interval["duration_s"] < 2.1


def test_parser_keeps_the_intervals_of_a_run_cut_short():
    objs = [o for o in lines(1) if o["kind"] == "interval"][:2]
    data = parse(PARSER, dump(objs) + '{"tool": "clustereval-s3bench-endurance", "ver')
    assert not data["complete"] and len(data["intervals"]) == 2 and "cut short" in data["fatal"]
    assert data["warnings"]  # the truncated line


@pytest.mark.parametrize("text", ["", "nothing here\n", dump([{**lines(1)[0], "version": 7}]),
                                  dump([{**lines(1)[0], "ops": {"head": {}}}]),
                                  dump([{**lines(1)[0], "kind": "other"}])])
def test_parser_rejects_broken_output(text):
    with pytest.raises(ParseError):
        parse(PARSER, text)


def test_parser_rejects_a_histogram_that_does_not_add_up():
    objs = lines(1)
    objs[0]["ops"]["get"]["ttfb"]["count"] += 1
    with pytest.raises(ParseError):
        parse(PARSER, dump(objs))


# ------------------------------------------------------------------------------------------------ checks


@pytest.mark.parametrize("check_id", CHECKS)
def test_every_check_passes_on_the_captured_run(check_id):
    result = judge(check_id)
    assert result["status"] == "pass", result["summary"]
    assert result["subject"].startswith("s3:") and result["subject"].endswith(":8333/clustereval-test")
    assert result["params"] == {"object_size": "64KiB"}


def test_decay_series_and_fail_and_warn():
    result = judge("storage.object.endurance.decay")
    assert result["series"][0]["path"] == "series/_cluster/object-storage-endurance.csv"
    node1, node2 = lines(1), lines(2)
    for objs in (node1, node2):
        for index in (2, 3):
            scale(objs, index, "put", 0.4)
            scale(objs, index, "get", 0.4)
    failed = judge("storage.object.endurance.decay", fleet(node1, node2))
    assert failed["status"] == "fail" and failed["value"] > 40, failed["summary"]
    node1, node2 = lines(1), lines(2)
    first = max(intervals(node1)[0]["ops"]["get"]["bytes"], 1)
    for objs in (node1, node2):
        for o in intervals(objs)[1:]:  # every later interval at 80% of the first's byte count
            for op in ("put", "get"):
                o["ops"][op]["bytes"] = int(intervals(objs)[0]["ops"][op]["bytes"] * 0.8)
    assert first
    warned = judge("storage.object.endurance.decay", fleet(node1, node2))
    assert warned["status"] == "warn", warned["summary"]


def test_ttfb_drift_warn_and_fail():
    node1, node2 = lines(1), lines(2)
    for objs in (node1, node2):
        slow_ttfb(objs, 3, 60)  # 1.02**60: 3.3x slower in the last quarter
    assert judge("storage.object.endurance.ttfb_drift", fleet(node1, node2))["status"] == "warn"
    for objs in (node1, node2):
        slow_ttfb(objs, 3, 40)  # 1.02**100: 7x
    result = judge("storage.object.endurance.ttfb_drift", fleet(node1, node2))
    assert result["status"] == "fail" and result["value"] > 5, result["summary"]


def test_throttled_any_warns_many_fail():
    node1 = lines(1)
    fail_some(node1, "throttled", 1, 503, "SlowDown")
    warned = judge("storage.object.endurance.throttled", fleet(node1))
    assert warned["status"] == "warn" and "SlowDown" in warned["summary"], warned["summary"]
    assert judge("storage.object.endurance.errors", fleet(node1))["status"] == "pass"
    fail_some(node1, "throttled", 5000, 503, "SlowDown")
    assert judge("storage.object.endurance.throttled", fleet(node1))["status"] == "fail"


def test_errors_warn_and_fail():
    node2 = lines(2)
    fail_some(node2, "server", 1, 500, "InternalError")
    result = judge("storage.object.endurance.errors", fleet(None, node2))
    assert result["status"] == "warn" and "InternalError" in result["summary"], result["summary"]
    assert judge("storage.object.endurance.throttled", fleet(None, node2))["status"] == "pass"
    fail_some(node2, "network", 5000, 0, "")
    assert judge("storage.object.endurance.errors", fleet(None, node2))["status"] == "fail"


@pytest.mark.parametrize("check_id", CHECKS)
def test_no_endpoint_is_a_skip(check_id):
    result = judge(check_id, endpoint="")
    assert result["status"] == "skip" and "no S3 endpoint" in result["summary"]


def test_too_short_a_run_is_a_skip():
    short = [o for o in lines(1) if o["kind"] == "summary" or o["index"] == 0]
    short2 = [o for o in lines(2) if o["kind"] == "summary" or o["index"] == 0]
    result = judge("storage.object.endurance.decay", fleet(short, short2))
    assert result["status"] == "skip" and "at least 2" in result["summary"]


@pytest.mark.parametrize("check_id", CHECKS)
def test_a_lost_node_is_an_error_never_a_pass(check_id):
    result = judge(check_id, fleet(None, "absent"))
    assert result["status"] == "error" and "node2" in result["summary"], result["summary"]


@pytest.mark.parametrize("check_id", CHECKS)
def test_no_node_measured_is_an_error(check_id):
    result = judge(check_id, fleet("garbage\n", "absent"))
    assert result["status"] == "error" and "unreadable" in result["summary"], result["summary"]


def test_a_refused_endpoint_is_a_skip():
    summary = {**next(o for o in lines(1) if o["kind"] == "summary"),
               "preflight": {"ok": False, "kind": "auth", "status": 403, "code": "AccessDenied", "error": "no"}}
    summary.pop("cleanup")
    result = judge("storage.object.endurance.errors", fleet([summary], [{**summary, "host": "n2"}]))
    assert result["status"] == "skip" and "AccessDenied" in result["summary"], result["summary"]
