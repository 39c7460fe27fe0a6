"""Health audit checks: DCGM, HealthCheckProgram, prolog, auto-remediation."""

from __future__ import annotations

from tests.conftest import read_corpus
from tests.helpers import probe
from tests.unit.test_audit_scheduler import config, run

RUN = "test-run"
NHC_DRAIN = "#!/bin/bash\n/usr/sbin/nhc-genconf\nscontrol update nodename=$HOSTNAME state=drain reason=\"NHC: $1\"\n"


def programs(*items: tuple[str, str, str | None, bool], nhc_conf: str | None = None) -> dict:
    """(key, path, text or None for missing, executable) per program, as the probe prints them."""
    out = []
    for key, path, text, executable in items:
        if text is None:
            out.append(f"## program key={key} path={path} exists=no")
            continue
        out.append(f"## program key={key} path={path} exists=yes executable={'yes' if executable else 'no'}")
        out.append(text.rstrip("\n"))
    if nhc_conf is not None:
        out += ["## nhc path=/etc/nhc/nhc.conf", nhc_conf.rstrip("\n")]
    return probe("health_slurm_programs", "\n".join(out) + "\n", cmd="scontrol show config | ...")


def dcgmi(missing: bool = False) -> dict:
    if missing:
        return probe("health_dcgmi_version", "", rc=127, parser="dcgmi", missing=True, tool="dcgmi")
    return probe("health_dcgmi_version", read_corpus("dcgmi", "dcgmi-v-version-3.1.8.txt"), parser="dcgmi")


def gpus(present: bool = True) -> dict:
    if not present:
        return probe("nvidia_smi_q_x", "", rc=127, parser="nvidia-smi-q-x", missing=True, tool="nvidia-smi")
    return probe("nvidia_smi_q_x", read_corpus("nvidia-smi-q-x", "h200-single-vm-drv580.159.04-v13-EDITED-ids.xml"),
                 parser="nvidia-smi-q-x")


# The simulated provider's HealthCheckProgram as sim/slurmconf.py writes it: drain on failure, or report and exit 1.
SIM_DRAIN = ("#!/bin/sh\nexport SLURM_CONF=/etc/slurm/slurm.conf\nnode=${SLURMD_NODENAME:-$(hostname -s)}\n"
             "failed=$(/usr/bin/python3 -IS /opt/hc.py check_nv_xid check_dcgmi) || exit 1\n"
             "[ -n \"$failed\" ] || exit 0\nprintf '%s\\n' \"$failed\" | while IFS= read -r reason; do\n"
             "  scontrol update nodename=\"$node\" state=drain reason=\"$reason\"\ndone\n")
SIM_EXIT_1 = "#!/bin/sh\nexec /usr/bin/python3 -IS /opt/hc.py --report check_nv_xid check_dcgmi\n"
SIM_NOTHING = "#!/bin/sh\n# Node health check (Slurm HealthCheckProgram)\nexit 0\n"


def timing(seconds: float = 0.4, rc: int = 0, errors: tuple[str, ...] = (), skipped: str | None = None) -> dict:
    """health_prolog_timing: the timed empty job step."""
    if skipped:
        return probe("health_prolog_timing", f"skipped={skipped}\n", parser="probe-key-equals-value")
    text = f"rc={rc}\nstart=1000.10\nend={1000.10 + seconds:.2f}\n" + "".join(f"err={e}\n" for e in errors)
    return probe("health_prolog_timing", text, parser="probe-key-equals-value")


class TestDcgm:
    def test_pass_when_the_health_check_calls_dcgmi(self):
        progs = programs(("HealthCheckProgram", "/usr/sbin/nhc", NHC_DRAIN, True),
                         nhc_conf="* || check_dcgmi\n* || check_hw_physmem 1024k 1TB\n")
        result = run("audit.health.dcgm", {**gpus(), **dcgmi(), **progs})
        assert result["status"] == "pass" and "3.1.8" in result["summary"]

    def test_warn_when_the_health_check_ignores_dcgm(self):
        progs = programs(("HealthCheckProgram", "/usr/sbin/nhc", NHC_DRAIN, True))
        result = run("audit.health.dcgm", {**gpus(), **dcgmi(), **progs})
        assert result["status"] == "warn" and "never calls dcgmi" in result["summary"]

    def test_fail_when_dcgmi_is_missing_on_a_gpu_node(self):
        result = run("audit.health.dcgm", {**gpus(), **dcgmi(missing=True), **programs()})
        assert result["status"] == "fail" and "not installed" in result["summary"]

    def test_skip_without_gpus(self):
        result = run("audit.health.dcgm", {**gpus(False), **dcgmi(missing=True), **programs()})
        assert result["status"] == "skip" and "no NVIDIA GPU" in result["summary"]

    def test_error_when_dcgmi_prints_no_version(self):
        result = run("audit.health.dcgm", {**gpus(), **probe("health_dcgmi_version", "Hostengine build info:\n",
                                                             parser="dcgmi"), **programs()})
        assert result["status"] == "error"


class TestHealthCheckProgram:
    def test_pass_when_periodic_and_draining(self):
        progs = programs(("HealthCheckProgram", "/etc/slurm/hc.sh", NHC_DRAIN, True))
        result = run("audit.health.healthcheck_program", {**config(HealthCheckProgram="/etc/slurm/hc.sh"), **progs})
        assert result["status"] == "pass" and result["value"] == 300

    def test_nhc_by_name_counts_as_draining(self):
        progs = programs(("HealthCheckProgram", "/usr/sbin/nhc", "#!/bin/bash\n. /etc/nhc/scripts/common.nhc\n", True))
        assert run("audit.health.healthcheck_program", {**config(), **progs})["status"] == "pass"

    def test_fail_without_a_program(self):
        # The corpus cluster (Slurm 23.02.2) has HealthCheckProgram (null).
        text = read_corpus("slurm", "scontrol-show-config.txt")
        result = run("audit.health.healthcheck_program",
                     {**probe("scheduler_slurm_config", text, parser="slurm"), **programs()})
        assert result["status"] == "fail" and "no HealthCheckProgram" in result["summary"]

    def test_fail_when_the_program_is_missing_on_the_node(self):
        progs = programs(("HealthCheckProgram", "/usr/sbin/nhc", None, False))
        result = run("audit.health.healthcheck_program", {**config(), **progs})
        assert result["status"] == "fail" and "missing" in result["summary"]

    def test_an_amd_node_needs_a_check_of_its_amd_gpus(self):
        # 8 AMD GPUs on the bus: the provider's dcgmi/Xid checks find nothing wrong with them
        amd = probe("amd_node", "amd_pci_gpus=8\nend=ok\n", parser="probe-key-equals-value")
        nvidia_only = programs(("HealthCheckProgram", "/etc/slurm/hc", SIM_DRAIN, True))
        result = run("audit.health.healthcheck_program", {**config(HealthCheckProgram="/etc/slurm/hc"), **nvidia_only,
                                                          **amd})
        assert result["status"] == "warn"
        assert "checks no AMD GPU (only NVIDIA checks: check_dcgmi, check_nv_xid)" in result["summary"]
        amd_checks = programs(("HealthCheckProgram", "/etc/slurm/hc",
                               SIM_DRAIN.replace("check_nv_xid check_dcgmi", "check_amd_ras check_amd_gpu_count=8"),
                               True))
        result = run("audit.health.healthcheck_program", {**config(HealthCheckProgram="/etc/slurm/hc"), **amd_checks,
                                                          **amd})
        assert result["status"] == "pass" and "check_amd_gpu_count, check_amd_ras" in result["summary"]

    def test_warn_when_it_never_drains(self):
        progs = programs(("HealthCheckProgram", "/etc/slurm/hc.sh", "#!/bin/sh\nnvidia-smi -L || exit 1\n", True))
        result = run("audit.health.healthcheck_program", {**config(HealthCheckProgram="/etc/slurm/hc.sh"), **progs})
        assert result["status"] == "warn" and "never drains" in result["summary"]

    def test_warn_when_interval_is_zero(self):
        progs = programs(("HealthCheckProgram", "/usr/sbin/nhc", NHC_DRAIN, True))
        result = run("audit.health.healthcheck_program", {**config(HealthCheckInterval="0 sec"), **progs})
        assert result["status"] == "warn" and "HealthCheckInterval=0" in result["summary"]

    def test_skip_when_scontrol_fails_in_the_program_probe(self):
        failed = probe("health_slurm_programs", "## scontrol rc=1\n")
        assert run("audit.health.healthcheck_program", {**config(), **failed})["status"] == "skip"

    def test_the_sim_providers_draining_program_passes(self):
        progs = programs(("HealthCheckProgram", "/sim/etc/slurm/healthcheck", SIM_DRAIN, True))
        result = run("audit.health.healthcheck_program",
                     {**config(HealthCheckProgram="/sim/etc/slurm/healthcheck", HealthCheckNodeState="ANY"), **progs})
        assert result["status"] == "pass", result["summary"]
        assert "check_dcgmi" in result["summary"] and result["evidence"]["drains"] is True

    def test_warn_when_failures_go_nowhere(self):
        # prints "ERROR:  nhc:  Health check failed" and exits 1: slurmd ignores it, nothing drains the node
        progs = programs(("HealthCheckProgram", "/sim/etc/slurm/healthcheck", SIM_EXIT_1, True))
        result = run("audit.health.healthcheck_program", {**config(HealthCheckProgram="/sim/etc/slurm/healthcheck"),
                                                          **progs})
        assert result["status"] == "warn" and "never drains the node" in result["summary"]
        assert "checks no GPU" not in result["summary"]

    def test_warn_when_it_checks_nothing(self):
        progs = programs(("HealthCheckProgram", "/sim/etc/slurm/healthcheck", SIM_NOTHING, True))
        result = run("audit.health.healthcheck_program", {**config(HealthCheckProgram="/sim/etc/slurm/healthcheck"),
                                                          **gpus(), **progs})
        assert result["status"] == "warn" and "checks no GPU" in result["summary"]

    def test_warn_when_it_skips_busy_nodes(self):
        progs = programs(("HealthCheckProgram", "/sim/etc/slurm/healthcheck", SIM_DRAIN, True))
        result = run("audit.health.healthcheck_program",
                     {**config(HealthCheckProgram="/sim/etc/slurm/healthcheck", HealthCheckNodeState="IDLE"), **progs})
        assert result["status"] == "warn" and "HealthCheckNodeState=IDLE skips nodes that have jobs" in result[
            "summary"]
        cycle = run("audit.health.healthcheck_program", {**config(HealthCheckProgram="/sim/etc/slurm/healthcheck",
                                                                  HealthCheckNodeState="ALLOC,MIXED,CYCLE"), **progs})
        assert cycle["status"] == "pass", cycle["summary"]

    def test_nhc_without_a_readable_config_is_not_judged_on_its_gpu_checks(self):
        progs = programs(("HealthCheckProgram", "/usr/sbin/nhc", "#!/bin/bash\n# NHC\n", True))
        result = run("audit.health.healthcheck_program", {**config(), **gpus(), **progs})
        assert result["status"] == "pass" and "runs NHC" in result["summary"]

    def test_error_when_the_program_was_not_reported(self):
        assert run("audit.health.healthcheck_program", {**config(), **programs()})["status"] == "error"


class TestProlog:
    def test_pass_without_a_prolog(self):
        result = run("audit.health.prolog", {**config(), **programs()})
        assert result["status"] == "pass" and "no prolog" in result["summary"]

    def test_pass_with_a_quick_prolog(self):
        progs = programs(("Prolog", "/etc/slurm/prolog.sh", "#!/bin/sh\nnvidia-smi -pm 1\nsleep 2\n", True))
        result = run("audit.health.prolog", {**config(Prolog="/etc/slurm/prolog.sh"), **progs})
        assert result["status"] == "pass"

    def test_warn_on_long_diagnostics_and_sleeps(self):
        text = "#!/bin/sh\ndcgmi diag -r 3 -j > /tmp/diag.json\nsleep 120\n"
        progs = programs(("Prolog", "/etc/slurm/prolog.sh", text, True))
        result = run("audit.health.prolog", {**config(Prolog="/etc/slurm/prolog.sh"), **progs})
        assert result["status"] == "warn"
        assert "dcgmi diag -r 3" in result["summary"] and "sleeps 120 s" in result["summary"]

    def test_fail_when_the_prolog_outlives_prolog_epilog_timeout(self):
        text = "#!/bin/sh\nsleep 12  # the site's setup takes this long\nexit 0\n"
        progs = programs(("Prolog", "/sim/etc/slurm/prolog", text, True))
        failed = timing(10.2, rc=1, errors=("srun: error: Task launch for StepId=3.0 failed on node node2: Job "
                                            "prolog failed", "srun: error: Application launch failed: Job prolog "
                                            "failed"))
        result = run("audit.health.prolog", {**config(Prolog="/sim/etc/slurm/prolog", PrologEpilogTimeout="10"),
                                             **progs, **failed})
        assert result["status"] == "fail", result["summary"]
        assert "failed after 10.2 s" in result["summary"] and '"Prolog error"' in result["summary"]
        assert "past PrologEpilogTimeout=10 s" in result["summary"]

    def test_fail_when_the_epilog_outlives_prolog_epilog_timeout(self):
        progs = programs(("Epilog", "/etc/slurm/epilog", "#!/bin/sh\nsleep 30\n", True))
        result = run("audit.health.prolog", {**config(Epilog="/etc/slurm/epilog", PrologEpilogTimeout="20"),
                                             **progs, **timing()})
        assert result["status"] == "fail" and '"Epilog error"' in result["summary"]

    def test_unset_prolog_epilog_timeout_waits_for_ever(self):
        # 22.05 prints 65534 when PrologEpilogTimeout is unset: a long prolog only delays jobs
        progs = programs(("Prolog", "/etc/slurm/prolog.sh", "#!/bin/sh\nsleep 40\n", True))
        result = run("audit.health.prolog", {**config(Prolog="/etc/slurm/prolog.sh", PrologEpilogTimeout="65534"),
                                             **progs, **timing(40.3)})
        assert result["status"] == "warn", result["summary"]
        assert "an empty job step here took 40.3 s" in result["summary"] and result["value"] == 40.3

    def test_pass_reports_the_measured_time(self):
        progs = programs(("Prolog", "/etc/slurm/prolog.sh", "#!/bin/sh\nexit 0\n", True))
        result = run("audit.health.prolog", {**config(Prolog="/etc/slurm/prolog.sh"), **progs, **timing(0.4)})
        assert result["status"] == "pass" and "took 0.4 s" in result["summary"]
        skipped = run("audit.health.prolog", {**config(Prolog="/etc/slurm/prolog.sh"), **progs,
                                              **timing(skipped="actions are switched off")})
        assert skipped["status"] == "pass" and "not timed (actions are switched off)" in skipped["summary"]

    def test_fail_when_the_prolog_is_missing(self):
        progs = programs(("Prolog", "/etc/slurm/prolog.sh", None, False))
        result = run("audit.health.prolog", {**config(Prolog="/etc/slurm/prolog.sh"), **progs})
        assert result["status"] == "fail" and "missing" in result["summary"]

    def test_skip_and_error(self):
        assert run("audit.health.prolog", {**probe("scheduler_slurm_config", "", rc=127, missing=True),
                                           **programs()})["status"] == "skip"
        assert run("audit.health.prolog", {**config(Prolog="/p.sh"), **probe("health_slurm_programs", "",
                                                                              timed_out=True, rc=None)})[
            "status"] == "error"


class TestAutoRemediation:
    def test_pass_with_return_to_service(self):
        result = run("audit.health.auto_remediation", {**config(ReturnToService="2")})
        assert result["status"] == "pass" and result["value"] == 2

    def test_warn_with_a_reboot_program_but_manual_resume(self):
        text = read_corpus("slurm", "scontrol-show-config.txt")  # ReturnToService 1, RebootProgram /sbin/reboot
        assert run("audit.health.auto_remediation", probe("scheduler_slurm_config", text, parser="slurm"))[
            "status"] == "pass"
        result = run("audit.health.auto_remediation", config(ReturnToService="0", RebootProgram="/sbin/reboot"))
        assert result["status"] == "warn" and "RebootProgram" in result["summary"]

    def test_warn_when_rebooted_nodes_return_unchecked(self):
        result = run("audit.health.auto_remediation", config(ReturnToService="2", HealthCheckProgram="(null)"))
        assert result["status"] == "warn" and "back in service unchecked" in result["summary"]

    def test_return_to_service_1_explains_what_returns(self):
        result = run("audit.health.auto_remediation", config(ReturnToService="1"))
        assert result["status"] == "pass" and "set DOWN for not responding" in result["summary"]

    def test_fail_when_nothing_returns_nodes(self):
        assert run("audit.health.auto_remediation", config(ReturnToService="0"))["status"] == "fail"

    def test_skip_and_error(self):
        assert run("audit.health.auto_remediation", probe("scheduler_slurm_config", "", rc=127,
                                                          missing=True))["status"] == "skip"
        assert run("audit.health.auto_remediation", config(ReturnToService="(null)"))["status"] == "error"
