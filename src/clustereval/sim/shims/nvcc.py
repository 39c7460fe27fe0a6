"""Simulated ``nvcc`` of a CUDA toolkit: ``nvcc --version`` / ``-V`` exactly as the real compiler driver
prints it, for the toolkit release of the directory it is installed in (``/usr/local/cuda-12.4/bin``);
compiling is not simulated."""

import os
import sys

# Banner lines of the GA release of each toolkit (nvcc --version), per major.minor.
BUILDS = {
    "12.4": ("2024", "Tue_Feb_27_16:19:38_PST_2024", "V12.4.99", "cuda_12.4.r12.4/compiler.33961263_0"),
    # 13.0: read off a real 13.0 toolkit on the development machine.
    "13.0": ("2025", "Wed_Aug_20_01:58:59_PM_PDT_2025", "V13.0.88", "cuda_13.0.r13.0/compiler.36424714_0"),
    # 13.1: the layout of 13.0; the build date, patch number and build id are not verified.
    "13.1": ("2025", "Tue_Dec_02_05:08:56_PM_PST_2025", "V13.1.80", "cuda_13.1.r13.1/compiler.36836380_0"),
}

if __name__ == "__main__":
    home = os.path.dirname(os.path.dirname(os.path.realpath(sys.argv[0])))
    release = os.path.basename(home).removeprefix("cuda-") or "13.1"
    year, built, version, build = BUILDS.get(release, BUILDS["13.1"])
    if sys.argv[1:2] in (["--version"], ["-V"]):
        print("nvcc: NVIDIA (R) Cuda compiler driver")
        print(f"Copyright (c) 2005-{year} NVIDIA Corporation")
        print(f"Built on {built}")
        print(f"Cuda compilation tools, release {release}, {version}")
        print(f"Build {build}")
        sys.exit(0)
    print("nvcc fatal   : compiling is not available on the simulated node", file=sys.stderr)
    sys.exit(1)
