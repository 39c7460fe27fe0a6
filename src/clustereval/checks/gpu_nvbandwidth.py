"""Host links and HBM per GPU with NVIDIA's nvbandwidth (probe ``gpu_nvbandwidth``, parser ``nvbandwidth``).

The host-to-device and device-to-host copy-engine tests print one row (the CPU) with a column per GPU: each
GPU's figure is judged against the host-link reference for its model (``baselines/gpu_compute.yml``,
``gpu.compute.nvbandwidth``, params ``direction``) and against the node's other GPUs (the straggler rule of
``checks/gpu_compute.py``). Where nvbandwidth is not installed every variant is skipped, saying so.
"""

from __future__ import annotations

from typing import Any

from clustereval import baselines
from clustereval.checks import Context, Skip, Verdict, check
from clustereval.checks.gpu_compute import AREA, graded_figure
from clustereval.results import component_subject

PROBE = "gpu_nvbandwidth"
DIRECTIONS = {"host_to_device_memcpy_ce": "h2d", "device_to_host_memcpy_ce": "d2h"}


def _per_gpu(test: dict[str, Any]) -> dict[int, float]:
    """``{gpu: GB/s}`` of a one-row (CPU to every GPU) matrix."""
    return {int(p["column"]): float(p["value_gbps"]) for p in test.get("pairs") or []
            if p.get("value_gbps") is not None}


@check("gpu.compute.nvbandwidth")
def nvbandwidth(ctx: Context) -> list[Verdict]:
    data = ctx.parsed(PROBE)
    gpu_model = ctx.facts.get("gpu_model")
    verdicts = []
    for name, direction in DIRECTIONS.items():
        test = (data.get("tests") or {}).get(name)
        if test is None:
            continue
        figures = _per_gpu(test)
        peers = list(figures.values())
        for gpu, value in sorted(figures.items()):
            params = {**ctx.params, "direction": direction, "test": name}
            notes, absolute = [], None
            try:
                absolute = baselines.reference(AREA, "gpu.compute.nvbandwidth", {**ctx.facts}, params,
                                               ctx.options.get("baseline_overrides"))
            except baselines.NoReference:
                notes.append(f"no host-link reference for {gpu_model}: judged against its peers only")
            evidence = {"test": name, "nvbandwidth": data.get("version"), "gpu_model": gpu_model}
            status, graded_notes, expected = graded_figure(ctx, value, "GB/s", params, absolute, peers, evidence)
            summary = "; ".join([f"nvbandwidth {direction} {value:g} GB/s on GPU {gpu}", *notes, *graded_notes])
            verdicts.append(Verdict(status, summary, value, "GB/s", expected, evidence, params=params,
                                    subject=component_subject(ctx.subject, f"gpu{gpu}")))
    if not verdicts:
        raise Skip(f"nvbandwidth ran but printed none of {', '.join(DIRECTIONS)} (tests: "
                   f"{', '.join(data.get('test_names') or []) or 'none'})")
    return verdicts
