"""Run one drill on one node: observe, act, observe until the provider has answered or a limit passed, restore.

The runner talks to the node only through a :class:`Link` (the action plugin's SSH connection; a fake in the
unit tests), writes every step to the drill log the moment it has its answer (so an interrupted drill keeps
everything it saw), and journals each change before making it (``journal`` callbacks). Whatever ends the
drill — the provider answered, a limit passed, the node vanished, Ctrl-C — the restore runs in ``finally``
and the log gets its ``end`` line.
"""

from __future__ import annotations

import json
import os
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from clustereval.drills import RAS_UMC_UE, auto_order, commands, timeline
from clustereval.interrupts import Interrupted
from clustereval.parsers.probe_drill import parse_step

POLL_TIMEOUT_S = 60.0
K8S_LIST_EVERY_S = 5.0


class Unreachable(Exception):
    """The node did not answer over SSH (the message says how)."""


class Link(Protocol):
    def run(self, cmd: str, timeout_s: float) -> tuple[int, str, str]: ...

    def reset(self) -> None: ...

    def port_open(self) -> bool | None: ...

    def local(self, cmd: str, timeout_s: float) -> tuple[int, str, str]: ...


@dataclass
class Settings:
    kind: str
    target: str
    targets: list[str]
    method: str = "auto"
    xid: int = 79
    gpu: int = 0
    reboot_cmd: str = "systemctl reboot"
    # "{gpu_list}": the node's own GPU listing (nvidia-smi -L, or amd-smi list on an AMD node).
    gpu_job_cmd: str = "srun -w {node} -N1 -n1 --gres=gpu:1 -t 2 --immediate=10 {gpu_list}"
    poll_s: float = 0.5
    detect_limit_s: float = 600.0
    return_limit_s: float | None = 3600.0
    job_timeout_s: float = 120.0
    job_every_s: float = 5.0
    dry_run: bool = False
    scheduler: str = "slurm"
    k8s_namespace: str = "default"
    # "" = the node vendor's (commands.K8S_GPU_IMAGES: a CUDA base image, or ROCm's on an AMD node)
    k8s_gpu_image: str = ""
    drain_timeout_s: float = 300.0
    # An Alertmanager (v2 API) whose alerts about the node count as detection; its bearer token, if any, is read
    # from $CLUSTEREVAL_ALERTMANAGER_TOKEN at each request and never written anywhere.
    alert_url: str | None = None
    params: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # "{node}" in the reboot command is the target's name (`scontrol reboot ASAP nextstate=resume {node}`).
        self.reboot_cmd = self.reboot_cmd.replace("{node}", self.target)


def alertmanager_alerts(url: str) -> str:
    """``## alerts rc=0`` and the active alerts of an Alertmanager (``GET /api/v2/alerts``), or ``rc=1`` and why."""
    request = urllib.request.Request(url.rstrip("/") + "/api/v2/alerts?active=true&silenced=false&inhibited=false",
                                     headers={"Accept": "application/json"})
    token = os.environ.get("CLUSTEREVAL_ALERTMANAGER_TOKEN")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=5) as answer:
            return "## alerts rc=0\n" + answer.read(2_000_000).decode("utf-8", "replace") + "\n"
    except (OSError, ValueError) as exc:
        return f"## alerts rc=1\n{type(exc).__name__}: {str(exc)[:200]}\n"


class DrillLog:
    """The drill's log file, one JSON object a line, appended and flushed as each step is answered."""

    def __init__(self, path: str, clock: Callable[[], float]):
        self.path, self.clock = path, clock
        self.entries: list[dict[str, Any]] = []
        os.makedirs(os.path.dirname(path), exist_ok=True)
        self._fh = open(path, "a", encoding="utf-8")  # noqa: SIM115 - closed in close()

    def add(self, entry: dict[str, Any]) -> dict[str, Any]:
        self._fh.write(json.dumps(entry, sort_keys=True, default=str) + "\n")
        self._fh.flush()
        if isinstance(entry.get("stdout"), str):
            entry = {**entry, "observed": parse_step(entry["stdout"])}
        self.entries.append(entry)
        return entry

    def close(self) -> None:
        try:
            os.fsync(self._fh.fileno())
        finally:
            self._fh.close()


@dataclass
class Journal:
    """How the runner journals a change before it makes it (``controller``: undone from the controller, a
    Kubernetes object; else on the node), and closes the entry once restored."""

    applied: Callable[[str, str, dict[str, Any], bool], str]
    restored: Callable[[str, str, dict[str, Any]], None]


class Drill:
    def __init__(self, link: Link, settings: Settings, log: DrillLog, journal: Journal,
                 clock: Callable[[], float] = time.time, sleep: Callable[[float], None] = time.sleep,
                 fetch_alerts: Callable[[str], str] | None = None,
                 before_restore: Callable[[], None] | None = None):
        self.link, self.s, self.log, self.journal = link, settings, log, journal
        self.clock, self.sleep = clock, sleep
        self.fetch_alerts = fetch_alerts or alertmanager_alerts
        self.before_restore = before_restore  # e.g. stop signals from cutting the restore short
        self.t0: float | None = None
        self.method: str | None = None
        self.pending: list[tuple[str, str, bool]] = []  # (journal id, undo command, on the controller) applied
        self.cordoned = False
        self.polls = 0
        self.use_port_check = True
        self.end: dict[str, Any] = {}
        self.reachable = True
        # What the node's own tools say its GPUs are (the gpu_bus step), and on an AMD node the fault injected
        # instead of the Xid (results name it: ``fault``).
        self.vendor: str | None = None
        self.fault: str | None = None

    # ------------------------------------------------------------------ steps
    def _step(self, kind: str, step: str, cmd: str, timeout_s: float = POLL_TIMEOUT_S, local: bool = False,
              **extra: Any) -> dict[str, Any]:
        sent = self.clock()
        if local:  # on the controller (kubectl): never the node's reachability
            rc, out, err = self.link.local(cmd, timeout_s)
            return self.log.add({"kind": kind, "step": step, "sent": sent, "received": self.clock(), "ok": True,
                                 "rc": rc, "stdout": out, "stderr": err[-2000:], "cmd": cmd, "where": "controller",
                                 **extra})
        answer = self._on_node(cmd, timeout_s)
        return self.log.add({"kind": kind, "step": step, "sent": sent, "received": self.clock(), **answer,
                             **({"cmd": cmd} if answer["ok"] else {}), **extra})

    def _on_node(self, cmd: str, timeout_s: float) -> dict[str, Any]:
        """``cmd`` over SSH: its answer, or why the node did not answer (then the connection is reset and the
        node counts as unreachable until it answers again)."""
        try:
            rc, out, err = self.link.run(cmd, timeout_s)
        except Unreachable as exc:
            self.reachable = False
            self.link.reset()
            return {"ok": False, "error": str(exc)[:500]}
        self.reachable = True
        return {"ok": True, "rc": rc, "stdout": out, "stderr": err[-2000:]}

    def _poll(self, gpus: bool = False) -> dict[str, Any]:
        """One observation: the node over SSH (its boot id, Slurm's view, GPUs) and, on Kubernetes, the API
        server's view of every node from the controller, which also sees the node while it is down."""
        sent = self.clock()
        api = ""
        if self.s.scheduler == "k8s":
            # The node every poll; every node (a 1000-node list is megabytes) every few seconds, for bystanders.
            every = max(1, round(K8S_LIST_EVERY_S / max(self.s.poll_s, 0.1)))
            wanted = [commands.kubectl_node(self.s.target)]
            if self.polls % every == 0:
                wanted.append(commands.kubectl_nodes())
            for cmd in wanted:
                rc, out, err = self.link.local(cmd, POLL_TIMEOUT_S)
                api += out if out.startswith("## ") else f"## kubectl rc={rc}\n{err[-500:]}\n"
        self.polls += 1
        node_cmd = commands.poll(self.s.target, gpus=gpus,
                                 scheduler="slurm" if self.s.scheduler == "slurm" else "none")
        if not self.reachable and self.use_port_check and self.link.port_open() is False:
            entry: dict[str, Any] = {"ok": False, "error": "the SSH port does not answer"}
        else:
            entry = self._on_node(node_cmd, POLL_TIMEOUT_S)
        if api:
            entry["stdout"] = (entry.get("stdout") or "") + "\n" + api
        if self.s.alert_url:
            entry["stdout"] = (entry.get("stdout") or "") + "\n" + self.fetch_alerts(self.s.alert_url)
        return self.log.add({"kind": "poll", "step": "poll", "sent": sent, "received": self.clock(), **entry})

    def _finish(self, reason: str, **detail: Any) -> None:
        if not self.end:
            self.end = {"reason": reason, **detail}

    # ------------------------------------------------------------------ the drill
    def run(self) -> dict[str, Any]:
        s = self.s
        self.log.add({"kind": "start", "at": self.clock(), "drill": s.kind, "target": s.target, "targets": s.targets,
                      "method": s.method, "xid": s.xid if s.kind == "inject" else None, "gpu": s.gpu,
                      "dry_run": s.dry_run, "params": s.params,
                      "poll_cmd": commands.poll(s.target, gpus=True, scheduler=s.scheduler),
                      "limits": {"detect_s": s.detect_limit_s, "return_s": s.return_limit_s, "poll_s": s.poll_s}})
        try:
            self._drill()
        except BaseException as exc:
            self._finish("interrupted" if isinstance(exc, KeyboardInterrupt | Interrupted) else "error",
                         detail=f"{type(exc).__name__}: {exc}"[:500])
            raise
        finally:
            try:
                if self.before_restore is not None:
                    self.before_restore()
                self._restore()
            finally:
                if self.vendor:
                    self.end.update(vendor=self.vendor, **({"fault": self.fault} if self.fault else {}))
                self.log.add({"kind": "end", "at": self.clock(), "method": self.method, "t0": self.t0, **self.end})
                self.log.close()
        return self.end

    def _drill(self) -> None:
        s = self.s
        first = self._poll(gpus=True)
        if not first.get("ok"):
            self._finish("unreachable", detail=f"{s.target} did not answer before the drill: {first.get('error')}")
            return
        if self.link.port_open() is False:
            self.use_port_check = False  # reached through a proxy: only SSH itself can tell
        listed = first["observed"].get("gpus") or {}
        if listed.get("tool") == "amd-smi":  # no nvidia-smi on the node, amd-smi there
            self.vendor = "amd"
        elif timeline.gpus_listed(listed):
            self.vendor = "nvidia"
        state = timeline.target_state(first, s.target)
        scheduler = (first["observed"].get("scheduler") or {})
        tool = "kubectl on the controller" if s.scheduler == "k8s" else f"scontrol on {s.target}"
        if scheduler.get("missing") or (s.scheduler == "slurm" and not scheduler):
            self._finish("no_scheduler", detail=f"scontrol is not installed on {s.target}: a Slurm drill reads the "
                                                "scheduler there (for Kubernetes set clustereval_harness=k8s)")
            return
        if scheduler.get("rc") != 0:
            self._finish("no_scheduler", detail=f"{tool} did not answer (rc {scheduler.get('rc')}): "
                                                f"{str(scheduler.get('output'))[-300:]}")
            return
        if state is None or not state.get("usable"):
            why = f"is not known to {'Kubernetes' if s.scheduler == 'k8s' else 'Slurm'}" if state is None else \
                f"is {state.get('state')} ({state.get('reason') or 'no reason'})"
            self._finish("not_in_service", detail=f"{s.target} {why} before the drill; a drill needs a node in service")
            return
        bus = {}
        if s.kind == "inject":
            observed = self._step("step", "gpu_bus", commands.gpu_bus_ids()).get("observed") or {}
            bus = observed.get("gpu_bus") or {}
            self.vendor = observed.get("gpu_vendor") or self.vendor or "nvidia"
            self.fault = RAS_UMC_UE if self.vendor == "amd" else None
            if s.gpu not in bus:
                tool = "amd-smi list (physical GPUs)" if self.vendor == "amd" else "nvidia-smi"
                self._finish("unavailable", detail=f"GPU {s.gpu} is not listed by {tool} on {s.target} "
                                                   f"(GPUs: {sorted(bus)})")
                return
        if s.dry_run:
            self._dry_run(bus.get(s.gpu))
            return
        if s.kind == "reboot":
            if s.scheduler == "k8s" and not self._cordon_and_drain():
                return
            jid = self.journal.applied(f"reboot ({s.reboot_cmd})", "true",
                                       {"command": s.reboot_cmd, "note": "a reboot is not undone; it is "
                                        "closed once the node is back"}, False)
            step = self._step("step", "reboot", commands.reboot(s.reboot_cmd))
            # A node that goes down before the step has answered has rebooted: that is no failure.
            if step.get("ok") and step.get("rc") not in (0, None):
                self.journal.restored(jid, "not applied", {"error": step.get("error") or step.get("stderr")})
                self._finish("error", detail=f"the reboot command failed: {step.get('error') or step.get('stderr')}")
                return
            self.pending.append((jid, "", False))
            self._mark_fault(step)
        elif not self._inject(bus[s.gpu]):
            return
        self._observe()

    def _cordon_and_drain(self) -> bool:
        """Kubernetes: take the node out of service the way a maintenance does before its reboot (journaled:
        uncordoned again once it is back, or by the restore)."""
        s = self.s
        undo = commands.uncordon(s.target)
        jid = self.journal.applied(f"cordon and drain {s.target}", undo, {"command": commands.cordon(s.target)}, True)
        self.pending.append((jid, undo, True))
        self.cordoned = True
        for step, cmd in (("cordon", commands.cordon(s.target)), ("drain", commands.drain(s.target,
                                                                                            int(s.drain_timeout_s)))):
            done = self._step("step", step, cmd, timeout_s=s.drain_timeout_s + 30, local=True)
            if done.get("rc") != 0:
                self._finish("error", detail=f"`{cmd}` failed (rc {done.get('rc')}): "
                                             f"{(done.get('stderr') or done.get('stdout') or '').strip()[-300:]}")
                return False
        return True

    def _uncordon_when_back(self, tl: timeline.Timeline) -> None:
        """Kubernetes reboot: our cordon is lifted once the node is Ready again after its reboot."""
        state = tl.last
        if not self.cordoned or "new_boot" not in tl.milestones or state.get("state") == "not_ready":
            return
        for jid, undo, local in list(self.pending):
            if local and undo == commands.uncordon(self.s.target):
                step = self._step("step", "uncordon", undo, local=True)
                if step.get("rc") == 0:
                    self.journal.restored(jid, "restored", {"command": undo})
                    self.pending.remove((jid, undo, local))
                    self.cordoned = False

    def _mark_fault(self, step: dict[str, Any]) -> None:
        observed = step.get("observed") or {}
        node_fault, node_end = observed.get("fault_at"), observed.get("restored_at")
        # The fault's time on the controller's clock: when the answer came, less what the node says passed
        # between the fault and the end of the step (a bus reset is held for a while). Node clock differences
        # only: a node's clock offset never enters.
        self.t0 = float(step["received"])
        if node_fault is not None and node_end is not None:
            self.t0 -= max(0.0, float(node_end) - float(node_fault))
        self.log.add({"kind": "fault", "step": step["step"], "fault_at": self.t0, "node_clock": node_fault,
                      "sent": step["sent"], "received": step["received"]})

    def _methods(self) -> tuple[str, ...]:
        return auto_order(self.vendor) if self.s.method == "auto" else (self.s.method,)

    def _fault_extra(self) -> dict[str, Any]:
        """What a step entry says about the fault, beside its method (an AMD node's: the RAS fault)."""
        return {"fault": self.fault, "vendor": self.vendor} if self.fault else {}

    def _inject(self, bus_id: str) -> bool:
        s = self.s
        tried = []
        vendor = self.vendor or "nvidia"
        for method in self._methods():
            ready = self._step("step", f"prepare-{method}", commands.prepare(method, s.gpu, bus_id, s.xid, vendor))
            observed = ready.get("observed") or {}
            if not ready.get("ok") or observed.get("unavailable") or ready.get("rc") != 0:
                tried.append(f"{method}: {observed.get('unavailable') or ready.get('error') or ready.get('stderr')}")
                continue
            extra = observed.get("ready") or {}
            bridge, control, ctrl = extra.get("bridge"), extra.get("control"), extra.get("ctrl")
            undo = commands.undo(method, s.gpu, bus_id, s.xid, self._gpus_before(), s.reboot_cmd, bridge, control,
                                 vendor=vendor, ctrl=ctrl)
            cmd = commands.inject(method, s.gpu, bus_id, s.xid, bridge, control, vendor=vendor, ctrl=ctrl)
            injected = f"an uncorrectable UMC RAS error ({self.fault})" if self.fault else f"Xid {s.xid}"
            what = f"{injected} on GPU {s.gpu} ({bus_id}) by {method}"
            detail = {"method": method, "command": cmd, "undo": undo,
                      "line": commands.kmsg_line(s.xid, bus_id, vendor) if method == "kmsg" else None,
                      "bridge": bridge, "bridge_control": control}
            if self.fault:
                detail.update(fault=self.fault, ras_ctrl=ctrl)
            jid = self.journal.applied(what, undo, detail, False)
            step = self._step("step", "inject", cmd, method=method, **self._fault_extra())
            if step.get("ok") and step.get("rc") == 0:
                self.method = method
                self.pending.append((jid, undo, False))
                self._mark_fault(step)
                return True
            said_by = (step.get("observed") or {}).get("said") or {}
            said = said_by.get("dcgmi") or said_by.get("ras") or step.get("stderr") or step.get("error") or ""
            self.journal.restored(jid, "not applied", {"rc": step.get("rc"), "said": said[-300:]})
            tried.append(f"{method}: exit {step.get('rc')}: {said.strip()[-200:]}")
        self._finish("unavailable", detail="no injection method worked: " + "; ".join(tried))
        return False

    def _gpus_before(self) -> int:
        for entry in self.log.entries:
            gpus = (entry.get("observed") or {}).get("gpus") or {}
            if timeline.gpus_listed(gpus):
                return int(gpus.get("count") or 0)
        return 1

    def _dry_run(self, bus_id: str | None) -> None:
        s = self.s
        plan = []
        if s.kind == "reboot":
            plan.append({"step": "reboot", "command": s.reboot_cmd})
        else:
            vendor = self.vendor or "nvidia"
            for method in self._methods():
                ready = self._step("step", f"prepare-{method}",
                                   commands.prepare(method, s.gpu, str(bus_id), s.xid, vendor))
                extra = (ready.get("observed") or {}).get("ready")
                possible = extra is not None and ready.get("rc") == 0
                why = (ready.get("observed") or {}).get("unavailable") or ready.get("error")
                plan.append({"method": method, "possible": possible, "why_not": why, **self._fault_extra(),
                             "command": commands.inject(method, s.gpu, str(bus_id), s.xid, extra.get("bridge"),
                                                        extra.get("control"), vendor=vendor, ctrl=extra.get("ctrl"))
                             if possible else None})
                if possible and s.method == "auto":
                    break
        plan.append({"step": "observe", "poll_s": s.poll_s, "detect_limit_s": s.detect_limit_s,
                     "return_limit_s": s.return_limit_s, "gpu_job": self._gpu_job_cmd().replace("{node}", s.target)})
        self._finish("dry_run", plan=plan)

    def _observe(self) -> None:
        s = self.s
        assert self.t0 is not None
        next_job = 0.0
        while True:
            now = self.clock()
            tl = timeline.build({"entries": self.log.entries, "start": self.log.entries[0], "end": None})
            stones = tl.milestones
            if "gpu_job" in stones:
                self._poll(gpus=True)  # what the node looks like once back: is the fault gone?
                self._finish("complete")
                return
            if s.kind == "inject" and "detected" not in stones and now - self.t0 > s.detect_limit_s:
                self._finish("not_detected", detail=f"nothing detected within {s.detect_limit_s:g} s")
                return
            if s.kind == "inject" and "detected" in stones and s.return_limit_s is None:
                self._finish("detected", detail="detection is what this drill waits for (return not awaited)")
                return
            limit = s.return_limit_s if s.return_limit_s is not None else s.detect_limit_s
            if now - self.t0 > limit:
                self._finish("not_returned", detail=f"not back in service within {limit:g} s")
                return
            if s.scheduler == "k8s":
                self._uncordon_when_back(tl)
            if "returned" in stones and self.reachable and now >= next_job:
                self._gpu_job()
                next_job = self.clock() + s.job_every_s
                continue
            started = self.clock()
            # GPUs watched while they may be off the bus: a bus reset; an injected RAS error (the driver resets the GPU)
            self._poll(gpus=s.method == "sbr" or self.method == "ras" or "returned" in stones)
            self.sleep(max(0.0, s.poll_s - (self.clock() - started)))

    def _gpu_job_cmd(self) -> str:
        """The GPU job's command with ``{gpu_list}`` as this node lists its GPUs."""
        return self.s.gpu_job_cmd.replace("{gpu_list}", commands.gpu_list(self.vendor))

    def _gpu_job(self) -> None:
        s = self.s
        if s.scheduler != "k8s":
            self._step("job", "gpu_job", commands.gpu_job(s.target, self._gpu_job_cmd(), int(s.job_timeout_s)),
                       timeout_s=s.job_timeout_s + 30)
            return
        name = f"clustereval-drill-{s.target}-{int(self.clock() * 1000) % 10**8}".lower()[:63]
        undo = commands.delete_pod(name, s.k8s_namespace)
        vendor = "amd" if self.vendor == "amd" else "nvidia"
        image = s.k8s_gpu_image or commands.K8S_GPU_IMAGES[vendor]
        jid = self.journal.applied(f"GPU test pod {s.k8s_namespace}/{name} on {s.target}", undo,
                                   {"image": image}, True)
        self._step("job", "gpu_job", commands.k8s_gpu_job(s.target, name, s.k8s_namespace, image,
                                                          int(s.job_timeout_s), vendor),
                   timeout_s=s.job_timeout_s + 60, local=True)
        self.journal.restored(jid, "deleted", {"command": undo})

    def _restore(self) -> None:
        for jid, undo, local in list(self.pending):
            if not undo:  # a reboot: closed when the node came back
                back = any(e.get("kind") == "poll" and e.get("ok") for e in self.log.entries[-3:])
                if back and self.end.get("reason") == "complete":
                    self.journal.restored(jid, "back", {"note": "the node came back from its reboot"})
                    self.pending.remove((jid, undo, local))
                continue
            step = self._step("step", "restore", undo, timeout_s=120, local=local)
            if step.get("ok") and step.get("rc") == 0:
                self.journal.restored(jid, "restored", {"command": undo})
                self.pending.remove((jid, undo, local))
            else:
                self.end.setdefault("not_restored", []).append(
                    {"journal_id": jid, "command": undo, "error": step.get("error") or step.get("stderr")})
