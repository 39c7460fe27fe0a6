"""The datagen benchmark: the node program (run for real here on small sizes), the probe-datagen parser on output
captured from it (tests/unit/data/storage_datagen/: the simulated reference's GlusterFS home from both nodes at
once, a node without pyarrow, a tmpfs out of inodes, a machine with no shared filesystem, a run stopped by SIGTERM),
and every check's pass, warn, fail, skip and error."""

from __future__ import annotations

import importlib.util
import json
import os
import random
import subprocess
import sys
import zlib
from pathlib import Path

import pytest
import yaml

from clustereval import checks, yamldata
from clustereval.checks import Context, probe_catalogue
from clustereval.parsers import ParseError, _mutate, parse
from clustereval.results import problems
from tests.helpers import PROBLEM_WORDS, RUN

REPO = Path(__file__).resolve().parents[2]
DATA = Path(__file__).parent / "data" / "storage_datagen"
SCRIPT = REPO / "roles" / "storage" / "files" / "clustereval_datagen.py"
PROBE = "storage_datagen"
PARSER = "probe-datagen"
NODE_CHECKS = ["storage.datagen.throughput", "storage.datagen.parquet", "storage.datagen.errors"]
AGGREGATE = "storage.datagen.aggregate"
SIM = {"node1": "sim-glusterfs-node1-of-2.json", "node2": "sim-glusterfs-node2-of-2.json"}


def program():
    spec = importlib.util.spec_from_file_location("clustereval_datagen", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def captured(name: str) -> str:
    return (DATA / name).read_text()


def doc(name: str = SIM["node1"]) -> dict:
    return json.loads(captured(name))


def record(stdout: str, rc: int = 0, host: str = "node1", **fields) -> dict:
    return {"name": PROBE, "cmd": "exec python $CLUSTEREVAL_SCRIPT", "rc": rc, "stdout": stdout, "stderr": "",
            "parser": PARSER, "timeout": 300, "artifact": f"raw/{host}/storage-datagen.json", **fields}


def text(value: dict | str) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def hold(result: dict) -> dict:
    assert problems(result) == [], result
    if result["status"] == "pass":
        assert not PROBLEM_WORDS.search(result["summary"]), result["summary"]
    return result


def node(check_id: str, value: dict | str | None = None, **options) -> list[dict]:
    """The check judged on node1's kept probe (the captured GlusterFS run unless given)."""
    probes = {PROBE: record(text(doc() if value is None else value))}
    ctx = Context(subject="node1", probes=probes, options=options, parse_cache={})
    return [hold(r) for r in checks.evaluate_many(check_id, ctx, RUN)]


def one(check_id: str, value: dict | str | None = None, **options) -> dict:
    results = node(check_id, value, **options)
    assert len(results) == 1, [r["summary"] for r in results]
    return results[0]


def cluster(node1: dict | str | None = None, node2: dict | str | None = None, **options) -> list[dict]:
    """The aggregate judged over both nodes' kept probes (the captured pair unless given; "absent": none kept)."""
    host_probes = {}
    for host, value in (("node1", node1), ("node2", node2)):
        if value == "absent":
            host_probes[host] = {}
            continue
        host_probes[host] = {PROBE: record(text(doc(SIM[host]) if value is None else value), host=host)}
    ctx = Context(subject="_cluster", host_probes=host_probes, options=options, parse_cache={})
    return [hold(r) for r in checks.evaluate_many(AGGREGATE, ctx, RUN)]


def override(check_id: str, warn: float, fail: float) -> dict:
    return {"baseline_overrides": {check_id: {"warn": warn, "fail": fail}}}


# ------------------------------------------------------------------------------------------------ node program


def test_blob_bytes_are_incompressible_and_no_block_repeats():
    module = program()
    blobs = module.Blobs()
    data = b"".join(bytes(blobs.chunk(number, index, module.CHUNK)) for number in range(2) for index in range(4))
    assert len(zlib.compress(data, 6)) > 0.99 * len(data)
    blocks = [data[i:i + module.BLOCK] for i in range(0, len(data), module.BLOCK)]
    assert len(set(blocks)) == len(blocks)
    assert len(bytes(blobs.chunk(3, 0, 8192))) == 8192


def test_settings_are_checked(monkeypatch):
    module = program()
    monkeypatch.setenv("CLUSTEREVAL_PARQUET_COMPRESSION", "lzma")
    with pytest.raises(module.ConfigError, match="PARQUET_COMPRESSION"):
        module.settings()
    monkeypatch.setenv("CLUSTEREVAL_PARQUET_COMPRESSION", "zstd")
    monkeypatch.setenv("CLUSTEREVAL_DIRS", "relative/dir")
    with pytest.raises(module.ConfigError, match="absolute"):
        module.settings()
    monkeypatch.setenv("CLUSTEREVAL_DIRS", "/data")
    monkeypatch.setenv("CLUSTEREVAL_WRITERS", "0")
    with pytest.raises(module.ConfigError, match="at least 1"):
        module.settings()
    monkeypatch.setenv("CLUSTEREVAL_WRITERS", "3")
    monkeypatch.setenv("CLUSTEREVAL_RUN_TAG", "run 1/node:a")
    monkeypatch.setenv("CLUSTEREVAL_BLOB_MIB", "0.5")
    settings = module.settings()
    assert settings["run_tag"] == "run_1_node_a" and settings["writers"] == 3 and settings["blob_bytes"] == 1 << 19


def test_tiers_are_named_as_the_tier_matrix_names_them(tmp_path):
    module = program()
    home, lustre, readonly = tmp_path / "home", tmp_path / "lustre", tmp_path / "ro"
    for folder in (home, lustre, readonly):
        folder.mkdir()
    readonly.chmod(0o555)
    table = [{"target": "/", "fstype": "ext4", "source": "/dev/vda1", "device": "254:1"},
             {"target": str(home), "fstype": "nfs4", "source": "fs:/home", "device": "0:50"},
             {"target": str(lustre), "fstype": "lustre", "source": "mgs@o2ib:/fs", "device": "0:51"},
             {"target": str(readonly), "fstype": "nfs4", "source": "fs:/ro", "device": "0:52"}]
    settings = {"dirs": [], "all_tiers": True, "scratch_dir": "/var/tmp", "shared_fstypes": ["nfs4", "lustre"]}
    names = [name for name, _ in module.candidates(settings, table)]
    shared = "shared" + str(tmp_path).replace("/", "_")
    expected = ["home", "scratch", "shm", shared + "_home", shared + "_lustre"]
    assert names == expected + ([] if os.geteuid() else [shared + "_ro"])  # root writes where others may not
    assert module.mount_of(str(home / "alice" / "x"), table)["target"] == str(home)
    assert [name for name, _ in module.candidates({**settings, "dirs": ["/data/raw/"]}, table)] == ["raw"]
    assert [name for name, _ in module.candidates({**settings, "dirs": [str(lustre)]}, table)] == [shared + "_lustre"]


def test_a_failed_call_is_named_by_errno_and_the_call(tmp_path):
    module = program()
    with pytest.raises(OSError) as caught:
        module.write_file(str(tmp_path / "absent" / "f.bin"), [b"x"])
    assert module.ename(caught.value) == "ENOENT" and caught.value.op == "open"
    assert module.write_file(str(tmp_path / "f.bin"), [b"ab", memoryview(b"cd")]) == 4
    with pytest.raises(OSError) as again:
        module.write_file(str(tmp_path / "f.bin"), [b"x"])  # never overwrites: every file is new
    assert module.ename(again.value) == "EEXIST"


def run_program(tmp_path: Path, python: str, **env: str) -> dict:
    settings = {"DIRS": str(tmp_path), "WRITERS": "2", "BLOB_MIB": "1", "PARQUET_ROWS": "500", "PARQUET_COLUMNS": "4",
                "DURATION_S": "0.5", "SLACK_S": "0", "RUN_TAG": "unit", **env}
    environ = {**os.environ, **{f"CLUSTEREVAL_{k}": v for k, v in settings.items()}}
    proc = subprocess.run([python, str(SCRIPT)], capture_output=True, text=True, timeout=120, env=environ)
    assert proc.returncode == 0, proc.stderr
    return parse(PARSER, proc.stdout)


@pytest.mark.skipif(importlib.util.find_spec("pyarrow") is None, reason="pyarrow is not installed (make install)")
def test_the_program_writes_blobs_and_parquet_for_real_and_removes_them(tmp_path):
    data = run_program(tmp_path, sys.executable)
    tier = data["tiers"][0]
    assert data["complete"] and tier["state"] == "measured" and tier["name"] == tmp_path.name
    assert tier["kinds"]["blob"]["files"] > 0 and tier["kinds"]["parquet"]["files"] > 0
    assert tier["bytes"] == sum(w["bytes"] for w in tier["writers"]) and tier["gbps"] > 0
    assert {w["state"] for w in tier["writers"]} == {"ok"} and tier["errors"] == {}
    assert data["pyarrow"]["version"] == "26.0.1" and tier["cleanup"]["removed"]
    assert list(tmp_path.iterdir()) == []


def test_without_pyarrow_the_blobs_are_written_alone(tmp_path):
    # the interpreter without site-packages: pyarrow cannot import, whatever is installed
    environ = {**os.environ, **{f"CLUSTEREVAL_{k}": v for k, v in {
        "DIRS": str(tmp_path), "WRITERS": "1", "BLOB_MIB": "1", "DURATION_S": "5", "FILES": "3",
        "RUN_TAG": "unit"}.items()}}
    proc = subprocess.run([sys.executable, "-S", "-s", str(SCRIPT)], capture_output=True, text=True, timeout=120,
                          env=environ)
    data = parse(PARSER, proc.stdout)
    tier = data["tiers"][0]
    assert data["pyarrow"]["available"] is False and "pyarrow" in data["pyarrow"]["reason"]
    assert tier["files"] == 3 and tier["kinds"]["parquet"]["files"] == 0 and tier["stopped_by"] == {"count": 1}
    assert list(tmp_path.iterdir()) == []


def test_the_probe_cleanup_removes_what_a_cut_short_run_left(tmp_path):
    probe = probe_catalogue.load()[PROBE]
    left = tmp_path / "clustereval-datagen.run-1_node1" / "w000"
    left.mkdir(parents=True)
    (left / "video-000000.bin").write_bytes(b"x")
    other = tmp_path / "clustereval-datagen.another-run"
    other.mkdir()
    env = {**os.environ, "CLUSTEREVAL_RUN_TAG": "run-1:node1", "CLUSTEREVAL_DIRS": str(tmp_path),
           "CLUSTEREVAL_SCRATCH_DIR": str(tmp_path), "CLUSTEREVAL_SHARED_FSTYPES": "nfs"}
    subprocess.run(["/bin/sh", "-c", probe["cleanup"]], check=True, env=env, timeout=30)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["clustereval-datagen.another-run"]


# ------------------------------------------------------------------------------------------------ parser


def test_captured_runs_parse_with_their_figures():
    data = parse(PARSER, captured(SIM["node1"]))
    assert data["complete"] and data["warnings"] == [] and data["program"] == "clustereval-datagen"
    tier = data["tiers"][0]
    assert tier["name"] == "shared_home" and tier["shared"] and tier["kind"] == "network"
    assert tier["source"] == "10.45.100.254:/shared" and tier["fstype"] == "fuse.glusterfs"
    assert tier["bytes"] == sum(w["bytes"] for w in tier["writers"])
    assert tier["gbps"] == pytest.approx(tier["bytes"] / tier["seconds"] / 1e9, rel=1e-3)
    assert tier["kinds"]["parquet"]["file_s"]["p50"] <= tier["kinds"]["parquet"]["file_s"]["p99"]
    local = parse(PARSER, captured("no-pyarrow-var-tmp-and-shm.json"))
    assert [t["kind"] for t in local["tiers"]] == ["virtual", "memory"] and local["pyarrow"]["available"] is False
    enospc = parse(PARSER, captured("tmpfs-out-of-inodes-enospc.json"))
    assert enospc["tiers"][0]["errors"] == {"ENOSPC": 10} and enospc["tiers"][0]["error_samples"][0]["op"] == "open"
    none = parse(PARSER, captured("no-shared-filesystem.json"))
    assert none["complete"] and none["tiers"] == []
    stopped = parse(PARSER, captured("interrupted-sigterm.json"))
    assert not stopped["complete"] and stopped["fatal"] == "SystemExit: 143" and stopped["tiers"][0]["state"] == "ready"


@pytest.mark.parametrize("bad", ["", "not json", '{"tool": "something-else"}',
                                 '{"tool": "clustereval-datagen", "version": 2, "tiers": []}',
                                 '{"tool": "clustereval-datagen", "version": 1}',
                                 captured(SIM["node1"])[:1500]])
def test_broken_output_is_a_parse_error(bad):
    with pytest.raises(ParseError):
        parse(PARSER, bad)


def test_a_document_breaking_the_contract_is_a_parse_error():
    for path, value in ((("tiers", 0, "bytes"), -1), (("tiers", 0, "state"), "done"), (("tiers", 0, "writers"), []),
                        (("tiers", 0, "writers", 0, "state"), "lost"), (("tiers", 0, "kinds", "audio"), {}),
                        (("tiers", 0, "gbps"), "fast")):
        data = doc()
        target = data
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
        with pytest.raises(ParseError):
            parse(PARSER, json.dumps(data))


def test_noise_around_the_document_is_a_warning():
    data = parse(PARSER, "Warning: something\n" + captured(SIM["node2"]))
    assert data["warnings"] == ["Warning: something"] and data["complete"]


@pytest.mark.parametrize("mutation", sorted(_mutate.MUTATIONS))
def test_the_parser_on_damaged_output_gives_a_result_or_a_parse_error(mutation):
    sample = captured(SIM["node1"]).encode()
    for seed in range(5):
        try:
            out = parse(PARSER, _mutate.MUTATIONS[mutation](sample, random.Random(seed)))
        except ParseError as exc:
            assert str(exc).strip()
            continue
        json.dumps(out, allow_nan=False)
        assert {"tool", "format", "complete", "warnings"} <= set(out)


# ------------------------------------------------------------------------------------------------ throughput


def test_throughput_of_the_simulated_glusterfs_fails_its_network_floor():
    result = one("storage.datagen.throughput")
    tier = doc()["tiers"][0]
    # 2 writers of 4 MiB blobs and 2000-row Parquet files on a 2-core VM's GlusterFS: about 56 MB/s
    assert result["status"] == "fail" and result["value"] == round(tier["gbps"], 4) == 0.0563
    assert result["params"] == {"tier": "shared_home"} and result["unit"] == "GB/s"
    assert "below 0.1 GB/s (datagen-network)" in result["summary"]
    blobs, parquets = tier["kinds"]["blob"]["files"], tier["kinds"]["parquet"]["files"]
    assert f"{blobs} 4 MiB blobs and {parquets} Parquet files" in result["summary"]
    assert result["expected"]["fail_min"] == 0.1 and result["artifacts"] == ["raw/node1/storage-datagen.json"]
    assert [w["state"] for w in result["evidence"]["writers"]] == ["ok", "ok"]


def test_throughput_passes_and_warns_against_its_levels():
    passed = one("storage.datagen.throughput", **override("storage.datagen.throughput", 0.01, 0.001))
    assert passed["status"] == "pass" and passed["expected"]["source"].startswith("inventory override")
    warned = one("storage.datagen.throughput", **override("storage.datagen.throughput", 1, 0.001))
    assert warned["status"] == "warn" and "below 1 GB/s" in warned["summary"]
    local = node("storage.datagen.throughput", captured("no-pyarrow-var-tmp-and-shm.json"))
    assert [r["expected"]["source"].split("#")[1].split(" ")[0] for r in local] == ["datagen-any", "datagen-memory"]
    assert "blobs only; the Parquet part is judged by storage.datagen.parquet" in local[0]["summary"]


def test_no_tier_found_is_a_skip_saying_how_to_name_one():
    for check_id in NODE_CHECKS:
        result = one(check_id, captured("no-shared-filesystem.json"))
        assert result["status"] == "skip" and "clustereval_storage_datagen_dirs" in result["summary"]


def test_a_stopped_run_truncated_output_or_a_timeout_is_an_error():
    for check_id in NODE_CHECKS:
        stopped = one(check_id, captured("interrupted-sigterm.json"))
        assert stopped["status"] == "error" and "SystemExit: 143" in stopped["summary"]
        truncated = one(check_id, captured(SIM["node1"])[:2000])
        assert truncated["status"] == "error" and "cut short" in truncated["summary"]
    ctx = Context(subject="node1", probes={PROBE: record("", timed_out=True)}, parse_cache={})
    assert checks.evaluate_many("storage.datagen.errors", ctx, RUN)[0]["status"] == "error"


def with_writer(state: str, reason: str) -> dict:
    data = doc()
    data["tiers"][0]["writers"][1] = {"writer": 1, "pid": 4242, "state": state, "reason": reason}
    return data


def test_a_writer_that_hung_or_died_makes_the_figure_an_error():
    result = one("storage.datagen.throughput", with_writer("hung", "still writing 60 s after its 3 s"))
    assert result["status"] == "error" and "only 1 of 2 writers reported" in result["summary"]
    assert one("storage.datagen.parquet", with_writer("died", "killed by signal 9"))["status"] == "error"
    crashed = with_writer("error", "MemoryError: ")
    crashed["tiers"][0]["harness_errors"] = ["writer 1: MemoryError: "]
    assert one("storage.datagen.throughput", crashed)["status"] == "error"
    errors = one("storage.datagen.errors", crashed)
    assert errors["status"] == "error" and "not an I/O error" in errors["summary"]


def test_a_baseline_without_a_limit_is_a_skip_with_the_value(monkeypatch):
    from clustereval import baselines

    def none(*args, **kwargs):
        raise baselines.NoReference("no reference in baselines/storage.yml for this hardware (tier_kind=network)")

    monkeypatch.setattr(baselines, "reference", none)
    result = one("storage.datagen.throughput")
    assert result["status"] == "skip" and result["value"] > 0 and "no reference" in result["summary"]


# ------------------------------------------------------------------------------------------------ parquet


def test_parquet_files_pass_warn_and_fail_on_their_p99():
    result = one("storage.datagen.parquet")
    stats = doc()["tiers"][0]["kinds"]["parquet"]
    assert result["status"] == "pass" and result["value"] == round(stats["file_s"]["p99"], 4) and result["unit"] == "s"
    assert f"{stats['files']} Parquet sensor files (2000 rows x 8 float32 columns, snappy" in result["summary"]
    assert result["expected"]["max"] == 2 and result["expected"]["fail_max"] == 10
    assert one("storage.datagen.parquet", **override("storage.datagen.parquet", 0.01, 10))["status"] == "warn"
    slow = doc()
    slow["tiers"][0]["kinds"]["parquet"]["file_s"].update(p99=12.5, max=14.0)
    failed = one("storage.datagen.parquet", slow)
    assert failed["status"] == "fail" and "above 10 s" in failed["summary"]


def test_without_pyarrow_parquet_is_a_skip_with_the_reason_and_the_blobs_still_count():
    results = node("storage.datagen.parquet", captured("no-pyarrow-var-tmp-and-shm.json"))
    assert [r["status"] for r in results] == ["skip", "skip"]
    assert "No module named 'pyarrow'" in results[0]["summary"]
    assert "clustereval_storage_datagen_install_pyarrow is false" in results[0]["summary"]
    tried = json.loads(captured("no-pyarrow-var-tmp-and-shm.json"))
    tried["settings"]["install_pyarrow"] = True
    assert "the role tried to install pyarrow==26.0.1" in one_of(node("storage.datagen.parquet", tried))
    throughput = node("storage.datagen.throughput", captured("no-pyarrow-var-tmp-and-shm.json"))
    assert all(r["status"] in ("pass", "warn", "fail") and r["value"] > 0 for r in throughput)
    off = doc()
    off["settings"]["parquet_rows"] = 0
    assert "turned off" in one("storage.datagen.parquet", off)["summary"]


def one_of(results: list[dict]) -> str:
    return results[0]["summary"]


def test_no_parquet_file_written_because_of_errors_fails():
    data = json.loads(captured("tmpfs-out-of-inodes-enospc.json"))
    data["tiers"][0]["kinds"]["parquet"].update(files=0, bytes=0, file_s=None)
    result = one("storage.datagen.parquet", data)
    assert result["status"] == "fail" and "ENOSPC" in result["summary"]


# ------------------------------------------------------------------------------------------------ errors


def test_errors_pass_on_the_captured_runs_and_fail_on_enospc():
    clean_run = one("storage.datagen.errors")
    assert clean_run["status"] == "pass" and clean_run["value"] == 0 and "every file removed" in clean_run["summary"]
    enospc = one("storage.datagen.errors", captured("tmpfs-out-of-inodes-enospc.json"))
    assert enospc["status"] == "fail" and enospc["value"] == 10
    assert "ENOSPC x10" in enospc["summary"] and ", open of episode-" in enospc["summary"]
    assert "2 writer(s) gave up" in enospc["summary"]


def test_a_hung_writer_fails_a_dead_one_is_an_error_and_leftovers_warn():
    hung = one("storage.datagen.errors", with_writer("hung", "still writing 60 s after its 3 s (a stuck write)"))
    assert hung["status"] == "fail" and "writes hung" in hung["summary"]
    died = one("storage.datagen.errors", with_writer("died", "killed by signal 9"))
    assert died["status"] == "error" and "killed by signal 9" in died["summary"]
    left = doc()
    left["tiers"][0]["cleanup"] = {"removed": False, "errors": ["/home/x/w000: [Errno 16] Device or resource busy"]}
    warned = one("storage.datagen.errors", left)
    assert warned["status"] == "warn" and "could not all be removed" in warned["summary"]


def test_no_file_written_at_all_fails_throughput_on_its_errors():
    data = json.loads(captured("tmpfs-out-of-inodes-enospc.json"))
    tier = data["tiers"][0]
    for writer in tier["writers"]:
        writer.update(bytes=0, files=0)
    tier.update(files=0, bytes=0, gbps=0.0)
    result = one("storage.datagen.throughput", data)
    assert result["status"] == "fail" and result["value"] == 0 and "no file could be written" in result["summary"]


# ------------------------------------------------------------------------------------------------ aggregate


def test_the_aggregate_of_both_nodes_at_once():
    result = cluster()[0]
    assert result["subject"] == "tier:shared_home"
    assert result["params"] == {"tier": "shared_home", "source": "10.45.100.254:/shared"}
    one_node, other = doc(SIM["node1"])["tiers"][0], doc(SIM["node2"])["tiers"][0]
    span = max(one_node["ended"], other["ended"]) - min(one_node["started"], other["started"])
    assert result["value"] == pytest.approx((one_node["bytes"] + other["bytes"]) / span / 1e9, abs=1e-4)
    assert result["evidence"]["overlap"] > 0.9 and result["expected"]["reference"] == 1.0
    assert result["status"] == "fail" and "fact datagen_nodes=2 x 0.5" in result["summary"]
    assert set(result["artifacts"]) == {"raw/node1/storage-datagen.json", "raw/node2/storage-datagen.json"} or \
        result["artifacts"] == []
    passed = cluster(**override(AGGREGATE, "0.01x", "0.001x"))[0]
    assert passed["status"] == "pass" and "from 2 nodes at once, 4 writers" in passed["summary"]
    warned = cluster(**{"baseline_overrides": {AGGREGATE: {"warn": 1.0, "fail": 0.01}}})[0]
    assert warned["status"] == "warn"


def test_windows_that_did_not_overlap_are_an_error():
    late = doc(SIM["node2"])
    tier = late["tiers"][0]
    shift = (tier["ended"] - tier["started"]) * 0.8
    tier["started"] += shift
    tier["ended"] += shift
    result = cluster(None, late)[0]
    assert result["status"] == "error" and "overlapped only 2" in result["summary"]
    assert "forks" in result["summary"]


def test_one_node_or_none_on_a_shared_filesystem_is_a_skip():
    result = cluster(None, "absent")[0]
    assert result["status"] == "skip" and "only node1 measured" in result["summary"]
    local = captured("no-pyarrow-var-tmp-and-shm.json")
    none = cluster(local, local)[0]
    assert none["status"] == "skip" and none["subject"] == "_cluster"


def test_unusable_documents_are_an_error_and_a_lost_writer_too():
    stopped = captured("interrupted-sigterm.json")
    result = cluster(stopped, stopped)[0]
    assert result["status"] == "error" and "no node kept a usable datagen document" in result["summary"]
    lost = cluster(None, with_writer_on(SIM["node2"], "hung"))[0]
    assert lost["status"] == "error" and "not every writer reported" in lost["summary"]


def with_writer_on(name: str, state: str) -> dict:
    data = doc(name)
    data["tiers"][0]["writers"][0] = {"writer": 0, "pid": 1, "state": state, "reason": "still writing"}
    return data


# ------------------------------------------------------------------------------------------------ role and data


def test_the_role_names_every_check_of_the_catalogue_entry_file():
    tasks = yaml.safe_load((REPO / "roles/storage/tasks/datagen.yml").read_text())
    entries = yamldata.load((REPO / "src/clustereval/checks/catalogue.d/storage_datagen.yml").read_text())["checks"]
    assert tasks[0]["vars"]["__clustereval_storage_datagen_checks"] == [c["id"] for c in entries]
    assert sorted([*NODE_CHECKS, AGGREGATE]) == sorted(c["id"] for c in entries)
    main = yaml.safe_load((REPO / "roles/storage/tasks/main.yml").read_text())
    included = [(t.get("ansible.builtin.include_tasks") or {}).get("file") for t in main]
    assert "datagen.yml" in included


def test_every_probe_parameter_is_passed_by_the_role():
    tasks = yaml.safe_load((REPO / "roles/storage/tasks/datagen.yml").read_text())
    given = tasks[0]["vars"]
    catalogue = probe_catalogue.load()
    assert set(catalogue[PROBE]["params"]) == set(given["__clustereval_storage_datagen_params"])
    assert set(catalogue["storage_datagen_pyarrow"]["params"]) == set(given["__clustereval_storage_datagen_env_params"])


def test_the_pinned_pyarrow_is_the_one_the_tests_install():
    defaults = yaml.safe_load((REPO / "roles/storage/defaults/main.yml").read_text())
    pin = defaults["clustereval_storage_datagen_pyarrow_version"]
    assert f'"pyarrow=={pin}"' in (REPO / "pyproject.toml").read_text()
