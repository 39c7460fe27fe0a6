"""The training and inference roles' plans (clustereval.workload_plan): the runs' validation, the probe instances
of the runs on each node and over every node, how the launcher reaches the nodes; and the probes' own shell, run
here for real on the paths a node without torchtitan, vLLM or a GPU takes (through a real mpirun over this host
where Open MPI is installed)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from clustereval import parsers, workload_plan
from clustereval.checks import probe_catalogue

REPO = Path(__file__).resolve().parents[2]
DEFAULTS = yaml.safe_load((REPO / "roles/training/defaults/main.yml").read_text())
SPECS = yaml.safe_load((REPO / "roles/training/meta/argument_specs.yml").read_text())
SETTINGS = {"venv": "/opt/tt", "steps": 30, "gpus": 0, "launcher": "mpirun", "launcher_args": "", "master_port": 29400,
            "timeout_s": 1800, "run_id": "20261201T100000-ab12"}


def probe(name: str) -> dict:
    return probe_catalogue.for_phase("performance", 600, {name})[0]


def test_the_default_runs_are_valid_and_the_argument_spec_says_the_same():
    assert workload_plan.run_problems(DEFAULTS["clustereval_training_runs"]) == []
    options = SPECS["argument_specs"]["main"]["options"]
    assert options["clustereval_training_runs"]["default"] == DEFAULTS["clustereval_training_runs"]
    for key, value in DEFAULTS.items():
        assert options[key]["default"] == value, key
    assert {workload_plan.span(r) for r in DEFAULTS["clustereval_training_runs"]} == {"1", "all"}


def test_bad_runs_are_refused_with_what_is_wrong():
    problems = workload_plan.run_problems([
        {"name": "a", "model": "llama3-8b", "nodes": 2},
        {"name": "a", "model": "", "config_file": "job.toml", "module": "llama3"},
        {"name": "b c", "model": "m", "steps": 1, "gpu": 8},
        "not a run"])
    assert any("nodes must be 1" in p for p in problems)
    assert any("name is used twice" in p for p in problems)
    assert any("model (what the expected" in p for p in problems)
    assert any("config_file must be an absolute path" in p for p in problems)
    assert any("module and config go together" in p for p in problems)
    assert any("name must be letters" in p for p in problems)
    assert any("steps must be a whole number >= 2" in p for p in problems)
    assert any("unknown keys gpu" in p for p in problems)
    assert any("run 4 is not a mapping" in p for p in problems)
    assert workload_plan.run_problems({"name": "x"}) == ["clustereval_training_runs must be a list of runs, not dict"]


def test_each_node_gets_its_runs_on_its_own_and_the_first_the_runs_over_nodes():
    runs = DEFAULTS["clustereval_training_runs"]
    alone = workload_plan.training_instances(probe("torchtitan_train"), runs, "node", ["n2"], settings=SETTINGS)
    assert [i["name"] for i in alone] == ["torchtitan_train@llama3-8b"]
    only = alone[0]
    assert only["probe"] == "torchtitan_train" and only["artifact"] == "torchtitan-train-llama3-8b.log"
    assert only["timeout"] == 1800 and only["accepts"]
    assert only["params"] == {"run": "llama3-8b", "model": "llama3-8b", "venv": "/opt/tt", "config_file": "",
                              "module": "llama3", "config": "llama3_8b", "workdir": "",
                              "dump_folder": "/var/tmp/clustereval-torchtitan-20261201T100000-ab12-llama3-8b",
                              "steps": 30, "gpus": 0, "extra_args": "", "nodes": ["n2"]}
    over = workload_plan.training_instances(probe("torchtitan_train_nodes"), runs, "cluster", ["n1", "n2"],
                                            {"n1": "10.0.0.1", "n2": "10.0.0.2"}, {"n2": "gpu-002"}, SETTINGS)
    assert [i["name"] for i in over] == ["torchtitan_train_nodes@llama3-8b-nodes",
                                         "torchtitan_train_nodes@gpt-oss-20b-ep8"]
    moe = over[1]["params"]
    assert moe["extra_args"].startswith("--parallelism.expert_parallel_degree 8") and moe["model"] == "gpt-oss-20b"
    assert {k: moe[k] for k in ("procs", "mpi_hosts", "slurm_nodes", "master_addr", "master_port", "launcher",
                                "nodes")} == {"procs": 2, "mpi_hosts": "10.0.0.1:1,10.0.0.2:1",
                                              "slurm_nodes": "n1,gpu-002", "master_addr": "10.0.0.1",
                                              "master_port": 29400, "launcher": "mpirun", "nodes": ["n1", "n2"]}
    assert workload_plan.training_instances(probe("torchtitan_train_nodes"), runs, "cluster", ["n1"],
                                            settings=SETTINGS) == []
    ran = probe_catalogue.with_params(over, {})[0]
    assert set(ran["params"]) == set(probe_catalogue.load()["torchtitan_train_nodes"]["params"])


def test_a_runs_own_steps_and_gpus_win():
    runs = [{"name": "short", "model": "m", "nodes": 1, "steps": 5, "gpus": 4, "config_file": "/etc/job.toml"}]
    params = workload_plan.training_instances(probe("torchtitan_train"), runs, "node", ["n1"], settings=SETTINGS)[0][
        "params"]
    assert params["steps"] == 5 and params["gpus"] == 4 and params["config_file"] == "/etc/job.toml"


# ----------------------------------------------------------------------------- the probes' shell, run here

HOST = subprocess.run(["hostname"], capture_output=True, text=True).stdout.strip()
MPIRUN = shutil.which("mpirun") is not None


def run_probe(name: str, tmp_path: Path, **params) -> dict:
    """The probe's command as the probe runner runs it (``/bin/sh -c``, parameters in the environment),
    parsed with its parser."""
    entry = probe_catalogue.load()[name]
    env = {**os.environ, **{f"CLUSTEREVAL_{k.upper()}": str(v) for k, v in params.items()}}
    proc = subprocess.run(["/bin/sh", "-c", entry["cmd"]], env=env, capture_output=True, text=True, timeout=120,
                          cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    return parsers.parse(entry["parser"], proc.stdout)


def stub_torchtitan(tmp_path: Path) -> Path:
    """A directory holding an importable package named torchtitan with one config registry (llama3), to walk
    the probe past its import check to the GPU check; it trains nothing."""
    package = tmp_path / "lib" / "torchtitan"
    (package / "models" / "llama3").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "models" / "llama3" / "config_registry.py").write_text("")
    return tmp_path / "lib"


def test_on_one_node_each_missing_piece_is_a_skip_naming_the_node(tmp_path, monkeypatch):
    common = {"run": "r", "steps": 30, "dump_folder": "/var/tmp/clustereval-torchtitan-test-r"}
    none = run_probe("torchtitan_train", tmp_path, module="llama3", config="llama3_8b", **common)
    assert none["skip"] == f"torchtitan is not installed for python3 on {HOST} (set clustereval_training_venv)"
    monkeypatch.setenv("PYTHONPATH", str(stub_torchtitan(tmp_path)))
    venv = {"venv": sys.prefix, **common}
    assert "no CUDA GPU" in run_probe("torchtitan_train", tmp_path, module="llama3", config="llama3_8b", **venv)["skip"]
    registry = run_probe("torchtitan_train", tmp_path, module="gpt_oss", config="gpt_oss_20b", **venv)["skip"]
    assert "no config registry for module gpt_oss" in registry
    unreadable = run_probe("torchtitan_train", tmp_path, config_file=str(tmp_path / "absent.toml"), **venv)
    assert "no readable torchtitan job file" in unreadable["skip"]
    assert "names no torchtitan job file" in run_probe("torchtitan_train", tmp_path, **venv)["skip"]


@pytest.mark.skipif(not MPIRUN, reason="Open MPI's mpirun is not installed here")
def test_over_nodes_the_launcher_asks_every_node_first_and_a_node_without_torchtitan_is_the_skip(tmp_path):
    launch = {"run": "r", "module": "llama3", "config": "llama3_8b", "launcher": "mpirun", "procs": 2,
              "mpi_hosts": "127.0.0.1:1,localhost:1", "slurm_nodes": "a,b", "master_addr": "127.0.0.1",
              "master_port": 29400, "steps": 30, "dump_folder": "/var/tmp/clustereval-torchtitan-test-r"}
    out = run_probe("torchtitan_train_nodes", tmp_path, **launch)
    assert [n["torchtitan"] for n in out["nodes"]] == ["no", "no"]
    assert out["skip"].startswith(f"torchtitan is not installed for python3 on {HOST} ")
    served = run_probe("vllm_bench_nodes", tmp_path, model="m", port=18100, **launch)
    assert served["skip"].startswith(f"vLLM is not installed for python3 on {HOST} ")


def test_over_nodes_a_launcher_that_reaches_too_few_nodes_is_the_harnesss_error(tmp_path):
    launch = {"run": "r", "module": "llama3", "config": "llama3_8b", "procs": 2, "slurm_nodes": "nowhere-1,nowhere-2"}
    unknown = run_probe("torchtitan_train_nodes", tmp_path, launcher="pdsh", **launch)
    assert unknown["error"] == "unknown launcher 'pdsh' (mpirun or srun)"
    if shutil.which("srun"):
        refused = run_probe("torchtitan_train_nodes", tmp_path, launcher="srun", **launch)
        assert refused["error"].startswith(f"srun reached 0 of 2 nodes from {HOST}")
    assert "no model to serve" in run_probe("vllm_bench_nodes", tmp_path, launcher="mpirun", **launch)["skip"]


def test_the_cleanup_removes_only_a_dump_folder_of_a_run(tmp_path):
    cleanup = probe_catalogue.load()["torchtitan_train"]["cleanup"]
    folder = Path(workload_plan.dump_folder("test-cleanup", "r"))
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "tb").mkdir(exist_ok=True)
    subprocess.run(["/bin/sh", "-c", cleanup], env={**os.environ, "CLUSTEREVAL_DUMP_FOLDER": str(folder)}, check=True)
    assert not folder.exists()
    subprocess.run(["/bin/sh", "-c", cleanup], env={**os.environ, "CLUSTEREVAL_DUMP_FOLDER": str(tmp_path)},
                   check=True)
    assert tmp_path.exists()


# --------------------------------------------------------------------- the roles' validation, run by Ansible

VALIDATE = """- hosts: localhost
  gather_facts: false
  tasks:
    - ansible.builtin.include_role: {name: clustereval.gpu.training, tasks_from: validate}
    - ansible.builtin.include_role: {name: clustereval.gpu.inference, tasks_from: validate}
"""


@pytest.mark.parametrize("extra,said", [
    ("{}", None),
    ('{"clustereval_training_runs": [{"name": "a", "model": "m", "nodes": 3}]}', "run a: nodes must be 1"),
    ('{"clustereval_training_model": "llama3-8b"}', "were replaced by clustereval_training_runs"),
    ('{"clustereval_inference_launcher": "pdsh"}', "clustereval_inference_launcher must be one of: mpirun, srun"),
])
def test_the_roles_refuse_bad_settings_before_anything_runs(tmp_path, extra, said):
    play = tmp_path / "validate.yml"
    play.write_text(VALIDATE)
    env = {**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1",
           "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    proc = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", "localhost,", "-c", "local",
                           str(play), "-e", extra], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    if said is None:
        assert proc.returncode == 0, proc.stdout[-2000:]
    else:
        assert proc.returncode != 0 and said in proc.stdout, proc.stdout[-2000:]
