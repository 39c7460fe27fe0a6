"""The simulated slow disk (sim/diskfaults.py): what a profile may ask for, and a refusal where the machine
cannot throttle rather than a fast disk posing as a slow one."""

from __future__ import annotations

from pathlib import Path

import pytest

from clustereval.sim import diskfaults
from clustereval.sim.profile import ProfileError, load_profile


def test_the_limits_are_megabytes_per_second_by_direction():
    assert diskfaults.wanted({"disk_read_mbps": 40}) == {"read": 40_000_000}
    assert diskfaults.wanted({"disk_read_mbps": 40, "disk_write_mbps": 2.5}) == {"read": 40_000_000,
                                                                                "write": 2_500_000}
    assert diskfaults.wanted({"xid": [79]}) == {}


def test_a_profile_with_a_bad_limit_is_refused_with_its_path(tmp_path):
    bad = tmp_path / "bad.yml"
    bad.write_text("extends: reference\nnodes:\n  node1:\n    faults: {disk_read_mbps: -5, disk_write_mbps: fast}\n")
    with pytest.raises(ProfileError) as caught:
        load_profile(bad, 2)
    text = str(caught.value)
    assert "nodes.node1.faults.disk_read_mbps: must be a number of MB/s > 0, not -5" in text
    assert "disk_write_mbps: must be a number of MB/s > 0, not 'fast'" in text
    assert load_profile("storage-faults", 2)["nodes"]["node1"]["faults"] == {"disk_read_mbps": 40}


def test_a_directory_on_no_disk_cannot_be_throttled():
    with pytest.raises(OSError, match="not a disk a throttle can limit"):
        diskfaults.disk_of(Path("/proc"))
    assert diskfaults.setup("x", Path("/proc"), {}) == {}
