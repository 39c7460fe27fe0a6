#!/usr/bin/python3 -IS
"""The simulated provider's node health checks, run by the node's HealthCheckProgram (standalone: stdlib only).

slurmd runs the node's program (``/sim/etc/slurm/healthcheck``, written by sim/slurmconf.py from the profile's
``provider.health_check``) at start and every HealthCheckInterval, inside the node's namespaces; the program
runs this with the checks it names, and either drains the node with each reason this prints (one a line) or,
with ``--report``, lets this print them and exit 1. The checks (arguments):

* ``check_nv_xid``: an ``NVRM: Xid`` line in the node's kernel ring buffer (``/sim/kmsg``) whose code is one of
  ``drain_xids`` (``/sim/provider.json``) fails with reason ``XID <code>`` (the last such line);
* ``check_dcgmi``: ``dcgmi health -c`` other than Healthy fails with reason ``DCGM health``;
* ``check_nv_gpu_count=N``: fewer than N GPUs in ``nvidia-smi -L`` fails with reason ``GPU count <k>, expected N``;
* ``check_amd_ras``: an amdgpu ``N uncorrectable hardware errors detected in <block> block`` line in the ring
  buffer fails with reason ``AMD RAS UE <block> <bdf>`` (the last such line);
* ``check_amd_gpu_count=N``: fewer than N physical GPUs (partition 0 blocks) in ``amd-smi list`` fails with reason
  ``GPU count <k>, expected N``.

A failure is printed once it has been seen for ``after_s`` seconds (the first sighting is kept in
``/sim/run/healthcheck-seen.json``, gone at reboot), unless the node is drained for it already. The node's mode
``times_out``: the check hangs past its ``timeout_s`` and fails, healthy or not, with the reason NHC's watchdog
gives (``NHC: Script timed out while executing "check_nv_healthmon".``); with ``from_s``, only once the node has
been up that long (before, it checks as usual). ``--report`` (mode ``exit_1``) prints every failure as
``ERROR:  nhc:  Health check failed:  <reason>`` and exits 1, which slurmd ignores.

Every run, and every reason printed for a drain, is appended to the node's ground truth.
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


def drain(cfg, reason):
    """Hand ``reason`` to the program, which drains the node with it at once."""
    record(cfg, "drained", by="healthcheck", reason=reason)
    sys.stdout.write(reason + "\n")
    sys.stdout.flush()


def check_xid(cfg, _arg):
    try:
        with open(os.path.join(ROOT, "kmsg"), errors="replace") as fh:
            codes = [int(m.group(1)) for m in XID.finditer(fh.read())]
    except OSError:
        codes = []
    wanted = [c for c in codes if c in set(cfg.get("drain_xids") or [])]
    return f"XID {wanted[-1]}" if wanted else None


def check_dcgm(_cfg, _arg):
    dcgmi = os.path.join(ROOT, "bin", "dcgmi")
    if not os.access(dcgmi, os.X_OK):
        return None
    out = subprocess.run([dcgmi, "health", "-g", "0", "-c"], capture_output=True, text=True).stdout
    return None if re.search(r"Overall Health *\| Healthy", out) else "DCGM health"


def _gpu_count(arg, argv, counted):
    """Fewer GPUs than ``arg`` in the output of the node's ``argv`` (``counted`` counts them): the reason, else None."""
    expected = int(arg or 0)
    try:
        out = subprocess.run([os.path.join(ROOT, "bin", argv[0]), *argv[1:]], capture_output=True, text=True).stdout
    except OSError:
        out = ""
    found = counted(out)
    return f"GPU count {found}, expected {expected}" if found < expected else None


def check_gpu_count(_cfg, arg):
    return _gpu_count(arg, ["nvidia-smi", "-L"], lambda out: sum(1 for line in out.splitlines()
                                                                  if line.startswith("GPU ")))


AMD_UE = re.compile(r"amdgpu (\S+): (?:\{\d+\})?\d+ uncorrectable hardware errors detected in (\w+) block")


def check_amd_ras(_cfg, _arg):
    try:
        with open(os.path.join(ROOT, "kmsg"), errors="replace") as fh:
            found = AMD_UE.findall(fh.read())
    except OSError:
        found = []
    return f"AMD RAS UE {found[-1][1]} {found[-1][0]}" if found else None


def check_amd_gpu_count(_cfg, arg):
    # physical GPUs: a GPU in CPX partitioning lists 8 partitions, the first with PARTITION_ID 0
    return _gpu_count(arg, ["amd-smi", "list"], lambda out: len(re.findall(r"^\s*PARTITION_ID: 0\s*$", out,
                                                                          re.MULTILINE)))


# argument word -> (key in healthcheck-seen.json, the check)
CHECKS = {"check_nv_xid": ("xid", check_xid), "check_dcgmi": ("dcgm", check_dcgm),
          "check_nv_gpu_count": ("gpu_count", check_gpu_count), "check_amd_ras": ("amd_ras", check_amd_ras),
          "check_amd_gpu_count": ("gpu_count", check_amd_gpu_count)}


def faults(cfg, words):
    """What the named checks see: [(key, reason)] in the order they are named."""
    found = []
    for word in words:
        name, _, arg = word.partition("=")
        if name in CHECKS:
            key, run = CHECKS[name]
            reason = run(cfg, arg)
            if reason:
                found.append((key, reason))
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
    report = "--report" in argv
    words = [a for a in argv if not a.startswith("--")]
    hc = cfg.get("health_check") or {}
    cfg.update(drain_xids=hc.get("drain_xids"))
    mode = hc.get("mode", "drain")
    node = os.environ.get("SLURMD_NODENAME") or socket.gethostname()
    cfg["node"] = cfg.get("node") or node
    if mode == "times_out" and uptime() < float(hc.get("from_s", 0)):
        mode = "drain"  # it starts hanging only later (under load, as such checks do)
    if mode == "times_out":
        record(cfg, "healthcheck_run", mode=mode)
        time.sleep(float(hc.get("timeout_s", 2)))
        current = scontrol(cfg, "show", "node", node).stdout
        if "Reason=" + NHC_TIMEOUT not in current:
            drain(cfg, NHC_TIMEOUT)
        return 0
    found = faults(cfg, words)
    record(cfg, "healthcheck_run", mode=mode, found=[reason for _, reason in found])
    if report:
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
        if "Reason=" + reason + " " in current + " ":
            continue
        if key != "xid" and drained:  # already out of service: another finding adds nothing
            continue
        drain(cfg, reason)
        drained = True
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
