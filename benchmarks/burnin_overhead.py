"""The burn-in's own measurement overhead: GEMM throughput with the sampler running vs without it (issue R:
"within 2%").

Usage: python benchmarks/burnin_overhead.py [--repeat N] [--duration-s S] [--size N] [--pin] [--threads N]
       [--interval-ms MS]
Needs root, the simulated cluster's Debian packages (`make install`) and PyTorch in this checkout's .venv.

On node1 of a one-node reference cluster, over plain ssh, the burn-in GEMM program
(roles/burnin/files/clustereval_burnin_gemm.py) runs for `--duration-s` with the role's own command line
(`__clustereval_burnin_gemm_cmd`), alternately:

* bare: the GEMM alone;
* sampled: the GEMM with the burn-in session's other node-side streams started beside it, with the role's own
  commands and default settings: the telemetry role's `nvidia-smi --query-gpu=... -lms 1000` loop and kernel-log
  follower (`__clustereval_telemetry_gpu_cmd`, `__clustereval_telemetry_kernel_cmd`) and the link error counters
  (`__clustereval_burnin_counters_cmd`, every 30 s), each writing to a file as the session runner does.

Compared: the median window TFLOP/s of the GEMM's own JSON lines (the first window, the warm-up, is left out),
parsed by clustereval.parsers ("burnin-gemm"); ratio = sampled / bare, per pair and over the medians.

What it measures here and what it means on a cluster: the GEMM runs on the CPU (no GPU on this machine), so
every CPU cycle the sampler takes is taken from the GEMM; on a GPU node the GEMM runs on the GPU and the
sampler's cost is CPU time on cores the GEMM does not use, so this is an upper bound. The simulated nvidia-smi
is a Python process computing every sample (the real one reads NVML), which makes it dearer than the real
one. `--pin` keeps the controller (this script, ssh) on the other CPUs, as on a real cluster where the
controller is another machine. The session's polls (every 30 s by default, one ssh round trip each) are not
included: they cost the node a short-lived Python process per poll.

Beside the ratio, the sampled runs report the CPU time the sampler's own process groups used
(`sampler_cpu_share`: CPU-seconds per second of GEMM), read from /proc before they are stopped: on a CPU-bound
GEMM this is the most the sampler can take from it, and unlike the ratio it does not drown in the machine's
noise.

Measured (2-core VM shared with other work, --pin, 4 pairs of 40 s, 1024^3 float32): pair ratios 0.86-1.14
with the bare side alone spreading 13 %: the ratio cannot resolve 2 % here (median ratio 0.969). With
--threads 1 on a quiet machine (4 pairs of 30 s): median ratio 0.995, pairs 0.93-1.17. The sampler itself used
0.10-0.23 % of one CPU (0.04-0.07 s of CPU per 30-40 s at -lms 1000). Cost: about 2 s to bring the cluster up, then
(duration + ~3 s) per run; the default 4 pairs of 40 s take about 6 minutes. Prints one line per pair, then
one JSON summary line.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from perf_overhead import REPO, VENV, Sim, load1, pin_apart, spread

from clustereval import yamldata
from clustereval.parsers import parse
from clustereval.sim import cluster, stop_on_sigterm

BURNIN_VARS = yamldata.load((REPO / "roles/burnin/vars/main.yml").read_text())
BURNIN_DEFAULTS = yamldata.load((REPO / "roles/burnin/defaults/main.yml").read_text())
TELEMETRY_VARS = yamldata.load((REPO / "roles/telemetry/vars/main.yml").read_text())
TELEMETRY_DEFAULTS = yamldata.load((REPO / "roles/telemetry/defaults/main.yml").read_text())
WORK = "/var/tmp/clustereval-burnin-overhead"


def environment(args: argparse.Namespace) -> dict[str, str]:
    """The $CLUSTEREVAL_* parameters the session runner gives the streams, with the role's defaults."""
    return {
        "CLUSTEREVAL_VENV": str(VENV), "CLUSTEREVAL_DIR": str(REPO / "roles/burnin/files"),
        "CLUSTEREVAL_GEMM_SCRIPT": str(REPO / "roles/burnin/files/clustereval_burnin_gemm.py"),
        "CLUSTEREVAL_DURATION_S": str(args.duration_s), "CLUSTEREVAL_GEMM_SIZE": str(args.size),
        "CLUSTEREVAL_WINDOW_S": str(BURNIN_DEFAULTS["clustereval_burnin_window_s"]),
        "CLUSTEREVAL_FIELDS": ",".join(TELEMETRY_DEFAULTS["clustereval_telemetry_fields"]),
        "CLUSTEREVAL_INTERVAL_MS": str(args.interval_ms),
        "CLUSTEREVAL_INTERVAL_S": str(BURNIN_DEFAULTS["clustereval_burnin_counters_interval_s"]),
        **({"OMP_NUM_THREADS": str(args.threads)} if args.threads else {}),
    }


def command(args: argparse.Namespace, sampled: bool) -> str:
    """One shell line for node1: the sampler streams (each in its own process group, killed after the GEMM)
    when ``sampled``, then the GEMM in the foreground, its output on stdout."""
    exports = " ".join(f"export {k}={shlex.quote(v)};" for k, v in environment(args).items())
    lines = [exports, f"rm -rf {WORK}; mkdir -p {WORK}"]
    if sampled:
        for name, cmd in (("gpu", TELEMETRY_VARS["__clustereval_telemetry_gpu_cmd"]),
                          ("kernel", TELEMETRY_VARS["__clustereval_telemetry_kernel_cmd"]),
                          ("counters", BURNIN_VARS["__clustereval_burnin_counters_cmd"])):
            lines.append(f"setsid sh -c {shlex.quote(cmd)} > {WORK}/{name}.out 2>&1 < /dev/null & "
                         f"echo $! >> {WORK}/pids")
    lines.append(f"sh -c {shlex.quote(BURNIN_VARS['__clustereval_burnin_gemm_cmd'])}")
    # Before they are stopped: the CPU time the sampler's process groups used (their own and their reaped
    # children's, fields 14-17 of /proc/PID/stat), the direct cost the GEMM's ratio can only show through noise.
    lines.append(f"rc=$?; if [ -f {WORK}/pids ]; then ticks=0; for p in $(cat {WORK}/pids); do "
                 "for s in /proc/[0-9]*/stat; do set -- $(sed 's/^.*) //' $s 2>/dev/null); "
                 "[ \"$3\" = \"$p\" ] && ticks=$((ticks + ${12} + ${13} + ${14} + ${15})); done; done; "
                 "echo sampler-cpu-ticks=$ticks >&2; fi")
    lines.append(f"[ -f {WORK}/pids ] && for p in $(cat {WORK}/pids); do kill -TERM -- -$p 2>/dev/null; "
                 f"done; sleep 0.5; wc -l < {WORK}/gpu.out 2>/dev/null | sed 's/^/sampler-lines=/' >&2; "
                 f"rm -rf {WORK}; exit $rc")
    return "\n".join(lines)


def one_run(sim: Sim, args: argparse.Namespace, sampled: bool) -> dict:
    load_before = load1()
    proc, wall = sim.ssh("node1", command(args, sampled), timeout=args.duration_s + 120)
    if proc.returncode != 0:
        raise RuntimeError(f"the GEMM failed (rc {proc.returncode}): {proc.stderr[-2000:]}")
    parsed = parse("burnin-gemm", proc.stdout)
    windows = [r["tflops"] for r in parsed["rows"]][1:]  # the first window is the warm-up
    if len(windows) < 3:
        raise RuntimeError(f"too few GEMM windows ({len(windows)}): lengthen --duration-s")
    sampler_lines = next((int(w.split("=")[1]) for w in proc.stderr.split() if w.startswith("sampler-lines=")), 0)
    if sampled and sampler_lines < 2:
        raise RuntimeError(f"the sampler did not run beside the GEMM ({sampler_lines} lines): {proc.stderr[-1000:]}")
    ticks = next((int(w.split("=")[1]) for w in proc.stderr.split() if w.startswith("sampler-cpu-ticks=")), None)
    out = {"median_tflops": statistics.median(windows), "windows": len(windows), "wall_s": round(wall, 1),
           "load1_before": load_before, "sampler_lines": sampler_lines}
    if sampled and ticks is not None:
        # Share of one CPU the sampler took over the GEMM's run: what it can take from a CPU-bound GEMM here.
        out["sampler_cpu_s"] = ticks / os.sysconf("SC_CLK_TCK")
        out["sampler_cpu_share"] = out["sampler_cpu_s"] / args.duration_s
    return out


def main() -> int:
    stop_on_sigterm()
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=4, help="alternating bare/sampled pairs")
    parser.add_argument("--duration-s", type=int, default=40, help="seconds of GEMM per run")
    parser.add_argument("--size", type=int, default=1024, help="M=N=K of the GEMM (float32 on the CPU)")
    parser.add_argument("--interval-ms", type=int,
                        default=int(TELEMETRY_DEFAULTS["clustereval_telemetry_interval_ms"]),
                        help="nvidia-smi -lms interval (the telemetry role's default)")
    parser.add_argument("--threads", type=int, default=0,
                        help="OMP_NUM_THREADS for the GEMM (with --pin, 1: one thread on the node's one core, so a "
                             "sampler wakeup costs its CPU time and does not stall a second thread at a barrier)")
    parser.add_argument("--pin", action="store_true",
                        help="the node's processes on the last CPU, this script on the others")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="clustereval-burnin-", dir="/tmp"))
    out: dict = {"repeat": args.repeat, "duration_s": args.duration_s, "size": args.size, "threads": args.threads,
                 "interval_ms": args.interval_ms, "pairs": []}
    started = time.monotonic()
    try:
        cluster.up(tmp / "sim", 1, "reference")
        sim = Sim(tmp / "sim")
        if args.pin:
            out["pinned"] = pin_apart(sim)
        for i in range(args.repeat):
            # Alternate which side goes first, so a slow spell of the machine hits both.
            order = (False, True) if i % 2 == 0 else (True, False)
            pair = {("sampled" if s else "bare"): one_run(sim, args, s) for s in order}
            pair["ratio"] = pair["sampled"]["median_tflops"] / pair["bare"]["median_tflops"]
            out["pairs"].append(pair)
            print(f"pair {i + 1}: bare {pair['bare']['median_tflops']:.4f} sampled "
                  f"{pair['sampled']['median_tflops']:.4f} TFLOP/s ratio {pair['ratio']:.4f} "
                  f"(load1 {pair['bare']['load1_before']:.2f}/{pair['sampled']['load1_before']:.2f})", flush=True)
    finally:
        cluster.down(tmp / "sim")
        shutil.rmtree(tmp, ignore_errors=True)
    bare = [p["bare"]["median_tflops"] for p in out["pairs"]]
    sampled = [p["sampled"]["median_tflops"] for p in out["pairs"]]
    if bare:
        out["bare_median"], out["sampled_median"] = statistics.median(bare), statistics.median(sampled)
        out["ratio_of_medians"] = out["sampled_median"] / out["bare_median"]
        out["pair_ratios"] = [round(p["ratio"], 4) for p in out["pairs"]]
        out["spread_bare"], out["spread_sampled"] = spread(bare), spread(sampled)
        out["within_2_percent"] = out["ratio_of_medians"] >= 0.98
        shares = [p["sampled"]["sampler_cpu_share"] for p in out["pairs"] if "sampler_cpu_share" in p["sampled"]]
        if shares:
            out["sampler_cpu_share_median"] = statistics.median(shares)
    out["total_s"] = round(time.monotonic() - started, 1)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
