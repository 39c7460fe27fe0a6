"""Fleet consistency of installed packages and firmware."""

from __future__ import annotations

from clustereval.checks import Context
from clustereval.checks.audit_fleet import fleet_facts, package_diff
from clustereval.sim.overlays.fleet import drift_status
from tests.helpers import judge, probe
from tests.unit.test_audit_health import gpus
from tests.unit.test_audit_monitoring import q_x

BASE = {"bash:amd64": "5.2.15-2+b8", "libnccl2:amd64": "2.21.5-1+cuda12.4", "vim:amd64": "2:9.0.1378-2"}


def dpkg(packages: dict[str, str]) -> str:
    return "## manager=dpkg\n" + "".join(f"{name}\t{version}\n" for name, version in packages.items())


def host(packages: dict[str, str] | None = None, firmware: str = "", gpu_probe: dict | None = None,
         manager_text: str | None = None) -> dict:
    probes = {**probe("fleet_packages", manager_text if manager_text is not None else dpkg(packages or BASE)),
              **probe("fleet_firmware", firmware), **(gpu_probe or {})}
    return fleet_facts(Context(subject="n", probes=probes))


def run(check_id: str, fleet: dict) -> dict:
    return judge(check_id, fleet=fleet, subject="_cluster")


class TestPackages:
    def test_diff_lists_gpu_stack_first(self):
        node = {**BASE, "vim:amd64": "2:9.0.1378-3", "libnccl2:amd64": "2.20.3-1+cuda12.3", "htop:amd64": "3.2.2-2"}
        diff = package_diff(BASE, node)
        assert diff[0] == "libnccl2:amd64 2.20.3-1+cuda12.3 (fleet 2.21.5-1+cuda12.4)"
        assert "htop:amd64 3.2.2-2 extra" in diff and len(diff) == 3

    def test_amd_gpu_stack_packages_are_gpu_stack_too(self):
        base = {**BASE, "rccl:amd64": "2.26.6.70002-56~24.04", "amdgpu-dkms:amd64": "1:6.14.14.30200000-2226.24.04"}
        node = {**base, "vim:amd64": "2:9.0.1378-3", "rccl:amd64": "2.22.3.60403-128~24.04"}
        diff = package_diff(base, node)
        assert diff[0] == "rccl:amd64 2.22.3.60403-128~24.04 (fleet 2.26.6.70002-56~24.04)"

    def test_pass_when_identical(self):
        result = run("audit.fleet.packages", {"n1": host(), "n2": host(), "n3": host()})
        assert result["status"] == "pass" and "3 packages" in result["summary"]

    def test_warn_names_the_odd_node_and_package(self):
        result = run("audit.fleet.packages", {"n1": host(), "n2": host(), "n3": host({**BASE, "vim:amd64": "2:9.1"})})
        assert result["status"] == "warn" and "n3: vim:amd64 2:9.1 (fleet 2:9.0.1378-2)" in result["summary"]

    def test_fail_when_the_gpu_stack_differs(self):
        odd = {k: v for k, v in BASE.items() if not k.startswith("libnccl")}
        result = run("audit.fleet.packages", {"n1": host(), "n2": host(), "n3": host(odd)})
        assert result["status"] == "fail" and "libnccl2:amd64 missing" in result["summary"]

    def test_fail_on_different_distributions(self):
        rpm = "## manager=rpm\nbash.x86_64\t5.1.8-9.el9\n"
        result = run("audit.fleet.packages", {"n1": host(), "n2": host(manager_text=rpm)})
        assert result["status"] == "fail" and "n2 (rpm)" in result["summary"]

    def test_skip_with_one_node_and_error_when_unreadable(self):
        assert run("audit.fleet.packages", {"n1": host(), "n2": None})["status"] == "skip"
        broken = host(manager_text="dpkg-query: error: parsing file '/var/lib/dpkg/status'\n")
        assert run("audit.fleet.packages", {"n1": host(), "n2": broken})["status"] == "error"

    def test_the_sim_overlay_changes_one_stanza(self):
        status = "Package: a\nVersion: 1\n\nPackage: b\nVersion: 2\nStatus: install ok installed\n"
        assert drift_status(status, {"b": "3"}) == "Package: a\nVersion: 1\n\nPackage: b\nVersion: 3\n" \
                                                   "Status: install ok installed\n"
        assert drift_status(status, {"a": None}).startswith("Package: b")


FW = ("/sys/class/infiniband/mlx5_0/fw_ver: 28.39.1002\n/sys/class/infiniband/mlx5_1/fw_ver: 28.39.1002\n"
      "/sys/class/dmi/id/bios_version: 2.3.4\n")


class TestFirmware:
    def test_pass_when_everything_matches(self):
        fleet = {h: host(firmware=FW, gpu_probe=gpus()) for h in ("n1", "n2")}
        result = run("audit.fleet.firmware", fleet)
        assert result["status"] == "pass" and "GPU VBIOS" in result["summary"]
        # The corpus H200 reports VBIOS 96.00.A5.00.1A.
        assert result["evidence"]["firmware"]["vbios"]["fleet"] == "96.00.A5.00.1A"

    def test_warn_names_the_node_with_other_nic_firmware(self):
        odd = FW.replace("28.39.1002", "28.41.1000")
        fleet = {"n1": host(firmware=FW), "n2": host(firmware=FW), "n3": host(firmware=odd)}
        result = run("audit.fleet.firmware", fleet)
        assert result["status"] == "warn" and "n3 (28.41.1000)" in result["summary"]

    def test_fail_on_vbios_drift(self):
        odd = gpus()
        odd["nvidia_smi_q_x"]["stdout"] = odd["nvidia_smi_q_x"]["stdout"].replace("96.00.A5.00.1A", "96.00.74.00.0D")
        fleet = {"n1": host(gpu_probe=gpus()), "n2": host(gpu_probe=gpus()), "n3": host(gpu_probe=odd)}
        result = run("audit.fleet.firmware", fleet)
        assert result["status"] == "fail" and "n3 (96.00.74.00.0D)" in result["summary"]

    def test_skip_without_any_firmware_data(self):
        fleet = {"n1": host(gpu_probe=q_x([30], [70.0])), "n2": host()}
        assert run("audit.fleet.firmware", fleet)["status"] == "skip"

    def test_error_when_the_probe_timed_out_everywhere(self):
        def timed_out() -> dict:
            facts = host()
            facts.pop("fleet_firmware")
            facts["problems"]["fleet_firmware"] = "`cat` timed out after 10 s"
            return facts
        assert run("audit.fleet.firmware", {"n1": timed_out(), "n2": timed_out()})["status"] == "error"
