"""Small-file metadata: clustereval's mdtest-like benchmark (roles/storage/files/clustereval_mdbench.py) run for real
through the storage_tier_metadata probe, its output as the simulated cluster printed it (tests/unit/data/
storage_metadata/: the reference's GlusterFS home, the sharedfs-slow-metadata profile's, a tmpfs out of inodes), and
every check's pass, warn, fail, skip and error."""

from __future__ import annotations

import ast
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from clustereval import checks, parsers, yamldata
from clustereval.checks import catalogue, probe_catalogue, storage_metadata
from clustereval.parsers import probe_storage_tiers
from clustereval.results import problems
from clustereval.sim import cluster, sharedfs
from clustereval.sim.profile import load_profile, node_settings
from tests.helpers import PROBLEM_WORDS, RUN, probe

REPO = Path(__file__).resolve().parents[2]
DATA = Path(__file__).parent / "data" / "storage_metadata"
SCRIPT = REPO / "roles" / "storage" / "files" / "clustereval_mdbench.py"
PROBE = storage_metadata.PROBE
RATES = list(storage_metadata.RATES)
CHECKS = [*RATES, "storage.metadata.tail", "storage.metadata.errors"]


def capture(name: str) -> str:
    return (DATA / name).read_text()


REFERENCE = "sim-reference-glusterfs-node1.txt"
SLOW = "sim-slow-metadata-glusterfs-node1.txt"
ENOSPC = "local-tmpfs-120-inodes-enospc.txt"


def judge(check_id: str, stdout: str, **fields: Any) -> dict[str, dict[str, Any]]:
    """The check's results on this probe output, by tier, each held to the result contract (and no pass stating
    a problem); a result without a tier (the whole probe's skip or error) under ``None``."""
    ctx = checks.Context(subject="node1", probes=probe(PROBE, stdout, **fields))
    out = {}
    for result in checks.evaluate_many(check_id, ctx, RUN):
        assert problems(result) == [], problems(result)
        assert not (result["status"] == "pass" and PROBLEM_WORDS.search(result["summary"])), result["summary"]
        out[(result.get("params") or {}).get("tier")] = result
    return out


def edit(text: str, tier: str, change) -> str:
    """The probe output with one tier's benchmark report changed by ``change(report)``."""
    head = f"=== tier {tier} "
    start = text.index(head)
    end = text.find("=== tier ", start + 1)
    end = len(text) if end < 0 else end
    section = text[start:end]
    body_start, body_end = section.index("{"), section.index("mdbench-exit: ")
    report = json.loads(section[body_start:body_end])
    change(report)
    section = section[:body_start] + json.dumps(report, indent=1) + "\n" + section[body_end:]
    return text[:start] + section + text[end:]


def phase_of(report: dict[str, Any], name: str) -> dict[str, Any]:
    return next(p for p in report["phases"] if p["phase"] == name)


# ---------------------------------------------------------------------------------- the benchmark, for real


def run_probe(tmp_path: Path, key: str = "cmd", **settings: Any) -> subprocess.CompletedProcess[str]:
    """The probe's command (or its clean-up) as the probe runner runs it: sh -c, the parameters in the
    environment; home and an extra directory under tmp_path, a scratch directory that does not exist."""
    (tmp_path / "home").mkdir(exist_ok=True)
    values = {"scratch_dir": str(tmp_path / "no-scratch"), "extra_dirs": "", "shared_fstypes": "nfs,fuse.glusterfs",
              "run_tag": "r1-node1", "script": str(SCRIPT), "clients": 2, "files": 40, "dirs": 6,
              "file_bytes": 4096, "phase_limit_s": 10, **settings}
    item = probe_catalogue.with_params([probe_catalogue.ready(probe_catalogue.load()[PROBE])], values)[0]
    env = {**os.environ, "HOME": str(tmp_path / "home"), "TMPDIR": str(tmp_path),
           **{f"CLUSTEREVAL_{k.upper()}": str(v) for k, v in item["params"].items()}}
    return subprocess.run(["/bin/sh", "-c", item[key]], env=env, capture_output=True, text=True, timeout=120)


def test_the_probe_runs_the_benchmark_on_every_tier_and_leaves_nothing_behind(tmp_path):
    done = run_probe(tmp_path, extra_dirs=str(tmp_path / "data"))
    assert done.returncode == 0, done.stderr[-2000:]
    tiers = {t["name"]: t for t in parsers.parse("probe-storage-metadata", done.stdout)["tiers"]}
    home = tiers["home"]
    assert home["state"] == "measured" and home["bench_exit"] == 0 and home["kind"] != "network"
    assert list(home["phases"]) == ["mkdir", "create", "stat", "read", "rename", "remove", "rmdir"]
    assert home["phases"]["create"]["ops"] == home["phases"]["create"]["planned"] == 80
    assert home["phases"]["mkdir"]["planned"] == home["phases"]["rmdir"]["ops"] == 12
    assert all(p["ops_per_s"] > 0 and p["p50_us"] <= p["p99_us"] <= p["max_us"] for p in home["phases"].values())
    assert home["settings"] == {"clients": 2, "files": 40, "dirs": 6, "file_bytes": 4096, "phase_limit_s": 10.0}
    assert tiers["scratch"]["state"] == "missing" and tiers["data"]["state"] == "missing"
    assert tiers["shm"]["state"] in ("measured", "same_filesystem")
    assert list((tmp_path / "home").iterdir()) == []
    assert not [p for p in Path("/dev/shm").glob("clustereval-metadata.r1-node1*")]
    assert not list(tmp_path.glob("clustereval-shared.*"))


def test_the_clean_up_removes_what_a_killed_run_left(tmp_path):
    left = tmp_path / "home" / "clustereval-metadata.r1-node1" / "client.0" / "files"
    left.mkdir(parents=True)
    (left / "f0000001").write_text("x")
    other = tmp_path / "home" / "clustereval-metadata.another-run"
    other.mkdir()
    assert run_probe(tmp_path, key="cleanup").returncode == 0
    assert sorted(p.name for p in (tmp_path / "home").iterdir()) == ["clustereval-metadata.another-run"]


def test_a_stopped_benchmark_removes_its_files(tmp_path):
    env = {**os.environ, "CLUSTEREVAL_CLIENTS": "2", "CLUSTEREVAL_FILES": "200000", "CLUSTEREVAL_DIRS": "0",
           "CLUSTEREVAL_PHASE_LIMIT_S": "60"}
    proc = subprocess.Popen([sys.executable, str(SCRIPT), str(tmp_path)], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and len(list(tmp_path.glob("client.*/files/f*"))) < 100:
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGTERM)  # as the probe runner stops a probe: its whole process group
    proc.communicate(timeout=30)
    assert proc.returncode == 128 + signal.SIGTERM
    assert list(tmp_path.iterdir()) == []


def test_a_bad_setting_is_refused_with_its_name(tmp_path):
    done = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path)], env={**os.environ, "CLUSTEREVAL_CLIENTS": "0"},
                          capture_output=True, text=True, timeout=30)
    assert done.returncode != 0 and "CLUSTEREVAL_CLIENTS must be at least 1" in done.stderr


def test_the_benchmark_is_standard_library_python_3_6():
    source = SCRIPT.read_text()
    tree = ast.parse(source, feature_version=(3, 6))
    imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
                for alias in node.names}
    imported |= {node.module.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert imported <= set(sys.stdlib_module_names)
    assert "capture_output" not in source and ":=" not in source


def test_the_fio_matrix_and_the_metadata_probe_share_one_tier_discovery():
    probes = probe_catalogue.load()
    matrix, metadata = probes["storage_tier_matrix"], probes[PROBE]
    discovery = matrix["cmd"][:matrix["cmd"].index("fio_matrix() {")]
    assert "each_tier() {" in discovery and "tier_dirs() {" in discovery
    assert metadata["cmd"].startswith(discovery) and metadata["cleanup"].startswith(discovery)
    assert matrix["cmd"].rstrip().endswith("each_tier fio_matrix clustereval-fio-tiers")
    assert metadata["cmd"].rstrip().endswith("each_tier metadata_bench clustereval-metadata")
    # both parsers read the discovery's lines with the same functions
    text = capture(REFERENCE)
    named = [(name, path) for name, path, _ in probe_storage_tiers.sections(text)]
    assert named == [("home", "/root"), ("scratch", "/sim/scratch"), ("shm", "/dev/shm"), ("shared_home", "/home")]


# ------------------------------------------------------------------------------------------------ the parser


def test_the_simulated_clusters_output_is_read_tier_by_tier():
    out = parsers.parse("probe-storage-metadata", capture(REFERENCE))
    assert out["complete"] and out["skip"] is None and out["harness_error"] is None
    tiers = {t["name"]: t for t in out["tiers"]}
    shared = tiers["shared_home"]
    assert (shared["state"], shared["kind"], shared["shared"], shared["fstype"]) == (
        "measured", "network", True, "fuse.glusterfs")
    assert shared["phases"]["create"]["ops"] == 600 and shared["phases"]["create"]["errors"] == {}
    assert tiers["shm"]["kind"] == "memory" and tiers["scratch"]["kind"] != "network"
    slow = {t["name"]: t for t in parsers.parse("probe-storage-metadata", capture(SLOW))["tiers"]}["shared_home"]
    assert slow["phases"]["create"]["cut_short"] and slow["phases"]["create"]["p50_us"] > 250_000


def test_truncated_or_foreign_output_is_a_tier_state_or_a_parse_error():
    text = capture(REFERENCE)
    cut = text[:text.index('"phase": "rename"', text.index("=== tier shared_home"))]
    out = parsers.parse("probe-storage-metadata", cut)
    shared = out["tiers"][-1]
    assert not out["complete"] and shared["state"] == "truncated" and "ends before" in shared["reason"]
    no_json = "=== tier home /root\nmount: / /dev/vda ext4 1 1\nTraceback (most recent call last):\nmdbench-exit: 1\n"
    tier = parsers.parse("probe-storage-metadata", no_json)["tiers"][0]
    assert tier["state"] == "bench_failed" and "exit status 1" in tier["reason"]
    foreign = '=== tier home /root\nmount: / /dev/vda ext4 1 1\n{"format": "other/1"}\nmdbench-exit: 0\n'
    assert parsers.parse("probe-storage-metadata", foreign)["tiers"][0]["state"] == "bench_failed"
    wrong = edit(text, "shm", lambda r: phase_of(r, "stat").update(ops="many"))
    shm = {t["name"]: t for t in parsers.parse("probe-storage-metadata", wrong)["tiers"]}["shm"]
    assert shm["state"] == "bench_failed" and "phase stat ops" in shm["reason"]
    for garbage in ("", "python3: command not found\n", "\x00\x01"):
        with pytest.raises(parsers.ParseError):
            parsers.parse("probe-storage-metadata", garbage)
    assert parsers.parse("probe-storage-metadata", "clustereval-skip: no python3\n")["skip"] == "no python3"


# ------------------------------------------------------------------------------------------------ the checks


def test_the_reference_passes_every_check_on_every_tier():
    for check_id in CHECKS:
        results = judge(check_id, capture(REFERENCE))
        assert set(results) == {"home", "scratch", "shm", "shared_home"}
        assert {r["status"] for r in results.values()} == {"pass"}, (check_id, results)
    create = judge("storage.metadata.create", capture(REFERENCE))["shared_home"]
    assert create["unit"] == "ops/s" and create["expected"]["matched"] == "metadata-network"
    assert create["expected"]["basis"] == "fact metadata_clients=2" and create["expected"]["min"] == 40
    assert "file creates" in create["summary"] and "shared_home (/home, fuse.glusterfs, shared)" in create["summary"]
    assert judge("storage.metadata.create", capture(REFERENCE))["shm"]["expected"]["matched"] == "metadata-memory"


def test_a_metadata_starved_shared_home_fails_every_rate_on_that_tier_alone():
    for check_id in RATES:
        results = judge(check_id, capture(SLOW))
        assert results["shared_home"]["status"] == "fail", results["shared_home"]["summary"]
        assert results["shared_home"]["summary"].startswith("slow metadata: ")
        assert {r["status"] for tier, r in results.items() if tier != "shared_home"} == {"pass"}
    stat = judge("storage.metadata.stat", capture(SLOW))["shared_home"]
    assert "below the failure level 30/s" in stat["summary"] and "`import torch`" in stat["summary"]
    assert stat["evidence"]["import_torch_stats_s"] > 600
    create = judge("storage.metadata.create", capture(SLOW))["shared_home"]
    assert "the 5.0 s phase limit ended it after" in create["summary"]
    # the benchmark's tail there: p99 about half a second, warned
    assert judge("storage.metadata.tail", capture(SLOW))["shared_home"]["status"] == "warn"


def test_a_rate_between_the_levels_warns():
    text = edit(capture(REFERENCE), "shared_home", lambda r: phase_of(r, "create").update(ops_per_s=25.0))
    result = judge("storage.metadata.create", text)["shared_home"]
    assert result["status"] == "warn" and result["value"] == 25.0 and "below the expected 40/s" in result["summary"]


def test_every_operation_failing_is_a_fail_naming_the_errors():
    def all_failed(report):
        phase_of(report, "rename").update(ops=0, ops_per_s=0.0, errors={"EXDEV": 600})
    result = judge("storage.metadata.rename", edit(capture(REFERENCE), "home", all_failed))["home"]
    assert result["status"] == "fail" and "every one of 600 renames failed" in result["summary"]
    assert "EXDEV x600" in result["summary"]


def test_what_the_benchmark_could_not_measure_is_skipped_or_an_error():
    text = capture(REFERENCE)
    skipped = judge("storage.metadata.create", "clustereval-skip: no python3 on the node (needs 3.6+)\n")
    assert skipped[None]["status"] == "skip" and "no python3" in skipped[None]["summary"]
    harness = judge("storage.metadata.stat", "clustereval-error: the benchmark /tmp/x.py is not on the node\n")
    assert harness[None]["status"] == "error" and "not on the node" in harness[None]["summary"]
    missing = "=== tier data /data\nmissing: no such directory\n" + text
    assert judge("storage.metadata.mkdir", missing)["data"]["status"] == "skip"
    nothing = "=== tier home /root\nunwritable: cannot create /root/x\n"
    assert judge("storage.metadata.create", nothing)[None]["status"] == "skip"
    none_made = edit(text, "home", lambda r: phase_of(r, "stat").update(planned=0, attempted=0, ops=0,
                                                                        ops_per_s=None))
    assert judge("storage.metadata.stat", none_made)["home"]["status"] == "skip"
    cut = text[:text.index('"phase": "rename"', text.index("=== tier shared_home"))]
    for check_id in CHECKS:
        results = judge(check_id, cut)
        assert results["shared_home"]["status"] == "error" and results["home"]["status"] == "pass"
    stopped = edit(text, "home", lambda r: r.update(phases=r["phases"][:3], problems=[
        {"kind": "crashed", "client": 1, "phase": "read", "detail": "MemoryError: "}]))
    result = judge("storage.metadata.rename", stopped)["home"]
    assert result["status"] == "error" and "client 1 crashed in the read phase" in result["summary"]
    assert judge("storage.metadata.stat", "fio: no such file\n")[None]["status"] == "error"
    assert judge("storage.metadata.stat", text, rc=2)[None]["status"] == "fail"  # the probe itself failed


def test_errors_fail_with_their_errno_and_a_clean_run_passes():
    results = judge("storage.metadata.errors", capture(ENOSPC))
    scratch = results["scratch"]
    assert scratch["status"] == "fail" and "ENOSPC x" in scratch["summary"] and "in create" in scratch["summary"]
    assert scratch["evidence"]["samples"][0]["error"] == "ENOSPC" and scratch["value"] > 0
    assert results["home"]["status"] == "pass" and results["home"]["value"] == 0
    hung = edit(capture(REFERENCE), "shared_home", lambda r: r.update(problems=[
        {"kind": "hung", "client": 0, "phase": "remove", "detail": "no answer 120 s after the phase's time limit"}]))
    result = judge("storage.metadata.errors", hung)["shared_home"]
    assert result["status"] == "fail" and "client 0 hung in the remove phase" in result["summary"]
    crashed = edit(capture(REFERENCE), "shm", lambda r: r.update(problems=[
        {"kind": "crashed", "client": 0, "phase": "stat", "detail": "KeyError: 'x'"}]))
    crashed = crashed.replace("mdbench-exit: 0", "mdbench-exit: 1")
    assert judge("storage.metadata.errors", crashed)["shm"]["status"] == "error"


def test_a_stalling_tier_fails_the_tail():
    text = edit(capture(REFERENCE), "shared_home", lambda r: phase_of(r, "create")["latency_us"].update(p99=3.2e6))
    result = judge("storage.metadata.tail", text)["shared_home"]
    assert result["status"] == "fail" and result["value"] == 3200.0 and "(create)" in result["summary"]
    assert result["summary"].startswith("metadata operations stall: ")


# ------------------------------------------------------------------------------- role, baselines, simulation


def test_the_role_names_every_check_of_the_catalogue_entry_file_and_its_variables_are_documented():
    entries = yamldata.load((REPO / "src/clustereval/checks/catalogue.d/storage_metadata.yml").read_text())["checks"]
    role_vars = yaml.safe_load((REPO / "roles/storage/vars/main.yml").read_text())
    assert role_vars["__clustereval_storage_metadata_checks"] == [e["id"] for e in entries]
    assert sorted(CHECKS) == sorted(e["id"] for e in entries) and all(e["why"] and e["fix"] for e in entries)
    assert all(catalogue.entry(c)["probes"] == [PROBE] for c in CHECKS)
    defaults = yaml.safe_load((REPO / "roles/storage/defaults/main.yml").read_text())
    specs = yaml.safe_load((REPO / "roles/storage/meta/argument_specs.yml").read_text())["argument_specs"]["main"]
    readme = (REPO / "roles/storage/README.md").read_text()
    ours = [k for k in defaults if k.startswith("clustereval_storage_metadata_")]
    assert len(ours) == 5
    for name in ours:
        assert specs["options"][name]["default"] == defaults[name] and name in readme
        # the simulated inventory's small sizes (file_bytes stays 4 KiB)
        assert name in cluster.SIM_BENCHMARK_VARS or name.endswith("file_bytes")
    main = yaml.safe_load((REPO / "roles/storage/tasks/main.yml").read_text())
    assert any((t.get("ansible.builtin.include_tasks") or {}).get("file") == "metadata.yml" for t in main)


def test_every_tier_kind_has_rates_for_every_phase_and_levels_per_client():
    from clustereval import baselines
    for kind in ("network", "nvme", "memory", "ssd", "virtual", "unknown"):
        for check_id in CHECKS[:-1]:
            lim = baselines.reference("storage", check_id, {"tier_kind": kind, "metadata_clients": 8})
            assert lim.fail is not None and lim.warn is not None
            assert (lim.warn > lim.fail) if lim.direction == "higher" else (lim.warn < lim.fail)
    eight = baselines.reference("storage", "storage.metadata.create", {"tier_kind": "network", "metadata_clients": 8})
    assert (eight.warn, eight.fail, eight.matched) == (160, 64, "metadata-network")


def test_the_slow_metadata_profile_asks_the_glusterfs_brick_to_delay_metadata_only():
    settings = [node_settings(load_profile("sharedfs-slow-metadata"), n) for n in ("node1", "node2")]
    assert sharedfs.metadata_delay_ms(settings) == 100.0
    assert sharedfs.metadata_delay_ms([node_settings(load_profile("reference"), "node1")]) is None
    options = dict(sharedfs.metadata_delay_options(100.0))
    assert options["debug.delay-gen"] == "posix" and options["delay-gen.delay-duration"] == "100000"
    assert options["delay-gen.delay-percentage"] == "100"
    fops = options["delay-gen.enable"].split(",")
    assert {"create", "lookup", "stat", "unlink", "rename", "mkdir", "open"} <= set(fops)
    assert not {"read", "write", "fsync", "flush"} & set(fops)  # bulk data is not slowed
    commands = sharedfs.gluster_volume_commands(sharedfs.gluster_paths(Path("/x")), 1, "10.1.1.254", Path("/b"), 100)
    assert ["volume", "set", "shared", "delay-gen.enable", options["delay-gen.enable"]] == commands[-2][-5:]
    assert commands[-1][-3:] == ["volume", "start", "shared"]
    with pytest.raises(ValueError, match="needs shared_fs_type glusterfs"):
        sharedfs.metadata_delay_ms([{"shared_fs_type": "sshfs", "shared_fs_metadata_delay_ms": 5}])
    with pytest.raises(ValueError, match="cluster-wide"):
        sharedfs.metadata_delay_ms([{"shared_fs_metadata_delay_ms": 5}, {}])
    with pytest.raises(ValueError, match="a number of milliseconds"):
        sharedfs.metadata_delay_ms([{"shared_fs_metadata_delay_ms": "slow"}])
    mode = next(m for m in catalogue.failure_modes() if m["id"] == "shared_metadata_starved")
    assert mode["sim"]["profile"] == "sharedfs-slow-metadata"
    assert {f["check"] for f in mode["found_by"]} <= set(RATES)


def test_a_profile_asking_for_slow_metadata_on_sshfs_is_refused_before_anything_starts(tmp_path):
    path = tmp_path / "bad.yml"
    path.write_text("extends: reference\ncluster: {shared_fs_type: sshfs, shared_fs_metadata_delay_ms: 20}\n")
    with pytest.raises(ValueError, match=r"cluster\.shared_fs_metadata_delay_ms: .*needs shared_fs_type glusterfs"):
        cluster.check_nodes(load_profile(path, 2), 2)
    cluster.check_nodes(load_profile("sharedfs-slow-metadata", 2), 2)


def test_a_probe_command_of_pieces_is_joined_and_a_piece_that_is_no_text_refused(monkeypatch, tmp_path):
    folder = tmp_path / "probes"
    folder.mkdir()
    (folder / "x.yml").write_text("probes:\n  - {name: a, phase: performance, cmd: [&p 'f() { echo hi; }', 'f']}\n"
                                  "  - {name: b, phase: performance, cmd: [*p, 'f; f'], cleanup: [*p, 'f']}\n")

    class Package:
        def joinpath(self, name):
            return folder

    monkeypatch.setattr(probe_catalogue.resources, "files", lambda package: Package())
    probe_catalogue.load.cache_clear()
    try:
        probes = probe_catalogue.load()
        assert probes["a"]["cmd"] == "f() { echo hi; }\nf\n" and probes["b"]["cleanup"] == "f() { echo hi; }\nf\n"
        ran = subprocess.run(["/bin/sh", "-c", probes["b"]["cmd"]], capture_output=True, text=True)
        assert ran.stdout == "hi\nhi\n"
        (folder / "x.yml").write_text("probes:\n  - {name: a, phase: performance, cmd: ['echo', {x: 1}]}\n")
        probe_catalogue.load.cache_clear()
        with pytest.raises(ValueError, match="cmd pieces must be strings"):
            probe_catalogue.load()
    finally:
        probe_catalogue.load.cache_clear()
