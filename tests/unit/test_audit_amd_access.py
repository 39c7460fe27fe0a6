"""audit.amd.device_access: can the job user open /dev/kfd and every GPU's render node? Judged on what the
amd_devices probe prints for nodes the real profile code renders (the device nodes' modes and groups of
node.json's ``amd.device_access``, one render node per logical GPU), and on hand-made variants of it."""

from __future__ import annotations

from typing import Any

import pytest

from clustereval.parsers import ParseError
from clustereval.parsers.probe_amd_devices import (
    device_entry,
    drm_entry,
    group_row,
    identity,
    rccl_header_version,
    rccl_package_version,
)
from clustereval.sim.profile import load_profile, render_node
from tests.helpers import judge, probe

CHECK = "audit.amd.device_access"
GIDS = {"root": 0, "video": 44, "render": 109}
ROOT = "uid=0(root) gid=0(root) groups=0(root)"
EVAL = "uid=2000(eval) gid=2000(eval) groups=2000(eval),44(video),109(render)"


def node_state(profile: str, node: str, **faults: Any) -> dict[str, Any]:
    prof = load_profile(profile, nodes=4)
    if faults:
        prof["nodes"] = {node: {"faults": faults}}
    return render_node(prof, node)


def devices_text(state: dict[str, Any], *, me: str = ROOT, members: str = "", extra: list[str] = (),
                 drop: tuple[str, ...] = (), opened: dict[str, str] | None = None, end: bool = True) -> str:
    """What the amd_devices probe prints on this node: stat of /dev/kfd and /dev/dri/*, the audit account's own
    open test, each DRM node's PCI device, the render and video groups (``members`` in both) and the udev rule."""
    amd = state["amd"]
    access = amd["device_access"]
    nodes = [("/dev/kfd", "kfd", "1ff:0")]
    firsts = [d for d in amd["gpus"] if d["partition_id"] == 0]
    nodes += [(f"/dev/dri/card{k}", "card", f"e2:{k:x}") for k in range(1, len(firsts) + 1)]
    nodes += [(f"/dev/dri/renderD{128 + d['index']}", "render", f"e2:{128 + d['index']:x}") for d in amd["gpus"]]
    nodes = [n for n in nodes if n[0] not in drop]
    lines = [f"id={me}"]
    for path, kind, numbers in nodes:
        entry = access[kind]
        lines.append(f"dev=character special file|{int(entry['mode'], 8):o}|root|{entry['group']}|"
                     f"{GIDS[entry['group']]}|{numbers}|{path}")
    for path, _kind, _numbers in nodes:
        lines.append(f"open={path} {(opened or {}).get(path, 'rw' if me == ROOT else 'none')}")
    lines += [f"drm=renderD{128 + d['index']} {d['bdf']} amdgpu 1002:{d['device_id'][2:].upper()}"
              for d in amd["gpus"]]
    lines += [f"drm=card{k} {d['bdf']} amdgpu 1002:{d['device_id'][2:].upper()}" for k, d in enumerate(firsts, 1)]
    lines += [f"group=render:x:109:{members}", f"group=video:x:44:{members}",
              'udev=/etc/udev/rules.d/70-amdgpu.rules: KERNEL=="kfd", GROUP="render", MODE="0660"']
    lines += list(extra)
    if end:
        lines.append("end=ok")
    return "\n".join(lines) + "\n"


def probes(text: str, pci_gpus: int = 8) -> dict[str, dict[str, Any]]:
    return {**probe("amd_node", f"amd_pci_gpus={pci_gpus}\nmodule=amdgpu\nkernel=6.8.0-60-generic\nend=ok\n"),
            **probe("amd_devices", text)}


def run(text: str, pci_gpus: int = 8) -> dict[str, Any]:
    return judge(CHECK, probes(text, pci_gpus), subject="node1")


@pytest.mark.parametrize("profile", ["amd-mi300x", "amd-mi355x"])
def test_a_healthy_node_passes_audited_as_root(profile):
    got = run(devices_text(node_state(profile, "node1"), members="eval"))
    assert got["status"] == "pass" and got["value"] == 0
    assert got["summary"] == ("an unprivileged job user (the audit ran as root) can open /dev/kfd and the 8 GPU render "
                              "node(s) (through group render) (members: render: eval)")
    assert got["evidence"]["gpu_render_nodes"]["renderD128"] == "0000:05:00.0"


def test_the_audit_account_in_render_passes():
    got = run(devices_text(node_state("amd-mi300x", "node1"), me=EVAL))
    assert got["status"] == "pass" and got["summary"].startswith("the audit account eval can open /dev/kfd")
    assert got["evidence"]["job_user"] == "eval" and got["evidence"]["job_user_groups"] == ["eval", "render", "video"]


def test_the_audit_account_outside_render_fails_naming_the_devices():
    outside = "uid=2000(eval) gid=2000(eval) groups=2000(eval),44(video)"
    got = run(devices_text(node_state("amd-mi300x", "node1"), me=outside))
    assert got["status"] == "fail" and got["value"] == 9  # /dev/kfd and 8 render nodes
    assert got["summary"].startswith("the audit account eval cannot open 9 of the GPU device node(s): "
                                     "/dev/kfd 0660 root:render; /dev/dri/renderD128 0660 root:render (0000:05:00.0)")
    assert got["summary"].endswith("eval is not in render")


def test_a_named_job_user_is_judged_instead_of_the_audit_account():
    job = ["job_user=alice", "job_id=uid=3001(alice) gid=3001(alice) groups=3001(alice)"]
    got = run(devices_text(node_state("amd-mi300x", "node1"), extra=job))
    assert got["status"] == "fail" and got["summary"].startswith("job user alice cannot open 9")
    member = ["job_user=bob", "job_id=uid=3002(bob) gid=3002(bob) groups=3002(bob),109(render)"]
    assert run(devices_text(node_state("amd-mi300x", "node1"), extra=member))["status"] == "pass"


def test_an_acl_the_probe_saw_counts_for_the_audit_account():
    # udev's uaccess tag or setfacl: the mode says no, the account's own open test says rw
    outside = "uid=2000(eval) gid=2000(eval) groups=2000(eval)"
    state = node_state("amd-mi300x", "node1")
    opened = {p: "rw" for p in ["/dev/kfd", *(f"/dev/dri/renderD{128 + k}" for k in range(8))]}
    got = run(devices_text(state, me=outside, opened=opened))
    assert got["status"] == "pass" and "an ACL" in got["summary"]


def test_kfd_for_root_only_fails_even_audited_as_root():
    # amd-faults node4: /dev/kfd 0660 root:root, 64 logical GPUs (CPX) with a render node each
    state = render_node(load_profile("amd-faults", nodes=4), "node4")
    got = run(devices_text(state, members="eval"))
    assert got["status"] == "fail" and got["value"] == 1
    assert got["summary"] == ("an unprivileged job user (the audit ran as root) cannot open 1 of the GPU device "
                              "node(s): /dev/kfd 0660 root:root")
    assert len(got["evidence"]["gpu_render_nodes"]) == 64


def test_no_kfd_while_gpus_are_on_the_bus_fails():
    got = run(devices_text(node_state("amd-mi300x", "node1"), drop=("/dev/kfd",)))
    assert got["status"] == "fail" and got["summary"].startswith("no /dev/kfd while 8 AMD GPU(s) are on the PCI bus")


def test_a_gpu_without_its_render_node_fails():
    got = run(devices_text(node_state("amd-mi300x", "node1"), drop=("/dev/dri/renderD131",)))
    assert got["status"] == "fail" and "/dev/dri/renderD131 (0000:65:00.0) missing" in got["summary"]
    no_drm = "\n".join(line for line in devices_text(node_state("amd-mi300x", "node1")).splitlines()
                       if not line.startswith("drm=")) + "\n"
    assert run(no_drm)["status"] == "fail" and "no DRM render node belongs to" in run(no_drm)["summary"]


def test_world_read_write_nodes_warn():
    state = node_state("amd-mi300x", "node1", amd_device_access={"kfd": {"mode": "0666"}, "render": {"mode": "0666"}})
    got = run(devices_text(state))
    assert got["status"] == "warn" and got["value"] == 0
    assert got["summary"].startswith("9 GPU device node(s) are world read/write (/dev/kfd, /dev/dri/renderD128")


def test_another_devices_render_node_closed_to_the_job_user_warns():
    other = ["dev=character special file|600|root|root|0|e2:88|/dev/dri/renderD136",
             "drm=renderD136 0000:c1:00.0 ast 1a03:2000"]
    got = run(devices_text(node_state("amd-mi300x", "node1"), me=EVAL, extra=other))
    assert got["status"] == "warn" and "render node(s) of other devices" in got["summary"]
    assert "/dev/dri/renderD136 0600 root:root (ast)" in got["summary"]


def test_enroot_restricting_dev_without_the_gpu_nodes_warns():
    restrict = ["enroot_restrict_dev=yes", "enroot_mount=10-system.fstab /dev /dev"]
    got = run(devices_text(node_state("amd-mi300x", "node1"), extra=restrict))
    assert got["status"] == "warn" and "ENROOT_RESTRICT_DEV" in got["summary"]
    mounted = [*restrict, "enroot_mount=50-amd.fstab /dev/kfd /dev/kfd", "enroot_mount=50-amd.fstab /dev/dri /dev/dri"]
    assert run(devices_text(node_state("amd-mi300x", "node1"), extra=mounted))["status"] == "pass"
    assert run(devices_text(node_state("amd-mi300x", "node1"), extra=["enroot_restrict_dev=no"]))["status"] == "pass"


def test_a_node_without_amd_gpus_skips():
    got = run("id=uid=0(root) gid=0(root) groups=0(root)\nend=ok\n", pci_gpus=0)
    assert got["status"] == "skip" and "no AMD GPU" in got["summary"]


@pytest.mark.parametrize("text", [
    "id=" + ROOT + "\n",                                              # cut short: no end=ok
    "id=" + ROOT + "\ndev=character special file|66x|root|render|109|e2:80|/dev/kfd\nend=ok\n",  # mode not octal
    "id=" + ROOT + "\ndrm=renderD128 0000:05:00.0\nend=ok\n",          # a drm line without its fields
    "id=nonsense\nend=ok\n",                                           # not id's output
    "id=" + ROOT + "\njob_user=carol\njob_id=id: 'carol': no such user\nend=ok\n",  # an unknown job user
])
def test_unusable_probe_output_is_a_harness_error(text):
    assert run(text)["status"] == "error"


def test_the_readers():
    assert device_entry("character special file|660|root|render|109|1ff:0|/dev/kfd") == {
        "path": "/dev/kfd", "type": "char", "mode": 0o660, "owner": "root", "group": "render", "gid": 109,
        "major": 511, "minor": 0}
    assert identity("uid=1000(eval) gid=1000(eval) groups=1000(eval),44(video),109(render)")["groups"] == {
        1000: "eval", 44: "video", 109: "render"}
    assert identity("uid=1000 gid=1000 groups=1000,109(render)")["groups"] == {1000: "1000", 109: "render"}
    assert group_row("render:x:109:eval,alice") == {"name": "render", "gid": 109, "members": ["eval", "alice"]}
    assert drm_entry("renderD128 0000:05:00.0 amdgpu 1002:74A1")["device"] == "74a1"
    assert drm_entry("card0 - - -") == {"node": "card0", "bdf": None, "driver": None, "vendor": None, "device": None}
    for bad in ("a|b", "character special file|660|root|render|x|1ff:0|/dev/kfd"):
        with pytest.raises(ParseError):
            device_entry(bad)
    with pytest.raises(ParseError):
        group_row("render:x:")


def test_rccl_version_readers():
    header = ("#ifndef NCCL_H_\n#define NCCL_MAJOR 2\n#define NCCL_MINOR 26\n#define NCCL_PATCH 6\n"
              '#define NCCL_SUFFIX ""\n')
    assert rccl_header_version(header) == "2.26.6"
    assert rccl_header_version("#define NCCL_MAJOR 2\n#define NCCL_MINOR 26\n") is None
    assert rccl_package_version("2.26.6.70002-56~24.04") == "2.26.6"
    assert rccl_package_version("2.22.3.60400-43.el9") == "2.22.3"
    assert rccl_package_version("6.1.2-1") is None  # a distribution package versioned by its ROCm release


def test_the_sim_renders_the_device_nodes_groups_and_rccl_header(tmp_path):
    import os
    import stat

    from clustereval.sim.overlays import Tree, _submounts, amd_gpu

    prof = load_profile("amd-faults", nodes=4)
    prof["cluster"]["evaluator"] = {"user": "eval"}
    prof["nodes"]["node4"]["faults"]["amd_device_access"]["job_user_not_in"] = ["render"]
    settings_of = {n: {**prof["cluster"], **(prof["nodes"].get(n) or {})} for n in ("node1", "node3", "node4")}
    trees = {}
    for name, settings in settings_of.items():
        tree = Tree(cluster_dir=tmp_path)
        amd_gpu.render(settings, render_node(prof, name), tree)
        trees[name] = tree
    node1 = trees["node1"]
    assert "#define NCCL_MINOR 26\n#define NCCL_PATCH 6\n" in node1.files["/opt/rocm/include/rccl/rccl.h"][0]
    assert rccl_header_version(trees["node3"].files["/opt/rocm/include/rccl/rccl.h"][0]) == "2.20.5"
    assert "#define NCCL_VERSION_CODE 22606\n" in node1.files["/opt/rocm/include/rccl/rccl.h"][0]
    uevent = node1.files["/sys/class/drm/renderD128/device/uevent"][0]
    assert "DRIVER=amdgpu\n" in uevent and "PCI_ID=1002:74A1\n" in uevent and "PCI_SLOT_NAME=0000:05:00.0\n" in uevent
    groups = {line.split(":")[0]: line for line in node1.files["/etc/group"][0].splitlines()}
    assert groups["render"].endswith(":eval") and groups["video"].endswith(":eval")
    node4_groups = {line.split(":")[0]: line for line in trees["node4"].files["/etc/group"][0].splitlines()}
    assert not node4_groups["render"].endswith("eval") and node4_groups["video"].endswith(":eval")
    assert 'KERNEL=="kfd", GROUP="root", MODE="0660"' in trees["node4"].files["/etc/udev/rules.d/70-amdgpu.rules"][0]
    # real character devices in the node's overlay, the mounts' whiteouts marking where
    kfd = os.stat(tmp_path / "nodes" / "node4" / "overlay" / "dev" / "kfd")
    assert stat.S_ISCHR(kfd.st_mode) and stat.S_IMODE(kfd.st_mode) == 0o660 and kfd.st_gid == 0
    assert (os.major(kfd.st_rdev), os.minor(kfd.st_rdev)) == (511, 0)
    render = os.stat(tmp_path / "nodes" / "node1" / "overlay" / "dev" / "dri" / "renderD135")
    assert stat.S_ISCHR(render.st_mode) and os.minor(render.st_rdev) == 135
    assert sum(p.startswith("/dev/dri/renderD") for p in trees["node4"].hidden) == 64  # CPX: one per logical GPU
    # the overlay of /dev keeps the mounts below it (what a node's /dev/pts and /dev/shm are)
    mountinfo = tmp_path / "mountinfo"
    mountinfo.write_text("22 1 0:5 / /dev rw - devtmpfs udev rw\n23 22 0:21 / /dev/pts rw - devpts devpts rw\n"
                         "24 22 0:22 / /dev/shm rw - tmpfs tmpfs rw\n25 23 0:23 / /dev/pts/x rw - tmpfs t rw\n"
                         "26 1 0:24 / /dev2 rw - tmpfs t rw\n")
    assert _submounts("/dev", mountinfo) == ["/dev/pts", "/dev/shm"]


@pytest.mark.parametrize("fault", [{"kfd": {"mode": "666"}}, {"kfd": {"group": "wheel"}}, {"gpu": {}},
                                   {"job_user_not_in": ["docker"]}])
def test_bad_device_faults_are_refused(fault):
    from clustereval.sim import amd

    with pytest.raises(ValueError, match="amd_device_access"):
        amd.device_access({"amd_device_access": fault})
