"""The fabric probes of our own: the RDMA sysfs listing, the NCCL/IMEX host probe and Slurm's topology."""

from __future__ import annotations

from clustereval.parsers import parse
from clustereval.parsers.probe_fabric import leaf_switch

# fabric_rdma on a simulated HGX H100 node: two of its eight ConnectX-7 rails (kernel 6.x sysfs formats).
RDMA = """# rdma sysfs
hca mlx5_0
 hca_type MT4129
 fw_ver 28.46.3008
 board_id MT_0000000838
 node_guid a088:c203:00f5:b67a
 pci 0x15b3 0x1021
 driver\x20
 netdev ibp26s0
 port 1
  state 4: ACTIVE
  phys_state 5: LinkUp
  rate 400 Gb/sec (4X NDR)
  link_layer InfiniBand
  pkeys 0x8001 0x7fff 0x0000\x20
hca mlx5_1
 hca_type MT4129
 fw_ver 28.46.3008
 board_id MT_0000000838
 node_guid a088:c203:007d:5c78
 pci 0x15b3 0x1021
 driver\x20
 netdev ibp60s0
 port 1
  state 1: DOWN
  phys_state 3: Disabled
  rate 10 Gb/sec (4X SDR)
  link_layer InfiniBand
  pkeys 0xffff\x20
# end
"""
HOST = """### file /etc/nccl.conf
# site defaults
NCCL_IB_QPS_PER_CONNECTION=2
NCCL_DEBUG=WARN
### env
NCCL_IB_QPS_PER_CONNECTION=4
### imex
binary /usr/bin/nvidia-imex
daemon running
nodes_config 18
channels 0 1
### end
"""
# fabric_slurm_topology as Slurm 22.05 prints it without a topology plugin, and with topology/tree.
TOPOLOGY_NONE = """ClusterName             = sim2aaaea17
SLURM_VERSION           = 22.05.8
TopologyParam           = (null)
TopologyPlugin          = topology/none
### topology
scontrol: error: No topology information available
### nodes 2
"""
TOPOLOGY_TREE = """ClusterName             = gpu
TopologyParam           = (null)
TopologyPlugin          = topology/tree
### topology
SwitchName=leaf1 Level=0 LinkSpeed=1 Nodes=gpu[001-032]
SwitchName=leaf2 Level=0 LinkSpeed=1 Nodes=gpu[033-064]
SwitchName=spine Level=1 LinkSpeed=1 Switches=leaf[1-2]
### nodes 64
"""


def test_rdma_devices_and_ports_in_kernel_formats():
    data = parse("probe-fabric-rdma", RDMA)
    assert data["complete"] is True and [h["name"] for h in data["hcas"]] == ["mlx5_0", "mlx5_1"]
    hca = data["hcas"][0]
    assert hca["pci_vendor"] == "0x15b3" and hca["pci_device"] == "0x1021" and hca["netdevs"] == ["ibp26s0"]
    assert hca["driver"] is None and hca["fw_ver"] == "28.46.3008"
    port = hca["ports"][0]
    assert (port["port"], port["state"], port["state_code"], port["phys_state"]) == (1, "ACTIVE", 4, "LinkUp")
    assert port["rate_gbps"] == 400.0 and port["link_layer"] == "InfiniBand" and port["active"] is True
    assert port["pkeys"] == [0x8001, 0x7FFF]  # the empty slot 0x0000 is not a partition
    down = data["hcas"][1]["ports"][0]
    assert down["active"] is False and down["phys_state_code"] == 3 and down["pkeys"] == [0xFFFF]


def test_rdma_listing_cut_short_or_garbled_keeps_what_was_read():
    cut = parse("probe-fabric-rdma", RDMA.split("hca mlx5_1")[0])
    assert cut["complete"] is False and "cut short" in cut["warnings"][0] and len(cut["hcas"]) == 1
    garbage = parse("probe-fabric-rdma", "garbage")
    assert garbage["complete"] is False and "does not start with its '# rdma sysfs' header" in garbage["warnings"][0]
    stray = parse("probe-fabric-rdma", "# rdma sysfs\n port 1\n# end\n")
    assert stray["warnings"] == ["line outside any device: ' port 1'"]
    empty = parse("probe-fabric-rdma", "# rdma sysfs\n# end\n")
    assert empty["complete"] is True and empty["hcas"] == []


def test_host_nccl_environment_wins_over_files_and_imex_state():
    data = parse("probe-fabric-host", HOST)
    nccl = data["nccl"]
    assert data["complete"] is True
    assert nccl["effective"]["NCCL_IB_QPS_PER_CONNECTION"] == {"value": "4", "source": "environment"}
    assert nccl["effective"]["NCCL_DEBUG"] == {"value": "WARN", "source": "/etc/nccl.conf"}
    assert nccl["files"]["/etc/nccl.conf"] == {"NCCL_IB_QPS_PER_CONNECTION": "2", "NCCL_DEBUG": "WARN"}
    assert data["imex"] == {"binary": "/usr/bin/nvidia-imex", "running": True, "nodes_config": 18,
                            "channels": ["0", "1"]}


def test_host_probe_of_a_node_without_nccl_settings_or_imex():
    data = parse("probe-fabric-host", "### env\n### imex\nbinary none\ndaemon stopped\nnodes_config none\n"
                                      "channels \n### end\n")
    assert data["nccl"]["effective"] == {} and data["imex"] == {"binary": None, "running": False,
                                                                "nodes_config": None, "channels": []}
    cut = parse("probe-fabric-host", "### env\n### imex\nbinary none\n")
    assert cut["complete"] is False and cut["imex"] is None


def test_slurm_tree_topology_and_the_leaf_of_a_node():
    topo = parse("probe-fabric-topology", TOPOLOGY_TREE)
    assert (topo["plugin"], topo["param"], topo["levels"], topo["slurm_nodes"]) == ("topology/tree", "(null)", 2, 64)
    assert [s["name"] for s in topo["switches"]] == ["leaf1", "leaf2", "spine"]
    assert leaf_switch(topo, "gpu040") == "leaf2" and leaf_switch(topo, "gpu999") is None
    assert topo["switches"][2] == {"name": "spine", "kind": "switch", "level": 1, "nodes": []}


def test_slurm_without_a_topology_plugin():
    topo = parse("probe-fabric-topology", TOPOLOGY_NONE)
    assert topo["plugin"] == "topology/none" and topo["switches"] == [] and topo["levels"] == 0
    assert topo["slurm_nodes"] == 2
    assert parse("probe-fabric-topology", "### topology\n### nodes 4\n")["plugin"] is None
    block = parse("probe-fabric-topology", "TopologyPlugin = topology/block\n### topology\n"
                                           "BlockName=b1 Nodes=node[1-2] BlockSize=2\n### nodes 2\n")
    assert block["switches"] == [{"name": "b1", "kind": "block", "level": 0, "nodes": ["node1", "node2"]}]
