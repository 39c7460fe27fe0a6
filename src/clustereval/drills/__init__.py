"""Destructive fault drills: break a node on purpose and time what the provider's own automation does.

* :mod:`clustereval.drills.commands` — the exact shell each step runs on a node (poll, reboot, Xid
  injection by DCGM, ``/dev/kmsg`` or a secondary bus reset; on an AMD node an uncorrectable UMC RAS error
  by amdgpu's RAS debugfs control or ``/dev/kmsg``; the GPU job, the restores);
* :mod:`clustereval.drills.plan` — refuse without the opt-in and a target list, batches, the dry-run plan;
* :mod:`clustereval.drills.timeline` — the drill's log turned into a timeline (inject → detect → drain →
  back), each milestone bracketed by the observations around it;
* :mod:`clustereval.drills.runner` — the loop that acts, observes and writes the log as it goes.

Everything is measured on the controller's clock (``time.time()`` when a step was sent and when its answer
came back); the nodes' own clocks appear only as evidence. Nothing here repairs the cluster: a drain the
provider's health check set is the provider's to lift.
"""

KINDS = ("reboot", "inject")
METHODS = ("auto", "dcgm", "kmsg", "sbr", "ras")
# The order the methodology tries injection methods in (``auto``): DCGM's own field injection where DCGM
# allows it, else a synthetic driver line in the kernel log, else a real Xid 79 from a secondary bus reset.
AUTO_ORDER = ("dcgm", "kmsg", "sbr")
# On an AMD node (``amd-smi`` and no ``nvidia-smi``: the node's own tools say so, see commands.gpu_bus_ids) the
# fault is an uncorrectable UMC (HBM) RAS error: the driver's own injection through its RAS debugfs control where
# the platform allows it, else the driver's line in the kernel log, else a secondary bus reset.
AUTO_ORDER_AMD = ("ras", "kmsg", "sbr")
VENDORS = ("nvidia", "amd")
# What an AMD drill injects, as results name it (params and evidence ``fault``; an NVIDIA drill's is ``xid``).
RAS_UMC_UE = "ras_umc_ue"


def auto_order(vendor: str | None) -> tuple[str, ...]:
    """The methods ``auto`` tries on a node of ``vendor`` (NVIDIA's order when it is not known)."""
    return AUTO_ORDER_AMD if vendor == "amd" else AUTO_ORDER
