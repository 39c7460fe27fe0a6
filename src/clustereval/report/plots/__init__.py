"""Pictures for ``report.html``: matplotlib figures rendered at report time into inline SVG.

``figures(view)`` draws, per domain, the curves (NCCL bus bandwidth against message size, fio against clients),
the GPU time series of burn-in and telemetry sessions (temperature, power, clocks, GEMM TFLOP/s), the fault
drills' timelines and one per-GPU heatmap per check variant (hosts × GPU index against the median). The work is
bounded for a fleet: at most ``MAX_PER_DOMAIN`` figures per domain (the worst first; the rest named in a note),
at most ``data.MAX_POINTS`` points per line. A missing, torn or garbage series file leaves its figure out with a
note; a report without matplotlib gets no figures and one note saying why.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from html import escape
from pathlib import Path
from typing import Any

from clustereval import results as results_mod
from clustereval.report import clean_text, one_line, subject_label, view_timelines
from clustereval.report.plots import data, draw, heatmap, svg

MAX_PER_DOMAIN = 6
# Time series are the costly figures (a host's 8 h burn-in is 230,400 rows to read): fewer of them per domain.
MAX_PER_KIND = {"timeseries": 3}


@dataclass(frozen=True)
class Figure:
    """One picture: its title, an inline ``<svg>`` element and the files and results it was drawn from."""

    title: str
    svg: str
    source: tuple[str, ...]


@dataclass
class _Candidate:
    """A figure that could be drawn: what it shows and the statuses of the results it draws from."""

    domain: str
    key: str
    title: str
    build: Callable[[_Candidate], Any]
    source: list[str] = field(default_factory=list)
    inputs: dict[str, Any] = field(default_factory=dict)
    statuses: set[str] = field(default_factory=set)
    kind: str = "curve"

    @property
    def status(self) -> str:
        return results_mod.worst(*self.statuses)


class _Finder:
    """One pass over the results collecting every candidate figure (many results feed one figure).

    The pass is the only work proportional to the number of results (2,000,000 for a large fleet), so it does
    as little as it can per result: statuses are collected in sets and ranked once per figure.
    """

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self.found: dict[tuple[Any, ...], _Candidate] = {}
        self.timeline_statuses: dict[str, set[str]] = {}

    def result(self, result: dict[str, Any]) -> None:
        series, subject = result.get("series"), result.get("subject")
        for ref in series or ():
            if isinstance(ref, dict) and ref.get("path"):
                path, kind = str(ref["path"]), ref.get("kind")
                if kind == "curve":
                    self.curve(result, path)
                elif kind == "timeseries":
                    self.timeseries(result, path)
                elif kind == "timeline":
                    self.timeline_statuses.setdefault(path, set()).add(str(result.get("status")))
        if isinstance(subject, str) and "/gpu" in subject:
            self.gpu_cell(result)

    def curve(self, result: dict[str, Any], path: str) -> None:
        candidate = self.found.get(("curve", path))
        if candidate is None:
            spec = draw.curve_spec(path)
            if spec is None:
                return
            candidate = self.found["curve", path] = _Candidate(
                str(result.get("domain")), path, draw.curve_title(spec, path),
                lambda c: draw.draw_curves(self.run_dir, path, spec, c.title), [path])
        candidate.statuses.add(str(result.get("status")))

    def timeseries(self, result: dict[str, Any], path: str) -> None:
        parts = path.split("/")
        role = "gpu" if path.endswith("-gpu.csv") else "gemm" if path.endswith("-gemm.csv") else None
        if role is None or len(parts) < 3:
            return
        domain, host = str(result.get("domain")), parts[1]
        candidate = self.found.get(("timeseries", domain, host))
        if candidate is None:
            candidate = self.found["timeseries", domain, host] = _Candidate(
                domain, f"{host} {domain}", f"{domain} on {host}: per-GPU samples over time",
                lambda c: draw.draw_timeseries(self.run_dir, c.inputs.get("gpu"), c.inputs.get("gemm"), c.title),
                kind="timeseries")
        candidate.statuses.add(str(result.get("status")))
        if role not in candidate.inputs:
            candidate.inputs[role] = path
            candidate.source.append(path)

    def gpu_cell(self, result: dict[str, Any]) -> None:
        # Only collected here (a list append): the cells of the few heatmaps drawn are read at draw time.
        if type(result.get("value")) not in (float, int):
            return  # text, lists, flags (type(), not isinstance(): True is no measurement)
        check = result.get("check")
        candidate = self.found.get(("heatmap", check))
        if candidate is None:
            candidate = self.found["heatmap", check] = _heatmap(result)
        candidate.statuses.add(result.get("status"))
        variants, key = candidate.inputs["variants"], heatmap.variant_key(result.get("params"))
        try:
            variants.setdefault(key, []).append(result)
        except TypeError:  # a list among the params' values: unhashable, take the slow exact key
            variants.setdefault(results_mod.params_key(result.get("params")), []).append(result)


def _heatmap(result: dict[str, Any]) -> _Candidate:
    """The heatmap of ``result``'s check, before any result is in it."""
    check, unit = str(result.get("check")), str(result.get("unit") or "")
    expected = result.get("expected") if isinstance(result.get("expected"), dict) else {}
    higher = expected.get("direction") != "lower"
    return _Candidate(str(result.get("domain")), check, f"{check}: per GPU against the median",
                      lambda c: heatmap.draw_heatmap(check, unit, higher, c.inputs["variants"]),
                      [f"results.jsonl: {check}"], {"variants": {}}, kind="heatmap")


def _drills(finder: _Finder, view: dict[str, Any]) -> list[_Candidate]:
    """One timeline per drill: the first result pointing at its timeline series stands for it."""
    out = []
    for result, steps in view_timelines(view):
        path = next(str(r["path"]) for r in result["series"] if isinstance(r, dict) and r.get("kind") == "timeline")
        events = result["measured"]["events"]
        out.append(_Candidate(str(result.get("domain")), path, one_line(f"{result.get('check')} on "
                              f"{subject_label(result)}: {steps}"), lambda c, e=events: draw.draw_timeline(e, c.title),
                              [path], statuses=finder.timeline_statuses.get(path, set()), kind="timeline"))
    return out


def _render(candidate: _Candidate) -> Figure:
    with svg.style():
        fig = candidate.build(candidate)
    return Figure(candidate.title, svg.to_svg(fig, f"{candidate.domain}|{candidate.key}"), tuple(candidate.source))


def figures(view: dict[str, Any], notes: list[str] | None = None) -> dict[str, list[Figure]]:
    """The figures of a run per domain (keys sorted), worst first; ``notes`` receives one line per figure left
    out (not drawable, over the per-domain bound) or the reason there are none (matplotlib missing)."""
    notes = notes if notes is not None else []
    finder = _Finder(Path(view["run_dir"]))
    for result in view["results"]:
        finder.result(result)
    candidates = [*finder.found.values(), *_drills(finder, view)]
    if not candidates:
        return {}
    try:
        import matplotlib  # noqa: F401  (only to learn whether figures can be drawn at all)
    except ImportError as exc:
        notes.append(f"no figures: matplotlib is not installed ({exc}); pip install matplotlib")
        return {}
    per_domain: dict[str, list[_Candidate]] = {}
    for candidate in candidates:
        per_domain.setdefault(candidate.domain, []).append(candidate)
    return {domain: drawn for domain in sorted(per_domain) if (drawn := _draw(domain, per_domain[domain], notes))}


def _draw(domain: str, candidates: list[_Candidate], notes: list[str]) -> list[Figure]:
    """The domain's figures, worst first, within the bounds; one note per figure that could not be drawn and one
    naming those over the bounds."""
    drawn: list[Figure] = []
    per_kind: dict[str, int] = {}
    over: list[str] = []
    for candidate in sorted(candidates, key=lambda c: (results_mod.worst_first(c.status), c.key)):
        if len(drawn) >= MAX_PER_DOMAIN or per_kind.get(candidate.kind, 0) >= MAX_PER_KIND.get(candidate.kind,
                                                                                                MAX_PER_DOMAIN):
            over.append(candidate.key)
            continue
        try:
            drawn.append(_render(candidate))
            per_kind[candidate.kind] = per_kind.get(candidate.kind, 0) + 1
        except (data.Unusable, ValueError) as exc:
            notes.append(one_line(f"{domain}: {candidate.title}: not drawn: {exc}"))
    if over:
        notes.append(one_line(f"{domain}: {len(over)} more figure(s) not drawn (at most {MAX_PER_DOMAIN} per domain, "
                              f"{MAX_PER_KIND['timeseries']} time series; the worst first): {', '.join(over[:5])}"
                              + (f" +{len(over) - 5} more" if len(over) > 5 else "")))
    return drawn


def figure_html(figure: Figure) -> str:
    """One figure for an HTML page: the SVG and a caption naming what it was drawn from."""
    sources = ", ".join(f"<code>{escape(clean_text(s))}</code>" for s in figure.source)
    return (f'<figure class="plot">{figure.svg}<figcaption>{escape(clean_text(figure.title))}'
            f"<br>from {sources}</figcaption></figure>")


CSS = ".plot{margin:1rem 0}.plot svg{max-width:100%;height:auto}.plot figcaption{font-size:.85rem;color:#555}"


def section_html(view: dict[str, Any]) -> str:
    """A "Figures" section of every domain's figures and the notes on those left out, or '' when none."""
    notes: list[str] = []
    drawn = figures(view, notes)
    if not drawn and not notes:
        return ""
    out = ["<h2>Figures</h2>"]
    for domain, members in drawn.items():
        out.append(f"<h3>{escape(clean_text(domain))}</h3>" + "".join(figure_html(f) for f in members))
    if notes:
        out.append("<ul>" + "".join(f"<li>{escape(n)}</li>" for n in notes) + "</ul>")
    return "\n".join(out)


__all__ = ["CSS", "MAX_PER_DOMAIN", "Figure", "figure_html", "figures", "section_html"]
