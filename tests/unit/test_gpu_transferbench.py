"""gpu.compute.transferbench: TransferBench v1.02 output (the layout of the corpus captures) judged per host link
and per GPU pair against the MI300X references and the node's peers; a pair over PCIe on an XGMI-meshed node
named; incomplete or corrupted output never a pass; a node without TransferBench a skip."""

from __future__ import annotations

from collections import Counter

from clustereval import checks
from clustereval.checks import Context
from tests.conftest import read_corpus

RUN = "run-tb"
MI300X = "AMD Instinct MI300X"
CONFIG = """Run configuration (TransferBench v1.02)
=====================================================
BLOCK_BYTES          =          256 : Each CU gets a multiple of 256 bytes to copy
BYTE_OFFSET          =            0 : Using byte offset of 0
FILL_PATTERN         =      (unset) : Pseudo-random: (Element i = i modulo 383 + 31)
NUM_CPU_PER_TRANSFER =            4 : Using 4 CPU thread(s) per CPU-based-copy Transfer
NUM_ITERATIONS       =           10 : Running 10 timed iteration(s) per topology
NUM_WARMUPS          =            3 : Running 3 warmup iteration(s) per topology
OUTPUT_TO_CSV        =            0 : Output to console
SHARED_MEM_BYTES     =      (unset) : Using 32769 shared mem per threadblock
USE_HIP_CALL         =            0 : Using custom kernels for GPU-executed copies
USE_INTERACTIVE      =            0 : Running in non-interactive mode
USE_MEMSET           =            0 : Performing memcopy
USE_PCIE_INDEX       =            0 : Using HIP-based GPU indexing
USE_SINGLE_STREAM    =            0 : Using single stream per Transfer

"""
BYTES = 67108864


def row(src: str, exe: int, dst: str, gbps: float, link: str, index: int = 0) -> str:
    ms = BYTES / (gbps * 1e6)
    return (f" Transfer {index:02d}: {src} -> [GPU {exe:02d}:032] -> {dst} | {gbps:9.3f} GB/s | {ms:8.3f} ms | "
            f"{link:<16s}\n")


def output(gpus: int = 8, h2d: dict | None = None, d2h: dict | None = None, p2p: dict | None = None,
           links: dict | None = None, stop_after: int | None = None) -> str:
    """A healthy node's probe output (host links ~53 GB/s, XGMI pairs ~48.5 GB/s), with figures or links changed."""
    text = CONFIG
    tests = []
    for g in range(gpus):
        tests.append(row(f"C{g // 4:02d}", g, f"G{g:02d}", (h2d or {}).get(g, 52.9 + 0.01 * g), "PCIE-LOCAL"))
        tests.append(row(f"G{g:02d}", g, f"C{g // 4:02d}", (d2h or {}).get(g, 53.7 - 0.01 * g), "LOCAL-PCIE"))
    for a in range(gpus):
        for b in range(gpus):
            if a != b:
                tests.append(row(f"G{a:02d}", a, f"G{b:02d}", (p2p or {}).get((a, b), 48.4 + 0.02 * ((a + b) % 5)),
                                 (links or {}).get((a, b), "LOCAL-XGMI-1")))
    for test, line in enumerate(tests, start=1):
        text += f"Test {test}: [{BYTES} bytes]\n" + line
        if stop_after is not None and test == stop_after:
            return text
        gbps = float(line.split("|")[1].split()[0])
        ms = BYTES / (gbps * 1e6) + 0.025
        text += (f" Aggregate Bandwidth (CPU timed)         | {BYTES / 1e6 / ms:9.3f} GB/s | {ms:8.3f} ms | "
                 "Overhead: 0.025 ms\n")
    return text


def judge(stdout: str, facts: dict | None = None, rc: int = 0, missing: bool = False) -> list[dict]:
    probe = {"name": "gpu_transferbench", "cmd": "TransferBench /tmp/x/transfers.cfg 64M", "rc": rc,
             "stdout": stdout, "stderr": "", "parser": "transferbench", "artifact": "transferbench.txt",
             "tool": "TransferBench"}
    if missing:
        probe.update(rc=127, missing=True, stdout="", stderr="TransferBench: command not found")
    ctx = Context(subject="node3", facts={"gpu_model": MI300X} if facts is None else facts,
                  probes={"gpu_transferbench": probe})
    return checks.evaluate_many("gpu.compute.transferbench", ctx, RUN)


def by_subject(results: list[dict]) -> dict[str, dict]:
    return {r["subject"]: r for r in results}


def test_a_healthy_mi300x_node_passes_every_host_link_and_pair():
    results = judge(output())
    assert len(results) == 16 + 56 and Counter(r["status"] for r in results) == {"pass": 72}
    found = by_subject(results)
    assert {r["params"]["direction"] for r in results} == {"h2d", "d2h", "p2p"}
    pair = found["node3/gpu1->node3/gpu4"]
    assert pair["params"]["direction"] == "p2p" and pair["unit"] == "GB/s"
    assert pair["expected"]["reference"] == 48.0 and "xGMI" in pair["expected"]["source"]
    assert pair["evidence"]["link"] == "LOCAL-XGMI-1" and pair["evidence"]["cus"] == 32
    host = next(r for r in results if r["subject"] == "node3/gpu0" and r["params"]["direction"] == "h2d")
    assert host["expected"]["reference"] == 52.0 and host["value"] == 52.9
    assert "host -> GPU 52.9 GB/s on GPU 0 (PCIE-LOCAL)" in host["summary"]


def test_a_host_link_a_little_slow_warns_and_one_at_gen4_speed_fails():
    results = judge(output(h2d={2: 46.5, 5: 26.1}))
    h2d = {r["subject"]: r for r in results if r["params"]["direction"] == "h2d"}
    assert h2d["node3/gpu2"]["status"] == "warn" and "below the warn level 47.84 GB/s" in h2d["node3/gpu2"]["summary"]
    assert h2d["node3/gpu5"]["status"] == "fail" and "a straggler" in h2d["node3/gpu5"]["summary"]
    assert {r["status"] for s, r in h2d.items() if s not in ("node3/gpu2", "node3/gpu5")} == {"pass"}


def test_a_pair_over_pcie_on_an_xgmi_node_is_named_and_fails():
    links = {(1, 4): "LOCAL-PCIE-3", (4, 1): "LOCAL-PCIE-3"}
    results = judge(output(p2p={(1, 4): 27.6, (4, 1): 27.6}, links=links))
    failed = [r for r in results if r["status"] != "pass"]
    assert {r["subject"] for r in failed} == {"node3/gpu1->node3/gpu4", "node3/gpu4->node3/gpu1"}
    assert all(r["status"] == "fail" for r in failed)
    summary = failed[0]["summary"]
    assert "over PCIe, not XGMI" in summary and "GPU 1 and GPU 4" in summary and "LOCAL-PCIE-3" in summary
    assert failed[0]["evidence"]["expected_link"] == "XGMI"


def test_a_pcie_link_fails_even_at_full_speed_when_the_other_pairs_are_xgmi():
    results = judge(output(links={(0, 7): "LOCAL-PCIE-2"}), facts={"gpu_model": "some AMD GPU"})
    pair = by_subject(results)["node3/gpu0->node3/gpu7"]
    assert pair["status"] == "fail" and "other pair(s) of the node run over XGMI" in pair["summary"]


def test_a_pcie_only_node_is_judged_on_its_figures_and_peers_only():
    links = {(a, b): "LOCAL-PCIE-2" for a in range(4) for b in range(4) if a != b}
    results = judge(output(gpus=4, links=links), facts={"gpu_model": "AMD Instinct MI100"})
    assert {r["status"] for r in results} == {"pass"}
    assert "judged against its peers only" in results[0]["summary"]


def test_no_transferbench_is_a_skip_and_several_transfers_per_test_are_not_judged():
    missing = judge("", missing=True)
    assert [r["status"] for r in missing] == ["skip"] and "not installed" in missing[0]["summary"]
    corpus = judge(read_corpus("transferbench", "v1.02-mi100-x4-1-to-4-gpus-fine-grain-1.txt"))
    assert [r["status"] for r in corpus] == ["skip"] and "several Transfers at once" in corpus[0]["summary"]


def test_output_that_stopped_early_never_passes_and_says_where():
    results = judge(output(stop_after=20))
    statuses = Counter(r["status"] for r in results)
    assert "pass" not in statuses and statuses["warn"] == 20 and statuses["error"] == 1
    stopped = next(r for r in results if r["status"] == "error")
    assert "stopped in test 20" in stopped["summary"] and stopped["subject"] == "node3"
    assert "incomplete or corrupted" in results[0]["summary"]


def test_a_corrupted_fixed_line_makes_every_figure_a_warn():
    garbled = output().replace("Using custom kernels for", "Using custom kerncd els for")
    results = judge(garbled)
    assert {r["status"] for r in results} == {"warn"}
    assert "kerncd els" in results[0]["summary"]


def test_garbage_is_an_error_and_a_failed_run_a_fail():
    garbage = judge("\x00\x9b garbage \x07\n")
    assert [r["status"] for r in garbage] == ["error"] and "could not parse" in garbage[0]["summary"]
    failed = judge("[ERROR] GPU index must be between 0 and 6 (instead of 7)\n", rc=1)
    assert [r["status"] for r in failed] == ["fail"] and "exited with status 1" in failed[0]["summary"]
