"""The facts_host probe (checks/probes/facts.yml): CPU and memory, on output its own command printed on a
Debian 12 VM (2 vCPUs of an AMD EPYC, one socket, 23.5 GiB)."""

from __future__ import annotations

import subprocess

import pytest

from clustereval.checks import probe_catalogue
from clustereval.parsers import ParseError, parse

TOOL = "probe-facts-host"
CAPTURED = "cpu_model: AMD EPYC\ncpus: 2\nsockets: 1\nmemory_kib: 24683584\n"
# An Arm server names no model in /proc/cpuinfo and some VMs no physical id: the same awk prints empty / 0
ARM_VM = "cpu_model: \ncpus: 64\nsockets: 0\nmemory_kib: 528280576\n"


def test_cpu_and_memory_as_captured():
    data = parse(TOOL, CAPTURED)
    assert data["complete"] and data["warnings"] == []
    assert (data["cpu_model"], data["cpus"], data["sockets"], data["memory_gib"]) == ("AMD EPYC", 2, 1, 23.5)


def test_no_model_name_and_no_sockets():
    data = parse(TOOL, ARM_VM)
    assert data["complete"] and data["cpu_model"] is None and data["sockets"] == 0 and data["cpus"] == 64
    assert data["memory_gib"] == 503.8


def test_the_probe_command_itself_prints_what_the_parser_reads():
    cmd = probe_catalogue.load()["facts_host"]["cmd"]
    proc = subprocess.run(["/bin/sh", "-c", cmd], capture_output=True, text=True, timeout=10)
    data = parse(TOOL, proc.stdout)
    assert data["complete"] and data["cpus"] >= 1 and data["memory_gib"] > 0


def test_output_cut_anywhere_is_a_parse_error_or_incomplete():
    for cut in range(len(CAPTURED) - 1):
        try:
            data = parse(TOOL, CAPTURED[:cut])
        except ParseError as exc:
            assert "internal parser fault" not in str(exc)
            continue
        assert not data["complete"] and data["warnings"], repr(CAPTURED[:cut])


def test_specific_truncations():
    data = parse(TOOL, "cpu_model: AMD EPYC\ncpus: 2\n")
    assert not data["complete"] and data["memory_gib"] is None and data["sockets"] is None
    assert data["warnings"] == ["sockets missing (the output stops early)",
                                "memory_kib missing (the output stops early)"]
    data = parse(TOOL, CAPTURED[:-4])  # memory_kib: 24683 - a number, but not the whole number
    assert not data["complete"] and "cut short" in data["warnings"][-1]


@pytest.mark.parametrize("garbage", ["", "\x00\xff" * 30, "awk: cannot open /proc/cpuinfo\n", "model name: X\n"])
def test_garbled_output_is_a_parse_error(garbage):
    with pytest.raises(ParseError, match="none of cpu_model, cpus, sockets, memory_kib"):
        parse(TOOL, garbage)


def test_garbled_values_give_none_never_another_exception():
    data = parse(TOOL, "cpu_model: \ufffd\x1b[0m\ncpus: two\nsockets: -\nmemory_kib: 0x\n")
    assert (data["cpus"], data["sockets"], data["memory_gib"]) == (None, None, None)
    assert data["complete"]  # every key is there: what the node printed is all there was
