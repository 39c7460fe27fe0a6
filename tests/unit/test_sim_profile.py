"""Profiles of the simulated cluster: loading, per-node merging, faults, deterministic identities."""

from __future__ import annotations

import pytest

from clustereval.sim import profile as sp


def test_packaged_profiles_exist_and_load():
    assert {"reference", "flawed"} <= set(sp.available_profiles())
    ref = sp.load_profile("reference")
    assert ref["name"] == "reference" and ref["nodes"] == {}


def test_reference_node_is_a_healthy_hgx_h100_node():
    state = sp.render_node(sp.load_profile("reference"), "node1")
    assert state["driver_version"] == "580.159.03" and state["cuda_version"] == "13.0"
    assert len(state["gpus"]) == 8 and state["slurm"]["gres_count"] == 8
    assert {g["name"] for g in state["gpus"]} == {"NVIDIA H100 80GB HBM3"}
    assert all(g["temperature_c"] < 40 and g["utilization_pct"] == 0 for g in state["gpus"])
    assert state["nvidia_smi"] == "ok" and state["xid"] == [] and not state["unreachable"]
    assert state["slurm"]["gres_type"] == "h100"


def test_flawed_profile_faults():
    flawed = sp.load_profile("flawed")
    node1, node2, node3, node4 = (sp.render_node(flawed, f"node{i}") for i in range(1, 5))
    assert len(node1["gpus"]) == 8 and node1["slurm"]["state"] == "idle"
    assert len(node2["gpus"]) == 7 and node2["slurm"]["gres_count"] == 8
    assert [g["index"] for g in node2["gpus"]] == list(range(7)), "the driver renumbers visible GPUs"
    assert 5 not in [g["physical_index"] for g in node2["gpus"]]
    assert node3["driver_version"] == "535.183.01" and node3["cuda_version"] == "12.2"
    assert node3["slurm"]["state"] == "drain" and node3["slurm"]["reason"] == "XID 79"
    assert node3["xid"][0].endswith("NVRM: Xid (PCI:0000:4C:00): 79, pid=1824, name=python, "
                                     "GPU has fallen off the bus.")
    assert node4["nvidia_smi"] == "truncated"


def test_uuids_and_serials_are_deterministic_and_unique_per_node():
    ref = sp.load_profile("reference")
    states = [sp.render_node(ref, f"node{i}") for i in range(1, 5)]
    uuids = [g["uuid"] for s in states for g in s["gpus"]]
    serials = [g["serial"] for s in states for g in s["gpus"]]
    assert len(set(uuids)) == len(uuids) == 32 and len(set(serials)) == 32
    assert sp.render_node(ref, "node2")["gpus"][3]["uuid"] == states[1]["gpus"][3]["uuid"]
    assert sp.gpu_uuid("a", "node1", 0) != sp.gpu_uuid("b", "node1", 0)


def test_user_profile_with_index_keys_overrides_and_slurm_mismatch(tmp_path):
    path = tmp_path / "mine.yml"
    path.write_text(
        "cluster:\n  name: mine\n  gpus: {model: NVIDIA A100-SXM4-80GB, count: 4}\n"
        "nodes:\n  2:\n    gpus: {count: 7}\n    slurm: {gres_count: 8}\n"
        "    faults: {gpu_temperature_c: [30, 31, 95], unreachable: true}\n"
    )
    prof = sp.load_profile(str(path))
    node1, node2 = sp.render_node(prof, "node1"), sp.render_node(prof, "node2")
    assert len(node1["gpus"]) == 4 and node1["slurm"]["gres_type"] == "a100"
    assert len(node2["gpus"]) == 7 and node2["slurm"]["gres_count"] == 8
    assert [g["temperature_c"] for g in node2["gpus"][:3]] == [30, 31, 95]
    assert node2["unreachable"]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("nodes: {}\n", "needs a 'cluster:'"),
        ("cluster: {}\nnodes:\n  node1: {faults: {melt: true}}\n", "unknown keys ['melt']"),
        ("cluster: {}\nnodes:\n  node1: {faults: {nvidia_smi: sideways}}\n", "must be one of"),
        ("cluster: [\n", "not valid YAML"),
    ],
)
def test_bad_profiles_are_refused_with_a_clear_message(tmp_path, body, message):
    path = tmp_path / "bad.yml"
    path.write_text(body)
    with pytest.raises(sp.ProfileError, match=message.replace("[", r"\[").replace("]", r"\]")):
        sp.load_profile(str(path))


def test_unknown_profile_name():
    with pytest.raises(sp.ProfileError, match="unknown profile 'nope'"):
        sp.load_profile("nope")


def test_extends_merges_a_base_profile(tmp_path):
    from clustereval.sim.profile import ProfileError, load_profile, node_settings

    child = tmp_path / "mine.yml"
    child.write_text("extends: reference\ncluster:\n  driver_version: '560.35.03'\n"
                     "nodes:\n  2:\n    faults: {unreachable: true}\n")
    profile = load_profile(child)
    assert profile["name"] == "mine"
    assert profile["cluster"]["driver_version"] == "560.35.03"
    assert profile["cluster"]["gpus"]["count"] == load_profile("reference")["cluster"]["gpus"]["count"]
    assert node_settings(profile, "node2")["faults"] == {"unreachable": True}
    grandchild = tmp_path / "more.yml"
    grandchild.write_text("extends: mine.yml\nnodes:\n  node3:\n    faults: {nvidia_smi: garbage}\n")
    merged = load_profile(grandchild)
    assert set(merged["nodes"]) == {"node2", "node3"} and merged["cluster"]["driver_version"] == "560.35.03"
    loop = tmp_path / "loop.yml"
    loop.write_text("extends: loop.yml\ncluster: {}\n")
    with pytest.raises(ProfileError, match="extends itself"):
        load_profile(loop)


@pytest.mark.parametrize(("override", "message"), [
    ("gpus: {count: -3}", "nodes.node2.gpus.count: must be a whole number >= 0, not -3"),
    ("gpus: {count: eight}", "nodes.node2.gpus.count: expected a whole number, not 'eight'"),
    ("gpus: {power_limit_w: lots}", "nodes.node2.gpus.power_limit_w: expected a number, not 'lots'"),
])
def test_a_bad_value_is_refused_with_its_path_when_the_profile_loads(tmp_path, override, message):
    path = tmp_path / "bad.yml"
    path.write_text(f"extends: reference\nnodes:\n  node2:\n    {override}\n")
    with pytest.raises(sp.ProfileError) as refused:
        sp.load_profile(path)
    assert str(refused.value) == f"profile {path}: {message}"


def test_every_packaged_profile_renders_every_node():
    from clustereval.sim import cluster

    for name in sp.available_profiles():
        cluster.check_nodes(sp.load_profile(name), 5)
