"""Simulated ``nvcc`` of a CUDA toolkit: ``nvcc --version`` / ``-V`` exactly as the real compiler driver
prints it on Linux, for the toolkit release this copy belongs to; compiling is not simulated.

The simulation installs this file once per toolkit with ``INSTALLED`` set to that toolkit's full nvcc
version (``"12.4.131"``); run from elsewhere it takes the release from its directory
(``/usr/local/cuda-12.4/bin`` -> the newest verified 12.4 update).
"""

import os
import sys

# nvcc version -> (copyright end year, "Built on" stamp, build id), each read off a real Linux
# `nvcc --version` in public captures (Windows builds print another "Built on" stamp and are not used).
# A release without a real banner here is refused by the simulation rather than made up.
BANNERS = {
    "11.5.119": ("2021", "Thu_Nov_18_09:45:30_PST_2021", "cuda_11.5.r11.5/compiler.30672275_0"),  # Ubuntu 22.04 apt
    "11.8.89": ("2022", "Wed_Sep_21_10:33:58_PDT_2022", "cuda_11.8.r11.8/compiler.31833905_0"),
    "12.0.140": ("2023", "Fri_Jan__6_16:45:21_PST_2023", "cuda_12.0.r12.0/compiler.32267302_0"),  # Ubuntu 24.04 apt
    "12.2.140": ("2023", "Tue_Aug_15_22:02:13_PDT_2023", "cuda_12.2.r12.2/compiler.33191640_0"),
    "12.4.99": ("2024", "Tue_Feb_27_16:19:38_PST_2024", "cuda_12.4.r12.4/compiler.33961263_0"),
    "12.4.131": ("2024", "Thu_Mar_28_02:18:24_PDT_2024", "cuda_12.4.r12.4/compiler.34097967_0"),
    "12.5.82": ("2024", "Thu_Jun__6_02:18:23_PDT_2024", "cuda_12.5.r12.5/compiler.34385749_0"),
    "12.6.85": ("2024", "Tue_Oct_29_23:50:19_PDT_2024", "cuda_12.6.r12.6/compiler.35059454_0"),
    "12.8.93": ("2025", "Fri_Feb_21_20:23:50_PST_2025", "cuda_12.8.r12.8/compiler.35583870_0"),
    "12.9.86": ("2025", "Tue_May_27_02:21:03_PDT_2025", "cuda_12.9.r12.9/compiler.36037853_0"),
    "13.0.88": ("2025", "Wed_Aug_20_01:58:59_PM_PDT_2025", "cuda_13.0.r13.0/compiler.36424714_0"),
    "13.1.115": ("2025", "Tue_Dec_16_07:23:41_PM_PST_2025", "cuda_13.1.r13.1/compiler.37061995_0"),
}
INSTALLED = None


def _key(version):
    return tuple(int(part) for part in version.split("."))


def resolve(version):
    """The full nvcc version a profile's ``12.4`` (newest verified update) or ``12.4.131`` names, or None."""
    version = str(version).strip()
    if version in BANNERS:
        return version
    updates = [v for v in BANNERS if v.rsplit(".", 1)[0] == version]
    return max(updates, key=_key) if updates else None


def banner(version):
    year, built, build = BANNERS[version]
    release = version.rsplit(".", 1)[0]
    return (f"nvcc: NVIDIA (R) Cuda compiler driver\nCopyright (c) 2005-{year} NVIDIA Corporation\n"
            f"Built on {built}\nCuda compilation tools, release {release}, V{version}\nBuild {build}\n")


def main(argv):
    version = INSTALLED
    if version is None:
        home = os.path.dirname(os.path.dirname(os.path.realpath(sys.argv[0])))
        version = resolve(os.path.basename(home).removeprefix("cuda-")) or max(BANNERS, key=_key)
    if argv[:1] in (["--version"], ["-V"]):
        sys.stdout.write(banner(version))
        return 0
    if not argv:
        sys.stderr.write("nvcc fatal   : No input files specified; use option --help for more information\n")
        return 1
    sys.stderr.write("nvcc fatal   : compiling is not available on the simulated node\n")
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
