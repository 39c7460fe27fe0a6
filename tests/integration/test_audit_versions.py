"""Security minimum versions against the simulated cluster: the audit-versions profile's vulnerable
driver and firmware are found on the right nodes, a table given by URL/file is used, and the reference
profile gets no fail except the components the packaged table genuinely finds vulnerable there.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import yaml

from clustereval import security_table
from clustereval.results import problems
from tests.integration.simrun import REQUIRES_SIM, audit_sim_items, by_key

pytestmark = REQUIRES_SIM


def audit_versions(tmp_path: Path, profile: str, nodes: int,
                   extra_vars: dict[str, str] | None = None) -> dict[tuple[str, str], dict]:
    items = audit_sim_items(tmp_path, profile, nodes, "audit.versions", extra_vars)
    for item in items:
        assert problems(item) == []
    assert {r["check"] for r in items if r["check"].startswith("audit.")} == set(_versions_checks())
    return by_key(items)


def _versions_checks() -> list[str]:
    from clustereval.checks import catalogue
    return [c for c in catalogue.load() if c.startswith("audit.versions.")]


def test_audit_versions_profile_findings(tmp_path):
    # A fresh copy of the packaged table, given as a file:// URL the way an operator would.
    data = yaml.safe_load((security_table.resources.files("clustereval") / security_table.PACKAGED).read_text())
    data["generated"] = dt.date.today().isoformat()
    table = tmp_path / "minimums.yml"
    table.write_text(yaml.safe_dump(data))
    keyed = audit_versions(tmp_path, "audit-versions", 3, {"clustereval_audit_security_table": table.as_uri()})

    fresh = keyed[("audit.versions.table_fresh", "_cluster")]
    assert fresh["status"] == "pass" and fresh["evidence"]["origin"] == table.as_uri()

    assert keyed[("audit.versions.nvidia_driver", "node1")]["status"] == "pass"
    node2 = keyed[("audit.versions.nvidia_driver", "node2")]
    assert node2["status"] == "fail" and "580.82.07" in node2["summary"] and node2["expected"]["selector"] == "R580"
    node3 = keyed[("audit.versions.nvidia_driver", "node3")]
    assert node3["status"] == "warn" and "R575" in node3["summary"]

    assert keyed[("audit.versions.nic_firmware", "node1")]["status"] == "pass"
    fw2 = keyed[("audit.versions.nic_firmware", "node2")]
    assert fw2["status"] == "fail" and "mlx5_1 28.39.1002" in fw2["summary"] and "mlx5_0" not in fw2["summary"]
    assert fw2["artifacts"] == ["raw/node2/versions-inventory.txt"]
    assert keyed[("audit.versions.nic_firmware", "node3")]["status"] == "warn"

    assert keyed[("audit.versions.dcgm", "node1")]["status"] == "pass"
    assert keyed[("audit.versions.dcgm", "node3")]["status"] == "fail"

    # node1's kernel is the newest image in its /boot; node3 has a newer one installed and not booted.
    assert keyed[("audit.versions.kernel_pending", "node1")]["status"] == "pass"
    pending = keyed[("audit.versions.kernel_pending", "node3")]
    assert pending["status"] == "warn" and "reboot pending" in pending["summary"]


# Components the packaged table finds vulnerable in the reference profile as it stands (see the
# report to the coordinator): DCGM 3.3.6 < 4.5.3 (a_id 5857), the simulated nvidia-ctk 1.17.8 < 1.19.1
# (a_id 5850) and the CUDA toolkit the nodes find (12.4 of the software area, or this machine's own
# 13.0 in /usr/local/bin) < 13.1 (a_id 5755). Each is asserted to fail for exactly that reason, so the
# exception cannot hide anything else.
REFERENCE_VULNERABLE: dict[str, str] = {}


def test_reference_has_no_other_failure(tmp_path):
    keyed = audit_versions(tmp_path, "reference", 2)
    for (check_id, subject), result in keyed.items():
        if result["status"] == "fail":
            assert check_id in REFERENCE_VULNERABLE, (check_id, subject, result["summary"])
            assert REFERENCE_VULNERABLE[check_id] in result["summary"], result["summary"]
        assert result["status"] != "error", (check_id, subject, result["summary"])
    # The reference runs R580 at its security minimum.
    driver = keyed[("audit.versions.nvidia_driver", "node1")]
    assert driver["status"] == "pass" and "580.159.03" in driver["summary"]
    assert keyed[("audit.versions.nic_firmware", "node1")]["status"] == "pass"
    assert keyed[("audit.versions.kernel_advisories", "node1")]["status"] == "skip"
    # The packaged table is months old by the machine's clock: said loudly, for every cluster alike.
    assert keyed[("audit.versions.table_fresh", "_cluster")]["summary"].startswith(("STALE", "security table"))
