"""ior, mdtest and elbencho on the shared tier (checks/storage_hpcio.py, probes in checks/probes/storage_hpcio.yml):
every check's pass, warn and fail on the verbatim outputs of the corpus, skip when the tool is absent (the probe's
own command run here, where none of the three is installed), error on garbled, unreadable or missing output, fail
on a tool that exits non-zero or hangs; and the probes' real path — real mpirun, the probe's command as the probe
runner runs it — with a tiny stand-in ior, mdtest and elbencho on this test's PATH only (never on a node).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from clustereval import checks, yamldata
from clustereval.checks import Context, probe_catalogue
from clustereval.results import problems
from tests.conftest import corpus_file, read_corpus
from tests.helpers import PROBLEM_WORDS, RUN

REPO = Path(__file__).resolve().parents[2]
IOR = ["storage.ior.write", "storage.ior.read"]
MDTEST = ["storage.mdtest.file_create", "storage.mdtest.file_stat", "storage.mdtest.file_read",
          "storage.mdtest.file_remove"]
ELBENCHO = ["storage.elbencho.write", "storage.elbencho.read", "storage.elbencho.small_write",
            "storage.elbencho.small_read", "storage.elbencho.small_delete"]
DAOS_IOR = "ior-3.4.0dev-daos-dfuse-30tasks-ssf-verbose.txt"
FSX_IOR = "ior-4.0.0rc2-fsx-lustre-16tasks-fpp-random-5reps.txt"
GARBLED_IOR = "ior-defaults-1task-GARBLED-git-merge-conflict-markers.txt"
WHERE = "clustereval-dir: fstype=fuse.glusterfs source=10.9.9.254:/shared path=/home\n"


def record(name: str, stdout: str, rc: int = 0, **fields: Any) -> dict[str, Any]:
    """A probe record as the coordinator kept it (raw/<host>/<artifact> and its meta.json)."""
    base = name.partition("@")[0]
    probe = probe_catalogue.load()[base]
    params = {"names": "node1,node2"}
    params.update(fields.pop("params", {}))
    return {"name": name, "cmd": base, "rc": rc, "stdout": stdout, "stderr": fields.pop("stderr", ""),
            "parser": probe["parser"], "artifact": f"raw/node1/{name.replace('@', '-')}.txt", "timeout": 1800.0,
            "on_timeout": probe["on_timeout"], "params": params, **fields}


def judge_all(check_id: str, *records: dict[str, Any], coordinator: str = "node1",
              overrides: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Every result of ``check_id`` judged once for the cluster from what the coordinator kept; each honours the
    result contract and no pass states a problem."""
    host_probes: dict[str, dict[str, Any]] = {"node1": {}, "node2": {}}
    for item in records:
        host_probes[coordinator][item["name"]] = item
    ctx = Context(subject="_cluster", host_probes=host_probes, fleet={"node1": {}, "node2": {}},
                  options={"coordinator": coordinator, "baseline_overrides": overrides or {}})
    results = checks.evaluate_many(check_id, ctx, RUN)
    for result in results:
        assert problems(result) == [], result
        if result["status"] == "pass":
            assert not PROBLEM_WORDS.search(result["summary"]), result["summary"]
    return results


def one(check_id: str, *records: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    results = judge_all(check_id, *records, **kwargs)
    assert len(results) == 1, [(r["subject"], r["status"], r["summary"]) for r in results]
    return results[0]


def ior(name: str, nodes: str = "node1,node2", access: str = "file-per-process", where: str = WHERE,
        **fields: Any) -> dict[str, Any]:
    return record(f"storage_ior@{access}", where + read_corpus("ior", name),
                  params={"names": nodes, "access": access}, **fields)


def mdtest(name: str, **fields: Any) -> dict[str, Any]:
    return record("storage_mdtest", WHERE + read_corpus("mdtest", name), **fields)


def elbencho(name: str, mode: str, nodes: str = "node1,node2,node3", text: str | None = None) -> dict[str, Any]:
    return record(f"storage_elbencho@{mode}", WHERE + (text if text is not None else read_corpus("elbencho", name)),
                  params={"names": nodes, "mode": mode})


# ------------------------------------------------------------------------------------------------------ ior


def test_ior_bandwidth_is_judged_per_client_node_on_the_corpus_runs():
    # DAOS dfuse, 3 nodes x 10 tasks, one shared file: 1299 MiB/s written (0.42 GiB/s a node), 5429 MiB/s read
    write = one("storage.ior.write", ior(DAOS_IOR, "node1,node2,node3", "single-shared-file"))
    assert write["status"] == "warn" and write["subject"] == "node1+node2+node3", write["summary"]
    assert write["value"] == pytest.approx(1299.23 / 1024, abs=1e-3) and write["unit"] == "GiB/s"
    assert write["expected"]["min"] == 3.0 and write["expected"]["fail_min"] == 0.75  # 3 nodes x 1 GiB/s, a quarter
    assert write["expected"]["basis"] == "fact hpcio_client_nodes=3 x 1.0"
    assert write["params"] == {"access": "single-shared-file"}
    assert "over 3 nodes (0.423 GiB/s per node)" in write["summary"] and "/home (fuse.glusterfs)" in write["summary"]
    assert write["evidence"]["tasks"] == "30" and write["evidence"]["directory"]["source"] == "10.9.9.254:/shared"
    assert write["artifacts"] == ["raw/node1/storage_ior-single-shared-file.txt"]
    read = one("storage.ior.read", ior(DAOS_IOR, "node1,node2,node3", "single-shared-file"))
    assert read["status"] == "pass" and read["value"] == pytest.approx(5.302, abs=1e-3), read["summary"]
    # FSx for Lustre, 4 nodes x 4 tasks, file per process, 5 repetitions: the mean is judged
    fsx_write = one("storage.ior.write", ior(FSX_IOR, "node1,node2,node3,node4"))
    assert fsx_write["status"] == "fail" and "below the failure level 1 GiB/s" in fsx_write["summary"]
    assert fsx_write["value"] == pytest.approx(959.73 / 1024, abs=1e-3)
    assert fsx_write["evidence"]["mibps"]["max_mibps"] == 973.41 and fsx_write["evidence"]["repetitions"] == "5"
    assert one("storage.ior.read", ior(FSX_IOR, "node1,node2,node3,node4"))["status"] == "fail"


def test_ior_passes_above_an_inventory_override_and_the_node_count_comes_from_ior():
    # the role launched on two nodes, IOR says it ran on 3: the reference follows what IOR measured
    write = one("storage.ior.write", ior(DAOS_IOR, "node1,node2"),
                overrides={"storage.ior.write": {"reference": {"fact": "hpcio_client_nodes", "scale": 0.4}}})
    assert write["status"] == "pass" and write["expected"]["min"] == pytest.approx(1.2), write["summary"]
    assert "inventory override" in write["expected"]["source"] and write["evidence"]["client_nodes"] == 3


def test_garbled_ior_output_is_an_error_never_a_figure():
    for check_id in IOR:
        result = one(check_id, ior(GARBLED_IOR, "node1"))
        assert result["status"] == "error" and result["value"] is None, result["summary"]
        assert "garbled" in result["summary"] and "merge-conflict" in result["summary"]


def test_ior_errors_a_failed_run_a_hang_and_unreadable_output():
    text = read_corpus("ior", FSX_IOR)
    errors = text.replace("Finished ", "ior ERROR: write(116, 0x7f, 67108864) failed, (aio.c:101)\nFinished ", 1)
    failed = one("storage.ior.write", record("storage_ior@file-per-process", WHERE + errors))
    assert failed["status"] == "fail" and "IOR reported errors: ior ERROR: write(116" in failed["summary"]
    died = one("storage.ior.write", record("storage_ior@file-per-process", WHERE, rc=1,
                                           stderr="ORTE was unable to reliably start one or more daemons.\n"))
    assert died["status"] == "fail" and "exited with status 1: ORTE was unable" in died["summary"]
    hung = one("storage.ior.read", record("storage_ior@file-per-process", WHERE + text[:1500], rc=-9,
                                          timed_out=True))
    assert hung["status"] == "fail" and "did not finish within 1800.0 s" in hung["summary"]
    assert hung["evidence"]["last_lines"]
    unreadable = one("storage.ior.read", record("storage_ior@file-per-process", "mpirun: command line unclear\n"))
    assert unreadable["status"] == "error" and "could not read the ior output" in unreadable["summary"]
    cut = one("storage.ior.write", record("storage_ior@file-per-process", WHERE + text[:text.index("Results:")]))
    assert cut["status"] == "error" and "a cut capture" in cut["summary"], cut["summary"]


# --------------------------------------------------------------------------------------------------- mdtest


def statuses(check_ids: list[str], *records: dict[str, Any], **kwargs: Any) -> dict[str, str]:
    return {check_id: one(check_id, *records, **kwargs)["status"] for check_id in check_ids}


def test_mdtest_rates_on_the_corpus_runs():
    # BeeGFS, one task: hundreds of creates and removes a second fail, stat fails, read was not run (0.000)
    assert statuses(MDTEST, mdtest("mdtest-1.9.3-beegfs-3iter-colon-format-used-inodes-nan.txt")) == {
        "storage.mdtest.file_create": "fail", "storage.mdtest.file_stat": "fail", "storage.mdtest.file_read": "skip",
        "storage.mdtest.file_remove": "fail"}
    # DAOS dfuse create-only over 3 nodes: 2944 creates/s warn, the phases it did not run skip
    create = one("storage.mdtest.file_create", mdtest("mdtest-3.4.0dev-daos-dfuse-10tasks-file-create.txt"))
    assert create["status"] == "warn" and create["value"] == 2943.686 and create["unit"] == "ops/s"
    assert create["expected"]["min"] == 5000 and create["evidence"]["tasks"] == 10, create["summary"]
    stat = one("storage.mdtest.file_stat", mdtest("mdtest-3.4.0dev-daos-dfuse-10tasks-file-create.txt"))
    assert stat["status"] == "skip" and "the phase did not run" in stat["summary"]
    assert one("storage.mdtest.file_create", mdtest("mdtest-4.0.0-daos-dfuse-10tasks-2nodes-create-only.txt")
               )["status"] == "warn"
    # TableFS: the capture ends after the SUMMARY table (no '-- finished at'): its rates stand, and pass
    tablefs = "mdtest-3.4.0dev-tablefs-statvfs-error-warning-directory-ops.txt"
    assert statuses(["storage.mdtest.file_create", "storage.mdtest.file_stat", "storage.mdtest.file_remove"],
                    mdtest(tablefs)) == {"storage.mdtest.file_create": "pass", "storage.mdtest.file_stat": "pass",
                                         "storage.mdtest.file_remove": "pass"}
    assert one("storage.mdtest.file_create", mdtest(tablefs))["evidence"]["finished"] is False
    read = one("storage.mdtest.file_read", mdtest("mdtest-n10-2ranks-summary-rate.txt"))
    assert read["status"] == "pass" and read["value"] == 36759.895 and read["subject"] == "node1+node2"


def test_garbled_mdtest_output_is_an_error():
    garbled = mdtest("mdtest-4.0.0rc1-beegfs-32tasks-GARBLED-cmdline-quote-space-lines.txt")
    for check_id in MDTEST:
        result = one(check_id, garbled)
        assert result["status"] == "error" and "unbalanced quotes" in result["summary"], result["summary"]
    text = read_corpus("mdtest", "mdtest-4.0.0-daos-dfuse-10tasks-2nodes-create-only.txt")
    cut = one("storage.mdtest.file_create", record("storage_mdtest", WHERE + text[:text.index("SUMMARY")]))
    assert cut["status"] == "error" and "ends before the SUMMARY table" in cut["summary"]


# ------------------------------------------------------------------------------------------------- elbencho


def test_elbencho_large_and_small_file_runs_on_the_corpus():
    large = elbencho("distributed-3hosts-write-doc-example.txt", "large")
    write = one("storage.elbencho.write", large)
    # 33352 MiB/s by the last thread over 3 service hosts: 10.9 GiB/s per node
    assert write["status"] == "pass" and write["value"] == pytest.approx(33352 / 1024, abs=1e-3), write["summary"]
    assert write["expected"]["min"] == 3.0 and write["subject"] == "node1+node2+node3"
    read = one("storage.elbencho.read", large)
    assert read["status"] == "skip" and "ran no READ phase" in read["summary"]
    warned = one("storage.elbencho.write", large, overrides={"storage.elbencho.write": {"warn": 40, "fail": 10}})
    failed = one("storage.elbencho.write", large, overrides={"storage.elbencho.write": {"warn": 100, "fail": 40}})
    assert (warned["status"], failed["status"]) == ("warn", "fail")
    # the mtelbencho sweep wrapper: one verdict per dataset
    sweep = judge_all("storage.elbencho.write", elbencho("sweep-large-files-56threads-nersc-2021.txt", "large",
                                                         nodes="node1"))
    assert len(sweep) > 3 and {r["status"] for r in sweep} == {"pass"}
    assert sweep[0]["params"] == {"dataset": "/data/zettar/zx/src/sweep/1024x1GiB"} and sweep[0]["value"] > 10
    small = elbencho("sweep-lots-of-small-files-56threads-nersc-2021.txt", "small", nodes="node1")
    assert {r["status"] for r in judge_all("storage.elbencho.small_write", small)} == {"pass"}
    delete = judge_all("storage.elbencho.small_delete", small)
    assert delete[0]["value"] == 77381.0 and delete[0]["unit"] == "files/s" and delete[0]["status"] == "pass"
    assert one("storage.elbencho.small_read", small)["status"] == "skip"
    # a large-file run does not answer for the small-file checks
    assert "no small-file run" in one("storage.elbencho.small_write", large)["summary"]


def test_elbencho_cut_short_or_unreachable_service_is_an_error():
    text = read_corpus("elbencho", "distributed-3hosts-write-doc-example.txt")
    cut = one("storage.elbencho.write", elbencho("", "large", text=text[:text.index("Total MiB")].replace(
        "2m3.241s    2m5.755s", "2m3.241s")))
    assert cut["status"] == "error", cut["summary"]
    refused = one("storage.elbencho.write", record(
        "storage_elbencho@large", WHERE + "clustereval-error: could not start elbencho's service on 10.0.0.2 (exit "
        "status 255): Permission denied (publickey). (the services start over BatchMode SSH)\n",
        params={"mode": "large"}))
    assert refused["status"] == "error" and "Permission denied (publickey)" in refused["summary"]


# ------------------------------------------------------------------------------------------------ the probes

PROBES = probe_catalogue.load()


def run_probe(name: str, tmp_path: Path, path: str, instance: dict[str, Any] | None = None,
              **values: Any) -> dict[str, Any]:
    """The probe's command as the probe runner runs it (sh -c, parameters in the environment, its own process
    group), on this machine with ``path`` as PATH; returns its record as the coordinator keeps it."""
    settings = {"dir": str(tmp_path / "shared"), "shared_fstypes": "nfs,fuse.glusterfs", "self": "node1",
                "names": "node1", "addresses": "127.0.0.1", "launcher_args": "", "run_tag": "r1-node1",
                "ssh": "ssh", "ior_bin": "ior", "ior_tasks_per_node": 2, "ior_transfer_size": "1m",
                "ior_block_size": "4m", "ior_extra_args": "", "mdtest_bin": "mdtest", "mdtest_tasks_per_node": 2,
                "mdtest_files_per_task": 10, "mdtest_file_bytes": 4096, "mdtest_extra_args": "",
                "elbencho_bin": "elbencho", "elbencho_port": 1611, "elbencho_threads": 2, "elbencho_file_size": "4m",
                "elbencho_block_size": "1m", "elbencho_direct": True, "elbencho_small_files": 10,
                "elbencho_small_file_size": "4k", "elbencho_extra_args": "", **values}
    probe = probe_catalogue.with_params([{**probe_catalogue.ready(PROBES[name]), **(instance or {})}], settings)[0]
    env = {"PATH": path, "HOME": str(tmp_path / "home"), "TMPDIR": str(tmp_path)}
    env.update({f"CLUSTEREVAL_{k.upper()}": ("1" if v is True else "0" if v is False else str(v))
                for k, v in probe["params"].items() if v is not None})
    env.update({k: v for k, v in os.environ.items() if k.startswith("STANDIN_")})
    done = subprocess.run(["/bin/sh", "-c", probe["cmd"]], env=env, capture_output=True, text=True, timeout=120,
                          start_new_session=True)
    return {**probe, "rc": done.returncode, "stdout": done.stdout, "stderr": done.stderr, "env": env}


def bare_path(tmp_path: Path) -> str:
    """A PATH with the shell's tools and mpirun, but none of ior, mdtest, elbencho (as on the simulated nodes)."""
    folder = tmp_path / "bin"
    folder.mkdir(exist_ok=True)
    for tool in ("sh", "tr", "findmnt", "head", "mkdir", "rm", "cat", "id", "hostname", "grep", "sed", "paste",
                 "tail", "dirname", "ssh", "mpirun", "orterun", "orted"):
        found = shutil.which(tool)
        if found and not (folder / tool).exists():
            (folder / tool).symlink_to(found)
    return str(folder)


@pytest.mark.parametrize(("probe", "tool", "checks_of"),
                         [("storage_ior", "ior", IOR), ("storage_mdtest", "mdtest", MDTEST)])
def test_the_probe_skips_saying_the_tool_is_not_installed(tmp_path, probe, tool, checks_of):
    (tmp_path / "shared").mkdir()
    done = run_probe(probe, tmp_path, bare_path(tmp_path))
    assert done["rc"] == 0 and done["stdout"].startswith(f"clustereval-skip: {tool}: not installed on node1")
    name = f"{probe}@file-per-process" if probe == "storage_ior" else probe
    for check_id in checks_of:
        result = one(check_id, record(name, done["stdout"]))
        assert result["status"] == "skip" and result["summary"].startswith(f"{tool}: not installed on node1")
    assert list((tmp_path / "shared").iterdir()) == []  # nothing was created


def test_the_elbencho_probe_skips_without_elbencho_and_without_a_shared_directory(tmp_path):
    done = run_probe("storage_elbencho", tmp_path, bare_path(tmp_path), {"params": {"mode": "large"}})
    assert done["stdout"].startswith("clustereval-skip: elbencho: not installed on node1")
    assert one("storage.elbencho.write", record("storage_elbencho@large", done["stdout"],
                                                params={"mode": "large"}))["status"] == "skip"
    (tmp_path / "home").mkdir()
    stand_ins(tmp_path)
    nowhere = run_probe("storage_elbencho", tmp_path, f"{tmp_path / 'standin'}:{bare_path(tmp_path)}",
                        {"params": {"mode": "large"}}, dir="", shared_fstypes="fuse.nothing")
    assert nowhere["stdout"].startswith("clustereval-skip: no shared directory for elbencho on node1")


def test_without_mpirun_ior_skips_saying_so(tmp_path):
    stand_ins(tmp_path)
    folder = Path(bare_path(tmp_path))
    (folder / "mpirun").unlink()
    done = run_probe("storage_ior", tmp_path, f"{tmp_path / 'standin'}:{folder}")
    assert done["stdout"].startswith("clustereval-skip: mpirun: not installed on node1")


STANDIN_IOR = """#!/bin/sh
# stand-in ior for this unit test only: writes under its -o path, prints a corpus output of IOR's
out=
while [ $# -gt 0 ]; do case "$1" in -o) out=$2; shift 2;; *) shift;; esac; done
mkdir -p "$(dirname "$out")" && echo data > "$out.$$" || exit 5
[ "${OMPI_COMM_WORLD_RANK:-0}" = 0 ] && cat "$STANDIN_IOR_OUTPUT"
exit 0
"""
STANDIN_MDTEST = """#!/bin/sh
# stand-in mdtest for this unit test only: creates files under its -d directory, prints a corpus output of mdtest's
d=
while [ $# -gt 0 ]; do case "$1" in -d) d=$2; shift 2;; *) shift;; esac; done
mkdir -p "$d/rank.$$" && : > "$d/rank.$$/file.0" || exit 5
[ "${OMPI_COMM_WORLD_RANK:-0}" = 0 ] && cat "$STANDIN_MDTEST_OUTPUT"
exit 0
"""
STANDIN_ELBENCHO = """#!/bin/sh
# stand-in elbencho for this unit test only: --service and --quit succeed, a run writes under its path and prints
# a corpus output of elbencho's; every call is logged
echo "$*" >> "$STANDIN_ELBENCHO_LOG"
case " $* " in *" --service "*|*" --quit "*) exit 0;; *" --help-all "*) echo "  --jsonfile arg"; exit 0;; esac
for last; do :; done
mkdir -p "$last" && echo data > "$last/file" || exit 5
cat "$STANDIN_ELBENCHO_OUTPUT"
"""


def stand_ins(tmp_path: Path) -> None:
    folder = tmp_path / "standin"
    folder.mkdir(exist_ok=True)
    for name, text in (("ior", STANDIN_IOR), ("mdtest", STANDIN_MDTEST), ("elbencho", STANDIN_ELBENCHO)):
        (folder / name).write_text(text)
        (folder / name).chmod(0o755)


@pytest.mark.skipif(shutil.which("mpirun") is None, reason="no mpirun (Open MPI) here")
def test_the_real_path_with_stand_in_tools_under_real_mpirun(tmp_path, monkeypatch):
    """mpirun starts the stand-in on this machine exactly as it starts ior on every storage host; the output
    reaches the checks through the parser, and the run's directory is gone afterwards."""
    stand_ins(tmp_path)
    shared = tmp_path / "shared"
    shared.mkdir()
    monkeypatch.setenv("STANDIN_IOR_OUTPUT", str(corpus_file("ior", DAOS_IOR)))
    monkeypatch.setenv("STANDIN_MDTEST_OUTPUT", str(corpus_file("mdtest", "mdtest-n10-2ranks-summary-rate.txt")))
    path = f"{tmp_path / 'standin'}:{bare_path(tmp_path)}"
    done = run_probe("storage_ior", tmp_path, path, {"params": {"access": "file-per-process"}})
    assert done["rc"] == 0, done["stderr"]
    assert done["stdout"].startswith("clustereval-dir: ") and f"path={shared}" in done["stdout"]
    assert list(shared.iterdir()) == []  # the probe removed its directory
    kept = record("storage_ior@file-per-process", done["stdout"], params={"names": "node1"})
    assert one("storage.ior.read", kept)["status"] == "pass"
    assert one("storage.ior.write", kept)["status"] == "warn"  # IOR says 3 nodes: 1.27 GiB/s is below 3
    md = run_probe("storage_mdtest", tmp_path, path)
    assert md["rc"] == 0, md["stderr"]
    assert list(shared.iterdir()) == []
    assert one("storage.mdtest.file_create", record("storage_mdtest", md["stdout"]))["status"] == "pass"


def test_the_elbencho_probe_starts_a_service_runs_and_quits_it(tmp_path, monkeypatch):
    stand_ins(tmp_path)
    shared = tmp_path / "shared"
    shared.mkdir()
    log = tmp_path / "elbencho.log"
    monkeypatch.setenv("STANDIN_ELBENCHO_LOG", str(log))
    example = corpus_file("elbencho", "distributed-3hosts-write-doc-example.txt")
    monkeypatch.setenv("STANDIN_ELBENCHO_OUTPUT", str(example))
    done = run_probe("storage_elbencho", tmp_path, f"{tmp_path / 'standin'}:{bare_path(tmp_path)}",
                     {"params": {"mode": "large"}})
    assert done["rc"] == 0, done["stderr"]
    calls = log.read_text().splitlines()
    assert calls[0] == "--service --port 1611" and calls[-1] == "--hosts 127.0.0.1:1611 --quit"
    run = next(c for c in calls if " -w " in c)
    assert "--direct" in run and "--jsonfile" in run and f"{shared}/.clustereval-hpcio-r1-node1/" in run
    assert list(shared.iterdir()) == []
    result = one("storage.elbencho.write", record("storage_elbencho@large", done["stdout"],
                                                  params={"mode": "large", "names": "node1"}))
    assert result["status"] == "pass" and result["subject"] == "node1"


def test_the_cleanup_removes_what_a_cut_short_run_left_and_nothing_else(tmp_path):
    shared, home = tmp_path / "shared", tmp_path / "home"
    left = shared / ".clustereval-hpcio-r1-node1" / "mdtest" / "rank.1"
    left.mkdir(parents=True)
    (home / ".clustereval-hpcio-r1-node1").mkdir(parents=True)
    (shared / "keep").write_text("x")
    probe = probe_catalogue.with_params([probe_catalogue.ready(PROBES["storage_mdtest"])],
                                        {"dir": str(shared), "run_tag": "r1-node1"})[0]
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "CLUSTEREVAL_DIR": str(shared),
           "CLUSTEREVAL_RUN_TAG": "r1-node1"}
    subprocess.run(["/bin/sh", "-c", probe["cleanup"]], env=env, check=True)
    assert sorted(p.name for p in shared.iterdir()) == ["keep"] and list(home.iterdir()) == []
    # an empty run tag removes nothing
    (shared / ".clustereval-hpcio-").mkdir()
    subprocess.run(["/bin/sh", "-c", probe["cleanup"]], env={**env, "CLUSTEREVAL_RUN_TAG": ""}, check=True)
    assert (shared / ".clustereval-hpcio-").exists()
    assert PROBES["storage_ior"]["cleanup"] == PROBES["storage_mdtest"]["cleanup"]  # run once per collection


# ------------------------------------------------------------------------------------------------ the harness


def test_no_output_kept_by_the_coordinator_is_an_error_and_no_node_a_skip():
    assert one("storage.ior.write")["status"] == "error"
    ctx = Context(subject="_cluster", host_probes={}, options={})
    [result] = checks.evaluate_many("storage.mdtest.file_create", ctx, RUN)
    assert result["status"] == "skip" and "no node was reachable" in result["summary"]


def test_the_role_names_every_check_of_the_catalogue_file_and_the_probes_read_the_parsers():
    tasks = yaml.safe_load((REPO / "roles/storage/tasks/hpcio.yml").read_text())
    catalogue = yamldata.load((REPO / "src/clustereval/checks/catalogue.d/storage_hpcio.yml").read_text())
    ids = [c["id"] for c in catalogue["checks"]]
    assert tasks[0]["vars"]["__clustereval_storage_hpcio_checks"] == ids == IOR + MDTEST + ELBENCHO
    assert {PROBES[p]["parser"] for p in ("storage_ior", "storage_mdtest", "storage_elbencho")} == \
        {"ior", "mdtest", "elbencho"}
    main = yaml.safe_load((REPO / "roles/storage/tasks/main.yml").read_text())
    assert "hpcio.yml" in [(t.get("ansible.builtin.include_tasks") or {}).get("file") for t in main]


def test_an_elbencho_service_ssh_cannot_start_is_an_error_and_a_peer_without_elbencho_a_skip(tmp_path, monkeypatch):
    stand_ins(tmp_path)
    (tmp_path / "shared").mkdir()
    monkeypatch.setenv("STANDIN_ELBENCHO_LOG", str(tmp_path / "elbencho.log"))
    refuse, bare = tmp_path / "refuse-ssh", tmp_path / "bare-ssh"
    refuse.write_text("#!/bin/sh\necho 'root@10.0.0.2: Permission denied (publickey).' >&2\nexit 255\n")
    bare.write_text("#!/bin/sh\necho 'sh: 1: elbencho: not found' >&2\nexit 127\n")  # the peer's shell, no elbencho
    for fake in (refuse, bare):
        fake.chmod(0o755)
    path = f"{tmp_path / 'standin'}:{bare_path(tmp_path)}"
    instance = {"params": {"mode": "small"}}
    denied = run_probe("storage_elbencho", tmp_path, path, instance, addresses="127.0.0.1,10.0.0.2", ssh=str(refuse))
    assert denied["rc"] == 0 and "clustereval-error: could not start elbencho's service on 10.0.0.2" in denied["stdout"]
    result = one("storage.elbencho.small_write", record("storage_elbencho@small", denied["stdout"],
                                                        params={"mode": "small"}))
    assert result["status"] == "error" and "Permission denied (publickey)" in result["summary"], result["summary"]
    missing = run_probe("storage_elbencho", tmp_path, path, instance, addresses="127.0.0.1,10.0.0.2", ssh=str(bare))
    assert "clustereval-skip: elbencho: not installed on 10.0.0.2" in missing["stdout"]
    # the service already started here is quit again, and nothing is left on the shared tier
    assert (tmp_path / "elbencho.log").read_text().splitlines()[-1] == "--hosts 127.0.0.1:1611,10.0.0.2:1611 --quit"
    assert list((tmp_path / "shared").iterdir()) == []
