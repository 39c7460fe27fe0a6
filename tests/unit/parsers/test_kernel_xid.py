"""kernel-xid parser and Xid catalogue: every corpus file plus hand-written edge cases."""

from __future__ import annotations

import json

import pytest

from clustereval.parsers import ParseError, parse
from clustereval.parsers.kernel_xid import xid_catalogue, xid_info
from tests.conftest import corpus_files, read_corpus

TOOL = "kernel-xid"


@pytest.mark.parametrize("path", corpus_files(TOOL), ids=lambda p: p.name)
def test_every_corpus_file_parses(path):
    out = parse(TOOL, path.read_bytes())
    assert out["tool"] == TOOL and out["complete"] is True
    json.dumps(out)


def test_xid119_dmesg_T():
    out = parse(TOOL, read_corpus(TOOL, "dmesg-T-xid119-gsp-rpc-timeout-h100-xe9680.log"))
    assert out["format"] == "dmesg-T"
    assert out["counts_by_code"] == {"119": 5}
    first = out["events"][0]
    assert first["timestamp"] == "Sun Feb 23 16:24:18 2025"
    assert first["kind"] == "xid" and first["code"] == 119
    assert first["pci"] == "0000:9b:00"
    assert first["pid"] == 2024380 and first["process"] == "nvidia-smi"
    assert first["message"].startswith("Timeout after 6s of waiting for RPC response from GPU4 GSP!")
    assert first["raw"].startswith("[Sun Feb 23 16:24:18 2025] NVRM: Xid")
    assert first["gpu_uuid"] == "GPU-509665ad-b600-ac93-3616-d754b23d636d"
    assert [e["process"] for e in out["events"][-2:]] == ["cache_mgr_main", "gpud"]
    assert out["notice_counts"] == {"gpu_reset_needed": 1}
    summary = out["codes"][0]
    assert summary["severity"] == "critical" and summary["immediate_action"] == "RESET_GPU"
    assert summary["last_timestamp"] == "Sun Feb 23 16:30:13 2025"


def test_xid13_xid43_storm_iso_decode():
    out = parse(TOOL, read_corpus(TOOL, "dmesg-decode-iso-xid13-xid43-storm.log"))
    assert out["format"] == "dmesg-decode-iso"
    assert out["counts_by_code"] == {"13": 629, "43": 7}
    first = out["events"][0]
    assert first["timestamp"] == "2025-01-21T02:21:33,498559+00:00"
    assert first["pid"] is None and first["process"] is None  # pid='<unknown>', name=<unknown>
    assert first["message"] == "Graphics SM Warp Exception on (GPC 8, TPC 5, SM 0): Out Of Range Address"
    xid43 = next(e for e in out["events"] if e["code"] == 43)
    assert xid43["pid"] == 2815167 and xid43["process"] == "pt_main_thread"
    assert xid43["message"] == "Ch 00000008"


def test_boot_log_without_xid_is_a_clean_result():
    out = parse(TOOL, read_corpus(TOOL, "dmesg-decode-iso-boot-h100-nvswitch-mlx5.log"))
    assert out["events"] == [] and out["xid_count"] == 0 and out["warnings"] == []


def test_raw_kmsg_records():
    out = parse(TOOL, read_corpus(TOOL, "dev-kmsg-raw-nvswitch.log"))
    assert out["format"] == "kmsg" and out["events"] == []


def test_sxid_11004_triplets_fold_into_one_event_per_switch():
    out = parse(TOOL, read_corpus(TOOL, "dmesg-sxid-11004-ingress-invalid-acl-4-nvswitch-service-vm.log"))
    assert out["sxid_counts_by_code"] == {"11004": 4}
    assert out["counts_by_code"] == {}
    by_switch = {e["switch"]: e for e in out["events"]}
    sw1 = by_switch["nvidia-nvswitch1"]
    assert sw1["kind"] == "sxid" and sw1["pci"] == "0000:00:08.0"
    assert sw1["fatal"] is False and sw1["link"] == 36
    assert sw1["timestamp"] == "8123.617543"
    assert sw1["message"] == "Non-fatal, Link 36 ingress invalid ACL (First)"
    assert "Severity 0 Engine instance 36 Sub-engine instance 00" in sw1["details"]
    assert by_switch["nvidia-nvswitch3"]["link"] == 58


def test_sxid_22013():
    out = parse(TOOL, read_corpus(TOOL, "dmesg-sxid-22013-minion-link-dlreq.log"))
    (event,) = out["events"]
    assert event["code"] == 22013 and event["link"] == 60 and len(event["details"]) == 2
    assert event["message"] == "Non-fatal, Link 60 Minion Link DLREQ interrupt"


def test_xid79_german_locale_journalctl():
    out = parse(TOOL, read_corpus(TOOL, "journalctl-xid79-fallen-off-bus-german-locale.log"))
    assert out["format"] == "journalctl"
    (event,) = out["events"]
    assert event["timestamp"] == "Okt 06 17:59:27" and event["host"] == "balrog"
    assert event["code"] == 79 and event["pid"] == 1122 and event["process"] is None
    assert event["message"] == "GPU has fallen off the bus."
    assert out["notice_counts"] == {"fallen_off_bus": 1}


def test_xid31_inside_health_tool_wrapper():
    out = parse(TOOL, read_corpus(TOOL, "xid31-mmu-fault-line-wrapped-by-health-tool.log"))
    (event,) = out["events"]
    assert event["code"] == 31 and event["pci"] == "0000:00:06"
    assert event["pid"] == 79749 and event["process"] == "exe"
    assert event["timestamp"] is None
    assert "FAULT_PDE ACCESS_TYPE_VIRT_WRITE" in event["message"]


def test_xid63_bare_line():
    out = parse(TOOL, read_corpus(TOOL, "xid63-row-remapper-a100-single-line.log"))
    (event,) = out["events"]
    assert event["code"] == 63 and event["pci"] == "0000:10:1c" and event["pid"] == 1896
    assert event["message"] == "Row Remapper: New row marked for remapping, reset gpu to activate."


def test_peermem_storm_journalctl_iso():
    text = read_corpus(TOOL, "journalctl-k-short-iso-peermem.log")
    out = parse(TOOL, text)
    assert out["format"] == "journalctl-iso"
    assert out["notice_counts"]["peermem_error"] == text.count("nv_get_p2p_free_callback:127 ERROR")


def test_pcie_bandwidth_limited_notices():
    out = parse(TOOL, read_corpus(TOOL, "dmesg-pcie-bandwidth-limited-by-gen4-switch-h100.log"))
    assert out["notice_counts"] == {"pcie_bandwidth_limited": 2}
    assert out["notices"][0]["timestamp"] == "10.735323"


def test_old_driver_line_without_pid_and_mig_location():
    # R470-era layout has no pid=/name=; the location may carry more than the PCI address
    text = ("[  512.000001] NVRM: Xid (PCI:0000:3b:00): 48, An uncorrectable double bit error (DBE) has been "
            "detected on GPU in the framebuffer at partition 2, subpartition 0.\n")
    (event,) = parse(TOOL, text)["events"]
    assert event["code"] == 48 and event["pid"] is None and event["pci"] == "0000:3b:00"
    assert event["message"].startswith("An uncorrectable double bit error")


def test_mangled_xid_line_is_reported_not_dropped():
    out = parse(TOOL, "[ 1.0] NVRM: Xid (PCI:0000:3b:00\n")
    assert out["events"] == []
    assert any("Xid" in w for w in out["warnings"])


def test_empty_and_denied_output_raise():
    with pytest.raises(ParseError, match="empty"):
        parse(TOOL, "")
    with pytest.raises(ParseError, match="dmesg_restrict"):
        parse(TOOL, "dmesg: read kernel buffer failed: Operation not permitted\n")


def test_catalogue_covers_peers_table_and_is_consistent():
    catalogue = xid_catalogue()
    for code in (8, 13, 31, 43, 45, 48, 62, 63, 64, 74, 79, 92, 94, 95, 109, 119, 120, 136, 140, 143,
                 144, 150, 151, 154, 155, 156, 158, 162, 165, 168):
        assert code in catalogue, code
    for code, entry in catalogue.items():
        assert entry["code"] == code
        assert entry["name"] and entry["meaning"]
        assert entry["severity"] in {"critical", "major", "minor", "info"}
        assert "immediate_action" in entry


def test_catalogue_facts_from_nvidia_table():
    assert xid_info(79)["immediate_action"] == "RESTART_BM"
    assert xid_info(119)["immediate_action"] == "RESET_GPU"
    assert xid_info(63)["immediate_action"] == "IGNORE" and xid_info(63)["azure_nhc_fails"] is True
    assert xid_info(43)["severity"] == "info"
    assert xid_info("48")["severity"] == "critical"
    assert xid_info(9999) is None and xid_info("x") is None
    # callers get copies: editing one must not change the catalogue
    xid_info(79)["severity"] = "info"
    assert xid_info(79)["severity"] == "critical"
