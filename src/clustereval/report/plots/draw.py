"""The figures themselves: curves, GPU time series, drill timelines and per-GPU heatmaps.

Each ``draw_*`` function returns a matplotlib Figure (built inside ``svg.style()``) or raises ``Unusable``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clustereval.report.plots.data import Unusable, downsample, number, numbers, read_columns, timestamps
from clustereval.report.plots.svg import new_figure, text

# Lines per curve figure: past a dozen nobody can tell them apart; the lowest are kept (the interesting ones).
MAX_LINES = 12
# Characters per title line on a 7-inch figure at 10 pt.
TITLE_WIDTH = 95


@dataclass(frozen=True)
class CurveSpec:
    """How one family of curve files is drawn: which column tells lines apart, x and the panels' y columns."""

    prefix: str
    group: str
    x: str
    panels: tuple[tuple[str, str], ...]
    title: str
    log_x: bool = False


CURVES = (
    CurveSpec("nccl-", "probe", "size_bytes", (("busbw_gbps", "bus bandwidth (GB/s)"),),
              "NCCL {name}: bus bandwidth against message size, per run", log_x=True),
    CurveSpec("storage-tier-", "job", "clients", (("bw_mbps", "throughput (MB/s)"),
                                                   ("clat_p99_us", "p99 completion latency (µs)")),
              "storage tier {name} on {host}: fio against clients"),
    CurveSpec("storage-shared-", "job", "total_clients", (("aggregate_mbps", "aggregate throughput (MB/s)"),),
              "shared tier {name}: aggregate fio throughput against clients"),
)

GPU_PANELS = (("temperature.gpu", "temperature (°C)"), ("power.draw", "power (W)"),
              ("clocks.current.sm", "SM clock (MHz)"))
FLOPS_PANEL = ("tflops", "GEMM (TFLOP/s)")


def curve_spec(path: str) -> CurveSpec | None:
    """The spec drawing a curve file, by its name (``series/_cluster/nccl-all_reduce.csv``), or None."""
    name = Path(path).name
    return next((spec for spec in CURVES if name.startswith(spec.prefix) and name.endswith(".csv")), None)


def curve_title(spec: CurveSpec, path: str) -> str:
    """The figure title of a curve file: its collective or tier, and the host for per-host files."""
    parts = Path(path).parts
    host = parts[1] if len(parts) > 2 else "?"
    return spec.title.format(name=Path(path).stem[len(spec.prefix):], host=host)


def _bytes(value: float, _pos: Any = None) -> str:
    for unit, size in (("G", 2**30), ("M", 2**20), ("K", 2**10)):
        if value >= size:
            return f"{value / size:g}{unit}"
    return f"{value:g}"


def draw_curves(run_dir: Path, path: str, spec: CurveSpec, title: str) -> Any:
    """One panel per y column, one line per group (a run, a fio job), x ascending."""
    lines: dict[str, list[tuple[float, list[float | None]]]] = {}
    columns = read_columns(run_dir, path, (spec.group, spec.x), tuple(c for c, _ in spec.panels))
    for row in (dict(zip(columns, cells, strict=True)) for cells in zip(*columns.values(), strict=True)):
        x = number(row[spec.x])
        if x is not None:
            lines.setdefault(row[spec.group], []).append((x, [number(row.get(c)) for c, _ in spec.panels]))
    if not lines:
        raise Unusable(f"{path}: no row with a numeric {spec.x}")
    peak = {name: max((p[1][0] for p in pts if p[1][0] is not None), default=-math.inf)
            for name, pts in lines.items()}
    kept = sorted(sorted(lines, key=lambda n: (peak[n], n))[:MAX_LINES])
    if len(kept) < len(lines):
        title += f" ({len(kept)} of {len(lines)} lines: the lowest)"
    fig = new_figure(7.0, 2.6 if len(spec.panels) == 1 else 2.8)
    axes = fig.subplots(1, len(spec.panels), squeeze=False)[0]
    for panel, (ax, (_, label)) in enumerate(zip(axes, spec.panels, strict=True)):
        for name in kept:
            points = sorted((x, ys[panel]) for x, ys in lines[name] if ys[panel] is not None)
            if points:
                ax.plot([p[0] for p in points], [p[1] for p in points], marker=".", label=text(name))
        if spec.log_x:
            from matplotlib.ticker import FuncFormatter

            ax.set_xscale("log", base=2)
            ax.xaxis.set_major_formatter(FuncFormatter(_bytes))
        ax.set_xlabel(text(spec.x))
        ax.set_ylabel(text(label))
    axes[0].legend(loc="best", ncols=2 if len(kept) > 6 else 1)
    fig.suptitle(text(title, TITLE_WIDTH), fontsize=10)
    return fig


def _time_unit(span: float) -> tuple[str, float]:
    return ("h", 3600.0) if span > 3 * 3600 else ("min", 60.0) if span > 600 else ("s", 1.0)


def _per_device(columns: dict[str, tuple[str, ...]], times: Any, device: str,
                column: str) -> dict[str, tuple[Any, Any]]:
    """(times, values) per device of one column, samples without a time or a number left out."""
    import numpy as np

    if column not in columns:
        return {}
    values, devices = numbers(columns[column]), np.array(columns[device])
    usable = np.isfinite(times) & np.isfinite(values)
    return {str(d): (times[usable & (devices == d)], values[usable & (devices == d)])
            for d in np.unique(devices[usable])}


def draw_timeseries(run_dir: Path, gpu_path: str | None, gemm_path: str | None, title: str) -> Any:
    """Stacked panels sharing time: temperature, power, SM clock per GPU, and GEMM TFLOP/s per device."""
    panels: list[tuple[str, dict[str, tuple[Any, Any]]]] = []
    if gpu_path:
        columns = read_columns(run_dir, gpu_path, ("timestamp", "index"), tuple(c for c, _ in GPU_PANELS))
        times = timestamps(columns["timestamp"])
        panels += [(label, series) for column, label in GPU_PANELS
                   if (series := _per_device(columns, times, "index", column))]
    if gemm_path:
        columns = read_columns(run_dir, gemm_path, ("timestamp", "device", FLOPS_PANEL[0]))
        if series := _per_device(columns, timestamps(columns["timestamp"]), "device", FLOPS_PANEL[0]):
            panels.append((FLOPS_PANEL[1], series))
    if not panels:
        raise Unusable(f"{gpu_path or gemm_path}: no sample with a timestamp and a value to draw")
    start = min(float(xs.min()) for _, series in panels for xs, _ in series.values())
    end = max(float(xs.max()) for _, series in panels for xs, _ in series.values())
    unit, scale = _time_unit(end - start)
    fig = new_figure(7.0, 0.6 + 1.5 * len(panels))
    axes = fig.subplots(len(panels), 1, sharex=True, squeeze=False)[:, 0]
    for ax, (label, series) in zip(axes, panels, strict=True):
        for device in sorted(series, key=lambda d: (len(d), d)):
            xs, ys = downsample(*series[device])
            ax.plot((xs - start) / scale, ys, linewidth=0.8, label=text(f"gpu{device}"))
        ax.set_ylabel(text(label))
    axes[0].legend(loc="upper right", ncols=min(8, len(panels[0][1])), fontsize=6)
    axes[-1].set_xlabel(f"time since the first sample ({unit})")
    fig.suptitle(text(title, TITLE_WIDTH), fontsize=10)
    return fig


def draw_timeline(events: list[dict[str, Any]], title: str) -> Any:
    """A drill's milestones on one time axis from the fault on, each with its ± uncertainty."""
    points = []
    for event in events:
        if not isinstance(event, dict):
            continue
        at = number(event.get("after_s"))
        if at is None:
            at = number(str(event.get("at") or "").strip("+ s"))
        if at is not None:
            points.append((at, number(event.get("uncertainty_s")) or 0.0, str(event.get("event") or "?")))
    if not points:
        raise Unusable("the drill's events carry no time from the fault on")
    points.sort()
    fig = new_figure(7.0, 1.9)
    ax = fig.add_subplot()
    ax.errorbar([p[0] for p in points], [0] * len(points), xerr=[p[1] for p in points], fmt="o", capsize=4)
    ax.plot([points[0][0], points[-1][0]], [0, 0], color="#888", linewidth=1, zorder=0)
    for number_, (at, _, name) in enumerate(points):
        ax.annotate(text(f"{name} +{at:g} s"), (at, 0), xytext=(0, 12 if number_ % 2 == 0 else -18),
                    textcoords="offset points", ha="center", fontsize=8)
    ax.set_yticks([])
    ax.set_ylim(-1, 1)
    span = points[-1][0] - points[0][0] or 1.0
    ax.set_xlim(points[0][0] - 0.08 * span, points[-1][0] + 0.08 * span)
    ax.set_xlabel("seconds after the fault was injected")
    ax.set_title(text(title, TITLE_WIDTH))
    return fig
