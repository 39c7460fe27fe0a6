"""Tests for the Slurm parser: every corpus file, plus hand-written Slurm 22.05 (Debian 12) fixtures.

The 22.05 fixtures follow the format strings in Debian 12's libslurmfull.so (slurm-wlm 22.05.8):
``NodeName=%s Arch=%s CoresPerSocket=%u`` / ``CPUAlloc=%u CPUEfctv=%u CPUTot=%u CPULoad=%.2f`` / ...
with made-up values.
"""

from __future__ import annotations

import json

import pytest

from clustereval.parsers import ParseError, parse
from clustereval.parsers.slurm import expand_hostlist, normalise_state, parse_gres, parse_sinfo_columns
from tests.conftest import corpus_files, read_corpus


def _slurm(name: str) -> dict:
    return parse("slurm", read_corpus("slurm", name))


def _by_name(out: dict) -> dict:
    return {node["name"]: node for node in out["nodes"]}


EXPECTED_FORMAT = {
    "sacct-P-all-fields.txt": "sacct",
    "sacct-P-garbled-invalid-lines.txt": "sacct",
    "scontrol-o-show-partition.txt": "scontrol_show_partition",
    "scontrol-show-config.txt": "scontrol_show_config",
    "scontrol-show-job-multinode-gres-gpu.txt": "scontrol_show_job",
    "scontrol-show-node-slurm17.11-gpu-gres-idle-drain.txt": "scontrol_show_node",
    "scontrol-show-node-slurm20.11-drain-low-realmemory.txt": "scontrol_show_node",
    "scontrol-show-node-slurm25.11.3-rtx5090-drain-healthcheck-unindented.txt": "scontrol_show_node",
    "sdiag-json-data_parser-v0.0.39.json": "sdiag_json",
    "sinfo-N-O-fixed-width-padded-gres-used.txt": "sinfo_noheader",
    "sinfo-R-low-realmemory.txt": "sinfo",
    "sinfo-all-N-o-all-gpu-drain-reasons.txt": "sinfo",
    "sinfo-default-4-nodes-drain.txt": "sinfo",
    "sinfo-json-slurm21.08.5-openapi-v0.0.37.json": "sinfo_json",
}


@pytest.mark.parametrize("path", corpus_files("slurm"), ids=lambda p: p.name)
def test_every_corpus_file_is_detected_and_serialisable(path):
    out = parse("slurm", path.read_bytes())
    assert out["format"] == EXPECTED_FORMAT[path.name]
    json.dumps(out)
    for key in ("nodes", "partitions", "jobs", "sacct_rows", "config"):
        assert key in out
    # only the garbled sacct sample is incomplete
    assert out["complete"] is (path.name != "sacct-P-garbled-invalid-lines.txt")


# ---- sinfo ------------------------------------------------------------------------------------

def test_sinfo_default_expands_the_hostlist():
    out = _slurm("sinfo-default-4-nodes-drain.txt")
    assert [n["name"] for n in out["nodes"]] == ["cu201", "cu202", "cu203", "cu204"]
    for node in out["nodes"]:
        assert node["state_raw"] == "drain"
        assert node["state"] == "drained" and node["drain"] is True and node["flags"] == ["DRAIN"]
        assert node["partitions"] == ["regular"]
    (partition,) = out["partitions"]
    assert partition["name"] == "regular" and partition["default"] is True
    assert partition["nodes_count"] == 4 and partition["timelimit"] == "infinite"


def test_sinfo_R_reasons_with_spaces():
    nodes = _by_name(_slurm("sinfo-R-low-realmemory.txt"))
    assert sorted(nodes) == ["cu201", "cu202", "cu203", "cu204"]
    assert nodes["cu201"]["reason"] == "Low RealMemory"
    assert nodes["cu201"]["reason_user"] == "root"
    assert nodes["cu204"]["reason_time"] == "2022-05-18T17:22:54"


def test_sinfo_all_pipe_format_with_duplicate_headers():
    out = _slurm("sinfo-all-N-o-all-gpu-drain-reasons.txt")
    nodes = _by_name(out)
    assert sorted(nodes) == ["node0201", "node1537", "node4180"]
    drained = nodes["node0201"]
    assert drained["state_raw"] == "drain*"
    assert drained["state"] == "drained" and drained["drain"] and drained["not_responding"]
    assert drained["reason"] == "replace"
    assert drained["gres"] == "gpu:gen:8" and drained["gres_gpus"] == 8 and drained["gres_gpu_type"] == "gen"
    assert drained["cpus"] == 80 and drained["real_memory_mb"] == 500000
    assert nodes["node1537"]["state"] == "allocated" and nodes["node1537"]["reason"] is None
    assert nodes["node4180"]["gres_gpus"] == 2
    assert nodes["node4180"]["version"] == "20.11.8"


def test_sinfo_noheader_fixed_width_columns_are_inferred():
    out = _slurm("sinfo-N-O-fixed-width-padded-gres-used.txt")
    nodes = _by_name(out)
    assert len(nodes) == 10
    assert any("no header line" in w for w in out["warnings"])
    assert nodes["node1074"]["state"] == "idle"
    assert nodes["node1074"]["gres_gpus"] == 8
    assert nodes["node1074"]["gres_used"] == "gpu:ampere:0(IDX:N/A)"
    assert nodes["node1074"]["cpus"] == 256
    assert nodes["node1074"]["cpus_state"] == "0/256/0/256"
    assert nodes["node1074"]["partitions"] == ["learn"]
    assert nodes["node1221"]["state"] == "allocated"
    assert nodes["node2654"]["state_raw"] == "drained$"
    assert nodes["node2654"]["state"] == "drained" and "MAINTENANCE" in nodes["node2654"]["flags"]
    states = sorted(n["state"] for n in out["nodes"])
    assert states.count("mixed") == 6 and states.count("idle") == 2


def test_sinfo_json_v0037():
    out = _slurm("sinfo-json-slurm21.08.5-openapi-v0.0.37.json")
    assert out["slurm_version"] == "21.08.5"
    nodes = _by_name(out)
    assert nodes["cs2.example.company.com"]["state"] == "mixed"
    assert nodes["cs4.example.company.com"]["state"] == "allocated"
    assert nodes["cs5.example.company.com"]["down"] is True
    assert nodes["cs3.example.company.com"]["cpus"] == 64
    assert nodes["cs3.example.company.com"]["real_memory_mb"] == 500000
    assert nodes["cs3.example.company.com"]["partitions"] == ["hw"]


# ---- scontrol show node ----------------------------------------------------------------------

def test_scontrol_show_node_17_11_gres_and_drain():
    out = _slurm("scontrol-show-node-slurm17.11-gpu-gres-idle-drain.txt")
    nodes = _by_name(out)
    assert list(nodes) == ["cortex-01", "dumfries-002", "oxygen-04", "cricket"]
    cortex = nodes["cortex-01"]
    assert cortex["state"] == "allocated" and cortex["gres_gpus"] == 8 and cortex["gres_gpu_type"] == "m60"
    assert cortex["cpus"] == 16 and cortex["real_memory_mb"] == 257860
    assert cortex["partitions"] == ["short", "killable"]
    oxygen = nodes["oxygen-04"]
    assert oxygen["state_raw"] == "IDLE+DRAIN"
    assert oxygen["state"] == "drained" and oxygen["base_state"] == "idle" and oxygen["drain"] is True
    assert oxygen["reason"] == "memory issues?"
    assert oxygen["reason_user"] == "root" and oxygen["reason_time"] == "2019-01-29T10:42:12"
    assert oxygen["gres"] == "(null)" and oxygen["gres_gpus"] == 0
    cricket = nodes["cricket"]
    assert cricket["gres_gpus"] == 1 and cricket["gres_gpu_type"] == "quadro"
    assert cricket["partitions"] == ["short", "long", "debug", "other", "allowed", "deny"]
    assert cricket["fields"]["OS"] == "Linux 4.14.138-aufs-1 #1 SMP Tue Aug 13 16:21:39 IDT 2019"


def test_scontrol_show_node_20_11_low_realmemory():
    (node,) = _slurm("scontrol-show-node-slurm20.11-drain-low-realmemory.txt")["nodes"]
    assert node["name"] == "cu201"
    assert node["state"] == "drained" and node["drain"] is True and node["down"] is False
    assert node["reason"] == "Low RealMemory"
    assert node["cpus"] == 48 and node["real_memory_mb"] == 186000
    assert node["version"] == "20.11.0"
    assert node["comment"] is None


def test_scontrol_show_node_25_11_without_indentation():
    (node,) = _slurm("scontrol-show-node-slurm25.11.3-rtx5090-drain-healthcheck-unindented.txt")["nodes"]
    assert node["name"] == "gpu010"
    assert node["gres_gpus"] == 4 and node["gres_gpu_type"] == "nvidia_geforce_rtx_5090"
    assert node["cpus"] == 96 and node["cpus_effective"] == 94
    assert node["real_memory_mb"] == 384000
    assert node["reason"] == "health_ps___blocked"
    assert node["partitions"] == ["private-kalousis-gpu", "shared-gpu"]
    assert node["drain"] is True


# Slurm 22.05 prints a trailing space after some fields (e.g. "CoresPerSocket=%u ", "OS=%s ").
DEBIAN12_SHOW_NODE = "\n".join([
    "NodeName=node1 Arch=x86_64 CoresPerSocket=4 ",
    "   CPUAlloc=0 CPUEfctv=8 CPUTot=8 CPULoad=0.50",
    "   AvailableFeatures=(null)",
    "   ActiveFeatures=(null)",
    "   Gres=gpu:h100:8",
    "   NodeAddr=node1 NodeHostName=node1 Version=22.05.8",
    "   OS=Linux 6.1.0-18-amd64 #1 SMP PREEMPT_DYNAMIC Debian 6.1.76-1 (2024-02-01) ",
    "   RealMemory=64000 AllocMem=0 FreeMem=61234 Sockets=2 Boards=1",
    "   State=IDLE ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A",
    "   Partitions=gpu ",
    "   BootTime=2024-03-01T10:00:00 SlurmdStartTime=2024-03-01T10:05:00",
    "   LastBusyTime=2024-03-01T10:05:00",
    "   CfgTRES=cpu=8,mem=62.50G,billing=8,gres/gpu=8",
    "   AllocTRES=",
    "   CapWatts=n/a",
    "   CurrentWatts=0 AveWatts=0",
    "   ExtSensorsJoules=n/s ExtSensorsWatts=0 ExtSensorsTemp=n/s",
    "",
    "NodeName=node2 Arch=x86_64 CoresPerSocket=4 ",
    "   CPUAlloc=4 CPUEfctv=8 CPUTot=8 CPULoad=3.10",
    "   AvailableFeatures=(null)",
    "   ActiveFeatures=(null)",
    "   Gres=gpu:h100:8(S:0-1)",
    "   NodeAddr=node2 NodeHostName=node2 Version=22.05.8",
    "   OS=Linux 6.1.0-18-amd64 #1 SMP PREEMPT_DYNAMIC Debian 6.1.76-1 (2024-02-01) ",
    "   RealMemory=64000 AllocMem=2048 FreeMem=60000 Sockets=2 Boards=1",
    "   State=MIXED+DRAIN ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A",
    "   Partitions=gpu,debug ",
    "   BootTime=2024-03-01T10:00:00 SlurmdStartTime=2024-03-01T10:05:00",
    "   LastBusyTime=2024-03-01T11:00:00",
    "   CfgTRES=cpu=8,mem=62.50G,billing=8,gres/gpu=8",
    "   AllocTRES=cpu=4,mem=2G,gres/gpu=2",
    "   CapWatts=n/a",
    "   CurrentWatts=0 AveWatts=0",
    "   ExtSensorsJoules=n/s ExtSensorsWatts=0 ExtSensorsTemp=n/s",
    "   Reason=xid 79 on GPU 3 [root@2024-03-01T11:02:03]",
    "",
    "",
])


def test_debian12_slurm_22_05_show_node():
    out = parse("slurm", DEBIAN12_SHOW_NODE)
    assert out["format"] == "scontrol_show_node" and out["complete"] is True and out["warnings"] == []
    node1, node2 = out["nodes"]
    assert node1["name"] == "node1" and node1["state"] == "idle" and node1["drain"] is False
    assert node1["gres_gpus"] == 8 and node1["gres_gpu_type"] == "h100"
    assert node1["cpus"] == 8 and node1["cpus_effective"] == 8 and node1["real_memory_mb"] == 64000
    assert node1["partitions"] == ["gpu"] and node1["reason"] is None
    assert node1["fields"]["OS"].endswith("(2024-02-01)")
    assert node2["state_raw"] == "MIXED+DRAIN"
    assert node2["state"] == "draining" and node2["base_state"] == "mixed" and node2["drain"] is True
    assert node2["reason"] == "xid 79 on GPU 3" and node2["reason_user"] == "root"
    assert node2["partitions"] == ["gpu", "debug"]


def test_debian12_one_line_show_node():
    one_line = " ".join([
        "NodeName=node3 Arch=x86_64 CoresPerSocket=4 CPUAlloc=0 CPUEfctv=8 CPUTot=8 CPULoad=0.00",
        "AvailableFeatures=(null) ActiveFeatures=(null) Gres=gpu:8 NodeAddr=node3 NodeHostName=node3",
        "Version=22.05.8 OS=Linux 6.1.0-18-amd64 #1 SMP PREEMPT_DYNAMIC Debian 6.1.76-1 (2024-02-01) ",
        "RealMemory=64000 AllocMem=0 FreeMem=N/A Sockets=2 Boards=1 State=DOWN*+DRAIN ThreadsPerCore=1",
        "TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A Partitions=gpu  BootTime=None SlurmdStartTime=None",
        "LastBusyTime=2024-03-01T10:05:00 CfgTRES=cpu=8,mem=62.50G,billing=8,gres/gpu=8 AllocTRES=",
        "CapWatts=n/a CurrentWatts=0 AveWatts=0 ExtSensorsJoules=n/s ExtSensorsWatts=0 ExtSensorsTemp=n/s",
        "Reason=Not responding [slurm@2024-03-02T08:00:00]",
    ]) + "\n"
    (node,) = parse("slurm", one_line)["nodes"]
    assert node["name"] == "node3" and node["gres_gpus"] == 8 and node["gres_gpu_type"] is None
    assert node["state"] == "drained" and node["base_state"] == "down"
    assert node["down"] and node["drain"] and node["not_responding"]
    assert node["reason"] == "Not responding" and node["reason_user"] == "slurm"
    assert node["fields"]["OS"].startswith("Linux 6.1.0-18-amd64 #1 SMP")
    assert node["free_memory_mb"] is None and node["real_memory_mb"] == 64000


def test_node_not_found_is_an_empty_answer_with_a_warning():
    out = parse("slurm", "Node nodeX not found\n")
    assert out["nodes"] == [] and out["format"] == "scontrol_show_node"
    assert out["warnings"] == ["node nodeX not found"]


def test_show_node_cut_in_the_middle_is_incomplete():
    cut = DEBIAN12_SHOW_NODE[: DEBIAN12_SHOW_NODE.index("   State=MIXED")]
    out = parse("slurm", cut)
    assert out["complete"] is False
    assert [n["name"] for n in out["nodes"]] == ["node1", "node2"]


# ---- sinfo -h custom formats (Debian 12 sinfo 22.05) -----------------------------------------

SINFO_PIPE = """\
node1|idle|gpu:h100:8|none
node2|drain|gpu:h100:8(S:0-1)|gpu health check failed
node3|down*|gpu:h100:8|Not responding
node4|mix|(null)|none
node5|drng|gpu:h100:4,gpu:a100:4|xid 48
"""


def test_sinfo_noheader_pipe_format():
    out = parse("slurm", SINFO_PIPE)
    assert out["format"] == "sinfo_noheader"
    assert out["inferred_columns"] == ["hostname", "state", "gres", "reason"]
    nodes = _by_name(out)
    assert nodes["node1"]["state"] == "idle" and nodes["node1"]["reason"] is None
    assert nodes["node2"]["state"] == "drained" and nodes["node2"]["reason"] == "gpu health check failed"
    assert nodes["node3"]["down"] and nodes["node3"]["not_responding"]
    assert nodes["node4"]["gres_gpus"] == 0 and nodes["node4"]["state"] == "mixed"
    assert nodes["node5"]["state"] == "draining" and nodes["node5"]["gres_gpus"] == 8
    assert nodes["node5"]["gres_gpu_type"] == "h100,a100"


def test_sinfo_columns_given_by_the_caller():
    out = parse_sinfo_columns("node1 idle 8 64000\nnode2 alloc 8 64000\n",
                              ["hostname", "state", "cpus", "real_memory_mb"])
    assert [(n["name"], n["state"], n["cpus"], n["real_memory_mb"]) for n in out["nodes"]] == [
        ("node1", "idle", 8, 64000), ("node2", "allocated", 8, 64000)]


def test_sinfo_noheader_whitespace_with_ints():
    out = parse("slurm", "node1 idle 8 64000\nnode2 alloc 16 128000\n")
    nodes = _by_name(out)
    assert nodes["node2"]["cpus"] == 16 and nodes["node2"]["real_memory_mb"] == 128000


def test_sinfo_N_long_header_with_reason_last():
    text = ("NODELIST   NODES PARTITION       STATE CPUS    S:C:T MEMORY TMP_DISK WEIGHT AVAIL_FE REASON\n"
            "node1          1      gpu*        idle 8       2:4:1  64000        0      1   (null) none\n"
            "node2          1      gpu*     drained 8       2:4:1  64000        0      1   (null) "
            "bad gpu [root@2024-03-01T11:00:00]\n")
    nodes = _by_name(parse("slurm", text))
    assert nodes["node1"]["partitions"] == ["gpu"] and nodes["node1"]["cpus"] == 8
    assert nodes["node2"]["state"] == "drained" and nodes["node2"]["reason"] == "bad gpu"
    assert nodes["node2"]["real_memory_mb"] == 64000


# ---- partition, job, config ------------------------------------------------------------------

def test_scontrol_one_line_partitions():
    parts = {p["name"]: p for p in _slurm("scontrol-o-show-partition.txt")["partitions"]}
    assert sorted(parts) == ["partition1", "partition2", "partition3"]
    assert parts["partition1"]["default"] is True and parts["partition2"]["default"] is False
    assert parts["partition1"]["total_nodes"] == 3140 and parts["partition1"]["total_cpus"] == 251200
    assert parts["partition2"]["total_nodes"] == 1469
    assert parts["partition2"]["max_time"] == "14-00:00:00"
    assert parts["partition1"]["state"] == "up"


def test_scontrol_show_job_multinode():
    (job,) = _slurm("scontrol-show-job-multinode-gres-gpu.txt")["jobs"]
    assert job["job_id"] == "8401413" and job["state"] == "RUNNING"
    assert job["user"] == "test_username" and job["partition"] == "learn"
    assert job["num_nodes"] == 8 and job["num_cpus"] == 2048 and job["gpus"] == 64
    assert len(expand_hostlist(job["nodelist"])) == 8
    assert job["node_details"][0]["GRES"] == "gpu:ampere:8(IDX:0-7)"
    assert job["fields"]["AllocNode:Sid"] == "node4055:2931806"
    assert job["fields"]["Command"] == "/home/test_username/slurm_launcher.sh"


def test_scontrol_show_config():
    out = _slurm("scontrol-show-config.txt")
    assert out["slurm_version"] == "23.02.2"
    assert out["config"]["ClusterName"] == "cluster_name"
    assert out["config"]["AccountingStoragePort"] == "6819"
    assert out["config"]["AuthType"] == "auth/munge"
    assert out["config_sections"]["Cgroup Support Configuration"]["ConstrainDevices"] == "yes"
    assert out["controllers"] == [{"role": "primary", "host": "slurm", "status": "UP"},
                                  {"role": "backup", "host": "slurmdb", "status": "UP"}]
    assert out["config_as_of"] == "2023-08-02T15:34:19"


def test_scontrol_show_config_cut_short_is_incomplete():
    text = read_corpus("slurm", "scontrol-show-config.txt")
    out = parse("slurm", text[: text.index("Cgroup Support")])
    assert out["complete"] is False and out["config"]["SLURM_VERSION"] == "23.02.2"


# ---- sacct, sdiag, squeue ----------------------------------------------------------------------

def test_sacct_all_fields():
    out = _slurm("sacct-P-all-fields.txt")
    assert len(out["sacct_columns"]) == 109
    assert len(out["sacct_rows"]) == 68
    first = out["sacct_rows"][0]
    assert first["Account"] == "fairusers" and first["JobID"] == "8012944_24093.0"
    assert first["JobName"] == "python3"
    assert {row["State"] for row in out["sacct_rows"]} == {"COMPLETED"}


def test_sacct_garbled_line_is_a_warning_not_a_row():
    out = _slurm("sacct-P-garbled-invalid-lines.txt")
    assert out["sacct_rows"] == []
    assert out["complete"] is False
    assert "93 fields, the header has 109" in out["warnings"][0]


def test_sacct_parsable_with_trailing_pipe():
    out = parse("slurm", "JobID|JobName|State|ExitCode|\n42|train|FAILED|1:0|\n"
                         "42.batch|batch|FAILED|1:0|\n")
    assert out["sacct_rows"][0] == {"JobID": "42", "JobName": "train", "State": "FAILED", "ExitCode": "1:0"}
    assert out["complete"] is True


def test_sdiag_json():
    out = _slurm("sdiag-json-data_parser-v0.0.39.json")
    assert out["slurm_version"] == "23.02.4"
    stats = out["statistics"]
    assert stats["server_thread_count"] == 3
    assert stats["jobs_submitted"] == 5824 and stats["jobs_pending"] == 13455


def test_squeue_default_format():
    text = ("             JOBID PARTITION     NAME     USER ST       TIME  NODES NODELIST(REASON)\n"
            "                42       gpu  nccl-ar    alice  R       1:02      2 node[1-2]\n"
            "                43       gpu    train      bob PD       0:00      4 (Resources)\n")
    out = parse("slurm", text)
    assert out["format"] == "squeue"
    assert [(j["job_id"], j["state"], j["nodelist_reason"]) for j in out["jobs"]] == [
        ("42", "R", "node[1-2]"), ("43", "PD", "(Resources)")]


# ---- helpers -----------------------------------------------------------------------------------

@pytest.mark.parametrize("raw, state, base, flags", [
    ("IDLE", "idle", "idle", []),
    ("IDLE+DRAIN", "drained", "idle", ["DRAIN"]),
    ("MIXED+DRAIN", "draining", "mixed", ["DRAIN"]),
    ("ALLOCATED+DRAIN", "draining", "allocated", ["DRAIN"]),
    ("DOWN*", "down", "down", ["NOT_RESPONDING"]),
    ("DOWN*+DRAIN", "drained", "down", ["NOT_RESPONDING", "DRAIN"]),
    ("IDLE+CLOUD+POWERED_DOWN", "idle", "idle", ["CLOUD", "POWERED_DOWN"]),
    ("ALLOCATED+COMPLETING", "completing", "allocated", ["COMPLETING"]),
    ("drain", "drained", None, ["DRAIN"]),
    ("drng", "draining", None, ["DRAIN"]),
    ("drain*", "drained", None, ["NOT_RESPONDING", "DRAIN"]),
    ("idle~", "idle", "idle", ["POWERED_DOWN"]),
    ("alloc", "allocated", "allocated", []),
    ("mix-", "mixed", "mixed", ["PLANNED"]),
    ("drained$", "drained", None, ["MAINTENANCE", "DRAIN"]),
])
def test_state_vocabulary(raw, state, base, flags):
    out = normalise_state(raw)
    assert (out["state"], out["base_state"], out["flags"]) == (state, base, flags)
    assert out["state_raw"] == raw
    assert out["drain"] is ("DRAIN" in flags)


@pytest.mark.parametrize("gres, gpus, gpu_type", [
    ("gpu:h100:8(S:0-1)", 8, "h100"),
    ("gpu:8", 8, None),
    ("gpu:a100:4,gpu:v100:2", 6, "a100,v100"),
    ("gpu:a100:4(S:0),gpu:a100:4(S:1)", 8, "a100"),
    ("gpu:nvidia_geforce_rtx_5090:4(S:0-3),VramPerGpu:no_consume:32G", 4, "nvidia_geforce_rtx_5090"),
    ("(null)", 0, None),
    ("mps:100", 0, None),
    (None, None, None),
])
def test_parse_gres(gres, gpus, gpu_type):
    assert parse_gres(gres) == (gpus, gpu_type)


def test_expand_hostlist():
    assert expand_hostlist("cu[201-204]") == ["cu201", "cu202", "cu203", "cu204"]
    assert expand_hostlist("node[08-10,7],gpu5") == ["node08", "node09", "node10", "node7", "gpu5"]
    assert len(expand_hostlist("n[0-99999999]", limit=1000)) == 1000


def test_empty_and_unrecognised():
    with pytest.raises(ParseError, match="empty"):
        parse("slurm", "\n  \n")
    with pytest.raises(ParseError, match="not recognised"):
        parse("slurm", "hello world\nthis is text\n")
    with pytest.raises(ParseError, match="truncated"):
        parse("slurm", read_corpus("slurm", "sinfo-json-slurm21.08.5-openapi-v0.0.37.json")[:500])
