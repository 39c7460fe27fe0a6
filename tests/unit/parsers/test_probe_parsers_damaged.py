"""The parsers of our own probes (no corpus of their own) keep the properties every parser keeps, on the
probe outputs their tests hold: any damage gives a JSON-serialisable result or a ParseError, nothing else,
and ``srun -l`` / ``mpirun --tag-output`` prefixes change nothing."""

from __future__ import annotations

import json
import random

import pytest

from clustereval import parsers
from clustereval.parsers import _mutate
from clustereval.parsers._common import clean
from tests.unit.parsers import test_probe_fabric as fabric
from tests.unit.parsers import test_probe_k8s as k8s
from tests.unit.parsers import test_probe_key_values as kv
from tests.unit.parsers import test_probe_sections as sections
from tests.unit.parsers import test_probe_sysfs as sysfs
from tests.unit.parsers import test_probe_tools as tools
from tests.unit.parsers import test_probe_versions as versions

SAMPLES = {
    "probe-key-equals-value": [kv.IDENTITY, kv.SOFTWARE_LIBS], "probe-key-colon-value": [kv.GPUSTACK_NODE],
    "probe-scheduler-commands": [sections.COMMANDS], "probe-scheduler-hardware": [sections.HARDWARE],
    "probe-health-programs": [sections.PROGRAMS], "probe-kernel-log": [sections.KERNEL_LOG],
    "probe-monitoring-listeners": [sections.LISTENERS], "probe-fleet-packages": [sections.PACKAGES],
    "probe-fabric-rdma": [fabric.RDMA], "probe-fabric-host": [fabric.HOST],
    "probe-fabric-topology": [fabric.TOPOLOGY_NONE, fabric.TOPOLOGY_TREE],
    "probe-monitoring-cpufreq": [sysfs.CPUFREQ], "probe-fleet-firmware": [sysfs.FIRMWARE],
    "probe-versions-inventory": [versions.INVENTORY], "probe-k8s-can-i": [k8s.CAN_I], "probe-k8s-helm": [k8s.HELM],
    "probe-k8s-cpu-manager-state": [k8s.CPU_STATE], "probe-k8s-pvc-test": [k8s.PVC_TEST],
    "ss": [tools.SS], "findmnt-json": [json.dumps(tools.FINDMNT, indent=3)], "ip-link-json": [json.dumps(tools.LINKS)],
    "nvidia-smi-boost-slider": [tools.BOOST],
}
# The parser modules whose tools are sampled here (the audit's probes of our own and the tools they run).
MODULES = ("probe_key_values", "probe_sections", "probe_fabric", "probe_sysfs", "probe_versions", "probe_k8s", "ss",
           "findmnt", "ip_link", "nvidia_smi_boost_slider")


def outcome(tool: str, data: bytes) -> dict | None:
    try:
        result = parsers.get(tool)(clean(data))
    except parsers.ParseError as exc:
        assert str(exc).strip()
        return None
    json.dumps(result, allow_nan=False)
    assert {"tool", "format", "complete", "warnings"} <= set(result)
    return result


def test_every_tool_of_these_modules_has_a_sample():
    ours = {tool for tool in parsers.tools() if parsers.get(tool).__module__.rsplit(".", 1)[-1] in MODULES}
    assert ours == set(SAMPLES)


@pytest.mark.parametrize("tool", sorted(SAMPLES))
@pytest.mark.parametrize("mutation", sorted(_mutate.MUTATIONS))
def test_damaged_output(tool, mutation):
    for sample in SAMPLES[tool]:
        for seed in range(5):
            outcome(tool, _mutate.MUTATIONS[mutation](sample.encode(), random.Random(seed)))


@pytest.mark.parametrize("tool", sorted(SAMPLES))
def test_every_cut(tool):
    for sample in SAMPLES[tool]:
        data = sample.encode()
        for cut in range(len(data) + 1):
            outcome(tool, data[:cut])


@pytest.mark.parametrize("tool", sorted(SAMPLES))
@pytest.mark.parametrize("wrap", ["srun_prefix", "mpirun_prefix"])
def test_launcher_prefixes_change_nothing(tool, wrap):
    for sample in SAMPLES[tool]:
        plain = outcome(tool, sample.encode())
        assert outcome(tool, _mutate.MUTATIONS[wrap](sample.encode(), random.Random(7))) == plain
