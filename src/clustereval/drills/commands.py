"""The shell a drill runs on a node, one builder per step; every value reaches the shell quoted.

Each step prints ``## kind key=value`` section headers (``parsers/probe_drill.py`` reads them), so the log
keeps the node's own words under a header saying what they are. A step that cannot work on this node says
why in one ``## unavailable why=...`` line and exits 3: the drill then tries the next method or skips,
never guesses.

The GPUs' vendor is what the node's own tools say (:func:`gpu_bus_ids`: ``nvidia-smi``, or ``amd-smi`` on a
node without it); the builders take it as ``vendor`` (``nvidia`` unless told otherwise). On an AMD node the
injected fault is an uncorrectable UMC (HBM) RAS error instead of an Xid: by the driver's RAS debugfs control
(``ras``), or the driver's report line in the kernel log (``kmsg``); DCGM is NVIDIA's and says so.
"""

from __future__ import annotations

import json
import shlex

# DCGM field ids (dcgm_fields.h): DCGM_FI_DEV_XID_ERRORS holds the last Xid a GPU raised.
DCGM_FIELD_XID = 230
UNAVAILABLE_RC = 3
# amdgpu's RAS debugfs control (drivers/gpu/drm/amd/amdgpu/amdgpu_ras.c, amdgpu_ras_debugfs_ctrl_write and its
# "AMDGPU RAS debugfs control interface" comment): ``inject <block> <error> <sub-block> <address> <value>
# [<mask>]``, three numbers at least (sscanf must fill sub-block, address and value, else -EINVAL); sub-block
# 0, VRAM offset 0, value 0: the comment's own example, ``echo inject umc ue 0x0 0x0 0x0 > .../ras/ras_ctrl``.
RAS_INJECT = "inject umc ue 0x0 0x0 0x0"
# Where the RAS step looks (module constants, so a test can point them at a tree of its own).
DEBUGFS = "/sys/kernel/debug"
PCI_DEVICES = "/sys/bus/pci/devices"
PROC_MOUNTS = "/proc/mounts"
AMDGPU_PARAMETERS = "/sys/module/amdgpu/parameters"
# amdgpu reports RAS error counts with dev_info (KERN_INFO) under the device's name, as the kernel-amd-ras corpus
# shows: ``amdgpu 0000:05:00.0: 1 uncorrectable hardware errors detected in umc block``.
RAS_KMSG_PRIORITY = 6
# How long the secondary bus reset is held: the PCIe base spec asks for at least 1 ms; a second is what
# site scripts use, and lets a bridge that latches slowly see it.
SBR_HOLD_S = 0.5
# The driver's text after "NVRM: Xid (PCI:0000:BB:00): <code>, " for the Xids a drill injects (the
# kernel-xid corpus and NVIDIA's Xid catalogue); pid=0 names no process, as for a fault outside any job.
XID_TEXT = {
    79: "pid=0, name=clustereval-drill, GPU has fallen off the bus.",
    48: "pid=0, name=clustereval-drill, An uncorrectable double bit error (DBE) has been detected on GPU in the "
        "framebuffer at partition 0, subpartition 0.",
    94: "pid=0, name=clustereval-drill, Contained: SM (0x1). RST: No, D-RST: No",
    95: "pid=0, name=clustereval-drill, Uncontained: FBHUB. RST: Yes, D-RST: No",
    119: "pid=0, name=clustereval-drill, Timeout after 6s of waiting for RPC response from GPU0 GSP! Expected "
         "function 76 (GSP_RM_CONTROL) (0x20801702 0x4).",
    13: "pid=0, name=clustereval-drill, Graphics SM Warp Exception on (GPC 0, TPC 0, SM 0): Out Of Range Address",
    31: "pid=0, name=clustereval-drill, Ch 00000008, intr 00000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_0 "
        "faulted @ 0x0_00000000. Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_READ",
    43: "pid=0, name=clustereval-drill, Ch 00000008",
    74: "pid=0, name=clustereval-drill, NVLink: fatal error detected on link 0(0x0, 0x0, 0x10000, 0x0, 0x0, 0x0, "
        "0x0)",
}


def _clock(kind: str) -> str:
    return f"printf '## {kind} t=%s\\n' \"$(date +%s.%N)\""


def poll(node: str, gpus: bool = False, scheduler: str = "slurm") -> str:
    """One observation of the node: its clock and boot id, Slurm's view (the node in full with ``scontrol -o
    show node NODE``, every node's state and reason with ``sinfo -N``: a few dozen bytes a node, so a
    thousand-node cluster costs no megabyte a poll) and, when asked, the GPUs the driver lists."""
    parts = [_clock("clock"),
             "printf '## boot_id id=%s\\n' \"$(cat /proc/sys/kernel/random/boot_id 2>/dev/null)\""]
    if scheduler == "slurm":
        parts.append(f"if command -v scontrol >/dev/null 2>&1; then out=$(scontrol -o show node {shlex.quote(node)} "
                     "2>&1); printf '## scontrol rc=%s\\n%s\\n' \"$?\" \"$out\"; "
                     "out=$(sinfo -h -N -o '%N|%T|%E' 2>&1); printf '## sinfo rc=%s\\n%s\\n' \"$?\" \"$out\"; "
                     "else echo '## scontrol rc=127 missing=yes'; fi")
    if gpus:
        # A node without nvidia-smi lists its GPUs with amd-smi (``GPU: N`` blocks; PARTITION_ID 0 is a physical
        # GPU): the parser counts those, so "back with all its GPUs" is judged alike on either vendor.
        parts.append("if command -v nvidia-smi >/dev/null 2>&1; then out=$(timeout 30 nvidia-smi -L 2>&1); "
                     "printf '## gpus rc=%s\\n%s\\n' \"$?\" \"$out\"; "
                     "elif command -v amd-smi >/dev/null 2>&1; then out=$(timeout 30 amd-smi list 2>&1); "
                     "printf '## gpus rc=%s tool=amd-smi\\n%s\\n' \"$?\" \"$out\"; "
                     "else echo '## gpus rc=127 missing=yes'; fi")
    return "; ".join(parts)


def gpu_bus_ids() -> str:
    """``index, pci.bus_id`` of every GPU (``0, 00000000:18:00.0``); on a node with ``amd-smi`` and no
    ``nvidia-smi``, ``amd-smi list`` under ``## gpu_bus vendor=amd`` (its physical GPUs, PARTITION_ID 0, in
    order, are GPUs 0, 1, ...): the node's own tools say which vendor's GPUs it has."""
    return ("if command -v nvidia-smi >/dev/null 2>&1 || ! command -v amd-smi >/dev/null 2>&1; then "
            "echo '## gpu_bus'; timeout 30 nvidia-smi --query-gpu=index,pci.bus_id --format=csv,noheader 2>&1; "
            "echo \"## end rc=$?\"; else echo '## gpu_bus vendor=amd tool=amd-smi'; timeout 30 amd-smi list 2>&1; "
            "echo \"## end rc=$?\"; fi")


def gpu_list(vendor: str | None) -> str:
    """The command listing a node's GPUs (the GPU job's ``{gpu_list}``): ``nvidia-smi -L``, or ``amd-smi list``."""
    return "amd-smi list" if vendor == "amd" else "nvidia-smi -L"


def sysfs_bdf(bus_id: str) -> str:
    """nvidia-smi's ``00000000:18:00.0`` as sysfs names the device (``0000:18:00.0``, lower case)."""
    domain, _, rest = str(bus_id).strip().partition(":")
    return f"{domain[-4:]}:{rest}".lower()


def kmsg_line(xid: int, bus_id: str, vendor: str = "nvidia") -> str:
    """The driver's line (without the priority the writer adds): NVIDIA's Xid, ``NVRM: Xid (PCI:0000:18:00): 79,
    ...``; on an AMD node amdgpu's RAS report of one uncorrectable UMC error on the GPU, ``amdgpu 0000:05:00.0: 1
    uncorrectable hardware errors detected in umc block`` (``xid`` is then not used)."""
    bdf = sysfs_bdf(bus_id)
    if vendor == "amd":
        return f"amdgpu {bdf}: 1 uncorrectable hardware errors detected in umc block"
    text = XID_TEXT.get(int(xid), "pid=0, name=clustereval-drill, Graphics Exception")
    return f"NVRM: Xid (PCI:{bdf.rsplit('.', 1)[0]}): {int(xid)}, {text}"


def _unavailable(why: str) -> str:
    """``## unavailable why=WHY`` and exit 3 (``why`` may hold shell expansions; it holds no ``=``)."""
    return f"{{ echo \"## unavailable why={why}\"; exit {UNAVAILABLE_RC}; }}"


def _prepare_ras(bus_id: str) -> str:
    """Whether amdgpu's RAS debugfs control can inject a UMC UE on the GPU at ``bus_id``: RAS on in the driver
    (``amdgpu.ras_enable`` not 0), debugfs mounted and readable, this device's ``ras/ras_ctrl`` there and
    writable (its DRM debugfs directory: the one named after the device, or whose ``name`` says ``dev=BDF``),
    UMC in the device's RAS feature mask (bit 0, AMDGPU_RAS_BLOCK__UMC), and VRAM page 0 not retired already
    (the driver skips a UMC injection at a retired page without an error). Prints the control's path."""
    bdf = sysfs_bdf(bus_id)
    off = _unavailable("RAS is off in the driver (amdgpu ras_enable is 0)")
    no_debugfs = _unavailable(f"debugfs is not mounted at {DEBUGFS}")
    no_dri = _unavailable("$dri is not there, or not readable here (debugfs is root only)")
    no_ctrl = _unavailable("no amdgpu RAS control for $bdf under $dri (RAS not enabled on this GPU, or no amdgpu)")
    no_mask = _unavailable("$dev/ras/features gives no RAS feature mask")
    no_umc = _unavailable("UMC RAS is not enabled on $bdf (feature mask $mask)")
    retired = _unavailable("VRAM page 0 of $bdf is retired already (an earlier drill): the driver ignores a UMC "
                           "injection there")
    return (f"bdf={shlex.quote(bdf)}; dev={shlex.quote(PCI_DEVICES)}/\"$bdf\"; dri={shlex.quote(DEBUGFS + '/dri')}; "
            f"enabled=$(cat {shlex.quote(AMDGPU_PARAMETERS + '/ras_enable')} 2>/dev/null); "
            f"[ \"$enabled\" != 0 ] || {off}; "
            f"grep -qs {shlex.quote(f'^[^ ]* {DEBUGFS} debugfs ')} {shlex.quote(PROC_MOUNTS)} || {no_debugfs}; "
            f"[ -d \"$dri\" ] || {no_dri}; "
            "ctrl=; for d in \"$dri/$bdf\" \"$dri\"/*; do [ -e \"$d/ras/ras_ctrl\" ] || continue; "
            "if [ \"$d\" = \"$dri/$bdf\" ] || grep -qs \"dev=$bdf\" \"$d/name\"; then "
            "ctrl=\"$d/ras/ras_ctrl\"; break; fi; done; "
            f"[ -n \"$ctrl\" ] || {no_ctrl}; [ -w \"$ctrl\" ] || {_unavailable('$ctrl is not writable')}; "
            "mask=$(sed -n 's/^feature mask: *//p' \"$dev/ras/features\" 2>/dev/null); "
            f"case \"$mask\" in 0x[0-9a-fA-F]*|[0-9]*) ;; *) {no_mask};; esac; "
            f"[ $(( $mask & 1 )) -eq 1 ] || {no_umc}; "
            f"if grep -qs '^0x0*0 *:' \"$dev/ras/gpu_vram_bad_pages\"; then {retired}; fi; "
            "printf '## ready ctrl=%s features=%s\\n' \"$ctrl\" \"$mask\"")


def prepare(method: str, gpu: int, bus_id: str, xid: int, vendor: str = "nvidia") -> str:
    """Read-only: whether ``method`` can work on this node, and what it would touch (the SBR's bridge and its
    bridge-control word, the RAS control's path), so the journal holds the exact restore before anything
    changes. ``dcgm`` is NVIDIA's and ``ras`` AMD's: on the other vendor's node they say so."""
    if method == "dcgm":
        if vendor == "amd":
            return ("echo '## unavailable why=DCGM injects NVIDIA Xids; this node has AMD GPUs (amd-smi, no nvidia-smi "
                    "or dcgmi)'; exit 3")
        return ("command -v dcgmi >/dev/null 2>&1 || { echo '## unavailable why=dcgmi is not installed'; exit 3; }; "
                "echo '## ready'")
    if method == "ras":
        if vendor != "amd":
            return ("echo '## unavailable why=RAS injection is the amdgpu driver feature; this node has no AMD GPU "
                    "(nvidia-smi, no amd-smi)'; exit 3")
        return _prepare_ras(bus_id)
    if method == "kmsg":
        return ("[ -w /dev/kmsg ] || { echo '## unavailable why=/dev/kmsg is not writable'; exit 3; }; "
                "echo '## ready'")
    if method == "sbr":
        dev = shlex.quote(f"/sys/bus/pci/devices/{sysfs_bdf(bus_id)}")
        return (f"dev={dev}; "
                "[ -e \"$dev\" ] || { echo \"## unavailable why=$dev does not exist\"; exit 3; }; "
                "command -v setpci >/dev/null 2>&1 || { echo '## unavailable why=setpci (pciutils) is not installed';"
                " exit 3; }; "
                "bridge=$(basename \"$(dirname \"$(readlink -f \"$dev\")\")\"); "
                "case \"$bridge\" in ????:??:??.?) ;; *) echo \"## unavailable why=no PCI bridge above $dev "
                "($bridge)\"; exit 3;; esac; "
                "control=$(setpci -A linux-sysfs -s \"$bridge\" BRIDGE_CONTROL.w 2>&1) || "
                "{ echo \"## unavailable why=setpci cannot read $bridge: $control\"; exit 3; }; "
                "printf '## ready bridge=%s control=%s\\n' \"$bridge\" \"$control\"")
    raise ValueError(f"unknown injection method {method!r}")


def inject(method: str, gpu: int, bus_id: str, xid: int, bridge: str | None = None,
           control: str | None = None, vendor: str = "nvidia", ctrl: str | None = None) -> str:
    """The injection itself; prints ``## fault t=`` (the node's clock) the moment the fault is in place. ``ras``
    writes :data:`RAS_INJECT` to the control ``prepare`` found (``ctrl``); the driver then reports the error
    and resets the GPU as it does for a real one."""
    if method == "dcgm":
        return (f"out=$({_dcgm_inject(gpu, xid)} 2>&1); rc=$?; "
                f"{_clock('fault')}; printf '## dcgmi rc=%s\\n%s\\n' \"$rc\" \"$out\"; exit $rc")
    if method == "kmsg":
        line = kmsg_line(xid, bus_id, vendor)
        priority = RAS_KMSG_PRIORITY if vendor == "amd" else 4
        return (f"{_to_kmsg(priority, line)}; rc=$?; {_clock('fault')}; "
                f"printf '## kmsg rc=%s line=%s\\n' \"$rc\" {shlex.quote(line)}; exit $rc")
    if method == "ras":
        where = shlex.quote(str(ctrl))
        write = f"timeout 10 sh -c 'printf \"%s\\n\" \"$1\" > \"$2\"' sh {shlex.quote(RAS_INJECT)} {where}"
        return (f"out=$({write} 2>&1); rc=$?; {_clock('fault')}; "
                f"printf '## ras rc=%s ctrl=%s\\n%s\\n' \"$rc\" {where} \"$out\"; exit $rc")
    if method == "sbr":
        restore = _bridge_control(str(bridge), str(control))
        # The trap puts the bridge back even when the session is cut while the reset is held.
        return (f"trap {shlex.quote(restore)} INT TERM HUP; "
                f"{_bridge_control(str(bridge), '0040:0040')} || exit 1; {_clock('fault')}; "
                f"sleep {SBR_HOLD_S}; {restore}; rc=$?; trap - INT TERM HUP; "
                f"now=$(date +%s.%N); printf '## restored rc=%s t=%s control=%s\\n' \"$rc\" \"$now\" "
                f"\"$({_bridge_control(str(bridge))})\"; "
                "exit $rc")
    raise ValueError(f"unknown injection method {method!r}")


def undo(method: str, gpu: int, bus_id: str, xid: int, expected_gpus: int, reboot_cmd: str,
         bridge: str | None = None, control: str | None = None, vendor: str = "nvidia",
         ctrl: str | None = None) -> str:
    """What puts the node back as it was (the journal's undo recipe): DCGM's field back at 0; for a
    secondary bus reset the bridge word back, and a reboot when the GPU is still off the bus (nothing
    else brings a GPU back from an Xid 79). A kernel-log line cannot be withdrawn: the restore writes a
    line saying the Xid (on AMD: the RAS error) above was ours, for whoever reads the log next. An injected
    RAS error was handled by the driver as a real one: the restore says so in the kernel log and reboots
    the node when a GPU is still missing; the page the driver retired for it stays in the GPU's RAS EEPROM
    (``ras_eeprom_reset`` would also drop real records: never done here)."""
    if method == "dcgm":
        return _dcgm_inject(gpu, 0)
    if method == "kmsg":
        if vendor == "amd":
            return _to_kmsg(5, f"clustereval: the uncorrectable umc RAS error line above for {sysfs_bdf(bus_id)} was "
                               "written by a fault drill; no hardware fault")
        return _to_kmsg(5, f"clustereval: the Xid {int(xid)} line above for PCI:{sysfs_bdf(bus_id)} was written "
                           "by a fault drill; no hardware fault")
    if method == "ras":
        note = _to_kmsg(5, f"clustereval: the uncorrectable umc RAS error on {sysfs_bdf(bus_id)} was injected by a "
                           f"fault drill ({RAS_INJECT} to {ctrl}); no hardware fault")
        return f"{note} || true; {_all_gpus_or_reboot(expected_gpus, reboot_cmd, vendor)}"
    if method == "sbr":
        return f"{_bridge_control(str(bridge), str(control))}; {_all_gpus_or_reboot(expected_gpus, reboot_cmd, vendor)}"
    raise ValueError(f"unknown injection method {method!r}")


def _all_gpus_or_reboot(expected_gpus: int, reboot_cmd: str, vendor: str) -> str:
    """Reboot (detached) unless the driver lists ``expected_gpus`` GPUs again (amd-smi: physical ones)."""
    count = ("timeout 30 amd-smi list 2>/dev/null | grep -Ec '^ *PARTITION_ID: 0 *$'" if vendor == "amd" else
             "timeout 30 nvidia-smi -L 2>/dev/null | grep -c '^GPU '")
    return f"[ \"$({count})\" -ge {int(expected_gpus)} ] || {{ {_detached(reboot_cmd)} sleep 0.5; }}"


def _dcgm_inject(gpu: int, value: int) -> str:
    return f"dcgmi test --inject --gpuid {int(gpu)} -f {DCGM_FIELD_XID} -v {int(value)}"


def _to_kmsg(priority: int, text: str) -> str:
    """Write one kernel log line at ``priority`` (never blocking for more than 5 s)."""
    return f"timeout 5 sh -c 'printf \"%s\\n\" \"$1\" > /dev/kmsg' sh {shlex.quote(f'<{int(priority)}>{text}')}"


def _bridge_control(bridge: str, value: str | None = None) -> str:
    """Read (``value`` None) or write a bridge's control word through sysfs only, never raw port I/O."""
    where = f"setpci -A linux-sysfs -s {shlex.quote(bridge)} BRIDGE_CONTROL.w"
    return where if value is None else f"{where}={shlex.quote(value)}"


def reboot(command: str) -> str:
    """Start the reboot detached (the SSH session ends with the node) and say when it was asked for."""
    return f"{_detached(command)} {_clock('fault')}; echo '## reboot requested'; sleep 0.5"


def _detached(command: str) -> str:
    """``command`` in the background, surviving the end of the SSH session: SIGHUP is ignored before the fork,
    so the session's hang-up cannot kill it before it has run."""
    return f"trap '' HUP; nohup sh -c {shlex.quote(command)} >/dev/null 2>&1 </dev/null &"


def gpu_job(node: str, command: str, timeout_s: int) -> str:
    """A basic GPU command in a job on ``node`` (Slurm: ``srun -w NODE``), bounded by ``timeout_s``."""
    inner = command.replace("{node}", node)
    return (f"out=$(timeout {int(timeout_s)} sh -c {shlex.quote(inner)} 2>&1); rc=$?; "
            "printf '## job rc=%s\\n%s\\n' \"$rc\" \"$out\"")


# ----------------------------------------------------------------------------------------- Kubernetes
# Run on the controller with its kubectl and KUBECONFIG (clustereval_k8s_api_host=localhost).

def kubectl_nodes() -> str:
    """Every node as the API server sees it (conditions, taints, unschedulable, allocatable, nodeInfo.bootID)."""
    return "out=$(kubectl get nodes -o json 2>&1); printf '## kubectl rc=%s\\n%s\\n' \"$?\" \"$out\""


def kubectl_node(node: str) -> str:
    """The drilled node alone (every poll; the whole list, for the bystanders, comes every few seconds)."""
    return (f"out=$(kubectl get node {shlex.quote(node)} -o json 2>&1); "
            "printf '## kubectl_node rc=%s\\n%s\\n' \"$?\" \"$out\"")


def cordon(node: str) -> str:
    return f"kubectl cordon {shlex.quote(node)}"


def uncordon(node: str) -> str:
    return f"kubectl uncordon {shlex.quote(node)}"


def drain(node: str, timeout_s: int) -> str:
    """Evict the node's pods as a maintenance does (no --force: a pod no controller recreates stops the drill)."""
    return f"kubectl drain {shlex.quote(node)} --ignore-daemonsets --delete-emptydir-data --timeout={int(timeout_s)}s"


# The GPU test pod of a Kubernetes drill per node vendor: the device plugin's resource and an image with the
# vendor's GPU listing tool (the CUDA base image has nvidia-smi through the container toolkit; ROCm's dev image
# ships amd-smi).
K8S_GPU_RESOURCES = {"nvidia": "nvidia.com/gpu", "amd": "amd.com/gpu"}
K8S_GPU_IMAGES = {"nvidia": "nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04",
                  "amd": "docker.io/rocm/dev-ubuntu-24.04:7.0.2"}


def pod_manifest(node: str, name: str, namespace: str, image: str, vendor: str | None = None) -> str:
    """A pod bound to ``node`` asking for one GPU of the node's vendor and listing it: ``nvidia-smi -L`` with
    ``nvidia.com/gpu``, or on an AMD node ``amd-smi list`` with ``amd.com/gpu``."""
    resource = K8S_GPU_RESOURCES["amd" if vendor == "amd" else "nvidia"]
    return json.dumps({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace,
                     "labels": {"app.kubernetes.io/managed-by": "clustereval", "clustereval/drill": "gpu-job"}},
        "spec": {"nodeName": node, "restartPolicy": "Never",
                 "containers": [{"name": "gpu", "image": image, "command": gpu_list(vendor).split(),
                                 "resources": {"limits": {resource: 1}}}]},
    })


def k8s_gpu_job(node: str, name: str, namespace: str, image: str, timeout_s: int, vendor: str | None = None) -> str:
    """Create the pod, wait for it to end (at most ``timeout_s``), print its phase and logs, delete it."""
    n, ns = shlex.quote(name), shlex.quote(namespace)
    manifest = shlex.quote(pod_manifest(node, name, namespace, image, vendor))
    return (f"printf '%s' {manifest} | kubectl create -n {ns} -f - >/dev/null 2>&1 || "
            f"{{ echo '## job rc=1 phase=NotCreated'; exit 0; }}; "
            f"end=$(( $(date +%s) + {int(timeout_s)} )); phase=; "
            f"while [ \"$(date +%s)\" -lt \"$end\" ]; do "
            f"phase=$(kubectl get pod {n} -n {ns} -o jsonpath='{{.status.phase}}' 2>/dev/null); "
            "case \"$phase\" in Succeeded|Failed) break;; esac; sleep 1; done; "
            f"out=$(kubectl logs {n} -n {ns} 2>&1); "
            f"kubectl delete pod {n} -n {ns} --ignore-not-found --wait=false >/dev/null 2>&1; "
            "rc=1; [ \"$phase\" = Succeeded ] && rc=0; "
            "printf '## job rc=%s phase=%s\\n%s\\n' \"$rc\" \"$phase\" \"$out\"")


def delete_pod(name: str, namespace: str) -> str:
    return f"kubectl delete pod {shlex.quote(name)} -n {shlex.quote(namespace)} --ignore-not-found --wait=false"
