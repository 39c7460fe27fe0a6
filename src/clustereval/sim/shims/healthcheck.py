#!/usr/bin/python3 -IS
"""The simulated provider's node health check: Slurm's HealthCheckProgram (standalone: stdlib only).

slurmd runs it inside the node's namespaces at start and every HealthCheckInterval. What it does follows the
node's ``/sim/provider.json`` (profile ``provider.health_check``, see docs/sim.md):

* ``drain``: an ``NVRM: Xid`` line in the node's kernel ring buffer (``/sim/kmsg``) whose code is one of
  ``drain_xids`` drains the node with reason ``XID <code>`` (the last such line), and ``dcgmi health -c``
  other than Healthy drains it with reason ``DCGM health``, each once the fault has been seen for
  ``after_s`` seconds (the first sighting is kept in ``/sim/run/healthcheck-seen.json``, gone at reboot);
* ``times_out``: its own check hangs past its ``timeout_s`` and it drains the node, healthy or not, with the
  reason NHC's watchdog gives (``NHC: Script timed out while executing "check_nv_healthmon".``); with
  ``from_s``, only once the node has been up that long (before, it checks like ``drain``);
* ``exit_1``: it finds the faults, prints them and exits 1 without draining (Slurm ignores the exit status);
* ``none``: nothing.

Every run and every drain is appended to the node's ground truth, timed when scontrol is called.
"""

import json
import os
import re
import socket
import subprocess
import sys
import time

ROOT = os.environ.get("SIMNODE_ROOT") or "/sim"
XID = re.compile(r"NVRM: Xid \([^)]*\): (\d+)")
NHC_TIMEOUT = 'NHC: Script timed out while executing "check_nv_healthmon".'


def record(cfg, event, **fields):
    path = cfg.get("ground_truth")
    if not path:
        return
    line = json.dumps({"t": time.time(), "node": cfg.get("node"), "event": event, **fields}) + "\n"
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    except OSError:
        return
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


def scontrol(cfg, *args):
    env = {**os.environ, "SLURM_CONF": cfg["slurm_conf"]}
    return subprocess.run(["/usr/bin/scontrol", *args], env=env, capture_output=True, text=True, timeout=20)


def drain(cfg, node, reason):
    record(cfg, "drained", by="healthcheck", reason=reason)
    scontrol(cfg, "update", f"nodename={node}", "state=drain", f"reason={reason}")


def faults(cfg):
    """What the check sees: [(key, reason)] in the order it reports them."""
    found = []
    try:
        with open(os.path.join(ROOT, "kmsg"), errors="replace") as fh:
            codes = [int(m.group(1)) for m in XID.finditer(fh.read())]
    except OSError:
        codes = []
    wanted = [c for c in codes if c in set(cfg.get("drain_xids") or [])]
    if wanted:
        found.append(("xid", f"XID {wanted[-1]}"))
    dcgmi = os.path.join(ROOT, "bin", "dcgmi")
    if os.access(dcgmi, os.X_OK):
        out = subprocess.run([dcgmi, "health", "-g", "0", "-c"], capture_output=True, text=True).stdout
        if not re.search(r"Overall Health *\| Healthy", out):
            found.append(("dcgm", "DCGM health"))
    return found


def uptime():
    """Seconds since the node's (simulated) boot: the boot id file is written when the node boots."""
    try:
        return time.time() - os.stat("/proc/sys/kernel/random/boot_id").st_mtime
    except OSError:
        return float("inf")


def main(argv):
    try:
        with open(os.path.join(ROOT, "provider.json")) as fh:
            cfg = json.load(fh)
    except (OSError, ValueError):
        return 0
    hc = cfg.get("health_check") or {}
    cfg.update(drain_xids=hc.get("drain_xids"))
    mode = hc.get("mode", "drain")
    node = os.environ.get("SLURMD_NODENAME") or (argv[0] if argv else None) or socket.gethostname()
    cfg["node"] = cfg.get("node") or node
    if mode == "none":
        return 0
    if mode == "times_out" and uptime() < float(hc.get("from_s", 0)):
        mode = "drain"  # it starts hanging only later (under load, as such checks do)
    if mode == "times_out":
        record(cfg, "healthcheck_run", mode=mode)
        time.sleep(float(hc.get("timeout_s", 2)))
        current = scontrol(cfg, "show", "node", node).stdout
        if "Reason=" + NHC_TIMEOUT not in current:
            drain(cfg, node, NHC_TIMEOUT)
        return 1
    found = faults(cfg)
    record(cfg, "healthcheck_run", mode=mode, found=[reason for _, reason in found])
    if mode == "exit_1":
        for _, reason in found:
            sys.stdout.write(f"ERROR:  nhc:  Health check failed:  {reason}\n")
        return 1 if found else 0
    seen_path = os.path.join(ROOT, "run", "healthcheck-seen.json")
    try:
        with open(seen_path) as fh:
            seen = json.load(fh)
    except (OSError, ValueError):
        seen = {}
    now = time.time()
    seen = {key: seen.get(key, now) for key, _ in found}
    try:
        with open(seen_path + ".tmp", "w") as fh:
            json.dump(seen, fh)
        os.replace(seen_path + ".tmp", seen_path)
    except OSError:
        pass
    ready = [(key, reason) for key, reason in found if now - seen[key] >= float(hc.get("after_s", 0))]
    if not ready:
        return 0
    current = scontrol(cfg, "show", "node", node).stdout
    drained = re.search(r"State=\S*DRAIN", current) is not None
    for key, reason in ready:
        if key == "xid" and "Reason=" + reason + " " in current + " ":
            continue
        if key == "dcgm" and drained:  # already out of service: DCGM's finding adds nothing
            continue
        drain(cfg, node, reason)
        drained = True
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
