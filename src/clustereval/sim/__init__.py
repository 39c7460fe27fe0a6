"""The simulated GPU cluster used by tests and the demo (``clustereval sim up|down|status``).

:mod:`clustereval.sim.cluster` starts real sshd / munge / slurmctld / slurmd processes per simulated node,
:mod:`clustereval.sim.profile` turns a profile YAML into per-node state, and ``shims/`` holds the
standalone vendor-tool stand-ins (``nvidia-smi``, ``dcgmi``) that read it. See ``docs/sim.md``.
Nothing outside this package may depend on it: roles and parsers must not know they talk to a simulation.
"""

import signal
import sys


def stop_on_sigterm() -> None:
    """Make SIGTERM (``timeout``, a CI runner's cancel) unwind like Ctrl-C: a script that brings simulated
    clusters up in ``try``/``finally`` then brings them down instead of leaving their daemons running."""
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
