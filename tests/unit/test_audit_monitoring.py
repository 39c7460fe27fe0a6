"""Monitoring audit checks: idle thermals, Xid history, exporters, CPU governor, job attribution."""

from __future__ import annotations

import pytest

from clustereval.checks.audit_monitoring import gpu_class
from tests.conftest import read_corpus
from tests.helpers import probe
from tests.unit.test_audit_health import dcgmi, gpus, programs
from tests.unit.test_audit_scheduler import run

RUN = "test-run"
H100 = "NVIDIA H100 80GB HBM3"


def q_x(temps: list[int], powers: list[float], util: int = 0, name: str = H100) -> dict:
    """A small nvidia-smi -q -x document of our own (v12 layout) with temperature and power per GPU."""
    body = "".join(
        f'\t<gpu id="00000000:{0x18 + i:02X}:00.0">\n\t\t<product_name>{name}</product_name>\n'
        f"\t\t<uuid>GPU-0000000{i}-aaaa-bbbb-cccc-ddddeeeeffff</uuid>\n"
        f"\t\t<utilization>\n\t\t\t<gpu_util>{util} %</gpu_util>\n\t\t\t<memory_util>0 %</memory_util>\n"
        f"\t\t</utilization>\n\t\t<temperature>\n\t\t\t<gpu_temp>{t} C</gpu_temp>\n\t\t</temperature>\n"
        f"\t\t<gpu_power_readings>\n\t\t\t<power_draw>{p:.2f} W</power_draw>\n"
        f"\t\t\t<current_power_limit>700.00 W</current_power_limit>\n\t\t</gpu_power_readings>\n"
        f"\t\t<processes>\n\t\t</processes>\n\t</gpu>\n"
        for i, (t, p) in enumerate(zip(temps, powers, strict=True)))
    text = ('<?xml version="1.0" ?>\n<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">\n<nvidia_smi_log>\n'
            "\t<timestamp>Mon Nov 30 00:00:00 2026</timestamp>\n\t<driver_version>550.90.07</driver_version>\n"
            f"\t<cuda_version>12.4</cuda_version>\n\t<attached_gpus>{len(temps)}</attached_gpus>\n{body}"
            "</nvidia_smi_log>\n")
    return probe("nvidia_smi_q_x", text, parser="nvidia-smi-q-x", cmd="nvidia-smi -q -x")


class TestIdleThermals:
    def test_gpu_class_from_the_product_name(self):
        assert gpu_class(["NVIDIA GB200"]) == "gb200" and gpu_class(["NVIDIA B200"]) == "b200"
        assert gpu_class([H100]) == "h100" and gpu_class(["NVIDIA A100-SXM4-80GB"]) == "unknown"

    def test_pass_on_a_real_idle_h200(self):
        # The corpus H200 idles at 33 °C and 79.55 W.
        result = run("audit.monitoring.idle_thermals", gpus())
        assert result["status"] == "pass" and result["value"] == 79.55
        assert result["evidence"]["class"] == "h100"

    def test_warn_on_a_hot_idle_gpu(self):
        result = run("audit.monitoring.idle_thermals", q_x([27, 66], [72.0, 74.0]))
        assert result["status"] == "warn" and "GPU 1 66" in result["summary"]

    def test_fail_on_double_the_power_ceiling(self):
        result = run("audit.monitoring.idle_thermals", q_x([30, 30], [72.0, 320.0]))
        assert result["status"] == "fail" and "power" in result["summary"]

    def test_b200_class_has_a_higher_power_ceiling(self):
        assert run("audit.monitoring.idle_thermals", q_x([30], [200.0], name="NVIDIA B200"))["status"] == "pass"

    def test_skip_when_every_gpu_is_busy(self):
        result = run("audit.monitoring.idle_thermals", q_x([70], [650.0], util=100))
        assert result["status"] == "skip" and "busy" in result["summary"]

    def test_skip_without_nvidia_smi_and_error_on_garbage(self):
        no_rocm_smi = probe("rocm_smi", "", 127, missing=True)
        result = run("audit.monitoring.idle_thermals", {**gpus(False), **no_rocm_smi})
        assert result["status"] == "skip" and "no NVIDIA or AMD GPU tool" in result["summary"]
        garbage = probe("nvidia_smi_q_x", "\x00garbage", parser="nvidia-smi-q-x")
        assert run("audit.monitoring.idle_thermals", garbage)["status"] == "error"

    def test_amd_gpus_are_read_from_rocm_smi(self):
        # the corpus's idle 4 x MI300X (34-38 C, 131-137 W) against the MI300 class
        idle = probe("rocm_smi", read_corpus("rocm-smi", "rocm-smi-concise-mi300x-x4.txt"))
        result = run("audit.monitoring.idle_thermals", {**gpus(False), **idle})
        assert result["status"] == "pass" and result["value"] == 137.0 and result["evidence"]["class"] == "mi300"
        assert result["summary"] == "4 idle GPU(s) at most 38.0 °C and 137.0 W (mi300 ceilings 60 °C, 200 W)"
        hot = read_corpus("rocm-smi", "rocm-smi-concise-mi300x-x4.txt").replace("38.0°C", "71.0°C")
        result = run("audit.monitoring.idle_thermals", {**gpus(False), **probe("rocm_smi", hot)})
        assert result["status"] == "warn" and "GPU 3 71.0 °C" in result["summary"]
        # under load (the MI355X capture: GPU% 93-100) no GPU is idle
        loaded = probe("rocm_smi", read_corpus(
            "rocm-smi", "rocm-smi-concise-mi355x-x8-under-load-TRAILING-TABS-plus-amdsmi-version.txt"))
        assert run("audit.monitoring.idle_thermals", {**gpus(False), **loaded})["status"] == "skip"


def kernel_log(*sources: tuple[str, int, int, str], account: str = "uid=0 sudo=no") -> dict:
    text = f"## account {account}\n" + "".join(f"## source={name} rc={rc} lines={lines}\n{body}"
                                              for name, rc, lines, body in sources)
    return probe("monitoring_kernel_log", text, cmd="journalctl ... | grep Xid")


class TestXidHistory:
    def test_pass_on_a_clean_log(self):
        result = run("audit.monitoring.xid_history", kernel_log(("journalctl", 0, 0, ""), ("dmesg", 0, 812, "")))
        assert result["status"] == "pass" and result["value"] == 0 and "dmesg" in result["summary"]

    def test_fail_on_xid_79_from_a_real_journal(self):
        lines = [line + "\n" for line in read_corpus("kernel-xid", "journalctl-xid79-fallen-off-bus-german-locale.log")
                 .splitlines() if "NVRM: Xid" in line]
        result = run("audit.monitoring.xid_history", kernel_log(("journalctl", 0, 4000, "".join(lines))))
        assert result["status"] == "fail" and "Xid 79" in result["summary"] and "0000:01:00" in result["summary"]

    def test_same_event_in_two_logs_counts_once(self):
        line = "[ 1234.500000] NVRM: Xid (PCI:0000:19:00): 119, pid=7, name=python, Timeout after 6s of waiting\n"
        kern = "2026-11-30T00:20:00.1+00:00 node1 kernel: " + line
        both = kernel_log(("dmesg", 0, 10, line), ("/var/log/kern.log", 0, 3, kern))
        result = run("audit.monitoring.xid_history", both)
        assert result["status"] == "fail" and result["value"] == 1

    def test_application_xid_storm_passes_with_the_codes_named(self):
        # The corpus storm holds 629 Xid 13 and 7 Xid 43 lines (application errors) on 0000:38:00.
        text = read_corpus("kernel-xid", "dmesg-decode-iso-xid13-xid43-storm.log")
        xid = "".join(line + "\n" for line in text.splitlines() if "NVRM: Xid" in line)
        result = run("audit.monitoring.xid_history", kernel_log(("dmesg", 0, 636, xid)))
        assert result["status"] == "pass" and "Xid 13" in result["summary"] and "Xid 43" in result["summary"]

    def test_warn_on_a_contained_ecc_error(self):
        line = "[ 99.1] NVRM: Xid (PCI:0000:9b:00): 94, pid=1824, name=python, Contained: SM (0x1). RST: No\n"
        assert run("audit.monitoring.xid_history", kernel_log(("dmesg", 0, 50, line)))["status"] == "warn"

    def test_error_when_no_log_is_readable(self):
        result = run("audit.monitoring.xid_history", kernel_log(("journalctl", 0, 0, ""), ("dmesg", 1, 0, "")))
        assert result["status"] == "error" and "not a clean one" in result["summary"]

    def test_an_account_that_may_read_no_log_is_not_assessed(self):
        # A non-root evaluation account without sudo: dmesg_restrict and a root:adm kern.log keep it out.
        logs = kernel_log(("journalctl", 0, 0, ""), ("dmesg", 1, 0, ""), ("/var/log/kern.log", 1, 0, ""),
                          account="uid=1001 sudo=no")
        result = run("audit.monitoring.xid_history", logs)
        assert result["status"] == "skip" and "uid 1001, no sudo" in result["summary"]
        with_sudo = kernel_log(("journalctl", 0, 0, ""), ("dmesg", 1, 0, ""), account="uid=1001 sudo=yes")
        assert run("audit.monitoring.xid_history", with_sudo)["status"] == "error"

    def test_skip_without_grep(self):
        missing = probe("monitoring_kernel_log", "", rc=127, missing=True, tool="grep")
        assert run("audit.monitoring.xid_history", missing)["status"] == "skip"


SS_HEADLESS = (
    'LISTEN 0      4096         0.0.0.0:9400       0.0.0.0:*    users:(("dcgm-exporter",pid=2211,fd=3))\n'
    'LISTEN 0      4096               *:9100             *:*    users:(("node_exporter",pid=1911,fd=3))\n'
    'LISTEN 0      128          0.0.0.0:22         0.0.0.0:*    users:(("sshd",pid=911,fd=3))\n')


def listeners(ss: str, ps: str = "sshd\nsystemd\n") -> dict:
    return probe("monitoring_listeners", f"## ss\n{ss}## ps\n{ps}", cmd="ss -ltnpH; ps -eo comm=")


class TestExporters:
    def test_pass_with_both_exporters(self):
        result = run("audit.monitoring.exporters", {**listeners(SS_HEADLESS), **gpus()})
        assert result["status"] == "pass" and "dcgm-exporter" in result["summary"]

    def test_process_name_is_enough_without_ss_p(self):
        ss = "LISTEN 0      128          0.0.0.0:22         0.0.0.0:*\nLISTEN 0 4096 [::]:9100 [::]:*\n"
        result = run("audit.monitoring.exporters", {**listeners(ss, "sshd\ndcgm-exporter\n"), **gpus()})
        assert result["status"] == "pass"

    def test_fail_without_dcgm_exporter_on_a_gpu_node(self):
        ss = SS_HEADLESS.splitlines(keepends=True)[1] + SS_HEADLESS.splitlines(keepends=True)[2]
        result = run("audit.monitoring.exporters", {**listeners(ss), **gpus()})
        assert result["status"] == "fail" and "dcgm-exporter" in result["summary"]

    def test_warn_without_node_exporter_on_a_cpu_node(self):
        ss = "LISTEN 0      128          0.0.0.0:22         0.0.0.0:*\n"
        result = run("audit.monitoring.exporters", {**listeners(ss), **gpus(False)})
        assert result["status"] == "warn" and result["summary"].startswith("node-exporter")

    def test_skip_and_error(self):
        assert run("audit.monitoring.exporters", probe("monitoring_listeners", "", rc=127, missing=True,
                                                       tool="ss"))["status"] == "skip"
        assert run("audit.monitoring.exporters", listeners(""))["status"] == "error"


def cpufreq(governors: list[str], driver: str | None = "intel_pstate", cpus: int | None = None) -> dict:
    lines = [f"cpus: {len(governors) if cpus is None else cpus}"]
    lines += [f"/sys/devices/system/cpu/cpu{i}/cpufreq/scaling_governor: {g}" for i, g in enumerate(governors)]
    if driver:
        lines.append(f"driver: {driver}")
    return probe("monitoring_cpufreq", "\n".join(lines) + "\n")


class TestCpuGovernor:
    def test_pass_on_performance(self):
        assert run("audit.monitoring.cpu_governor", cpufreq(["performance"] * 4))["status"] == "pass"

    def test_warn_on_schedutil_and_on_powersave_under_an_active_pstate(self):
        result = run("audit.monitoring.cpu_governor", cpufreq(["performance", "schedutil"], "acpi-cpufreq"))
        assert result["status"] == "warn" and "schedutil on 1 CPU" in result["summary"]
        assert run("audit.monitoring.cpu_governor", cpufreq(["powersave"] * 2))["status"] == "warn"

    def test_fail_on_powersave_under_acpi_cpufreq(self):
        result = run("audit.monitoring.cpu_governor", cpufreq(["powersave"] * 2, "acpi-cpufreq"))
        assert result["status"] == "fail" and "lowest frequency" in result["summary"]

    def test_skip_without_cpufreq(self):
        result = run("audit.monitoring.cpu_governor", cpufreq([], None, cpus=2))
        assert result["status"] == "skip" and "cpufreq" in result["summary"]

    def test_error_on_unreadable_output(self):
        assert run("audit.monitoring.cpu_governor", probe("monitoring_cpufreq", "garbage\n"))["status"] == "error"


class TestJobAttribution:
    def test_pass_with_dcgm_job_stats_in_the_prolog(self):
        progs = programs(("Prolog", "/etc/slurm/prolog.sh", "#!/bin/sh\ndcgmi stats --jstart $SLURM_JOB_ID\n", True))
        result = run("audit.monitoring.job_attribution", {**gpus(), **dcgmi(), **progs})
        assert result["status"] == "pass" and "/etc/slurm/prolog.sh" in result["summary"]

    def test_pass_with_dcgm_exporter_job_mapping(self):
        text = "#!/bin/sh\necho $CUDA_VISIBLE_DEVICES > /var/run/dcgm-hpc-job-mapping/$SLURM_JOB_ID\n"
        progs = programs(("Prolog", "/etc/slurm/prolog.sh", text, True))
        assert run("audit.monitoring.job_attribution", {**gpus(), **dcgmi(), **progs})["status"] == "pass"

    def test_warn_when_the_tagging_is_only_in_a_comment(self):
        text = "#!/bin/sh\n# dcgmi stats --jstart $SLURM_JOB_ID  (disabled: nv-hostengine was too slow)\nexit 0\n"
        progs = programs(("Prolog", "/etc/slurm/prolog.sh", text, True))
        result = run("audit.monitoring.job_attribution", {**gpus(), **dcgmi(), **progs})
        assert result["status"] == "warn" and "/etc/slurm/prolog.sh" in result["summary"]

    def test_warn_without_hooks(self):
        result = run("audit.monitoring.job_attribution", {**gpus(), **dcgmi(), **programs()})
        assert result["status"] == "warn" and "no prolog or epilog" in result["summary"]

    def test_fail_when_the_hook_needs_a_missing_dcgmi(self):
        progs = programs(("Epilog", "/etc/slurm/epilog.sh", "#!/bin/sh\ndcgmi stats -x $SLURM_JOB_ID\n", True))
        result = run("audit.monitoring.job_attribution", {**gpus(), **dcgmi(missing=True), **progs})
        assert result["status"] == "fail"

    @pytest.mark.parametrize("has_gpu", [False, True])
    def test_skip_and_error(self, has_gpu):
        if not has_gpu:
            assert run("audit.monitoring.job_attribution", {**gpus(False), **programs()})["status"] == "skip"
        else:
            assert run("audit.monitoring.job_attribution", gpus())["status"] == "error"


def amd_node(count: int) -> dict:
    return probe("amd_node", f"amd_pci_gpus={count}\nend=ok\n", parser="probe-key-equals-value")


NO_SMI = probe("nvidia_smi_q_x", "", rc=127, missing=True, tool="nvidia-smi")
SS_AMD = ('LISTEN 0      4096               *:5000             *:*    users:(("amd-metrics-exp",pid=2311,fd=7))\n'
          + SS_HEADLESS.splitlines(keepends=True)[1] + SS_HEADLESS.splitlines(keepends=True)[2])


class TestExportersOnAmdNodes:
    def test_pass_with_amds_exporter(self):
        result = run("audit.monitoring.exporters", {**listeners(SS_AMD), **NO_SMI, **amd_node(8)})
        assert result["status"] == "pass" and "amd-metrics-exporter" in result["summary"]
        assert "dcgm-exporter" not in result["summary"], "an AMD node needs no dcgm-exporter"

    def test_fail_without_it(self):
        ss = "".join(SS_AMD.splitlines(keepends=True)[1:])
        result = run("audit.monitoring.exporters", {**listeners(ss), **NO_SMI, **amd_node(8)})
        assert result["status"] == "fail" and result["summary"].startswith("amd-metrics-exporter not listening")

    def test_process_name_alone_is_enough(self):
        ss = "".join(SS_AMD.splitlines(keepends=True)[1:])
        result = run("audit.monitoring.exporters", {**listeners(ss, "sshd\namd-metrics-exp\n"), **NO_SMI,
                                                    **amd_node(8)})
        assert result["status"] == "pass"

    def test_an_nvidia_node_does_not_need_it(self):
        result = run("audit.monitoring.exporters", {**listeners(SS_HEADLESS), **gpus(), **amd_node(0)})
        assert result["status"] == "pass"
