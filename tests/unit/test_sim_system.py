"""The system overlay area (sim/overlays/system.py) and its shims: what a node says it is."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from clustereval.sim import overlays
from clustereval.sim.overlays import fabric, system, versions
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
                                                                              "fstype")])
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


def test_shim_modules_import_standalone():
    for name in ("uname.py", "ip.py", "systemd_detect_virt.py"):
        spec = importlib.util.spec_from_file_location(name[:-3], SHIMS / name)
        spec.loader.exec_module(importlib.util.module_from_spec(spec))
