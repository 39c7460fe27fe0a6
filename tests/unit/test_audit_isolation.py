"""audit.isolation.*: every check gives pass, warn, fail, skip and error from probe outputs written here."""

from __future__ import annotations

from tests.conftest import key_value_text, read_corpus
from tests.helpers import judge as run
from tests.helpers import probe
from tests.unit.test_audit_gpustack import NO_GPU_LSPCI, hgx_lspci, lspci_probe, node_probe, params_probe

RUN = "test-run"


def iso_text(**over) -> str:
    """The isolation_node probe as its shell prints it: a healthy bare-metal x86 HGX node by default."""
    values = {
        "arch": "x86_64", "uid": "1000", "sudo": "no", "virt_vm": "none", "cpu_flags": "vmx ",
        "kvm_nested": None, "dev_kvm": None, "vmscape": "Mitigation: IBPB before exit to userspace",
        "ipmi_dev": None, "module": None, "smbios": None,
        "netdev": ["eno1 ixgbe", "ibp26s0 mlx5_core", "lo "],
        "inet": ["lo 127.0.0.1/8", "eno1 10.1.0.11/16"],
        "rshim": None, "virtio_port": None,
        "numa": ["node0 cpus=0-55,112-167 kb=1056357896", "node1 cpus=56-111,168-223 kb=1056791012"],
        "ib_port": ["mlx5_0/1 InfiniBand 0x8001,0x7fff,", "mlx5_1/1 InfiniBand 0x8001,0x7fff,"],
        "umad": ["/dev/infiniband/umad0 600"], "end": "ok",
    }
    values.update(over)
    return key_value_text(values)


def iso(lspci: str | None = None, **over) -> dict:
    return {**probe("isolation_node", iso_text(**over), cmd="sh -c ..."),
            **lspci_probe(lspci if lspci is not None else hgx_lspci()), **node_probe()}


KVM_GUEST = {"virt_vm": "kvm", "cpu_flags": "hypervisor "}


class TestBmcInband:
    def test_pass_without_any_path(self):
        result = run("audit.isolation.bmc_inband", iso())
        assert result["status"] == "pass" and "no /dev/ipmi" in result["summary"]

    def test_fail_when_dev_ipmi_opens(self):
        result = run("audit.isolation.bmc_inband", iso(ipmi_dev=["/dev/ipmi0 666 rw"], module=["ipmi_si"]))
        assert result["status"] == "fail" and "/dev/ipmi0" in result["summary"]

    def test_fail_on_redfish_host_interface(self):
        result = run("audit.isolation.bmc_inband", iso(netdev=["usb0 cdc_ether"], inet=["usb0 169.254.3.1/24"]))
        assert result["status"] == "fail" and "Redfish" in result["summary"]
        assert result["evidence"]["contacted"].startswith("nothing")

    def test_no_ipmitool_is_no_proof_root_tenant_with_bmc_record_warns(self):
        result = run("audit.isolation.bmc_inband", iso(smbios=["38-0"], sudo="root"))
        assert result["status"] == "warn" and "SMBIOS type 38" in result["summary"]

    def test_pass_when_device_closed_to_unprivileged_user(self):
        result = run("audit.isolation.bmc_inband", iso(ipmi_dev=["/dev/ipmi0 600 no"], smbios=["38-0"]))
        assert result["status"] == "pass"

    def test_skip_in_vm_without_evidence(self):
        assert run("audit.isolation.bmc_inband", iso(**KVM_GUEST))["status"] == "skip"

    def test_error_on_cut_output(self):
        assert run("audit.isolation.bmc_inband", iso(end=None))["status"] == "error"


NESTED = {**KVM_GUEST, "cpu_flags": "hypervisor vmx ", "kvm_nested": "Y", "dev_kvm": "660"}


class TestJanuscape:
    def test_skip_on_bare_metal(self):
        assert run("audit.isolation.januscape", iso())["status"] == "skip"

    def test_pass_guest_without_nested(self):
        result = run("audit.isolation.januscape", iso(**KVM_GUEST, dev_kvm="600"))
        assert result["status"] == "pass" and "vmx/svm" in result["summary"]

    def test_warn_nested_available(self):
        assert run("audit.isolation.januscape", iso(**NESTED))["status"] == "warn"

    def test_fail_nested_open_to_all(self):
        assert run("audit.isolation.januscape", iso(**{**NESTED, "dev_kvm": "666"}))["status"] == "fail"

    def test_warn_when_virt_unknown(self):
        assert run("audit.isolation.januscape", iso(virt_vm=""))["status"] == "warn"

    def test_error_on_cut_output(self):
        assert run("audit.isolation.januscape", iso(end=None))["status"] == "error"


class TestVmscape:
    def test_pass_not_affected(self):
        assert run("audit.isolation.vmscape", iso(**KVM_GUEST, vmscape="Not affected"))["status"] == "pass"

    def test_warn_guest_on_affected_cpu(self):
        result = run("audit.isolation.vmscape", iso(**KVM_GUEST, vmscape="Mitigation: IBPB before exit to userspace"))
        assert result["status"] == "warn" and "host" in result["summary"]

    def test_fail_unmitigated_kvm_host(self):
        assert run("audit.isolation.vmscape", iso(dev_kvm="660", vmscape="Vulnerable"))["status"] == "fail"

    def test_skip_on_arm(self):
        assert run("audit.isolation.vmscape", iso(arch="aarch64"))["status"] == "skip"

    def test_skip_bare_metal_without_kvm(self):
        assert run("audit.isolation.vmscape", iso(vmscape="Vulnerable"))["status"] == "skip"

    def test_error_on_cut_output(self):
        assert run("audit.isolation.vmscape", iso(end=None))["status"] == "error"


class TestQemuVirtioSerial:
    def test_pass_without_agent(self):
        assert run("audit.isolation.qemu_virtio_serial", iso(**KVM_GUEST))["status"] == "pass"

    def test_warn_root_only_agent(self):
        result = run("audit.isolation.qemu_virtio_serial", iso(**KVM_GUEST, virtio_port="org.qemu.guest_agent.0 600"))
        assert result["status"] == "warn"

    def test_fail_agent_writable_by_all(self):
        result = run("audit.isolation.qemu_virtio_serial", iso(**KVM_GUEST, virtio_port="org.qemu.guest_agent.0 666"))
        assert result["status"] == "fail"

    def test_skip_on_bare_metal(self):
        assert run("audit.isolation.qemu_virtio_serial", iso())["status"] == "skip"

    def test_error_on_cut_output(self):
        assert run("audit.isolation.qemu_virtio_serial", iso(end=None))["status"] == "error"


def vm_host(groups: list[str], virt: str = "none") -> dict:
    modules = ["nvidia", "vfio_pci"]
    return {**iso(), **node_probe(module=modules, iommu_group=groups, virt_vm=virt)}


class TestPciePassthrough:
    def test_pass_gpu_alone_in_its_group(self):
        result = run("audit.isolation.pcie_passthrough", vm_host(["30 DMA 0000:19:00.0", "31 DMA 0000:1a:00.0"]))
        assert result["status"] == "pass"

    def test_fail_gpu_shares_group(self):
        result = run("audit.isolation.pcie_passthrough", vm_host(["30 DMA 0000:17:01.0 0000:19:00.0 0000:1a:00.0"]))
        assert result["status"] == "fail" and result["evidence"]["shared_groups"] == {
            "30": ["0000:19:00.0", "0000:1a:00.0"]}

    def test_fail_vm_host_without_iommu(self):
        assert run("audit.isolation.pcie_passthrough", vm_host([]))["status"] == "fail"

    def test_warn_inside_a_guest(self):
        assert run("audit.isolation.pcie_passthrough", vm_host([], virt="kvm"))["status"] == "warn"

    def test_skip_bare_metal_without_vfio(self):
        assert run("audit.isolation.pcie_passthrough", iso())["status"] == "skip"

    def test_skip_without_gpu(self):
        assert run("audit.isolation.pcie_passthrough", iso(NO_GPU_LSPCI))["status"] == "skip"

    def test_error_on_cut_node_probe(self):
        assert run("audit.isolation.pcie_passthrough", {**iso(), **node_probe(end=None)})["status"] == "error"


def topo_probe(text: str, rc: int = 0) -> dict:
    return probe("gpustack_topo", text, rc=rc, parser="nvidia-smi-topo", cmd="nvidia-smi topo -m")


def imex_params(value: int) -> dict:
    text = f"RmProfilingAdminOnly: 1\nNvLinkDisable: 0\nImexChannelCount: 2048\nCreateImexChannel0: {value}\n"
    return probe("gpustack_params", text)


def small_topo(links: str = "NV18") -> str:
    """A 2-GPU ``nvidia-smi topo -m`` in the tool's tab layout (header, two rows, legend)."""
    return ("\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
            f"GPU0\t X \t{links}\t0-55\t0\t\tN/A\nGPU1\t{links}\t X \t0-55\t0\t\tN/A\n\n"
            "Legend:\n\n  X    = Self\n  NV#  = Connection traversing a bonded set of # NVLinks\n")


class TestNvlinkBoundary:
    def test_pass_on_real_hgx_matrix(self):
        # Real HGX topo: 8 GPUs, every pair NV18, 10 NICs.
        text = read_corpus("nvidia-smi-topo", "topo-m-8gpu-nv18-10nic-mlx5-tabs.txt")
        result = run("audit.isolation.nvlink_boundary", {**iso(), **topo_probe(text), **imex_params(0)})
        assert result["status"] == "pass" and "8 GPUs" in result["summary"]

    def test_fail_imex_channel0_for_all(self):
        result = run("audit.isolation.nvlink_boundary", {**iso(), **topo_probe(small_topo()), **imex_params(1)})
        assert result["status"] == "fail" and "IMEX" in result["summary"]

    def test_warn_without_driver_params(self):
        absent = probe("gpustack_params", "absent\n")
        assert run("audit.isolation.nvlink_boundary",
                   {**iso(), **topo_probe(small_topo()), **absent})["status"] == "warn"

    def test_skip_pcie_only(self):
        result = run("audit.isolation.nvlink_boundary", {**iso(), **topo_probe(small_topo("PIX")), **imex_params(0)})
        assert result["status"] == "skip"

    def test_error_on_truncated_matrix(self):
        text = read_corpus("nvidia-smi-topo", "topo-m-dgx-h100-12nic-TRUNCATED-at-NIC5.txt")
        result = run("audit.isolation.nvlink_boundary", {**iso(), **topo_probe(text), **imex_params(0)})
        assert result["status"] == "error"


def ss_probe(rows: list[str]) -> dict:
    return probe("isolation_listen", "".join(r + "\n" for r in rows), cmd="ss -Hltn")


SSHD = "LISTEN 0      128          0.0.0.0:22        0.0.0.0:*"


class TestObservability:
    def test_pass_with_sshd_and_loopback_prometheus(self):
        result = run("audit.isolation.observability", ss_probe([SSHD, "LISTEN 0 4096 127.0.0.1:9090 0.0.0.0:*"]))
        assert result["status"] == "pass"

    def test_fail_grafana_on_all_addresses(self):
        result = run("audit.isolation.observability", ss_probe([SSHD, "LISTEN 0 4096 *:3000 *:*"]))
        assert result["status"] == "fail" and "Grafana" in result["summary"]

    def test_warn_exporter_open(self):
        result = run("audit.isolation.observability", ss_probe([SSHD, "LISTEN 0 4096 [::]:9400 [::]:*"]))
        assert result["status"] == "warn" and "dcgm-exporter" in result["summary"]

    def test_skip_without_ss(self):
        missing = probe("isolation_listen", "", rc=127, missing=True, tool="ss")
        assert run("audit.isolation.observability", missing)["status"] == "skip"

    def test_error_on_garbage(self):
        assert run("audit.isolation.observability", ss_probe(["\x00\x01 binary noise"]))["status"] == "error"


BLUEFIELD = ("0000:a1:00.0 Ethernet controller [0200]: Mellanox Technologies MT43244 BlueField-3 integrated "
             "ConnectX-7 network controller [15b3:a2dc] (rev 01)\n\tKernel driver in use: mlx5_core\n\n")


class TestDpuRshim:
    def test_pass_bluefield_without_rshim(self):
        assert run("audit.isolation.dpu_rshim", iso(hgx_lspci() + BLUEFIELD))["status"] == "pass"

    def test_fail_tmfifo_present(self):
        result = run("audit.isolation.dpu_rshim", iso(hgx_lspci() + BLUEFIELD, netdev=["tmfifo_net0 rshim_net"]))
        assert result["status"] == "fail" and "tmfifo_net0" in result["summary"]

    def test_fail_dev_rshim_even_without_lspci(self):
        probes = {**iso(rshim="/dev/rshim0"), **lspci_probe("", rc=127, missing=True, tool="lspci")}
        assert run("audit.isolation.dpu_rshim", probes)["status"] == "fail"

    def test_warn_module_without_device(self):
        assert run("audit.isolation.dpu_rshim", iso(hgx_lspci() + BLUEFIELD, module="rshim"))["status"] == "warn"

    def test_skip_without_bluefield(self):
        assert run("audit.isolation.dpu_rshim", iso())["status"] == "skip"

    def test_error_on_cut_output(self):
        assert run("audit.isolation.dpu_rshim", iso(end=None))["status"] == "error"


class TestIbTenant:
    def test_pass_tenant_partition(self):
        result = run("audit.isolation.ib_tenant", iso())
        assert result["status"] == "pass" and "0x8001" in result["summary"]

    def test_warn_default_partition_only(self):
        result = run("audit.isolation.ib_tenant", iso(ib_port=["mlx5_0/1 InfiniBand 0xffff,"]))
        assert result["status"] == "warn" and "0xffff" in result["summary"]

    def test_fail_umad_open_to_all(self):
        result = run("audit.isolation.ib_tenant", iso(umad=["/dev/infiniband/umad0 666"]))
        assert result["status"] == "fail" and "umad0" in result["summary"]

    def test_skip_on_roce(self):
        assert run("audit.isolation.ib_tenant", iso(ib_port=["mlx5_0/1 Ethernet 0xffff,"]))["status"] == "skip"

    def test_error_on_cut_output(self):
        assert run("audit.isolation.ib_tenant", iso(end=None))["status"] == "error"


GH200 = {"arch": "aarch64"}


class TestHbmNuma:
    def test_pass_without_cpu_less_nodes(self):
        result = run("audit.isolation.hbm_numa", iso(**GH200, numa=["node0 cpus=0-71 kb=500000000"]))
        assert result["status"] == "pass" and result["value"] == 0

    def test_fail_hbm_onlined(self):
        numa = ["node0 cpus=0-71 kb=500000000", "node1 cpus= kb=100663296"]  # 96 GiB CPU-less: GH200 HBM
        result = run("audit.isolation.hbm_numa", iso(**GH200, numa=numa))
        assert result["status"] == "fail" and result["value"] == 96.0

    def test_warn_small_cpu_less_node(self):
        numa = ["node0 cpus=0-71 kb=500000000", "node2 cpus= kb=16777216"]
        assert run("audit.isolation.hbm_numa", iso(**GH200, numa=numa))["status"] == "warn"

    def test_skip_on_x86(self):
        assert run("audit.isolation.hbm_numa", iso())["status"] == "skip"

    def test_error_without_numa_info(self):
        assert run("audit.isolation.hbm_numa", iso(**GH200, numa=None))["status"] == "error"


def test_ncu_params_helper_is_shared():
    # The isolation NVLink check and the gpustack ncu check read the same params probe.
    assert "RmProfilingAdminOnly: 1" in params_probe(1)["gpustack_params"]["stdout"]
