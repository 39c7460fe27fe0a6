"""audit.gpustack.*: every check gives pass, warn, fail, skip and error from probe outputs written here."""

from __future__ import annotations

import pytest

from clustereval.checks import Context
from clustereval.checks.audit_gpustack import acs_paths, pci_inventory
from tests.conftest import key_value_text, read_corpus
from tests.helpers import judge as run
from tests.helpers import probe

# ---------------------------------------------------------------- lspci -D -nn -vvv blocks in pciutils 3.x layout

def bridge(addr: str, sec: str, sub: str, ctl: str = "-", name: str = "Broadcom / LSI PEX890xx PCIe Gen 5 Switch",
           ids: str = "1000:c030", acs: bool = True) -> str:
    text = (f"{addr} PCI bridge [0604]: {name} [{ids}] (rev b0) (prog-if 00 [Normal decode])\n"
            f"\tControl: I/O+ Mem+ BusMaster+ SpecCycle- MemWINV- VGASnoop- ParErr- Stepping- SERR- FastB2B- DisINTx+\n"
            f"\tNUMA node: 0\n"
            f"\tBus: primary={addr[5:7]}, secondary={sec}, subordinate={sub}, sec-latency=0\n"
            f"\tCapabilities: [68] Express (v2) Downstream Port (Slot+), MSI 00\n"
            f"\t\tLnkCap:\tPort #0, Speed 32GT/s, Width x16, ASPM L0s L1, Exit Latency L0s <4us, L1 <32us\n"
            f"\t\tLnkSta:\tSpeed 32GT/s (ok), Width x16 (ok)\n")
    if acs:
        bits = " ".join(f"{b}{ctl}" for b in ("SrcValid", "TransBlk", "ReqRedir", "CmpltRedir", "UpstreamFwd",
                                               "EgressCtrl", "DirectTrans"))
        text += ("\tCapabilities: [170 v1] Access Control Services\n"
                 "\t\tACSCap:\tSrcValid+ TransBlk+ ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans+\n"
                 f"\t\tACSCtl:\t{bits}\n")
    return text + "\tKernel driver in use: pcieport\n\n"


def endpoint(addr: str, cls: str, clsid: str, name: str, ids: str, driver: str) -> str:
    return (f"{addr} {cls} [{clsid}]: {name} [{ids}] (rev a1)\n"
            f"\tSubsystem: {name} [{ids}]\n\tNUMA node: 0\n\tIOMMU group: 30\n"
            f"\tKernel driver in use: {driver}\n\n")


GPU = ("3D controller", "0302", "NVIDIA Corporation GH100 [H100 SXM5 80GB]", "10de:2330", "nvidia")
NIC = ("Infiniband controller", "0207", "Mellanox Technologies MT2910 Family [ConnectX-7]", "15b3:1021", "mlx5_core")


def hgx_lspci(redirect: bool = False, denied: bool = False, with_nic: bool = True) -> str:
    """One HGX switch: root port 15:01.0 -> PEX upstream 16:00.0 -> downstream 17:01.0 (GPU), 17:02.0 (NIC)."""
    ctl = "+" if redirect else "-"
    text = (bridge("0000:15:01.0", "16", "1c", name="Intel Corporation Device 352a", ids="8086:352a")
            + bridge("0000:16:00.0", "17", "1c", acs=False)
            + bridge("0000:17:01.0", "19", "19", ctl=ctl) + bridge("0000:17:02.0", "1a", "1a", ctl=ctl)
            + endpoint("0000:19:00.0", *GPU))
    if with_nic:
        text += endpoint("0000:1a:00.0", *NIC)
    if denied:
        text = text.replace("\tCapabilities: [170 v1] Access Control Services\n", "\tCapabilities: <access denied>\n")
        text = "\n".join(line for line in text.split("\n") if "ACSC" not in line)
    return text


def lspci_probe(text: str, **extra) -> dict:
    return probe("gpustack_lspci", text, parser="lspci", cmd="lspci -D -nn -vvv", **extra)


def node_text(**over) -> str:
    """The gpustack_node probe as its shell prints it (healthy HGX H100 on driver 550.90.07 by default)."""
    values = {
        "proc_version": "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.90.07  Release Build  "
                        "(dvs-builder@U16-I3-B03-4-3)  Tue May 28 21:55:11 UTC 2024",
        "module_version": "550.90.07",
        "module": ["nvidia", "nvidia_uvm", "ib_core", "mlx5_ib", "gdrdrv"],
        "kernel": "6.8.0-49-generic", "arch": "x86_64", "uid": "1000",
        "gdr_lib": "libgdrapi.so.2", "gdr_dev": "666",
        "tool": ["nvidia-ctk", "nvidia-container-cli", "enroot", "ncu", "perf"],
        "ctk_file": ["/etc/nvidia-container-runtime/config.toml", "/etc/cdi/nvidia.yaml"],
        "iommu_group": ["12 identity 0000:15:01.0", "30 identity 0000:16:00.0 0000:17:01.0 0000:17:02.0 "
                        "0000:19:00.0 0000:1a:00.0"],
        "iommu_unit": ["dmar0", "dmar1"],
        "cmdline": "BOOT_IMAGE=/vmlinuz-6.8.0-49-generic root=UUID=1 ro iommu=pt",
        "virt_vm": "none", "perf_event_paranoid": "1", "kptr_restrict": "0", "sudo": "no", "end": "ok",
    }
    values.update(over)
    return key_value_text(values)


def node_probe(**over) -> dict:
    return probe("gpustack_node", node_text(**over), cmd="sh -c ...")


def smi_probe(said: str | None) -> dict:
    """The core ``nvidia-smi -q -x`` probe: a report naming driver ``said``, or what nvidia-smi printed
    instead (an NVML error, garbage), or nvidia-smi not installed (None)."""
    if said is None:
        return probe("nvidia_smi_q_x", "", rc=127, missing=True)
    if said[:3].isdigit():
        return probe("nvidia_smi_q_x", '<?xml version="1.0" ?>\n<nvidia_smi_log>\n\t<timestamp>Tue Jun  4 '
                     f'10:00:00 2024</timestamp>\n\t<driver_version>{said}</driver_version>\n', parser="nvidia-smi-q-x")
    return probe("nvidia_smi_q_x", said, rc=9 if "NVML" in said else 0, parser="nvidia-smi-q-x")


def versions_probe(ctk: str | None) -> dict:
    """The versions probe with only its nvidia-ctk section (None: nvidia-ctk not installed)."""
    body = ("### nvidia-ctk absent\n" if ctk is None
            else f"### nvidia-ctk\n{ctk}\ncommit: f202b80\n### nvidia-ctk rc=0\n")
    return probe("versions_inventory", body)


def probes(lspci: str | None = None, smi_driver: str | None = "550.90.07",
           ctk_version: str | None = "NVIDIA Container Toolkit CLI version 1.17.8", **over) -> dict:
    return {**lspci_probe(lspci if lspci is not None else hgx_lspci()), **node_probe(**over),
            **smi_probe(smi_driver), **versions_probe(ctk_version)}


NO_GPU_LSPCI = endpoint("0000:00:03.0", "Ethernet controller", "0200", "Red Hat, Inc. Virtio network device",
                        "1af4:1000", "virtio-pci")


class TestHelpers:
    def test_path_is_the_downstream_ports_below_the_common_switch(self):
        inv = pci_inventory(Context(subject="n1", probes=lspci_probe(hgx_lspci())))
        paths, _ = acs_paths(inv)
        assert paths == {"0000:19:00.0<->0000:1a:00.0": ["0000:17:01.0", "0000:17:02.0"]}

    def test_corpus_hgx_excerpt_finds_gpu_nic_and_bus_ranges(self):
        # The real HGX H100 excerpt: GPU 19:00.0, ConnectX-7 1a:00.0, root port 15:01.0 (secondary 16,
        # subordinate 1c), PEX upstream 16:00.0 (17..1c), 17:00.0 (18..18), PMC bridge 82:00.0 (83..83).
        inv = pci_inventory(Context(subject="n1", probes=lspci_probe(read_corpus(
            "lspci", "h100-hgx-lspci-vvv-acs-excerpt.txt"))))
        assert [g["address"] for g in inv["gpus"]] == ["0000:19:00.0"]
        assert [n["address"] for n in inv["nics"]] == ["0000:1a:00.0"]
        assert inv["ranges"]["0000:15:01.0"] == (0x16, 0x1c) and inv["ranges"]["0000:82:00.0"] == (0x83, 0x83)


class TestDriver:
    def test_pass_when_all_three_agree(self):
        result = run("audit.gpustack.driver", probes())
        assert result["status"] == "pass" and result["value"] == "550.90.07"

    def test_fail_when_module_and_library_differ(self):
        result = run("audit.gpustack.driver", probes(module_version="535.183.01",
                                                     proc_version="NVRM version: NVIDIA UNIX x86_64 Kernel Module  "
                                                     "535.183.01  Sun May 12 19:39:15 UTC 2024"))
        assert result["status"] == "fail" and "535.183.01" in result["summary"]

    def test_fail_on_nvml_mismatch_message(self):
        result = run("audit.gpustack.driver",
                     probes(smi_driver="Failed to initialize NVML: Driver/library version mismatch "))
        assert result["status"] == "fail" and "mismatch" in result["summary"]

    def test_fail_when_gpus_present_without_driver(self):
        result = run("audit.gpustack.driver", probes(smi_driver=None, proc_version="absent",
                                                     module_version="absent"))
        assert result["status"] == "fail" and "no NVIDIA driver" in result["summary"]

    def test_warn_when_the_module_version_is_unreadable(self):
        result = run("audit.gpustack.driver", probes(module_version="absent"))
        assert result["status"] == "warn" and "/sys/module/nvidia/version" in result["summary"]

    def test_skip_without_gpu(self):
        result = run("audit.gpustack.driver", probes(NO_GPU_LSPCI, smi_driver=None, proc_version="absent"))
        assert result["status"] == "skip" and "no NVIDIA GPU" in result["summary"]

    def test_error_on_cut_output(self):
        assert run("audit.gpustack.driver", probes(end=None))["status"] == "error"

    def test_driver_read_from_the_core_report_even_when_cut_short(self):
        cut = smi_probe("550.90.07")["nvidia_smi_q_x"]["stdout"] + "\t<cuda_version>12.4</cuda_version>\n\t<attached_gp"
        result = run("audit.gpustack.driver", {**probes(), **probe("nvidia_smi_q_x", cut, parser="nvidia-smi-q-x")})
        assert result["status"] == "pass" and result["value"] == "550.90.07"
        assert "raw/n1/nvidia_smi_q_x.txt" in result["artifacts"]

    def test_error_on_garbage_version(self):
        assert run("audit.gpustack.driver", probes(smi_driver="\x00\x13garbage"))["status"] == "error"

    PROPRIETARY = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.90.07  Tue May 28 21:55:11 UTC 2024"

    @staticmethod
    def with_architecture(architecture: str) -> dict:
        report = smi_probe("550.90.07")["nvidia_smi_q_x"]["stdout"] + (
            f"\t<gpu id=\"00000000:19:00.0\">\n\t\t<product_architecture>{architecture}</product_architecture>\n")
        return probe("nvidia_smi_q_x", report, parser="nvidia-smi-q-x")

    def test_fail_on_a_proprietary_module_with_blackwell_gpus(self):
        result = run("audit.gpustack.driver", {**probes(proc_version=self.PROPRIETARY),
                                               **self.with_architecture("Blackwell")})
        assert result["status"] == "fail" and "open GPU kernel modules" in result["summary"]
        assert result["evidence"]["kernel_module"] == "proprietary"

    def test_proprietary_module_passes_on_hopper(self):
        result = run("audit.gpustack.driver", {**probes(proc_version=self.PROPRIETARY),
                                               **self.with_architecture("Hopper")})
        assert result["status"] == "pass"

    def test_open_module_passes_on_blackwell(self):
        assert run("audit.gpustack.driver", {**probes(), **self.with_architecture("Blackwell")})["status"] == "pass"

    def test_fail_when_the_driver_binds_no_gpu(self):
        no_devices = probe("nvidia_smi_q_x", "No devices were found\n", rc=6, parser="nvidia-smi-q-x")
        result = run("audit.gpustack.driver", {**probes(proc_version=self.PROPRIETARY), **no_devices})
        assert result["status"] == "fail" and "No devices were found" in result["summary"]
        assert "proprietary" in result["summary"]


class TestContainerToolkit:
    def test_pass(self):
        result = run("audit.gpustack.container_toolkit", probes())
        assert result["status"] == "pass" and result["value"] == "1.17.8"

    def test_fail_when_missing_on_gpu_node(self):
        result = run("audit.gpustack.container_toolkit", probes(tool=["perf"], ctk_version=None, ctk_file=[]))
        assert result["status"] == "fail"

    def test_warn_when_no_runtime_configuration(self):
        result = run("audit.gpustack.container_toolkit", probes(ctk_file=[]))
        assert result["status"] == "warn" and "configuration" in result["summary"]

    def test_warn_when_version_unreadable(self):
        result = run("audit.gpustack.container_toolkit", probes(ctk_version="segmentation fault"))
        assert result["status"] == "warn" and "unreadable" in result["summary"]

    def test_skip_without_gpu(self):
        assert run("audit.gpustack.container_toolkit", probes(NO_GPU_LSPCI))["status"] == "skip"

    def test_error_on_unparseable_lspci(self):
        assert run("audit.gpustack.container_toolkit", probes("\x00\x01 noise"))["status"] == "error"


class TestGpudirectRdma:
    def test_pass_with_open_module_dma_buf(self):
        result = run("audit.gpustack.gpudirect_rdma", probes())
        assert result["status"] == "pass" and result["value"] == "dma-buf"

    def test_warn_peermem_only(self):
        proprietary = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.86.10  Wed Jul 26 23:20:03 UTC 2023"
        result = run("audit.gpustack.gpudirect_rdma",
                     probes(proc_version=proprietary, module=["nvidia", "nvidia_peermem", "ib_core"]))
        assert result["status"] == "warn" and "peermem" in result["summary"]

    def test_fail_without_any_path(self):
        proprietary = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.86.10  Wed Jul 26 23:20:03 UTC 2023"
        result = run("audit.gpustack.gpudirect_rdma", probes(proc_version=proprietary, module=["nvidia", "ib_core"]))
        assert result["status"] == "fail"

    def test_fail_on_open_module_but_old_kernel(self):
        assert run("audit.gpustack.gpudirect_rdma", probes(kernel="5.4.0-200-generic"))["status"] == "fail"

    def test_skip_without_rdma_nic(self):
        result = run("audit.gpustack.gpudirect_rdma", probes(hgx_lspci(with_nic=False), module=["nvidia"]))
        assert result["status"] == "skip" and "RDMA" in result["summary"]

    def test_error_on_garbled_driver_line(self):
        assert run("audit.gpustack.gpudirect_rdma", probes(proc_version="garbled"))["status"] == "error"


class TestPcieAcs:
    def test_skip_when_lspci_is_not_installed(self):
        missing = probe("gpustack_lspci", "sh: 1: lspci: not found\n", rc=127, missing=True)
        result = run("audit.gpustack.pcie_acs", {**probes(), **missing})
        assert result["status"] == "skip" and "lspci is not installed" in result["summary"]
        assert run("audit.gpustack.driver", {**probes(), **missing})["status"] == "pass"

    def test_pass_when_redirect_off(self):
        result = run("audit.gpustack.pcie_acs", probes())
        assert result["status"] == "pass" and result["value"] == 0
        assert result["evidence"]["bridges_on_path"] == ["0000:17:01.0", "0000:17:02.0"]

    def test_fail_when_redirect_on(self):
        result = run("audit.gpustack.pcie_acs", probes(hgx_lspci(redirect=True)))
        assert result["status"] == "fail" and result["value"] == 2 and "ReqRedir" in result["summary"]

    def test_warn_when_lspci_ran_without_root(self):
        result = run("audit.gpustack.pcie_acs", probes(hgx_lspci(denied=True)))
        assert result["status"] == "warn" and "access denied" in result["summary"]

    def test_warn_on_real_excerpt_missing_the_downstream_ports(self):
        result = run("audit.gpustack.pcie_acs", probes(read_corpus("lspci", "h100-hgx-lspci-vvv-acs-excerpt.txt")))
        assert result["status"] == "warn"

    def test_skip_without_nic(self):
        assert run("audit.gpustack.pcie_acs", probes(hgx_lspci(with_nic=False)))["status"] == "skip"

    def test_skip_without_gpu(self):
        assert run("audit.gpustack.pcie_acs", probes(NO_GPU_LSPCI))["status"] == "skip"

    def test_error_on_timeout(self):
        timed = {**lspci_probe("", rc=None, timed_out=True, timeout=60), **node_probe()}
        assert run("audit.gpustack.pcie_acs", timed)["status"] == "error"


class TestGdrcopy:
    def test_pass(self):
        assert run("audit.gpustack.gdrcopy", probes())["status"] == "pass"

    def test_warn_when_not_installed(self):
        result = run("audit.gpustack.gdrcopy", probes(gdr_lib="", gdr_dev=None, module=["nvidia"]))
        assert result["status"] == "warn" and "not installed" in result["summary"]

    def test_fail_when_half_installed(self):
        result = run("audit.gpustack.gdrcopy", probes(gdr_dev=None))
        assert result["status"] == "fail" and "/dev/gdrdrv" in result["summary"]

    def test_skip_without_gpu(self):
        assert run("audit.gpustack.gdrcopy", probes(NO_GPU_LSPCI))["status"] == "skip"

    def test_error_on_cut_output(self):
        assert run("audit.gpustack.gdrcopy", probes(end=None))["status"] == "error"


def vboost_probe(text: str, rc: int = 0) -> dict:
    return probe("gpustack_vboost", text, rc=rc, cmd="nvidia-smi boost-slider -l")


VBOOST_HEADER = "GPU  Boostslider  Max  Min  Current  Default\n"


class TestVboost:
    def test_pass_at_default(self):
        text = VBOOST_HEADER + "".join(f"{i}    vboost       4    0    0        0\n" for i in range(8))
        result = run("audit.gpustack.vboost", {**probes(), **vboost_probe(text)})
        assert result["status"] == "pass" and "8 GPU" in result["summary"]

    def test_warn_when_left_changed(self):
        text = VBOOST_HEADER + "0    vboost       4    0    3        0\n1    vboost       4    0    0        0\n"
        result = run("audit.gpustack.vboost", {**probes(), **vboost_probe(text)})
        assert result["status"] == "warn" and "GPU0=3" in result["summary"]

    def test_warn_when_not_permitted(self):
        result = run("audit.gpustack.vboost", {**probes(), **vboost_probe("Insufficient Permissions\n", rc=4)})
        assert result["status"] == "warn"

    def test_fail_when_the_driver_breaks(self):
        failed = vboost_probe("Unable to determine the device handle for GPU0000:19:00.0: Unknown Error\n", rc=15)
        assert run("audit.gpustack.vboost", {**probes(), **failed})["status"] == "fail"

    def test_skip_on_old_nvidia_smi(self):
        old = vboost_probe("Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.\n", rc=2)
        assert run("audit.gpustack.vboost", {**probes(), **old})["status"] == "skip"

    def test_error_on_unreadable_output(self):
        assert run("audit.gpustack.vboost", {**probes(), **vboost_probe("??\n")})["status"] == "error"


class TestIommuMode:
    def test_pass_identity(self):
        result = run("audit.gpustack.iommu_mode", probes())
        assert result["status"] == "pass" and result["value"] == "identity"

    def test_fail_strict(self):
        groups = ["30 DMA 0000:16:00.0 0000:17:01.0 0000:17:02.0 0000:19:00.0 0000:1a:00.0"]
        assert run("audit.gpustack.iommu_mode", probes(iommu_group=groups))["status"] == "fail"

    def test_warn_lazy(self):
        groups = ["30 DMA-FQ 0000:19:00.0 0000:1a:00.0"]
        assert run("audit.gpustack.iommu_mode", probes(iommu_group=groups))["status"] == "warn"

    def test_pass_without_iommu(self):
        result = run("audit.gpustack.iommu_mode", probes(iommu_group=[]))
        assert result["status"] == "pass" and result["value"] == "off"

    def test_skip_without_gpu(self):
        assert run("audit.gpustack.iommu_mode", probes(NO_GPU_LSPCI))["status"] == "skip"

    def test_error_on_cut_output(self):
        assert run("audit.gpustack.iommu_mode", probes(end=None))["status"] == "error"


GRACE = {"arch": "aarch64", "virt_vm": "kvm"}


class TestArmSmmuCmdqv:
    def test_skip_on_x86(self):
        assert run("audit.gpustack.arm_smmu_cmdqv", probes())["status"] == "skip"

    def test_pass_with_cmdqv(self):
        result = run("audit.gpustack.arm_smmu_cmdqv", probes(**GRACE, smmu_driver=["tegra241-cmdqv"]))
        assert result["status"] == "pass"

    def test_warn_vm_without_cmdqv(self):
        assert run("audit.gpustack.arm_smmu_cmdqv", probes(**GRACE))["status"] == "warn"

    def test_fail_vm_strict_without_cmdqv(self):
        result = run("audit.gpustack.arm_smmu_cmdqv", probes(**GRACE, iommu_group=["30 DMA 0000:19:00.0"]))
        assert result["status"] == "fail"

    def test_error_on_cut_output(self):
        assert run("audit.gpustack.arm_smmu_cmdqv", probes(end=None))["status"] == "error"


def params_probe(admin_only: int | None = 1) -> dict:
    lines = ["ResmanDebugLevel: 4294967295", "RmLogonRC: 1", "ModifyDeviceFiles: 1"]
    if admin_only is not None:
        lines.append(f"RmProfilingAdminOnly: {admin_only}")
    lines += ["NvLinkDisable: 0", "CreateImexChannel0: 0", 'RegistryDwords: ""']
    return probe("gpustack_params", "\n".join(lines) + "\n", cmd="cat /proc/driver/nvidia/params")


class TestNcuProfiling:
    def test_pass_open_counters(self):
        assert run("audit.gpustack.ncu_profiling", {**probes(), **params_probe(0)})["status"] == "pass"

    def test_warn_admin_only_with_root(self):
        result = run("audit.gpustack.ncu_profiling", {**probes(sudo="root"), **params_probe(1)})
        assert result["status"] == "warn" and "RmProfilingAdminOnly=1" in result["summary"]

    def test_fail_admin_only_without_root(self):
        result = run("audit.gpustack.ncu_profiling", {**probes(sudo="no"), **params_probe(1)})
        assert result["status"] == "fail" and "ERR_NVGPUCTRPERM" in result["summary"]

    def test_skip_without_gpu(self):
        absent = probe("gpustack_params", "absent\n")
        assert run("audit.gpustack.ncu_profiling", {**probes(NO_GPU_LSPCI), **absent})["status"] == "skip"

    def test_error_when_setting_missing(self):
        assert run("audit.gpustack.ncu_profiling", {**probes(), **params_probe(None)})["status"] == "error"

    def test_real_params_file_reads_admin_only(self):
        # The corpus H200 VM params file (driver 580.159.04) has RmProfilingAdminOnly: 0 (line 18).
        text = read_corpus("proc-driver-nvidia", "params-drv580.159.04-h200-vm.txt")
        result = run("audit.gpustack.ncu_profiling", {**probes(sudo="no"), **probe("gpustack_params", text)})
        assert result["status"] == "pass" and result["value"] == 0


class TestPerfAccess:
    @pytest.mark.parametrize(("paranoid", "kptr", "status"), [
        ("1", "0", "pass"), ("2", "0", "warn"), ("1", "1", "warn"), ("3", "0", "fail"), ("4", "2", "fail")])
    def test_grades_sysctls(self, paranoid, kptr, status):
        result = run("audit.gpustack.perf_access", probes(perf_event_paranoid=paranoid, kptr_restrict=kptr))
        assert result["status"] == status
        assert result["expected"]["source"].startswith("baselines/gpustack.yml")

    def test_warn_without_perf(self):
        result = run("audit.gpustack.perf_access", probes(tool=["ncu"]))
        assert result["status"] == "warn" and "perf not installed" in result["summary"]

    def test_skip_without_perf_events(self):
        assert run("audit.gpustack.perf_access", probes(perf_event_paranoid="absent"))["status"] == "skip"

    def test_error_on_garbage(self):
        assert run("audit.gpustack.perf_access", probes(perf_event_paranoid="x"))["status"] == "error"


# An MI300X platform: the same switch layout with an AMD Instinct GPU (class 1200, amdgpu), an EPYC host's own
# AMD function beside it (not a GPU), no NVIDIA driver and no nvidia-smi.
AMD_GPU = ("Processing accelerators", "1200", "Advanced Micro Devices, Inc. [AMD/ATI] Aqua Vanjaram [Instinct MI300X]",
           "1002:74a1", "amdgpu")
EPYC_PSP = endpoint("0000:c1:00.1", "Encryption controller", "1080",
                    "Advanced Micro Devices, Inc. [AMD] Family 19h PSP/CCP", "1022:14ca", "ccp")


def amd_probes(redirect: bool = False, with_nic: bool = True, **over) -> dict:
    text = hgx_lspci(redirect=redirect, with_nic=with_nic).replace(
        "3D controller [0302]: NVIDIA Corporation GH100 [H100 SXM5 80GB] [10de:2330]",
        f"{AMD_GPU[0]} [{AMD_GPU[1]}]: {AMD_GPU[2]} [{AMD_GPU[3]}]").replace(
        "Kernel driver in use: nvidia", "Kernel driver in use: amdgpu") + EPYC_PSP
    defaults = {"proc_version": "absent", "module_version": "absent", "module": ["amdgpu", "ib_core", "mlx5_ib"]}
    return {**probes(text, smi_driver=None, ctk_version=None, **{**defaults, **over})}


class TestAmdGpuPaths:
    """ACS, IOMMU and passthrough concern any GPU doing peer DMA: an AMD Instinct GPU is judged like an NVIDIA
    one, while the NVIDIA driver checks skip on it."""

    def test_inventory_holds_the_amd_gpu_as_an_accelerator_only(self):
        inv = pci_inventory(Context(subject="n1", probes=lspci_probe(amd_probes()["gpustack_lspci"]["stdout"])))
        assert inv["gpus"] == [] and [g["address"] for g in inv["accelerators"]] == ["0000:19:00.0"]

    def test_acs_pass_and_fail_on_the_amd_gpu_nic_path(self):
        result = run("audit.gpustack.pcie_acs", amd_probes())
        assert result["status"] == "pass" and list(result["evidence"]["pairs"]) == ["0000:19:00.0<->0000:1a:00.0"]
        result = run("audit.gpustack.pcie_acs", amd_probes(redirect=True))
        assert result["status"] == "fail" and "ReqRedir" in result["summary"]

    def test_acs_skip_without_nic(self):
        result = run("audit.gpustack.pcie_acs", amd_probes(with_nic=False))
        assert result["status"] == "skip" and "no RDMA NIC" in result["summary"]

    def test_iommu_mode_reads_the_amd_gpu_group(self):
        assert run("audit.gpustack.iommu_mode", amd_probes())["status"] == "pass"
        result = run("audit.gpustack.iommu_mode", amd_probes(iommu_group=["30 DMA 0000:19:00.0 0000:1a:00.0"]))
        assert result["status"] == "fail" and "strict IOMMU" in result["summary"]

    def test_without_lspci_the_amdgpu_module_marks_a_gpu_node(self):
        missing = probe("gpustack_lspci", "", rc=127, missing=True)
        result = run("audit.gpustack.iommu_mode", {**amd_probes(), **missing})
        assert result["status"] == "pass" and result["value"] == "identity"
        no_gpu = {**amd_probes(module=["ib_core"]), **missing}
        result = run("audit.gpustack.iommu_mode", no_gpu)
        assert result["status"] == "skip" and "no GPU" in result["summary"]

    def test_nvidia_driver_checks_still_skip(self):
        result = run("audit.gpustack.driver", amd_probes())
        assert result["status"] == "skip" and "NVIDIA" in result["summary"]
        assert run("audit.gpustack.gdrcopy", amd_probes())["status"] == "skip"

    def test_host_amd_functions_are_not_gpus(self):
        text = NO_GPU_LSPCI + EPYC_PSP
        assert run("audit.gpustack.pcie_acs", probes(text))["status"] == "skip"
