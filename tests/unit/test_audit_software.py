"""Software stack & container checks: every check × every status, from probe outputs written here in
the shape the probes in checks/probes/software.yml print (Slurm 22.05 `srun --mpi=list`, Lmod 8.7,
enroot 3.5 and its `enroot import`, Docker 28, Apptainer 1.3, NVIDIA HPC SDK 24.5 layout)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from clustereval import yamldata
from clustereval.checks.audit_software import (
    import_problem,
)
from tests.helpers import judge as run
from tests.helpers import probe

GPU = "nvidia_driver=loaded\nnvidia_pci_gpus=8\n"
NO_GPU = "nvidia_pci_gpus=0\n"
# Slurm 22.05 prints this (Debian 12 slurm-wlm with the PMIx v4 plugin).
MPI_PMIX = ("mpi_list=MPI plugin types are...\nmpi_list=\tcray_shasta\nmpi_list=\tnone\nmpi_list=\tpmi2\n"
            "mpi_list=\tpmix\nmpi_list=specific pmix plugin versions available: pmix_v4\n")
NVHPC = "/opt/nvidia/hpc_sdk/Linux_x86_64/24.5"
HPC_SDK = (f"nvhpc_release={NVHPC}\nnvhpc_compiler={NVHPC}/compilers/bin/nvc\n"
           f"nvhpc_compiler={NVHPC}/compilers/bin/nvc++\nnvhpc_compiler={NVHPC}/compilers/bin/nvfortran\n"
           "nvhpc_nvc=24.5-0\n")
CONTAINERS = ("srun=yes\npyxis_flag=--container-image=[USER@][REGISTRY#]IMAGE[:TAG]|PATH\n"
              "plugstack=required /usr/local/lib/slurm/spank_pyxis.so\nenroot_rc=0\nenroot_version=3.5.0\n"
              "enroot_mount=/etc/nccl /etc/nccl none x-create=dir,bind,ro,nosuid,nodev,noexec,nofail,private\n"
              "userns_max=2061408\nuserns_clone=1\napparmor_userns=\n"
              "docker_rc=0\ndocker_version=28.2.2|28.2.2\ndocker_runtimes=io.containerd.runc.v2 nvidia runc \n"
              "apptainer_rc=0\napptainer_version=apptainer version 1.3.4\n")
LOGIN = ("login_path=/usr/local/cuda-12.4/bin:/usr/bin:/bin\nlogin_nvcc=/usr/local/cuda-12.4/bin/nvcc\n"
         "login_mpirun=/opt/hpcx/ompi/bin/mpirun\nlogin_ompi_info=\nlogin_ucx_info=\nlogin_hpcx=/opt/hpcx\n"
         "login_nvcc_release=12.4\nmodule_cmd=yes\n"
         "module_version=Modules based on Lua: Version 8.7.14  2022-11-08 13:59 -06:00\nmodule_rc=0\n"
         "module_avail=/opt/modulefiles:\nmodule_avail=cuda/12.4\nmodule_avail=hpcx/2.19\nmodule_avail=nccl/2.21.5\n")
# What software_enroot_import prints for a good import (enroot 3.5, busybox from Docker Hub): the tail is
# mksquashfs's summary, as enroot passes it on.
WORKDIR = "/tmp/clustereval-enroot-Xq3d9LmP0a"
IMPORT_OK = (f"enroot_import_image=docker://busybox:1.36\nenroot_import_dir={WORKDIR}\nenroot_import_rc=0\n"
             "enroot_import_seconds=3.42\nenroot_import_sqsh=yes\nenroot_import_bytes=2215936\n"
             "enroot_import_out=[INFO] Creating squashfs filesystem...\n"
             "enroot_import_out=Parallel mksquashfs: Using 64 processors\n"
             f"enroot_import_out=Creating 4.0 filesystem on {WORKDIR}/probe.sqsh, block size 131072.\n"
             "enroot_import_out=Number of gids 1\nenroot_import_out=\troot (0)\n")
IMPORT_HEAD = (f"enroot_import_image=docker://busybox:1.36\nenroot_import_dir={WORKDIR}\n"
               "enroot_import_out=[INFO] Querying registry for permission grant\n")
RATE_LIMITED = (IMPORT_HEAD + "enroot_import_rc=1\nenroot_import_seconds=1.20\nenroot_import_sqsh=no\n"
                "enroot_import_out=[INFO] Fetching image manifest\n"
                "enroot_import_out=[ERROR] URL https://registry-1.docker.io/v2/library/busybox/manifests/1.36 "
                "returned error code: 429 Too Many Requests\n"
                "enroot_import_error=[ERROR] URL https://registry-1.docker.io/v2/library/busybox/manifests/1.36 "
                "returned error code: 429 Too Many Requests\n")
BATCH = ("batch_rc=0\nbatch_path=/usr/local/cuda-12.4/bin:/usr/bin:/bin\nbatch_nvcc=/usr/local/cuda-12.4/bin/nvcc\n"
         "batch_mpirun=/opt/hpcx/ompi/bin/mpirun\nbatch_ompi_info=\nbatch_ucx_info=\n")


def probes(libs: str = GPU + "nccl_lib=/usr/lib/x86_64-linux-gnu/libnccl.so.2.21.5\n" + MPI_PMIX + HPC_SDK,
           containers: str = CONTAINERS, env: str = LOGIN + BATCH, enroot_import: str = IMPORT_OK) -> dict:
    return {**probe("software_libs", libs), **probe("software_containers", containers),
            **probe("software_batch_env", env), **probe("software_enroot_import", enroot_import)}


def without(text: str, *prefixes: str) -> str:
    return "".join(line + "\n" for line in text.splitlines() if not line.startswith(prefixes))


def test_healthy_node_passes_every_software_check_but_the_topology_file_skip():
    healthy = probes()
    for check_id in ("audit.software.nccl", "audit.software.mpi_pmix", "audit.software.hpc_sdk",
                     "audit.software.lmod", "audit.software.batch_path", "audit.software.pyxis",
                     "audit.software.enroot", "audit.software.enroot_import", "audit.software.docker",
                     "audit.software.apptainer"):
        assert run(check_id, healthy)["status"] == "pass", check_id
    assert run("audit.software.nccl_topo_container", healthy)["status"] == "skip"


NO_GPU_LIBS = NO_GPU + MPI_PMIX


class TestNccl:
    def test_old_version_warns_against_the_baseline(self):
        result = run("audit.software.nccl", probes(GPU + "nccl_lib=/usr/lib/x86_64-linux-gnu/libnccl.so.2.14.3\n"))
        assert result["status"] == "warn" and result["expected"]["min"] == "2.18"

    def test_unreadable_version_warns_never_passes(self):
        result = run("audit.software.nccl", probes(GPU + "nccl_lib=/opt/x/libnccl.so.2\n"))
        assert result["status"] == "warn" and result["value"] == "unknown"

    def test_header_version_fills_in(self):
        libs = GPU + "nccl_lib=/opt/x/libnccl.so.2\nnccl_h_MAJOR=2\nnccl_h_MINOR=21\nnccl_h_PATCH=5\n"
        assert run("audit.software.nccl", probes(libs))["value"] == "2.21.5"

    def test_missing_on_a_gpu_node_without_containers_fails(self):
        result = run("audit.software.nccl", probes(GPU, containers="userns_max=1\n"))
        assert result["status"] == "fail"

    def test_missing_with_a_container_runtime_warns(self):
        assert run("audit.software.nccl", probes(GPU))["status"] == "warn"

    def test_gpu_less_host_skips(self):
        result = run("audit.software.nccl", probes(NO_GPU_LIBS))
        assert result["status"] == "skip" and "no NVIDIA GPU" in result["summary"]

    def test_truncated_output_and_timeout_are_errors(self):
        assert run("audit.software.nccl", probes("nvidia_driver=loaded\n"))["status"] == "error"
        assert run("audit.software.nccl", probe("software_libs", timed_out=True, timeout=30))["status"] == "error"


class TestMpiPmix:
    def test_pmi2_only_warns(self):
        libs = "mpi_list=MPI plugin types are...\nmpi_list=\tnone\nmpi_list=\tpmi2\n"
        assert run("audit.software.mpi_pmix", probes(libs))["status"] == "warn"

    def test_no_mpi_plugin_fails(self):
        libs = "mpi_list=MPI plugin types are...\nmpi_list=\tnone\nmpi_list=\tcray_shasta\n"
        assert run("audit.software.mpi_pmix", probes(libs))["status"] == "fail"

    def test_no_srun_or_no_slurm_config_skips(self):
        assert run("audit.software.mpi_pmix", probes(GPU))["status"] == "skip"
        libs = "mpi_list=srun: fatal: Could not establish a configuration source\n"
        assert run("audit.software.mpi_pmix", probes(libs))["status"] == "skip"

    def test_unrecognisable_output_is_an_error(self):
        assert run("audit.software.mpi_pmix", probes("mpi_list=Segmentation fault\n"))["status"] == "error"

    def test_pmix_with_mpirun_passes(self):
        result = run("audit.software.mpi_pmix", probes())
        assert result["status"] == "pass" and "mpirun /" in result["summary"]

    def test_pmix_without_mpirun_on_the_login_path_is_not_a_pass(self):
        # srun direct launch works, but a required piece (mpirun) is missing: the summary says so, so no pass.
        env = without(LOGIN, "login_mpirun=") + "login_mpirun=\n" + BATCH
        result = run("audit.software.mpi_pmix", probes(env=env))
        assert result["status"] == "warn" and "no mpirun on the login PATH" in result["summary"]


class TestHpcSdk:
    def test_absent_warns(self):
        assert run("audit.software.hpc_sdk", probes(GPU))["status"] == "warn"

    def test_old_release_warns(self):
        old = GPU + HPC_SDK.replace("24.5", "23.1")
        result = run("audit.software.hpc_sdk", probes(old))
        assert result["status"] == "warn" and result["value"] == "23.1"

    def test_incomplete_payload_and_broken_compiler_fail(self):
        assert run("audit.software.hpc_sdk", probes(GPU + without(HPC_SDK, f"nvhpc_compiler={NVHPC}/compilers/bin/"
                                                                            "nvfortran")))["status"] == "fail"
        assert run("audit.software.hpc_sdk", probes(GPU + without(HPC_SDK, "nvhpc_nvc=")))["status"] == "fail"

    def test_a_node_without_nvidia_gpus_skips(self):
        # an AMD or CPU node: NVIDIA's compilers are not asked of it
        result = run("audit.software.hpc_sdk", probes(NO_GPU))
        assert result["status"] == "skip" and "no NVIDIA GPU" in result["summary"]

    def test_skip_and_error(self):
        assert run("audit.software.hpc_sdk", probe("software_libs", rc=127, missing=True))["status"] == "skip"
        assert run("audit.software.hpc_sdk", probe("software_libs", timed_out=True, timeout=30))["status"] == "error"


class TestLmod:
    def test_no_module_command_warns(self):
        env = without(LOGIN, "module_") + BATCH
        assert run("audit.software.lmod", probes(env=env))["status"] == "warn"

    def test_no_gpu_stack_modules_warns(self):
        env = without(LOGIN, "module_avail=") + "module_avail=/opt/modulefiles:\nmodule_avail=gcc/12\n"
        assert run("audit.software.lmod", probes(env=env))["status"] == "warn"

    def test_failing_avail_fails(self):
        env = (without(LOGIN, "module_avail=", "module_rc=") + "module_rc=1\n"
               "module_avail=Lmod has detected the following error: Unable to load module because of error\n")
        assert run("audit.software.lmod", probes(env=env))["status"] == "fail"

    def test_environment_modules_count(self):
        env = LOGIN.replace("Modules based on Lua: Version 8.7.14  2022-11-08 13:59 -06:00",
                            "Modules Release 5.2.0 (2022-11-08)")
        assert "Environment Modules" in run("audit.software.lmod", probes(env=env))["summary"]

    def test_skip_and_error(self):
        assert run("audit.software.lmod", probe("software_batch_env", rc=127, missing=True))["status"] == "skip"
        assert run("audit.software.lmod", probes(env="bash: garbage\n"))["status"] == "error"


class TestBatchPath:
    def test_nvcc_lost_in_the_batch_step_fails(self):
        env = LOGIN + without(BATCH, "batch_nvcc=") + "batch_nvcc=\n"
        result = run("audit.software.batch_path", probes(env=env))
        assert result["status"] == "fail" and "nvcc" in result["summary"]

    def test_another_nvcc_in_the_batch_step_warns(self):
        env = LOGIN + without(BATCH, "batch_nvcc=") + "batch_nvcc=/usr/local/bin/nvcc\n"
        assert run("audit.software.batch_path", probes(env=env))["status"] == "warn"

    def test_no_toolkit_anywhere_warns(self):
        env = without(LOGIN, "login_nvcc") + "login_nvcc=\n" + without(BATCH, "batch_nvcc") + "batch_nvcc=\n"
        assert run("audit.software.batch_path", probes(env=env))["status"] == "warn"

    def test_step_not_started_when_actions_are_off(self):
        env = LOGIN + "batch_skipped=actions are switched off (clustereval_audit_allow_actions=false)\n"
        result = run("audit.software.batch_path", probes(env=env))
        assert result["status"] == "skip" and "switched off" in result["summary"]

    def test_step_that_cannot_start_skips(self):
        env = LOGIN + ("batch_rc=1\nbatch_err=srun: error: Unable to allocate resources: "
                       "Requested node configuration is not available\n")
        result = run("audit.software.batch_path", probes(env=env))
        assert result["status"] == "skip" and "could not start" in result["summary"]

    def test_gpu_less_host_skips_and_hung_step_errors(self):
        assert run("audit.software.batch_path", probes(NO_GPU_LIBS))["status"] == "skip"
        assert run("audit.software.batch_path", probes(env=LOGIN + "batch_rc=124\n"))["status"] == "error"


class TestPyxis:
    def test_listed_but_not_loaded_fails(self):
        assert run("audit.software.pyxis", probes(containers=without(CONTAINERS, "pyxis_flag")))["status"] == "fail"

    def test_absent_warns(self):
        containers = without(CONTAINERS, "pyxis_flag", "plugstack")
        assert run("audit.software.pyxis", probes(containers=containers))["status"] == "warn"

    def test_no_srun_skips_and_truncated_output_errors(self):
        assert run("audit.software.pyxis", probes(containers="userns_max=1\n"))["status"] == "skip"
        assert run("audit.software.pyxis", probes(containers="srun=yes\n"))["status"] == "error"


class TestEnroot:
    def test_disabled_user_namespaces_fail(self):
        containers = CONTAINERS.replace("userns_max=2061408", "userns_max=0")
        assert run("audit.software.enroot", probes(containers=containers))["status"] == "fail"

    def test_failing_version_fails_and_unreadable_version_warns(self):
        broken = CONTAINERS.replace("enroot_rc=0", "enroot_rc=1")
        assert run("audit.software.enroot", probes(containers=broken))["status"] == "fail"
        odd = CONTAINERS.replace("enroot_version=3.5.0", "enroot_version=dev-build")
        assert run("audit.software.enroot", probes(containers=odd))["value"] == "unknown"

    def test_absent_warns(self):
        assert run("audit.software.enroot", probes(containers=without(CONTAINERS, "enroot_")))["status"] == "warn"

    def test_pass_points_to_the_import_check(self):
        result = run("audit.software.enroot", probes())
        assert result["status"] == "pass" and "audit.software.enroot_import" in result["summary"]

    def test_skip_and_error(self):
        assert run("audit.software.enroot", probe("software_containers", rc=127, missing=True))["status"] == "skip"
        hung = probe("software_containers", timed_out=True, timeout=40)
        assert run("audit.software.enroot", hung)["status"] == "error"


def imported(output: str) -> dict:
    return run("audit.software.enroot_import", probes(enroot_import=output))


def failed_import(rc: int, *lines: str, error: str = "", seconds: str = "2.00") -> str:
    """The probe's output for an import that ended with status ``rc`` after printing ``lines``."""
    out = IMPORT_HEAD + f"enroot_import_rc={rc}\nenroot_import_seconds={seconds}\nenroot_import_sqsh=no\n"
    out += "".join(f"enroot_import_out={line}\n" for line in lines)
    return out + (f"enroot_import_error={error}\n" if error else "")


class TestEnrootImport:
    def test_import_passes_with_its_time_and_size(self):
        result = imported(IMPORT_OK)
        assert result["status"] == "pass" and result["value"] == 3.42 and result["unit"] == "s"
        assert "busybox:1.36" in result["summary"] and "2.1 MiB" in result["summary"]
        assert result["evidence"]["squashfs_bytes"] == 2215936 and result["evidence"]["workdir"] == WORKDIR

    def test_rate_limit_warns_with_enroot_error_line_and_tail(self):
        result = imported(RATE_LIMITED)
        assert result["status"] == "warn" and result["value"] is None
        assert "HTTP 429" in result["summary"] and "returned error code: 429 Too Many Requests" in result["summary"]
        assert result["evidence"]["output_tail"][-1].startswith("[ERROR] URL https://registry-1.docker.io")
        assert result["evidence"]["rc"] == 1 and "rate limit" in result["evidence"]["cause"]

    @pytest.mark.parametrize("lines, cause", [
        (["curl: (6) Could not resolve host: registry-1.docker.io"], "does not resolve"),
        (["curl: (7) Failed to connect to registry-1.docker.io port 443 after 2 ms: Couldn't connect to server"],
         "no connection"),
        (["curl: (60) SSL certificate problem: self-signed certificate in certificate chain"], "TLS"),
        (["[ERROR] URL https://nvcr.io/proxy_auth returned error code: 401 Unauthorized"], "HTTP 401"),
        (["[ERROR] Command not found: mksquashfs"], "squashfs-tools are missing"),
        (["[ERROR] Command not found: parallel"], "parallel, which enroot needs"),
        # mksquashfs on a full disk: its banner comes after the errors (stdio buffers it), no [ERROR] line.
        (["[INFO] Creating squashfs filesystem...", "Write failed because No space left on device",
          "FATAL ERROR: Failed to write to output filesystem", "Parallel mksquashfs: Using 64 processors",
          "Creating 4.0 filesystem on /tmp/clustereval-enroot-Xq3d9LmP0a/probe.sqsh, block size 131072."],
         "no space left"),
        (["enroot-aufs2ovlfs: failed to set capabilities: Operation not permitted"], "permission denied"),
    ])
    def test_failures_warn_and_say_why(self, lines, cause):
        error = next((line for line in reversed(lines) if line.startswith(("[ERROR]", "curl: (", "FATAL"))), "")
        result = imported(failed_import(1, *lines, error=error))
        assert result["status"] == "warn" and cause in result["summary"], result["summary"]
        assert (error or lines[-1])[:60] in result["summary"]

    def test_unrecognised_failure_still_warns_with_the_last_line(self):
        result = imported(failed_import(2, "something odd happened"))
        assert result["status"] == "warn" and "something odd happened" in result["summary"]
        assert result["evidence"]["cause"] is None

    @pytest.mark.parametrize("rc", [124, 137])
    def test_timeout_warns_saying_so(self, rc):
        result = imported(failed_import(rc, "[INFO] Downloading 13 missing layers...", seconds="130.02"))
        assert result["status"] == "warn" and "did not finish within 120 s" in result["summary"]
        assert result["value"] == 130.02

    def test_image_written_but_nonzero_status_warns(self):
        output = IMPORT_OK.replace("enroot_import_rc=0", "enroot_import_rc=1")
        result = imported(output)
        assert result["status"] == "warn" and "status 1" in result["summary"] and "Pyxis" in result["summary"]

    def test_status_zero_without_an_image_warns(self):
        output = IMPORT_OK.replace("enroot_import_sqsh=yes\nenroot_import_bytes=2215936\n", "enroot_import_sqsh=no\n")
        result = imported(output)
        assert result["status"] == "warn" and "no squashfs" in result["summary"]

    def test_no_temporary_directory_warns(self):
        output = ("enroot_import_image=docker://busybox:1.36\nenroot_import_setup_error=mktemp: failed to create "
                  "directory via template '/tmp/clustereval-enroot-XXXXXXXXXX': No space left on device\n")
        result = imported(output)
        assert result["status"] == "warn" and "temporary directory" in result["summary"]

    @pytest.mark.parametrize("why", [
        "actions are switched off (clustereval_audit_allow_actions=false)",
        "actions were not allowed (no CLUSTEREVAL_ALLOW_ACTIONS=1 in the environment)",
        "no image to import (clustereval_audit_enroot_image is empty)",
        "enroot is not installed"])
    def test_import_not_tried_skips_never_passes(self, why):
        result = imported(f"enroot_import_skipped={why}\n")
        assert result["status"] == "skip" and result["summary"] == f"import not tried: {why}"

    def test_directory_left_behind_is_said(self):
        result = imported(IMPORT_OK + f"enroot_import_left={WORKDIR}\n")
        assert result["status"] == "pass" and f"could not remove {WORKDIR}" in result["summary"]

    def test_harness_failures_are_errors(self):
        assert imported(IMPORT_HEAD)["status"] == "error"  # ended before enroot's status
        assert imported("")["status"] == "error"
        assert imported(failed_import(127, "sh: 1: timeout: not found"))["status"] == "error"
        bad = failed_import(1, "[ERROR] Invalid image reference: docker://Busybox", error="[ERROR] Invalid image "
                            "reference: docker://Busybox")
        assert "clustereval_audit_enroot_image" in imported(bad)["summary"]
        hung = probe("software_enroot_import", timed_out=True, timeout=150)
        assert run("audit.software.enroot_import", hung)["status"] == "error"

    def test_missing_sh_skips(self):
        assert run("audit.software.enroot_import", probe("software_enroot_import", rc=127, missing=True)
                   )["status"] == "skip"

    def test_import_problem_reads_enroot_messages(self):
        assert "HTTP 404" in import_problem(["[ERROR] URL https://gcr.io/v2/x/manifests/latest returned error "
                                             "code: 404 Not Found"])
        assert "HTTP 503" in import_problem(["[ERROR] URL https://r/v2/x returned error code: 503"])
        assert import_problem(["[INFO] Fetching image manifest"]) is None


REPO = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(not (shutil.which("dash") and shutil.which("timeout") and shutil.which("mktemp")),
                    reason="needs dash, timeout and mktemp")
@pytest.mark.parametrize("fault, status", [(None, "pass"), ("rate_limited", "warn"), ("no_space", "warn")])
def test_probe_with_the_simulated_enroot_is_judged_and_cleans_up(tmp_path, fault, status):
    """The real probe script under dash, with the sim's enroot shim on PATH: its output is what the check
    reads, and its directory is gone afterwards."""
    cmd = next(p["cmd"] for p in yamldata.load((REPO / "src/clustereval/checks/probes/software.yml").read_text())
               ["probes"] if p["name"] == "software_enroot_import")
    bin_dir, tmp = tmp_path / "bin", tmp_path / "tmp"
    bin_dir.mkdir(), tmp.mkdir()
    shim = bin_dir / "enroot"
    shim.write_text(f"#!{os.path.realpath(shutil.which('python3') or '/usr/bin/python3')} -IS\n" +
                    (REPO / "src/clustereval/sim/shims/enroot.py").read_text())
    shim.chmod(0o755)
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "TMPDIR": str(tmp), "CLUSTEREVAL_ALLOW_ACTIONS": "1",
           "CLUSTEREVAL_ENROOT_IMAGE": "docker://busybox:1.36"}
    if fault:
        (tmp_path / "enroot.json").write_text(f'{{"import": "{fault}"}}')
        env["CLUSTEREVAL_SIM_ENROOT"] = str(tmp_path / "enroot.json")
    proc = subprocess.run(["dash", "-c", cmd], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    result = imported(proc.stdout)
    assert result["status"] == status, proc.stdout
    assert result["evidence"]["workdir"].startswith(f"{tmp}/clustereval-enroot-")
    assert list(tmp.iterdir()) == []
    if fault == "rate_limited":
        assert "HTTP 429" in result["summary"]
    if fault == "no_space":
        assert "no space left" in result["summary"]
    if fault is None:
        assert result["evidence"]["output_tail"][-1] == "root (0)" and result["evidence"]["squashfs_bytes"] == 4096
    off = subprocess.run(["dash", "-c", cmd], env={**env, "CLUSTEREVAL_ALLOW_ACTIONS": "0"}, capture_output=True,
                         text=True, timeout=60)
    assert imported(off.stdout)["status"] == "skip" and list(tmp.iterdir()) == []


TOPO = "nccl_topo_conf=/etc/nccl/topo.xml\nnccl_topo_readable=/etc/nccl/topo.xml\n"


class TestNcclTopoContainer:
    def test_file_mounted_through_enroot_passes(self):
        assert run("audit.software.nccl_topo_container", probes(containers=CONTAINERS + TOPO))["status"] == "pass"

    def test_file_not_mounted_warns(self):
        containers = without(CONTAINERS, "enroot_mount") + TOPO
        assert run("audit.software.nccl_topo_container", probes(containers=containers))["status"] == "warn"

    def test_configured_file_that_is_absent_fails(self):
        containers = CONTAINERS + "nccl_topo_conf=/etc/nccl/topo.xml\n"
        assert run("audit.software.nccl_topo_container", probes(containers=containers))["status"] == "fail"

    def test_gpu_less_host_skips_and_truncated_output_errors(self):
        assert run("audit.software.nccl_topo_container", probes(NO_GPU_LIBS))["status"] == "skip"
        assert run("audit.software.nccl_topo_container", probes(containers="srun=yes\n"))["status"] == "error"


class TestDocker:
    def test_no_gpu_runtime_on_a_gpu_node_fails(self):
        containers = CONTAINERS.replace("docker_runtimes=io.containerd.runc.v2 nvidia runc ",
                                        "docker_runtimes=io.containerd.runc.v2 runc ")
        assert run("audit.software.docker", probes(containers=containers))["status"] == "fail"
        with_cdi = containers + "cdi_spec=/etc/cdi/nvidia.yaml\n"
        assert run("audit.software.docker", probes(containers=with_cdi))["status"] == "pass"

    def test_daemon_down_and_absent_warn(self):
        down = CONTAINERS.replace("docker_rc=0\ndocker_version=28.2.2|28.2.2\n", "docker_rc=1\ndocker_version=28.2.2|\n"
                                  "docker_version=Cannot connect to the Docker daemon at unix:///var/run/docker.sock. "
                                  "Is the docker daemon running?\n")
        result = run("audit.software.docker", probes(containers=down))
        assert result["status"] == "warn" and "daemon" in result["summary"]
        assert run("audit.software.docker", probes(containers=without(CONTAINERS, "docker_")))["status"] == "warn"

    @pytest.mark.parametrize(("said", "words"), [
        ("permission denied while trying to connect to the docker API at unix:///var/run/docker.sock",
         "may not use it"),
        ("permission denied while trying to connect to the Docker daemon socket at unix:///var/run/docker.sock: "
         'Get "http://%2Fvar%2Frun%2Fdocker.sock/v1.24/version": dial unix /var/run/docker.sock: connect: '
         "permission denied", "may not use it"),
        ("Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?",
         "not running"),
    ])
    def test_a_daemon_this_account_cannot_reach_is_a_warn_not_a_harness_fault(self, said, words):
        # Only the CLI's complaint, no "client|server" line: the account is not in the docker group, or no
        # daemon runs. Either is about the node, said as such.
        containers = CONTAINERS.replace("docker_rc=0\ndocker_version=28.2.2|28.2.2\n",
                                        f"docker_rc=1\ndocker_version={said}\n")
        result = run("audit.software.docker", probes(containers=containers))
        assert result["status"] == "warn" and words in result["summary"]

    def test_hung_or_unreadable_docker_is_an_error(self):
        assert run("audit.software.docker", probes(containers=CONTAINERS.replace("docker_rc=0", "docker_rc=124"))
                   )["status"] == "error"
        garbled = CONTAINERS.replace("docker_version=28.2.2|28.2.2", "docker_version=Usage: docker")
        assert run("audit.software.docker", probes(containers=garbled))["status"] == "error"

    def test_missing_sh_skips(self):
        assert run("audit.software.docker", probe("software_containers", rc=127, missing=True))["status"] == "skip"


class TestApptainer:
    @pytest.mark.parametrize("line, name, version", [
        ("apptainer version 1.3.4", "apptainer", "1.3.4"),
        ("singularity-ce version 4.1.2-jammy", "singularity", "4.1.2-jammy")])
    def test_versions_pass(self, line, name, version):
        containers = without(CONTAINERS, "apptainer_") + f"{name}_rc=0\n{name}_version={line}\n"
        result = run("audit.software.apptainer", probes(containers=containers))
        assert result["status"] == "pass" and result["value"] == version

    def test_absent_and_unreadable_warn_failing_fails(self):
        assert run("audit.software.apptainer", probes(containers=without(CONTAINERS, "apptainer_")))["status"] == "warn"
        odd = CONTAINERS.replace("apptainer version 1.3.4", "v1")
        assert run("audit.software.apptainer", probes(containers=odd))["value"] == "unknown"
        broken = CONTAINERS.replace("apptainer_rc=0", "apptainer_rc=255")
        assert run("audit.software.apptainer", probes(containers=broken))["status"] == "fail"

    @pytest.mark.parametrize("check_id", ["audit.software.enroot", "audit.software.apptainer"])
    def test_apparmor_blocking_user_namespaces_fails_rootless_runtimes(self, check_id):
        restricted = CONTAINERS.replace("apparmor_userns=\n", "apparmor_userns=1\n")
        result = run(check_id, probes(containers=restricted))
        assert result["status"] == "fail" and "apparmor_restrict_unprivileged_userns=1" in result["summary"]
        runtime = check_id.rsplit(".", 1)[1]
        allowed = restricted + f"apparmor_profile=/etc/apparmor.d/{runtime}\n"
        assert run(check_id, probes(containers=allowed))["status"] == "pass"

    def test_skip_and_error(self):
        assert run("audit.software.apptainer", probe("software_containers", rc=127, missing=True))["status"] == "skip"
        assert run("audit.software.apptainer", probes(containers="srun=yes\n"))["status"] == "error"
