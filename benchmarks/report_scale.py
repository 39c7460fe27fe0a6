"""Scoring plus every report at fleet scale: wall time and peak memory for N nodes x M checks.

Usage: python benchmarks/report_scale.py [--nodes 10000] [--checks 200] [--dir DIR] [--keep]
  Writes a synthetic run directory (run.json and results.jsonl in the result contract, real check ids from the
  catalogue, host and per-GPU subjects, a realistic mix: 98.5 % pass, 1 % warn, 0.3 % fail, 0.2 % skip with a
  reason, a few unreachable nodes), then scores it and renders every report in a fresh child process
  (``clustereval report``'s code path: ``report.render_all``), and prints the child's wall time, its peak RSS
  (the kernel's maxrss of the child) and the size of each file written. Generating the input is not timed.
Issue F's target: 10,000 nodes x 200 checks (2,000,000 results) in <= 30 s and <= 2 GB on the 2-core dev VM.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from clustereval.checks import catalogue as catalogue_mod

RUN_ID = "bench-fleet"
STATUS_MIX = (("pass", 0.985), ("warn", 0.01), ("fail", 0.003), ("skip", 0.002))
GPUS_PER_NODE = 8
CHILD = r"""
import json, resource, sys, time
t0 = time.monotonic()
from clustereval import report
written = report.render_all(sys.argv[1])
wall = time.monotonic() - t0
print(json.dumps({"wall_s": round(wall, 2),
                  "maxrss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
                  "written": [str(p) for p in written]}))
"""


def pick_checks(count: int) -> list[tuple[str, dict]]:
    """``count`` catalogue checks, spread over the domains (every domain's first checks before any domain's
    later ones), so every report section and rubric category has members."""
    by_domain: dict[str, list[tuple[str, dict]]] = {}
    for check_id, entry in sorted(catalogue_mod.load().items()):
        if check_id.startswith("harness."):
            continue
        by_domain.setdefault(str(entry.get("domain") or check_id.split(".")[0]), []).append((check_id, entry))
    picked: list[tuple[str, dict]] = []
    depth = 0
    while len(picked) < count and any(depth < len(v) for v in by_domain.values()):
        picked += [v[depth] for v in by_domain.values() if depth < len(v)]
        depth += 1
    return picked[:count]


def status_of(rng: random.Random) -> str:
    draw, edge = rng.random(), 0.0
    for status, share in STATUS_MIX:
        edge += share
        if draw < edge:
            return status
    return "pass"


def result_line(check_id: str, entry: dict, host: str, gpu: int | None, status: str, value: float) -> str:
    subject = f"{host}/gpu{gpu}" if gpu is not None else host
    summary = {"pass": f"{value:.1f} TFLOP/s, within the reference",
               "warn": f"{value:.1f} TFLOP/s, 8% below the reference 700 (warn below 0.93x)",
               "fail": f"{value:.1f} TFLOP/s, 30% below the reference 700 (fail below 0.85x)",
               "skip": "not measured: the probe's tool is not installed on this node"}[status]
    result = {
        "run_id": RUN_ID, "check": check_id, "phase": entry.get("phase") or "audit",
        "domain": entry.get("domain") or check_id.split(".")[0], "subject": subject, "status": status,
        "severity": entry.get("severity") or "major", "summary": summary,
        "value": None if status == "skip" else round(value, 2), "unit": "TFLOP/s",
        "expected": {"direction": "higher", "reference": 700.0, "warn": "0.93x", "fail": "0.85x",
                     "source": "baselines/gpu_compute.yml: h200-bf16"},
        "params": {"dtype": "bf16"} if gpu is not None else {},
        "artifacts": [f"raw/{host}/{check_id}.txt"],
        "evidence": {"samples": 5},
        "started": "2026-12-02T10:00:00.000Z", "ended": "2026-12-02T10:00:01.000Z",
    }
    return json.dumps(result, sort_keys=True) + "\n"


def generate(run_dir: Path, nodes: int, checks: int, seed: int = 7) -> int:
    """Write run.json and results.jsonl; returns the number of results. A quarter of each node's ``checks``
    results come from per-GPU checks (each of the node's 8 GPUs a subject), the rest from per-host checks."""
    rng = random.Random(seed)
    gpu_checks = checks // 4 // GPUS_PER_NODE
    picked = pick_checks(gpu_checks + checks - gpu_checks * GPUS_PER_NODE)
    hosts = [f"node{i:05d}" for i in range(1, nodes + 1)]
    unreachable = set(rng.sample(hosts, min(3, nodes)))
    per_gpu = {check_id for check_id, _ in picked[:gpu_checks]}
    run_dir.mkdir(parents=True, exist_ok=True)
    info = {"run_id": RUN_ID, "started": "2026-12-02T10:00:00Z", "ended": "2026-12-02T11:00:00Z",
            "inventory": {"hosts": hosts}, "options": {}}
    (run_dir / "run.json").write_text(json.dumps(info), encoding="utf-8")
    count = 0
    with open(run_dir / "results.jsonl", "w", encoding="utf-8") as fh:
        for host in hosts:
            if host in unreachable:
                fh.write(json.dumps({"run_id": RUN_ID, "check": "harness.node.reachable", "phase": "audit",
                                     "domain": "harness", "subject": host, "status": "fail", "severity": "critical",
                                     "summary": f"{host}: ssh: connect to host {host} port 22: No route to host"})
                         + "\n")
                count += 1
                continue
            lines = []
            for check_id, entry in picked:
                subjects = range(GPUS_PER_NODE) if check_id in per_gpu else (None,)
                for gpu in subjects:
                    lines.append(result_line(check_id, entry, host, gpu, status_of(rng), rng.gauss(700, 15)))
            fh.write("".join(lines))
            count += len(lines)
    return count


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--checks", type=int, default=200, help="results per node (a quarter of them per GPU)")
    parser.add_argument("--dir", type=Path, help="run directory to write (default: a temp dir, removed after)")
    parser.add_argument("--keep", action="store_true", help="keep the run directory")
    args = parser.parse_args()
    run_dir = args.dir or Path(tempfile.mkdtemp(prefix="clustereval-scale."))
    try:
        t0 = time.monotonic()
        count = generate(run_dir, args.nodes, args.checks)
        size = (run_dir / "results.jsonl").stat().st_size
        print(f"generated {count:,} results ({size / 2**20:.0f} MiB) in {time.monotonic() - t0:.0f} s: {run_dir}")
        child = subprocess.run([sys.executable, "-c", CHILD, str(run_dir)], capture_output=True, text=True)
        if child.returncode != 0:
            print(child.stderr[-4000:], file=sys.stderr)
            return 1
        figures = json.loads(child.stdout.strip().splitlines()[-1])
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        print(f"score + reports: {figures['wall_s']} s wall, peak RSS {peak:.0f} MiB")
        for path in map(Path, figures["written"] + [str(run_dir / "score.json")]):
            print(f"  {path.name}: {path.stat().st_size / 2**20:.1f} MiB")
    finally:
        if not args.keep and args.dir is None:
            shutil.rmtree(run_dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
