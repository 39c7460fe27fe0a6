"""Parsers against real captures changed the way copies change them, and against tool output they have not
seen yet.

* Whitespace: every corpus capture of every tool, with its tabs expanded (``expand``, a terminal copy, a
  log pipeline), its leading spaces turned back into tabs (``unexpand``), CRLF line endings, trailing blanks,
  every indentation doubled, or the whole capture indented as a code block, must give the same result as
  the capture itself.
* Unknown sub-blocks: ``ibv_devinfo -v`` of a ConnectX-6 with the capability sub-blocks rdma-core prints
  (``libibverbs/examples/devinfo.c``: tag matching, ``rss_caps``, ``cq moderation caps``...), and unknown
  indented blocks put into the ``lspci``, ``ibstat``, ``nvidia-smi -q`` and ``flint`` captures, must parse,
  the known facts unchanged.

The inputs are derived from the shared corpus at test time; no capture is copied into the project.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable

import pytest

from clustereval import parsers
from clustereval.parsers import _mutate, parse
from tests.conftest import CORPUS, corpus_files, read_corpus

# Copies' whitespace changes (clustereval.parsers._mutate), on bytes as a probe or a file gives them.
WHITESPACE: dict[str, Callable[[bytes], bytes]] = {
    "tabs-expanded-8": lambda data: _mutate.tabs_expanded(data, 8),
    "tabs-expanded-4": lambda data: _mutate.tabs_expanded(data, 4),
    "spaces-unexpanded": _mutate.spaces_unexpanded,
    "crlf": lambda data: _mutate.crlf(data, random.Random(0)),
    "trailing-blanks": _mutate.blanks_appended,
    "indent-doubled": _mutate.indentation_doubled,
    "code-block": _mutate.indented_as_block,
}
# Captures whose only damage is a first line indented unlike the rest: once the tabs are spaces that
# evidence is gone, so only the facts (not complete/failures/warnings) must stay the same.
_INDENT_EVIDENCE = {"connectx6-hdr100-rst-codeblock-first-line-indented-GARBLED.txt",
                    "connectx6-mt4123-hdr100-rate100-rst-codeblock-first-line-indented.txt"}
_JUDGEMENT = ("complete", "failures", "warnings")


def _outcome(tool: str, text: str | bytes) -> dict | str:
    try:
        return parse(tool, text)
    except parsers.ParseError as exc:
        return f"ParseError: {exc}"


def _tools_with_corpus() -> list[str]:
    return [tool for tool in parsers.tools() if corpus_files(tool)]


@pytest.mark.parametrize("transform", sorted(WHITESPACE))
@pytest.mark.parametrize("tool", _tools_with_corpus())
def test_whitespace_normalised_capture_reads_the_same(tool, transform):
    changed = []
    for path in corpus_files(tool):
        data = path.read_bytes()
        before, after = _outcome(tool, data), _outcome(tool, WHITESPACE[transform](data))
        if path.name in _INDENT_EVIDENCE and isinstance(before, dict) and isinstance(after, dict):
            before = {k: v for k, v in before.items() if k not in _JUDGEMENT}
            after = {k: v for k, v in after.items() if k not in _JUDGEMENT}
        if before != after:
            changed.append(path.name)
    assert not changed, f"{tool}: {transform} changes what is read from {changed}"


# --------------------------------------------------------------------------- lspci -vvv, tabs expanded

LSPCI_H100 = "h100-hgx-lspci-vvv-acs-excerpt.txt"


@pytest.mark.parametrize("width", [8, 4, 2])
def test_lspci_kernel_driver_and_modules_survive_tab_expansion(width):
    text = read_corpus("lspci", LSPCI_H100)
    original = parse("lspci", text)["devices"]
    expanded = parse("lspci", text.expandtabs(width))["devices"]
    assert [d.get("driver") for d in original] == [d.get("driver") for d in expanded]
    assert [d.get("kernel_modules") for d in original] == [d.get("kernel_modules") for d in expanded]
    assert any(d.get("driver") for d in expanded)


def test_lspci_capability_body_fields_stay_out_of_the_device():
    """A ``Subsystem:`` inside a capability's body (deeper than the device's fields) is not the device's."""
    text = read_corpus("lspci", LSPCI_H100)
    first = parse("lspci", text)["devices"][0]
    header, rest = text.split("\n", 1)
    body = "\tCapabilities: [300 v1] Vendor Specific Information\n\t\tSubsystem: not the device's own\n"
    for variant in (header + "\n" + body + rest, (header + "\n" + body + rest).expandtabs(8)):
        device = parse("lspci", variant)["devices"][0]
        assert device.get("subsystem") == first.get("subsystem")


def test_lspci_bridge_ranges_read_through_crlf_and_expanded_tabs():
    from clustereval.parsers.lspci_bridges import bus_ranges

    text = read_corpus("lspci", LSPCI_H100)
    ranges = bus_ranges(text)
    assert ranges
    assert bus_ranges(text.expandtabs(8).replace("\n", "\r\n")) == ranges
    assert bus_ranges("\n".join("    " + ln for ln in text.split("\n"))) == ranges


# --------------------------------------------------------------------------- ibv_devinfo -v of a ConnectX-6

CX6 = "cx6-mt28908-fw20.41.1000-ib-tabs.txt"
# What rdma-core's devinfo.c prints between phys_port_cnt and the first port with -v, in its order and
# with its tabs (depth, text); the values are a ConnectX-6's.
_FLAG = 5
CX6_DEVICE_VERBOSE = [
    (1, "max_mr_size:\t\t\t0xffffffffffffffff"), (1, "page_size_cap:\t\t\t0xfffffffffffff000"),
    (1, "max_qp:\t\t\t\t131072"), (1, "max_qp_wr:\t\t\t32768"), (1, "device_cap_flags:\t\t0xed721c36"),
    (_FLAG, "BAD_PKEY_CNTR"), (_FLAG, "BAD_QKEY_CNTR"), (_FLAG, "AUTO_PATH_MIG"), (_FLAG, "CHANGE_PHY_PORT"),
    (_FLAG, "PORT_ACTIVE_EVENT"), (_FLAG, "SYS_IMAGE_GUID"), (_FLAG, "RC_RNR_NAK_GEN"), (_FLAG, "MEM_WINDOW"),
    (_FLAG, "XRC"), (_FLAG, "MEM_MGT_EXTENSIONS"), (_FLAG, "MEM_WINDOW_TYPE_2B"), (_FLAG, "RAW_IP_CSUM"),
    (_FLAG, "MANAGED_FLOW_STEERING"), (_FLAG, "Unknown flags: 0xC8400000"),
    (1, "max_sge:\t\t\t30"), (1, "max_sge_rd:\t\t\t30"), (1, "max_cq:\t\t\t\t16777216"),
    (1, "max_cqe:\t\t\t4194303"), (1, "max_mr:\t\t\t\t16777216"), (1, "max_pd:\t\t\t\t8388608"),
    (1, "max_qp_rd_atom:\t\t\t16"), (1, "max_ee_rd_atom:\t\t\t0"), (1, "max_res_rd_atom:\t\t2097152"),
    (1, "max_qp_init_rd_atom:\t\t16"), (1, "max_ee_init_rd_atom:\t\t0"), (1, "atomic_cap:\t\t\tATOMIC_HCA (1)"),
    (1, "max_ee:\t\t\t\t0"), (1, "max_rdd:\t\t\t0"), (1, "max_mw:\t\t\t\t16777216"),
    (1, "max_raw_ipv6_qp:\t\t0"), (1, "max_raw_ethy_qp:\t\t0"), (1, "max_mcast_grp:\t\t\t2097152"),
    (1, "max_mcast_qp_attach:\t\t240"), (1, "max_total_mcast_qp_attach:\t503316480"),
    (1, "max_ah:\t\t\t\t2147483647"), (1, "max_fmr:\t\t\t0"), (1, "max_srq:\t\t\t8388608"),
    (1, "max_srq_wr:\t\t\t32767"), (1, "max_srq_sge:\t\t\t31"), (1, "max_pkeys:\t\t\t128"),
    (1, "local_ca_ack_delay:\t\t16"),
    (1, "general_odp_caps:"), (_FLAG, "ODP_SUPPORT"), (_FLAG, "ODP_SUPPORT_IMPLICIT"),
    (1, "rc_odp_caps:"), (_FLAG, "SUPPORT_SEND"), (_FLAG, "SUPPORT_RECV"), (_FLAG, "SUPPORT_WRITE"),
    (_FLAG, "SUPPORT_READ"), (_FLAG, "SUPPORT_ATOMIC"), (_FLAG, "SUPPORT_SRQ"),
    (1, "uc_odp_caps:"), (_FLAG, "NO SUPPORT"),
    (1, "ud_odp_caps:"), (_FLAG, "SUPPORT_SEND"),
    (1, "xrc_odp_caps:"), (_FLAG, "SUPPORT_SEND"), (_FLAG, "SUPPORT_WRITE"), (_FLAG, "SUPPORT_READ"),
    (_FLAG, "SUPPORT_ATOMIC"), (_FLAG, "SUPPORT_SRQ"),
    (1, "completion timestamp_mask:\t\t\t0x7fffffffffffffff"), (1, "hca_core_clock:\t\t\t156250kHZ"),
    (1, "raw packet caps:"), (_FLAG, "C-VLAN stripping offload"), (_FLAG, "Scatter FCS offload"),
    (_FLAG, "IP csum offload"), (_FLAG, "Delay drop"),
    (1, "device_cap_flags_ex:\t\t0x30000055ED721C36"), (_FLAG, "RAW_SCATTER_FCS"),
    (_FLAG, "PCI_WRITE_END_PADDING"), (_FLAG, "Unknown flags: 0x3000004100000000"),
    (1, "tso_caps:"), (2, "max_tso:\t\t\t0"),
    (1, "rss_caps:"), (2, "max_rwq_indirection_tables:\t\t\t1048576"),
    (2, "max_rwq_indirection_table_size:\t\t\t2048"), (2, "rx_hash_function:\t\t\t\t0x1"),
    (2, "rx_hash_fields_mask:\t\t\t\t0x800000FF"), (2, "supported_qp:"), (_FLAG, "SUPPORT_RAW_PACKET"),
    (1, "max_wq_type_rq:\t\t\t8388608"),
    (1, "packet_pacing_caps:"), (2, "qp_rate_limit_min:\t1kbps"), (2, "qp_rate_limit_max:\t100000000kbps"),
    (2, "supported_qp:"), (_FLAG, "SUPPORT_RAW_PACKET"),
    (1, "max_rndv_hdr_size:\t\t64"), (1, "max_num_tags:\t\t\t127"), (1, "max_ops:\t\t\t32768"),
    (1, "max_sge:\t\t\t1"), (1, "flags:"), (_FLAG, "IBV_TM_CAP_RC"),
    (0, ""), (1, "cq moderation caps:"), (2, "max_cq_count:\t65535"), (2, "max_cq_period:\t4095 us"), (0, ""),
    (0, ""), (1, "maximum available device memory:\t131072Bytes"), (0, ""),
    (1, "num_comp_vectors:\t\t63"),
]
CX6_PORT_VERBOSE = [
    (3, "max_msg_sz:\t\t0x40000000"), (3, "port_cap_flags:\t\t0xa259e848"), (3, "port_cap_flags2:\t0x0032"),
    (3, "max_vl_num:\t\t4 (3)"), (3, "bad_pkey_cntr:\t\t0x0"), (3, "qkey_viol_cntr:\t\t0x0"),
    (3, "sm_sl:\t\t\t0"), (3, "pkey_tbl_len:\t\t128"), (3, "gid_tbl_len:\t\t8"), (3, "subnet_timeout:\t\t18"),
    (3, "init_type_reply:\t0"), (3, "active_width:\t\t4X (2)"), (3, "active_speed:\t\t50.0 Gbps (64)"),
    (3, "phys_state:\t\tLINK_UP (5)"), (3, "GID[  0]:\t\tfe80:0000:0000:0000:a088:c203:0096:05fc"),
]
_TM_FLAT = [(1, "max_rndv_hdr_size:\t\t64"), (1, "max_num_tags:\t\t\t127"), (1, "max_ops:\t\t\t32768"),
            (1, "max_sge:\t\t\t1"), (1, "flags:"), (_FLAG, "IBV_TM_CAP_RC")]


def _render(lines: list[tuple[int, str]]) -> str:
    return "".join(("\t" * depth + text if text else "") + "\n" for depth, text in lines)


def _cx6_verbose(device: list[tuple[int, str]] = CX6_DEVICE_VERBOSE) -> str:
    """The corpus ConnectX-6 capture as ``ibv_devinfo -v`` prints it: the device's and the port's extra lines
    put where devinfo.c prints them (after ``phys_port_cnt`` and after ``link_layer``)."""
    out = []
    for line in read_corpus("ibv_devinfo", CX6).split("\n"):
        out.append(line + "\n")
        if line.strip().startswith("phys_port_cnt:"):
            out.append(_render(device))
        elif line.strip().startswith("link_layer:"):
            out.append(_render(CX6_PORT_VERBOSE))
    return "".join(out)


def _facts(out: dict) -> dict:
    hca, port = out["hcas"][0], out["ports"][0]
    return {"hca": {k: hca.get(k) for k in ("name", "fw_ver", "board_id", "vendor_part_id", "node_guid",
                                          "phys_port_cnt", "transport")},
            "port": {k: port.get(k) for k in ("port", "state", "active", "port_lid", "sm_lid", "link_layer",
                                              "active_mtu")},
            "active_ports": out["active_ports"]}


def test_ibv_devinfo_verbose_connectx6_with_tag_matching_parses():
    out = parse("ibv_devinfo", _cx6_verbose())
    assert _facts(out) == _facts(parse("ibv_devinfo", read_corpus("ibv_devinfo", CX6)))
    assert out["complete"] is True and out["warnings"] == [] and out["format"] == "verbose"
    hca, port = out["hcas"][0], out["ports"][0]
    assert hca["max_sge"] == "30" and hca["max_qp_rd_atom"] == "16"  # the tag-matching max_sge does not shadow it
    caps = hca["caps"]
    assert caps["tm_caps"] == {"max_rndv_hdr_size": "64", "max_num_tags": "127", "max_ops": "32768",
                               "max_sge": "1", "flags": ["IBV_TM_CAP_RC"]}
    assert caps["rss_caps"]["supported_qp"] == ["SUPPORT_RAW_PACKET"]
    assert caps["rss_caps"]["max_rwq_indirection_table_size"] == "2048"
    assert caps["packet_pacing_caps"]["qp_rate_limit_max"] == "100000000kbps"
    assert caps["cq moderation caps"] == {"max_cq_count": "65535", "max_cq_period": "4095 us"}
    assert caps["uc_odp_caps"] == ["NO SUPPORT"] and "ODP_SUPPORT_IMPLICIT" in caps["general_odp_caps"]
    assert caps["raw packet caps"][0] == "C-VLAN stripping offload"
    assert caps["tso_caps"] == {"max_tso": "0"}
    assert hca["flags"]["device_cap_flags"][-1] == "Unknown flags: 0xC8400000"
    assert "RAW_SCATTER_FCS" in hca["flags"]["device_cap_flags_ex"]
    assert hca["maximum available device memory"] == "131072Bytes" and hca["num_comp_vectors"] == "63"
    assert port["rate_gbitps"] == 200 and port["phys_state"] == "LINK_UP" and len(port["gids"]) == 1


@pytest.mark.parametrize("transform", sorted(WHITESPACE))
def test_ibv_devinfo_verbose_reads_the_same_whitespace_normalised(transform):
    data = _cx6_verbose().encode()
    assert parse("ibv_devinfo", WHITESPACE[transform](data)) == parse("ibv_devinfo", data)


def test_ibv_devinfo_tm_caps_under_a_header_of_its_own():
    """A build that prints the tag-matching fields under a ``tm_caps:`` header gives the same ``tm_caps``."""
    start = CX6_DEVICE_VERBOSE.index(_TM_FLAT[0])
    headed = [(1, "tm_caps:")] + [(depth + 1 if depth == 1 else depth, text) for depth, text in _TM_FLAT]
    device = CX6_DEVICE_VERBOSE[:start] + headed + CX6_DEVICE_VERBOSE[start + len(_TM_FLAT):]
    out = parse("ibv_devinfo", _cx6_verbose(device))
    expected = parse("ibv_devinfo", _cx6_verbose())
    assert out["hcas"][0]["caps"]["tm_caps"] == expected["hcas"][0]["caps"]["tm_caps"]
    assert out["hcas"][0]["max_sge"] == "30" and out["warnings"] == []


def test_ibv_devinfo_unknown_sub_blocks_are_kept_not_fatal():
    future = [(1, "crypto_caps:"), (2, "max_dek:\t\t\t4096"), (2, "modes:"), (_FLAG, "AES_XTS"),
              (2, "wrapped_import_method:"), (3, "aes_gcm:\t\t1"), (1, "name:\t\t\tnot the device name"),
              (1, "ports:\t\t\t1"), (1, "flags:"), (_FLAG, "SOME_FUTURE_FLAG"),
              (1, "sealed key not supported")]
    out = parse("ibv_devinfo", _cx6_verbose(CX6_DEVICE_VERBOSE + future))
    hca = out["hcas"][0]
    assert _facts(out) == _facts(parse("ibv_devinfo", read_corpus("ibv_devinfo", CX6)))
    assert hca["caps"]["crypto_caps"] == {"max_dek": "4096", "modes": ["AES_XTS"],
                                          "wrapped_import_method": {"aes_gcm": "1"}}
    assert hca["name"] == "mlx5_0" and hca["other"] == {"name": "not the device name", "ports": "1"}
    assert hca["caps"]["flags"] == ["SOME_FUTURE_FLAG"]
    assert hca["unsupported"] == ["sealed key not supported"]


def test_ibv_devinfo_flattened_sub_blocks_still_parse():
    """A copy that lost all indentation still reads the device and its port (sub-blocks fall flat)."""
    text = "\n".join(line.strip() for line in _cx6_verbose().split("\n"))
    out = parse("ibv_devinfo", text)
    assert _facts(out) == _facts(parse("ibv_devinfo", read_corpus("ibv_devinfo", CX6)))
    assert out["hcas"][0]["max_sge"] == "30"


# --------------------------------------------------------------------------- unknown blocks elsewhere

def _insert_after(text: str, pattern: str, block: str) -> str:
    """``text`` with ``block`` put after the first line matching ``pattern``."""
    lines = text.split("\n")
    at = next(i for i, line in enumerate(lines) if re.search(pattern, line))
    return "\n".join([*lines[:at + 1], *block.rstrip("\n").split("\n"), *lines[at + 1:]])


UNKNOWN_BLOCKS = [
    ("lspci", LSPCI_H100, r"^\tCapabilities: \[a0\]",
     "\tCapabilities: [3a0 v1] Data Link Feature <?>\n\t\tFutureCap:\tFoo+ Bar-\n\t\t\tNested: 1\n"),
    ("ibstat", "h100-node-mt4129-cx7-fw28.39.1002-all-active.txt", r"Firmware version:",
     "\tFuture field: 1\n\tFuture block:\n\t\tnested: 2\n\t\tFUTURE_FLAG\n"),
    ("nvidia-smi-q", "h100-sxm-x8-drv565.57.01.txt", r"^    Product Name",
     "    Future Section\n        Future Field                      : 1\n"
     "        Future Nested\n            Deeper Field                  : 2\n"),
    ("mlnx-fw", "flint-q-cx7-fs4-28.42.1000.txt", r"^FW Version:",
     "Life cycle:            GA SECURED\nFuture Block:\n    nested value 1\n"),
]


@pytest.mark.parametrize(("tool", "name", "after", "block"), UNKNOWN_BLOCKS, ids=[b[0] for b in UNKNOWN_BLOCKS])
def test_unknown_indented_block_leaves_known_facts_alone(tool, name, after, block):
    text = read_corpus(tool, name)
    before = parse(tool, text)
    after_out = parse(tool, _insert_after(text, after, block))
    strip = {"warnings", "complete"}
    assert {k: v for k, v in after_out.items() if k not in strip} == {k: v for k, v in before.items()
                                                                      if k not in strip}


def test_corpus_present_for_the_surveyed_tools():
    """The whitespace survey above is only as good as the corpus it reads."""
    if not CORPUS.is_dir():
        pytest.skip(f"corpus {CORPUS} not available (set CLUSTEREVAL_CORPUS)")
    for tool in ("ibv_devinfo", "lspci", "ibstat", "ofed_info", "nvidia-smi-q", "mlnx-fw", "show_gids",
                 "ibdev2netdev"):
        assert corpus_files(tool), tool
