"""Checkpoint save and load (checks/storage_checkpoint.py, probe storage_checkpoint): the probe-checkpoint parser on
output the benchmark printed (tests/unit/data/storage_checkpoint/), truncated and damaged output, every check's pass,
warn, fail, skip and error, and the node program's own helpers (directory discovery, error classes, digests).

The captures, all of roles/storage/files/clustereval_checkpoint.py through mpirun with torch 2.13.0+cpu:
``glusterfs-2nodes-4ranks.jsonl`` the simulated reference's two nodes, two ranks each
(``clustereval_storage_checkpoint_ranks_per_node=2``), 8 MiB of 4 tensors per rank, on its GlusterFS home
(raw/node1/storage-checkpoint.jsonl of the role's run, as tests/integration/test_storage_checkpoint.py makes it);
the others on one machine whose four ranks ran in UTS namespaces of their own as hosts fake0 and fake1 (two each):
``tmpfs-full-4ranks.jsonl`` 16 MiB per rank into a 40 MiB tmpfs (torch.save's short writes, DCP's ENOSPC),
``no-numpy.jsonl`` an interpreter that finds no numpy (DCP skipped), ``no-shared-dir.jsonl`` no directory given
and home and /home on ext4, ``one-node.jsonl`` two ranks on one host.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import random
import subprocess
from pathlib import Path
from typing import Any

import pytest

from clustereval import checks, parsers
from clustereval.checks import Context, probe_catalogue
from clustereval.parsers import _mutate
from clustereval.parsers._common import clean
from clustereval.results import problems
from tests.helpers import PROBLEM_WORDS, RUN

REPO = Path(__file__).resolve().parents[2]
DATA = Path(__file__).parent / "data" / "storage_checkpoint"
SCRIPT = REPO / "roles" / "storage" / "files" / "clustereval_checkpoint.py"
PROBE = "storage_checkpoint"
TOOL = "probe-checkpoint"
CHECKS = ("storage.checkpoint.save", "storage.checkpoint.load", "storage.checkpoint.integrity")
# The simulated GlusterFS figures pass against these (its real levels are per node of a GPU cluster).
LOW = {"storage.checkpoint.save": {"warn": 0.001, "fail": 0.0001},
       "storage.checkpoint.load": {"warn": 0.001, "fail": 0.0001}}


def captured(name: str) -> str:
    return (DATA / name).read_text()


def lines_of(name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in captured(name).splitlines() if line.strip()]


def text_of(lines: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(line) + "\n" for line in lines)


def record(stdout: str, rc: int = 0, **fields: Any) -> dict[str, Any]:
    entry = probe_catalogue.load()[PROBE]
    return {"name": PROBE, "cmd": entry["cmd"], "rc": rc, "stdout": stdout, "stderr": "", "parser": TOOL,
            "artifact": "raw/node1/storage-checkpoint.jsonl", "timeout": 300, "on_timeout": "fail", **fields}


def judge(check_id: str, probe: dict[str, Any] | None, nodes=("node1", "node2"), **options: Any) -> list[dict]:
    """Every result of ``check_id`` judged as the role's cluster-wide task does, each held to the result contract
    (and no pass stating a problem)."""
    kept = {"node1": {PROBE: probe} if probe else {}, **{n: {} for n in nodes[1:]}}
    ctx = Context(subject="_cluster", host_probes=kept,
                  options={"launcher": nodes[0] if len(nodes) > 1 else "", "nodes": list(nodes), **options})
    results = checks.evaluate_many(check_id, ctx, RUN)
    for result in results:
        assert problems(result) == [], result
        if result["status"] == "pass":
            assert not PROBLEM_WORDS.search(result["summary"]), result["summary"]
    return results


def by_method(results: list[dict]) -> dict[str, dict]:
    return {r["params"]["method"]: r for r in results}


# ------------------------------------------------------------------------------------------------ the parser


def test_the_simulated_glusterfs_run_is_read_whole():
    data = parsers.parse(TOOL, captured("glusterfs-2nodes-4ranks.jsonl"))
    start = data["start"]
    assert start["hosts"] == ["node1", "node1", "node2", "node2"] and start["ranks_per_node"] == 2
    assert start["mount"]["fstype"] == "fuse.glusterfs" and start["directory"] == "/home"
    assert [(r["method"], r["step"]) for r in data["results"]] == [
        ("torch.save", "save"), ("torch.save", "load"), ("dcp", "save"), ("dcp", "load")]
    for line in data["results"]:
        assert line["gbps"] > 0 and line["bytes"] >= 4 * 8 << 20 and len(line["ranks"]) == 4
        assert line["gbps"] == pytest.approx(line["bytes"] / line["seconds"] / 1e9, rel=1e-3)
        if line["step"] == "load":  # every rank read a shard the other node's rank wrote
            assert line["verified"] is True and line["mismatches"] == []
            assert [r["source_rank"] for r in line["ranks"]] == [2, 3, 0, 1]
            assert not any(r["same_node"] for r in line["ranks"])
    assert data["cleanup"]["removed"] is True and data["errors"] == [] and data["skipped"] is None
    assert data["complete"] and data["done"]["seconds"] > 0


def test_failures_skips_and_method_skips_are_read():
    full = parsers.parse(TOOL, captured("tmpfs-full-4ranks.jsonl"))
    assert {(e["method"], e["kind"]) for e in full["errors"]} == {("torch.save", "storage"), ("dcp", "storage")}
    assert all(r["gbps"] is None and r["failed_ranks"] for r in full["results"])
    assert not any(r["step"] == "load" for r in full["results"])  # nothing saved, nothing loaded
    assert "No space left on device" in full["errors"][-1]["message"]
    assert "not a shared filesystem" in parsers.parse(TOOL, captured("no-shared-dir.jsonl"))["skipped"]
    assert "needs two nodes" in parsers.parse(TOOL, captured("one-node.jsonl"))["skipped"]
    numpy = parsers.parse(TOOL, captured("no-numpy.jsonl"))
    assert "numpy is not installed" in numpy["method_skips"]["dcp"]
    assert [r["method"] for r in numpy["results"]] == ["torch.save", "torch.save"]


def test_truncated_output_is_a_parse_error_naming_what_it_saw():
    sample = captured("glusterfs-2nodes-4ranks.jsonl")
    done_at = sample.rindex('{"event": "done"')
    for cut in range(0, done_at, 97):
        with pytest.raises(parsers.ParseError):
            parsers.parse(TOOL, sample[:cut])
    with pytest.raises(parsers.ParseError, match="stops before the benchmark's done line"):
        parsers.parse(TOOL, sample[:done_at])
    lost = sample[:done_at] + json.dumps({"event": "error", "kind": "harness", "rank": 2,
                                          "message": "RuntimeError: Connection closed by peer"}) + "\n"
    with pytest.raises(parsers.ParseError, match="Connection closed by peer"):
        parsers.parse(TOOL, lost)


@pytest.mark.parametrize("text", ["", "mpirun: command not found\n", '{"event": "done"}\n',
                                  '{"event": "start", "format": "other/1"}\n{"event": "done"}\n'])
def test_output_that_is_not_the_benchmark_is_a_parse_error(text):
    with pytest.raises(parsers.ParseError):
        parsers.parse(TOOL, text)


def test_a_result_line_breaking_the_contract_is_a_parse_error():
    for broken in ({"gbps": "fast"}, {"ranks": []}, {"bytes": None}, {"step": "restore"}, {"verified": "yes"}):
        lines = lines_of("glusterfs-2nodes-4ranks.jsonl")
        lines[2].update(broken)
        with pytest.raises(parsers.ParseError):
            parsers.parse(TOOL, text_of(lines))


@pytest.mark.parametrize("mutation", sorted(_mutate.MUTATIONS))
def test_the_parser_takes_any_damage_with_a_parse_error_at_worst(mutation):
    sample = captured("glusterfs-2nodes-4ranks.jsonl").encode()
    for seed in range(4):
        damaged = _mutate.MUTATIONS[mutation](sample, random.Random(seed))
        try:
            json.dumps(parsers.get(TOOL)(clean(damaged)), allow_nan=False)
        except parsers.ParseError as exc:
            assert str(exc).strip()
    plain = parsers.parse(TOOL, sample)
    for wrap in ("srun_prefix", "mpirun_prefix"):
        assert parsers.parse(TOOL, _mutate.MUTATIONS[wrap](sample, random.Random(7))) == plain


# ------------------------------------------------------------------------------------------------ the checks


def test_pass_on_the_simulated_run_with_levels_it_reaches_and_every_tensor_verified():
    probe = record(captured("glusterfs-2nodes-4ranks.jsonl"))
    for check_id in CHECKS[:2]:
        results = by_method(judge(check_id, probe, baseline_overrides=LOW))
        assert set(results) == {"torch.save", "dcp"}
        for method, result in results.items():
            assert result["status"] == "pass", result["summary"]
            assert result["subject"] == "node1+node2" and result["params"] == {"method": method, "directory": "/home"}
            assert result["unit"] == "GB/s" and result["value"] > 0 and "fuse.glusterfs" in result["summary"]
            assert result["artifacts"] == ["raw/node1/storage-checkpoint.jsonl"]
            series = result["series"][0]
            assert series["path"] == f"series/_cluster/{check_id.replace('.', '-', 1).replace('.', '-')}.csv"
            assert len(series["data"]) == 4 and {row["method"] for row in series["data"]} == {method}
    integrity = by_method(judge("storage.checkpoint.integrity", probe))
    assert {m: (r["status"], r["value"]) for m, r in integrity.items()} == {"torch.save": ("pass", 0),
                                                                             "dcp": ("pass", 0)}
    assert "all 16 tensors read back on another node byte-identical" in integrity["dcp"]["summary"]


def test_the_simulated_figures_fail_against_the_per_node_floors_and_a_middling_one_warns():
    probe = record(captured("glusterfs-2nodes-4ranks.jsonl"))
    saved = by_method(judge("storage.checkpoint.save", probe))
    for result in saved.values():  # 2 nodes: 2 GB/s expected, 0.4 the failure level
        assert result["status"] == "fail" and "below the failure level 0.4 GB/s for 2 nodes" in result["summary"]
        assert result["expected"]["reference"] == 2.0 and result["expected"]["basis"] == "fact checkpoint_nodes=2 x 1.0"
    value = saved["torch.save"]["value"]
    middling = {"storage.checkpoint.save": {"warn": value * 2, "fail": value / 2}}
    warned = by_method(judge("storage.checkpoint.save", probe, baseline_overrides=middling))["torch.save"]
    assert warned["status"] == "warn" and "below the expected" in warned["summary"]
    loaded = by_method(judge("storage.checkpoint.load", probe))
    assert {r["expected"]["reference"] for r in loaded.values()} == {3.0}


def test_a_shard_read_on_its_own_node_is_never_a_pass():
    lines = lines_of("glusterfs-2nodes-4ranks.jsonl")
    for line in lines:
        if line.get("step") == "load":
            line["ranks"][0]["same_node"] = True
    result = by_method(judge("storage.checkpoint.load", record(text_of(lines)), baseline_overrides=LOW))["dcp"]
    assert result["status"] == "warn" and "page cache" in result["summary"]


def test_a_tensor_read_back_different_fails_the_integrity():
    lines = lines_of("glusterfs-2nodes-4ranks.jsonl")
    load = next(line for line in lines if line.get("method") == "dcp" and line.get("step") == "load")
    load["ranks"][1].update(verified=False, mismatched=["layers.2.weight"])
    load.update(verified=False, mismatches=[{"rank": 1, "source_rank": 3, "tensors": ["layers.2.weight"]}])
    results = by_method(judge("storage.checkpoint.integrity", record(text_of(lines))))
    assert results["torch.save"]["status"] == "pass"
    wrong = results["dcp"]
    assert wrong["status"] == "fail" and wrong["value"] == 1
    assert "1 of 16 tensors" in wrong["summary"]
    assert "rank 1 reading rank 3's shard: layers.2.weight" in wrong["summary"]


def test_a_storage_refusing_the_save_fails_it_and_leaves_load_and_integrity_skipped():
    probe = record(captured("tmpfs-full-4ranks.jsonl"))
    saved = by_method(judge("storage.checkpoint.save", probe))
    assert {m: r["status"] for m, r in saved.items()} == {"torch.save": "fail", "dcp": "fail"}
    assert "No space left on device" in saved["dcp"]["summary"] and "unexpected pos" in saved["torch.save"]["summary"]
    assert saved["dcp"]["evidence"]["ranks"][0]["free_bytes"] is not None
    for check_id in CHECKS[1:]:
        results = by_method(judge(check_id, probe))
        assert {r["status"] for r in results.values()} == {"skip"}
        assert all("the save did not complete" in r["summary"] for r in results.values())


def test_a_rank_lost_in_a_collective_is_the_harness():
    lines = lines_of("glusterfs-2nodes-4ranks.jsonl")
    lines = [line for line in lines if line.get("method") != "dcp"]
    lines.insert(-2, {"event": "error", "method": "dcp", "step": "save", "rank": 3, "host": "node2",
                      "kind": "harness", "message": "RuntimeError: Connection closed by peer [127.0.0.1]:40651"})
    probe = record(text_of(lines))
    saved = by_method(judge("storage.checkpoint.save", probe))
    assert saved["torch.save"]["status"] == "fail"  # the simulated figures, judged as they are
    assert saved["dcp"]["status"] == "error" and "Connection closed by peer" in saved["dcp"]["summary"]
    assert by_method(judge("storage.checkpoint.load", probe))["dcp"]["status"] == "error"
    assert by_method(judge("storage.checkpoint.integrity", probe))["dcp"]["status"] == "error"


@pytest.mark.parametrize("name, words", [("no-shared-dir.jsonl", "no shared directory to checkpoint to"),
                                         ("one-node.jsonl", "needs two nodes")])
def test_nothing_to_measure_skips_every_check_saying_why(name, words):
    for check_id in CHECKS:
        [result] = judge(check_id, record(captured(name)))
        assert result["status"] == "skip" and words in result["summary"]


def test_dcp_without_numpy_skips_while_torch_save_is_judged():
    probe = record(captured("no-numpy.jsonl"))
    for check_id in CHECKS:
        results = by_method(judge(check_id, probe, baseline_overrides=LOW))
        assert results["dcp"]["status"] == "skip" and "numpy is not installed" in results["dcp"]["summary"]
        assert results["torch.save"]["status"] == "pass"


def test_what_keeps_the_benchmark_from_running_is_a_skip_or_an_error():
    missing = record("", rc=127, missing=True, stderr="mpirun: command not found\n")
    [result] = judge("storage.checkpoint.save", missing)
    assert result["status"] == "skip" and "mpirun: command not found" in result["summary"]
    [single] = judge("storage.checkpoint.load", None, nodes=("node1",))
    assert single["status"] == "skip" and "only one node (node1)" in single["summary"]
    [lost] = judge("storage.checkpoint.save", None)
    assert lost["status"] == "error" and "kept no output" in lost["summary"]
    cut = captured("glusterfs-2nodes-4ranks.jsonl")[:900]
    [truncated] = judge("storage.checkpoint.integrity", record(cut, rc=1, stderr="Traceback ...\nKilled\n"))
    assert truncated["status"] == "error" and "stops before the benchmark's done line" in truncated["summary"]
    assert "exit status 1: Killed" in truncated["summary"]


def test_a_run_past_its_time_limit_fails_as_a_hang_with_its_last_lines():
    cut = captured("glusterfs-2nodes-4ranks.jsonl")[:1500]
    [hung] = judge("storage.checkpoint.save", record(cut, rc=-9, timed_out=True))
    assert hung["status"] == "fail" and "did not finish within 300 s" in hung["summary"]
    assert hung["subject"] == "node1+node2" and hung["evidence"]["last_lines"]


# --------------------------------------------------------------------------------------- the node program


@pytest.fixture(scope="module")
def program():
    spec = importlib.util.spec_from_file_location("clustereval_checkpoint", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_program_writes_only_to_a_directory_given_or_a_shared_home(program, tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    chosen, found = program.discover([], {"no-such-fstype"})
    assert chosen is None and "not a shared filesystem" in program.why_none(found)
    chosen, found = program.discover(["/no/such/dir", str(tmp_path)], set())
    assert chosen == str(tmp_path) and found["candidates"][0]["exists"] is False
    assert program.mount_of(str(tmp_path))["target"].startswith("/")


def test_the_program_tells_the_storage_refusing_from_the_harness_failing(program):
    class CheckpointException(BaseException):  # DCP's: every rank's failures gathered
        def __init__(self, failures):
            super().__init__("CheckpointException")
            self.failures = failures

    assert program.classify(OSError(28, "No space left on device"), local=False)[0] == "storage"
    assert program.classify(RuntimeError("unexpected pos 4195328 vs 4195280"), local=True)[0] == "storage"
    assert program.classify(RuntimeError("Connection closed by peer"), local=False)[0] == "harness"
    kind, message = program.classify(CheckpointException({1: (OSError(5, "Input/output error"), None)}), local=False)
    assert kind == "storage" and message.startswith("ranks [1]: OSError")


def test_the_digest_is_sha256_of_the_tensor_bytes(program):
    torch = pytest.importorskip("torch")
    tensor = torch.arange(1024, dtype=torch.float32)
    raw = b"".join(int(v).to_bytes(4, "little") for v in tensor.view(torch.int32).tolist())
    assert program.digest(tensor) == hashlib.sha256(raw).hexdigest()


def test_the_probe_cleanup_removes_the_run_directory_it_names_and_nothing_else(tmp_path):
    mine, other = tmp_path / ".clustereval-checkpoint-r1_x", tmp_path / ".clustereval-checkpoint-r2"
    for folder in (mine / "dcp", other):
        folder.mkdir(parents=True)
    (mine / "dcp" / "__0_0.distcp").write_bytes(b"shard")
    cleanup = probe_catalogue.load()[PROBE]["cleanup"]
    env = {**os.environ, "CLUSTEREVAL_DIRS": f"/no/such/dir,{tmp_path}", "CLUSTEREVAL_RUN_TAG": "r1/x"}
    subprocess.run(["/bin/sh", "-c", cleanup], env=env, check=True, timeout=30)
    assert not mine.exists() and other.is_dir()
