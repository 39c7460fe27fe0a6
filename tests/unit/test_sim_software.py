"""Software-stack profile fields of the simulated cluster: CUDA toolkits (nvcc banners), Docker Engine and
runc, missing basic tools, the NVIDIA kernel module flavour, and the evaluation account."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from clustereval.sim import profile as sim_profile
from clustereval.sim.overlays import Tree, accounts, nvidia_driver, software, software_containers, software_tools
from clustereval.sim.overlays._files import shim_module

GPU_STATE = {"node": "node2", "gpus": [{"index": 0}], "driver_version": "580.159.03"}


def rendered(module, settings: dict, state: dict | None = None) -> Tree:
    tree = Tree()
    module.render({"faults": {}, **settings}, state or GPU_STATE, tree)
    return tree


def run_file(tree: Tree, path: str, *args: str) -> subprocess.CompletedProcess[str]:
    """Run a program the overlay installed, as the node's python3 would."""
    return subprocess.run([sys.executable, "-I", "-c", tree.files[path][0].split("\n", 1)[1], *args],
                          capture_output=True, text=True)


def write_profile(tmp_path: Path, body: dict) -> Path:
    path = tmp_path / "p.yml"
    path.write_text(yaml.safe_dump({"extends": "reference", **body}))
    return path


class TestCudaToolkits:
    def test_default_is_13_1_in_usr_local_with_the_cuda_link(self):
        tree = rendered(software, {})
        assert "/usr/local/cuda-13.1/bin/nvcc" in tree.files and "/usr/local/cuda" in tree.hidden
        assert tree.files["/etc/profile.d/cuda.sh"][0] == 'export PATH="/usr/local/cuda-13.1/bin:$PATH"\n'
        out = run_file(tree, "/usr/local/cuda-13.1/bin/nvcc", "--version")
        assert out.returncode == 0 and out.stdout == (
            "nvcc: NVIDIA (R) Cuda compiler driver\nCopyright (c) 2005-2025 NVIDIA Corporation\n"
            "Built on Tue_Dec_16_07:23:41_PM_PST_2025\nCuda compilation tools, release 13.1, V13.1.115\n"
            "Build cuda_13.1.r13.1/compiler.37061995_0\n")

    def test_the_existing_key_still_names_the_version(self):
        tree = rendered(software, {"software": {"cuda_toolkit_version": "12.4"}})
        assert "V12.4.131" in run_file(tree, "/usr/local/cuda-12.4/bin/nvcc", "-V").stdout

    def test_distribution_package_in_usr_bin_is_on_every_path(self):
        tree = rendered(software, {"software": {"cuda_toolkit": {"version": "12.0", "path": "/usr/bin/nvcc"}}})
        assert "/etc/profile.d/cuda.sh" not in tree.files and "/usr/local/cuda" in tree.hidden
        assert "release 12.0, V12.0.140" in run_file(tree, "/usr/bin/nvcc", "--version").stdout

    def test_exact_update_and_several_installs(self):
        tree = rendered(software, {"software": {"cuda_toolkit": [
            {"version": "12.4.99"}, {"version": "12.8", "login_path": False, "batch_path": True}]}})
        assert "V12.4.99" in run_file(tree, "/usr/local/cuda-12.4/bin/nvcc", "--version").stdout
        assert "/usr/local/cuda-12.8/bin" not in tree.files["/etc/profile.d/cuda.sh"][0]
        prolog = tree.files[f"{software.TASK_PROLOG_DIR}/cuda.sh"][0]
        out = subprocess.run(["sh", "-c", prolog], env={"PATH": "/usr/bin:/bin"}, capture_output=True, text=True)
        assert out.stdout == "export PATH=/usr/local/cuda-12.8/bin:/usr/bin:/bin\n"

    def test_login_only_toolkit_is_removed_from_batch_steps(self):
        tree = rendered(software, {"software": {"cuda_toolkit": {"version": "12.4", "batch_path": False}}})
        prolog = tree.files[f"{software.TASK_PROLOG_DIR}/cuda.sh"][0]
        env = {"PATH": "/usr/local/cuda-12.4/bin:/usr/bin:/bin"}
        assert subprocess.run(["sh", "-c", prolog], env=env, capture_output=True, text=True).stdout == (
            "export PATH=/usr/bin:/bin\n")

    def test_every_banner_has_the_release_of_its_version(self):
        nvcc = shim_module("nvcc.py")
        for version, (year, built, build) in nvcc.BANNERS.items():
            release = version.rsplit(".", 1)[0]
            assert build.startswith(f"cuda_{release}.r{release}/compiler.") and built.endswith(year)
        assert nvcc.resolve("12.4") == "12.4.131" and nvcc.resolve("12.3") is None

    @pytest.mark.parametrize(("entry", "message"), [
        ({"version": "12.3"}, "no verified nvcc banner; known: 11.5.119"),
        ({"version": "12.4", "colour": "x"}, "unknown keys ['colour']"),
        ({"version": "12.4", "path": "/usr/bin/nvcc", "batch_path": False}, "on every PATH"),
    ])
    def test_refused_with_the_key(self, tmp_path, entry, message):
        path = write_profile(tmp_path, {"nodes": {"node2": {"software": {"cuda_toolkit": entry}}}})
        with pytest.raises(sim_profile.ProfileError, match=r"nodes\.node2") as err:
            sim_profile.load_profile(path)
        assert message in str(err.value)


class TestDockerAndRunc:
    def test_reference_has_neither(self):
        tree = rendered(software_containers, {})
        assert not tree.files

    def test_old_engine_prints_its_real_versions(self):
        tree = rendered(software_containers, {"software": {"docker": {"version": "24.0.7"}}})
        assert run_file(tree, "/usr/bin/docker", "--version").stdout == "Docker version 24.0.7, build afdd53b\n"
        assert run_file(tree, "/usr/bin/dockerd", "--version").stdout == "Docker version 24.0.7, build 311b9ff\n"
        assert run_file(tree, "/usr/bin/runc", "--version").stdout == (
            "runc version 1.1.10\ncommit: v1.1.10-0-g18a0cb0\nspec: 1.0.2-dev\ngo: go1.20.10\nlibseccomp: 2.5.4\n")
        full = run_file(tree, "/usr/bin/docker", "version").stdout
        assert " containerd:\n  Version:          1.6.25\n" in full
        assert "  GitCommit:        v1.1.10-0-g18a0cb0\n" in full
        if os.geteuid() == 0:
            fmt = run_file(tree, "/usr/bin/docker", "version", "--format", "{{.Client.Version}}|{{.Server.Version}}")
            assert fmt.stdout == "24.0.7|24.0.7\n"
            info = run_file(tree, "/usr/bin/docker", "info", "--format",
                            "{{range $k, $v := .Runtimes}}{{$k}} {{end}}")
            assert info.stdout == "io.containerd.runc.v2 nvidia runc \n"

    def test_current_engine_and_a_standalone_runc(self):
        tree = rendered(software_containers, {"software": {"docker": {"version": "29.7.2"},
                                                            "runc": {"version": "1.1.12"}}})
        assert "runc version 1.4.3\ncommit: v1.4.3-0-gbb14dabeb\n" in run_file(tree, "/usr/bin/runc", "-v").stdout
        assert "runc version 1.1.12" in run_file(tree, "/usr/local/sbin/runc", "--version").stdout
        assert "\ndocker:x:989:\n" in "\n" + tree.files["/etc/group"][0]

    @pytest.mark.skipif(not shutil.which("dpkg-query") or not Path("/var/lib/dpkg/status").is_file(),
                        reason="needs dpkg")
    def test_packages_are_in_the_dpkg_database(self, tmp_path):
        tree = rendered(software_containers, {"software": {"docker": {"version": "29.7.2"}}})
        admin = tmp_path / "dpkg"
        (admin / "info").mkdir(parents=True)
        (admin / "status").write_text(tree.files["/var/lib/dpkg/status"][0])
        out = subprocess.run(["dpkg-query", "--admindir", str(admin), "-W", "-f", "${Package}\t${Version}\n",
                              "docker-ce", "containerd.io"], capture_output=True, text=True)
        assert out.stdout == "containerd.io\t2.3.4-1\ndocker-ce\t5:29.7.2-1~debian.12~bookworm\n"

    def test_unknown_version_is_refused_naming_the_known_ones(self, tmp_path):
        path = write_profile(tmp_path, {"cluster": {"software": {"docker": {"version": "25.0.0"}}}})
        with pytest.raises(sim_profile.ProfileError, match=r"software.docker.version '25.0.0' .* 24.0.7, 29.7.2"):
            sim_profile.load_profile(path)


class TestMissingTools:
    def test_host_tools_are_whited_out_and_installed_ones_not_written(self):
        tree = Tree()
        tree.file("/usr/bin/runc", "x")
        software_tools.render({"missing_tools": ["runc", "sh"]}, GPU_STATE, tree)
        assert "/usr/bin/runc" not in tree.files
        assert os.path.join(os.path.realpath("/bin"), "sh") in tree.hidden

    def test_malformed_list_is_refused(self, tmp_path):
        path = write_profile(tmp_path, {"nodes": {"node1": {"missing_tools": "lspci"}}})
        with pytest.raises(sim_profile.ProfileError, match="missing_tools must be a list"):
            sim_profile.load_profile(path)


class TestKernelModule:
    def test_open_is_the_default_and_proprietary_has_the_proprietary_banner(self):
        default = rendered(nvidia_driver, {}).files["/proc/driver/nvidia/version"][0]
        assert default.startswith("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.03  Release")
        settings = {"driver_module": {"flavour": "proprietary"}, "fabric": {"gpudirect": False}}
        line = rendered(nvidia_driver, settings).files["/proc/driver/nvidia/version"][0]
        assert line.startswith("NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.159.03  Tue May 28 ")

    def test_peermem_shows_in_sys_module(self):
        from clustereval.sim.overlays import gpustack
        state = {**GPU_STATE, "gpus": [{"index": 0, "pci_bus": "19", "minor_number": 0}]}
        assert "/sys/module/nvidia_peermem/initstate" in rendered(
            gpustack, {"driver_module": {"peermem": True}}, state).files
        assert "/sys/module/nvidia_peermem/initstate" not in rendered(gpustack, {}, state).files

    def test_no_gpudirect_path_with_gpudirect_on_is_refused(self, tmp_path):
        path = write_profile(tmp_path, {"nodes": {"node3": {"driver_module": {"flavour": "proprietary"}}}})
        with pytest.raises(sim_profile.ProfileError, match=r"fabric\.gpudirect is true"):
            sim_profile.load_profile(path)


class TestEvaluator:
    def test_account_files_and_sudo_rules(self):
        for mode, rule in (("passwordless", "eval ALL=(ALL:ALL) NOPASSWD: ALL\n"),
                           ("password", "eval ALL=(ALL:ALL) ALL\n"), ("none", None)):
            tree = rendered(accounts, {"evaluator": {"user": "eval", "sudo": mode}})
            sudoers = tree.files.get("/etc/sudoers.d/90-eval")
            assert (sudoers[0].endswith(rule) and sudoers[1] == 0o440) if rule else sudoers is None
            assert "/var/lib/eval/.bashrc" in tree.files and tree.files["/etc/hosts"][0].endswith("\tnode2\n")
        if "eval" not in Path("/etc/passwd").read_text():
            assert ":/var/lib/eval:/bin/bash\n" in tree.files["/etc/passwd"][0]

    def test_unset_means_root(self):
        assert not rendered(accounts, {}).files

    @pytest.mark.parametrize(("value", "message"), [
        ({"user": "root"}, "not a plain non-root user"), ({"user": "eval", "sudo": "yes"}, "evaluator.sudo 'yes'"),
        ({"user": "eval", "shell": "zsh"}, r"unknown keys \['shell'\]")])
    def test_refused(self, tmp_path, value, message):
        with pytest.raises(sim_profile.ProfileError, match=message):
            sim_profile.load_profile(write_profile(tmp_path, {"cluster": {"evaluator": value}}))


def test_audit_stack_profile_loads_with_one_failure_per_node():
    prof = sim_profile.load_profile("audit-stack")
    node2 = sim_profile.node_settings(prof, "node2")
    assert node2["software"]["docker"]["version"] == "24.0.7" and "lspci" in node2["missing_tools"]
    assert sim_profile.node_settings(prof, "node3")["driver_module"]["flavour"] == "proprietary"
    assert sim_profile.node_settings(prof, "node1")["evaluator"]["sudo"] == "passwordless"
