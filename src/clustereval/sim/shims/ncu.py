"""Simulated ``ncu`` (Nsight Compute CLI): ``ncu --version`` / ``-v`` exactly as the real profiler prints it,
for the release this copy belongs to; profiling is not simulated (any other use says so on stderr, exit 1).

The simulation installs this file once per Nsight Compute with ``INSTALLED`` set to its version.
"""

import sys

# Nsight Compute version -> (copyright end year, build id), each read off a real `ncu --version` in public
# captures (2024.3.2.0 ships with CUDA 12.6, 2025.1.1.0 with CUDA 12.8). Others are refused by the simulation.
BANNERS = {
    "2020.3.0.0": ("2020", "29307467"),
    "2021.2.1.0": ("2021", "30182073"),
    "2024.3.2.0": ("2024", "34861637"),
    "2025.1.1.0": ("2025", "35528883"),
    "2026.1.1.0": ("2026", "37634170"),
}
INSTALLED = None


def main(argv):
    if len(argv) == 1 and argv[0] in ("--version", "-v") and INSTALLED in BANNERS:
        year, build = BANNERS[INSTALLED]
        sys.stdout.write("NVIDIA (R) Nsight Compute Command Line Profiler\n"
                         f"Copyright (c) 2018-{year} NVIDIA Corporation\n"
                         f"Version {INSTALLED} (build {build}) (public-release)\n")
        return 0
    sys.stderr.write("clustereval simulation: ncu profiling is not simulated (only --version)\n")
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
