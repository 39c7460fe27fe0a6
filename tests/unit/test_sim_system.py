"""The system overlay area (sim/overlays/system.py) and its shims: what a node says it is."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from clustereval.sim import overlays
from clustereval.sim.overlays import fabric, gpustack, system, versions
from clustereval.sim.profile import ProfileError, load_profile, node_settings, render_node

SHIMS = Path(system.__file__).resolve().parents[1] / "shims"


def _tree(profile: str, node: str) -> overlays.Tree:
    prof = load_profile(profile)
    tree = overlays.Tree()
    settings, state = node_settings(prof, node), render_node(prof, node)
    for area in (system, fabric, versions):
        area.render(settings, state, tree)
    return tree


def _text(tree: overlays.Tree, path: str) -> str:
    return tree.files[path][0]


def _shim(name: str, argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SHIMS / name), *argv], capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", **env})


def test_grace_numa_mode_shows_hbm_as_cpu_less_nodes():
    tree = _tree("audit-system", "node2")
    base = system.NUMA_CLASS
    assert _text(tree, f"{base}/node0/cpulist") == "0-71\n" and _text(tree, f"{base}/node2/cpulist") == "\n"
    assert _text(tree, f"{base}/node2/meminfo").startswith("Node 2 MemTotal:       193986560 kB\n")
    assert _text(tree, f"{base}/has_cpu") == "0-1\n" and _text(tree, f"{base}/has_memory") == "0-5\n"
    assert _text(tree, f"{base}/online") == "0-5\n"
    assert _text(tree, f"{base}/node0/cpumap").endswith("ffffffff,ffffffff\n")
    assert _text(tree, f"{base}/node0/distance") == "10 20 80 80 80 80\n"
    healthy = _tree("audit-system", "node4")  # CDMM: the GPUs' memory is the driver's, not the OS's
    assert f"{base}/node2/cpulist" not in healthy.files and _text(healthy, f"{base}/has_memory") == "0-1\n"
    assert f"{base}/node0/cpulist" not in _tree("reference", "node1").files  # unset: the machine's own


def test_storage_nic_without_carrier_and_its_roce_port_polling():
    tree = _tree("audit-system", "node2")
    net = "/sys/class/net/ens41np0"
    assert _text(tree, f"{net}/operstate") == "down\n" and _text(tree, f"{net}/carrier") == "0\n"
    assert _text(tree, f"{net}/flags") == "0x1003\n" and _text(tree, f"{net}/speed") == "-1\n"
    port = "/sys/class/infiniband/mlx5_8/ports/1"
    assert _text(tree, f"{port}/phys_state") == "2: Polling\n" and _text(tree, f"{port}/state") == "1: DOWN\n"
    assert _text(tree, f"{port}/link_layer") == "Ethernet\n"
    assert _text(tree, "/sys/class/infiniband/mlx5_8/fw_ver") == versions.DEFAULT_FW + "\n"
    healthy = _tree("reference", "node1")
    assert _text(healthy, f"{net}/operstate") == "up\n" and _text(healthy, f"{net}/speed") == "200000\n"
    assert "/sys/class/infiniband/mlx5_8/fw_ver" not in healthy.files  # an Ethernet NIC without RDMA: no port
    assert _text(healthy, "/sys/class/net/ibp26s0/type") == "32\n"  # the rails' IPoIB netdevs
    prof = load_profile("reference")
    assert system.links(node_settings(prof, "node1"), render_node(prof, "node1"))[f"{net}/device"] == \
        "/sys/bus/pci/devices/0000:9f:00.0"


def test_virtualization_shows_in_dmi_and_cpuinfo():
    assert _text(_tree("reference", "node1"), "/sys/class/dmi/id/sys_vendor") == "Supermicro\n"
    assert _text(_tree("audit-system", "node3"), "/sys/class/dmi/id/sys_vendor") == "QEMU\n"
    host = "processor\t: 0\nflags\t\t: fpu vmx hypervisor lahf_lm\n\n"
    assert "hypervisor" not in system.cpuinfo("none", "x86_64", host)
    assert system.cpuinfo("kvm", "x86_64", host.replace(" hypervisor", "")).count("hypervisor") == 1
    assert "CPU part\t: 0xd4f" in system.cpuinfo("none", "aarch64", host)


def test_kernel_release_and_a_named_pending_kernel(tmp_path):
    tree = _tree("audit-system", "node3")
    assert "/boot/vmlinuz-6.1.0-28-amd64" in tree.files and "/boot/vmlinuz-6.1.0-32-amd64" in tree.files
    assert "/usr/lib/modules/6.1.0-32-amd64/modules.dep" in tree.files
    settings = node_settings(load_profile("audit-system"), "node3")
    files = system.proc_files(settings)
    assert files["/proc/sys/kernel/osrelease"] == "6.1.0-28-amd64\n"
    assert files["/proc/sys/kernel/apparmor_restrict_unprivileged_userns"] == "1\n"


def test_proc_files_bind_over_existing_ones_and_rebuild_a_folder_lacking_one(tmp_path):
    proc = tmp_path / "proc"
    (proc / "sys" / "kernel" / "random").mkdir(parents=True)
    for name in ("perf_event_paranoid", "hostname"):
        (proc / "sys" / "kernel" / name).write_text("2\n")
    (proc / "cpuinfo").write_text("processor\t: 0\n")
    base = {"system": {"sysctls": {"kernel.perf_event_paranoid": 1}}}
    lines = system.proc_mounts(base, tmp_path / "n1", proc)
    assert f"mount --bind {tmp_path}/n1/proc/sys/kernel/perf_event_paranoid /proc/sys/kernel/perf_event_paranoid" \
        in lines
    rebuilt = {"system": {"sysctls": {"kernel.perf_event_paranoid": 1,
                                      "kernel.apparmor_restrict_unprivileged_userns": 1}}}
    lines = system.proc_mounts(rebuilt, tmp_path / "n2", proc)
    copy = tmp_path / "n2" / "proc-dirs" / "sys" / "kernel"
    assert lines[-1] == f"mount --rbind {copy} /proc/sys/kernel"
    assert f"mount --bind {proc}/sys/kernel/hostname {copy}/hostname" in lines  # the rest stay the kernel's
    assert f"mount --bind {tmp_path}/n2/proc/sys/kernel/perf_event_paranoid {copy}/perf_event_paranoid" in lines
    assert (copy / "apparmor_restrict_unprivileged_userns").read_text() == "1\n" and (copy / "random").is_dir()


@pytest.mark.parametrize("bad, key", [({"hypervisor": "kvm"}, "hypervisor"), ({"virtualization": "xen"},
                         "virtualization"), ({"netdevs": [{"name": "eno1", "link": "flapping"}]}, "link"),
                         ({"numa": {"nodes": [{"cpus": "0-x"}]}}, "cpus"), ({"spool_disk": {"fstype": "xfs"}},
                                                                              "fstype"),
                         ({"root_fs": {"fstype": "btrfs"}}, "root_fs.fstype"), ({"root_fs": {"size": 9}}, "root_fs"),
                         ({"root_fs": {"used_pct": 120}}, "used_pct")])
def test_malformed_system_sections_are_refused_naming_the_key(tmp_path, bad, key):
    path = tmp_path / "p.yml"
    path.write_text("extends: reference\nnodes:\n  node2:\n    system: " + json.dumps(bad) + "\n")
    with pytest.raises(ProfileError, match=key):
        load_profile(path)


def test_uname_and_systemd_detect_virt_shims(tmp_path):
    (tmp_path / "system.json").write_text(json.dumps({"virtualization": "none", "architecture": "aarch64",
                                                      "kernel_release": "6.1.0-32-arm64", "kernel_version": "#1 SMP"}))
    env = {"SIMNODE_ROOT": str(tmp_path)}
    assert _shim("uname.py", ["-rm"], env).stdout == "6.1.0-32-arm64 aarch64\n"
    assert _shim("uname.py", [], env).stdout == "Linux\n"
    everything = _shim("uname.py", ["-a"], env).stdout.split()
    assert everything[2:5] == ["6.1.0-32-arm64", "#1", "SMP"] and everything[-2:] == ["aarch64", "GNU/Linux"]
    bad = _shim("uname.py", ["-x"], env)
    assert bad.returncode == 1 and "invalid option" in bad.stderr  # the real tool's own message
    bare = _shim("systemd_detect_virt.py", ["--vm"], env)
    assert (bare.stdout, bare.returncode) == ("none\n", 1)
    (tmp_path / "system.json").write_text(json.dumps({"virtualization": "kvm"}))
    assert (_shim("systemd_detect_virt.py", [], env).stdout, _shim("systemd_detect_virt.py", ["-q"], env).stdout) \
        == ("kvm\n", "")
    assert _shim("systemd_detect_virt.py", ["--container"], env).returncode == 1


def test_ip_link_reads_the_nodes_sysfs(tmp_path):
    tree = _tree("audit-system", "node2")
    for path, (content, _mode) in tree.files.items():
        if path.startswith("/sys/class/net/"):
            target = tmp_path / path.removeprefix("/sys/")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(content)
    (tmp_path / "class/net/ens41np0/device").symlink_to("/sys/bus/pci/devices/0000:9f:00.0")
    env = {"SIMNODE_SYSFS": str(tmp_path)}
    links = json.loads(_shim("ip.py", ["-j", "-d", "link", "show"], env).stdout)
    storage = next(link for link in links if link["ifname"] == "ens41np0")
    assert storage["flags"] == ["NO-CARRIER", "BROADCAST", "MULTICAST", "UP"] and storage["operstate"] == "DOWN"
    assert (storage["parentbus"], storage["parentdev"]) == ("pci", "0000:9f:00.0")
    ipoib = next(link for link in links if link["ifname"] == "ibp26s0")
    assert ipoib["link_type"] == "infiniband" and ipoib["linkinfo"]["info_kind"] == "ipoib"
    text = _shim("ip.py", ["link", "show", "dev", "ens41np0"], env).stdout
    assert text.startswith("3: ens41np0: <NO-CARRIER,BROADCAST,MULTICAST,UP> mtu 9000 qdisc mq state DOWN ")
    missing = _shim("ip.py", ["link", "show", "eth0"], env)
    assert (missing.returncode, missing.stderr) == (1, 'Device "eth0" does not exist.\n')


def _root_view(tmp_path, root_fs):
    (tmp_path / "system.json").write_text(json.dumps({"root_fs": root_fs}))
    return {"SIMNODE_ROOT": str(tmp_path)}


def _host_root():
    """The machine's own root as system.root_fs would describe it: the shims must then print what the real
    tools print, byte for byte."""
    fields = next(line.split(" ") for line in Path("/proc/self/mountinfo").read_text().splitlines()
                  if line.split(" ")[4] == "/")
    sep = fields.index("-", 6)
    vfs = os.statvfs("/")
    return {"fstype": fields[sep + 1], "source": fields[sep + 2], "majmin": fields[2],
            "super_options": fields[sep + 3], "statvfs": {"frsize": vfs.f_frsize, "blocks": vfs.f_blocks,
                                                          "bfree": vfs.f_bfree, "bavail": vfs.f_bavail}}


def test_root_fs_view_is_a_statvfs_whose_df_use_is_the_profiles():
    view = system.root_fs({"system": {"root_fs": {"fstype": "ext4", "size_gib": 50, "used_pct": 93,
                                                  "source": "/dev/nvme0n1p2"}}})
    vfs = view["statvfs"]
    assert (view["source"], view["majmin"], vfs["blocks"]) == ("/dev/nvme0n1p2", "259:2", 50 * 2**30 // 4096)
    assert system.root_fs({"system": {"root_fs": {"fstype": "xfs"}}})["source"] == _host_root()["source"]
    used = vfs["blocks"] - vfs["bfree"]
    assert -(-used * 100 // (used + vfs["bavail"])) == 93 and vfs["bfree"] - vfs["bavail"] == vfs["blocks"] // 20
    assert system.root_fs({"system": {}}) is None
    tmpfs = system.root_fs({"system": {"root_fs": {"fstype": "tmpfs", "size_gib": 1}}})
    assert tmpfs["super_options"] == "rw,size=1048576k,mode=755,inode64" and tmpfs["source"] == "tmpfs"


def test_findmnt_shim_shows_the_nodes_root_in_every_layout(tmp_path):
    env = _root_view(tmp_path, system.root_fs({"system": {"root_fs": {"fstype": "xfs", "size_gib": 50,
                                                                      "used_pct": 93, "source": "/dev/nvme0n1p2"}}}))
    tree = json.loads(_shim("findmnt.py", ["-J", "-o", "TARGET,SOURCE,FSTYPE", "-T", "/tmp"], env).stdout)
    assert tree == {"filesystems": [{"target": "/", "source": "/dev/nvme0n1p2", "fstype": "xfs"}]}
    assert _shim("findmnt.py", ["-n", "-o", "SOURCE,FSTYPE", "-T", "/usr"], env).stdout == "/dev/nvme0n1p2 xfs\n"
    raw = _shim("findmnt.py", ["-n", "-r", "-b", "-o", "FSTYPE,SIZE,USED,AVAIL,USE%", "-M", "/"], env).stdout
    assert raw == "xfs 53687091200 49928994816 3758096384 93%\n"
    table = _shim("findmnt.py", ["-o", "TARGET,SIZE,USE%", "-T", "/"], env).stdout
    assert table == "TARGET  SIZE USE%\n/        50G  93%\n"  # SIZE at its width hint of 5
    (tmp_path / "system.json").write_text("{}")  # no root_fs: the real tool, unchanged
    assert _shim("findmnt.py", ["-n", "-o", "TARGET", "-T", "/"], env).stdout == "/\n"


@pytest.mark.parametrize("argv", [["-T", "/"], ["-J", "-T", "/tmp"], ["-D", "-T", "/"], ["-l", "-o", "TARGET,SIZE"],
                                  ["-P", "-o", "TARGET,SOURCE,SIZE"], ["-J", "-b", "-o", "TARGET,FSTYPE,SIZE"]])
def test_findmnt_shim_over_the_machines_own_root_prints_what_findmnt_prints(tmp_path, argv):
    env = _root_view(tmp_path, _host_root())
    real = subprocess.run(["/usr/bin/findmnt", *argv], capture_output=True, text=True)
    assert _shim("findmnt.py", argv, env).stdout == real.stdout


def test_df_shim_rewrites_the_row_of_root_only(tmp_path):
    env = _root_view(tmp_path, system.root_fs({"system": {"root_fs": {"fstype": "ext4", "size_gib": 50,
                                                                      "used_pct": 93, "source": "/dev/nvme0n1p2"}}}))
    assert _shim("df.py", ["-P", "/var"], env).stdout == (
        "Filesystem     1024-blocks     Used Available Capacity Mounted on\n"
        "/dev/nvme0n1p2    52428800 46320844   3486516      93% /\n")
    assert _shim("df.py", ["-hT", "/"], env).stdout == (
        "Filesystem     Type  Size  Used Avail Use% Mounted on\n/dev/nvme0n1p2 ext4   50G   45G  3.4G  93% /\n")
    assert _shim("df.py", ["--output=pcent,source", "/"], env).stdout == "Use% Filesystem\n 93% /dev/nvme0n1p2\n"
    dev = _shim("df.py", ["-P", "/dev"], env).stdout
    assert dev == subprocess.run(["/usr/bin/df", "-P", "/dev"], capture_output=True, text=True).stdout
    assert _shim("df.py", ["-B", "1M", "/"], env).stdout.startswith("Filesystem     1M-blocks")  # the real tool


@pytest.mark.parametrize("argv", [["--output=source,fstype,size,target", "/"], ["-T", "--output=source,target"],
                                  ["-a", "--output=source,size,target"]])
def test_df_shim_over_the_machines_own_root_prints_what_df_prints(tmp_path, argv):
    env = _root_view(tmp_path, _host_root())
    real = subprocess.run(["/usr/bin/df", *argv], capture_output=True, text=True)
    assert _shim("df.py", argv, env).stdout == real.stdout


def test_df_human_sizes_round_up_as_coreutils_does(monkeypatch):
    monkeypatch.syspath_prepend(str(SHIMS))  # as the shim launcher does: the shims share simnode
    spec = importlib.util.spec_from_file_location("df_shim", SHIMS / "df.py")
    df = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(df)
    assert [df.human(n, 1024) for n in (0, 1023, 1024, 1025, 10 * 2**30 - 1, 1788 * 2**30, 47 * 2**30 + 1)] == \
        ["0", "1023", "1.0K", "1.1K", "10G", "1.8T", "48G"]
    assert df.human(1023 * 2**30 + 1, 1024) == "1.0T" and df.human(1500, 1000) == "1.5k"


def test_shim_modules_import_standalone(monkeypatch):
    monkeypatch.syspath_prepend(str(SHIMS))  # the launcher's sys.path: the shim directory, nothing of clustereval
    for name in ("uname.py", "ip.py", "systemd_detect_virt.py", "findmnt.py", "df.py"):
        spec = importlib.util.spec_from_file_location(name[:-3], SHIMS / name)
        spec.loader.exec_module(importlib.util.module_from_spec(spec))


def test_gdrcopy_installs_its_library_and_loads_gdrdrv_without_a_device_node(tmp_path):
    prof = load_profile("reference")
    settings = {**node_settings(prof, "node1"), "gdrcopy": {"version": "2.4.4", "device": False}}
    tree = overlays.Tree()
    gpustack.render(settings, render_node(prof, "node1"), tree)
    assert {"/usr/local/lib/libgdrapi.so.2.4", "/usr/local/lib/libgdrapi.so.2"} <= set(tree.files)
    assert _text(tree, "/sys/module/gdrdrv/version") == "2.4\n" and "/dev/gdrdrv" not in tree.files
    for bad, key in (({"version": "2.4.4"}, "gdrcopy.device"), ({"version": "3.0", "device": False}, "version"),
                     ({"version": "2.4", "device": False, "udev": True}, "gdrcopy")):
        path = tmp_path / "p.yml"
        path.write_text("extends: reference\ncluster:\n  gdrcopy: " + json.dumps(bad) + "\n")
        with pytest.raises(ProfileError, match=key):
            load_profile(path)
