"""Software-stack and GPU-driver failure modes (profile audit-stack) through the audit, run as the non-root
evaluation account: old/current Docker and runc, a distribution CUDA toolkit below the minimum, missing basic
tools, a proprietary module without GPUDirect RDMA, and sudo per node."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.integration.simrun import REQUIRES_SIM, SSH_OPTS, by_key, read_inventory, run_audit, simulated_cluster

pytestmark = REQUIRES_SIM

TAGS = ("audit.versions.cuda_toolkit,audit.versions.docker,audit.versions.runc,audit.software.docker,"
        "audit.software.batch_path,audit.gpustack.driver,audit.gpustack.gpudirect_rdma,audit.gpustack.pcie_acs,"
        "audit.access.sudo")
KNOWN_ERRORS: set[tuple[str, str]] = set()


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    # Not under pytest's own temporary root (mode 700): the evaluation account must reach the cluster's files.
    sim = Path(tempfile.mkdtemp(prefix="clustereval-audit-stack-"))
    sim.chmod(0o755)
    with simulated_cluster(sim, 3, "audit-stack"):
        results = by_key(run_audit(sim / "inventory.ini", tmp_path_factory.mktemp("runs") / "audit-stack", TAGS))
        hosts, variables = read_inventory(sim)

        def as_evaluator(node: str, command: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(["ssh", *SSH_OPTS, "-i", str(Path(sim) / "ssh" / "id_ed25519"),
                                   f"eval@{hosts[node]}", command], capture_output=True, text=True, timeout=20)

        yield results, variables, as_evaluator
    shutil.rmtree(sim, ignore_errors=True)


def status(results, check: str, node: str) -> str:
    return results[(check, node)]["status"]


def test_audit_logs_in_as_the_evaluation_account(stack):
    results, variables, as_evaluator = stack
    assert variables["ansible_user"] == "eval"
    assert as_evaluator("node2", "id -un").stdout.strip() == "eval"
    errors = [(key, r["summary"]) for key, r in results.items() if r["status"] == "error" and key not in KNOWN_ERRORS]
    assert errors == []
    assert status(results, "audit.access.sudo", "node1") == "pass"
    for node in ("node2", "node3"):
        sudo = results[("audit.access.sudo", node)]
        assert sudo["status"] == "warn" and "a password is required" in sudo["summary"]


def test_current_docker_and_cuda_pass_on_node1(stack):
    results, _, as_evaluator = stack
    for check in ("audit.versions.docker", "audit.versions.runc", "audit.software.docker",
                  "audit.versions.cuda_toolkit", "audit.gpustack.driver", "audit.gpustack.gpudirect_rdma",
                  "audit.gpustack.pcie_acs"):
        assert status(results, check, "node1") == "pass", check
    assert as_evaluator("node1", "readlink /usr/local/cuda").stdout.strip() == "/usr/local/cuda-13.1"


def test_old_docker_runc_and_cuda_fail_on_node2(stack):
    results, _, as_evaluator = stack
    for check in ("audit.versions.docker", "audit.versions.runc", "audit.versions.cuda_toolkit"):
        assert status(results, check, "node2") == "fail", check
    assert "24.0.7" in results[("audit.versions.docker", "node2")]["summary"]
    assert "1.1.10" in results[("audit.versions.runc", "node2")]["summary"]
    assert "/usr/bin/nvcc" in results[("audit.software.batch_path", "node2")]["summary"]
    banner = as_evaluator("node2", "bash -lc 'nvcc --version'").stdout
    assert "release 12.4, V12.4.131\nBuild cuda_12.4.r12.4/compiler.34097967_0\n" in banner


def test_missing_tools_are_not_installed_on_node2(stack):
    results, _, as_evaluator = stack
    for tool in ("lspci", "numactl", "ethtool", "ibstat"):
        out = as_evaluator("node2", tool)
        assert out.returncode == 127 and "command not found" in out.stderr, tool
    acs = results[("audit.gpustack.pcie_acs", "node2")]
    assert acs["status"] == "skip" and "lspci is not installed" in acs["summary"]
    assert status(results, "audit.gpustack.driver", "node2") == "pass"


def test_no_gpudirect_path_on_node3(stack):
    results, _, as_evaluator = stack
    rdma = results[("audit.gpustack.gpudirect_rdma", "node3")]
    assert rdma["status"] == "fail" and "proprietary" in rdma["summary"]
    assert status(results, "audit.gpustack.driver", "node3") == "pass"  # Hopper runs on either module
    assert "unrecognized option '--use_cuda=0'" in as_evaluator("node3", "ib_write_bw --use_cuda=0").stderr
    assert status(results, "audit.versions.docker", "node3") == "skip"


def test_two_shells_that_see_two_toolkits_are_both_named_on_node3(stack):
    # A login shell gets 13.1, a non-login shell the distribution's 12.0: the audit says which it believes
    # (the login shell's) and grades both, so the vulnerable one fails the check.
    results, _, as_evaluator = stack
    cuda = results[("audit.versions.cuda_toolkit", "node3")]
    assert cuda["status"] == "fail" and cuda["value"] == "13.1.115"
    assert "believed: a login shell" in cuda["summary"] and "/usr/bin/nvcc 12.0.140" in cuda["summary"]
    assert cuda["evidence"]["agreement"]["paths"] == {"a login shell": "/usr/local/cuda-13.1/bin/nvcc",
                                                      "a non-login shell": "/usr/bin/nvcc"}
    # a job step's TaskProlog puts 12.9 first: the batch PATH finds another nvcc than the login shell
    batch = results[("audit.software.batch_path", "node3")]
    assert batch["status"] == "warn" and "/opt/cuda-12.9/bin/nvcc" in batch["summary"], batch["summary"]
    assert as_evaluator("node3", "nvcc --version").stdout.count("release 12.0, V12.0.140") == 1


def test_a_daemon_this_account_may_not_use_is_a_warn_on_node2(stack):
    results, _, _ = stack
    docker = results[("audit.software.docker", "node2")]
    assert docker["status"] == "warn" and "may not use it" in docker["summary"], docker["summary"]
