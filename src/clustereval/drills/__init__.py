"""Destructive fault drills: break a node on purpose and time what the provider's own automation does.

* :mod:`clustereval.drills.commands` — the exact shell each step runs on a node (poll, reboot, Xid
  injection by DCGM, ``/dev/kmsg`` or a secondary bus reset, the GPU job, the restores);
* :mod:`clustereval.drills.plan` — refuse without the opt-in and a target list, batches, the dry-run plan;
* :mod:`clustereval.drills.timeline` — the drill's log turned into a timeline (inject → detect → drain →
  back), each milestone bracketed by the observations around it;
* :mod:`clustereval.drills.runner` — the loop that acts, observes and writes the log as it goes.

Everything is measured on the controller's clock (``time.time()`` when a step was sent and when its answer
came back); the nodes' own clocks appear only as evidence. Nothing here repairs the cluster: a drain the
provider's health check set is the provider's to lift.
"""

KINDS = ("reboot", "inject")
METHODS = ("auto", "dcgm", "kmsg", "sbr")
# The order the methodology tries injection methods in (``auto``): DCGM's own field injection where DCGM
# allows it, else a synthetic driver line in the kernel log, else a real Xid 79 from a secondary bus reset.
AUTO_ORDER = ("dcgm", "kmsg", "sbr")
