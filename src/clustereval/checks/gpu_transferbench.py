"""Host links and GPU<->GPU links of AMD Instinct GPUs with ROCm's TransferBench (probe ``gpu_transferbench``,
parser ``transferbench``).

The probe runs one Transfer per Test: host -> GPU and GPU -> host for every device, GPU i -> GPU j for every pair
(executed by i). Every Transfer is one result: subject ``node/gpuN`` for a host link (params ``direction`` h2d or
d2h) or a device-local copy (``local``), ``node/gpuI->node/gpuJ`` for a pair (``p2p``), judged against the
reference for the GPU model (``baselines/gpu_compute.yml``, ``gpu.compute.transferbench``) and against the node's
other transfers of the same direction (the straggler rule of ``checks/gpu_compute.py``). A pair whose link
description says PCIE on a node whose GPUs are XGMI peers (an XGMI-meshed model, or the node's other pairs over
XGMI) fails, named: its XGMI link is down or untrained and its traffic goes through the host. Tests running
several Transfers at once share links and are not judged against a one-link reference. Output the parser calls
incomplete (a Test without its aggregate line: the run stopped; a corrupted fixed line) never passes: figures are
warns at best, and a run that stopped early is also an ``error`` saying where. Where TransferBench is not
installed (an NVIDIA node, ROCm without it) the check is skipped, saying so.
"""

from __future__ import annotations

import fnmatch
import re
from typing import Any

from clustereval import baselines
from clustereval.checks import Context, HarnessError, Skip, Verdict, check
from clustereval.checks.gpu_compute import AREA, graded_figure
from clustereval.results import PAIR_SEPARATOR, component_subject

CHECK = "gpu.compute.transferbench"
PROBE = "gpu_transferbench"
_MEM = re.compile(r"^([CBGF])(\d+)$")
# AMD GPU models whose GPUs of a node form a fully connected XGMI mesh (8 OAMs on one baseboard).
XGMI_MESH_MODELS = ("*MI300X*", "*MI325X*", "*MI355X*", "*MI350X*", "*MI250*")
WHAT = {"h2d": "host -> GPU", "d2h": "GPU -> host", "p2p": "GPU -> GPU", "local": "device-local copy"}


def _mem(token: str) -> tuple[str, int] | None:
    match = _MEM.match(token or "")
    if not match:
        return None
    return ("cpu" if match.group(1) in "CB" else "gpu"), int(match.group(2))


def classify(transfer: dict[str, Any]) -> tuple[str, int, int | None] | None:
    """(direction, GPU, peer GPU) of one Transfer: h2d, d2h, p2p (GPU -> peer) or local; None for CPU-only copies."""
    src, dst = _mem(transfer.get("src")), _mem(transfer.get("dst"))
    if src is None or dst is None:
        return None
    if src[0] == "cpu" and dst[0] == "gpu":
        return "h2d", dst[1], None
    if src[0] == "gpu" and dst[0] == "cpu":
        return "d2h", src[1], None
    if src[0] == "gpu" and dst[0] == "gpu":
        return ("local", src[1], None) if src[1] == dst[1] else ("p2p", src[1], dst[1])
    return None


def measured(data: dict[str, Any]) -> tuple[dict[tuple[str, int, int | None], dict[str, Any]], int]:
    """The Transfer of every single-Transfer Test by (direction, GPU, peer), the largest size measured of each, and
    how many Tests ran several Transfers at once (not judged)."""
    found: dict[tuple[str, int, int | None], dict[str, Any]] = {}
    shared = 0
    for test in data.get("tests") or []:
        transfers = test.get("transfers") or []
        if len(transfers) != 1:
            shared += bool(transfers)
            continue
        key = classify(transfers[0])
        if key is None or transfers[0].get("bw_gbps") is None:
            continue
        record = {**transfers[0], "test": test.get("test"), "bytes": test.get("bytes")}
        if key not in found or (record["bytes"] or 0) >= (found[key]["bytes"] or 0):
            found[key] = record
    return found, shared


def _over_pcie(record: dict[str, Any]) -> bool:
    return "PCIE" in str(record.get("link") or "").upper()


def _subject(host: str, gpu: int, peer: int | None) -> str:
    if peer is None:
        return component_subject(host, f"gpu{gpu}")
    return f"{component_subject(host, f'gpu{gpu}')}{PAIR_SEPARATOR}{component_subject(host, f'gpu{peer}')}"


@check(CHECK)
def transferbench(ctx: Context) -> list[Verdict]:
    data = ctx.parsed(PROBE)
    gpu_model = ctx.facts.get("gpu_model")
    found, shared = measured(data)
    if not found:
        if data.get("tests") and not data.get("complete", True):
            raise HarnessError(f"TransferBench stopped before any Transfer was measured: "
                               f"{'; '.join(data.get('warnings') or [])[:300]}")
        raise Skip(f"TransferBench ran no single-Transfer host or GPU copy to judge ({len(data.get('tests') or [])} "
                   f"test(s), {shared} with several Transfers at once)")
    complete = bool(data.get("complete", True))
    problems = [w for w in data.get("warnings") or [] if not w.startswith("unrecognised line")]
    pairs = [r for (direction, _, _), r in found.items() if direction == "p2p"]
    xgmi_mesh = any(fnmatch.fnmatch(str(gpu_model or "").lower(), pattern.lower()) for pattern in XGMI_MESH_MODELS)
    xgmi_seen = sum(1 for r in pairs if "XGMI" in str(r.get("link") or "").upper())
    expect_xgmi = xgmi_mesh or xgmi_seen > 0
    peers: dict[str, list[float]] = {}
    for (direction, _, _), record in found.items():
        peers.setdefault(direction, []).append(float(record["bw_gbps"]))
    verdicts = []
    for (direction, gpu, peer), record in sorted(found.items(), key=lambda item: (item[0][0], item[0][1],
                                                                                 -1 if item[0][2] is None
                                                                                 else item[0][2])):
        value = float(record["bw_gbps"])
        params = {**ctx.params, "direction": direction}
        what = f"GPU {gpu} -> GPU {peer}" if peer is not None else f"GPU {gpu}"
        evidence = {"transferbench": data.get("version"), "gpu_model": gpu_model, "test": record.get("test"),
                    "bytes": record.get("bytes"), "link": record.get("link"), "executor": record.get("executor"),
                    "cus": record.get("executor_units"), "time_ms": record.get("time_ms"),
                    "src": record.get("src"), "dst": record.get("dst")}
        subject = _subject(ctx.subject, gpu, peer)
        head = f"TransferBench {WHAT[direction]} {value:g} GB/s on {what} ({record.get('link')})"
        if value <= 0:
            verdicts.append(Verdict("fail", f"{head}: no throughput", value, "GB/s", None, evidence,
                                    params=params, subject=subject))
            continue
        notes: list[str] = []
        absolute = None
        try:
            absolute = baselines.reference(AREA, CHECK, {**ctx.facts}, params, ctx.options.get("baseline_overrides"))
        except baselines.NoReference:
            notes.append(f"no {WHAT[direction]} reference for {gpu_model}: judged against its peers only")
        status, graded, expected = graded_figure(ctx, value, "GB/s", params, absolute, peers[direction], evidence)
        notes += graded
        if direction == "p2p" and _over_pcie(record) and expect_xgmi:
            status = "fail"
            reason = (f"{gpu_model} GPUs are XGMI peers" if xgmi_mesh else
                      f"{xgmi_seen} other pair(s) of the node run over XGMI")
            notes.insert(0, f"over PCIe, not XGMI: the XGMI link between GPU {gpu} and GPU {peer} is down or "
                         f"untrained and the traffic goes through the host ({reason})")
            evidence["expected_link"] = "XGMI"
        if not complete:
            if status == "pass":
                status = "warn"
            notes.append("TransferBench's output is incomplete or corrupted, so this figure is not a pass: "
                         + ("; ".join(problems) or "see the artifact")[:240])
            evidence["output_complete"] = False
        summary = "; ".join([head, *notes])
        verdicts.append(Verdict(status, summary, round(value, 3), "GB/s", expected, evidence, params=params,
                                subject=subject))
    stopped = [t["test"] for t in data.get("tests") or [] if t.get("aggregate_gbps") is None]
    if stopped:
        verdicts.append(Verdict(
            "error", f"TransferBench stopped in test {stopped[0]} (no aggregate line) after "
            f"{len(data.get('tests') or [])} test(s): the Transfers after it were not measured", None, None, None,
            {"stopped_in_test": stopped[0], "tests": len(data.get("tests") or []), "warnings": problems[:5]},
            params={**ctx.params, "direction": "all"}))
    return verdicts
