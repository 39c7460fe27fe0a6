"""Kubernetes on the simulated cluster, run by the power daemon (sim/power.py) for clusters whose profile turns
the API on: what the kubelets, the node lifecycle controller and the provider's GPU health agent do.

* **kubelet** (per node): up while the node is booted and its processes run (from ``reboot.slurmd_s`` after its
  sshd, as slurmd), posting the four conditions Ready True / pressures False; it runs the pods bound to its node
  (``spec.nodeName``): the container's ``command`` + ``args`` inside the node's mount and UTS namespaces with the
  node's PATH (``/sim/bin`` first), output to ``D/k8s/pods/NS_NAME.log``, and keeps their status (Running, then
  Succeeded/Failed with the exit code); it stops a deleted pod's process (SIGTERM, SIGKILL after the grace period)
  and then removes the pod.
* **node lifecycle controller**: once a node's kubelet has been silent for ``k8s.node_monitor_grace_s`` (default 2 s;
  40 s in a real cluster) its conditions go Unknown (``NodeStatusUnknown``, ``Kubelet stopped posting node
  status.``) and it gets the ``node.kubernetes.io/unreachable`` NoSchedule and NoExecute taints; they go when the
  kubelet posts again.
* **provider health agent** (``provider.k8s``): every ``interval_s`` it looks for the faults the Slurm health check
  drains on (a ``drain_xids`` Xid or an amdgpu uncorrectable RAS line in the kernel log, DCGM health not Healthy,
  a GPU lost) and reports the first one as a node condition, a taint or a cordon; with ``remediation: reboot`` it
  reboots the node through the BMC ``after_s`` later and, once it is Ready again and the fault gone, clears what it
  set.

The shared state is ``D/k8s/cluster.json`` (``shims/k8s_live.py``, which the kubectl shim reads and writes too).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clustereval.sim import cluster
from clustereval.sim.overlays._k8s_profile import node_taints, pod_and_volume_latency

if TYPE_CHECKING:
    from clustereval.sim.power import Bmc, Node

TICK_S = 0.2
HEARTBEAT_S = 10.0  # the kubelet's nodeStatusReportFrequency-ish refresh of lastHeartbeatTime
RING_PREFIX = re.compile(r"^\[\s*\d+\.\d+\]\s*")


def _load_shim_module(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, cluster.SHIM_SOURCES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


live = _load_shim_module("k8s_live")
# the Slurm health check's own patterns (an NVRM Xid line, amdgpu's uncorrectable RAS line), so that both see a
# fault the same way
health = _load_shim_module("healthcheck")
volumes = _load_shim_module("k8s_volumes")
# what the kubelet runs first in the pod's own mount namespace (unshare): each claim's backing directory
# bind-mounted at its mountPath; a mount point that does not exist is made on a tmpfs laid over its nearest
# existing parent (inside the pod only, as a container's rootfs would have it), never on the node's /
MOUNT_SCRIPT = r"""wd=$1; shift; fresh=
while [ "$1" != -- ]; do
  src=$1 dst=$2; shift 2
  if [ ! -d "$dst" ]; then
    top=$dst; while [ ! -d "$top" ]; do top=$(dirname "$top"); done
    case " $fresh " in *" $top "*) ;; *)
      [ "$top" != / ] || { echo "kubelet: cannot make the mount point $dst" >&2; exit 128; }
      mount -t tmpfs -o mode=0755,size=1m clustereval-mountpoints "$top" || exit 128
      fresh="$fresh $top";;
    esac
    mkdir -p "$dst" || exit 128
  fi
  mount --bind "$src" "$dst" || exit 128
done
shift; cd "$wd" || exit 128; exec "$@"
"""


def enabled(bmc: Bmc) -> bool:
    return any((node.boot["settings"].get("k8s") or {}).get("enabled") for node in bmc.nodes.values())


def _container_id(key: str) -> str:
    return "containerd://" + hashlib.sha256(f"{key}/{time.time_ns()}".encode()).hexdigest()


def _pod_conditions(now: float, ready: bool, reason: str | None = None,
                    pod: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """The kubelet's pod conditions at ``now``; PodScheduled keeps the time the scheduler bound ``pod``."""
    scheduled = next((c.get("lastTransitionTime") for c in ((pod or {}).get("status") or {}).get("conditions") or []
                      if c.get("type") == "PodScheduled" and c.get("status") == "True"), None)
    out = []
    for kind in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled"):
        cond: dict[str, Any] = {"lastProbeTime": None, "lastTransitionTime": live.stamp(now), "status": "True",
                                "type": kind}
        if kind in ("Ready", "ContainersReady") and not ready:
            cond["status"] = "False"
            if reason:
                cond["reason"] = reason
        if kind == "PodReadyToStartContainers" and not ready and reason == "PodCompleted":
            cond["status"] = "False"
        if kind == "PodScheduled" and scheduled:
            cond["lastTransitionTime"] = scheduled
        out.append(cond)
    return out


def _env_value(entry: dict[str, Any], pod: dict[str, Any], host_ip: str, pod_ip: str) -> str:
    """A container env value: ``value``, or the downward API's ``valueFrom.fieldRef`` (name, namespace, uid,
    labels['k'], annotations['k'], spec.nodeName, spec.serviceAccountName, status.hostIP, status.podIP)."""
    path = ((entry.get("valueFrom") or {}).get("fieldRef") or {}).get("fieldPath")
    if not path:
        return str(entry.get("value", ""))
    meta, spec = pod["metadata"], pod["spec"]
    found = re.fullmatch(r"metadata\.(labels|annotations)\['([^']+)'\]", path)
    if found:
        return str((meta.get(found.group(1)) or {}).get(found.group(2), ""))
    return str({"metadata.name": meta.get("name"), "metadata.namespace": meta.get("namespace"),
                "metadata.uid": meta.get("uid"), "spec.nodeName": spec.get("nodeName"),
                "spec.serviceAccountName": spec.get("serviceAccountName"), "status.hostIP": host_ip,
                "status.podIP": pod_ip}.get(path) or "")


class Kubernetes:
    """The kubelets, the node lifecycle controller and the provider's health agent of one cluster."""

    def __init__(self, bmc: Bmc) -> None:
        self.bmc = bmc
        self.dir = str(bmc.directory)
        self.nodes = dict(bmc.nodes)
        self.grace = {name: float((node.boot["settings"].get("k8s") or {}).get("node_monitor_grace_s", 2))
                      for name, node in self.nodes.items()}
        started = time.time()
        self.last_up = dict.fromkeys(self.nodes, started)
        self.procs: dict[str, tuple[subprocess.Popen, str]] = {}
        self.term_sent: dict[str, float] = {}
        self.agent = {name: {"flag": None, "since": 0.0, "next": 0.0, "working": False} for name in self.nodes}
        # the claims and volumes live with the API the host's kubectl uses; the profile's latencies (k8s.latency)
        self.api_file = cluster.k8s_api_file(bmc.directory)
        first = self.nodes.get(cluster.K8S_API_HOST) or next(iter(self.nodes.values()), None)
        self.latency = pod_and_volume_latency((first.boot["settings"].get("k8s") or {}) if first else {})
        self.creating: dict[str, float] = {}  # pod -> when the kubelet began creating its container
        (bmc.directory / "k8s" / "pods").mkdir(parents=True, exist_ok=True)

    # ------------------------------------------------------------------------------------- loop
    def run(self) -> None:
        while not self.bmc.stop.wait(TICK_S):
            try:
                self.tick()
            except Exception as exc:  # a failed tick is logged, never the end of the daemon
                print(f"k8s: {exc!r}", file=sys.stderr, flush=True)

    def kubelet_up(self, node: Node) -> bool:
        return bool(node.kubelet_up and node.powered and self.bmc.sshd_pid(node.name))

    def tick(self) -> None:
        now = time.time()
        up = {name: self.kubelet_up(node) for name, node in self.nodes.items()}
        events: list[tuple[str, str, dict[str, Any]]] = []
        with contextlib.ExitStack() as stack:
            api = None
            if self.api_file.exists():  # the claims' lock before the pods', as kubectl takes them
                stack.enter_context(volumes.state_lock(str(self.api_file)))
                api = volumes.load_api(str(self.api_file))
            binding = volumes.VolumeBinding(api) if api else None
            with live.lock(self.dir):
                doc = live.load(self.dir)
                changed = False
                for name in self.nodes:
                    changed |= self.node_status(doc, name, up[name], now, events)
                # default-scheduler: bind pods without a node
                bound, placed = live.schedule(self.dir, doc, now, binding, self.latency["pod_schedule_s"])
                events.extend((node, "pod_scheduled", {"pod": key}) for node, key in placed)
                changed |= bound
                changed |= self.kubelets(doc, up, now, events, api)
                if changed:
                    live.save(self.dir, doc)
            if api is not None:  # the PV controller, the provisioners, pvc-protection
                for claim, node in binding.selected:
                    volumes.select_node(api, claim, node, self.dir, now)
                if volumes.settle(api, doc.get("pods") or [], self.dir, now) or binding.selected:
                    volumes.save_state(api, str(self.api_file))
        for node, event, fields in events:
            cluster.record_event(self.bmc.directory, node, event, **fields)
        self.agents(up, now)

    # ------------------------------------------------------------------------------------- node status
    def node_status(self, doc: dict[str, Any], name: str, up: bool, now: float,
                    events: list[tuple[str, str, dict[str, Any]]]) -> bool:
        entry = doc["nodes"].setdefault(name, {})
        conditions = entry.get("conditions") or []
        ready = next((c.get("status") for c in conditions if c.get("type") == "Ready"), None)
        if up:
            self.last_up[name] = now
            if ready != "True":
                entry["conditions"] = live.kubelet_conditions(now, now)
                entry["heartbeat"] = now
                live.remove_taint(entry, live.UNREACHABLE)
                boot = self.nodes[name].boot_state.get("boot_id")
                events.append((name, "k8s_ready", {"boot_id": boot, **({} if ready else {"boot": "initial"})}))
                return True
            if now - float(entry.get("heartbeat") or 0) >= HEARTBEAT_S:
                for cond in conditions:
                    cond["lastHeartbeatTime"] = live.stamp(now)
                entry["heartbeat"] = now
                return True
            return False
        if ready == "True" and now - self.last_up[name] >= self.grace[name]:
            entry["conditions"] = live.unknown_conditions(conditions, now)
            live.add_taint(entry, {"effect": "NoSchedule", "key": live.UNREACHABLE, "timeAdded": True}, now)
            live.add_taint(entry, {"effect": "NoExecute", "key": live.UNREACHABLE}, now)
            events.append((name, "k8s_not_ready", {"reason": live.NODE_STATUS_UNKNOWN[0],
                                                   "silent_s": round(now - self.last_up[name], 3)}))
            return True
        return False

    # ------------------------------------------------------------------------------------- pods
    def kubelets(self, doc: dict[str, Any], up: dict[str, bool], now: float,
                 events: list[tuple[str, str, dict[str, Any]]], api: dict[str, Any] | None = None) -> bool:
        runtime = doc.setdefault("runtime", {})
        changed = False
        present = set()
        for pod in list(doc.get("pods") or []):
            meta, spec = pod["metadata"], pod["spec"]
            key = f"{meta['namespace']}/{meta['name']}"
            present.add(key)
            name = spec.get("nodeName")
            if name not in self.nodes:
                continue
            held = self.procs.get(key)
            if held and held[0].poll() is not None:
                self.finish(pod, held[0].returncode, now, events, name)
                del self.procs[key]
                self.term_sent.pop(key, None)
                held, changed = None, True
            if "deletionTimestamp" in meta:
                if held is None and meta.get("finalizers"):
                    continue  # the containers stopped, but the API keeps the pod until its finalizers clear
                if held is None:
                    doc["pods"].remove(pod)
                    runtime.pop(key, None)
                    events.append((name, "pod_deleted", {"pod": key}))
                    changed = True
                elif key not in self.term_sent:
                    self.term_sent[key] = now
                    self.signal(held[0], signal.SIGTERM)
                elif now - self.term_sent[key] >= float(meta.get("deletionGracePeriodSeconds") or 0):
                    self.signal(held[0], signal.SIGKILL)
                continue
            if pod["status"].get("phase") == "Pending" and up[name] and held is None and key not in runtime:
                # the container starts once its claims are bound (their volumes mounted) and pod_start_s passed
                mounts = volumes.pod_mounts(api, pod, self.dir) if api else []
                since = self.creating.setdefault(key, now)
                if mounts is None or now - since < self.latency["pod_start_s"]:
                    changed |= self.container_creating(doc, pod, name, since)
                    continue
                self.creating.pop(key, None)
                self.start(pod, key, name, runtime, now, events, doc, mounts)
                changed = True
        for key in [k for k in self.creating if k not in present]:  # deleted before its container started
            del self.creating[key]
        for key in [k for k in self.procs if k not in present]:  # force-deleted: the kubelet kills what is left
            proc, node = self.procs.pop(key)
            self.signal(proc, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=2)
            events.append((node, "pod_finished", {"pod": key, "exit_code": proc.returncode, "deleted": True}))
        return changed

    @staticmethod
    def signal(proc: subprocess.Popen, signum: int) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signum)

    def start(self, pod: dict[str, Any], key: str, name: str, runtime: dict[str, Any], now: float,
              events: list[tuple[str, str, dict[str, Any]]], doc: dict[str, Any] | None = None,
              mounts: list[tuple[str, str]] | None = None) -> None:
        container = pod["spec"]["containers"][0]
        if doc is not None and live.pod_networks(pod):
            failed = live.sandbox_error(pod, name, live.nads(self.dir))
            if failed:  # Multus cannot find the NAD: the sandbox is never made, the pod stays ContainerCreating
                self.no_sandbox(doc, pod, key, name, runtime, now, events, failed)
                return
        argv = [str(a) for a in (container.get("command") or []) + (container.get("args") or [])]
        log = self.bmc.directory / "k8s" / "pods" / f"{key.replace('/', '_')}.log"
        runtime[key] = {"log": str(log), "started": now}
        node_info = (cluster._read_state(self.bmc.directory) or {}).get("nodes", {}).get(name, {})
        address = node_info.get("address", "")
        index = int(name[4:]) if name[4:].isdigit() else 0
        pod_ip = f"10.244.{index}.{10 + int(hashlib.sha256(key.encode()).hexdigest(), 16) % 240}"
        cid = _container_id(key)
        image = str(container.get("image") or "")
        status = {"hostIP": address, "hostIPs": [{"ip": address}], "podIP": pod_ip, "podIPs": [{"ip": pod_ip}],
                  "qosClass": pod["status"].get("qosClass", "BestEffort"), "startTime": live.stamp(now)}
        base = {"image": image, "imageID": f"{image.split(':')[0]}@sha256:"
                + hashlib.sha256(image.encode()).hexdigest(), "lastState": {}, "name": container.get("name"),
                "restartCount": 0, "containerID": cid}
        sshd = self.bmc.sshd_pid(name)
        if not argv or not sshd:
            why = "the simulated kubelet runs a container's command and args only" if not argv else "node is down"
            pod["status"] = {**status, "phase": "Failed", "conditions": _pod_conditions(now, False, "PodFailed", pod),
                             "containerStatuses": [{**base, "ready": False, "started": False, "state": {
                                 "terminated": {"containerID": cid, "exitCode": 128, "finishedAt": live.stamp(now),
                                                "message": why, "reason": "StartError",
                                                "startedAt": "1970-01-01T00:00:00Z"}}}]}
            events.append((name, "pod_finished", {"pod": key, "exit_code": 128, "phase": "Failed", "error": why}))
            return
        env = {"PATH": cluster.NODE_PATH, "HOME": "/root", "HOSTNAME": pod["metadata"]["name"], "SIMNODE": name,
               "SIMNODE_ROOT": "/sim", "KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443",
               "KUBERNETES_SERVICE_PORT_HTTPS": "443"}
        env.update({str(e.get("name")): _env_value(e, pod, address, pod_ip) for e in container.get("env") or []
                    if e.get("name")})
        confined = ["setpriv", "--bounding-set", cluster.NODE_DROPPED_CAPS, "--", *argv]
        workdir = str(container.get("workingDir") or "/")
        if mounts:  # the pod's own mount namespace with its volumes, then the container's command
            mounted = [p for pair in mounts for p in pair]
            entry = ["--wd=/", "unshare", "--mount", "--propagation", "private", "/bin/sh", "-c", MOUNT_SCRIPT, "sh",
                     workdir, *mounted, "--", *confined]
        else:
            entry = [f"--wd={workdir}", *confined]
        with open(log, "ab") as out:
            proc = subprocess.Popen(
                ["nsenter", "-t", str(sshd), "--mount", "--uts", *entry],
                env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        self.procs[key] = (proc, name)
        runtime[key]["pid"] = proc.pid
        pod["status"] = {**status, "phase": "Running", "conditions": _pod_conditions(now, True, None, pod),
                         "containerStatuses": [{**base, "ready": True, "started": True,
                                                "state": {"running": {"startedAt": live.stamp(now)}}}]}
        events.append((name, "pod_started", {"pod": key, "pid": proc.pid, "command": argv}))

    def no_sandbox(self, doc: dict[str, Any], pod: dict[str, Any], key: str, name: str, runtime: dict[str, Any],
                   now: float, events: list[tuple[str, str, dict[str, Any]]], failed: tuple[str, str]) -> None:
        """A pod whose sandbox network cannot be set up: Pending, its container waiting in ContainerCreating,
        the kubelet's FailedCreatePodSandBox and Multus's NoNetworkFound events (not retried)."""
        runtime[key] = {"started": now, "sandbox_error": failed[0]}
        self.container_creating(doc, pod, name, now)
        live.event(doc, pod, "Warning", "NoNetworkFound", failed[1], "multus", now=now)
        live.event(doc, pod, "Warning", "FailedCreatePodSandBox", failed[0], "kubelet", host=name, now=now)
        events.append((name, "pod_sandbox_failed", {"pod": key, "error": failed[1]}))

    def container_creating(self, doc: dict[str, Any], pod: dict[str, Any], name: str, since: float) -> bool:
        """The pod as the kubelet shows it while its container is being created (its sandbox, its volumes):
        Pending, the container waiting in ContainerCreating; False when it already shows that."""
        waiting = ((pod["status"].get("containerStatuses") or [{}])[0].get("state") or {}).get("waiting") or {}
        if waiting.get("reason") == "ContainerCreating":
            return False
        container = pod["spec"]["containers"][0]
        node_info = (cluster._read_state(self.bmc.directory) or {}).get("nodes", {}).get(name, {})
        address = node_info.get("address", "")
        unready = f"containers with unready status: [{container.get('name')}]"
        conditions = _pod_conditions(since, False, "ContainersNotReady", pod)
        for cond in conditions:
            if cond["type"] == "PodReadyToStartContainers":
                cond["status"] = "False"
            if cond["type"] in ("Ready", "ContainersReady"):
                cond["message"] = unready
        pod["status"] = {"conditions": conditions, "containerStatuses": [{
            "image": str(container.get("image") or ""), "imageID": "", "lastState": {}, "name": container.get("name"),
            "ready": False, "restartCount": 0, "started": False,
            "state": {"waiting": {"reason": "ContainerCreating"}}}],
            "hostIP": address, "hostIPs": [{"ip": address}], "phase": "Pending",
            "qosClass": pod["status"].get("qosClass", "BestEffort"), "startTime": live.stamp(since)}
        pod["metadata"]["resourceVersion"] = live.next_version(doc)
        return True

    def finish(self, pod: dict[str, Any], returncode: int, now: float,
               events: list[tuple[str, str, dict[str, Any]]], name: str) -> None:
        code = returncode if returncode >= 0 else 128 - returncode  # killed by a signal: 128 + N, as containerd
        phase = "Succeeded" if code == 0 else "Failed"
        status = pod["status"]
        statuses = status.get("containerStatuses") or [{}]
        started = ((statuses[0].get("state") or {}).get("running") or {}).get("startedAt", live.stamp(now))
        statuses[0].update(ready=False, started=False, state={"terminated": {
            "containerID": statuses[0].get("containerID"), "exitCode": code, "finishedAt": live.stamp(now),
            "reason": "Completed" if code == 0 else "Error", "startedAt": started}})
        status.update(phase=phase, containerStatuses=statuses,
                      conditions=_pod_conditions(now, False, "PodCompleted" if code == 0 else "PodFailed", pod))
        key = f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"
        events.append((name, "pod_finished", {"pod": key, "exit_code": code, "phase": phase}))

    # ------------------------------------------------------------------------------------- provider agent
    def agents(self, up: dict[str, bool], now: float) -> None:
        for name, node in self.nodes.items():
            cfg = node.provider["k8s"]
            memo = self.agent[name]
            if cfg["detector"] == "none" or memo["working"]:
                continue
            if up[name] and now >= memo["next"]:
                memo["next"] = now + cfg["interval_s"]
                self.check(node, memo)
            if memo["flag"] and cfg["remediation"] == "reboot" and now - memo["since"] >= cfg["after_s"]:
                memo["working"] = True
                thread = threading.Thread(target=self.remediate, args=(node, memo), daemon=True)
                thread.start()
                self.bmc.threads.append(thread)

    def faults(self, node: Node) -> tuple[str, str] | None:
        """The first GPU fault the agent finds: (reason, message)."""
        drain = set(node.provider["health_check"]["drain_xids"])
        try:
            lines = (node.root / "kmsg").read_text(errors="replace").splitlines()
        except OSError:
            lines = []
        for line in reversed(lines):
            match = health.XID.search(line)
            if match and int(match.group(1)) in drain:
                return f"XID{match.group(1)}", RING_PREFIX.sub("", line)
            # AMD's node problem detector rule for amdgpu's RAS reports (ROCm/gpu-operator docs/npd): reason
            # AMDGPURASError, the kernel line as the message
            if health.AMD_UE.search(line):
                return "AMDGPURASError", RING_PREFIX.sub("", line)
        lost = live.lost_gpus(self.dir, node.name)
        if lost:
            return "GPULost", f"GPU {', '.join(str(g) for g in lost)} has fallen off the bus"
        dcgmi = self.bmc.directory / "shims" / "dcgmi"
        if dcgmi.exists() and (node.root / "bin" / "dcgmi").exists():
            try:
                out = subprocess.run([str(dcgmi), "health", "-g", "0", "-c"], capture_output=True, text=True,
                                     timeout=20, env={"PATH": os.environ.get("PATH", ""),
                                                      "SIMNODE_ROOT": str(node.root)}).stdout
            except (OSError, subprocess.TimeoutExpired):
                out = ""
            overall = re.search(r"Overall Health *\| (\w+)", out)
            if overall and overall.group(1) != "Healthy":
                return "DCGMHealth" + overall.group(1), f"dcgmi health -c: Overall Health {overall.group(1)}"
        return None

    def check(self, node: Node, memo: dict[str, Any]) -> None:
        cfg = node.provider["k8s"]
        found = self.faults(node)
        if found and not memo["flag"]:
            self.mark(node, cfg, found)
            memo.update(flag=found, since=time.time())
            node.event("k8s_detected", how=cfg["detector"], reason=found[0], message=found[1],
                       **({"condition": cfg["condition"]} if cfg["detector"] == "condition" else {}),
                       **({"taint": cfg["taint"]} if cfg["detector"] == "taint" else {}))
        elif not found and memo["flag"]:
            self.mark(node, cfg, None)
            node.event("k8s_cleared", how=cfg["detector"], reason=memo["flag"][0])
            memo.update(flag=None, since=0.0)

    def mark(self, node: Node, cfg: dict[str, Any], found: tuple[str, str] | None) -> None:
        """Set (``found``) or clear what the agent reports: condition, taint or cordon."""
        now = time.time()
        cordon_change = None
        with live.lock(self.dir):
            doc = live.load(self.dir)
            entry = doc["nodes"].setdefault(node.name, {})
            if cfg["detector"] == "condition":
                entry["problems"] = [c for c in entry.get("problems") or [] if c.get("type") != cfg["condition"]]
                entry["problems"].append(self.condition(cfg["condition"], found, now))
            elif cfg["detector"] == "taint":
                taint = live.parse_taint(cfg["taint"])
                if found:
                    live.add_taint(entry, taint, now)
                else:
                    live.remove_taint(entry, taint["key"], taint["effect"])
            elif cfg["detector"] == "cordon":
                changed = live.cordon(entry, now) if found else live.uncordon(entry)
                cordon_change = ("k8s_cordoned" if found else "k8s_uncordoned") if changed else None
            live.next_version(doc)
            live.save(self.dir, doc)
        if cordon_change:
            node.event(cordon_change, by="provider")

    @staticmethod
    def condition(kind: str, found: tuple[str, str] | None, now: float) -> dict[str, Any]:
        reason, message = found or (f"No{kind}", "GPUs are healthy")
        return {"lastHeartbeatTime": live.stamp(now), "lastTransitionTime": live.stamp(now), "message": message,
                "reason": reason, "status": "True" if found else "False", "type": kind}

    def remediate(self, node: Node, memo: dict[str, Any]) -> None:
        try:
            if node.power("reboot", by="remediation"):
                time.sleep(0.2)
            cluster._wait(lambda: not node.busy or self.bmc.stop.is_set(), 120, 0.2)
            cluster._wait(lambda: self.ready(node.name) or self.bmc.stop.is_set(), 60, 0.2)
            if not self.bmc.stop.is_set():
                self.check(node, memo)  # the fault is gone after the reboot: the agent clears what it set
        finally:
            memo["since"] = time.time()
            memo["working"] = False

    def ready(self, name: str) -> bool:
        entry = live.load(self.dir)["nodes"].get(name) or {}
        return any(c.get("type") == "Ready" and c.get("status") == "True" for c in entry.get("conditions") or [])


def initial_problems(directory: Path, bmc: Bmc) -> None:
    """The nodes' taints from their creation (the profile's ``k8s.taints``) start the live state, so that those
    the controllers add later (unreachable, cordon) join them; a node-problem-detector style agent registers its
    condition False at start (``detector: condition``)."""
    with live.lock(str(directory)):
        doc = live.load(str(directory))
        for name, node in bmc.nodes.items():
            doc["nodes"].setdefault(name, {}).setdefault("taints", node_taints(node.boot["settings"].get("k8s") or {}))
            cfg = node.provider["k8s"]
            if cfg["detector"] == "condition":
                doc["nodes"].setdefault(name, {})["problems"] = [Kubernetes.condition(cfg["condition"], None,
                                                                                      time.time())]
        live.save(str(directory), doc)
