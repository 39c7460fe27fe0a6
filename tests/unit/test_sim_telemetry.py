"""The simulated nvidia-smi in loop mode (``-l`` / ``-lms`` with ``--query-gpu``, ``-q``, the table) and the
profile faults that act mid-run (``gpu_hot``, ``gpu_throttle``, ``xid_during_run``).

No cluster: each test renders a node with the real profile code into a temp ``SIMNODE_ROOT``, runs the
standalone shim with ``/usr/bin/python3`` as a node would, and reads what it prints while it runs. The
shim's clock runs ``SIMNODE_TIME_SCALE`` times faster (test-only), so a 10 s scenario takes half a second;
``SIMNODE_KERN_LOG`` (test-only) stands for the node's own /var/log/kern.log.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from datetime import datetime
from pathlib import Path

import pytest

from clustereval import parsers
from clustereval.sim import profile as sim_profile
from clustereval.sim.overlays import Tree, monitoring
from clustereval.sim.profile import load_profile, node_settings, render_node
from tests.conftest import read_corpus

SHIM = Path(__file__).resolve().parents[2] / "src" / "clustereval" / "sim" / "shims" / "nvidia_smi.py"
PYTHON = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable
CORPUS_LOOP = "h200-query-lms1000-idle-burn-idle-clock-event-reasons.csv"
SAMPLER_FIELDS = ("timestamp,index,pci.bus_id,temperature.gpu,temperature.memory,power.draw,power.limit,"
                  "clocks.current.sm,clocks.current.memory,utilization.gpu,clocks_event_reasons.active,"
                  "ecc.errors.corrected.volatile.total,ecc.errors.uncorrected.volatile.total")
REASONS = {"gpu_idle": 0x1, "applications_clocks_setting": 0x2, "sw_power_cap": 0x4, "hw_slowdown": 0x8,
           "sync_boost": 0x10, "sw_thermal_slowdown": 0x20, "hw_thermal_slowdown": 0x40,
           "hw_power_brake_slowdown": 0x80}
SCALE = 20  # the loop's clock runs 20 x real time: one -lms 1000 sample every 50 ms


def node_root(tmp_path: Path, profile: str | dict = "telemetry-faults", node: str = "node3") -> Path:
    loaded = load_profile(profile) if isinstance(profile, str) else profile
    root = tmp_path / node
    root.mkdir(parents=True)
    (root / "node.json").write_text(json.dumps(render_node(loaded, node)))
    return root


def shim_env(root: Path, kern_log: Path | None = None, scale: float = SCALE) -> dict[str, str]:
    env = {"PATH": os.environ.get("PATH", "/usr/bin"), "SIMNODE_ROOT": str(root), "SIMNODE_TIME_SCALE": str(scale)}
    cpu_stat = root / "cpu.stat"  # the node's CPU time as the shim reads it: idle unless a test makes it busy
    if not cpu_stat.exists():
        cpu_stat.write_text("usage_usec 0\nuser_usec 0\nsystem_usec 0\n")
    env["SIMNODE_CPU_STAT"] = str(cpu_stat)
    if kern_log is not None:
        env["SIMNODE_KERN_LOG"] = str(kern_log)
    return env


class Loop:
    """One running loop process: its stdout lines as they come, and a way to stop it."""

    def __init__(self, root: Path, *args: str, kern_log: Path | None = None, scale: float = SCALE):
        self.proc = subprocess.Popen([PYTHON, str(SHIM), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     env=shim_env(root, kern_log, scale))
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            self.lines.append(raw.decode())

    def wait_for(self, count: int, timeout: float = 20.0) -> list[str]:
        deadline = time.monotonic() + timeout
        while len(self.lines) < count:
            assert self.proc.poll() is None, f"the loop ended early: {self.proc.stderr.read().decode()}"
            assert time.monotonic() < deadline, f"only {len(self.lines)} of {count} lines: {self.lines[-3:]}"
            time.sleep(0.01)
        return self.lines[:count]

    def stop(self, signum: int = signal.SIGTERM) -> tuple[int, str]:
        self.proc.send_signal(signum)
        rc = self.proc.wait(timeout=2)
        self._reader.join(timeout=2)
        return rc, self.proc.stderr.read().decode()


def run_loop(root: Path, fields: str, samples: int, gpus: int = 8, *extra: str, kern_log: Path | None = None,
             fmt: str = "csv") -> str:
    loop = Loop(root, f"--query-gpu={fields}", f"--format={fmt}", "-lms", "1000", *extra, kern_log=kern_log)
    header = 0 if "noheader" in fmt else 1
    lines = loop.wait_for(header + samples * gpus)
    rc, err = loop.stop()
    assert rc == -signal.SIGTERM and err == ""
    return "".join(lines)


def stamp(text: str) -> float:
    return datetime.strptime(text, "%Y/%m/%d %H:%M:%S.%f").timestamp()


def by_gpu(rows: list[dict], index: int) -> list[tuple[float, dict]]:
    """(seconds since the first sample, row) for one GPU."""
    start = stamp(rows[0]["timestamp"])
    return [(stamp(r["timestamp"]) - start, r) for r in rows if r["index"] == index]


# ------------------------------------------------------------------------------------------ output format


def test_loop_parses_to_one_row_per_gpu_per_interval(tmp_path):
    root = node_root(tmp_path, "reference", "node1")
    text = run_loop(root, SAMPLER_FIELDS, samples=4)
    result = parsers.parse("nvidia-smi-query-loop", text)
    assert result["complete"] and result["warnings"] == []
    assert text.count("timestamp, index") == 1, "the header is printed once"
    rows = result["rows"]
    assert len(rows) == 32 and [r["index"] for r in rows[:8]] == list(range(8))
    assert result["gpu_indices"] == list(range(8))
    state = render_node(load_profile("reference"), "node1")
    for row in rows[16:]:  # after the two wake-up samples: the node's idle readings with a small jitter
        gpu = state["gpus"][row["index"]]
        assert row["pci.bus_id"] == gpu["pci_bus_id"]
        assert row["temperature.gpu"] - gpu["temperature_c"] in (0, 1)
        assert row["temperature.memory"] - gpu["memory_temperature_c"] in (0, 1)
        assert abs(row["power.draw"] - gpu["power_draw_w"]) <= 0.151
        assert row["power.limit"] == 700.0 and row["clocks.current.sm"] == 1980
        assert row["clocks.current.memory"] == 2619 and row["utilization.gpu"] == 0
        assert row["clocks_event_reasons.active"] == 0 and row["throttle_reasons_active"] == []
        assert row["ecc.errors.corrected.volatile.total"] == 0 == row["ecc.errors.uncorrected.volatile.total"]
    first = rows[0]["power.draw"] / state["gpus"][0]["power_draw_w"]
    assert 1.5 < first < 1.6, "the first sample catches the GPU waking up, as the corpus capture does"
    # one sample per interval: timestamps 1 s apart (plus the sampling time, as nvidia-smi sleeps after it)
    gaps = [b - a for a, b in itertools.pairwise(stamp(r["timestamp"]) for r in rows[::8])]
    assert all(0.99 <= g <= 1.5 for g in gaps), gaps
    again = parsers.parse("nvidia-smi-query-loop", run_loop(node_root(tmp_path / "b", "reference", "node1"),
                                                             SAMPLER_FIELDS, samples=4))["rows"]
    jitter = [(r["temperature.gpu"], r["power.draw"]) for r in rows]
    assert jitter == [(r["temperature.gpu"], r["power.draw"]) for r in again], "deterministic per node and GPU"


def shape(value: str) -> str:
    return re.sub(r"\d+", "9", value)


def test_header_and_value_formats_match_the_corpus_capture_field_by_field(tmp_path):
    real = read_corpus("nvidia-smi-query-loop", CORPUS_LOOP)
    real_lines = real.splitlines()
    fields = ",".join(cell.split(" [")[0] for cell in real_lines[0].split(", "))
    # node3 of telemetry-faults: idle GPUs, one in HW Slowdown, one lost after its Xid 79
    ours = run_loop(node_root(tmp_path), fields, samples=8, kern_log=tmp_path / "kern.log")
    our_lines = ours.splitlines()
    assert our_lines[0] == real_lines[0]
    assert ours.endswith("\n") and real.endswith("\n")
    real_shapes = [{shape(v) for v in column} for column in zip(*(ln.split(", ") for ln in real_lines[1:]),
                                                                   strict=True)]
    healthy = [ln for ln in our_lines[1:] if "[GPU is lost]" not in ln]
    assert len(healthy) > 56
    for line in healthy:
        assert line == line.rstrip() and ",," not in line
        cells = line.split(", ")
        assert len(cells) == len(real_shapes)
        for name, cell, shapes in zip(fields.split(","), cells, real_shapes, strict=True):
            assert shape(cell) in shapes or (name.startswith("clocks_event_reasons.") and cell == "Active"), (
                name, cell, shapes)
    assert re.fullmatch(r"\d{4}/\d\d/\d\d \d\d:\d\d:\d\d\.\d{3}", healthy[0].split(", ")[0])
    assert {len(line.split(", ")[8]) for line in healthy} == {18}  # 0x%016x


def test_every_reason_field_and_its_legacy_alias_agree_with_the_mask(tmp_path):
    profile = load_profile("reference")
    profile["nodes"]["node1"] = {"faults": {
        "gpu_throttle": [{"gpu": 0, "after_s": 0, "reason": "hw_power_brake", "sm_clock_mhz": 600},
                         {"gpu": 1, "after_s": 0, "reason": "sw_thermal_slowdown"}],
        "gpu_hot": {"gpu": 2, "after_s": 0, "temperature_c": 90}}}
    fields = ["index", "clocks_event_reasons.active", "clocks_throttle_reasons.active", "clocks.sm",
              *[f"clocks_event_reasons.{name}" for name in REASONS],
              *[f"clocks_throttle_reasons.{name}" for name in REASONS]]
    text = run_loop(node_root(tmp_path, profile, "node1"), ",".join(fields), samples=6)
    header = text.splitlines()[0].split(", ")
    assert header == ["index", "clocks_event_reasons.active", "clocks_event_reasons.active",
                      "clocks.current.sm [MHz]", *[f"clocks_event_reasons.{n}" for n in REASONS] * 2]
    masks = {}
    for line in text.splitlines()[1:]:
        cells = line.split(", ")
        mask = int(cells[1], 16)
        assert cells[2] == cells[1]
        states = dict(zip(REASONS, cells[4:12], strict=True))
        assert cells[4:12] == cells[12:20]
        assert states == {n: "Active" if mask & bit else "Not Active" for n, bit in REASONS.items()}
        masks[int(cells[0])] = (mask, cells[3])
    assert masks[0] == (0x80, "600 MHz")  # HW Power Brake alone, as the real 535 -q capture shows it
    assert masks[1] == (0x20, "990 MHz")  # default clock of a throttle: half the maximum
    assert masks[2] == (0x60, "990 MHz")  # 90 C: past max operating (87 C) and the slowdown margin (89 C)
    assert masks[3] == (0, "1980 MHz")


def test_single_shot_output_ignores_the_mid_run_faults(tmp_path):
    root = node_root(tmp_path)
    out = subprocess.run([PYTHON, str(SHIM), f"--query-gpu={SAMPLER_FIELDS}", "--format=csv,noheader"],
                         env=shim_env(root, tmp_path / "kern.log"), capture_output=True, text=True, timeout=30)
    assert out.returncode == 0
    rows = [line.split(", ") for line in out.stdout.splitlines()]
    assert [r[7] for r in rows] == ["1980 MHz"] * 8 and {r[10] for r in rows} == {"0x0000000000000000"}
    assert not (root / "kmsg").exists() and not (tmp_path / "kern.log").exists()


# ------------------------------------------------------------------------------------------ faults mid-run


def test_gpu_hot_climbs_after_after_s_then_slows_down(tmp_path):
    root = node_root(tmp_path, node="node2")  # gpu_hot: {gpu: 3, after_s: 4, temperature_c: 92, memory: 98}
    rows = parsers.parse("nvidia-smi-query-loop", run_loop(root, SAMPLER_FIELDS, samples=12))["rows"]
    series = by_gpu(rows, 3)
    before = [r for t, r in series if t < 3.9]
    after = [r for t, r in series if t >= 4.1]
    assert len(before) >= 2 and before[-1]["temperature.gpu"] in (23, 24)
    assert all(r["clocks_event_reasons.active"] == 0 and r["clocks.current.sm"] == 1980 for r in before)
    temps = [r["temperature.gpu"] for r in after]
    assert temps == sorted(temps) and 23 < temps[0] < 92 and temps[-1] == 92, temps
    hot = [r for r in after if r["temperature.gpu"] >= 89]
    assert hot and all(r["throttle_reasons_active"] == ["hw_thermal_slowdown", "sw_thermal_slowdown"]
                       and r["clocks.current.sm"] == 990 for r in hot)
    assert after[-1]["temperature.memory"] == 98
    assert all(r["clocks_event_reasons.active"] == 0 for r in rows if r["index"] != 3)


def test_gpu_throttle_and_xid_79_appear_after_their_time_and_not_before(tmp_path):
    root, kern_log = node_root(tmp_path), tmp_path / "kern.log"
    rows = parsers.parse("nvidia-smi-query-loop",
                         run_loop(root, SAMPLER_FIELDS, samples=9, kern_log=kern_log))["rows"]
    throttled = by_gpu(rows, 1)  # hw_slowdown at 900 MHz from 3 s
    early = [r["clocks_event_reasons.active"] for t, r in throttled if t < 2.9]
    assert len(early) >= 2 and set(early) == {0}
    late = [r for t, r in throttled if t >= 3.1]
    assert late and all(r["clocks_event_reasons.active"] == 0x8 and r["clocks.current.sm"] == 900
                        and r["temperature.gpu"] in (24, 25) for r in late)
    lost = by_gpu(rows, 2)  # Xid 79 at 5 s: the GPU is gone for every later sample
    assert all(r["temperature.gpu"] == 23 or r["temperature.gpu"] == 24 for t, r in lost if t < 4.9)
    gone = [r for t, r in lost if t >= 5.1]
    assert len(gone) >= 3
    for r in gone:
        assert r["pci.bus_id"] == "00000000:4C:00.0"
        assert all(r[f] is None for f in ("temperature.gpu", "power.draw", "clocks.current.sm",
                                          "clocks_event_reasons.active", "utilization.gpu"))
    assert rows[-1]["index"] == 7 and rows[-1]["temperature.gpu"] is not None


def test_xid_is_written_once_in_the_driver_format_to_kmsg_and_the_kern_log(tmp_path):
    root, kern_log = node_root(tmp_path), tmp_path / "kern.log"
    run_loop(root, "timestamp,index", samples=10, kern_log=kern_log)
    kmsg = (root / "kmsg").read_text().splitlines()
    driver = r"\[ *\d+\.\d{6}\] NVRM: Xid \(PCI:0000:4c:00\): 79, pid=1824, name=python, GPU has fallen off the bus\."
    assert len(kmsg) == 2 and re.fullmatch(driver, kmsg[0])
    assert re.fullmatch(r"\[ *\d+\.\d{6}\] NVRM: GPU 0000:4c:00\.0: GPU has fallen off the bus\.", kmsg[1])
    # the same two lines as the real driver writes them (corpus, R5xx journal of an Xid 79), bus aside
    real = read_corpus("kernel-xid", "journalctl-xid79-fallen-off-bus-german-locale.log").splitlines()
    assert kmsg[1].split("] ", 1)[1].replace("4c", "01") == real[1].split("kernel: ", 1)[1]
    assert real[0].split("kernel: ", 1)[1].startswith("NVRM: Xid (PCI:0000:01:00): 79, pid=")
    # the node's kern.log: rsyslog's line around the ring-buffer line, as the monitoring overlay renders it
    logged = kern_log.read_text().splitlines(keepends=True)
    assert len(logged) == 2
    for line, ring in zip(logged, kmsg, strict=True):
        stamp_text = line.split(" ", 1)[0]
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}[+-]\d\d:\d\d", stamp_text)
        assert line == monitoring.kern_log_line(stamp_text, "node3", ring)
    result = parsers.parse("kernel-xid", "".join(logged))
    assert result["xid_count"] == 1 and result["counts_by_code"] == {"79": 1}
    event = result["events"][0]
    assert (event["code"], event["pci"], event["host"]) == (79, "0000:4c:00", "node3")
    assert result["notice_counts"] == {"fallen_off_bus": 1}
    assert parsers.parse("kernel-xid", "\n".join(kmsg) + "\n")["counts_by_code"] == {"79": 1}
    # the Slurm health check of the simulated cluster greps exactly this out of /sim/kmsg
    found = re.findall(r"NVRM: Xid \([^)]*\): [0-9]*", "\n".join(kmsg))
    assert found == ["NVRM: Xid (PCI:0000:4c:00): 79"]


def test_the_host_kern_log_is_never_written(tmp_path):
    host = Path("/var/log/kern.log")
    before = host.stat() if host.exists() else None
    root = node_root(tmp_path)
    run_loop(root, "index", samples=7)  # past the Xid, without the test override: a process on the host
    assert (root / "kmsg").read_text().count("NVRM: Xid") == 1
    after = host.stat() if host.exists() else None
    assert (before is None and after is None) or (before.st_size, before.st_mtime_ns) == (after.st_size,
                                                                                          after.st_mtime_ns)


def test_ecc_xid_counts_an_uncorrected_error(tmp_path):
    profile = load_profile("reference")
    profile["nodes"]["node1"] = {"faults": {"xid_during_run": [{"gpu": 4, "after_s": 1, "code": 48}]}}
    root = node_root(tmp_path, profile, "node1")
    rows = parsers.parse("nvidia-smi-query-loop", run_loop(root, "timestamp,index,ecc.errors.uncorrected.volatile."
                                                                 "total", samples=4, kern_log=tmp_path / "k"))["rows"]
    counts = [r["ecc.errors.uncorrected.volatile.total"] for t, r in by_gpu(rows, 4)]
    assert counts == [0, 1, 1, 1]
    assert "48, pid=1824, name=python, An uncorrectable double bit error" in (root / "kmsg").read_text()


# ------------------------------------------------------------------------------------------ other loop forms


def test_q_and_table_loops_follow_the_same_faults(tmp_path):
    root = node_root(tmp_path)
    loop = Loop(root, "-q", "-i", "1", "-l", "1", kern_log=tmp_path / "kern.log")
    deadline = time.monotonic() + 20
    while sum("==============NVSMI LOG" in ln for ln in loop.lines) < 6:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    loop.stop()
    reports = "".join(loop.lines).split("\n==============NVSMI LOG==============\n")[1:6]
    slowdown = [re.search(r"\n        HW Slowdown +: (.*)\n", r).group(1) for r in reports]
    assert slowdown[:3] == ["Not Active"] * 3 and slowdown[4] == "Active"
    assert re.search(r"\n    Clocks\n        Graphics +: 900 MHz\n        SM +: 900 MHz", reports[4])
    q = parsers.parse("nvidia-smi-q", "\n==============NVSMI LOG==============\n" + reports[4])
    assert q["complete"] and q["warnings"] == []
    assert [(g["throttle_reasons_active"], g["clocks_sm_mhz"]) for g in q["gpus"]] == [(["hw_slowdown"], 900)]

    table = Loop(root, "-i", "2", "-lms", "1000", kern_log=tmp_path / "kern.log")
    deadline = time.monotonic() + 20
    while sum(ln.startswith("| NVIDIA-SMI") for ln in table.lines) < 8:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    table.stop()
    gpu_rows = [ln for ln in table.lines if ln.startswith("| N/A")]
    assert "ERR!" not in gpu_rows[0] and "23C" in gpu_rows[0]
    assert gpu_rows[-1].rstrip("\n") == "| N/A  ERR!    P0            ERR! /  700W |       1MiB /  81559MiB |" \
                                        "    ERR!      Default |"
    assert all(len(ln.rstrip("\n")) == 91 for ln in gpu_rows)


@pytest.mark.parametrize(("args", "gap"), [(("-l", "2"), 2.0), (("--loop=1",), 1.0), (("-lms", "500"), 0.5),
                                           (("--loop-ms=250",), 0.25)])
def test_loop_intervals(tmp_path, args, gap):
    loop = Loop(node_root(tmp_path, "reference", "node1"), "--query-gpu=timestamp", "--format=csv,noheader",
                "-i", "0", *args, scale=5)
    stamps = [stamp(ln.strip()) for ln in loop.wait_for(4)]
    loop.stop()
    assert all(gap <= b - a < gap + 0.3 for a, b in itertools.pairwise(stamps)), stamps


@pytest.mark.parametrize("args", [("-l", "0"), ("-lms", "abc"), ("--loop=-1",), ("-l", "1.5")])
def test_bad_loop_intervals_are_refused(tmp_path, args):
    out = subprocess.run([PYTHON, str(SHIM), "--query-gpu=index", "--format=csv", *args],
                         env=shim_env(node_root(tmp_path, "reference", "node1")), capture_output=True, text=True,
                         timeout=30)
    assert out.returncode == 2 and out.stdout.startswith("Invalid combination of input arguments")


def test_bad_field_in_a_loop_fails_before_printing_anything(tmp_path):
    out = subprocess.run([PYTHON, str(SHIM), "--query-gpu=index,bogus", "--format=csv", "-l", "1"],
                         env=shim_env(node_root(tmp_path, "reference", "node1")), capture_output=True, text=True,
                         timeout=30)
    assert (out.returncode, out.stdout) == (2, 'Field "bogus" is not a valid field to query.\n\n')


# ------------------------------------------------------------------------------------------ ending the loop


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_ends_the_loop_at_once_and_quietly(tmp_path, signum):
    loop = Loop(node_root(tmp_path, "reference", "node1"), f"--query-gpu={SAMPLER_FIELDS}", "--format=csv",
                "-l", "1", scale=1)
    loop.wait_for(9)  # header + the first sample, flushed before the first sleep
    started = time.monotonic()
    rc, err = loop.stop(signum)
    assert time.monotonic() - started < 0.5
    assert rc == -signum and err == ""
    assert parsers.parse("nvidia-smi-query-loop", "".join(loop.lines))["complete"]


def test_a_closed_pipe_ends_the_loop_quietly(tmp_path):
    env = shim_env(node_root(tmp_path, "reference", "node1"))
    cmd = f"{PYTHON} {SHIM} --query-gpu=index --format=csv -lms 1000 | head -n 3"
    out = subprocess.run(["sh", "-c", cmd], env=env, capture_output=True, text=True, timeout=30)
    assert out.stdout == "index\n0\n1\n" and out.stderr == ""


def test_loop_cpu_per_sample_is_small(tmp_path):
    """One process for the whole loop: 8 GPUs x 13 fields cost well under a millisecond of CPU a sample."""
    out = tmp_path / "out.csv"
    with out.open("w") as fh:
        proc = subprocess.Popen([PYTHON, str(SHIM), f"--query-gpu={SAMPLER_FIELDS}", "--format=csv", "-lms", "1000"],
                                stdout=fh, env=shim_env(node_root(tmp_path), tmp_path / "k", scale=200))
        time.sleep(2.0)
        fields = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        proc.terminate()
        proc.wait(timeout=5)
    cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    samples = (len(out.read_text().splitlines()) - 1) // 8
    assert samples >= 100
    assert cpu / samples < 0.002, (cpu, samples)


# ------------------------------------------------------------------------------------------ profile


def test_telemetry_faults_profile_renders_the_faults_for_the_shim():
    profile = load_profile("telemetry-faults")
    node2, node3 = render_node(profile, "node2"), render_node(profile, "node3")
    assert node2["telemetry"]["faults"] == [{"kind": "gpu_hot", "gpu": 3, "after_s": 4.0, "temperature_c": 92.0,
                                             "memory_temperature_c": 98.0, "sm_clock_mhz": None}]
    assert node2["telemetry"]["kern_log"] is None
    kinds = {f["kind"]: f for f in node3["telemetry"]["faults"]}
    assert kinds["gpu_throttle"]["mask"] == 0x8 and kinds["gpu_throttle"]["sm_clock_mhz"] == 900
    assert kinds["xid"]["lines"][0] == ("NVRM: Xid (PCI:0000:4c:00): 79, pid=1824, name=python, "
                                        "GPU has fallen off the bus.")
    assert node3["xid"] == [] and node3["slurm"]["state"] == "idle"
    assert render_node(profile, "node1")["telemetry"] == {"kern_log": None, "faults": []}
    assert {g["clocks_event_reasons"] for g in node3["gpus"]} == {0}  # idle at max clocks: no GpuIdle
    # node3's own kern.log exists (empty) so that the loop can append to it inside the node
    tree = Tree()
    monitoring.render(node_settings(profile, "node3"), node3, tree)
    assert tree.files["/var/log/kern.log"] == ("", 0o640)
    tree = Tree()
    monitoring.render(node_settings(profile, "node2"), node2, tree)
    assert "/var/log/kern.log" not in tree.files


def test_idle_clocked_gpus_report_gpu_idle():
    profile = load_profile("reference")
    profile["cluster"]["gpus"]["idle"]["sm_clock_mhz"] = 345
    gpu = render_node(profile, "node1")["gpus"][0]
    assert gpu["clocks_event_reasons"] == 0x1


@pytest.mark.parametrize(
    ("faults", "message"),
    [
        ("{gpu_hot: {gpu: 1}}", "missing keys ['temperature_c']"),
        ("{gpu_hot: {gpu: 1, temperature_c: 96}}", "must stay below 95 C"),
        ("{gpu_throttle: {gpu: 1, reason: sw_power_cap}}", "reason must be one of"),
        ("{gpu_throttle: {gpu: 1, reason: hw_slowdown, when: 3}}", "unknown keys ['when']"),
        ("{xid_during_run: {gpu: -1}}", "gpu must be a non-negative integer"),
        ("{xid_during_run: [{gpu: 1, after_s: soon}]}", "after_s must be a non-negative number"),
        ("{xid_during_run: 79}", "must be a mapping"),
    ],
)
def test_bad_mid_run_faults_are_refused(tmp_path, faults, message):
    path = tmp_path / "bad.yml"
    path.write_text(f"extends: reference\nnodes:\n  node2:\n    faults: {faults}\n")
    with pytest.raises(sim_profile.ProfileError, match=re.escape(message)):
        load_profile(path)


def test_a_fault_on_a_gpu_the_node_does_not_have_is_refused(tmp_path):
    path = tmp_path / "bad.yml"
    path.write_text("extends: reference\nnodes:\n  node2:\n    faults: {gpu_missing: 1, "
                    "xid_during_run: {gpu: 7}}\n")
    with pytest.raises(sim_profile.ProfileError, match=r"xid_during_run.gpu 7 is not one of the node's 7 GPUs"):
        render_node(load_profile(path), "node2")
