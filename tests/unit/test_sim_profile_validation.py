"""A profile is validated completely before `sim up` touches a cluster: every problem at once, each with its path."""

from __future__ import annotations

import pytest

from clustereval.sim import cli, cluster
from clustereval.sim import profile as sp


def write(tmp_path, text: str):
    path = tmp_path / "p.yml"
    path.write_text(text)
    return path


def problems_of(path, nodes: int | None = None) -> list[str]:
    with pytest.raises(sp.ProfileError) as refused:
        sp.load_profile(path, nodes)
    return refused.value.problems


def test_every_problem_is_listed_at_once_with_its_path(tmp_path):
    path = write(tmp_path, "extends: reference\n"
                           "cluster:\n  gpus: {memory_mib: lots}\n"
                           "nodes:\n"
                           "  node2:\n    gpus: {count: -3}\n"
                           "  node3:\n    slurm: [gpu]\n    nics: {name: mlx5_0}\n"
                           "  node9:\n    faults: {unreachable: true}\n")
    with pytest.raises(sp.ProfileError) as refused:
        sp.load_profile(path, 3)
    expected = [
        "cluster.gpus.memory_mib: expected a whole number, not 'lots'",
        "nodes.node2.gpus.count: must be a whole number >= 0, not -3",
        "nodes.node3.nics: expected a list, not {'name': 'mlx5_0'}",
        "nodes.node3.slurm must be a mapping",
        "nodes.node9: no such node: the cluster has node1..node4",
    ]
    assert refused.value.problems == expected
    assert str(refused.value) == f"profile {path} has 5 problems:\n" + "\n".join(f"  {p}" for p in expected)


def test_one_problem_is_one_line(tmp_path):
    path = write(tmp_path, "extends: reference\ncluster:\n  cuda_version: 12.4\n")
    with pytest.raises(sp.ProfileError) as refused:
        sp.load_profile(path)
    assert str(refused.value) == f"profile {path}: cluster.cuda_version: expected a quoted version string, not 12.4"


def test_problems_inside_one_section_are_all_reported(tmp_path):
    path = write(tmp_path, "cluster:\n  provider:\n    health_check: {mode: sometimes, checks: [smart]}\n"
                           "    remediation: {after_s: -1}\n")
    assert problems_of(path) == [
        "cluster.provider.remediation.after_s must be a non-negative number",
        "cluster.provider.health_check.mode must be one of ['drain', 'none', 'times_out', 'exit_1']",
        "cluster.provider.health_check.checks must be a list of "
        "['xid', 'dcgm_health', 'gpu_count', 'amd_ras', 'amd_gpu_count']",
    ]


@pytest.mark.parametrize(("override", "problem"), [
    ("gpus: 8", "nodes.node2.gpus: expected a mapping, not 8"),
    ("gpus: {idle: {temperature_c: [27, hot]}}",
     "nodes.node2.gpus.idle.temperature_c[1]: expected a number, not 'hot'"),
    ("gpus: {idle: {power_draw_w: {x: 70}}}",
     "nodes.node2.gpus.idle.power_draw_w: expected GPU indices as keys, not 'x'"),
    ("gpus: {idle: {utilization_pct: 120}}", "nodes.node2.gpus.idle.utilization_pct: must be a whole number from 0 "
                                             "to 100, not 120"),
    ("gpus: {persistence_mode: 'yes'}", "nodes.node2.gpus.persistence_mode: expected true or false, not 'yes'"),
    ("gpus: {pci_bus_ids: ['19', XY]}", "nodes.node2.gpus.pci_bus_ids[1]: expected a PCI bus number in hex from "
                                        "'04' to 'FE' such as '4C', not 'XY'"),
    ("gpus: {pci_bus_ids: ['19', '03']}", "nodes.node2.gpus.pci_bus_ids[1]: expected a PCI bus number in hex from "
                                          "'04' to 'FE' such as '4C', not '03'"),
    ("slurm: {cpus: many}", "nodes.node2.slurm.cpus: expected 'host' or a whole number, not 'many'"),
    ("fabric: {rail_efficiency: high}", "nodes.node2.fabric.rail_efficiency: expected a number, not 'high'"),
    ("fabric: {rails: 4}", "nodes.node2.fabric has unknown keys ['rails']"),
    ("faults: [unreachable]", "nodes.node2.faults: expected a mapping, not ['unreachable']"),
    ("faults: {gpu_missing: [-1]}", "nodes.node2.faults.gpu_missing: expected a number of GPUs or a list of GPU "
                                    "indices, not [-1]"),
    ("faults: {xid: [79, {code: x}]}", "nodes.node2.faults.xid[1]: expected an Xid code"),
    ("faults: {unreachable: 1}", "nodes.node2.faults.unreachable: expected true or false, not 1"),
])
def test_types_and_ranges_of_the_settings_a_node_is_rendered_from(tmp_path, override, problem):
    path = write(tmp_path, f"extends: reference\nnodes:\n  node2:\n    {override}\n")
    assert problems_of(path)[0].startswith(problem)


@pytest.mark.parametrize("nodes", [3, 4])
@pytest.mark.parametrize("name", sp.available_profiles())
def test_every_packaged_profile_validates_clean(name, nodes):
    cluster.check_nodes(sp.load_profile(name, nodes), nodes)


def test_an_override_inside_the_profiles_own_size_is_fine_on_a_smaller_cluster(tmp_path):
    path = write(tmp_path, "cluster: {nodes: 4}\nnodes:\n  node4:\n    faults: {unreachable: true}\n")
    cluster.check_nodes(sp.load_profile(path, 3), 3)
    # a larger cluster than the profile declares has the nodes it was started with
    big = write(tmp_path, "extends: reference\nnodes:\n  5:\n    faults: {unreachable: true}\n")
    cluster.check_nodes(sp.load_profile(big, 5), 5)


def test_an_override_for_a_node_neither_the_cluster_nor_the_profile_has_is_refused(tmp_path):
    path = write(tmp_path, "extends: reference\nnodes:\n  9:\n    faults: {unreachable: true}\n")
    assert problems_of(path, 3) == ["nodes.node9: no such node: the cluster has node1..node4"]
    with pytest.raises(sp.ProfileError, match=r"nodes\.node9: no such node: the cluster has node1\.\.node4$"):
        cluster.check_nodes(sp.load_profile(path), 3)  # what `up` runs after loading the profile
    lone = write(tmp_path, "cluster: {}\nnodes:\n  node2: {}\n")
    assert problems_of(lone, 1) == ["nodes.node2: no such node: the cluster has node1"]


def test_the_size_of_a_profile_it_extends_counts(tmp_path):
    # audit-system declares 3 nodes and describes node4 of the 4-node reference it extends
    path = write(tmp_path, "extends: reference\ncluster: {nodes: 3}\nnodes:\n  node4: {}\n  node5: {}\n")
    assert problems_of(path, 3) == ["nodes.node5: no such node: the cluster has node1..node4"]


@pytest.mark.parametrize("key", ["gpu-node1", "Node2", "node0", "node02", "0"])
def test_a_key_that_names_no_node_is_refused_whatever_the_size(tmp_path, key):
    path = write(tmp_path, f"extends: reference\nnodes:\n  {key}:\n    faults: {{unreachable: true}}\n")
    name = "node0" if key == "0" else key
    assert problems_of(path) == [f"nodes.{name}: no such node: nodes are named node1, node2, ... (or keyed 1, 2, ...)"]


def test_what_only_a_rendered_node_shows_is_reported_for_every_node(tmp_path):
    path = write(tmp_path, "extends: reference\nnodes:\n"
                           "  node2:\n    faults: {straggler_gpu: {gpu: 9}}\n"
                           "  node3:\n    faults: {rail_rate_factor: {mlx5_0: fast}}\n")
    with pytest.raises(sp.ProfileError) as refused:
        cluster.check_nodes(sp.load_profile(path), 3)
    assert refused.value.problems == [
        "node2: faults.straggler_gpu.gpu 9 is not one of the node's GPUs",
        "node3: ValueError: could not convert string to float: 'fast'",
    ]


def test_an_unreadable_profile_is_a_profile_error(tmp_path):
    path = tmp_path / "p.yml"
    path.write_bytes(b"\xff\xfe\x00cluster")
    with pytest.raises(sp.ProfileError, match="is not valid YAML"):
        sp.load_profile(path)


def test_sim_up_prints_every_problem_and_touches_nothing(tmp_path, monkeypatch, capsys):
    # past the root and tool checks `up` makes first, to the profile (read before anything is started)
    monkeypatch.setattr(cluster.os, "geteuid", lambda: 0)
    monkeypatch.setattr(cluster.shutil, "which", lambda tool: f"/usr/sbin/{tool}")
    bad = write(tmp_path, "extends: reference\nnodes:\n  node2:\n    gpus: {count: -3}\n")
    directory = tmp_path / "sim"
    assert cli.main(["up", "--dir", str(directory), "--nodes", "3", "--profile", str(bad)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("sim up failed: profile ") and "Traceback" not in err
    assert "nodes.node2.gpus.count: must be a whole number >= 0, not -3" in err
    assert not directory.exists()
