"""What the GPU telemetry sampler session costs: on the node per sample interval, and on the controller per poll.

Usage: python benchmarks/session_cost.py [--duration 30] [--poll 5] [--interval-ms 1000]
Needs root and the packages `make install` sets up. Brings up a 1-node simulated cluster (8 GPUs), runs the
telemetry role through ansible-playbook and, while it runs, reads the CPU time of every process working in
the session's directory on the node (the supervisor and its streams: nvidia-smi's loop, the kernel-log
followers). Then it times one poll's pieces: the node side (the session runner's `poll` as the node runs
it) and the controller side (the SSH exchange over the control connection, parsing the new samples into the
series and judging the live check).

On a real node the nvidia-smi loop is NVIDIA's binary (NVML queries), here the simulated shim: the stream's
figure is the shim's; the supervisor, followers and poll figures are the real code's.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from clustereval import checks
from clustereval.sessions import Recorder, SessionView, Stream
from clustereval.sim import cluster, stop_on_sigterm

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
TICKS = os.sysconf("SC_CLK_TCK")
RUNNER = (REPO / "plugins/module_utils/session_runner.py").read_text()


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime + stime


def session_processes(marker: str) -> dict[int, str]:
    out = {}
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                if marker in os.readlink(f"/proc/{pid}/cwd"):
                    out[int(pid)] = Path(f"/proc/{pid}/comm").read_text().strip()
            except OSError:
                continue
    return out


def watch(marker: str, stop: threading.Event, seen: dict[int, tuple[str, float]]) -> None:
    while not stop.is_set():
        for pid, name in session_processes(marker).items():
            try:
                seen[pid] = (name, cpu_seconds(pid))
            except (OSError, IndexError):
                pass
        time.sleep(0.2)


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def main() -> int:
    stop_on_sigterm()  # a `timeout` or a cancelled job still brings the clusters down
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--duration", type=int, default=30)
    parser.add_argument("--poll", type=float, default=5)
    parser.add_argument("--interval-ms", type=int, default=1000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="clustereval-session-cost-") as tmp:
        sim, run_dir = Path(tmp) / "sim", Path(tmp) / "run"
        cluster.up(sim, 1, "reference")
        try:
            env = {**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "PATH": f"{BIN}:{os.environ['PATH']}"}
            stop, seen = threading.Event(), {}
            watcher = threading.Thread(target=watch, args=("/var/tmp/clustereval/sessions/", stop, seen), daemon=True)
            watcher.start()
            started = time.monotonic()
            proc = subprocess.run([str(BIN / "ansible-playbook"), str(REPO / "playbooks/evaluate.yml"),
                                   "-i", str(sim / "inventory.ini"), "-e", "clustereval_phases=reliability",
                                   "-e", f"clustereval_out={run_dir}",
                                   "-e", f"clustereval_telemetry_duration_s={args.duration}",
                                   "-e", f"clustereval_telemetry_poll_s={args.poll}",
                                   "-e", f"clustereval_telemetry_interval_ms={args.interval_ms}"],
                                  capture_output=True, text=True, env=env, cwd=REPO)
            wall = time.monotonic() - started
            stop.set()
            watcher.join()
            if proc.returncode != 0:
                raise SystemExit(f"the sampler run failed:\n{proc.stdout[-3000:]}")
            intervals = args.duration * 1000 / args.interval_ms
            by_name: dict[str, float] = {}
            for name, cpu in seen.values():
                by_name[name] = by_name.get(name, 0.0) + cpu
            total = sum(by_name.values())
            print(f"sampler session: {args.duration} s, one sample every {args.interval_ms} ms, poll every "
                  f"{args.poll} s, 8 GPUs (ansible-playbook wall {wall:.1f} s)")
            print(f"  node, session processes: {total:.3f} CPU-s in all = {1000 * total / intervals:.2f} ms "
                  f"per sample interval ({', '.join(f'{n} {c:.3f}' for n, c in sorted(by_name.items()))})")

            # One poll's pieces, timed on their own: the node runs the runner's poll, the controller sends it
            # over the control connection and parses what came back.
            inventory = (sim / "inventory.ini").read_text()
            address = next(line.split("ansible_host=")[1].split()[0] for line in inventory.splitlines()
                           if "ansible_host=" in line)
            key = sim / "ssh" / "id_ed25519"
            control = Path(tmp) / "cm.sock"
            ssh = ["ssh", "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
                   "-o", "LogLevel=ERROR", "-o", "ControlMaster=auto", "-o", f"ControlPath={control}",
                   "-o", "ControlPersist=30", "-i", str(key), f"root@{address}"]
            base = Path(tmp) / "sessions"
            request = {"base": str(base), "run_id": "bench", "name": "node1.telemetry"}
            streams = [{"name": "gpu", "cmd": "exec nvidia-smi --query-gpu=timestamp,index,pci.bus_id,temperature.gpu,"
                        "power.draw,clocks.current.sm,clocks_event_reasons.active --format=csv -lms "
                        f"{args.interval_ms}"}]
            subprocess.run([*ssh, "true"], capture_output=True)  # open the control connection, as Ansible keeps one
            start = subprocess.run([*ssh, "python3 -c " + _quote(RUNNER)], input=json.dumps(
                {**request, "op": "start", "duration_s": 60, "streams": streams}), capture_output=True, text=True)
            assert json.loads(start.stdout).get("pid"), start.stdout + start.stderr
            time.sleep(args.poll)
            node_cpu, ctl_cpu, feed_cpu, offsets, count = 0.0, 0.0, 0.0, {}, 5
            recorder = Recorder(str(run_dir), "node1", "bench", [Stream("gpu", "", parser="nvidia-smi-query-loop",
                                                                        header_lines=1)])
            for _ in range(count):
                payload = json.dumps({**request, "op": "poll", "offsets": offsets})
                before = children_cpu()
                local = subprocess.run([sys.executable, "-c", RUNNER], input=payload, capture_output=True, text=True)
                node_cpu += children_cpu() - before
                before = children_cpu()
                over = subprocess.run([*ssh, "true"], capture_output=True, text=True)
                ctl_cpu += children_cpu() - before
                answer = json.loads(local.stdout)
                t0 = time.process_time()
                chunks = recorder.feed(answer)
                view = SessionView(recorder, "bench", chunks=chunks)
                checks.run_check("telemetry.kernel.xid", checks.registered()["telemetry.kernel.xid"],
                                 checks.Context(subject="node1", session=view, declared=frozenset()))
                feed_cpu += time.process_time() - t0
                offsets = {k: v["offset"] for n, e in answer["streams"].items() for s, v in e.items()
                           for k in [f"{n}.{s}"]}
                assert over.returncode == 0 and base64.b64decode(answer["streams"]["gpu"]["out"]["data"]) is not None
                time.sleep(args.poll)
            subprocess.run([sys.executable, "-c", RUNNER], input=json.dumps({**request, "op": "stop", "remove": True}),
                           capture_output=True, text=True)
            subprocess.run([*ssh, "-O", "exit"], capture_output=True)
            print(f"  node, one poll (the runner's poll op, python3 -c): {1000 * node_cpu / count:.1f} CPU-ms")
            print(f"  controller, one poll: SSH exchange over the control connection {1000 * ctl_cpu / count:.1f} "
                  f"CPU-ms + parsing {args.poll:g} s of samples into the series and judging live "
                  f"{1000 * feed_cpu / count:.1f} CPU-ms")
        finally:
            cluster.down(sim)
    return 0


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\"'\"'") + "'"


if __name__ == "__main__":
    sys.exit(main())
