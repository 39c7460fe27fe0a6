"""Matplotlib figures to inline SVG for one HTML page: text kept as text, deterministic, ids made unique.

Matplotlib is imported here only, when the first figure is drawn: a report without figures never pays for it.
Each figure gets its own ``matplotlib.figure.Figure`` and SVG canvas (never pyplot's global state).
"""

from __future__ import annotations

import hashlib
import io
import re
import textwrap
from typing import Any

# Matplotlib's SVG writer names elements figure_1, axes_1, patch_2 ... in every file: two figures in one page
# would share ids (and clip paths point at them), so every id and reference gets a per-figure prefix.
_ID = re.compile(r'\bid="([^"]+)"')
_REF = re.compile(r'(url\(#|href="#)([^)"]+)')
# Everything a standalone SVG file needs that an inline one does not: the XML prolog, the DTD, the RDF
# metadata, the namespace declarations (all http: URLs, none of them fetched, but none needed inline).
_PROLOG = re.compile(r"^.*?(?=<svg\b)", re.DOTALL)
_METADATA = re.compile(r"<metadata>.*?</metadata>\s*", re.DOTALL)
_XMLNS = re.compile(r'\s+xmlns(?::\w+)?="[^"]*"')

RC = {"svg.fonttype": "none", "svg.hashsalt": "clustereval", "font.size": 9, "axes.grid": True,
      "grid.alpha": 0.3, "axes.titlesize": 10, "legend.fontsize": 7, "text.usetex": False}


def style() -> Any:
    """The rc context every figure is built and written in (font sizes, SVG text and hash salt)."""
    import matplotlib

    return matplotlib.rc_context(RC)


def new_figure(width_in: float, height_in: float) -> Any:
    """A fresh matplotlib Figure with an SVG canvas attached, sized in inches."""
    from matplotlib.backends.backend_svg import FigureCanvasSVG
    from matplotlib.figure import Figure as MplFigure

    fig = MplFigure(figsize=(width_in, height_in), layout="constrained")
    FigureCanvasSVG(fig)
    return fig


def text(value: Any, width: int = 0) -> str:
    """A label as literal text ('$' would start mathtext, and a stray one raises), wrapped at ``width``
    characters when given (a title wider than its figure would be cut off)."""
    label = str(value).replace("$", r"\$")
    return textwrap.fill(label, width, break_on_hyphens=False) if width else label


def to_svg(fig: Any, key: str) -> str:
    """The figure as an inline ``<svg>`` element whose ids are prefixed by a hash of ``key``."""
    buffer = io.StringIO()
    with style():
        fig.savefig(buffer, format="svg", metadata={"Date": None}, dpi=72)
    prefix = "ce" + hashlib.sha1(key.encode("utf-8")).hexdigest()[:10] + "-"
    svg = _METADATA.sub("", _PROLOG.sub("", buffer.getvalue(), count=1))
    svg = _XMLNS.sub("", svg).replace("xlink:href=", "href=")
    svg = _ID.sub(lambda m: f'id="{prefix}{m.group(1)}"', svg)
    svg = _REF.sub(lambda m: f"{m.group(1)}{prefix}{m.group(2)}", svg)
    # The writer's one style rule starts with '*': inline, it would reach the whole page; scope it to this figure.
    svg = svg.replace("<style type=\"text/css\">*{", f'<style type="text/css">#{prefix}svg *{{', 1)
    return svg.replace("<svg ", f'<svg id="{prefix}svg" ', 1).strip()
