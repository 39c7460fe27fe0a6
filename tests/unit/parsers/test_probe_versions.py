"""The versions inventory probe: its ``### name … rc=`` sections and the readers of each tool's output."""

from __future__ import annotations

from clustereval.parsers import parse
from clustereval.parsers import probe_versions as pv

# versions_inventory on a simulated Debian 12 node (CUDA 13.1, Container Toolkit 1.19.1, no Docker).
INVENTORY = """### nvcc
nvcc: NVIDIA (R) Cuda compiler driver
Copyright (c) 2005-2025 NVIDIA Corporation
Built on Tue_Dec_02_05:08:56_PM_PST_2025
Cuda compilation tools, release 13.1, V13.1.80
Build cuda_13.1.r13.1/compiler.36836380_0
### nvcc rc=0
### nvidia-ctk
NVIDIA Container Toolkit CLI version 1.19.1
commit: f202b80a9b9d0db00d9b1d73c0128c8962c55f4d
### nvidia-ctk rc=0
### runc absent
### dcgm-exporter
dcgm-exporter version 4.5.3-4.8.2
### dcgm-exporter rc=0
### dpkg
dpkg-query: no packages found matching nvidia-container-toolkit
linux-image-6.8.0-124-generic\t6.8.0-124.124\tii\x20
linux-image-6.8.0-100-generic\t6.8.0-100.100\trc\x20
runc\t1.1.12-0ubuntu3\tii\x20
### dpkg rc=1
### ib
mlx5_0\t28.46.3008\tMT4129\tMT_0000000838
mlx5_1\t28.46.3008\tMT4129
### ib rc=0
### os-release
PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"
VERSION_ID="12"
ID=debian
### os-release rc=0
### boot
vmlinuz-6.8.0-124-generic
vmlinuz-6.8.0-130-generic
### boot rc=0
### docker
Cannot connect to the Docker daemon
"""


def test_sections_present_absent_and_cut_short():
    data = parse("probe-versions-inventory", INVENTORY)
    sections = data["sections"]
    assert sections["runc"] == {"present": False, "rc": None, "text": ""}
    assert sections["nvidia-ctk"]["rc"] == 0 and sections["nvidia-ctk"]["text"].startswith("NVIDIA Container Toolkit")
    assert sections["dpkg"]["rc"] == 1
    assert sections["docker"] == {"present": True, "rc": None, "text": "Cannot connect to the Docker daemon"}
    assert data["complete"] is False and data["warnings"] == ["section docker has no closing rc= line (cut short)"]
    assert parse("probe-versions-inventory", "no sections here\n")["sections"] == {}


def test_tool_outputs():
    sections = pv.sections(INVENTORY)
    assert pv.nvcc_version(sections["nvcc"]["text"]) == "13.1.80"
    assert pv.nvcc_version("Cuda compilation tools, release 12.4") == "12.4" and pv.nvcc_version("x") is None
    assert pv.first_version(sections["nvidia-ctk"]["text"]) == "1.19.1"
    assert pv.first_version("runc version 1.1.12\ncommit: v1.1.12-0-g51d5e94") == "1.1.12"
    assert pv.exporter_version(sections["dcgm-exporter"]["text"]) == "4.8.2"
    assert pv.exporter_version("4.4.2") == "4.4.2"


def test_packages_adapters_and_os_release():
    sections = pv.sections(INVENTORY)
    assert pv.package_rows(sections["dpkg"]["text"]) == {"linux-image-6.8.0-124-generic": "6.8.0-124.124",
                                                         "runc": "1.1.12-0ubuntu3"}
    assert pv.ib_devices(sections["ib"]["text"])[1] == {"device": "mlx5_1", "fw_ver": "28.46.3008",
                                                        "hca_type": "MT4129", "board_id": ""}
    assert pv.os_release(sections["os-release"]["text"]) == {
        "PRETTY_NAME": "Debian GNU/Linux 12 (bookworm)", "VERSION_ID": "12", "ID": "debian"}


def test_installed_kernels_from_dpkg_and_boot():
    kernels = pv.installed_kernels(pv.sections(INVENTORY))
    assert kernels == {"6.8.0-124-generic": "dpkg linux-image-6.8.0-124-generic 6.8.0-124.124",
                       "6.8.0-130-generic": "/boot/vmlinuz-6.8.0-130-generic"}
    assert pv.installed_kernels(pv.sections("### rpm\nkernel\t5.14.0-427.el9\tii\n### rpm rc=0\n")) == {
        "5.14.0-427.el9": "rpm kernel"}
    assert pv.kernel_flavour("6.8.0-124-generic") == "generic" and pv.kernel_flavour("6.1.0") == ""
