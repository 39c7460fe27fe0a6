"""The simulated GPU cluster used by tests and the demo (``clustereval sim up|down|status``).

:mod:`clustereval.sim.cluster` starts real sshd / munge / slurmctld / slurmd processes per simulated node,
:mod:`clustereval.sim.profile` turns a profile YAML into per-node state, and ``shims/`` holds the
standalone vendor-tool stand-ins (``nvidia-smi``, ``dcgmi``) that read it. See ``docs/sim.md``.
Nothing outside this package may depend on it: roles and parsers must not know they talk to a simulation.
"""
