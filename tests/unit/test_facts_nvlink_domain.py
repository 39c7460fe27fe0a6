"""The ``nvlink_domain`` hardware fact: the multi-node NVLink domain (an NVL72 rack) a host's GPUs belong to, read
from the ``<fabric>`` blocks of real ``nvidia-smi -q -x`` captures (read in place under ../shared/corpus)."""

from __future__ import annotations

from pathlib import Path

import pytest

from clustereval import checks, facts
from clustereval.checks import Context
from clustereval.parsers.nvidia_smi_q_x_text import gpu_fabric
from tests.helpers import probe

CORPUS = Path(__file__).resolve().parents[3] / "shared" / "corpus" / "nvidia-smi-q-x"
H200 = CORPUS / "h200-single-vm-drv580.159.04-v13-EDITED-ids.xml"  # driver 580: <fabric> with clusterUuid N/A
A100 = CORPUS / "a100-sxm4-80gb-x4-drv535-v12.xml"  # driver 535: <fabric> without cliqueId / clusterUuid
T4 = CORPUS / "tesla-t4-drv515-v11.xml"  # driver 515: no <fabric> at all
DOMAIN = "8f1c2d3e-4b5a-6978-8a9b-0c1d2e3f4a5b"

needs_corpus = pytest.mark.skipif(not H200.is_file(), reason="the shared corpus is not checked out next to the repo")


def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def _in_domain(text: str, uuid: str) -> str:
    """A real capture as a GPU in a multi-node NVLink domain reports it (only the clusterUuid differs)."""
    assert "<clusterUuid>N/A</clusterUuid>" in text
    return text.replace("<clusterUuid>N/A</clusterUuid>", f"<clusterUuid>{uuid}</clusterUuid>")


def _host_facts(xml: str) -> dict:
    return checks.host_facts(Context(subject="n1", probes=probe("nvidia_smi_q_x", xml)))


@needs_corpus
def test_real_captures_outside_a_multinode_domain_have_none() -> None:
    for path in (H200, A100, T4):
        assert facts.nvlink_domain(gpu_fabric(_text(path))) is None, path.name
    assert facts.nvlink_domain([]) is None


@needs_corpus
def test_cluster_uuid_names_the_domain_and_all_zero_is_none() -> None:
    text = _text(H200)
    assert facts.nvlink_domain(gpu_fabric(_in_domain(text, DOMAIN))) == DOMAIN
    assert facts.nvlink_domain(gpu_fabric(_in_domain(text, "00000000-0000-0000-0000-000000000000"))) is None
    # a GPU that reports none next to GPUs that do: the domain most of them report
    fabric = [{"clusterUuid": DOMAIN}, {"clusterUuid": "N/A"}, {"clusterUuid": DOMAIN}, {"clusterUuid": "n/a"}]
    assert facts.nvlink_domain(fabric) == DOMAIN


@needs_corpus
def test_host_facts_and_hardware_carry_the_domain() -> None:
    merged = _host_facts(_in_domain(_text(H200), DOMAIN))
    assert merged["nvlink_domain"] == DOMAIN and merged["gpu_count"] == 1
    hardware = facts.hardware(merged)
    assert hardware["nvlink_domain"] == DOMAIN and list(hardware) == list(facts.HARDWARE_KEYS)
    assert facts.hardware(_host_facts(_text(H200)))["nvlink_domain"] is None
    assert facts.hardware({})["nvlink_domain"] is None


def test_the_fleet_keeps_no_majority_of_an_identity_fact() -> None:
    per_host = {f"n{i}": {**dict.fromkeys(facts.HARDWARE_KEYS), "gpu_model": "NVIDIA GB200",
                          "nvlink_domain": "rack-a" if i < 3 else "rack-b"} for i in range(5)}
    fleet = facts.fleet(per_host)
    assert fleet["nvlink_domain"] is None and fleet["differing"] == {} and fleet["gpu_model"] == "NVIDIA GB200"
    assert facts.for_subject(per_host, "n1")["nvlink_domain"] == "rack-a"
    assert facts.for_subject(per_host, "n1->n2")["nvlink_domain"] == "rack-a"
    assert facts.for_subject(per_host, "n1->n4")["nvlink_domain"] is None
