"""Software stack & container checks: every check × every status, from probe outputs written here in
the shape the probes in checks/probes/software.yml print (Slurm 22.05 `srun --mpi=list`, Lmod 8.7,
enroot 3.5, Docker 28, Apptainer 1.3, NVIDIA HPC SDK 24.5 layout)."""

from __future__ import annotations

import pytest

from clustereval import checks
from clustereval.checks import Context
from clustereval.checks.audit_software import enroot_version, module_names, mpi_plugins, nccl_version
from clustereval.results import problems

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
BATCH = ("batch_rc=0\nbatch_path=/usr/local/cuda-12.4/bin:/usr/bin:/bin\nbatch_nvcc=/usr/local/cuda-12.4/bin/nvcc\n"
         "batch_mpirun=/opt/hpcx/ompi/bin/mpirun\nbatch_ompi_info=\nbatch_ucx_info=\n")


def probe(name: str, stdout: str = "", rc: int = 0, **extra) -> dict:
    return {name: {"name": name, "cmd": name, "rc": rc, "stdout": stdout, "stderr": "",
                   "artifact": f"{name}.txt", **extra}}


def probes(libs: str = GPU + "nccl_lib=/usr/lib/x86_64-linux-gnu/libnccl.so.2.21.5\n" + MPI_PMIX + HPC_SDK,
           containers: str = CONTAINERS, env: str = LOGIN + BATCH) -> dict:
    return {**probe("software_libs", libs), **probe("software_containers", containers),
            **probe("software_batch_env", env)}


def run(check_id: str, given: dict) -> dict:
    result = checks.evaluate(check_id, Context(subject="n1", probes=given), "t")
    assert problems(result) == []
    return result


def without(text: str, *prefixes: str) -> str:
    return "".join(line + "\n" for line in text.splitlines() if not line.startswith(prefixes))


def test_healthy_node_passes_every_software_check_but_the_topology_file_skip():
    healthy = probes()
    for check_id in ("audit.software.nccl", "audit.software.mpi_pmix", "audit.software.hpc_sdk",
                     "audit.software.lmod", "audit.software.batch_path", "audit.software.pyxis",
                     "audit.software.enroot", "audit.software.docker", "audit.software.apptainer"):
        assert run(check_id, healthy)["status"] == "pass", check_id
    assert run("audit.software.nccl_topo_container", healthy)["status"] == "skip"


def test_helpers_read_the_tools_formats():
    assert nccl_version("/usr/lib/x86_64-linux-gnu/libnccl.so.2.21.5") == "2.21.5"
    assert nccl_version("/usr/lib/x86_64-linux-gnu/libnccl.so.2") is None
    old = ["srun: MPI types are...", "srun: none", "srun: pmi2", "srun: openmpi"]
    assert mpi_plugins(old) == ["none", "pmi2", "openmpi"]
    assert mpi_plugins(["srun: fatal: something"]) is None
    assert module_names(["/opt/modulefiles:", "cuda/12.4", "nccl/2.21.5(default)"]) == ["cuda/12.4", "nccl/2.21.5"]
    assert enroot_version(["3.5.0"]) == "3.5.0" and enroot_version(["garbage"]) is None


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


class TestHpcSdk:
    def test_absent_warns(self):
        assert run("audit.software.hpc_sdk", probes(GPU))["status"] == "warn"

    def test_old_release_warns(self):
        old = HPC_SDK.replace("24.5", "23.1")
        result = run("audit.software.hpc_sdk", probes(old))
        assert result["status"] == "warn" and result["value"] == "23.1"

    def test_incomplete_payload_and_broken_compiler_fail(self):
        assert run("audit.software.hpc_sdk", probes(without(HPC_SDK, f"nvhpc_compiler={NVHPC}/compilers/bin/nvfortran")
                                                    ))["status"] == "fail"
        assert run("audit.software.hpc_sdk", probes(without(HPC_SDK, "nvhpc_nvc=")))["status"] == "fail"

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

    def test_absent_and_apparmor_restriction_warn(self):
        assert run("audit.software.enroot", probes(containers=without(CONTAINERS, "enroot_")))["status"] == "warn"
        restricted = CONTAINERS.replace("apparmor_userns=", "apparmor_userns=1")
        assert run("audit.software.enroot", probes(containers=restricted))["status"] == "warn"

    def test_pass_says_import_was_not_tried(self):
        result = run("audit.software.enroot", probes())
        assert result["status"] == "pass" and "not tried" in result["summary"]

    def test_skip_and_error(self):
        assert run("audit.software.enroot", probe("software_containers", rc=127, missing=True))["status"] == "skip"
        hung = probe("software_containers", timed_out=True, timeout=40)
        assert run("audit.software.enroot", hung)["status"] == "error"


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

    def test_skip_and_error(self):
        assert run("audit.software.apptainer", probe("software_containers", rc=127, missing=True))["status"] == "skip"
        assert run("audit.software.apptainer", probes(containers="srun=yes\n"))["status"] == "error"
