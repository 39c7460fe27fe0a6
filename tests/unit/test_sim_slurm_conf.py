"""What the simulated cluster's Slurm is configured with, from the profile (sim/slurmconf.py; no cluster needed)."""

from __future__ import annotations

import subprocess

import pytest

from clustereval.sim import profile, slurmconf

DRILLS = profile.load_profile("fault-drills")


def settings(prof, node="node1"):
    return profile.provider_settings(prof, node)


def test_reference_lines_keep_todays_behaviour_and_set_the_cpu_default():
    prof = profile.load_profile("reference")
    lines = slurmconf.scheduler_lines(prof["cluster"]["slurm"], settings(prof), "gpu")
    assert "JobDefaults" not in " ".join(lines) and "DefCpuPerGPU=1" in lines
    assert "ReturnToService=2" in lines and "HealthCheckNodeState=ANY" in lines
    assert "HealthCheckProgram=/sim/etc/slurm/healthcheck" in lines and "HealthCheckInterval=30" in lines
    assert not any(line.startswith(("TopologyPlugin", "PrologEpilogTimeout")) for line in lines)


def test_timeouts_programs_and_topology_from_the_profile(tmp_path):
    path = tmp_path / "p.yml"
    path.write_text("extends: reference\ncluster:\n  slurm: {message_timeout_s: 30, prolog_epilog_timeout_s: 60, "
                    "batch_start_timeout_s: 90, partition_job_defaults: {cpus_per_gpu: 2, mem_per_gpu_mb: 4000}}\n"
                    "  provider:\n    health_check: {node_state: 'IDLE,CYCLE'}\n"
                    "    remediation: {return_to_service: 1, reboot_program: /sim/bin/reboot}\n")
    prof = profile.load_profile(path)
    cluster_slurm = {**prof["cluster"]["slurm"], "racks": {"node1": "r1"}}
    lines = slurmconf.scheduler_lines(cluster_slurm, settings(prof), "gpu")
    for line in ("MessageTimeout=30", "PrologEpilogTimeout=60", "BatchStartTimeout=90", "ReturnToService=1",
                 "RebootProgram=/sim/bin/reboot", "HealthCheckNodeState=IDLE,CYCLE", "TopologyPlugin=topology/tree"):
        assert line in lines
    assert slurmconf.partition_line("gpu", cluster_slurm).endswith("State=UP DefCpuPerGPU=2 DefMemPerGPU=4000")


def test_no_health_check_at_cluster_level_writes_none():
    prof = {**DRILLS, "cluster": {**DRILLS["cluster"], "provider": {"health_check": {"mode": "none"}}}}
    assert not any(line.startswith("HealthCheck") for line in slurmconf.scheduler_lines({}, settings(prof), "gpu"))


def test_racks_from_the_cluster_list_and_per_node():
    racks = slurmconf.rack_of({"r1": ["node1", "node2"], "r2": ["node3", "node9"]}, {"node2": "r3", "node1": None},
                              ["node1", "node2", "node3"])
    assert racks == {"node1": "r1", "node2": "r3", "node3": "r2"}
    assert slurmconf.topology_conf(racks) == ("SwitchName=r1 Nodes=node1\nSwitchName=r2 Nodes=node3\n"
                                              "SwitchName=r3 Nodes=node2\nSwitchName=spine Switches=r1,r2,r3\n")


def test_controller_is_the_host_unless_the_profile_names_a_node():
    assert slurmconf.controller({}, "ctl", {"node1": "127.1.2.1"}) == ("ctl", "127.0.0.1", None)
    assert slurmconf.controller({"controller": "node1"}, "ctl", {"node1": "127.1.2.1"}) == (
        "node1", "127.1.2.1", "node1")


@pytest.mark.parametrize(("node", "drains", "words"), [
    ("node1", True, "check_nv_xid check_dcgmi"), ("node3", False, "--report check_nv_xid check_dcgmi")])
def test_the_health_check_program_says_what_it_checks_and_does(node, drains, words):
    text = slurmconf.healthcheck_program(settings(DRILLS, node)["health_check"], "/e/hc.py", 8, "/e/slurm.conf")
    assert words in text and ("state=drain" in text) is drains
    assert ("export SLURM_CONF=/e/slurm.conf" in text) is drains
    assert subprocess.run(["sh", "-n"], input=text, text=True).returncode == 0


def test_gpu_count_and_nothing_to_check():
    hc = {**settings(DRILLS)["health_check"], "checks": ["gpu_count"]}
    assert "check_nv_gpu_count=8" in slurmconf.healthcheck_program(hc, "/e/hc.py", 8, "/e/slurm.conf")
    nothing = slurmconf.healthcheck_program({**hc, "checks": []}, "/e/hc.py", 8, "/e/slurm.conf")
    assert nothing.endswith("exit 0\n") and "python3" not in nothing


def test_prolog_and_epilog_take_the_profiles_time():
    hooks = slurmconf.job_hooks({"prolog_s": 12})
    assert "\nsleep 12  #" in hooks[slurmconf.PROLOG_PATH] and "sleep" not in hooks[slurmconf.EPILOG_PATH]
    assert "DCGM_HPC_JOB_MAPPING_DIR=/sim/run/dcgm-job-map" in hooks[slurmconf.EPILOG_PATH]


def engine(tmp_path, monkeypatch, kmsg):
    import importlib.util

    monkeypatch.setenv("SIMNODE_ROOT", str(tmp_path))
    monkeypatch.setenv("SLURMD_NODENAME", "node1")
    (tmp_path / "run").mkdir(exist_ok=True)
    (tmp_path / "kmsg").write_text(kmsg)
    (tmp_path / "provider.json").write_text(
        '{"health_check": {"mode": "drain", "drain_xids": [79], "after_s": 0}, "node": "node1", '
        f'"slurm_conf": "{tmp_path}/none.conf", "ground_truth": "{tmp_path}/truth.jsonl"}}')
    spec = importlib.util.spec_from_file_location("sim_healthcheck", slurmconf.__file__.replace(
        "slurmconf.py", "shims/healthcheck.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    # no slurmctld here: `scontrol show node` answers as for a node that is not drained
    monkeypatch.setattr(module, "scontrol", lambda cfg, *args: subprocess.CompletedProcess(args, 0, "", ""))
    return module


XID_79 = "[ 1.0] NVRM: Xid (PCI:0000:19:00): 79, pid=1, name=python, GPU has fallen off the bus.\n"


def test_the_engine_prints_the_reasons_to_drain_and_records_them(tmp_path, monkeypatch, capsys):
    hc = engine(tmp_path, monkeypatch, XID_79)
    assert hc.main(["check_nv_xid"]) == 0
    assert capsys.readouterr().out == "XID 79\n"
    events = (tmp_path / "truth.jsonl").read_text()
    assert '"event": "healthcheck_run"' in events and '"event": "drained"' in events


def test_the_engine_reports_and_exits_1_without_draining(tmp_path, monkeypatch, capsys):
    hc = engine(tmp_path, monkeypatch, XID_79)
    assert hc.main(["--report", "check_nv_xid"]) == 1
    assert capsys.readouterr().out == "ERROR:  nhc:  Health check failed:  XID 79\n"
    assert '"event": "drained"' not in (tmp_path / "truth.jsonl").read_text()


def test_a_check_not_named_is_not_run(tmp_path, monkeypatch, capsys):
    hc = engine(tmp_path, monkeypatch, XID_79)
    assert hc.main([]) == 0 and capsys.readouterr().out == ""


def test_the_engine_checks_amd_gpus(tmp_path, monkeypatch, capsys):
    ue = "[ 2.0] amdgpu 0000:65:00.0: 2 uncorrectable hardware errors detected in umc block\n"
    hc = engine(tmp_path, monkeypatch, "[ 1.0] amdgpu 0000:65:00.0: 3 correctable hardware errors detected in umc "
                                       "block\n" + ue)
    # amd-smi list of a node whose driver lost a GPU: 7 physical GPUs (partition 0 each)
    (tmp_path / "bin").mkdir()
    listing = "".join(f"GPU: {i}\n    BDF: 0000:{5 + 32 * i:02x}:00.0\n    PARTITION_ID: 0\n\n" for i in range(7))
    (tmp_path / "bin" / "amd-smi").write_text(f"#!/bin/sh\nprintf '%s' '{listing}'\n")
    (tmp_path / "bin" / "amd-smi").chmod(0o755)
    assert hc.main(["--report", "check_amd_ras", "check_amd_gpu_count=8"]) == 1
    assert capsys.readouterr().out == ("ERROR:  nhc:  Health check failed:  AMD RAS UE umc 0000:65:00.0\n"
                                       "ERROR:  nhc:  Health check failed:  GPU count 7, expected 8\n")
    assert hc.main(["check_amd_ras", "check_amd_gpu_count=8"]) == 0  # draining: the first reason, once
    assert capsys.readouterr().out == "AMD RAS UE umc 0000:65:00.0\n"
    assert slurmconf.healthcheck_program({**settings(DRILLS)["health_check"], "checks": ["amd_ras", "amd_gpu_count"]},
                                         "/e/hc.py", 8, "/e/slurm.conf").count("check_amd_ras check_amd_gpu_count=8")
