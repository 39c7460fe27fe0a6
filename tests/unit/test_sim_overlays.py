"""Overlay areas render per-node system files and the mounts that show them inside the node."""

from __future__ import annotations

from clustereval.sim import overlays
from clustereval.sim.profile import load_profile, node_settings, render_node


def test_mount_point_is_the_deepest_existing_directory(tmp_path):
    (tmp_path / "sys" / "class").mkdir(parents=True)
    assert overlays._mount_point("/sys/class/infiniband/mlx5_0/fw_ver", tmp_path) == "/sys/class"
    (tmp_path / "etc").mkdir()
    assert overlays._mount_point("/etc/nccl.conf", tmp_path) == "/etc"


def test_build_renders_files_and_mount_lines(tmp_path):
    profile = load_profile("reference")
    lines = overlays.build(node_settings(profile, "node1"), render_node(profile, "node1"), tmp_path)
    version = tmp_path / "overlay" / "proc" / "driver" / "nvidia" / "version"
    assert profile["cluster"]["driver_version"] in version.read_text()
    assert any("/proc" in line and "mount" in line for line in lines)


def test_overlay_faults_are_known_to_profiles():
    assert "nvidia_profiling_admin_only" in overlays.faults()
