"""Readers of the tool output the software probes carry under one key each."""

from __future__ import annotations

from clustereval.parsers.probe_software import enroot_version, module_names, mpi_plugins, nccl_version


def test_nccl_version_from_the_resolved_library_name():
    assert nccl_version("/usr/lib/x86_64-linux-gnu/libnccl.so.2.21.5") == "2.21.5"
    assert nccl_version("/usr/lib/x86_64-linux-gnu/libnccl.so.2") is None


def test_srun_mpi_list_of_old_and_new_slurm():
    new = ["MPI plugin types are...", "\tpmix", "\tnone", "\tcray_shasta", "\tpmi2",
           "specific pmix plugin versions available: pmix_v4"]
    assert mpi_plugins(new) == ["pmix", "none", "cray_shasta", "pmi2", "pmix_v4"]
    old = ["srun: MPI types are...", "srun: none", "srun: pmi2", "srun: openmpi"]
    assert mpi_plugins(old) == ["none", "pmi2", "openmpi"]
    assert mpi_plugins(["srun: fatal: something"]) is None


def test_module_avail_terse_and_enroot_version():
    assert module_names(["/opt/modulefiles:", "cuda/12.4", "nccl/2.21.5(default)", "Lmod has detected"]) == [
        "cuda/12.4", "nccl/2.21.5"]
    assert enroot_version(["3.5.0"]) == "3.5.0" and enroot_version(["v3.4.1"]) == "3.4.1"
    assert enroot_version(["garbage"]) is None
