"""Fault drills end to end against a scripted node: the runner's steps, the log, the timeline and the checks.

The fake node answers each step the way a real one prints it (``scontrol -o show node`` lines, ``nvidia-smi
-L``, the step's ``## kind`` headers) from a scripted provider: when it detects (drains), whether and when it
reboots and resumes, which bystanders it drains. Time is a fake clock the runner's sleep advances.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pytest

from clustereval import checks
from clustereval.checks.fault_drill import DrillRecord
from clustereval.drills import runner, timeline
from clustereval.parsers import parse

NODES = ("node1", "node2", "node3")
GPU = "GPU {i}: NVIDIA H100 80GB HBM3 (UUID: GPU-{i:08d}-1111-2222-3333-444444444444)"


@dataclass
class Provider:
    detect_after: float | None = 3.0          # seconds from the fault to the drain (None: never)
    reboot_after: float | None = 6.0          # remediation reboot, from the fault
    down_for: float = 4.0                     # how long a reboot keeps SSH away
    resume_after: float | None = 12.0         # scontrol resume, from the fault
    reboot_clears: bool = True
    bystander: str | None = None              # a healthy node its health check drains meanwhile
    dcgm: bool = True
    reboot_works: bool = True                 # the reboot command reboots (False: nothing happens)
    spare_after: float | None = None          # node3 is a drained spare, put in service this long after the fault


@dataclass
class FakeNode:
    provider: Provider
    now: float = 1000.0
    t0: float | None = None
    reboot_at: float | None = None
    boot: int = 1
    gpus: int = 8
    slurmd_start: str = "2026-12-01T10:00:00"
    commands: list[str] = field(default_factory=list)
    journal: list[tuple[str, str, Any]] = field(default_factory=list)
    interrupt_at: float | None = None
    no_slurm: bool = False

    # -- the clock
    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds
        if self.interrupt_at is not None and self.now >= self.interrupt_at:
            raise KeyboardInterrupt

    # -- the provider's script, evaluated at `now`
    def _since(self) -> float | None:
        return None if self.t0 is None else self.now - self.t0

    def _down(self) -> bool:
        start = self.reboot_at
        return start is not None and start <= self.now < start + self.provider.down_for

    def _tick(self) -> None:
        since = self._since()
        p = self.provider
        if since is not None and p.reboot_after is not None and since >= p.reboot_after and self.reboot_at is None \
                and self.kind == "inject":
            self._reboot(self.t0 + p.reboot_after)

    def _reboot(self, at: float) -> None:
        self.reboot_at = at

    def _booted(self) -> bool:
        """Whether the node is up again after its reboot: a new boot id, slurmd restarted, the GPUs reset."""
        if self.reboot_at is None or self.now < self.reboot_at + self.provider.down_for:
            return False
        if self.boot == 1:
            self.boot = 2
            self.slurmd_start = "2026-12-01T11:00:00"
            if self.provider.reboot_clears:
                self.gpus = 8
        return True

    def _state(self) -> tuple[str, str | None]:
        since = self._since()
        p = self.provider
        if since is None:
            return "IDLE", None
        if self.kind == "reboot":
            return ("IDLE", None) if self.reboot_at is None or self.now >= self.reboot_at + p.down_for + 1 \
                else ("DOWN*", "Not responding")
        drained = p.detect_after is not None and since >= p.detect_after
        resumed = p.resume_after is not None and since >= p.resume_after
        if drained and not resumed:
            return "IDLE+DRAIN", "XID 79"
        return "IDLE", None

    def _scontrol(self, only: str | None = None) -> str:
        lines = []
        for name in (only,) if only else NODES:
            state, reason = ("IDLE", None)
            if name == "node2":
                state, reason = self._state()
            elif name == self.provider.bystander and self._since() is not None and self._since() > 1:
                state, reason = "IDLE+DRAIN", "NHC: check_gpu timed out"
            elif name == "node3" and self.provider.spare_after is not None and \
                    (self._since() is None or self._since() < self.provider.spare_after):
                state, reason = "IDLE+DRAIN", "spare"
            start = self.slurmd_start if name == "node2" else "2026-12-01T10:00:00"
            line = f"NodeName={name} Arch=x86_64 CPUTot=64 State={state} SlurmdStartTime={start} CfgTRES=cpu=64"
            if reason:
                line += f" Reason={reason} [root@2026-12-01T12:00:00]"
            lines.append(line)
        return "\n".join(lines)

    def _sinfo(self) -> str:
        """``sinfo -h -N -o '%N|%T|%E'`` of the same states."""
        rows = []
        for line in self._scontrol().splitlines():
            name = line.split()[0].split("=")[1]
            state = line.split("State=")[1].split()[0]
            long = {"IDLE": "idle", "IDLE+DRAIN": "drained", "DOWN*": "down*"}[state]
            reason = line.split("Reason=")[1].split(" [")[0] if "Reason=" in line else "none"
            rows.append(f"{name}|{long}|{reason}")
        return "\n".join(rows)

    # -- the link
    kind: str = "inject"

    def run(self, cmd: str, timeout_s: float) -> tuple[int, str, str]:
        self.now += 0.05
        self._tick()
        self.commands.append(cmd)
        self._booted()
        if self._down():
            raise runner.Unreachable("ssh: connect to host node2 port 22: Connection refused")
        clock = f"## clock t={self.now}\n"
        if "## clock" in cmd:
            out = clock + f"## boot_id id=boot-{self.boot}\n"
            if "scontrol" in cmd and self.no_slurm:
                out += "## scontrol rc=127 missing=yes\n"
            elif "scontrol" in cmd:
                out += f"## scontrol rc=0\n{self._scontrol('node2')}\n## sinfo rc=0\n{self._sinfo()}\n"
            if "nvidia-smi -L" in cmd:
                out += "## gpus rc=0\n" + "\n".join(GPU.format(i=i) for i in range(self.gpus)) + "\n"
            return 0, out, ""
        if "--query-gpu=index,pci.bus_id" in cmd:
            rows = "\n".join(f"{i}, 00000000:{0x18 + i:02X}:00.0" for i in range(8))
            return 0, f"## gpu_bus\n{rows}\n## end rc=0\n", ""
        if "echo '## ready'" in cmd or "## ready bridge" in cmd:
            if "dcgmi" in cmd and not self.provider.dcgm:
                return 3, "## unavailable why=dcgmi is not installed\n", ""
            if "setpci" in cmd:
                return 0, "## ready bridge=0000:17:00.0 control=0013\n", ""
            return 0, "## ready\n", ""
        if "systemctl reboot" in cmd and "nohup" in cmd and "nvidia-smi" not in cmd:
            self.t0 = self.now
            if self.provider.reboot_works:
                self._reboot(self.now + 0.5)
            return 0, f"## fault t={self.now}\n## reboot requested\n", ""
        if ("test --inject" in cmd and "-v 0" not in cmd) or "> /dev/kmsg' sh '<4>" in cmd or "0040:0040" in cmd:
            self.t0 = self.now
            if "0040:0040" in cmd:
                self.gpus = 7
                self.now += 0.5  # the reset is held for half a second
                return 0, f"## fault t={self.t0}\n## restored rc=0 t={self.now} control=0013\n", ""
            return 0, f"## fault t={self.now}\n## kmsg rc=0 line=NVRM: Xid\n", ""
        if "## job" in cmd:
            return 0, "## job rc=0\n" + "\n".join(GPU.format(i=0) for _ in range(1)) + "\n", ""
        return 0, "", ""  # a restore

    def reset(self) -> None:
        pass

    def local(self, cmd: str, timeout_s: float) -> tuple[int, str, str]:
        raise AssertionError(f"a Slurm drill runs nothing on the controller: {cmd}")

    def port_open(self) -> bool | None:
        return not self._down()


def drill(tmp_path, provider: Provider, kind: str = "inject", method: str = "kmsg", **settings: Any):
    node = FakeNode(provider, kind=kind)
    path = str(tmp_path / "raw" / "node2" / f"fault-{kind}.jsonl")
    log = runner.DrillLog(path, node.clock)

    def applied(what: str, undo: str, detail: dict[str, Any], on_controller: bool) -> str:
        node.journal.append(("applied", what, undo))
        return f"j{len(node.journal)}"

    def restored(entry: str, outcome: str, detail: dict[str, Any]) -> None:
        node.journal.append(("restored", entry, outcome))

    s = runner.Settings(kind=kind, target="node2", targets=["node2"], method=method, poll_s=0.5,
                        detect_limit_s=settings.pop("detect_limit_s", 30),
                        return_limit_s=settings.pop("return_limit_s", 60), job_every_s=1, **settings)
    d = runner.Drill(node, s, log, runner.Journal(applied, restored), clock=node.clock, sleep=node.sleep)
    try:
        d.run()
    except KeyboardInterrupt:
        pass
    with open(path, encoding="utf-8") as fh:
        return node, d, fh.read()


def judge(text: str, check_id: str, params: dict[str, Any] | None = None, facts: dict[str, Any] | None = None):
    ctx = checks.Context(subject="node2", params=params or {}, facts=facts or {"gpu_model": "NVIDIA H100 80GB HBM3"},
                         declared=frozenset(), session=DrillRecord(text, "raw/node2/fault.jsonl",
                                                                   "series/node2/fault.csv"))
    [result] = checks.evaluate_many(check_id, ctx, "run1")
    return result


def test_reboot_drill_times_each_milestone_and_passes(tmp_path):
    node, d, text = drill(tmp_path, Provider(), kind="reboot")
    assert d.end["reason"] == "complete"
    tl = timeline.build(parse("fault-drill-log", text))
    assert list(tl.milestones) == ["down", "ssh_back", "new_boot", "returned", "gpu_job"]
    # the node went down 0.5 s after the command and answered again 4 s later: each bracket holds the truth
    for name, truth in (("down", 0.5), ("ssh_back", 4.5)):
        stone = tl.milestones[name]
        assert abs(stone.after_s - truth) <= stone.uncertainty_s + 0.06, (name, stone)
    result = judge(text, "fault.reboot.recovery")
    assert result["status"] == "pass" and result["value"] == tl.after("gpu_job")
    assert result["expected"]["fail_max"] == 1800 and result["series"][0]["data"][0]["event"] == "fault"
    assert ("restored", "j1", "back") in node.journal


def test_reboot_that_does_not_reboot_fails(tmp_path):
    _, d, text = drill(tmp_path, Provider(reboot_works=False), kind="reboot", return_limit_s=10)
    assert d.end["reason"] == "not_returned"
    result = judge(text, "fault.reboot.recovery")
    assert result["status"] == "fail" and "never went down" in result["summary"]


def test_injected_xid_detected_rebooted_and_returned(tmp_path):
    node, d, text = drill(tmp_path, Provider())
    assert d.end["reason"] == "complete"
    params = {"method": "kmsg", "xid": 79}
    detection = judge(text, "fault.inject.detection", params)
    assert detection["status"] == "pass" and 2.4 <= detection["value"] <= 3.6, detection
    assert "XID 79" in detection["summary"] and detection["params"] == params
    back = judge(text, "fault.inject.return", params)
    assert back["status"] == "pass" and "after a reboot" in back["summary"]
    assert judge(text, "fault.inject.cleared", params)["status"] == "pass"
    action = judge(text, "fault.inject.action", params)
    assert action["status"] == "pass" and action["value"] == "drained, rebooted, returned", action
    assert judge(text, "fault.drill.bystanders", params)["status"] == "pass"
    applied = [j for j in node.journal if j[0] == "applied"]
    assert applied and "/dev/kmsg" in applied[0][2]  # the undo note goes to the kernel log
    assert ("restored", "j1", "restored") in node.journal


def test_nothing_detected_is_a_fail_with_the_timeline(tmp_path):
    _, d, text = drill(tmp_path, Provider(detect_after=None, reboot_after=None, resume_after=None),
                       detect_limit_s=8)
    assert d.end["reason"] == "not_detected"
    detection = judge(text, "fault.inject.detection", {"method": "kmsg", "xid": 79})
    assert detection["status"] == "fail" and "within 8 s" in detection["summary"]
    assert detection["evidence"]["polls"] > 10
    assert judge(text, "fault.inject.return")["status"] == "skip"
    assert judge(text, "fault.inject.action")["status"] == "fail"


def test_resume_without_repair_after_a_bus_reset(tmp_path):
    _, d, text = drill(tmp_path, Provider(reboot_after=None, resume_after=6), method="sbr")
    assert d.end["reason"] == "complete"
    cleared = judge(text, "fault.inject.cleared")
    assert cleared["status"] == "fail" and "7 of its 8 GPUs" in cleared["summary"]
    action = judge(text, "fault.inject.action")
    assert action["status"] == "fail" and "without one" in action["summary"]


def test_a_bystander_drained_by_a_timed_out_health_check_fails(tmp_path):
    _, _, text = drill(tmp_path, Provider(bystander="node3"))
    result = judge(text, "fault.drill.bystanders")
    assert result["status"] == "fail" and result["value"] == ["node3"] and "timed out" in result["summary"]


def test_slow_detection_warns_then_fails_against_the_bar(tmp_path):
    _, _, text = drill(tmp_path, Provider(detect_after=90, reboot_after=None, resume_after=95), detect_limit_s=300,
                       return_limit_s=200)
    assert judge(text, "fault.inject.detection")["status"] == "warn"
    _, _, text = drill(tmp_path / "b", Provider(detect_after=150, reboot_after=None, resume_after=None),
                       detect_limit_s=300, return_limit_s=160)
    assert judge(text, "fault.inject.detection")["status"] == "fail"


def test_nvl72_needs_no_return(tmp_path):
    _, _, text = drill(tmp_path, Provider(reboot_after=None, resume_after=None), return_limit_s=10)
    result = judge(text, "fault.inject.return", facts={"gpu_model": "NVIDIA GB200"})
    assert result["status"] == "skip" and "detection and no new jobs" in result["summary"]
    assert judge(text, "fault.inject.return")["status"] == "fail"


def test_auto_falls_back_from_dcgm_to_the_kernel_log(tmp_path):
    node, d, _ = drill(tmp_path, Provider(dcgm=False), method="auto")
    assert d.method == "kmsg"
    assert not any("test --inject" in c for c in node.commands)


def test_benign_xid_drained_is_an_over_reaction(tmp_path):
    _, _, text = drill(tmp_path, Provider(), xid=13)
    assert judge(text, "fault.inject.detection")["status"] == "skip"
    assert judge(text, "fault.inject.action")["status"] == "warn"


def test_dry_run_changes_nothing_and_says_what_it_would_run(tmp_path):
    node, d, text = drill(tmp_path, Provider(), dry_run=True)
    assert d.end["reason"] == "dry_run" and not node.journal and node.t0 is None
    result = judge(text, "fault.inject.detection")
    assert result["status"] == "skip" and "/dev/kmsg" in result["summary"]


def test_interrupted_drill_restores_and_keeps_its_log(tmp_path):
    node = None
    node_provider = Provider(detect_after=None, reboot_after=None, resume_after=None)
    original = FakeNode.__init__

    def with_interrupt(self, *a, **k):
        original(self, *a, **k)
        self.interrupt_at = 1003.0

    FakeNode.__init__ = with_interrupt  # type: ignore[method-assign]
    try:
        node, d, text = drill(tmp_path, node_provider)
    finally:
        FakeNode.__init__ = original  # type: ignore[method-assign]
    assert d.end["reason"] == "interrupted"
    assert any(j[0] == "restored" for j in node.journal)
    last = json.loads(text.strip().splitlines()[-1])
    assert last["kind"] == "end" and last["reason"] == "interrupted"
    assert judge(text, "fault.inject.detection")["status"] == "error"


@pytest.mark.parametrize("cut", ["torn", "no_end", "garbage"])
def test_truncated_logs_are_read_or_refused_clearly(tmp_path, cut):
    _, _, text = drill(tmp_path, Provider())
    lines = text.splitlines(keepends=True)
    if cut == "torn":
        broken = "".join(lines[:-1]) + lines[-1][:20]
        parsed = parse("fault-drill-log", broken)
        assert not parsed["complete"] and parsed["end"] is None
        assert judge(broken, "fault.inject.detection")["status"] in ("pass", "error")
    elif cut == "no_end":
        parsed = parse("fault-drill-log", "".join(lines[:-1]))
        assert "no end entry" in parsed["warnings"][-1]
    else:
        result = judge("not json at all\n", "fault.inject.detection")
        assert result["status"] == "error" and "cannot be read" in result["summary"]


def test_node_not_in_service_before_the_drill_is_skipped(tmp_path):
    node = FakeNode(Provider())
    node._state = lambda: ("IDLE+DRAIN", "maintenance")  # type: ignore[method-assign]
    path = str(tmp_path / "log.jsonl")
    s = runner.Settings(kind="inject", target="node2", targets=["node2"], method="kmsg")
    d = runner.Drill(node, s, runner.DrillLog(path, node.clock), runner.Journal(lambda *a: "j", lambda *a: None),
                     clock=node.clock, sleep=node.sleep)
    d.run()
    assert d.end["reason"] == "not_in_service" and "maintenance" in d.end["detail"]
    with open(path, encoding="utf-8") as fh:
        assert judge(fh.read(), "fault.inject.detection")["status"] == "skip"


@pytest.mark.parametrize("method", ["dcgm", "kmsg", "sbr"])
def test_every_step_is_valid_shell(method):
    import subprocess

    from clustereval.drills import commands

    steps = [commands.prepare(method, 0, "00000000:18:00.0", 79),
             commands.inject(method, 0, "00000000:18:00.0", 79, "0000:17:00.0", "0002"),
             commands.undo(method, 0, "00000000:18:00.0", 79, 8, "systemctl reboot", "0000:17:00.0", "0002"),
             commands.poll("node1", gpus=True), commands.poll("node1", scheduler="none"),
             commands.kubectl_node("node1"), commands.kubectl_nodes(), commands.gpu_bus_ids(),
             commands.reboot("systemctl reboot"),
             commands.gpu_job("node1", "srun -w {node} nvidia-smi -L", 30)]
    for step in steps:
        assert subprocess.run(["sh", "-n", "-c", step]).returncode == 0, step
    assert commands.kmsg_line(79, "00000000:3B:00.0") == \
        "NVRM: Xid (PCI:0000:3b:00): 79, pid=0, name=clustereval-drill, GPU has fallen off the bus."


class FakeK8s(FakeNode):
    """The same node under Kubernetes: the API server's view comes from kubectl on the controller."""

    cordoned: bool = False
    pods: int = 0

    def _node(self, name: str) -> dict[str, Any]:
        ready, conditions, taints, unschedulable = "True", [], [], False
        if name == "node2":
            since = self._since()
            p = self.provider
            if self.reboot_at is not None and self.reboot_at + 0.5 <= self.now < self.reboot_at + p.down_for + 1:
                ready = "Unknown"
                taints.append({"key": "node.kubernetes.io/unreachable", "effect": "NoSchedule"})
            if self.kind == "inject" and since is not None and p.detect_after is not None and since >= p.detect_after \
                    and not (p.resume_after is not None and since >= p.resume_after):
                conditions.append({"type": "NvidiaGPUProblem", "status": "True", "reason": "XID79",
                                   "message": "NVRM: Xid 79"})
            unschedulable = self.cordoned
        conditions.append({"type": "Ready", "status": ready, "reason": "KubeletReady" if ready == "True"
                           else "NodeStatusUnknown"})
        # a GPU pool's own dedication taint: there before the drill, so no finding
        taints.append({"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"})
        return {"metadata": {"name": name, "labels": {}},
                "spec": {"unschedulable": unschedulable, "taints": taints},
                "status": {"conditions": conditions, "allocatable": {"nvidia.com/gpu": "8"},
                           "nodeInfo": {"bootID": f"boot-{self.boot}" if name == "node2" else "boot-x"}}}

    def local(self, cmd: str, timeout_s: float) -> tuple[int, str, str]:
        self.now += 0.02
        self._tick()
        self._booted()
        self.commands.append("local: " + cmd)
        if "kubectl get node node2 -o json" in cmd:
            return 0, "## kubectl_node rc=0\n" + json.dumps({"kind": "Node", **self._node("node2")}) + "\n", ""
        if "kubectl get nodes -o json" in cmd:
            doc = {"apiVersion": "v1", "kind": "List", "items": [self._node(n) for n in NODES]}
            return 0, "## kubectl rc=0\n" + json.dumps(doc) + "\n", ""
        if cmd.startswith("kubectl cordon"):
            self.cordoned = True
            return 0, "node/node2 cordoned\n", ""
        if cmd.startswith("kubectl drain"):
            return 0, "node/node2 already cordoned\nnode/node2 drained\n", ""
        if cmd.startswith("kubectl uncordon"):
            self.cordoned = False
            return 0, "node/node2 uncordoned\n", ""
        if "kubectl create" in cmd:
            self.pods += 1
            return 0, "## job rc=0 phase=Succeeded\n" + GPU.format(i=0) + "\n", ""
        return 0, "", ""

    def _state(self) -> tuple[str, str | None]:
        return "IDLE", None


def k8s_drill(tmp_path, provider: Provider, kind: str):
    node = FakeK8s(provider, kind=kind)
    path = str(tmp_path / f"fault-{kind}.jsonl")
    journal: list[tuple[str, bool]] = []
    s = runner.Settings(kind=kind, target="node2", targets=["node2"], method="kmsg", poll_s=0.5, detect_limit_s=30,
                        return_limit_s=60, job_every_s=1, scheduler="k8s")
    d = runner.Drill(node, s, runner.DrillLog(path, node.clock),
                     runner.Journal(lambda what, undo, detail, ctl: journal.append((undo, ctl)) or f"j{len(journal)}",
                                    lambda *a: None), clock=node.clock, sleep=node.sleep)
    d.run()
    with open(path, encoding="utf-8") as fh:
        return node, d, fh.read(), journal


def test_k8s_reboot_cordons_drains_waits_for_a_new_boot_id_and_a_gpu_pod(tmp_path):
    node, d, text, journal = k8s_drill(tmp_path, Provider(), "reboot")
    assert d.end["reason"] == "complete", d.end
    local = [c for c in node.commands if c.startswith("local: kubectl") and "get nodes" not in c]
    assert [c.split()[2] for c in local[:3]] == ["cordon", "drain", "uncordon"] and node.pods >= 1
    assert ("kubectl uncordon node2", True) in journal and not node.cordoned
    result = judge(text, "fault.reboot.recovery")
    assert result["status"] == "pass", result
    assert list(result["evidence"]["timeline"]) == ["down", "ssh_back", "new_boot", "returned", "gpu_job"]


def test_k8s_detection_by_a_node_condition_and_return(tmp_path):
    _, d, text, _ = k8s_drill(tmp_path, Provider(), "inject")
    assert d.end["reason"] == "complete", d.end
    detection = judge(text, "fault.inject.detection")
    assert detection["status"] == "pass" and "NvidiaGPUProblem" in detection["summary"], detection
    assert judge(text, "fault.inject.return")["status"] == "pass"
    assert judge(text, "fault.drill.bystanders")["status"] == "pass"  # the dedication taint is no finding


def test_an_alert_naming_the_node_counts_as_detection(tmp_path, monkeypatch):
    import http.server
    import threading

    seen_auth = []

    class Alertmanager(http.server.BaseHTTPRequestHandler):
        node: FakeNode | None = None

        def do_GET(self):
            seen_auth.append(self.headers.get("Authorization"))
            alerts = [{"labels": {"alertname": "NodeExporterDown", "instance": "node3:9100"},
                       "status": {"state": "active"}, "startsAt": "2026-12-01T00:00:00Z"}]
            if self.node is not None and self.node.t0 is not None and self.node.now - self.node.t0 > 2:
                alerts.append({"labels": {"alertname": "GpuXidError", "Hostname": "node2", "gpu": "0"},
                               "status": {"state": "active"}, "startsAt": "2026-12-01T12:00:00Z"})
            body = json.dumps(alerts).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Alertmanager)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("CLUSTEREVAL_ALERTMANAGER_TOKEN", "s3cret-token")
    try:
        node = FakeNode(Provider(detect_after=None, reboot_after=None, resume_after=None))
        Alertmanager.node = node
        path = str(tmp_path / "alert.jsonl")
        s = runner.Settings(kind="inject", target="node2", targets=["node2"], method="kmsg", poll_s=0.5,
                            detect_limit_s=10, return_limit_s=None,
                            alert_url=f"http://127.0.0.1:{server.server_port}")
        d = runner.Drill(node, s, runner.DrillLog(path, node.clock), runner.Journal(lambda *a: "j", lambda *a: None),
                         clock=node.clock, sleep=node.sleep)
        d.run()
    finally:
        server.shutdown()
    with open(path, encoding="utf-8") as fh:
        text = fh.read()
    assert d.end["reason"] == "detected"
    detection = judge(text, "fault.inject.detection")
    assert detection["status"] == "pass" and "alert GpuXidError" in detection["summary"], detection
    assert "NodeExporterDown" not in detection["summary"]  # another node's alert
    assert seen_auth and seen_auth[0] == "Bearer s3cret-token" and "s3cret-token" not in text


def test_an_unreachable_alertmanager_is_no_detection_and_no_crash(tmp_path):
    said = runner.alertmanager_alerts("http://127.0.0.1:9")  # nothing listens on the discard port
    assert said.startswith("## alerts rc=1")
    parsed = parse("probe-drill-step", said)
    assert parsed["alerts"]["rc"] == 1 and parsed["alerts"]["firing"] == []


def test_a_spare_in_service_counts_as_capacity_back(tmp_path):
    _, d, text = drill(tmp_path, Provider(reboot_after=None, resume_after=None, spare_after=8), return_limit_s=20)
    assert d.end["reason"] == "not_returned"
    back = judge(text, "fault.inject.return")
    assert back["status"] == "pass" and "spare node3" in back["summary"] and 7.5 < back["value"] < 9, back
    assert judge(text, "fault.drill.bystanders")["status"] == "pass"  # a spare coming in is no bystander
    assert judge(text, "fault.inject.cleared")["status"] == "skip"


def test_a_node_without_slurm_client_is_skipped_with_the_way_out(tmp_path):
    node = FakeNode(Provider(), no_slurm=True)
    path = str(tmp_path / "log.jsonl")
    s = runner.Settings(kind="reboot", target="node2", targets=["node2"])
    d = runner.Drill(node, s, runner.DrillLog(path, node.clock), runner.Journal(lambda *a: "j", lambda *a: None),
                     clock=node.clock, sleep=node.sleep)
    d.run()
    assert d.end["reason"] == "no_scheduler" and "clustereval_harness=k8s" in d.end["detail"]
    assert node.t0 is None  # nothing was rebooted
    with open(path, encoding="utf-8") as fh:
        result = judge(fh.read(), "fault.reboot.recovery")
    assert result["status"] == "skip" and "scontrol is not installed" in result["summary"]
