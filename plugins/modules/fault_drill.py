# Documentation only: ``clustereval.gpu.fault_drill`` is an action plugin (plugins/action/fault_drill.py) that runs on
# the controller. ansible-doc and ansible-lint find a module's documentation here, as for ansible.builtin.debug.

from __future__ import annotations

DOCUMENTATION = r"""
---
module: fault_drill
short_description: Reboot a node or inject a GPU fault on it, and time what the provider's automation does
description:
  - C(drill=reboot) runs the reboot command and times the node going down, answering over SSH with a new boot
    id, the scheduler showing it usable with a restarted slurmd, and a GPU job running on it.
  - C(drill=inject) injects an Xid on one GPU (C(method) C(dcgm), C(kmsg), C(sbr), or C(auto) trying them in
    that order) and times detection (the scheduler takes the node out of service, or it goes down), the time in
    drain and the return to service with a GPU job; it records healthy nodes drained meanwhile and spares
    that came into service.
  - On an AMD node (it has C(amd-smi) and no C(nvidia-smi)) the fault is an uncorrectable UMC (HBM) RAS error
    instead of the Xid (results name it C(fault=ras_umc_ue)). C(ras) writes C(inject umc ue 0x0 0x0 0x0) to the
    GPU's amdgpu RAS debugfs control (C(/sys/kernel/debug/dri/N/ras/ras_ctrl)) where debugfs and the driver's RAS
    allow it; C(kmsg) writes the driver's report of one uncorrectable error in the umc block, as amdgpu prints it,
    to C(/dev/kmsg); C(sbr) resets the bus; C(auto) tries them in that order (C(dcgm) is NVIDIA's only). GPUs
    are listed with C(amd-smi list) (physical GPUs).
  - Refuses (every check recorded as skipped, nothing done) unless C(options.allow_destructive) is true and
    C(options.destructive_targets) names this host; C(dry_run) reads what it needs, does nothing and says what
    it would run (it needs the target list, not the flag).
  - Every change is journaled before it is made and restored in C(finally); Ctrl-C and SIGTERM stop the drill,
    restore, and keep every observation made.
options:
  drill:
    description: C(reboot) or C(inject).
    type: str
    required: true
  method:
    description: Injection method (C(auto), C(dcgm), C(kmsg), C(sbr); C(ras) on AMD nodes).
    type: str
    default: auto
  xid:
    description: The Xid code injected (NVIDIA nodes; an AMD node's fault is a UMC RAS error).
    type: int
    default: 79
  gpu:
    description: Index of the GPU the fault is injected on (on an AMD node, of its physical GPUs in C(amd-smi list)
      order).
    type: int
    default: 0
  reboot_command:
    description: The command that reboots the node.
    type: str
    default: systemctl reboot
  gpu_job_command:
    description: >-
      The GPU job run once the node is back (C({node}) is the node's name, C({gpu_list}) its GPU listing:
      C(nvidia-smi -L), or C(amd-smi list) on an AMD node). Default
      C(srun -w {node} -N1 -n1 --gres=gpu:1 -t 2 --immediate=10 {gpu_list}).
    type: str
  job_timeout_s:
    description: Seconds a GPU job may take before it counts as failed.
    type: float
    default: 120
  poll_interval_s:
    description: Seconds between observations.
    type: float
    default: 0.5
  detect_limit_s:
    description: How long a fault may go undetected before the drill says so and stops.
    type: float
    default: 600
  return_limit_s:
    description: How long the drill waits for the node's return to service (0 = do not wait).
    type: float
    default: 3600
  scheduler:
    description: C(slurm) (observed with C(scontrol) on the node) or C(k8s) (C(kubectl) on the controller).
    type: str
    default: slurm
  k8s_api_host:
    description: Where kubectl runs; drills need it on the controller (C(localhost)).
    type: str
    default: localhost
  k8s_namespace:
    description: Namespace of the GPU test pod (Kubernetes).
    type: str
    default: default
  k8s_gpu_image:
    description: Image of the GPU test pod (it runs C(nvidia-smi -L)).
    type: str
  drain_timeout_s:
    description: C(kubectl drain --timeout) before a Kubernetes reboot.
    type: float
    default: 300
  alert_url:
    description:
      - An Alertmanager (v2 API) read from the controller at every observation; a new alert naming the node (in
        C(instance), C(node), C(hostname), ...) counts as detection. A bearer token is read from
        C($CLUSTEREVAL_ALERTMANAGER_TOKEN) and never recorded.
    type: str
  targets:
    description: Every node this drill run acts on (none of them counts as a bystander).
    type: list
    elements: str
  dry_run:
    description: Say what would be done; change nothing.
    type: bool
    default: false
  checks:
    description: Check ids judged from the drill (default all of the drill's).
    type: list
    elements: str
  options:
    description: Check settings (C(allow_destructive), C(destructive_targets), C(baseline_overrides)).
    type: dict
author: clustereval developers
"""

EXAMPLES = r"""
- name: Reboot one node and time the provider's recovery (destructive, opt-in)
  clustereval.gpu.fault_drill:
    drill: reboot
    options:
      allow_destructive: true
      destructive_targets: [gpu-node-07]
  when: inventory_hostname == 'gpu-node-07'
"""

RETURN = r"""
clustereval_results_json:
  description: The check results the task produced, one JSON string (also appended to the run's results.jsonl).
  returned: always
  type: str
"""
