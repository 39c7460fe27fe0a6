"""The parsers of real tools' output the audit probes run: ss, findmnt -J, ip -j link, nvidia-smi boost-slider,
the raw nvidia-smi -q -x readers and lspci's bridge bus ranges."""

from __future__ import annotations

import json

import pytest

from clustereval.parsers import ParseError, parse
from clustereval.parsers.lspci_bridges import access_denied, bus_ranges
from clustereval.parsers.nvidia_smi_q_x_text import driver_versions, gpu_fabric, lists_gpus
from tests.conftest import read_corpus

# `ss -Hltn` of iproute2 6.1 on a node: IPv4, IPv6 and a scoped link-local listener.
SS = """LISTEN 0      4096         127.18.23.2:9400       0.0.0.0:*
LISTEN 0      4096             0.0.0.0:22         0.0.0.0:*
LISTEN 0      4096                [::]:9100          [::]:*
LISTEN 0      128     [fe80::1%eth0]:5555          [::]:*
"""
FINDMNT = {"filesystems": [{"target": "/", "source": "/dev/vda", "fstype": "ext4", "options": "rw,relatime",
                            "children": [
                                {"target": "/proc", "source": "proc", "fstype": "proc", "options": "rw,nosuid"},
                                {"target": "/data", "source": "systemd-1", "fstype": "autofs", "options": "rw",
                                 "children": [{"target": "/data", "source": "nas:/data", "fstype": "nfs",
                                               "options": "rw,vers=4.2"}]}]}]}
LINKS = [{"ifindex": 1, "ifname": "lo", "flags": ["LOOPBACK", "UP", "LOWER_UP"], "link_type": "loopback"},
         {"ifindex": 4, "ifname": "eth0", "flags": ["BROADCAST", "MULTICAST", "UP", "LOWER_UP"],
          "operstate": "UP", "link_type": "ether", "parentbus": "virtio", "parentdev": "virtio0"},
         {"ifindex": 5}]
BOOST = ("GPU  Boostslider  Max  Min  Current  Default\n0    vboost       4    0    2        0\n"
         "1    vboost       4    0    0        0\n")


def test_ss_rows_hosts_and_ports():
    data = parse("ss", SS)
    assert data["understood"] is True
    assert [(row["host"], row["port"]) for row in data["sockets"]] == [
        ("127.18.23.2", 9400), ("0.0.0.0", 22), ("::", 9100), ("fe80::1", 5555)]
    assert parse("ss", "")["understood"] is True and parse("ss", "Cannot open netlink socket")["understood"] is False


def test_ss_process_names_of_ss_p():
    row = parse("ss", 'LISTEN 0 5 127.18.23.2:9400 0.0.0.0:* users:(("dcgm-exporter",pid=3052,fd=3))\n')["sockets"][0]
    assert row["state"] == "LISTEN" and row["processes"] == ["dcgm-exporter"]


def test_findmnt_flattens_each_mount_before_its_children():
    mounts = parse("findmnt-json", json.dumps(FINDMNT, indent=3))["filesystems"]
    assert [(m["target"], m["fstype"]) for m in mounts] == [("/", "ext4"), ("/proc", "proc"), ("/data", "autofs"),
                                                            ("/data", "nfs")]
    assert mounts[3] == {"target": "/data", "source": "nas:/data", "fstype": "nfs", "options": "rw,vers=4.2"}


def test_findmnt_errors():
    with pytest.raises(ParseError, match="unreadable JSON"):
        parse("findmnt-json", "findmnt: unknown column: FOO")
    with pytest.raises(ParseError, match="no 'filesystems' list"):
        parse("findmnt-json", '{"mounts": []}')


def test_ip_link_keeps_named_interfaces():
    links = parse("ip-link-json", json.dumps(LINKS))["links"]
    assert [link["ifname"] for link in links] == ["lo", "eth0"] and links[1]["parentbus"] == "virtio"
    with pytest.raises(ParseError, match="no JSON"):
        parse("ip-link-json", 'Object "link" is unknown, try "ip help".')
    with pytest.raises(ParseError, match="not print a JSON list"):
        parse("ip-link-json", '{"ifname": "lo"}')


def test_boost_slider_rows():
    data = parse("nvidia-smi-boost-slider", BOOST)
    assert data["complete"] is True and data["not_supported"] is False
    assert data["gpus"][0] == {"gpu": 0, "max": 4, "min": 0, "current": 2, "default": 0}
    ruled = parse("nvidia-smi-boost-slider", "| 0 | vboost | 4 | 0 | 3 | 0 |\n")["gpus"]
    assert ruled == [{"gpu": 0, "max": 4, "min": 0, "current": 3, "default": 0}]


def test_boost_slider_not_supported_or_unreadable():
    unsupported = parse("nvidia-smi-boost-slider", "Boost slider is not supported on GPU 00000000:19:00.0.\n")
    assert unsupported["not_supported"] is True and unsupported["complete"] is True and unsupported["gpus"] == []
    assert parse("nvidia-smi-boost-slider", "??\n")["complete"] is False


def test_nvidia_smi_text_readers():
    xml = ('<?xml version="1.0" ?>\n<nvidia_smi_log>\n\t<driver_version>580.159.03</driver_version>\n'
           '\t<gpu id="00000000:19:00.0">\n\t\t<fabric>\n\t\t\t<state>Completed</state>\n'
           '\t\t\t<status>Success</status>\n\t\t\t<cliqueId>32766</cliqueId>\n'
           '\t\t\t<clusterUuid>5a8e2f10-0000-4c1b-9d1e-3f2a8c7b6d5e</clusterUuid>\n\t\t</fabric>\n'
           '\t</gpu>\n\t<gpu id="00000000:2A:00.0">\n\t\t<fabric>\n\t\t\t<state>In Progress</state>\n'
           '\t\t</fabric>\n')  # cut short inside the second GPU
    assert driver_versions(xml) == ["580.159.03"] and lists_gpus(xml) is True
    assert gpu_fabric(xml) == [{"state": "Completed", "status": "Success", "cliqueId": "32766",
                                "clusterUuid": "5a8e2f10-0000-4c1b-9d1e-3f2a8c7b6d5e"},
                               {"state": "In Progress", "status": "N/A", "cliqueId": "N/A", "clusterUuid": "N/A"}]
    failed = "Failed to initialize NVML: Driver/library version mismatch\n"
    assert driver_versions(failed) == [] and lists_gpus(failed) is False and gpu_fabric(failed) == []


def test_lspci_bridge_bus_ranges_of_the_corpus_hgx_excerpt():
    # The real HGX H100 excerpt: root port 15:01.0 (secondary 16, subordinate 1c), PMC bridge 82:00.0 (83..83).
    text = read_corpus("lspci", "h100-hgx-lspci-vvv-acs-excerpt.txt")
    ranges = bus_ranges(text)
    assert ranges["0000:15:01.0"] == (0x16, 0x1C) and ranges["0000:82:00.0"] == (0x83, 0x83)
    assert "0000:19:00.0" not in ranges and access_denied(text) is False
    assert access_denied("\tCapabilities: <access denied>\n") is True
