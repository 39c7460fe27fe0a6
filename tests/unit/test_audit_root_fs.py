"""audit.os.root_filesystem: how full the root filesystem is, its size on a GPU node, a RAM-backed root."""

from __future__ import annotations

import pytest

from tests.helpers import judge, probe

CHECK = "audit.os.root_filesystem"
GIB = 2**30


def root(fstype: str = "ext4", source: str = "/dev/nvme0n1p2", size_gib: float = 1788, used_pct: float = 12,
         gpus: int = 8, options: str = "rw,relatime,errors=remount-ro", **extra: str) -> dict:
    """The probe's output for a root of that size and df Use% (ext4 keeps 5% for root, as df leaves out)."""
    size = int(size_gib * GIB)
    reserved = size // 20 if fstype == "ext4" else 0
    used = int((size - reserved) * used_pct / 100)
    lines = ["findmnt_rc=0", f"source={source}", f"fstype={fstype}", f"size_bytes={size}", f"used_bytes={used}",
             f"avail_bytes={size - reserved - used}", f"options={options}",
             *(f"{key}={value}" for key, value in extra.items()), f"nvidia_pci_gpus={gpus}", "end=ok"]
    return probe("os_root_filesystem", "\n".join(lines) + "\n")


def test_a_large_disk_root_with_room_passes_naming_type_size_and_use():
    result = judge(CHECK, root())
    assert result["status"] == "pass"
    assert result["summary"] == "/ (ext4 on /dev/nvme0n1p2, 1788 GiB, 12% used)"
    assert result["value"] == 12 and result["expected"]["max"] == 80


@pytest.mark.parametrize("pct, status", [(79, "pass"), (80, "pass"), (81, "warn"), (90, "warn"), (91, "fail"),
                                         (100, "fail")])
def test_fullness_warns_above_80_and_fails_above_90_percent(pct, status):
    result = judge(CHECK, root(used_pct=pct))
    assert result["status"] == status and result["value"] == pct
    if status != "pass":
        assert f"{pct}% full" in result["summary"]


def test_a_small_root_warns_on_a_gpu_node_only():
    small = judge(CHECK, root(size_gib=50, used_pct=40))
    assert small["status"] == "warn" and "only 50 GiB on a node with 8 GPUs" in small["summary"]
    assert "container images" in small["summary"]
    assert judge(CHECK, root(size_gib=50, used_pct=40, gpus=0))["status"] == "pass"


def test_small_and_full_names_both_and_fails():
    result = judge(CHECK, root(size_gib=50, used_pct=93))
    assert result["status"] == "fail"
    assert "93% full" in result["summary"] and "only 50 GiB" in result["summary"]


def test_a_tmpfs_root_warns_that_writes_take_memory():
    result = judge(CHECK, root(fstype="tmpfs", source="tmpfs", size_gib=256, used_pct=3,
                               options="rw,relatime,size=268435456k,mode=755,inode64"))
    assert result["status"] == "warn" and "RAM-backed" in result["summary"]
    assert result["evidence"]["ram_backed"] is True


def test_an_overlay_root_over_tmpfs_is_ram_backed_but_over_a_disk_is_not():
    overlay = {"fstype": "overlay", "source": "overlay", "size_gib": 512,
               "options": "rw,relatime,lowerdir=/run/rootfsbase,upperdir=/run/overlayfs,workdir=/run/ovlwork"}
    on_tmpfs = judge(CHECK, root(**overlay, upper_fstype="tmpfs"))
    assert on_tmpfs["status"] == "warn" and "overlay on tmpfs" in on_tmpfs["summary"]
    assert judge(CHECK, root(**overlay, upper_fstype="xfs"))["status"] == "pass"
    assert judge(CHECK, root(**overlay))["status"] == "pass"  # the upper layer not visible here (a container)


def test_a_ramfs_root_without_a_size_warns():
    text = ("findmnt_rc=0\nsource=rootfs\nfstype=rootfs\nsize_bytes=0\nused_bytes=0\navail_bytes=0\n"
            "options=rw,size=98304k\nnvidia_pci_gpus=8\nend=ok\n")
    result = judge(CHECK, probe("os_root_filesystem", text))
    assert result["status"] == "warn" and "no size limit" in result["summary"]


def test_findmnt_missing_skips():
    result = judge(CHECK, probe("os_root_filesystem", "missing=findmnt\n"))
    assert result["status"] == "skip" and "findmnt is not installed" in result["summary"]


@pytest.mark.parametrize("text", ["findmnt_rc=1\nfindmnt_output=findmnt: can't read /proc/self/mountinfo\n"
                                  "nvidia_pci_gpus=0\nend=ok\n",
                                  "findmnt_rc=0\nsource=/dev/sda1\nfstype=ext4\n",
                                  "findmnt_rc=0\nsource=/dev/sda1\nfstype=xfs\nsize_bytes=0\nused_bytes=0\n"
                                  "avail_bytes=0\noptions=rw\nnvidia_pci_gpus=0\nend=ok\n"])
def test_unreadable_or_truncated_output_is_an_error(text):
    assert judge(CHECK, probe("os_root_filesystem", text))["status"] == "error"
