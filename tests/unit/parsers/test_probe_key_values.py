"""The one key/value reader of our own probes, on what the probes printed on a simulated node."""

from __future__ import annotations

from clustereval.parsers import parse
from clustereval.parsers.probe_key_values import first, key_values

# access_identity on a Debian 12 node (the evaluation account is root; sudo is not installed).
IDENTITY = """uid=0
user=root
gid=0
home=/root
getent_user=root:x:0:0:root:/root:/bin/bash
tool_sudo=
tool_useradd=/usr/sbin/useradd
nss_passwd=files systemd
pam=pam_deny
pam=pam_unix
sudo_err=sudo: a password is required
daemons_checked=yes
"""
# gpustack_node's opening and closing lines on the same node (driver 580, eight H100 behind PEX switches).
GPUSTACK_NODE = """proc_version: NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.03  Release Build  \
(dvs-builder@U16-I3-B03-4-3)  Tue May 28 21:55:11 UTC 2024
module_version: 580.159.03
module: nvidia
module: nvidia_uvm
gdr_lib: \x20
iommu_group: 21 identity 0000:16:00.0 0000:17:01.0 0000:17:02.0 0000:19:00.0 0000:1a:00.0\x20
cmdline: console=ttyS0 quiet reboot=k panic=1 random.trust_cpu=1 swiotlb=noforce
sudo: root
end: ok
"""
# software_libs with srun's own lines under mpi_list= (Slurm 22.05, tab-indented plugin names).
SOFTWARE_LIBS = """nvidia_driver=loaded
nvidia_pci_gpus=0
nccl_lib=/usr/lib/x86_64-linux-gnu/libnccl.so.2.21.5
mpi_list=MPI plugin types are...
mpi_list=\tpmix
mpi_list=specific pmix plugin versions available: pmix_v4
nccl_h_MAJOR=2
"""


def test_equals_lines_keep_repeated_keys_in_order_and_strip_values():
    values = parse("probe-key-equals-value", IDENTITY)["values"]
    assert values["pam"] == ["pam_deny", "pam_unix"]
    assert values["tool_sudo"] == [""] and values["sudo_err"] == ["sudo: a password is required"]
    assert first(values, "getent_user") == "root:x:0:0:root:/root:/bin/bash"


def test_a_value_keeps_later_separators_and_a_tool_line_is_not_a_key():
    values = key_values(SOFTWARE_LIBS + "srun: error: Unable to contact slurm controller\nuser=a=b\n", "=")
    assert values["mpi_list"] == ["MPI plugin types are...", "pmix", "specific pmix plugin versions available: pmix_v4"]
    assert values["user"] == ["a=b"] and values["nccl_h_MAJOR"] == ["2"]
    assert not any(key.startswith("srun") for key in values)


def test_colon_lines_of_the_gpustack_probe():
    data = parse("probe-key-colon-value", GPUSTACK_NODE)
    values = data["values"]
    assert data["tool"] == "probe-key-colon-value" and data["complete"] is True
    assert values["module"] == ["nvidia", "nvidia_uvm"] and values["gdr_lib"] == [""]
    assert first(values, "proc_version").startswith("NVRM version: NVIDIA UNIX Open Kernel Module")
    assert values["iommu_group"] == ["21 identity 0000:16:00.0 0000:17:01.0 0000:17:02.0 0000:19:00.0 0000:1a:00.0"]
    assert first(values, "end") == "ok"


def test_keys_are_words_and_first_has_a_default():
    values = key_values("GCC version: gcc 12\n  kernel: 6.8.0\nnot a pair\n", ":")
    assert values == {"kernel": ["6.8.0"]}
    assert first(values, "arch") == "" and first(values, "arch", "absent") == "absent"
    assert key_values("", "=") == {} and parse("probe-key-equals-value", "")["values"] == {}
