"""The probes printing sysfs files as ``<path>: <value>`` lines: CPU frequency governors and firmware."""

from __future__ import annotations

from clustereval.parsers import parse

CPUFREQ = """cpus: 4
/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor: performance
/sys/devices/system/cpu/cpu1/cpufreq/scaling_governor: performance
/sys/devices/system/cpu/cpu2/cpufreq/scaling_governor: powersave
driver: intel_pstate
"""
FIRMWARE = """/sys/class/infiniband/mlx5_0/fw_ver: 28.46.3008
/sys/class/infiniband/mlx5_1/fw_ver: 28.39.1002
/sys/class/dmi/id/bios_version: 1.7.2
"""


def test_cpufreq_governors_per_cpu():
    data = parse("probe-monitoring-cpufreq", CPUFREQ)
    assert data["cpus"] == 4 and data["driver"] == "intel_pstate"
    assert data["governors"] == {"cpu0": "performance", "cpu1": "performance", "cpu2": "powersave"}


def test_cpufreq_of_a_vm_without_frequency_scaling():
    data = parse("probe-monitoring-cpufreq", "cpus: 2\ndriver: \n")
    assert data["cpus"] == 2 and data["driver"] == "" and data["governors"] == {}
    assert parse("probe-monitoring-cpufreq", "cpus: \n")["cpus"] is None


def test_firmware_of_the_hcas_and_the_bios():
    data = parse("probe-fleet-firmware", FIRMWARE)
    assert data["nic_firmware"] == {"mlx5_0": "28.46.3008", "mlx5_1": "28.39.1002"} and data["bios"] == "1.7.2"
    assert parse("probe-fleet-firmware", "")["bios"] is None
