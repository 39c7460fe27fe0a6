"""Per-GPU heatmaps: hosts × GPU index, each GPU coloured by its result relative to the median.

One heatmap per check: a check measured in several variants (dtypes, shapes) compares every variant with its
own median and colours a GPU by its worst ratio, so a straggler shows whichever variant it straggles in.
"""

from __future__ import annotations

import math
import statistics
from typing import Any, NamedTuple

from clustereval import results as results_mod
from clustereval.report.plots.data import Unusable
from clustereval.report.plots.draw import TITLE_WIDTH
from clustereval.report.plots.svg import new_figure, text

# Rows labelled by host name when the fleet is small; a larger one labels only the marked rows.
LABELLED_HOSTS = 40
# Cells marked: a result that warned or failed, or one this far from its median.
MARK_DEVIATION = 0.10
MAX_MARKS = 20
# Results read per heatmap: past this, whole variants are read, those with the worst status first.
MAX_RESULTS = 250_000
_JUDGED = frozenset(("pass", "warn", "fail"))


class Cell(NamedTuple):
    """One GPU's worst result of the check: its value over the variant's median, and what that was."""

    ratio: float
    value: float
    status: str
    variant: str


def variant_key(params: Any) -> Any:
    """A cheap grouping key for a result's params (the pass over every result calls it): items in their order.
    The same params written in another order only split a variant into two groups of the same median."""
    return tuple(params.items()) if isinstance(params, dict) and params else ""


def bounded(variants: dict[Any, list[dict[str, Any]]]) -> tuple[list[list[dict[str, Any]]], str]:
    """The variants to read (at least one; at most ``MAX_RESULTS`` results unless a single variant is larger),
    worst status first, and a note naming what was left out ('' when nothing)."""
    groups = list(variants.values())
    if sum(map(len, groups)) <= MAX_RESULTS:
        return groups, ""
    groups.sort(key=lambda m: (results_mod.worst_first(results_mod.worst({r.get("status") for r in m})),
                               results_mod.params_key(m[0].get("params"))))
    kept, total = [groups[0]], len(groups[0])
    for members in groups[1:]:
        if total + len(members) <= MAX_RESULTS:
            kept.append(members)
            total += len(members)
    return kept, f"{len(kept)} of {len(groups)} variants (worst first; at most {MAX_RESULTS:,} results)"


def cells(variants: list[list[dict[str, Any]]], higher_is_better: bool) -> dict[tuple[str, int], Cell]:
    """Every GPU's worst cell over the variants: results about ``host/gpuN`` with a finite number and a verdict."""
    out: dict[tuple[str, int], Cell] = {}
    for members in variants:
        points = []
        for result in members:
            value, status = result.get("value"), result.get("status")
            host, _, component = str(result.get("subject")).partition("/")
            index = component[3:]
            # type(), not isinstance(): a flag (True) is no measurement.
            if (type(value) in (float, int) and status in _JUDGED and math.isfinite(value)
                    and component.startswith("gpu") and index.isdigit()):
                points.append((host, int(index), float(value), status))
        median = statistics.median(p[2] for p in points) if points else 0
        if not median:
            continue
        label = results_mod.params_label(members[0].get("params")) if len(variants) > 1 else ""
        for host, gpu, value, status in points:
            cell, seen = Cell(value / median, value, status, label), out.get((host, gpu))
            if seen is None or (cell.ratio < seen.ratio if higher_is_better else cell.ratio > seen.ratio):
                out[host, gpu] = cell
    return out


def draw_heatmap(check: str, unit: str, higher_is_better: bool, variants: dict[Any, list[dict[str, Any]]]) -> Any:
    """Hosts × GPU index coloured by value over the median; stragglers outlined, labelled with their share."""
    import numpy as np
    from matplotlib.patches import Rectangle

    kept, left_out = bounded(variants)
    grid_cells = cells(kept, higher_is_better)
    if len(grid_cells) < 2:
        raise Unusable(f"{check}: fewer than two GPUs with a number to compare (or a median of 0)")
    hosts = sorted({h for h, _ in grid_cells})
    row_of = {h: i for i, h in enumerate(hosts)}
    grid = np.full((len(hosts), 1 + max(g for _, g in grid_cells)), np.nan)
    for (host, gpu), cell in grid_cells.items():
        grid[row_of[host], gpu] = cell.ratio

    def badness(key: tuple[str, int]) -> float:
        ratio = grid_cells[key].ratio
        return 1 - ratio if higher_is_better else ratio - 1

    marked = sorted((k for k, c in grid_cells.items() if badness(k) >= MARK_DEVIATION or c.status != "pass"),
                    key=lambda k: (-badness(k), k))[:MAX_MARKS]
    worst = max(grid_cells, key=lambda k: (badness(k), k))
    span = min(0.5, max(0.05, float(np.nanmax(np.abs(grid - 1)))))
    fig = new_figure(7.0, min(9.0, 1.8 + 0.22 * len(hosts)))
    ax = fig.add_subplot()
    image = ax.imshow(grid, aspect="auto", interpolation="nearest", rasterized=True, vmin=1 - span, vmax=1 + span,
                      cmap="RdYlGn" if higher_is_better else "RdYlGn_r")
    fig.colorbar(image, ax=ax, label="relative to the median")
    for host, gpu in marked:
        row = row_of[host]
        ax.add_patch(Rectangle((gpu - 0.5, row - 0.5), 1, 1, fill=False, edgecolor="black", linewidth=1.5))
        if len(hosts) <= 2 * LABELLED_HOSTS:
            ax.text(gpu, row, f"{grid[row, gpu]:.0%}", ha="center", va="center", fontsize=7)
    labelled = hosts if len(hosts) <= LABELLED_HOSTS else sorted({h for h, _ in marked}, key=row_of.get)
    ax.set_yticks([row_of[h] for h in labelled], [text(h) for h in labelled], fontsize=7)
    ax.set_xticks(range(grid.shape[1]), [f"gpu{g}" for g in range(grid.shape[1])], fontsize=7)
    cell = grid_cells[worst]
    ax.set_title(text(f"{check}: {len(grid_cells)} GPUs on {len(hosts)} hosts; "
                      f"{'slowest' if higher_is_better else 'highest'} {worst[0]}/gpu{worst[1]} at {cell.ratio:.0%} "
                      f"of the median ({cell.value:.4g} {unit}{', ' + cell.variant if cell.variant else ''})"
                      + (f"; {left_out}" if left_out else ""), TITLE_WIDTH))
    return fig
