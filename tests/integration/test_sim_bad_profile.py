"""A bad profile given to `sim up` on a directory whose cluster runs is refused before that cluster is touched."""

from __future__ import annotations

import pytest

from clustereval.sim import cluster
from clustereval.sim.profile import ProfileError
from tests.integration.simrun import REQUIRES_SIM, simulated_cluster

pytestmark = REQUIRES_SIM


def test_a_profile_with_a_type_error_leaves_a_running_cluster_untouched(tmp_path):
    bad = tmp_path / "bad.yml"
    bad.write_text("extends: reference\nnodes:\n  node1:\n    gpus: {count: eight}\n")
    with simulated_cluster(tmp_path / "sim", 1, "reference") as sim:
        before = cluster.status(sim)
        assert before["running"] and before["nodes"]["node1"]["slurmd_alive"]
        with pytest.raises(ProfileError, match=r"nodes\.node1\.gpus\.count: expected a whole number, not 'eight'"):
            cluster.up(sim, 1, str(bad))
        after = cluster.status(sim)
        assert after["running"] and after["nodes"]["node1"]["sshd_alive"] and after["nodes"]["node1"]["slurmd_alive"]
        assert after["profile"] == before["profile"] == "reference"
