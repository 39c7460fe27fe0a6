"""Every check produces pass, warn, fail, skip and error from the evidence it is given."""

from __future__ import annotations

import json

import pytest

from clustereval import baselines, checks
from clustereval.checks import Context, audit
from tests.conftest import read_corpus
from tests.helpers import judge as run
from tests.helpers import probe


def gpu_probe(text: str, rc: int = 0, **extra) -> dict:
    return probe("nvidia_smi_q_x", text, rc, parser="nvidia-smi-q-x", cmd="nvidia-smi -q -x", **extra)


# A small nvidia-smi -q -x document of our own, in the v12 layout, for GPU counts the corpus lacks.
def q_x(names: list[str], attached: int | None = None, driver: str = "550.90.07",
        module_ids: list[int] | None = None) -> str:
    gpus = "".join(
        f'\t<gpu id="00000000:{0x18 + i:02X}:00.0">\n\t\t<product_name>{name}</product_name>\n'
        + (f"\t\t<gpu_module_id>{module_ids[i]}</gpu_module_id>\n" if module_ids else "")
        + f"\t\t<uuid>GPU-0000000{i}-aaaa-bbbb-cccc-ddddeeeeffff</uuid>\n"
        f"\t\t<fb_memory_usage>\n\t\t\t<total>81559 MiB</total>\n\t\t\t<used>0 MiB</used>\n"
        f"\t\t</fb_memory_usage>\n\t</gpu>\n"
        for i, name in enumerate(names))
    return ('<?xml version="1.0" ?>\n<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">\n'
            f"<nvidia_smi_log>\n\t<timestamp>Mon Nov 30 00:00:00 2026</timestamp>\n"
            f"\t<driver_version>{driver}</driver_version>\n\t<cuda_version>12.4</cuda_version>\n"
            f"\t<attached_gpus>{len(names) if attached is None else attached}</attached_gpus>\n"
            f"{gpus}</nvidia_smi_log>\n")


H100 = "NVIDIA H100 80GB HBM3"


class TestGpuInventory:
    def test_pass_on_real_single_gpu_output(self):
        text = read_corpus("nvidia-smi-q-x", "h200-single-vm-drv580.159.04-v13-EDITED-ids.xml")
        result = run("audit.gpu.inventory", gpu_probe(text))
        assert result["status"] == "pass"
        assert result["value"] == 1
        assert "H200" in result["summary"] and "580.159.04" in result["summary"]
        assert result["artifacts"] == ["raw/n1/nvidia_smi_q_x.txt"]

    def test_warn_when_attached_count_disagrees_with_described_gpus(self):
        # The corpus A100 file states 4 attached GPUs but describes one (trimmed by its publisher).
        text = read_corpus("nvidia-smi-q-x", "a100-sxm4-80gb-x4-drv535-v12.xml")
        result = run("audit.gpu.inventory", gpu_probe(text))
        assert result["status"] == "warn"
        assert "4" in result["summary"] and "1" in result["summary"]

    def test_warn_on_mixed_models(self):
        result = run("audit.gpu.inventory", gpu_probe(q_x([H100] * 7 + ["NVIDIA H200"])))
        assert result["status"] == "warn" and "mixed" in result["summary"]

    def test_fail_when_fewer_gpus_than_expected(self):
        result = run("audit.gpu.inventory", gpu_probe(q_x([H100] * 7)), expected_gpus_per_node=8)
        assert result["status"] == "fail"
        assert result["value"] == 7 and result["expected"]["equals"] == 8

    def test_fail_when_fewer_gpus_than_slurm_declares(self):
        # No count configured: what the scheduler hands out for the node is what it must show.
        probes = {**gpu_probe(q_x([H100] * 7)), **slurm_probe(scontrol_node(gres="gpu:h100:8"))}
        result = run("audit.gpu.inventory", probes)
        assert result["status"] == "fail" and "Slurm declares" in result["summary"]
        assert result["expected"] == {"min": 8, "source": "Slurm GRES of the node (scontrol show node)"}
        assert result["evidence"]["slurm_declared_gpus"] == 8

    def test_pass_when_slurm_and_the_driver_agree(self):
        probes = {**gpu_probe(q_x([H100] * 8)), **slurm_probe(scontrol_node(gres="gpu:h100:8"))}
        assert run("audit.gpu.inventory", probes)["status"] == "pass"

    def test_a_node_outside_slurm_is_judged_on_the_driver_alone(self):
        probes = {**gpu_probe(q_x([H100] * 8)), **slurm_probe("Node n1 not found", rc=1)}
        assert run("audit.gpu.inventory", probes)["status"] == "pass"

    def test_fail_on_an_empty_baseboard_slot(self):
        # Slurm was reconfigured for the 7 GPUs left; module slot 6 of the 8-GPU baseboard still shows none.
        probes = {**gpu_probe(q_x([H100] * 7, module_ids=[2, 4, 3, 1, 7, 5, 8])),
                  **slurm_probe(scontrol_node(gres="gpu:h100:7"))}
        result = run("audit.gpu.inventory", probes)
        assert result["status"] == "fail" and "slot(s) 6" in result["summary"]

    def test_fail_when_fewer_gpus_than_its_siblings(self):
        # PCIe cards (no baseboard slots) and Slurm reconfigured for 7: only the siblings show what is missing.
        probes = {**gpu_probe(q_x([H100] * 7)), **slurm_probe(scontrol_node(gres="gpu:h100:7"))}
        siblings = {"n2": {"gpu_count": 8}, "n3": {"gpu_count": 8}, "n4": {"gpu_count": 8}}
        result = run("audit.gpu.inventory", probes, fleet=siblings)
        assert result["status"] == "fail" and "its siblings have (n2, n3, n4); Slurm declares 7" in result["summary"]
        assert result["expected"]["min"] == 8 and result["evidence"]["siblings_gpus"]["majority"] == 8

    def test_one_sibling_is_not_a_fleet(self):
        result = run("audit.gpu.inventory", gpu_probe(q_x([H100] * 7)), fleet={"n2": {"gpu_count": 8}})
        assert result["status"] == "pass"

    def test_a_node_like_its_siblings_passes(self):
        siblings = {"n2": {"gpu_count": 8}, "n3": {"gpu_count": 8}, "n1": {"gpu_count": 8}}
        assert run("audit.gpu.inventory", gpu_probe(q_x([H100] * 8)), fleet=siblings)["status"] == "pass"

    def test_pcie_cards_reporting_one_module_id_prove_nothing(self):
        result = run("audit.gpu.inventory", gpu_probe(q_x([H100] * 4, module_ids=[1, 1, 1, 1])))
        assert result["status"] == "pass"

    def test_fail_when_the_driver_cannot_talk_to_the_gpus(self):
        failed = gpu_probe("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.", rc=9)
        result = run("audit.gpu.inventory", failed)
        assert result["status"] == "fail" and "status 9" in result["summary"]

    def test_skip_when_nvidia_smi_is_missing(self):
        result = run("audit.gpu.inventory", gpu_probe("", rc=127, missing=True, tool="nvidia-smi"))
        assert result["status"] == "skip" and "not installed" in result["summary"]

    @pytest.mark.parametrize("text", ["\x00\x01garbage\xff" * 20, ""])
    def test_error_on_garbage(self, text):
        result = run("audit.gpu.inventory", gpu_probe(text))
        assert result["status"] == "error" and "could not parse" in result["summary"]

    def test_error_on_truncated_output(self):
        text = q_x([H100] * 8)
        result = run("audit.gpu.inventory", gpu_probe(text[: len(text) * 2 // 3]))
        assert result["status"] == "error"

    def test_error_on_timeout(self):
        result = run("audit.gpu.inventory", gpu_probe("", rc=None, timed_out=True, timeout=60))
        assert result["status"] == "error" and "timed out" in result["summary"]

    def test_error_when_probe_was_not_collected(self):
        assert run("audit.gpu.inventory", {})["status"] == "error"


class TestKernel:
    @pytest.mark.parametrize(("release", "status"), [
        ("6.8.0-49-generic", "pass"), ("5.15.0-105-generic", "pass"),
        ("5.4.0-200-generic", "warn"), ("4.15.0-213-generic", "fail"),
    ])
    def test_grades_against_the_baseline(self, release, status):
        result = run("audit.os.kernel", probe("uname_r", release + "\n"))
        assert result["status"] == status and result["value"] == release
        assert result["expected"]["source"].startswith("baselines/software.yml")

    def test_inventory_override_changes_the_level(self):
        result = run("audit.os.kernel", probe("uname_r", "6.1.0-18-amd64\n"),
                     baseline_overrides={"audit.os.kernel": {"warn": "6.8"}})
        assert result["status"] == "warn" and "override" in result["expected"]["source"]

    def test_error_on_empty_output(self):
        assert run("audit.os.kernel", probe("uname_r", "\n"))["status"] == "error"

    def test_skip_when_uname_missing(self):
        assert run("audit.os.kernel", probe("uname_r", "", rc=127, missing=True))["status"] == "skip"


# `scontrol show node` as Slurm 22.05 prints it (fixtures of our own, in its layout).
def scontrol_node(state: str = "IDLE", gres: str = "gpu:h100:8", reason: str | None = None) -> str:
    text = (
        "NodeName=n1 Arch=x86_64 CoresPerSocket=4 \n"
        "   CPUAlloc=0 CPUEfctv=8 CPUTot=8 CPULoad=0.41\n"
        "   AvailableFeatures=(null)\n"
        "   ActiveFeatures=(null)\n"
        f"   Gres={gres}\n"
        "   NodeAddr=127.0.0.1 NodeHostName=n1 Port=17001 Version=22.05.8\n"
        "   OS=Linux 6.1.0-18-amd64 #1 SMP PREEMPT_DYNAMIC Debian 6.1.76-1 (2024-02-01) \n"
        "   RealMemory=16000 AllocMem=0 FreeMem=20111 Sockets=2 Boards=1\n"
        f"   State={state} ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A\n"
        "   Partitions=gpu \n"
        "   BootTime=2026-11-29T08:00:00 SlurmdStartTime=2026-11-30T00:30:00\n"
        "   LastBusyTime=2026-11-30T00:30:01\n"
        "   CfgTRES=cpu=8,mem=16000M,billing=8,gres/gpu=8\n"
        "   AllocTRES=\n"
        "   CapWatts=n/a\n"
        "   CurrentWatts=0 AveWatts=0\n"
        "   ExtSensorsJoules=n/s ExtSensorsWatts=0 ExtSensorsTemp=n/s\n")
    if reason:
        text += f"   Reason={reason} [root@2026-11-30T00:31:00]\n"
    return text + "\n"


# A node without AMD's tools: amd-smi and rocm-smi are not installed.
NO_AMD_TOOLS = {**probe("amd_smi_static", "", 127, missing=True, parser="amd-smi", cmd="amd-smi static"),
                **probe("rocm_smi", "", 127, missing=True, parser="rocm-smi", cmd="rocm-smi")}


def slurm_probe(text: str, rc: int = 0, **extra) -> dict:
    return probe("slurm_node", text, rc, parser="slurm", cmd='scontrol show node "$(hostname -s)"', **extra)


class TestSlurmNodeState:
    def test_pass_when_idle(self):
        result = run("audit.slurm.node_state", slurm_probe(scontrol_node()))
        assert result["status"] == "pass" and "IDLE" in str(result["value"]).upper()

    def test_fail_when_drained(self):
        result = run("audit.slurm.node_state", slurm_probe(scontrol_node("IDLE+DRAIN", reason="XID 79")))
        assert result["status"] == "fail" and "XID 79" in result["summary"]

    def test_fail_when_down(self):
        result = run("audit.slurm.node_state", slurm_probe(scontrol_node("DOWN+NOT_RESPONDING", reason="x")))
        assert result["status"] == "fail" and "DOWN" in result["summary"]

    def test_warn_when_not_responding(self):
        result = run("audit.slurm.node_state", slurm_probe(scontrol_node("IDLE+NOT_RESPONDING")))
        assert result["status"] == "warn"

    def test_skip_when_slurm_is_not_configured(self):
        unconfigured = slurm_probe("", rc=1, stderr="scontrol: fatal: Could not establish a configuration source")
        unconfigured["slurm_node"]["stderr"] = "scontrol: fatal: Could not establish a configuration source"
        assert run("audit.slurm.node_state", unconfigured)["status"] == "skip"

    def test_skip_when_node_unknown_to_slurm(self):
        unknown = slurm_probe("Node n1 not found\n", rc=1)
        assert run("audit.slurm.node_state", unknown)["status"] == "skip"

    def test_fail_when_controller_unreachable(self):
        down = slurm_probe("", rc=1)
        down["slurm_node"]["stderr"] = "slurm_load_node error: Unable to contact slurm controller (connect failure)"
        result = run("audit.slurm.node_state", down)
        assert result["status"] == "fail" and "Unable to contact" in result["summary"]

    def test_error_on_garbage(self):
        result = run("audit.slurm.node_state", slurm_probe("\x00\x13\x37 random bytes\n"))
        assert result["status"] in ("error", "skip")
        assert result["status"] == "error" or "no node record" in result["summary"]


class TestSlurmGres:
    def test_pass_when_counts_match(self):
        probes = {**slurm_probe(scontrol_node()), **gpu_probe(q_x([H100] * 8))}
        result = run("audit.slurm.gres", probes)
        assert result["status"] == "pass" and result["value"] == 8

    def test_fail_when_slurm_declares_more_than_exist(self):
        probes = {**slurm_probe(scontrol_node()), **gpu_probe(q_x([H100] * 7))}
        result = run("audit.slurm.gres", probes)
        assert result["status"] == "fail" and "more than the 7" in result["summary"]
        assert result["evidence"]["visible_gpus"] == 7

    def test_fail_when_slurm_declares_no_gpus(self):
        probes = {**slurm_probe(scontrol_node(gres="(null)")), **gpu_probe(q_x([H100] * 8))}
        assert run("audit.slurm.gres", probes)["status"] == "fail"

    def test_warn_when_gres_type_names_other_hardware(self):
        probes = {**slurm_probe(scontrol_node(gres="gpu:a100:8")), **gpu_probe(q_x([H100] * 8))}
        result = run("audit.slurm.gres", probes)
        assert result["status"] == "warn" and "a100" in result["summary"]

    def test_skip_without_gpus_anywhere(self):
        probes = {**slurm_probe(scontrol_node(gres="(null)")),
                  **gpu_probe("", rc=127, missing=True), **NO_AMD_TOOLS}
        assert run("audit.slurm.gres", probes)["status"] == "skip"

    def test_an_amd_node_is_counted_from_amd_smi(self):
        # no nvidia-smi: the physical GPUs amd-smi lists (one block per GPU, partition 0 each)
        static = "".join(f"GPU: {i}\n    ASIC:\n        MARKET_NAME: AMD Instinct MI300X\n    BUS:\n"
                         f"        BDF: 0000:{5 + 32 * i:02x}:00.0\n    PARTITION:\n        COMPUTE_PARTITION: SPX\n"
                         "        MEMORY_PARTITION: NPS1\n        PARTITION_ID: 0\n\n" for i in range(7))
        probes = {**slurm_probe(scontrol_node(gres="gpu:mi300x:8")), **gpu_probe("", rc=127, missing=True),
                  **probe("amd_smi_static", static, parser="amd-smi", cmd="amd-smi static")}
        result = run("audit.slurm.gres", probes)
        assert result["status"] == "fail" and "more than the 7 amd-smi static sees" in result["summary"]

    def test_error_when_gpu_output_is_garbage(self):
        probes = {**slurm_probe(scontrol_node()), **gpu_probe("<<<not xml")}
        assert run("audit.slurm.gres", probes)["status"] == "error"


def facts(count: int, driver: str = "550.90.07", kernel: str = "6.1.0-18-amd64", model: str = H100) -> dict:
    ctx = Context(subject="x", probes={**gpu_probe(q_x([model] * count, driver=driver)),
                                       **probe("uname_r", kernel + "\n")})
    return audit.host_facts(ctx)


class TestFleet:
    def test_pass_when_all_nodes_agree(self):
        result = run("audit.fleet.gpu_consistency", fleet={f"n{i}": facts(8) for i in range(4)})
        assert result["status"] == "pass" and result["value"] == 4

    def test_fail_names_the_node_with_a_missing_gpu(self):
        fleet = {"n1": facts(8), "n2": facts(7), "n3": facts(8), "n4": facts(8)}
        result = run("audit.fleet.gpu_consistency", fleet=fleet)
        assert result["status"] == "fail" and "n2 (7)" in result["summary"]
        assert result["evidence"]["gpu_count"]["odd_nodes"] == {"n2": 7}

    def test_fail_on_driver_drift(self):
        # Different drivers on nodes of one cluster break NCCL jobs: as much a fail as a missing GPU.
        fleet = {"n1": facts(8), "n2": facts(8), "n3": facts(8, driver="535.183.01")}
        result = run("audit.fleet.gpu_consistency", fleet=fleet)
        assert result["status"] == "fail" and "n3 (535.183.01)" in result["summary"]

    def test_skip_with_one_node_and_unreachable_others(self):
        result = run("audit.fleet.gpu_consistency", fleet={"n1": facts(8), "n2": None})
        assert result["status"] == "skip" and "n2" in result["summary"]

    def test_error_when_the_harness_could_not_read_enough_nodes(self):
        broken = Context(subject="x", probes={**gpu_probe("<<<garbage"), **probe("uname_r", "6.1.0\n")})
        fleet = {"n1": facts(8), "n2": audit.host_facts(broken), "n3": audit.host_facts(broken)}
        result = run("audit.fleet.gpu_consistency", fleet=fleet)
        assert result["status"] == "error" and "n2" in result["summary"]

    def test_another_kernel_series_is_a_fail(self):
        fleet = {"n1": facts(8), "n2": facts(8), "n3": facts(8, kernel="5.15.0-105-generic")}
        result = run("audit.fleet.kernel_consistency", fleet=fleet)
        assert result["status"] == "fail" and "n3" in result["summary"]

    def test_kernel_drift_is_a_warn(self):
        fleet = {"n1": facts(8), "n2": facts(8), "n3": facts(8, kernel="6.1.0-13-amd64")}
        result = run("audit.fleet.kernel_consistency", fleet=fleet)
        assert result["status"] == "warn" and "n3" in result["summary"]
        assert run("audit.fleet.kernel_consistency", fleet={"n1": facts(8), "n2": facts(8)})["status"] == "pass"


def fio_json(direction: str, bw_kib: float, error: int = 0) -> str:
    """A minimal fio 3.33 JSON document of our own, shaped like `--output-format=json`."""
    def side(bw: float) -> dict:
        return {"io_bytes": int(bw * 1024 * 3), "io_kbytes": int(bw * 3), "bw_bytes": int(bw * 1024), "bw": bw,
                "iops": bw / 1024, "runtime": 3000, "total_ios": int(bw * 3 / 1024),
                "clat_ns": {"min": 1000, "max": 9000000, "mean": 3060000.0, "stddev": 1.0,
                            "percentile": {"99.000000": 5000000}},
                "lat_ns": {"min": 1000, "max": 9000000, "mean": 3070000.0, "stddev": 1.0}}
    job = {"jobname": f"seq_{direction}", "groupid": 0, "error": error,
           "read": side(bw_kib if direction == "read" else 0), "write": side(bw_kib if direction == "write" else 0),
           "trim": side(0)}
    return json.dumps({"fio version": "fio-3.33", "timestamp": 1764460800, "time": "Mon Nov 30 00:00:00 2026",
                       "jobs": [job]}, indent=2)


# What the storage_scratch_device probe prints for an NVMe drive, a SATA SSD and a virtio disk.
SCRATCH_DEVICES = {
    "nvme": "mount: /dev/nvme0n1p1 xfs\ndisk: nvme0n1 nvme 0 disk\n",
    "ssd": "mount: /dev/sda1 ext4\ndisk: sda sata 0 disk\n",
    "virtual": "mount: /dev/vda ext4\ndisk: vda  1 disk\n",
}


class TestFio:
    def fio(self, bw_kib: float, error: int = 0, device: str | None = "nvme", **extra) -> dict:
        probes = probe("fio_seq_write", fio_json("write", bw_kib, error), parser="fio")
        if device:
            probes.update(probe("storage_scratch_device", SCRATCH_DEVICES[device], parser="probe-storage-device"))
        return run("storage.fio.seq_write", probes, scratch_dir="/scratch", **extra)

    def test_pass_warn_fail_by_bandwidth(self):
        assert self.fio(3_000_000)["status"] == "pass"      # ~3.1 GB/s
        assert self.fio(1_000_000)["status"] == "warn"      # ~1.0 GB/s
        assert self.fio(200_000)["status"] == "fail"        # ~0.2 GB/s
        assert self.fio(3_000_000)["expected"]["matched"] == "local-nvme"

    def test_value_is_megabytes_per_second(self):
        result = self.fio(1_000_000)
        assert result["unit"] == "MB/s" and result["value"] == pytest.approx(1024.0, rel=1e-3)

    def test_io_error_fails(self):
        result = self.fio(3_000_000, error=5)
        assert result["status"] == "fail" and "errors" in result["summary"]

    def test_what_backs_the_directory_picks_the_baseline(self):
        assert self.fio(450_000, device="nvme")["status"] == "warn"  # ~470 MB/s
        result = self.fio(450_000, device="ssd")
        assert result["status"] == "pass" and result["expected"]["matched"] == "local-ssd"
        floor = self.fio(450_000, device="virtual")
        assert floor["status"] == "warn" and floor["expected"]["matched"] == "any-scratch"
        assert floor["evidence"]["scratch"]["scratch_kind"] == "virtual"
        unknown = self.fio(3_000_000, device=None)  # the device probe did not run: the floor still applies
        assert unknown["status"] == "pass" and unknown["expected"]["matched"] == "any-scratch"

    def test_an_inventory_override_wins(self):
        result = self.fio(3_000_000, baseline_overrides={"storage.fio.seq_write": {"warn": 5000}})
        assert result["status"] == "warn" and result["expected"]["source"].startswith("inventory override")

    def test_truncated_json_is_an_error(self):
        text = fio_json("write", 3_000_000)
        result = run("storage.fio.seq_write", probe("fio_seq_write", text[:200], parser="fio"))
        assert result["status"] == "error"

    def test_missing_fio_is_a_skip(self):
        result = run("storage.fio.seq_read", probe("fio_seq_read", "", rc=127, missing=True, parser="fio"))
        assert result["status"] == "skip"


class TestHarness:
    def test_reachable_pass_and_fail(self):
        assert run("harness.node.reachable", collect_duration_s=0.2)["status"] == "pass"
        result = run("harness.node.reachable", unreachable="ssh: connect to host 127.0.0.9 port 22: refused")
        assert result["status"] == "fail" and "refused" in result["summary"]


class TestSelection:
    @pytest.mark.parametrize(("run_tags", "skip_tags", "expected"), [
        (["all"], [], True),
        (["audit"], [], True),
        (["audit.slurm"], [], True),
        (["audit.slurm.gres"], [], True),
        (["audit.gpu"], [], False),
        (["performance"], [], False),
        (["all"], ["audit.slurm"], False),
        (["audit"], ["audit.slurm.gres"], False),
        (["audit.slurm.gre"], [], False),
    ])
    def test_tags_select_checks(self, run_tags, skip_tags, expected):
        assert checks.selected("audit.slurm.gres", run_tags, skip_tags) is expected


class TestBaselines:
    def test_lower_is_better_direction(self):
        lim = baselines.Limit("x", "lower", 10, 20, "us", "number", "test")
        assert [baselines.grade(v, lim) for v in (5, 15, 25)] == ["pass", "warn", "fail"]

    def test_version_key_is_numeric(self):
        assert baselines.version_key("5.15.0-105") > baselines.version_key("5.4.0-200")

    def test_unknown_class_is_a_clear_error(self):
        with pytest.raises(KeyError, match="no class 'floppy'"):
            baselines.limit("software", "audit.os.kernel", "floppy")
