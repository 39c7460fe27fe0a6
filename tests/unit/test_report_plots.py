"""Figures for report.html (``clustereval.report.plots``) drawn from synthetic run directories.

The run directories hold results written with ``clustereval.results.append`` and series CSVs under ``series/``
shaped like the checks write them (nccl curves, fio tier matrices, burn-in GPU and GEMM samples, a drill's
timeline, per-GPU GEMM results).
"""

from __future__ import annotations

import json
import re
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from clustereval import results as results_mod
from clustereval import series as series_mod
from clustereval.report import build_view, plots
from clustereval.report.plots import data

pytest.importorskip("matplotlib")

RUN_ID = "run-plots"
HOSTS = [f"node{i}" for i in range(1, 5)]
STRAGGLER = ("node3", 5)


def result(check: str, subject: str, status: str = "pass", **extra: Any) -> dict[str, Any]:
    domain = {"network": "network", "storage": "storage", "burnin": "burnin", "fault": "fault_injection",
              "gpu": "gpu_compute"}[check.split(".")[0]]
    phase = "reliability" if domain in ("burnin", "fault_injection") else "performance"
    return {"run_id": RUN_ID, "check": check, "phase": phase, "domain": domain, "subject": subject,
            "status": status, "severity": "major", "summary": f"{check} on {subject}", **extra}


def nccl(run_dir: Path) -> list[dict[str, Any]]:
    path = "series/_cluster/nccl-all_reduce.csv"
    rows = [{"probe": f"nccl@all_reduce.{n}x8", "subject": "_cluster", "size_bytes": 2**k,
             "busbw_gbps": round(min(2**k / 2**20, n * 40.0), 3), "time_us": 10 + k}
            for n in (2, 4) for k in range(10, 31, 2)]
    series_mod.write(run_dir, path, rows)
    return [result("network.nccl.busbw", "_cluster", params={"collective": "all_reduce", "nodes": n},
                   series=[{"path": path, "kind": "curve", "x": "size_bytes",
                            "filter": {"probe": f"nccl@all_reduce.{n}x8"}}],
                   value=n * 40.0, unit="GB/s") for n in (2, 4)]


def storage(run_dir: Path, host: str, garbage: bytes | None = None) -> dict[str, Any]:
    path = f"series/{host}/storage-tier-home.csv"
    if garbage is None:
        rows = [{"tier": "home", "job": job, "rw": "read", "clients": c, "bw_mbps": 900.0 * c ** 0.5,
                 "clat_p99_us": 100.0 * c}
                for job in ("seq_read_1m_direct", "seq_write_1m_direct") for c in (1, 2, 4, 8)]
        series_mod.write(run_dir, path, rows)
    else:
        (run_dir / path).parent.mkdir(parents=True, exist_ok=True)
        (run_dir / path).write_bytes(garbage)
    return result("storage.tier.seq_read", host, params={"tier": "home"}, value=900.0, unit="MB/s",
                  series=[{"path": path, "kind": "curve", "x": "clients"}])


def burnin(run_dir: Path, host: str, samples: int, gpus: int = 2) -> list[dict[str, Any]]:
    gpu_path, gemm_path = f"series/{host}/burnin-gpu.csv", f"series/{host}/burnin-gemm.csv"
    start = 1_800_000_000
    gpu_rows = [{"timestamp": time.strftime("%Y/%m/%d %H:%M:%S", time.gmtime(start + t)) + ".000", "index": g,
                 "temperature.gpu": 60 + g + (t * 7919 % 101) / 10, "power.draw": 650.0, "clocks.current.sm": 1980}
                for t in range(samples) for g in range(gpus)]
    gemm_rows = [{"kind": "window", "timestamp": f"2027-01-15T08:{t // 60:02d}:{t % 60:02d}.000+00:00", "device": g,
                  "tflops": 700.0 - g} for t in range(0, 600, 10) for g in range(gpus)]
    series_mod.write(run_dir, gpu_path, gpu_rows)
    series_mod.write(run_dir, gemm_path, gemm_rows)
    return [result("burnin.gpu.temperature", host, "warn", series=[{"path": gpu_path, "kind": "timeseries",
                                                                     "x": "timestamp", "stream": "gpu"}]),
            result("burnin.gemm.sustained", host, series=[{"path": gemm_path, "kind": "timeseries",
                                                            "x": "timestamp", "stream": "gemm"}])]


def drill(run_dir: Path) -> dict[str, Any]:
    path = "series/node2/fault-inject-xid-xid79.csv"
    events = [("fault", 0.0, 0.0), ("detected", 3.1, 0.3), ("drained", 9.5, 0.5), ("back", 64.0, 1.0)]
    series_mod.write(run_dir, path, [{"event": e, "after_s": a, "uncertainty_s": u, "host": "node2"}
                                     for e, a, u in events])
    return result("fault.inject.detection", "node2", value=3.1, unit="s",
                  series=[{"path": path, "kind": "timeline", "x": "after_s"}],
                  measured={"started": "2027-01-15T08:00:00Z", "ended": "2027-01-15T08:01:10Z",
                            "events": [{"event": e, "at": f"+{a:g} s", "after_s": a, "uncertainty_s": u}
                                       for e, a, u in events]})


def gemm_cells(hosts: list[str], straggler: tuple[str, int] = STRAGGLER) -> list[dict[str, Any]]:
    out = []
    for host in hosts:
        for gpu in range(8):
            slow = (host, gpu) == straggler
            out.append(result("gpu.compute.gemm", f"{host}/gpu{gpu}", "fail" if slow else "pass",
                              value=490.0 if slow else 700.0 + (gpu % 3), unit="TFLOP/s",
                              params={"dtype": "bf16"}, expected={"direction": "higher", "source": "test"}))
    return out


def write_run(tmp_path: Path, results: list[dict[str, Any]]) -> Path:
    run_dir = tmp_path / RUN_ID
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "run.json").write_text(json.dumps({"run_id": RUN_ID, "started": "2027-01-15T08:00:00Z",
                                                  "ended": "2027-01-15T09:00:00Z", "phases": ["performance"]}))
    results_mod.append(run_dir, results)
    return run_dir


def full_run(tmp_path: Path, samples: int = 50) -> Path:
    run_dir = tmp_path / RUN_ID
    run_dir.mkdir(parents=True)
    items = [*nccl(run_dir), storage(run_dir, "node1"), *burnin(run_dir, "node1", samples), drill(run_dir),
             *gemm_cells(HOSTS)]
    return write_run(tmp_path, items)


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    return full_run(tmp_path)


def test_figures_per_domain(run_dir: Path) -> None:
    notes: list[str] = []
    drawn = plots.figures(build_view(run_dir), notes)
    assert sorted(drawn) == ["burnin", "fault_injection", "gpu_compute", "network", "storage"]
    assert [len(drawn[d]) for d in sorted(drawn)] == [1, 1, 1, 1, 1]
    assert drawn["network"][0].source == ("series/_cluster/nccl-all_reduce.csv",)
    assert "all_reduce" in drawn["network"][0].title
    assert set(drawn["burnin"][0].source) == {"series/node1/burnin-gpu.csv", "series/node1/burnin-gemm.csv"}
    assert "detected 3.1 s" in drawn["fault_injection"][0].title.replace("+", "")
    assert notes == []
    # Both runs of the collective are lines of the one figure, and all the burn-in panels are there.
    assert "nccl@all_reduce.2x8" in drawn["network"][0].svg and "nccl@all_reduce.4x8" in drawn["network"][0].svg
    for label in ("temperature", "power", "SM clock", "TFLOP/s"):
        assert label in drawn["burnin"][0].svg


def test_svg_is_inline_safe_and_ids_unique(run_dir: Path) -> None:
    everything = [f for members in plots.figures(build_view(run_dir)).values() for f in members]
    ids: list[str] = []
    for figure in everything:
        root = ET.fromstring(figure.svg)
        assert root.tag == "svg"
        assert not figure.svg.startswith("<?xml") and "<!DOCTYPE" not in figure.svg
        assert not any(el.tag == "script" for el in root.iter())
        assert not re.search(r"https?:", figure.svg)
        assert not any(attr.startswith("on") for el in root.iter() for attr in el.attrib)
        ids += [el.attrib["id"] for el in root.iter() if "id" in el.attrib]
        # Every reference inside a figure points at an id of the same figure.
        own = {el.attrib["id"] for el in root.iter() if "id" in el.attrib}
        refs = set(re.findall(r'(?:url\(#|href="#)([^)"]+)', figure.svg))
        assert refs <= own
    assert len(ids) == len(set(ids))
    assert len(everything) == 5


def test_output_is_deterministic(tmp_path: Path) -> None:
    first = plots.figures(build_view(full_run(tmp_path / "a")))
    second = plots.figures(build_view(full_run(tmp_path / "b")))
    assert first == second


def test_heatmap_marks_the_straggler(run_dir: Path) -> None:
    figure = plots.figures(build_view(run_dir))["gpu_compute"][0]
    assert "node3/gpu5 at 70%" in figure.title or "node3/gpu5 at 70%" in figure.svg
    assert figure.source == ("results.jsonl: gpu.compute.gemm",)
    root = ET.fromstring(figure.svg)
    texts = ["".join(el.itertext()) for el in root.iter("text")]
    assert "70%" in texts  # the straggler's cell is labelled with its share of the median
    assert "node3" in texts  # and its host labels a row
    # The cells are one raster image (the colour bar another), not a shape per GPU.
    assert sum(1 for el in root.iter("image")) == 2 and sum(1 for el in root.iter("path")) < 200


def test_large_fleet_heatmap_stays_small_and_labels_only_the_straggler(tmp_path: Path) -> None:
    hosts = [f"gpu-host-{i:05d}" for i in range(2000)]
    run_dir = write_run(tmp_path, gemm_cells(hosts, straggler=("gpu-host-01234", 3)))
    figure = plots.figures(build_view(run_dir))["gpu_compute"][0]
    texts = ["".join(el.itertext()) for el in ET.fromstring(figure.svg).iter("text")]
    assert "gpu-host-01234" in texts and "gpu-host-00000" not in texts
    assert len(figure.svg) < 200_000


def test_long_timeseries_is_downsampled(tmp_path: Path) -> None:
    # 8 h at 1 s: 28,800 samples per GPU; drawn, no line has more than MAX_POINTS points and the file stays small.
    run_dir = full_run(tmp_path, samples=28_800)
    figure = plots.figures(build_view(run_dir))["burnin"][0]
    lines = [el for el in ET.fromstring(figure.svg).iter("path")]
    longest = max(len(re.findall(r"[ML] ", el.attrib.get("d", ""))) for el in lines)
    assert 100 < longest <= data.MAX_POINTS
    assert len(figure.svg) < 250_000


def test_downsample_keeps_the_shape_within_the_bound() -> None:
    xs = [float(i) for i in range(28_800)]
    out_x, out_y = data.downsample(xs, [x * 2 for x in xs])
    assert len(out_x) <= data.MAX_POINTS and out_x[0] < 10 and out_x[-1] > 28_790
    assert all(abs(y - 2 * x) < 1e-6 for x, y in zip(out_x, out_y, strict=True))
    assert [list(a) for a in data.downsample([1.0], [2.0])] == [[1.0], [2.0]]


@pytest.mark.parametrize("garbage", [b"", b"\x00\xff\xfe garbage\n\x00", b"tier,job\nhome,seq\n",
                                     b"tier,job,rw,clients,bw_mbps,clat_p99_us\nhome,seq,read,notanumber,1,2\nho"])
def test_torn_or_garbage_csv_is_a_note_not_an_exception(tmp_path: Path, garbage: bytes) -> None:
    run_dir = tmp_path / RUN_ID
    run_dir.mkdir(parents=True)
    run_dir = write_run(tmp_path, [storage(run_dir, "node1"), storage(run_dir, "node2", garbage=garbage)])
    notes: list[str] = []
    drawn = plots.figures(build_view(run_dir), notes)
    assert [f.source for f in drawn["storage"]] == [("series/node1/storage-tier-home.csv",)]
    assert len(notes) == 1 and "series/node2/storage-tier-home.csv" in notes[0] and "not drawn" in notes[0]


def test_missing_series_and_paths_outside_the_run_are_notes(tmp_path: Path) -> None:
    missing = result("storage.tier.seq_read", "node1", series=[{"path": "series/node1/storage-tier-gone.csv",
                                                               "kind": "curve", "x": "clients"}])
    escape = result("storage.tier.seq_read", "node2", series=[{"path": "series/../../../etc/storage-tier-x.csv",
                                                              "kind": "curve", "x": "clients"}])
    notes: list[str] = []
    assert plots.figures(build_view(write_run(tmp_path, [missing, escape])), notes) == {}
    assert any("missing from the run directory" in n for n in notes)
    assert any("not a file under series/" in n for n in notes)


def test_at_most_max_per_domain_worst_first_and_the_rest_named(tmp_path: Path) -> None:
    run_dir = tmp_path / RUN_ID
    run_dir.mkdir(parents=True)
    items = [storage(run_dir, f"node{i:02d}") for i in range(plots.MAX_PER_DOMAIN + 3)]
    items[7]["status"] = "fail"
    notes: list[str] = []
    drawn = plots.figures(build_view(write_run(tmp_path, items)), notes)["storage"]
    assert len(drawn) == plots.MAX_PER_DOMAIN
    assert drawn[0].source == ("series/node07/storage-tier-home.csv",)
    assert len(notes) == 1 and notes[0].startswith("storage: 3 more figure(s) not drawn")


def test_without_matplotlib_no_figures_and_a_note(run_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import builtins

    real_import = builtins.__import__

    def no_matplotlib(name: str, *args: Any, **kwargs: Any) -> Any:
        if name.split(".")[0] == "matplotlib":
            raise ImportError("No module named 'matplotlib'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    notes: list[str] = []
    assert plots.figures(build_view(run_dir), notes) == {}
    assert len(notes) == 1 and "matplotlib is not installed" in notes[0]


def test_a_run_without_series_gets_no_section(tmp_path: Path) -> None:
    run_dir = write_run(tmp_path, [result("storage.tier.seq_read", "node1", value=1.0)])
    assert plots.section_html(build_view(run_dir)) == ""


def test_section_html_has_captions_and_notes(run_dir: Path) -> None:
    (run_dir / "series/node1/storage-tier-home.csv").write_text("garbage")
    section = plots.section_html(build_view(run_dir))
    assert section.startswith("<h2>Figures</h2>")
    assert section.count('<figure class="plot">') == 4
    assert "from <code>series/_cluster/nccl-all_reduce.csv</code>" in section
    assert "<li>storage: storage tier home on node1" in section
