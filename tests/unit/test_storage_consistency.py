"""Storage consistency across nodes (checks/storage_consistency.py, probe storage_consistency): every check's pass,
warn, fail, skip and error on reports built the way the probe's coordinator prints them, the parser on damaged
output, and the probe's node-side program itself run here — its coordinator, a second local worker and a "peer"
started through an ssh stand-in that runs the remote command on this machine, on a temporary directory.
"""

from __future__ import annotations

import ast
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from clustereval import checks, parsers, yamldata
from clustereval.checks import Context, probe_catalogue
from clustereval.parsers import _mutate
from clustereval.parsers._common import clean
from tests.helpers import RUN, judge_many

REPO = Path(__file__).resolve().parents[2]
PROBE = "storage_consistency"
CHECKS = {"flock": "storage.consistency.flock", "posix": "storage.consistency.posix_lock",
          "mkdir": "storage.consistency.mkdir_race", "colon": "storage.consistency.colon_names",
          "visibility": "storage.consistency.visibility"}
GLUSTER = {"fstype": "fuse.glusterfs", "source": "10.9.9.254:/shared", "target": "/home"}
SSHFS = {"fstype": "fuse.sshfs", "source": "root@127.9.9.254:/tmp/sim/shared", "target": "/home"}
NAMES = ["epoch:3.txt", "ckpt-2026-12-02T03:57:00+00:00.pt", "a:b:c", "run:1/rank:0.log"]


# ------------------------------------------------------------------------------------- reports as printed


def rounds(holder: str, contender: str, attempts: int = 100, leaked: int = 0, **extra: Any) -> dict[str, Any]:
    return {"holder": holder, "contender": contender, "attempts": attempts, "excluded": attempts - leaked,
            "not_excluded": leaked, "errors": {}, "holder_failed": {}, "not_released": 0,
            "release_wait_max_s": 0.01, **extra}


def locks(peers: list[str], leaked: int = 0, control_leaked: int = 0) -> dict[str, Any]:
    return {"attempts_requested": 200, "control": rounds("node1", "node1", 200, control_leaked),
            "pairs": {p: {"here_holds": rounds("node1", p, 100, leaked), "peer_holds": rounds(p, "node1", 100, leaked)}
                      for p in peers}, "duration_s": 3.1}


def one_way(writer: str, reader: str, new: float = 0.01, rewrite: float = 1.02) -> dict[str, Any]:
    return {"writer": writer, "reader": reader, "new_file": {"seen": True, "polls": 2, "visible_s": new},
            "rewrite": {"seen": True, "polls": 40, "visible_s": rewrite}}


def report(mount: dict[str, Any] | None = None, peers: tuple[str, ...] = ("node2",), leaked: int = 0,
           **directory: Any) -> dict[str, Any]:
    """The coordinator's report for one shared directory /home on node1 with ``peers`` that see it."""
    mount = mount or GLUSTER
    everyone = ["node1", *peers]
    entry: dict[str, Any] = {
        "path": "/home", "mount": mount, "workdir": "/home/.clustereval-consistency-r1-node1",
        "peers": {p: {"status": "ok", "hostname": p, "mount": mount, "token_seen_s": 0.01} for p in peers},
        "tests": {
            "flock": locks(list(peers), leaked), "posix": locks(list(peers), leaked),
            "mkdir": {"ranks_per_node": 8, "rounds_requested": 10, "rounds": 10, "calls": 8 * 10 * len(everyone),
                      "nodes": sorted(everyone), "failures": {}, "samples": [], "duration_s": 2.5},
            "colon": {"names": NAMES, "created_on": "node1", "created": {n: {"created": True} for n in NAMES},
                      "read": {n: {name: {"listed": True, "read_back": True} for name in NAMES} for n in everyone}},
            "visibility": {"bytes": 1048576, "wait_s": 30.0,
                           "pairs": {p: {"here_to_peer": one_way("node1", p), "peer_to_here": one_way(p, "node1")}
                                     for p in peers}},
        }}
    entry.update(directory)
    return {"format": "clustereval-storage-consistency/1", "self": "node1", "hostname": "node1", "python": "3.11",
            "tests": sorted(CHECKS), "launcher": "ssh", "settings": {"attempts": 200},
            "discovery": {"home": "/root", "requested": [], "candidates": []},
            "peers": {p: {"address": f"127.9.9.{i + 2}", "python": "3.11"} for i, p in enumerate(peers)},
            "directories": [entry], "duration_s": 12.0}


def record(data: dict[str, Any] | str, **fields: Any) -> dict[str, Any]:
    text = data if isinstance(data, str) else json.dumps(data)
    return {"name": PROBE, "cmd": "python3 - <<...", "rc": 0, "stdout": text, "stderr": "", "timed_out": False,
            "missing": False, "parser": "probe-storage-consistency", "artifact": "raw/node1/storage-consistency.json",
            **fields}


def judge_all(check_id: str, data: dict[str, Any] | str | None, coordinator: str = "node1",
              nodes: tuple[str, ...] = ("node1", "node2"), overrides: dict[str, Any] | None = None,
              **fields: Any) -> list[dict[str, Any]]:
    """Every result of ``check_id`` judged once for the cluster, the probe kept by the coordinator; each honours
    the result contract and no pass states a problem."""
    host_probes = {n: {} for n in nodes}
    if data is not None:
        host_probes[coordinator] = {PROBE: record(data, **fields)}
    ctx = Context(subject="_cluster", host_probes=host_probes, fleet={n: {} for n in nodes},
                  options={"coordinator": coordinator if data is not None else "",
                           "baseline_overrides": overrides or {}})
    return judge_many(check_id, ctx)


def one(check_id: str, data: Any, **kwargs: Any) -> dict[str, Any]:
    results = judge_all(check_id, data, **kwargs)
    assert len(results) == 1, [(r["subject"], r["status"], r["summary"]) for r in results]
    return results[0]


# ---------------------------------------------------------------------------------------------- locks


@pytest.mark.parametrize("kind", ["flock", "posix"])
def test_locks_that_exclude_across_nodes_pass_and_name_the_pair_and_the_control(kind):
    result = one(CHECKS[kind], report())
    assert result["status"] == "pass" and result["subject"] == "node1+node2" and result["value"] == 0
    assert result["params"] == {"directory": "/home"}
    assert "200 of 200 cross-node attempts refused" in result["summary"]
    assert "two processes on node1 exclude each other (200 of 200" in result["summary"]
    assert "fuse.glusterfs" in result["summary"] and result["evidence"]["nodes"] == ["node1", "node2"]
    assert result["artifacts"] == ["raw/node1/storage-consistency.json"]


@pytest.mark.parametrize("kind", ["flock", "posix"])
def test_locks_that_stay_on_their_node_fail_with_counts_while_the_control_passes(kind):
    results = judge_all(CHECKS[kind], report(SSHFS, peers=("node2", "node3"), leaked=100),
                        nodes=("node1", "node2", "node3"))
    assert [(r["subject"], r["status"], r["value"]) for r in results] == [("node1+node2", "fail", 200),
                                                                          ("node1+node3", "fail", 200)]
    summary = results[0]["summary"]
    assert "do not exclude across nodes" in summary and "fuse.sshfs" in summary
    assert "node2 took the lock node1 held in 100 of 100 attempts" in summary
    assert "node1 took the lock node2 held in 100 of 100 attempts" in summary
    assert "two processes on node1 exclude each other" in summary


def test_a_failing_same_node_control_is_the_harnesss_error_not_the_filesystems():
    data = report(SSHFS, leaked=100)
    data["directories"][0]["tests"]["flock"]["control"] = rounds("node1", "node1", 200, leaked=200)
    result = one(CHECKS["flock"], data)
    assert result["status"] == "error" and "same-node control failed too" in result["summary"]
    assert "could not test" in result["summary"]


def test_locks_that_cannot_be_taken_at_all_fail():
    data = report()
    control = rounds("node1", "node1", 0)
    control["holder_failed"] = {"ENOLCK": 3}
    data["directories"][0]["tests"]["posix"] = {"attempts_requested": 200, "control": control}
    result = one(CHECKS["posix"], data)
    assert result["status"] == "fail" and "cannot be taken on node1 at all: ENOLCK (3x)" in result["summary"]


def test_lock_attempts_refused_with_errors_or_released_slowly_warn():
    data = report()
    pair = data["directories"][0]["tests"]["flock"]["pairs"]["node2"]
    pair["here_holds"].update(excluded=97, errors={"EIO": 3})
    result = one(CHECKS["flock"], data)
    assert result["status"] == "warn" and "node2: EIO (3x)" in result["summary"]
    data = report()
    data["directories"][0]["tests"]["flock"]["pairs"]["node2"]["peer_holds"]["release_wait_max_s"] = 2.5
    result = one(CHECKS["flock"], data)
    assert result["status"] == "warn" and "took up to 2.5 s" in result["summary"]


def test_a_non_blocking_attempt_that_hangs_or_a_lock_never_released_fails():
    data = report()
    data["directories"][0]["tests"]["flock"]["pairs"]["node2"] = {
        "here_holds": rounds("node1", "node2", 3, hung="a non-blocking attempt by node2 gave no answer within 15 s"),
        "aborted": "the worker on node2 gave no answer within 15 s"}
    result = one(CHECKS["flock"], data)
    assert result["status"] == "fail" and "gave no answer within 15 s while node1 held the lock" in result["summary"]
    data = report()
    data["directories"][0]["tests"]["posix"]["pairs"]["node2"]["here_holds"]["not_released"] = 4
    result = one(CHECKS["posix"], data)
    assert result["status"] == "fail" and "still held for the other" in result["summary"]


def test_a_peer_that_cannot_be_reached_is_an_error_and_one_that_does_not_share_the_directory_a_skip():
    data = report(peers=("node2",))
    data["directories"][0]["peers"]["node3"] = {"status": "unreachable",
                                                "detail": "ssh: exited with status 255: Permission denied (publickey)."}
    data["directories"][0]["peers"]["node4"] = {"status": "not_shared", "detail": "ENOENT", "dir_exists": True,
                                                "mount": {"fstype": "ext4", "source": "/dev/vda", "target": "/"}}
    results = {r["subject"]: r for r in judge_all(CHECKS["flock"], data, nodes=("node1", "node2", "node3", "node4"))}
    assert results["node1+node2"]["status"] == "pass"
    assert results["node1+node3"]["status"] == "error" and "Permission denied" in results["node1+node3"]["summary"]
    assert "audit.access.ssh_between_nodes" in results["node1+node3"]["summary"]
    assert results["node1+node4"]["status"] == "skip" and "ext4 on /" in results["node1+node4"]["summary"]


@pytest.mark.parametrize("check_id", sorted(CHECKS.values()))
def test_one_node_only_skips_and_no_shared_filesystem_skips_saying_how_to_name_one(check_id):
    result = one(check_id, report(peers=()), nodes=("node1",))
    if check_id == CHECKS["colon"]:  # names are created, listed and read back on the one node too
        assert result["status"] == "pass" and "the only node" in result["summary"]
    else:
        assert result["status"] == "skip" and "only one node" in result["summary"]
    data = report()
    data["directories"] = []
    data["discovery"]["candidates"] = [
        {"path": "/root", "exists": True, "mount": {"fstype": "ext4", "target": "/"}, "shared": False},
        {"path": "/home", "exists": True, "mount": {"fstype": "ext4", "target": "/"}, "shared": False}]
    result = one(check_id, data)
    assert result["status"] == "skip" and result["subject"] == "_cluster"
    assert "/root is on ext4" in result["summary"] and "clustereval_storage_shared_dirs" in result["summary"]


@pytest.mark.parametrize("check_id", sorted(CHECKS.values()))
def test_the_harness_failing_is_an_error(check_id):
    assert one(check_id, report(), timed_out=True)["status"] == "error"
    crashed = one(check_id, report(), rc=1, stderr="Traceback (most recent call last):\nKeyError: 'x'")
    assert crashed["status"] == "error" and "KeyError" in crashed["summary"]
    assert one(check_id, "Traceback: nothing printed")["status"] == "error"
    assert one(check_id, report(), missing=True)["status"] == "skip"
    gone = one(check_id, None)
    assert gone["status"] == "skip" and "ran on no node" in gone["summary"]
    data = report()
    test = CHECKS_TEST[check_id]
    data["directories"][0]["tests"][test] = {"harness_error": "a worker exited with status 1: boom"}
    assert {r["status"] for r in judge_all(check_id, data)} == {"error"}
    data["directories"][0]["tests"][test] = {"not_run": "the time limit was reached"}
    assert {r["status"] for r in judge_all(check_id, data)} == {"error"}
    # the coordinator chosen kept nothing (it failed during the run): the harness's, never a skip
    ctx = Context(subject="_cluster", host_probes={"node1": {}, "node2": {}}, options={"coordinator": "node1"})
    lost = checks.evaluate_many(check_id, ctx, RUN)
    assert [r["status"] for r in lost] == ["error"] and "kept no output" in lost[0]["summary"]


CHECKS_TEST = {check_id: test for test, check_id in CHECKS.items()}


# ---------------------------------------------------------------------------------------------- mkdir


def test_concurrent_mkdir_that_always_succeeds_passes_over_every_node():
    result = one(CHECKS["mkdir"], report(peers=("node2", "node3")), nodes=("node1", "node2", "node3"))
    assert result["status"] == "pass" and result["subject"] == "node1+node2+node3" and result["value"] == 0
    assert "all 240 concurrent `mkdir -p` calls" in result["summary"] and "node1, node2 and node3" in result["summary"]


def test_mkdir_failing_with_eexist_fails_with_counts_per_node():
    data = report(peers=("node2", "node3"))
    data["directories"][0]["tests"]["mkdir"].update(
        failures={"EEXIST": {"node2": 7, "node3": 5}, "ESTALE": {"node3": 1}},
        samples=[{"node": "node2", "round": 3, "stderr": "mkdir: cannot create directory '/home/x/a': File exists"}])
    result = one(CHECKS["mkdir"], data, nodes=("node1", "node2", "node3"))
    assert result["status"] == "fail" and result["value"] == 13
    assert "12 of 240 concurrent `mkdir -p` calls of one path failed with EEXIST" in result["summary"]
    assert "EEXIST 12 (node2: 7, node3: 5)" in result["summary"] and "ESTALE 1 (node3: 1)" in result["summary"]


def test_mkdir_with_a_failed_worker_or_no_call_is_an_error():
    data = report()
    data["directories"][0]["tests"]["mkdir"]["worker_errors"] = ["node2: OSError: [Errno 24] Too many open files"]
    assert one(CHECKS["mkdir"], data)["status"] == "error"
    data = report()
    data["directories"][0]["tests"]["mkdir"]["calls"] = 0
    assert one(CHECKS["mkdir"], data)["status"] == "error"


def test_mkdir_with_no_peer_seeing_the_directory_skips():
    data = report(peers=())
    data["directories"][0]["peers"]["node2"] = {"status": "not_shared", "detail": "ENOENT"}
    data["directories"][0]["tests"]["mkdir"]["nodes"] = ["node1"]
    result = one(CHECKS["mkdir"], data)
    assert result["status"] == "skip" and "no other node sees the directory" in result["summary"]


# ---------------------------------------------------------------------------------------------- names


def test_names_with_colons_created_listed_and_read_back_everywhere_pass():
    result = one(CHECKS["colon"], report(peers=("node2", "node3")), nodes=("node1", "node2", "node3"))
    assert result["status"] == "pass" and result["subject"] == "node1+node2+node3"
    assert "4 names with ':'" in result["summary"] and "node1, node2 and node3" in result["summary"]


def test_names_refused_or_not_seen_on_another_node_fail():
    data = report(mount={"fstype": "cifs", "source": "//nas/home", "target": "/home"})
    colon = data["directories"][0]["tests"]["colon"]
    colon["created"]["epoch:3.txt"] = {"created": False, "error": "EINVAL"}
    colon["read"] = {n: {k: v for k, v in r.items() if k != "epoch:3.txt"} for n, r in colon["read"].items()}
    colon["read"]["node2"]["a:b:c"] = {"listed": False, "read_back": False, "read_error": "ENOENT"}
    result = one(CHECKS["colon"], data)
    assert result["status"] == "fail" and result["value"] == 2
    assert "node1 could not create epoch:3.txt (EINVAL)" in result["summary"]
    assert "node2 does not list a:b:c" in result["summary"]


def test_names_with_a_failed_reader_is_an_error():
    data = report()
    data["directories"][0]["tests"]["colon"]["read"]["node2"] = {"failed": "OSError: boom"}
    assert one(CHECKS["colon"], data)["status"] == "error"


# ---------------------------------------------------------------------------------------------- visibility


def test_visibility_within_the_limit_passes_with_the_worst_time_as_value():
    result = one(CHECKS["visibility"], report())
    assert result["status"] == "pass" and result["value"] == 1.02 and result["unit"] == "s"
    assert result["expected"]["max"] == 3.0 and result["expected"]["fail_max"] == 30.0
    assert "read back byte-identical" in result["summary"] and "node1 -> node2 rewrite 1.02 s" in result["summary"]


def test_visibility_slower_than_the_limits_warns_then_fails_and_overrides_apply():
    data = report()
    data["directories"][0]["tests"]["visibility"]["pairs"]["node2"]["peer_to_here"]["rewrite"]["visible_s"] = 4.5
    result = one(CHECKS["visibility"], data)
    assert result["status"] == "warn" and "4.5 s" in result["summary"] and "node2 -> node1 rewrite" in result["summary"]
    assert one(CHECKS["visibility"], data, overrides={"storage.consistency.visibility": {"warn": 5}})["status"] == \
        "pass"
    data["directories"][0]["tests"]["visibility"]["pairs"]["node2"]["peer_to_here"]["rewrite"]["visible_s"] = 31.0
    assert one(CHECKS["visibility"], data)["status"] == "fail"


def test_a_file_never_seen_or_seen_with_other_bytes_fails():
    data = report()
    pair = data["directories"][0]["tests"]["visibility"]["pairs"]["node2"]
    pair["here_to_peer"]["new_file"] = {"seen": False, "polls": 600, "last": {"exists": False, "error": "ENOENT"}}
    del pair["here_to_peer"]["rewrite"]
    result = one(CHECKS["visibility"], data)
    assert result["status"] == "fail" and "never appeared on node2 (ENOENT)" in result["summary"]
    data = report()
    pair = data["directories"][0]["tests"]["visibility"]["pairs"]["node2"]
    pair["peer_to_here"]["rewrite"] = {"seen": False, "polls": 600,
                                       "last": {"exists": True, "size": 1048576, "sha256": "ab" * 32}}
    result = one(CHECKS["visibility"], data)
    assert result["status"] == "fail" and "node1 kept reading other bytes" in result["summary"]


def test_visibility_with_nothing_measured_is_an_error():
    data = report()
    data["directories"][0]["tests"]["visibility"]["pairs"]["node2"] = {}
    assert one(CHECKS["visibility"], data)["status"] == "error"


# ---------------------------------------------------------------------------------------------- the parser


def test_the_parser_reads_the_report_and_refuses_what_is_not_one():
    parsed = parsers.parse("probe-storage-consistency", json.dumps(report()))
    assert parsed["directories"][0]["path"] == "/home" and parsed["complete"] and parsed["tool"]
    for bad in ("", "{", json.dumps({"format": "other"}), json.dumps({**report(), "directories": {}}),
                json.dumps({**report(), "directories": [{"path": "/home"}]})):
        with pytest.raises(parsers.ParseError):
            parsers.parse("probe-storage-consistency", bad)


@pytest.mark.parametrize("mutation", sorted(_mutate.MUTATIONS))
def test_the_parser_on_damaged_output_gives_a_result_or_a_parse_error(mutation):
    sample = json.dumps(report(peers=("node2", "node3")), indent=1).encode()
    for seed in range(5):
        try:
            out = parsers.get("probe-storage-consistency")(clean(_mutate.MUTATIONS[mutation](sample,
                                                                                              random.Random(seed))))
        except parsers.ParseError as exc:
            assert str(exc).strip()
            continue
        json.dumps(out, allow_nan=False)
        assert {"tool", "format", "complete", "warnings"} <= set(out)


# ---------------------------------------------------------------------------------- the probe and the role


def node_program() -> tuple[str, str]:
    """(the coordinator's Python, the worker's) out of the probe catalogue's command."""
    cmd = probe_catalogue.load()[PROBE]["cmd"]
    lines = cmd.splitlines()
    assert lines[0].startswith("exec python3 - <<'CLUSTEREVAL_PY'") and lines[-1] == "CLUSTEREVAL_PY"
    coordinator = "\n".join(lines[1:-1]) + "\n"
    worker = coordinator.split("WORKER = r'''", 1)[1].split("'''", 1)[0]
    return coordinator, worker


def test_the_node_side_is_standard_library_python_3_6():
    for source in node_program():
        tree = ast.parse(source, feature_version=(3, 6))
        imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
                    for alias in node.names}
        imported |= {node.module.split(".")[0] for node in ast.walk(tree)
                     if isinstance(node, ast.ImportFrom) and node.module}
        assert imported <= set(sys.stdlib_module_names), imported - set(sys.stdlib_module_names)
        # nothing newer than 3.6 in what the node calls
        assert "capture_output" not in source and "text=True" not in source


def test_the_filesystem_types_the_role_discovers_are_the_audits_shared_ones():
    listed = yaml.safe_load((REPO / "roles/storage/vars/main.yml").read_text())[
        "__clustereval_storage_shared_fstype_list"]
    audit = yamldata.load((REPO / "src/clustereval/baselines/sharedfs.yml").read_text())["shared_fstypes"]
    assert listed == [t for t in audit if t != "autofs"] + ["virtiofs"]


def test_the_role_names_every_check_of_the_catalogue_entry_file():
    tasks = yaml.safe_load((REPO / "roles/storage/tasks/consistency.yml").read_text())
    catalogue = yamldata.load((REPO / "src/clustereval/checks/catalogue.d/storage_consistency.yml").read_text())
    assert tasks[0]["vars"]["__clustereval_storage_consistency_checks"] == [c["id"] for c in catalogue["checks"]]
    assert sorted(CHECKS.values()) == sorted(c["id"] for c in catalogue["checks"])


FAKE_SSH = """#!/bin/sh
# ssh stand-in: drops ssh's options and the host and runs the remote command on this machine
while [ $# -gt 1 ]; do
  case "$1" in -o|-p|-i|-l|-F) shift 2;; -*) shift;; *) shift; break;; esac
done
exec sh -c "$1"
"""


def run_node_side(tmp_path: Path, tests: list[str], ssh: str | None = None, **settings: Any) -> dict[str, Any]:
    """The probe's command as the probe runner runs it (sh -c, parameters in the environment), the peer node2
    reached through the ssh stand-in; returns the parsed report."""
    shared = tmp_path / "shared"
    shared.mkdir(exist_ok=True)
    fake = tmp_path / "fake-ssh"
    fake.write_text(FAKE_SSH)
    fake.chmod(0o755)
    values = {"dirs": str(shared), "peers": "node1=127.0.0.1,node2=127.0.0.2", "self": "node1", "tests": tests,
              "shared_fstypes": "nfs,fuse.glusterfs", "attempts": 20, "mkdir_ranks": 3, "mkdir_rounds": 2,
              "visibility_bytes": 65536, "visibility_wait_s": 5, "launcher": "ssh", "ssh": ssh or str(fake),
              "python": sys.executable, "run_tag": "r1-node1", "time_limit_s": 120, **settings}
    probe = probe_catalogue.with_params([probe_catalogue.ready(probe_catalogue.load()[PROBE])], values)[0]
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    env.update({f"CLUSTEREVAL_{k.upper()}": ",".join(v) if isinstance(v, list) else str(v)
                for k, v in probe["params"].items()})
    done = subprocess.run(["/bin/sh", "-c", probe["cmd"]], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert sorted(p.name for p in shared.iterdir()) == [], "the run's directory outlived the run"
    assert not list(tmp_path.glob("clustereval-consistency-*.dirs"))
    return json.loads(done.stdout)


def judge_output(data: dict[str, Any]) -> dict[str, list[tuple[str, str]]]:
    return {check_id: [(r["subject"], r["status"]) for r in judge_all(check_id, data)] for check_id in CHECKS.values()}


def test_the_node_side_run_here_passes_every_check_on_one_filesystem(tmp_path):
    data = run_node_side(tmp_path, sorted(CHECKS.values()))
    entry = data["directories"][0]
    assert entry["peers"]["node2"]["status"] == "ok" and data["peers"]["node2"]["address"] == "127.0.0.2"
    assert entry["tests"]["flock"]["control"]["excluded"] == 20
    assert entry["tests"]["posix"]["pairs"]["node2"]["peer_holds"]["excluded"] == 10
    assert entry["tests"]["mkdir"]["calls"] == 2 * 3 * 2
    verdicts = judge_output(data)
    assert verdicts == {
        CHECKS["flock"]: [("node1+node2", "pass")], CHECKS["posix"]: [("node1+node2", "pass")],
        CHECKS["mkdir"]: [("node1+node2", "pass")], CHECKS["colon"]: [("node1+node2", "pass")],
        CHECKS["visibility"]: [("node1+node2", "pass")]}


def test_the_node_side_runs_only_the_selected_tests(tmp_path):
    data = run_node_side(tmp_path, [CHECKS["colon"]])
    assert data["tests"] == ["colon"] and set(data["directories"][0]["tests"]) == {"colon"}


def test_a_peer_ssh_cannot_reach_is_reported_unreachable_and_judged_an_error(tmp_path):
    refuse = tmp_path / "refuse-ssh"
    refuse.write_text("#!/bin/sh\necho 'root@127.0.0.2: Permission denied (publickey).' >&2\nexit 255\n")
    refuse.chmod(0o755)
    data = run_node_side(tmp_path, [CHECKS["flock"], CHECKS["mkdir"]], ssh=str(refuse))
    assert data["directories"][0]["peers"]["node2"]["status"] == "unreachable"
    flock = judge_all(CHECKS["flock"], data)
    assert [(r["subject"], r["status"]) for r in flock] == [("node1+node2", "error")]
    assert "Permission denied (publickey)" in flock[0]["summary"]


def test_no_shared_filesystem_found_is_reported_for_the_skip(tmp_path):
    data = run_node_side(tmp_path, sorted(CHECKS.values()), dirs="", shared_fstypes="fuse.nothing")
    assert data["directories"] == [] and data["discovery"]["candidates"]
    assert {r["status"] for r in judge_all(CHECKS["flock"], data)} == {"skip"}


def test_a_signalled_coordinator_removes_its_directory_and_the_cleanup_what_is_left(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    fake = tmp_path / "fake-ssh"
    fake.write_text(FAKE_SSH)
    fake.chmod(0o755)
    values = {"dirs": str(shared), "peers": "node2=x", "self": "node1", "tests": CHECKS["flock"], "attempts": 100000,
              "ssh": str(fake), "python": sys.executable, "run_tag": "r2-node1", "time_limit_s": 600}
    probe = probe_catalogue.with_params([probe_catalogue.ready(probe_catalogue.load()[PROBE])], values)[0]
    env = {**os.environ, "TMPDIR": str(tmp_path),
           **{f"CLUSTEREVAL_{k.upper()}": str(v) for k, v in probe["params"].items() if v is not None}}
    proc = subprocess.Popen(["/bin/sh", "-c", probe["cmd"]], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    workdir = shared / ".clustereval-consistency-r2-node1"
    deadline = time.monotonic() + 30
    while not (workdir / "lock-flock-control").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert workdir.exists()
    os.killpg(proc.pid, signal.SIGTERM)  # as the probe runner stops an abandoned collection
    proc.communicate(timeout=30)
    assert not workdir.exists()
    # a coordinator killed outright leaves its directory listed: the probe's clean-up removes it
    workdir.mkdir()
    (workdir / "left").write_text("x")
    listing = tmp_path / "clustereval-consistency-r2-node1.dirs"
    listing.write_text(f"{workdir}\n{tmp_path}\n")  # only the run's own directory is ever removed
    subprocess.run(["/bin/sh", "-c", probe["cleanup"]], env=env, check=True)
    assert not workdir.exists() and not listing.exists() and tmp_path.exists()

