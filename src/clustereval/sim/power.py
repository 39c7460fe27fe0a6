"""The simulated cluster's BMC, kernel and provider automation: one daemon per cluster (``power`` in state.json).

``python -m clustereval.sim.power D`` is started by :func:`clustereval.sim.cluster.up` and stopped first by
``down``. It does, for every reachable node:

* **power requests**: the node's ``systemctl reboot|poweroff``, ``reboot``, ``shutdown`` shims write
  ``/sim/power/request`` (``D/nodes/N/root/power/request`` on the host); :func:`request_power` does the same
  from the host. A reboot waits ``reboot.shutdown_s``, kills every process of the node (its recorded sshd,
  slurmd, exporters and shared filesystem client, their children, and anything else in its mount namespace), waits
  ``reboot.down_s``, gives the node a fresh boot (:func:`cluster.fresh_boot`: new boot id, empty ring
  buffer, empty /sim/run, PCI config spaces reset), starts a new namespace with its sshd, and after
  ``reboot.slurmd_s`` its slurmd, exporters and shared filesystem. Reboots of several nodes run at once.
* **kernel messages**: ``/dev/kmsg`` of the node is a FIFO (``D/nodes/N/kmsg.fifo``); each line written to it
  loses its ``<N>`` priority prefix and is appended to ``/sim/kmsg`` as ``[ secs.usecs] text`` (seconds since
  the node's simulated boot) and, when the node keeps its own ``/var/log/kern.log``, in rsyslog's format.
* **secondary bus reset**: it polls every bridge control word of the node's PCI sysfs (sim/pcisysfs.py) every
  50 ms; once bit 0x40 is seen set, the GPUs below that bridge fall off the bus: the driver's Xid 79 lines go
  to the kernel log and the GPUs are recorded lost in ``/sim/run/runtime.json`` (the shims read it) until the
  next boot.
* **Kubernetes** (clusters with ``k8s: {enabled: true}``): the kubelets (node status, pods), the node lifecycle
  controller and the provider's GPU health agent (``provider.k8s``), in :mod:`clustereval.sim.k8s_provider`.
* **remediation**: every second it reads ``sinfo``; a node drained for ``remediation.after_s`` is rebooted
  and resumed (``reboot``) or just resumed (``resume``); a drain elsewhere resumes the spare node.

Every event goes to the node's ground truth (``D/nodes/N/ground-truth.jsonl``, :func:`cluster.ground_truth`).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import selectors
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from clustereval.sim import cluster, k8s_provider, pcisysfs

POLL_S = 0.05
SLURM_POLL_S = 1.0
PRIORITY = re.compile(r"^<(\d+)>")
XID_CODE = re.compile(r"NVRM: Xid \([^)]*\): (\d+)")
ACTIONS = ("reboot", "poweroff")


def request_power(directory: str | Path, node: str, action: str = "reboot", by: str = "api") -> None:
    """Ask the BMC to reboot (or power off) ``node``, as the node's ``systemctl reboot`` does."""
    if action not in (*ACTIONS, "poweron"):
        raise ValueError(f"action must be one of {(*ACTIONS, 'poweron')}")
    folder = Path(directory).resolve() / "nodes" / node / "root" / "power"
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".request.{os.getpid()}"
    tmp.write_text(json.dumps({"action": action, "by": by, "t": time.time()}))
    tmp.replace(folder / "request")


def rsyslog_stamp(now: float) -> str:
    """``2026-11-30T00:20:00.123456+00:00`` as Debian 12's rsyslog writes (same as the nvidia-smi shim's)."""
    local = time.localtime(now)
    offset = time.strftime("%z", local)
    return (time.strftime("%Y-%m-%dT%H:%M:%S", local) + f".{int(now % 1 * 1e6):06d}" + offset[:3] + ":"
            + offset[3:])


class Node:
    """One simulated node as the BMC sees it."""

    def __init__(self, bmc: Bmc, boot: dict[str, Any]) -> None:
        self.bmc, self.boot = bmc, boot
        self.name = boot["name"]
        self.dir = bmc.directory / "nodes" / self.name
        self.root = self.dir / "root"
        self.provider = boot["provider"]
        self.kern_log = (boot["state"].get("telemetry") or {}).get("kern_log")
        self.lock = threading.Lock()  # one power transition at a time
        self.busy = False
        self.powered = True
        self.kubelet_up = True  # started with the node's slurmd (reboot.slurmd_s after its sshd)
        self.lost: set[int] = set()
        self.sbr_active: set[str] = set()
        self.load_boot()

    def load_boot(self) -> None:
        try:
            self.boot_state = json.loads((self.dir / "boot-state.json").read_text())
        except (OSError, ValueError):
            self.boot_state = {"booted_at": time.time()}
        self.bridges = pcisysfs.watches(pcisysfs.topology(self.boot["state"]), self.dir / "pci")
        self.lost, self.sbr_active = set(), set()

    def event(self, event: str, **fields: Any) -> None:
        cluster.record_event(self.bmc.directory, self.name, event, **fields)

    # ------------------------------------------------------------------------------------- kernel log
    def kernel(self, texts: list[str]) -> list[str]:
        """Append driver/kernel messages to the ring buffer and, when the node has one, its kern.log."""
        now = time.time()
        secs = now - self.boot_state["booted_at"]
        ring = [f"[{secs + 4e-6 * k:12.6f}] {text}" for k, text in enumerate(texts)]
        with open(self.root / "kmsg", "a") as fh:
            fh.write("".join(line + "\n" for line in ring))
        pid = self.bmc.sshd_pid(self.name)
        if self.kern_log and pid:
            # through the node's own mount namespace: the file is its overlay file (overlays/monitoring.py)
            with contextlib.suppress(OSError), open(f"/proc/{pid}/root{self.kern_log}", "a") as fh:
                fh.write("".join(f"{rsyslog_stamp(now)} {self.name} kernel: {line}\n" for line in ring))
        return ring

    def kmsg_line(self, raw: str) -> None:
        text = PRIORITY.sub("", raw.rstrip("\r"))
        if not text:
            return
        (line,) = self.kernel([text])
        match = XID_CODE.search(text)
        self.event("fault", source="kmsg", line=line, **({"xid": int(match.group(1))} if match else {}))

    # ------------------------------------------------------------------------------------- PCI
    def poll_bridges(self) -> None:
        if not self.powered or self.busy:
            return
        for bridge in self.bridges:
            value = pcisysfs.bridge_control(bridge["config"])
            if value is None:
                continue
            if not value & pcisysfs.SECONDARY_BUS_RESET:
                self.sbr_active.discard(bridge["bdf"])
                continue
            if bridge["bdf"] in self.sbr_active:
                continue
            self.sbr_active.add(bridge["bdf"])
            fallen = [g for g in bridge["gpus"] if g not in self.lost]
            self.event("fault", source="sbr", bridge=bridge["bdf"], bridge_control=f"0x{value:04x}",
                       gpus=bridge["gpus"], xid=79 if fallen else None)
            if fallen:
                self.fall_off_bus(fallen)

    def fall_off_bus(self, indices: list[int]) -> None:
        gpus = {g["index"]: g for g in self.boot["state"]["gpus"]}
        texts = []
        for index in indices:
            bus = gpus[index]["pci_bus_id"][4:].lower()  # 0000:19:00.0
            texts.append(f"NVRM: Xid (PCI:{bus[:-2]}): 79, pid='<unknown>', name=<unknown>, "
                         "GPU has fallen off the bus.")
            texts.append(f"NVRM: GPU {bus}: GPU has fallen off the bus.")
        self.lost.update(indices)
        self.write_runtime()
        self.kernel(texts)

    def write_runtime(self) -> None:
        runtime = self.root / "run" / "runtime.json"
        with contextlib.suppress(OSError):
            tmp = runtime.with_suffix(".tmp")
            tmp.write_text(json.dumps({"boot_id": self.boot_state.get("boot_id"), "lost_gpus": sorted(self.lost)}))
            tmp.replace(runtime)

    # ------------------------------------------------------------------------------------- power
    def power(self, action: str, by: str) -> bool:
        """Start a reboot/poweroff/poweron in its own thread; False when one is already under way."""
        with self.lock:
            if self.busy:
                self.event("reboot_requested", action=action, by=by, ignored="a power transition is under way")
                return False
            self.busy = True
        self.event("reboot_requested", action=action, by=by)
        thread = threading.Thread(target=self._transition, args=(action,), daemon=True)
        thread.start()
        self.bmc.threads.append(thread)
        return True

    def _transition(self, action: str) -> None:
        try:
            timing = self.provider["reboot"]
            if action in ACTIONS and self.powered:
                if self.bmc.stop.wait(timing["shutdown_s"]):
                    return
                self.kubelet_up = False
                killed = self.bmc.kill_node(self.name)
                self.powered = False
                self.event("down", action=action, processes=len(killed))
            if action == "poweroff":
                return
            if self.bmc.stop.wait(timing["down_s"]):
                return
            self.boot_state = cluster.fresh_boot(self.bmc.directory, self.name, self.boot["state"])
            self.load_boot()
            if self.bmc.stop.is_set():
                return
            sshd = self.bmc.start_sshd(self)
            self.powered = True
            self.event("sshd_up", pid=sshd, boot_id=self.boot_state["boot_id"])
            if self.bmc.stop.wait(timing["slurmd_s"]):
                return
            before = self.bmc.slurmd_start_time(self.name)
            pid = self.bmc.start_slurmd(self, sshd)
            self.kubelet_up = True
            registered = cluster._wait(lambda: self.bmc.slurmd_start_time(self.name) not in (None, before), 30, 0.2)
            self.event("slurmd_up", pid=pid, registered=registered,
                       slurmd_start_time=self.bmc.slurmd_start_time(self.name))
        except Exception as exc:  # a failed boot is an event, never the end of the BMC
            self.event("boot_failed", error=str(exc))
            print(f"{self.name}: boot failed: {exc!r}", file=sys.stderr, flush=True)
        finally:
            self.busy = False


class Bmc:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.stop = threading.Event()
        self.state_lock = threading.Lock()
        self.threads: list[threading.Thread] = []
        state = cluster._read_state(directory) or {}
        self.nodes: dict[str, Node] = {}
        for name, info in state.get("nodes", {}).items():
            boot = directory / "nodes" / name / "boot.json"
            if not info.get("unreachable") and boot.exists():
                self.nodes[name] = Node(self, json.loads(boot.read_text()))
        self.slurm_env = cluster._slurm_env(directory)
        self.remediation: dict[str, dict[str, Any]] = {name: {} for name in self.nodes}
        self.spare_used = False
        self.last_states: dict[str, tuple[str, str]] = {}

    # ------------------------------------------------------------------------------------- state.json
    def state(self) -> dict[str, Any]:
        return cluster._read_state(self.directory) or {"processes": {}, "namespaces": {}}

    def sshd_pid(self, name: str) -> int | None:
        proc = self.state().get("processes", {}).get(f"sshd:{name}")
        return proc["pid"] if proc and cluster.pid_alive(proc["pid"], proc.get("started")) else None

    def kill_node(self, name: str) -> set[int]:
        """Every process of the node: recorded ones (``*:NODE``), their children, its mount namespace."""
        with self.state_lock:
            state = self.state()
            roots = {p["pid"] for key, p in state.get("processes", {}).items()
                     if key.endswith(f":{name}") and cluster.pid_alive(p["pid"], p.get("started"))}
            pids = roots | cluster._descendants(roots)
            mnt = (state.get("namespaces", {}).get(name) or [None])[0]
            if mnt:
                pids |= {pid for pid in cluster._all_pids()
                         if pid != os.getpid() and cluster._namespace(pid, "mnt") == mnt and cluster.pid_alive(pid)}
        return cluster._terminate(pids, grace_s=2.0)

    def start_sshd(self, node: Node) -> int:
        with self.state_lock:
            state = self.state()
            proc = cluster.start_sshd(self.directory, state, node.boot)
        cluster.await_sshd(self.directory, state, node.boot, proc)  # waits for the listener, records the ns
        with self.state_lock:
            fresh = self.state()
            fresh["namespaces"][node.name] = state["namespaces"][node.name]
            cluster._write_state(self.directory, fresh)
        return proc.pid

    def start_slurmd(self, node: Node, ns_pid: int) -> int:
        with self.state_lock:
            state = self.state()
            if (state.get("slurm_cluster") or {}).get("controller") == node.name:
                # slurmctld on this compute node died with it and starts with it again (its saved state kept)
                cluster.start_slurmctld(self.directory, state, ns_pid)
            proc = cluster.start_slurmd(self.directory, state, node.name, ns_pid)
            cluster._start_exporters(self.directory, state, node.boot, ns_pid)
            shared = state.get("shared_fs") or {}
            point = (shared.get("mounts") or {}).get(node.name)
        if point:
            with self.state_lock:
                state = self.state()
                mount = cluster.start_shared_mount(self.directory, state, node.name, point, ns_pid)
            with contextlib.suppress(cluster.SimError):
                cluster.await_shared_mount(self.directory, state, node.name, point, mount)
        return proc.pid

    # ------------------------------------------------------------------------------------- Slurm
    def scontrol(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["scontrol", *args], env=self.slurm_env, capture_output=True, text=True, timeout=20)

    def slurmd_start_time(self, name: str) -> str | None:
        try:
            out = self.scontrol("-o", "show", "node", name).stdout
        except (OSError, subprocess.TimeoutExpired):
            return None
        match = re.search(r"SlurmdStartTime=(\S+)", out)
        state = re.search(r"State=(\S+)", out)
        if not match or match.group(1) in ("None", "Unknown") or (state and "NOT_RESPONDING" in state.group(1)):
            return None
        return match.group(1)

    def resume(self, name: str) -> bool:
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            return self.scontrol("update", f"nodename={name}", "state=resume").returncode == 0
        return False

    def watch_slurm(self) -> None:
        while not self.stop.wait(SLURM_POLL_S):
            states = cluster._sinfo_states(self.directory)
            if not states:
                continue
            for name, (slurm_state, reason) in states.items():
                if name in self.nodes and self.last_states.get(name) != (slurm_state, reason):
                    self.nodes[name].event("slurm_state", state=slurm_state, reason=reason)
                    self.last_states[name] = (slurm_state, reason)
            for name, node in self.nodes.items():
                slurm_state, reason = states.get(name, ("", ""))
                drained = slurm_state.startswith(("drain", "drng")) and reason != "spare"
                self.remediate(node, drained, states)

    def remediate(self, node: Node, drained: bool, states: dict[str, tuple[str, str]]) -> None:
        memo = self.remediation[node.name]
        spare = node.provider["remediation"]["spare"]
        if (drained and spare and not self.spare_used and spare != node.name and spare in self.nodes
                and states.get(spare, ("", ""))[1] == "spare" and self.resume(spare)):
                self.spare_used = True
                self.nodes[spare].event("spare_resumed", replaces=node.name)
        mode, after = node.provider["remediation"]["mode"], node.provider["remediation"]["after_s"]
        if not drained:
            memo.pop("since", None)
            return
        if mode == "none" or memo.get("working"):
            return
        memo.setdefault("since", time.time())
        if time.time() - memo["since"] < after:
            return
        if mode == "resume":
            if self.resume(node.name):
                node.event("resumed", by="remediation", fixed=False)
            memo.pop("since", None)
            return
        memo["working"] = True
        thread = threading.Thread(target=self._reboot_and_resume, args=(node, memo), daemon=True)
        thread.start()
        self.threads.append(thread)

    def _reboot_and_resume(self, node: Node, memo: dict[str, Any]) -> None:
        try:
            if not node.power("reboot", by="remediation"):
                cluster._wait(lambda: not node.busy or self.stop.is_set(), 120, 0.2)
                return
            time.sleep(0.2)
            cluster._wait(lambda: not node.busy or self.stop.is_set(), 120, 0.2)
            if not self.stop.is_set() and node.powered and self.resume(node.name):
                node.event("resumed", by="remediation", fixed=True)
        finally:
            memo.pop("since", None)
            memo["working"] = False

    # ------------------------------------------------------------------------------------- loops
    def watch_kmsg(self) -> None:
        selector = selectors.DefaultSelector()
        buffers: dict[str, bytes] = {}
        for name, node in self.nodes.items():
            fifo = node.dir / "kmsg.fifo"
            if fifo.exists():
                fd = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)  # RDWR: never EOF, writers never wait on open
                selector.register(fd, selectors.EVENT_READ, name)
                buffers[name] = b""
        while not self.stop.is_set():
            for key, _ in selector.select(timeout=0.2):
                try:
                    data = os.read(key.fd, 65536)
                except BlockingIOError:
                    continue
                name = key.data
                buffers[name] += data
                *lines, buffers[name] = buffers[name].split(b"\n")
                for line in lines:
                    try:
                        self.nodes[name].kmsg_line(line.decode("utf-8", errors="replace"))
                    except OSError as exc:
                        print(f"{name}: kmsg: {exc!r}", file=sys.stderr, flush=True)

    def poll(self) -> None:
        while not self.stop.wait(POLL_S):
            for node in self.nodes.values():
                request = node.root / "power" / "request"
                if request.exists():
                    try:
                        body = json.loads(request.read_text())
                    except (OSError, ValueError):
                        body = {}
                    if body.get("not_before", 0) > time.time():  # shutdown +M: later
                        continue
                    with contextlib.suppress(FileNotFoundError):
                        request.unlink()
                    action = body.get("action", "reboot")
                    if action == "poweron" and node.powered:
                        continue
                    node.power(action, by=body.get("by", "node"))
                node.poll_bridges()

    def run(self) -> int:
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(signum, lambda *_: self.stop.set())
        work = [self.watch_kmsg, self.poll, self.watch_slurm]
        if k8s_provider.enabled(self):  # the kubelets, node lifecycle controller and health agent
            k8s_provider.initial_problems(self.directory, self)
            work.append(k8s_provider.Kubernetes(self).run)
        loops = [threading.Thread(target=f, daemon=True) for f in work]
        for thread in loops:
            thread.start()
        (self.directory / "power.ready").write_text(str(os.getpid()))
        while not self.stop.wait(0.5):
            pass
        for thread in loops + self.threads:
            thread.join(timeout=5)
        with contextlib.suppress(FileNotFoundError):
            (self.directory / "power.ready").unlink()
        return 0


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m clustereval.sim.power CLUSTER_DIR", file=sys.stderr)
        return 2
    directory = Path(argv[0]).resolve()
    with contextlib.suppress(FileNotFoundError):
        (directory / "power.ready").unlink()
    return Bmc(directory).run()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
