"""Fabric audit checks: every check gives pass, warn, fail, skip and error from evidence written here.

The RDMA listings are in the fabric_rdma probe's own layout, with values in the kernel's sysfs formats
(``4: ACTIVE``, ``5: LinkUp``, ``400 Gb/sec (4X NDR)``, PKeys ``0xffff``).
"""

from __future__ import annotations

import json
from typing import ClassVar

from clustereval import checks
from clustereval.checks import Context, audit_fabric
from tests.helpers import judge as run
from tests.helpers import probe

GOOD_RAILS = [(f"mlx5_{i}", "MT4129", "InfiniBand", 400, "ACTIVE") for i in range(8)]


def port_block(layer: str, rate: float, state: str, pkeys: str = "0xffff") -> str:
    code, phys = {"ACTIVE": ("4", "5: LinkUp"), "DOWN": ("1", "3: Disabled"), "INIT": ("2", "5: LinkUp")}[state]
    speed = {400: "4X NDR", 200: "4X HDR", 100: "4X EDR", 40: "4X QDR"}.get(int(rate), "4X")
    return (f" port 1\n  state {code}: {state}\n  phys_state {phys}\n  rate {rate:g} Gb/sec ({speed})\n"
            f"  link_layer {layer}\n  pkeys {pkeys} \n")


def rdma(rails=GOOD_RAILS, pkeys: str = "0xffff", fw: str = "28.39.1002", end: bool = True) -> str:
    out = "# rdma sysfs\n"
    for name, ca_type, layer, rate, state in rails:
        device = {"MT4129": "0x1021", "MT4125": "0x101d"}.get(ca_type, "0x1021")
        out += (f"hca {name}\n hca_type {ca_type}\n fw_ver {fw}\n board_id MT_0000000838\n"
                f" node_guid a088:c203:00e3:142a\n pci 0x15b3 {device}\n driver mlx5_core\n netdev ib{name[-1]}\n"
                + port_block(layer, rate, state, pkeys))
    return out + ("# end\n" if end else "")


def gpu_xml(count: int = 8, cluster_uuid: str = "N/A", state: str = "Completed", status: str = "Success") -> str:
    gpus = "".join(f'<gpu id="00000000:{0x18 + i:02X}:00.0"><product_name>NVIDIA GB200</product_name>'
                   f"<fabric><state>{state}</state><status>{status}</status><cliqueId>32766</cliqueId>"
                   f"<clusterUuid>{cluster_uuid}</clusterUuid></fabric></gpu>" for i in range(count))
    return f'<?xml version="1.0" ?><nvidia_smi_log><attached_gpus>{count}</attached_gpus>{gpus}</nvidia_smi_log>'


def host(nccl: str = "", env: str = "", imex: str | None = None) -> str:
    files = f"### file /etc/nccl.conf\n{nccl}\n" if nccl else ""
    imex = imex or "binary none\ndaemon stopped\nnodes_config none\nchannels \n"
    return f"{files}### env\n{env}### imex\n{imex}### end\n"


class TestFabricClass:
    def test_pass_infiniband_rails(self):
        result = run("audit.fabric.class", {**probe("fabric_rdma", rdma()), **probe("nvidia_smi_q_x", gpu_xml())})
        assert result["status"] == "pass" and result["value"] == 3200
        assert result["summary"].startswith("InfiniBand fabric, 8 active port(s), 3200 Gb/s")

    def test_roce_with_front_end_nic(self):
        rails = [(f"mlx5_{i}", "MT4129", "Ethernet", 400, "ACTIVE") for i in range(4)]
        rails.append(("mlx5_4", "MT4125", "Ethernet", 100, "ACTIVE"))
        result = run("audit.fabric.class", probe("fabric_rdma", rdma(rails)))
        assert result["status"] == "pass" and "RoCE" in result["summary"] and result["value"] == 1700

    def test_warn_gpu_node_without_rdma(self):
        result = run("audit.fabric.class", {**probe("fabric_rdma", "# rdma sysfs\n# end\n"),
                                            **probe("nvidia_smi_q_x", gpu_xml())})
        assert result["status"] == "warn" and "TCP" in result["summary"]

    def test_fail_when_no_port_is_active(self):
        rails = [(n, t, layer, r, "DOWN") for n, t, layer, r, _ in GOOD_RAILS]
        assert run("audit.fabric.class", probe("fabric_rdma", rdma(rails)))["status"] == "fail"

    def test_skip_without_rdma_or_gpu(self):
        result = run("audit.fabric.class", {**probe("fabric_rdma", "# rdma sysfs\n# end\n"),
                                            **probe("nvidia_smi_q_x", "", rc=127, missing=True)})
        assert result["status"] == "skip" and "no RDMA device" in result["summary"]

    def test_error_on_cut_output(self):
        result = run("audit.fabric.class", probe("fabric_rdma", rdma(end=False)))
        assert result["status"] == "error" and "cut short" in result["summary"]


class TestPortRate:
    def test_pass(self):
        result = run("audit.fabric.port_rate", probe("fabric_rdma", rdma()))
        assert result["status"] == "pass" and "8 × 400 Gb/s" in result["summary"]

    def test_fail_on_down_port(self):
        rails = list(GOOD_RAILS)
        rails[3] = ("mlx5_3", "MT4129", "InfiniBand", 400, "DOWN")
        result = run("audit.fabric.port_rate", probe("fabric_rdma", rdma(rails)))
        assert result["status"] == "fail" and "mlx5_3/1 DOWN/Disabled" in result["summary"]

    def test_fail_on_port_trained_at_200_on_a_400_fabric(self):
        rails = list(GOOD_RAILS)
        rails[5] = ("mlx5_5", "MT4129", "InfiniBand", 200, "ACTIVE")
        result = run("audit.fabric.port_rate", probe("fabric_rdma", rdma(rails)))
        assert result["status"] == "fail" and "mlx5_5/1 at 200 Gb/s (expected 400)" in result["summary"]

    def test_warn_when_every_port_is_below_the_model_rate(self):
        rails = [(n, t, layer, 200, s) for n, t, layer, _, s in GOOD_RAILS]
        result = run("audit.fabric.port_rate", probe("fabric_rdma", rdma(rails)))
        assert result["status"] == "warn" and "ConnectX-7" in result["summary"]

    def test_override_makes_the_lower_rate_expected_or_fails_it(self):
        rails = [(n, t, layer, 200, s) for n, t, layer, _, s in GOOD_RAILS]
        ok = run("audit.fabric.port_rate", probe("fabric_rdma", rdma(rails)),
                 baseline_overrides={"audit.fabric.port_rate": {"infiniband": 200}})
        assert ok["status"] == "pass"
        bad = run("audit.fabric.port_rate", probe("fabric_rdma", rdma(rails)),
                  baseline_overrides={"audit.fabric.port_rate": {"InfiniBand": 400}})
        assert bad["status"] == "fail"

    def test_skip_without_rdma(self):
        assert run("audit.fabric.port_rate", probe("fabric_rdma", "# rdma sysfs\n# end\n"))["status"] == "skip"

    def test_error_on_timeout(self):
        result = run("audit.fabric.port_rate", probe("fabric_rdma", "", rc=None, timed_out=True, timeout=20))
        assert result["status"] == "error" and "timed out" in result["summary"]


def link(name: str, flags: list[str], operstate: str, bus: str | None = "pci", kind: str | None = None) -> dict:
    item = {"ifindex": 2, "ifname": name, "flags": flags, "mtu": 9000, "operstate": operstate,
            "link_type": "ether"}
    if bus:
        item.update(parentbus=bus, parentdev="0000:17:00.0")
    if kind:
        item["linkinfo"] = {"info_kind": kind}
    return item


UP = ["BROADCAST", "MULTICAST", "UP", "LOWER_UP"]
NO_CARRIER = ["NO-CARRIER", "BROADCAST", "MULTICAST", "UP"]


class TestNicLink:
    def links(self, *items) -> dict:
        lo = {"ifindex": 1, "ifname": "lo", "flags": ["LOOPBACK", "UP", "LOWER_UP"], "operstate": "UNKNOWN",
              "link_type": "loopback"}
        return probe("fabric_links", json.dumps([lo, *items]))

    def test_pass_with_unused_port_noted(self):
        result = run("audit.fabric.nic_link", self.links(link("ens1f0np0", UP, "UP"),
                                                         link("eno2", ["BROADCAST", "MULTICAST"], "DOWN")))
        assert result["status"] == "pass" and "not configured: eno2" in result["summary"]

    def test_fail_storage_nic_without_carrier(self):
        result = run("audit.fabric.nic_link", self.links(link("ens1f0np0", UP, "UP"),
                                                         link("ens2f1np1", NO_CARRIER, "DOWN")))
        assert result["status"] == "fail" and "ens2f1np1 (pci 0000:17:00.0)" in result["summary"]

    def test_virtual_devices_are_not_judged(self):
        result = run("audit.fabric.nic_link", self.links(link("ens1f0np0", UP, "UP"),
                                                         link("docker0", NO_CARRIER, "DOWN", bus=None, kind="bridge")))
        assert result["status"] == "pass"

    def test_warn_when_no_physical_nic_is_up(self):
        result = run("audit.fabric.nic_link", self.links(link("eno1", ["BROADCAST"], "DOWN")))
        assert result["status"] == "warn"

    def test_skip_with_only_virtual_devices(self):
        assert run("audit.fabric.nic_link", self.links())["status"] == "skip"

    def test_skip_without_ip(self):
        result = run("audit.fabric.nic_link", probe("fabric_links", "", rc=127, missing=True, tool="ip"))
        assert result["status"] == "skip" and "not installed" in result["summary"]

    def test_error_on_garbage(self):
        assert run("audit.fabric.nic_link", probe("fabric_links", "Object \"link\" is unknown"))["status"] == "error"


class TestHcaNaming:
    def names(self, *names) -> dict:
        return probe("fabric_rdma", rdma([(n, "MT4129", "InfiniBand", 400, "ACTIVE") for n in names]))

    def test_pass(self):
        result = run("audit.fabric.hca_naming", self.names(*[f"mlx5_{i}" for i in range(8)]))
        assert result["status"] == "pass" and "mlx5_0..7" in result["summary"]

    def test_warn_on_predictable_names(self):
        result = run("audit.fabric.hca_naming", self.names("ibp26s0", "ibp60s0"))
        assert result["status"] == "warn" and "ibp26s0" in result["summary"]

    def test_fail_on_mixed_naming(self):
        result = run("audit.fabric.hca_naming", self.names("mlx5_0", "mlx5_1", "mlx5_2", "ibp94s0"))
        assert result["status"] == "fail" and result["summary"].startswith("mixed HCA naming on one node (ibp94s0")

    def test_skip_and_error(self):
        assert run("audit.fabric.hca_naming", probe("fabric_rdma", "# rdma sysfs\n# end\n"))["status"] == "skip"
        assert run("audit.fabric.hca_naming", probe("fabric_rdma", "garbage"))["status"] == "error"


class TestNcclConf:
    def test_pass_without_settings(self):
        assert run("audit.fabric.nccl_conf", probe("fabric_host", host()))["status"] == "pass"

    def test_pass_with_harmless_settings(self):
        result = run("audit.fabric.nccl_conf", probe("fabric_host", host(nccl="NCCL_IB_QPS_PER_CONNECTION=4")))
        assert result["status"] == "pass" and "NCCL_IB_QPS_PER_CONNECTION" in result["summary"]

    def test_warn_on_tuning_overrides(self):
        result = run("audit.fabric.nccl_conf",
                     probe("fabric_host", host(nccl="NCCL_ALGO=Ring\nNCCL_MIN_NCHANNELS=32")))
        assert result["status"] == "warn"
        assert "NCCL_ALGO=Ring (/etc/nccl.conf)" in result["summary"] and "NCCL_MIN_NCHANNELS=32" in result["summary"]

    def test_fail_when_ib_is_disabled(self):
        result = run("audit.fabric.nccl_conf", probe("fabric_host", host(env="NCCL_IB_DISABLE=1\n")))
        assert result["status"] == "fail" and "TCP" in result["summary"]

    def test_fail_when_ib_hca_names_absent_devices(self):
        probes = {**probe("fabric_host", host(nccl="NCCL_IB_HCA=mlx5_0,mlx5_1,mlx5_8")),
                  **probe("fabric_rdma", rdma())}
        result = run("audit.fabric.nccl_conf", probes)
        assert result["status"] == "fail" and "names mlx5_8, absent" in result["summary"]
        prefix = {**probe("fabric_host", host(nccl="NCCL_IB_HCA=mlx5")), **probe("fabric_rdma", rdma())}
        assert run("audit.fabric.nccl_conf", prefix)["status"] == "pass"

    def test_skip_and_error(self):
        missing = probe("fabric_host", "", rc=127, missing=True)
        assert run("audit.fabric.nccl_conf", missing)["status"] == "skip"
        assert run("audit.fabric.nccl_conf", probe("fabric_host", "### env\n"))["status"] == "error"


class TestIbIsolation:
    def test_pass_in_tenant_partition(self):
        result = run("audit.fabric.ib_isolation", probe("fabric_rdma", rdma(pkeys="0x8001 0x7fff")))
        assert result["status"] == "pass"

    def test_warn_default_partition_only(self):
        result = run("audit.fabric.ib_isolation", probe("fabric_rdma", rdma(pkeys="0xffff")))
        assert result["status"] == "warn" and "dedicated" in result["summary"]

    def test_fail_tenant_partition_bypassed_by_full_default_membership(self):
        result = run("audit.fabric.ib_isolation", probe("fabric_rdma", rdma(pkeys="0xffff 0x8001")))
        assert result["status"] == "fail" and "isolates nothing" in result["summary"]

    def test_skip_on_roce(self):
        rails = [(f"mlx5_{i}", "MT4129", "Ethernet", 400, "ACTIVE") for i in range(2)]
        result = run("audit.fabric.ib_isolation", probe("fabric_rdma", rdma(rails)))
        assert result["status"] == "skip" and "RoCE" in result["summary"]

    def test_error_when_pkeys_unreadable(self):
        assert run("audit.fabric.ib_isolation", probe("fabric_rdma", rdma(pkeys="")))["status"] == "error"


IMEX_OK = "binary /usr/bin/nvidia-imex\ndaemon running\nnodes_config 18\nchannels channel0 \n"
DOMAIN = "4f9a2b1c-0d3e-4e5f-8a6b-7c8d9e0f1a2b"


class TestImex:
    def probes(self, xml: str, imex: str = IMEX_OK) -> dict:
        return {**probe("nvidia_smi_q_x", xml), **probe("fabric_host", host(imex=imex))}

    def test_pass(self):
        result = run("audit.fabric.imex", self.probes(gpu_xml(4, DOMAIN)))
        assert result["status"] == "pass" and "18 peer(s)" in result["summary"]

    def test_warn_without_channel(self):
        result = run("audit.fabric.imex", self.probes(gpu_xml(4, DOMAIN), IMEX_OK.replace("channel0 ", "")))
        assert result["status"] == "warn"

    def test_fail_daemon_stopped(self):
        result = run("audit.fabric.imex", self.probes(gpu_xml(4, DOMAIN),
                                                      IMEX_OK.replace("daemon running", "daemon stopped")))
        assert result["status"] == "fail" and "not running" in result["summary"]

    def test_fail_fabric_not_registered(self):
        result = run("audit.fabric.imex", self.probes(gpu_xml(4, DOMAIN, state="In Progress", status="N/A")))
        assert result["status"] == "fail" and "registration incomplete" in result["summary"]

    def test_skip_on_single_node_nvlink(self):
        zero = "00000000-0000-0000-0000-000000000000"
        assert run("audit.fabric.imex", self.probes(gpu_xml(8)))["status"] == "skip"
        assert run("audit.fabric.imex", self.probes(gpu_xml(8, zero)))["status"] == "skip"

    def test_skip_without_gpu(self):
        result = run("audit.fabric.imex", self.probes('<?xml version="1.0" ?><nvidia_smi_log></nvidia_smi_log>'))
        assert result["status"] == "skip" and "no NVIDIA GPU" in result["summary"]

    def test_error_on_incomplete_host_probe(self):
        result = run("audit.fabric.imex", {**probe("nvidia_smi_q_x", gpu_xml(4, DOMAIN)),
                                           **probe("fabric_host", "### env\n")})
        assert result["status"] == "error"


def topology_text(plugin: str | None, switches: str = "", nodes: int = 4) -> str:
    head = "ClusterName             = gpu\n" + (f"TopologyPlugin          = {plugin}\n" if plugin else "")
    return f"{head}### topology\n{switches}### nodes {nodes}\n"


def host_facts(topology: str | None = None, rdma_text: str | None = None, nccl: str = "",
               node: str | None = None) -> dict:
    probes = {**probe("fabric_rdma", rdma_text or rdma()), **probe("fabric_host", host(nccl=nccl))}
    if topology is not None:
        probes.update(probe("fabric_slurm_topology", topology))
    if node:
        probes.update(probe("slurm_node", f"NodeName={node} Arch=x86_64 CoresPerSocket=4\n"
                                          f"   AvailableFeatures=h100,rack{node[-1]}\n   State=IDLE\n",
                            parser="slurm"))
    return checks.host_facts(Context(subject="x", probes=probes))


TREE = ("SwitchName=leaf1 Level=0 LinkSpeed=1 Nodes=node[1-2]\nSwitchName=leaf2 Level=0 LinkSpeed=1 "
        "Nodes=node[3-4]\nSwitchName=spine Level=1 LinkSpeed=1 Switches=leaf[1-2]\n")


class TestTopology:
    def test_pass_with_tree(self):
        fleet = {f"node{i}": host_facts(topology_text("topology/tree", TREE), node=f"node{i}") for i in range(1, 5)}
        result = run("audit.fabric.topology", fleet=fleet)
        assert result["status"] == "pass" and "topology/tree, 2 switch level(s)" in result["summary"]
        assert result["evidence"]["racks"]["node3"] == "leaf2"

    def test_pass_small_flat_cluster(self):
        fleet = {f"n{i}": host_facts(topology_text(None)) for i in range(4)}
        result = run("audit.fabric.topology", fleet=fleet)
        assert result["status"] == "pass" and "topology/none" in result["summary"]

    def test_fail_flat_across_racks_from_inventory(self):
        fleet = {f"n{i}": host_facts(topology_text("topology/flat")) for i in range(4)}
        result = run("audit.fabric.topology", fleet=fleet, rack_of={"n0": "A1", "n1": "A1", "n2": "B7", "n3": "B7"})
        assert result["status"] == "fail" and "2 racks (inventory rack_of)" in result["summary"]

    def test_fail_flat_across_racks_from_node_features(self):
        fleet = {f"node{i}": host_facts(topology_text("topology/flat"), node=f"node{i}") for i in range(1, 4)}
        result = run("audit.fabric.topology", fleet=fleet)
        assert result["status"] == "fail" and "Slurm node feature" in result["summary"]

    def test_warn_large_flat_cluster_with_unknown_racks(self):
        fleet = {f"n{i}": host_facts(topology_text("topology/flat", nodes=256)) for i in range(2)}
        result = run("audit.fabric.topology", fleet=fleet)
        assert result["status"] == "warn" and "256 nodes" in result["summary"]

    def test_skip_without_slurm(self):
        missing = {"x": {"name": "x", "cmd": "x", "rc": 127, "missing": True, "tool": "scontrol"}}
        facts = checks.host_facts(Context(subject="x", probes={"fabric_slurm_topology": missing["x"]}))
        assert run("audit.fabric.topology", fleet={"n1": facts})["status"] == "skip"

    def test_error_when_scontrol_fails_everywhere(self):
        failed = probe("fabric_slurm_topology", "", rc=1, stderr="scontrol: fatal: Could not establish a "
                                                                  "configuration source")
        facts = checks.host_facts(Context(subject="x", probes=failed))
        result = run("audit.fabric.topology", fleet={"n1": facts, "n2": facts})
        assert result["status"] == "error" and "configuration source" in result["summary"]


class TestQps:
    def test_skip_single_tier(self):
        fleet = {f"n{i}": host_facts(topology_text(None)) for i in range(4)}
        result = run("audit.fabric.nccl_ib_qps", fleet=fleet)
        assert result["status"] == "skip" and "single-tier" in result["summary"]

    def test_warn_default_on_multi_tier(self):
        fleet = {f"node{i}": host_facts(topology_text("topology/tree", TREE), node=f"node{i}") for i in range(1, 5)}
        result = run("audit.fabric.nccl_ib_qps", fleet=fleet)
        assert result["status"] == "warn" and "node1 (1)" in result["summary"] and result["value"] == 1

    def test_pass_when_set(self):
        fleet = {f"n{i}": host_facts(topology_text("topology/flat", nodes=128), nccl="NCCL_IB_QPS_PER_CONNECTION=4")
                 for i in range(3)}
        result = run("audit.fabric.nccl_ib_qps", fleet=fleet)
        assert result["status"] == "pass" and "128 nodes" in result["summary"]

    def test_skip_on_efa(self):
        efa = rdma().replace("pci 0x15b3", "pci 0x1d0f")
        fleet = {f"n{i}": host_facts(topology_text("topology/flat", nodes=128), rdma_text=efa) for i in range(2)}
        assert run("audit.fabric.nccl_ib_qps", fleet=fleet)["status"] == "skip"

    def test_error_on_unreadable_value(self):
        fleet = {f"n{i}": host_facts(topology_text("topology/flat", nodes=128), nccl="NCCL_IB_QPS_PER_CONNECTION=x")
                 for i in range(2)}
        assert run("audit.fabric.nccl_ib_qps", fleet=fleet)["status"] == "error"


def k8s_node(name: str, labels: dict[str, str], gpus: int = 8) -> dict:
    """A Node as ``kubectl get nodes -o json`` lists it, with GPU Feature Discovery labels."""
    alloc = {"cpu": "190", "memory": "2113404580Ki", "pods": "110", "nvidia.com/gpu": str(gpus)}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "uid": f"uid-{name}", "resourceVersion": "4711",
                         "creationTimestamp": "2026-05-01T10:00:00Z",
                         "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                                    "nvidia.com/gpu.present": "true", "nvidia.com/gpu.count": str(gpus),
                                    "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", **labels}},
            "spec": {"podCIDR": "10.244.1.0/24", "providerID": ""},
            "status": {"allocatable": alloc, "capacity": dict(alloc),
                       "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
                       "nodeInfo": {"kubeletVersion": "v1.31.4", "containerRuntimeVersion": "containerd://1.7.24"}}}


def k8s_nodes(nodes: list[dict], **fields) -> dict:
    text = json.dumps({"apiVersion": "v1", "items": nodes, "kind": "List", "metadata": {"resourceVersion": ""}},
                      indent=4)
    defaults = {"cmd": "kubectl get nodes -o json", "tool": "kubectl",
                "artifact": "raw/_cluster/kubectl-get-nodes.json"}
    return probe("k8s_nodes", fields.pop("stdout", text), **{**defaults, **fields})


def topograph(leaf: str, spine: str = "spine-1", accelerator: str = "nvl-1") -> dict[str, str]:
    """NVIDIA topograph's node labels (NVLink domain, leaf, spine, core switch)."""
    return {"network.topology.nvidia.com/accelerator": accelerator, "network.topology.nvidia.com/leaf": leaf,
            "network.topology.nvidia.com/spine": spine, "network.topology.nvidia.com/core": "core-1"}


class TestQpsOnKubernetes:
    """On k8s the tiers come from the nodes' topology labels; the per-node QPS facts are the same."""

    LEAVES: ClassVar[dict[str, str]] = {"gpu-a01": "leaf-a", "gpu-a02": "leaf-a", "gpu-b01": "leaf-b",
                                        "gpu-b02": "leaf-b"}

    def fleet(self, hosts, nccl: str = "") -> dict:
        facts = host_facts(nccl=nccl)
        return {h: facts for h in hosts}

    def judge(self, fleet: dict, nodes: list[dict], probes: dict | None = None, **options) -> dict:
        return run("audit.fabric.nccl_ib_qps", probes if probes is not None else k8s_nodes(nodes), fleet=fleet,
                   subject="_cluster", harness="k8s", **options)

    def test_warn_when_nodes_span_leaves(self):
        nodes = [k8s_node(n, topograph(leaf)) for n, leaf in self.LEAVES.items()]
        result = self.judge(self.fleet(self.LEAVES), nodes)
        assert result["status"] == "warn" and result["value"] == 1
        assert "span 2 values of the node label network.topology.nvidia.com/leaf" in result["summary"]
        assert "gpu-a01 (1)" in result["summary"] and "pod" in result["summary"]
        topo = result["evidence"]["topology"]
        assert topo["rack_source"] == "Kubernetes node label network.topology.nvidia.com/leaf"
        assert topo["racks"] == self.LEAVES
        assert "raw/_cluster/kubectl-get-nodes.json" in result["artifacts"]

    def test_pass_when_set_on_every_node(self):
        nodes = [k8s_node(n, topograph(leaf)) for n, leaf in self.LEAVES.items()]
        result = self.judge(self.fleet(self.LEAVES, nccl="NCCL_IB_QPS_PER_CONNECTION=4"), nodes)
        assert result["status"] == "pass" and result["value"] == 4
        assert "mount /etc/nccl.conf" in result["summary"]

    def test_inventory_names_may_be_fqdns_of_the_node_names(self):
        nodes = [k8s_node(n, topograph(leaf)) for n, leaf in self.LEAVES.items()]
        fqdns = [f"{n}.cluster.example.com" for n in self.LEAVES]
        result = self.judge(self.fleet(fqdns), nodes)
        assert result["status"] == "warn"
        assert result["evidence"]["topology"]["racks"] == {f"{n}.cluster.example.com": leaf
                                                           for n, leaf in self.LEAVES.items()}
        assert result["evidence"]["topology"]["k8s_nodes_not_in_inventory"] == []

    def test_gke_sub_blocks_are_tiers_but_hosts_are_not(self):
        def gke(sub: str, host: str) -> dict[str, str]:
            return {"cloud.google.com/gce-topology-block": "b-7f3a", "cloud.google.com/gce-topology-subblock": sub,
                    "cloud.google.com/gce-topology-host": host}

        nodes = [k8s_node(f"gke-a3-{i}", gke("sb-1" if i < 2 else "sb-2", f"h-{i}")) for i in range(4)]
        fleet = self.fleet([f"gke-a3-{i}" for i in range(4)])
        result = self.judge(fleet, nodes)
        assert result["status"] == "warn" and "cloud.google.com/gce-topology-subblock" in result["summary"]
        # one sub-block: the per-host label differs on every node but is not a switch tier
        nodes = [k8s_node(f"gke-a3-{i}", gke("sb-1", f"h-{i}")) for i in range(4)]
        result = self.judge(fleet, nodes)
        assert result["status"] == "skip" and "single-tier" in result["summary"]

    def test_skip_under_one_leaf_even_across_nvlink_domains(self):
        nodes = [k8s_node(n, topograph("leaf-a", accelerator=f"nvl-{i}")) for i, n in enumerate(self.LEAVES)]
        result = self.judge(self.fleet(self.LEAVES), nodes)
        assert result["status"] == "skip" and "single-tier" in result["summary"]
        assert ("labels network.topology.nvidia.com/core, network.topology.nvidia.com/leaf, "
                "network.topology.nvidia.com/spine: one group") in result["summary"]

    def test_skip_without_topology_labels_on_a_small_cluster(self):
        nodes = [k8s_node(n, {}) for n in self.LEAVES]
        result = self.judge(self.fleet(self.LEAVES), nodes)
        assert result["status"] == "skip" and "no rack/block topology label" in result["summary"]

    def test_only_the_evaluated_nodes_count(self):
        nodes = [k8s_node(n, topograph(leaf)) for n, leaf in self.LEAVES.items()]
        result = self.judge(self.fleet(["gpu-a01", "gpu-a02"]), nodes)
        assert result["status"] == "skip" and "network.topology.nvidia.com/leaf" in result["summary"]
        # every GPU node counts when no node name matches an inventory host (inventory by address)
        result = self.judge(self.fleet(["10.0.0.11", "10.0.0.12"]), nodes)
        assert result["status"] == "warn"
        assert result["evidence"]["topology"]["k8s_nodes_not_in_inventory"] == sorted(self.LEAVES)

    def test_inventory_rack_of_wins_over_labels(self):
        nodes = [k8s_node(n, topograph("leaf-a")) for n in self.LEAVES]
        racks = {"gpu-a01": "A1", "gpu-a02": "A1", "gpu-b01": "B7", "gpu-b02": "B7"}
        result = self.judge(self.fleet(self.LEAVES), nodes, rack_of=racks)
        assert result["status"] == "warn" and "2 racks" in result["summary"]
        assert result["evidence"]["topology"]["rack_source"] == "inventory rack_of"

    def test_node_count_still_decides_when_the_api_is_unreachable(self):
        refused = k8s_nodes([], rc=1, stdout="", stderr="The connection to the server 10.0.0.1:6443 was refused - "
                                                          "did you specify the right host or port?\n")
        result = self.judge(self.fleet([f"gpu-{i:03d}" for i in range(80)]), [], refused)
        assert result["status"] == "warn" and "80 nodes (over 64)" in result["summary"]
        assert "could not be reached" in result["evidence"]["topology"]["problem"]

    def test_error_when_the_tiers_cannot_be_told(self):
        refused = k8s_nodes([], rc=1, stdout="", stderr="The connection to the server 10.0.0.1:6443 was refused - "
                                                          "did you specify the right host or port?\n")
        result = self.judge(self.fleet(self.LEAVES), [], refused)
        assert result["status"] == "error" and "cannot tell whether the fabric is multi-tier" in result["summary"]
        forbidden = k8s_nodes([], rc=1, stdout="", stderr='Error from server (Forbidden): nodes is forbidden: User '
                                                           '"tenant-a" cannot list resource "nodes" in API group "" '
                                                           'at the cluster scope\n')
        result = self.judge(self.fleet(self.LEAVES), [], forbidden)
        assert result["status"] == "error" and "tenant-a" in result["summary"]
        # no Kubernetes facts at all on a k8s run
        result = self.judge(self.fleet(self.LEAVES), [], {})
        assert result["status"] == "error" and "no Kubernetes API facts" in result["summary"]

    def test_slurm_runs_ignore_kubernetes_labels(self):
        nodes = [k8s_node(n, topograph(leaf)) for n, leaf in self.LEAVES.items()]
        fleet = {n: host_facts(topology_text(None)) for n in self.LEAVES}
        result = run("audit.fabric.nccl_ib_qps", k8s_nodes(nodes), fleet=fleet, subject="_cluster", harness="slurm")
        assert result["status"] == "skip" and "topology" not in result["evidence"]


class TestFleetConsistency:
    def test_pass(self):
        fleet = {f"n{i}": host_facts() for i in range(3)}
        result = run("audit.fabric.fleet_consistency", fleet=fleet)
        assert result["status"] == "pass" and "same 8 RDMA port(s)" in result["summary"]

    def test_fail_on_missing_rail(self):
        fleet = {f"n{i}": host_facts() for i in range(3)}
        fleet["n2"] = host_facts(rdma_text=rdma(GOOD_RAILS[:7]))
        result = run("audit.fabric.fleet_consistency", fleet=fleet)
        assert result["status"] == "fail" and "n2 (has nothing extra; lacks mlx5_7/1" in result["summary"]

    def test_warn_on_firmware_skew(self):
        fleet = {f"n{i}": host_facts() for i in range(3)}
        fleet["n1"] = host_facts(rdma_text=rdma(fw="28.41.1000"))
        result = run("audit.fabric.fleet_consistency", fleet=fleet)
        assert result["status"] == "warn" and "MT4129 28.41.1000" in result["summary"]

    def test_skip_single_node(self):
        assert run("audit.fabric.fleet_consistency", fleet={"n1": host_facts()})["status"] == "skip"

    def test_error_when_nodes_could_not_be_read(self):
        bad = checks.host_facts(Context(subject="x", probes=probe("fabric_rdma", "garbage")))
        result = run("audit.fabric.fleet_consistency", fleet={"n1": bad, "n2": bad})
        assert result["status"] == "error"


class TestSimFabric:
    """The fabric overlay and the ibstat / ibdev2netdev shims, against the real tools' layouts."""

    def sysfs(self, tmp_path, **faults) -> dict:
        import os

        from clustereval.sim.overlays import Tree, fabric
        from clustereval.sim.profile import load_profile, node_settings, render_node

        profile = load_profile("reference")
        settings = node_settings(profile, "node1")
        settings["faults"] = faults
        tree = Tree()
        fabric.render(settings, render_node(profile, "node1"), tree)
        for path, (content, _) in tree.files.items():
            target = tmp_path / path.lstrip("/")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(content)
        return {**os.environ, "SIMNODE_SYSFS": str(tmp_path / "sys")}

    def shim(self, env: dict, tool: str) -> str:
        import subprocess
        import sys
        from pathlib import Path

        script = Path(audit_fabric.__file__).parents[1] / "sim" / "shims" / f"{tool}.py"
        python = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable
        return subprocess.run([python, str(script)], env=env, capture_output=True, text=True, timeout=30,
                              check=True).stdout

    def test_ibstat_block_layout_matches_a_real_h100_node(self, tmp_path):
        from tests.conftest import read_corpus

        real = read_corpus("ibstat", "h100-node-mt4129-cx7-fw28.39.1002-all-active.txt")
        ours = self.shim(self.sysfs(tmp_path, ib_port_down=["mlx5_7"], ib_port_rate={"mlx5_5": 200}), "ibstat")

        def layout(text: str) -> list[str]:
            first = text.split("CA '")[1]
            return [line.split(":")[0] for line in ("CA '" + first).splitlines()]

        assert layout(ours) == layout(real)
        from clustereval.parsers import parse

        data = parse("ibstat", ours)
        assert data["complete"] and data["inactive_ports"] == ["mlx5_7/1"]
        rates = {p["ca"]: p["rate_gbitps"] for p in data["ports"]}
        assert rates["mlx5_0"] == 400 and rates["mlx5_5"] == 200 and rates["mlx5_7"] == 40

    def test_ibdev2netdev_plain_layout(self, tmp_path):
        from clustereval.parsers import parse

        ours = self.shim(self.sysfs(tmp_path, ib_port_down=[7]), "ibdev2netdev")
        assert ours.splitlines()[0] == "mlx5_0 port 1 ==> ibp26s0 (Up)"
        assert parse("ibdev2netdev", ours)["down"] == ["ibp220s0"]

    def test_overlay_pkeys_and_nccl_conf(self, tmp_path):
        self.sysfs(tmp_path, ib_pkeys=["0xffff", "0x8001"], nccl_conf={"NCCL_ALGO": "Ring"})
        pkeys = tmp_path / "sys/class/infiniband/mlx5_0/ports/1/pkeys"
        assert (pkeys / "0").read_text() == "0xffff\n" and (pkeys / "1").read_text() == "0x8001\n"
        assert (pkeys / "127").read_text() == "0x0000\n"
        assert (tmp_path / "etc/nccl.conf").read_text() == "NCCL_ALGO=Ring\n"
