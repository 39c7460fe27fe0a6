"""The documented failure modes (checks/failure_modes.yml): each names checks of the catalogue and a packaged
profile that rebuilds it on nodes that profile has; every check lists the modes it finds."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from clustereval.checks import catalogue
from clustereval.sim import profile as sim_profile

MODES = catalogue.failure_modes()


def test_there_are_documented_failure_modes_with_unique_ids():
    ids = [m["id"] for m in MODES]
    assert len(ids) >= 25 and len(ids) == len(set(ids))


@pytest.mark.parametrize("mode", MODES, ids=[m["id"] for m in MODES])
def test_each_mode_is_rebuilt_by_a_packaged_profile_on_nodes_it_has(mode):
    loaded = sim_profile.load_profile(mode["sim"]["profile"])
    size = int(loaded["cluster"].get("nodes") or 4)
    for node in mode["sim"]["nodes"]:
        number = int(node.removeprefix("node")) if node.removeprefix("node").isdigit() else None
        assert node in loaded["nodes"] or (number is not None and number <= size), (mode["id"], node)


@pytest.mark.parametrize("mode", MODES, ids=[m["id"] for m in MODES])
def test_each_mode_is_found_by_catalogued_checks_with_a_finding_status(mode):
    for finding in mode["found_by"]:
        assert finding["check"] in catalogue.load()
        assert finding["status"] in ("warn", "fail")


def test_a_check_lists_the_modes_it_finds():
    assert "gpu_fell_off_bus" in catalogue.finds("audit.gpu.inventory")
    assert catalogue.finds("harness.node.reachable") == []


def test_the_cli_gives_the_modes_and_the_checks_what_they_find():
    run = [sys.executable, "-m", "clustereval.cli", "checks"]
    modes = json.loads(subprocess.run([*run, "--failure-modes", "--json"], capture_output=True, text=True,
                                      check=True).stdout)
    assert [m["id"] for m in modes] == [m["id"] for m in MODES]
    entries = {e["id"]: e for e in json.loads(subprocess.run([*run, "--json"], capture_output=True, text=True,
                                                             check=True).stdout)}
    assert entries["audit.gpustack.pcie_acs"]["finds"] == ["pcie_acs_redirect"]
    text = subprocess.run([*run, "--failure-modes"], capture_output=True, text=True, check=True).stdout
    assert "pcie_acs_redirect" in text and "audit.gpustack.pcie_acs (fail)" in text


def test_a_malformed_mode_is_refused(monkeypatch):
    catalogue.failure_modes.cache_clear()
    broken = "failure_modes:\n  - {id: x, title: t, found_by: [{check: no.such.check, status: fail}], sim: {}}\n"

    class Fake:
        def joinpath(self, name):
            return self

        def read_text(self, encoding="utf-8"):
            return broken

    monkeypatch.setattr(catalogue.resources, "files", lambda package: Fake())
    try:
        with pytest.raises(ValueError, match=r"no\.such\.check"):
            catalogue.failure_modes()
    finally:
        catalogue.failure_modes.cache_clear()
